"""The scene's microphone (``TeleopConfig.audio``): samples that tell where they came
from, and their messages in either audio_common_msgs layout.

A microphone publishes ``audio_samples`` on ``TOPIC_AUDIO``, a message of
``audio_chunk`` frames each: ``audio_common_msgs/AudioStamped`` (the ROS 2 layout), or
the older layout's ``AudioData`` bytes with one latched ``AudioInfo`` on
``TOPIC_AUDIO_INFO``; the messages listed in ``audio_dropped`` are not recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ortf_ros.io.wav import file_bytes
from ortf_ros.pipeline.audio_definitions import PORTAUDIO_FORMATS, audio_data_arrays, portaudio_format
from ortf_ros.synthetic.typestore import MessageFactory

if TYPE_CHECKING:
    from ortf_ros.synthetic.scene import TeleopConfig

AUDIO_FORMAT_CODES = {name: code for code, (name, _) in PORTAUDIO_FORMATS.items()}  # (the ROS 2 layout's formats)
AUDIO_GSTREAMER_NAMES = {"f32le": "F32LE", "s32le": "S32LE", "s24le": "S24LE", "s16le": "S16LE", "s8": "S8", "u8": "U8"}
SAMPLE_BITS = {"f32le": 32, "s32le": 32, "s24le": 24, "s16le": 16, "s8": 8, "u8": 8}


def audio_samples(config: TeleopConfig, seq: int) -> np.ndarray:
    """Audio message ``seq``'s samples, interleaved (``audio_chunk`` frames of
    ``audio_channels``), in the dtype of ``audio_format``: a function of each sample's
    index in the stream, so a file's samples tell where they came from."""
    count = config.audio_chunk * config.audio_channels
    index = np.arange(seq * count, (seq + 1) * count, dtype=np.int64)
    base = (index * 37) % 65536 - 32768  # int16's range
    fmt = config.audio_format
    if fmt == "f32le":
        return (base / 32768.0).astype(np.float32)
    if fmt == "s32le":
        return (base * 65536 + index % 65536).astype(np.int32)
    if fmt == "s24le":
        return (base * 256 + index % 256).astype(np.int32)
    if fmt == "s8":
        return (base >> 8).astype(np.int8)
    if fmt == "u8":
        return ((base >> 8) + 128).astype(np.uint8)
    return base.astype(np.int16)


def audio_message(factory: MessageFactory, seq: int, stamp: int) -> Any:
    """Audio message ``seq``: ``audio_samples``, as AudioStamped or as AudioData bytes."""
    config = factory.config
    samples = audio_samples(config, seq)
    if config.audio == "older":
        packed = file_bytes(samples, "s24le") if config.audio_format == "s24le" else samples.tobytes()  # (3 bytes)
        return factory.new("audio_common_msgs/msg/AudioData", data=np.frombuffer(packed, np.uint8))
    code, field = portaudio_format(config.audio_format)
    arrays = audio_data_arrays(samples, field)
    info = factory.new(
        "audio_common_msgs/msg/AudioInfo",
        format=code,
        channels=config.audio_channels,
        rate=config.audio_rate_hz,
        chunk=config.audio_chunk,
    )
    data = factory.new("audio_common_msgs/msg/AudioData", **arrays)
    audio = factory.new("audio_common_msgs/msg/Audio", audio_data=data, info=info)
    header = factory.header(stamp, "microphone", seq)
    return factory.new("audio_common_msgs/msg/AudioStamped", header=header, audio=audio)


def audio_info_message(factory: MessageFactory, seq: int, stamp: int) -> Any:
    """The older layout's AudioInfo (published once, latched)."""
    config = factory.config
    return factory.new(
        "audio_common_msgs/msg/AudioInfo",
        channels=config.audio_channels,
        sample_rate=config.audio_rate_hz,
        sample_format=AUDIO_GSTREAMER_NAMES[config.audio_format],
        bitrate=config.audio_rate_hz * config.audio_channels * SAMPLE_BITS[config.audio_format],
        coding_format="wave",
    )
