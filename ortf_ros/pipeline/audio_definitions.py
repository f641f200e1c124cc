"""The ``audio_common_msgs`` definitions of both layouts, as upstream has them.

Both upstream packages are named ``audio_common_msgs``, so no typestore holds both:
``register`` adds one layout's to a rosbags typestore, which is what the synthetic
recordings are written with and what the player publishes ``AudioStamped`` with. A
recording converted offline brings its own definitions (``decode.Decoder.register``);
``ROS2_LAYOUT`` is the text of ``ros/audio_common_msgs/msg`` (mgonzs13/audio_common,
built into the venv for live recording), ``OLDER_LAYOUT`` ros-drivers/audio_common's.
"""

from __future__ import annotations

from typing import Literal

from rosbags.typesys import get_types_from_msg
from rosbags.typesys.store import Typestore

AudioLayout = Literal["ros2", "older"]

ROS2_LAYOUT: dict[str, str] = {
    "audio_common_msgs/msg/AudioData": (
        "float32[] float32_data\nint32[] int32_data\nint32[] int24_data\nint16[] int16_data\n"
        "int8[] int8_data \nuint8[] uint8_data\n"
    ),
    "audio_common_msgs/msg/AudioInfo": "int32 format\nint32 channels\nint32 rate\nint32 chunk\n",
    "audio_common_msgs/msg/Audio": "audio_common_msgs/AudioData audio_data\naudio_common_msgs/AudioInfo info\n",
    "audio_common_msgs/msg/AudioStamped": "std_msgs/Header header\naudio_common_msgs/Audio audio\n",
}
"""mgonzs13/audio_common's messages (the ROS 2 layout), file by file."""

OLDER_LAYOUT: dict[str, str] = {
    "audio_common_msgs/msg/AudioData": "uint8[] data\n",
    "audio_common_msgs/msg/AudioInfo": (
        "uint8 channels       # Number of channels\n"
        "uint32 sample_rate   # Sampling rate [Hz]\n"
        "string sample_format # Audio format (e.g. S16LE)\n"
        "uint32 bitrate       # Amount of audio data per second [bits/s]\n"
        "string coding_format # Audio coding format (e.g. WAVE, MP3)\n"
    ),
    "audio_common_msgs/msg/AudioDataStamped": "std_msgs/Header header\naudio_common_msgs/AudioData audio\n",
}
"""ros-drivers/audio_common's messages (ROS 1, and its ports), file by file."""

AUDIO_STAMPED = "audio_common_msgs/msg/AudioStamped"


def register(store: Typestore, layout: AudioLayout = "ros2") -> None:
    """Add one layout's ``audio_common_msgs`` to ``store``."""
    definitions = ROS2_LAYOUT if layout == "ros2" else OLDER_LAYOUT
    for msgtype, text in definitions.items():
        store.register(get_types_from_msg(text, msgtype))
