"""WAV files as the audio of an episode is stored in them: a 44-byte RIFF header (PCM, or
IEEE float for float samples), then the samples interleaved.

8-bit signed samples are stored +128 (WAV's 8-bit PCM is unsigned) and 24-bit ones in 3
bytes; ``file_samples`` gives back the values ``file_bytes`` was given.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ortf_ros.format.audio import SAMPLE_FORMATS, AudioFormat

WAVE_PCM, WAVE_FLOAT = 1, 3
HEADER = struct.Struct("<4sI4s4sIHHIIHH4sI")
WAV_MAX_DATA_BYTES = 0xFFFFFFFF - 36
"""The most samples' bytes a WAV file holds: its RIFF size is 32 bits (4 GiB)."""


def wav_header(fmt: AudioFormat, frames: int) -> bytes:
    """The 44-byte RIFF/WAVE header of ``frames`` frames of ``fmt``."""
    stored = SAMPLE_FORMATS[fmt.sample_format]
    block = stored.bit_depth // 8 * fmt.channels
    data = frames * block
    tag = WAVE_FLOAT if stored.is_float else WAVE_PCM
    return HEADER.pack(
        b"RIFF", 36 + data, b"WAVE", b"fmt ", 16, tag, fmt.channels, fmt.sample_rate,
        fmt.sample_rate * block, block, stored.bit_depth, b"data", data,
    )  # fmt: skip


def file_bytes(samples: np.ndarray, sample_format: str) -> bytes:
    """Samples as a WAV file stores them."""
    stored = SAMPLE_FORMATS[sample_format]
    values = samples.astype(stored.dtype, copy=False)
    if sample_format == "s8":
        return (values.astype(np.int16) + 128).astype(np.uint8).tobytes()
    if sample_format == "s24le":
        return values.astype("<i4").view(np.uint8).reshape(-1, 4)[:, :3].tobytes()
    return values.tobytes()


def packed_24bit(data: bytes | np.ndarray, *, big_endian: bool = False) -> np.ndarray:
    """Packed 3-byte samples, sign-extended into int32 (a WAV's 24-bit PCM; an ``AudioInfo``'s S24LE/S24BE)."""
    triples = np.frombuffer(data, np.uint8).reshape(-1, 3).astype(np.int32)
    low, high = (2, 0) if big_endian else (0, 2)
    values = triples[:, low] | (triples[:, 1] << 8) | (triples[:, high] << 16)
    result: np.ndarray = np.where(values >= 1 << 23, values - (1 << 24), values).astype("<i4")
    return result


def file_samples(data: bytes, sample_format: str) -> np.ndarray:
    """What ``file_bytes`` stored, as the samples it was given (for readers and tests)."""
    if sample_format == "s8":
        return (np.frombuffer(data, np.uint8).astype(np.int16) - 128).astype(np.int8)
    if sample_format == "s24le":
        return packed_24bit(data)
    return np.frombuffer(data, SAMPLE_FORMATS[sample_format].dtype)


@dataclass(frozen=True)
class WavInfo:
    """What a WAV file's header says: its format and how many frames its data holds."""

    is_float: bool
    channels: int
    sample_rate: int
    bit_depth: int
    frames: int
    data_offset: int  # where the samples begin


def wav_info(path: Path) -> WavInfo:
    """A WAV file's header read (ValueError naming what is wrong when it is none); the
    frames are those its data chunk really holds, whatever the header claims."""
    size = path.stat().st_size
    with path.open("rb") as f:
        riff = f.read(12)
        if len(riff) < 12 or riff[:4] != b"RIFF" or riff[8:] != b"WAVE":
            raise ValueError("not a RIFF/WAVE file")
        fmt: tuple[int, ...] | None = None
        while True:
            head = f.read(8)
            if len(head) < 8:
                raise ValueError("no data chunk")
            kind, length = head[:4], struct.unpack("<I", head[4:])[0]
            if kind == b"fmt ":
                fmt = struct.unpack("<HHIIHH", f.read(16))
                f.seek(length - 16 + (length & 1), os.SEEK_CUR)
            elif kind == b"data":
                if fmt is None:
                    raise ValueError("data chunk before the fmt chunk")
                tag, channels, rate, _, block, bits = fmt
                if block <= 0 or channels <= 0:
                    raise ValueError(f"fmt chunk: {channels} channels, {block} bytes per frame")
                available = min(length, size - f.tell())
                return WavInfo(tag == WAVE_FLOAT, channels, rate, bits, available // block, f.tell())
            else:
                f.seek(length + (length & 1), os.SEEK_CUR)


def read_wav(path: Path, sample_format: str) -> np.ndarray:
    """Every sample of a WAV file this module wrote, interleaved, as it was given
    (``file_samples``); the whole file at once, for readers that want it so."""
    info = wav_info(path)
    block = SAMPLE_FORMATS[sample_format].bit_depth // 8 * info.channels
    with path.open("rb") as f:
        f.seek(info.data_offset)
        data = f.read(info.frames * block)
    return file_samples(data, sample_format)
