"""A microphone in an ORTF dataset: its manifest sensor, its sample format, its files.

The spec's microphone sensor is ``{"name", "type": "audio", "sample_rate", "channels",
"codec", "bit_depth"}``; ortf_ros adds ``sample_format`` (how the samples are stored:
``s16le``, ``f32le``...), ``container`` (``wav``), ``source`` (the topic) and the layout the
messages had. Each episode has a file per microphone (``layout.audio_path``) holding every
sample published, in order, and a chunk table beside it (``layout.audio_chunks_path``):
a row per message, its times and where its samples are in the file, so that any sample
maps to episode time and a dropped message shows as a gap (``AUDIO_CHUNK_COLUMNS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.sensors import Sensor

AUDIO_SENSOR_TYPE = "audio"


@dataclass(frozen=True)
class AudioFormat:
    """How a microphone's samples are laid out: ``sample_format`` one of ``SAMPLE_FORMATS``
    (or, for the older message layout, the GStreamer name its ``AudioInfo`` gave: see
    ``pipeline.streams.audio.stored_format``), channels interleaved."""

    sample_format: str
    channels: int
    sample_rate: int


@dataclass(frozen=True)
class SampleFormat:
    """A stored sample format: the dtype samples are held in, and how a WAV file stores them."""

    dtype: np.dtype[Any]
    bit_depth: int  # bits per sample in the file
    is_float: bool


SAMPLE_FORMATS: dict[str, SampleFormat] = {
    "u8": SampleFormat(np.dtype(np.uint8), 8, False),
    "s8": SampleFormat(np.dtype(np.int8), 8, False),  # (WAV's 8-bit PCM is unsigned: stored +128)
    "s16le": SampleFormat(np.dtype("<i2"), 16, False),
    "s24le": SampleFormat(np.dtype("<i4"), 24, False),  # held in int32, as int24_data sends it; 3 bytes in the file
    "s32le": SampleFormat(np.dtype("<i4"), 32, False),
    "f32le": SampleFormat(np.dtype("<f4"), 32, True),
    "f64le": SampleFormat(np.dtype("<f8"), 64, True),
}
"""Every sample format a microphone may have, by name (FFmpeg's spelling)."""

AUDIO_CHUNK_SCHEMA = pa.schema(
    [
        pa.field("chunk_index", pa.int64(), nullable=False),  # the message's place among the episode's
        pa.field("first_sample", pa.int64(), nullable=False),  # its first frame's index in the file
        pa.field("sample_count", pa.int64(), nullable=False),  # its frames (samples per channel)
        # The message's time on the step clock (s): its header stamp or receive time, as the
        # mapping's ``time`` says; by ROS convention its first sample's capture time (some
        # drivers stamp when the buffer was read: the stamps are kept as they were).
        pa.field("timestamp", pa.float64(), nullable=False),
        pa.field("time_ns", pa.int64(), nullable=False),  # that time, in ns, as the time source gave it
        pa.field("stamp_ns", pa.int64()),  # the header stamp; null without a header
        pa.field("receive_ns", pa.int64(), nullable=False),
        pa.field("gap_samples", pa.int64(), nullable=False),  # frames missing before it, by the times
    ]
)
"""The chunk table of an episode's audio file."""


CONTAINERS = {"wav": "wav", "flac": "mp4", "aac": "mp4"}
"""The mapping's ``codec`` -> the file it makes: WAV (PCM as published), MP4 (FLAC, lossless; AAC)."""
FLAC_FORMATS = frozenset({"u8", "s8", "s16le", "s24le"})
"""What FLAC keeps exactly: integers of at most 24 bits (FFmpeg's encoder)."""


def audio_sensor(name: str, fmt: AudioFormat, *, source: str, layout: str, codec: str = "wav") -> Sensor:
    """The manifest's microphone; ``layout``: the message type the topic had; ``codec`` the
    mapping's (wav, flac, aac)."""
    stored = SAMPLE_FORMATS[fmt.sample_format]
    return Sensor(
        name=name,
        type=AUDIO_SENSOR_TYPE,
        extra={
            "sample_rate": fmt.sample_rate,
            "channels": fmt.channels,
            "codec": f"pcm_{fmt.sample_format}" if codec == "wav" else codec,
            "bit_depth": stored.bit_depth,
            "sample_format": fmt.sample_format,
            "container": CONTAINERS[codec],
            "source": source,
            "message_type": layout,
        },
    )


def audio_codec(sensor: Sensor) -> str:
    """The mapping's codec a microphone was stored with: wav, flac or aac."""
    codec = str(sensor.extra.get("codec", ""))
    return codec if codec in ("flac", "aac") else "wav"


def audio_relative(sensor: Sensor, chunk_id: int, episode_index: int) -> str:
    """Where a microphone's episode file is in the dataset (``.wav``, or ``.mp4`` for FLAC and AAC)."""
    return layout.audio_path(sensor.name, chunk_id, episode_index, f".{CONTAINERS[audio_codec(sensor)]}")


def audio_sensors(manifest: Manifest) -> list[Sensor]:
    """The dataset's microphones, in manifest order (the first's file is ``audio_file``)."""
    return [s for s in manifest.sensors if s.type == AUDIO_SENSOR_TYPE]


def sensor_format(sensor: Sensor) -> AudioFormat:
    """The format a microphone's file stores."""
    extra = sensor.extra
    return AudioFormat(str(extra["sample_format"]), int(extra["channels"]), int(extra["sample_rate"]))
