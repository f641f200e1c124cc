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

import numpy as np
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

PORTAUDIO_FORMATS: dict[int, tuple[str, str]] = {
    1: ("f32le", "float32_data"),  # paFloat32
    2: ("s32le", "int32_data"),  # paInt32
    4: ("s24le", "int24_data"),  # paInt24
    8: ("s16le", "int16_data"),  # paInt16
    16: ("s8", "int8_data"),  # paInt8
    32: ("u8", "uint8_data"),  # paUInt8
}
"""The ROS 2 layout's ``AudioInfo.format`` (PortAudio's codes): the sample format and the
``AudioData`` array that holds such samples."""

AUDIO_DATA_ARRAYS: dict[str, type[np.generic]] = {
    "float32_data": np.float32,
    "int32_data": np.int32,
    "int24_data": np.int32,
    "int16_data": np.int16,
    "int8_data": np.int8,
    "uint8_data": np.uint8,
}
"""The ROS 2 layout's ``AudioData`` arrays and their element types, in upstream order."""


def portaudio_format(sample_format: str) -> tuple[int, str]:
    """The ``AudioInfo.format`` code and the ``AudioData`` array of a sample format
    (64-bit floats, which the layout has no array for, as float32's)."""
    wanted = "f32le" if sample_format == "f64le" else sample_format
    return next((code, field) for code, (name, field) in PORTAUDIO_FORMATS.items() if name == wanted)


def audio_data_arrays(samples: np.ndarray, field: str) -> dict[str, np.ndarray]:
    """The fields of an ``AudioData`` (ROS 2 layout): ``samples`` in ``field``, every other array empty."""
    arrays = {name: np.zeros(0, dtype) for name, dtype in AUDIO_DATA_ARRAYS.items()}
    arrays[field] = samples.astype(AUDIO_DATA_ARRAYS[field])
    return arrays


def register(store: Typestore, layout: AudioLayout = "ros2") -> None:
    """Add one layout's ``audio_common_msgs`` to ``store``."""
    definitions = ROS2_LAYOUT if layout == "ros2" else OLDER_LAYOUT
    for msgtype, text in definitions.items():
        store.register(get_types_from_msg(text, msgtype))


_SEPARATOR = "=" * 80 + "\n"


def embedded(layout: AudioLayout, msgtype: str) -> str:
    """``msgtype``'s definition followed by the layout's other types, as rosbag2 and MCAP
    store a definition with those it uses (``MSG: pkg/Type`` sections)."""
    definitions = ROS2_LAYOUT if layout == "ros2" else OLDER_LAYOUT
    others = [name for name in definitions if name != msgtype]
    return definitions[msgtype] + "".join(
        f"{_SEPARATOR}MSG: {name.replace('/msg/', '/')}\n{definitions[name]}" for name in others
    )


def known_layouts() -> dict[str, tuple[tuple[str, str], ...]]:
    """``decode.KNOWN_LAYOUTS`` entries for a recording that brings no definitions (a
    rosbag2 sqlite3 file before Iron): each audio type in the layouts that have it, the
    older one's first where both do (its ``AudioData`` is what ROS 1 drivers' ports publish)."""
    older = "ros-drivers/audio_common's (AudioData uint8[] data, AudioInfo sample_format)"
    ros2 = "mgonzs13/audio_common's (AudioStamped: AudioData arrays, AudioInfo format code)"
    found: dict[str, tuple[tuple[str, str], ...]] = {}
    for msgtype in {*ROS2_LAYOUT, *OLDER_LAYOUT}:
        candidates = [(older, "older"), (ros2, "ros2")]
        found[msgtype] = tuple(
            (label, embedded(layout, msgtype))  # type: ignore[arg-type]
            for label, layout in candidates
            if msgtype in (OLDER_LAYOUT if layout == "older" else ROS2_LAYOUT)
        )
    return found
