"""The scene's microphone (``TeleopConfig.audio``): samples that tell where they came
from (their messages, in either audio_common_msgs layout: ``sensor_messages``).

A microphone publishes ``audio_samples`` on ``TOPIC_AUDIO``, a message of
``audio_chunk`` frames each: ``audio_common_msgs/AudioStamped`` (the ROS 2 layout), or
the older layout's ``AudioData`` bytes with one latched ``AudioInfo`` on
``TOPIC_AUDIO_INFO``; the messages listed in ``audio_dropped`` are not recorded.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ortf_ros.pipeline.streams.audio_definitions import PORTAUDIO_FORMATS

AUDIO_FORMAT_CODES = {name: code for code, (name, _) in PORTAUDIO_FORMATS.items()}  # (the ROS 2 layout's formats)
AUDIO_GSTREAMER_NAMES = {"f32le": "F32LE", "s32le": "S32LE", "s24le": "S24LE", "s16le": "S16LE", "s8": "S8", "u8": "U8"}


class AudioStream(Protocol):
    """What the samples depend on: a ``TeleopConfig`` (named by its parts, since the
    config, which checks its audio format against ``AUDIO_FORMAT_CODES``, sits above this)."""

    @property
    def audio_format(self) -> str: ...
    @property
    def audio_channels(self) -> int: ...
    @property
    def audio_chunk(self) -> int: ...


SAMPLE_BITS = {"f32le": 32, "s32le": 32, "s24le": 24, "s16le": 16, "s8": 8, "u8": 8}


def audio_samples(config: AudioStream, seq: int) -> np.ndarray:
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
