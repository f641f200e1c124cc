"""An episode's audio as FLAC or AAC in MP4 (the mapping's ``codec``), and any audio file read back.

The recorder always writes the WAV first, a chunk at a time (``audio_files``); when the
episode ends it is encoded into the MP4 a block at a time and removed. FLAC keeps the
samples exactly (integers up to 24 bits: ``format.audio.FLAC_FORMATS``; 8-bit ones go as
16-bit of the same values, 24-bit ones in the top bits of 32, as FFmpeg's encoder takes
them); AAC is lossy, for size: float samples scaled to [-1, 1).

``AudioSamples`` reads a file's samples in order, whatever its codec, as the values that
were published (AAC's as floats): what playback and the tests read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np

from ortf_ros.errors import WriterError
from ortf_ros.format.audio import SAMPLE_FORMATS, AudioFormat
from ortf_ros.io import atomic
from ortf_ros.io.wav import file_samples, wav_info

BLOCK_FRAMES = 16384  # frames read, converted and encoded at a time
_LAYOUTS = {1: "mono", 2: "stereo"}


def _layout(channels: int) -> str:
    return _LAYOUTS.get(channels, f"{channels}c")


def _flac_input(samples: np.ndarray, sample_format: str) -> tuple[np.ndarray, str]:
    """Samples as FFmpeg's FLAC encoder takes them, the same values when decoded back (``_flac_output``)."""
    if sample_format == "s24le":
        return samples.astype(np.int32) << 8, "s32"
    return samples.astype(np.int16), "s16"


def _flac_output(decoded: np.ndarray, sample_format: str) -> np.ndarray:
    values = decoded >> 8 if sample_format == "s24le" else decoded
    return values.astype(SAMPLE_FORMATS[sample_format].dtype)


def _aac_input(samples: np.ndarray, sample_format: str) -> tuple[np.ndarray, str]:
    stored = SAMPLE_FORMATS[sample_format]
    if stored.is_float:
        return samples.astype(np.float32), "flt"
    scale = float(1 << (stored.bit_depth - 1))
    offset = scale if sample_format == "u8" else 0.0
    return ((samples.astype(np.float64) - offset) / scale).astype(np.float32), "flt"


def encode(wav: Path, fmt: AudioFormat, codec: str, target: Path) -> None:
    """The staged WAV ``wav`` (of ``fmt``) as ``codec`` (flac or aac) in the MP4 ``target``, atomically."""
    info = wav_info(wav)
    block = SAMPLE_FORMATS[fmt.sample_format].bit_depth // 8 * fmt.channels
    convert = _flac_input if codec == "flac" else _aac_input

    def produce(tmp: Path) -> None:
        options = {"strict": "experimental"} if codec == "flac" else {}  # (FLAC in MP4)
        with av.open(str(tmp), "w", format="mp4", options=options) as container, wav.open("rb") as source:
            stream: Any = container.add_stream(codec, rate=fmt.sample_rate)
            stream.layout = _layout(fmt.channels)
            if codec == "flac":  # (the encoder's input as given, or PyAV would resample 24-bit to 16)
                stream.format = "s32" if fmt.sample_format == "s24le" else "s16"
            source.seek(info.data_offset)
            pts = 0
            while pts < info.frames:
                count = min(BLOCK_FRAMES, info.frames - pts)
                values, kind = convert(file_samples(source.read(count * block), fmt.sample_format), fmt.sample_format)
                frame = av.AudioFrame.from_ndarray(values.reshape(1, -1), format=kind, layout=_layout(fmt.channels))
                frame.sample_rate, frame.pts = fmt.sample_rate, pts
                for packet in stream.encode(frame):
                    container.mux(packet)
                pts += count
            for packet in stream.encode(None):
                container.mux(packet)

    try:
        atomic.write_with(target, produce)
    except (OSError, av.FFmpegError) as exc:
        raise WriterError(f"{target}: cannot encode the episode's audio as {codec} ({exc})") from exc


class AudioSamples:
    """A microphone's episode file read in order: ``read(count)`` gives its next ``count``
    frames' samples (interleaved), as published (AAC: floats)."""

    def __init__(self, path: Path, fmt: AudioFormat) -> None:
        self.path = path
        self.format = fmt
        self._block = SAMPLE_FORMATS[fmt.sample_format].bit_depth // 8 * fmt.channels
        self._wav = path.suffix == ".wav"
        self._buffer = np.zeros(0, SAMPLE_FORMATS[fmt.sample_format].dtype)
        if self._wav:
            self._file = path.open("rb")
            self._file.seek(wav_info(path).data_offset)
        else:
            self._container = av.open(str(path))
            stream = self._container.streams.audio[0]
            self._codec = stream.codec_context.name
            self._frames = (_interleaved(frame) for frame in self._container.decode(stream))

    def read(self, count: int) -> np.ndarray:
        """The next ``count`` frames (fewer at the end of the file)."""
        if self._wav:
            return file_samples(self._file.read(count * self._block), self.format.sample_format)
        wanted = count * self.format.channels
        parts = [self._buffer]
        have = len(self._buffer)
        while have < wanted:
            decoded = next(self._frames, None)
            if decoded is None:
                break
            values = decoded if self._codec != "flac" else _flac_output(decoded, self.format.sample_format)
            parts.append(values)
            have += len(values)
        joined = np.concatenate(parts) if len(parts) > 1 else parts[0]
        self._buffer = joined[wanted:]
        return joined[:wanted]

    def close(self) -> None:
        if self._wav:
            self._file.close()
        else:
            self._container.close()

    def __enter__(self) -> AudioSamples:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


AAC_SLACK_FRAMES = 2048
"""How far an AAC file's duration may be from the samples encoded: it is counted in whole
1024-sample frames, and the encoder's priming is cut off by the edit list."""


@dataclass(frozen=True)
class AudioProbe:
    """What an MP4 audio file holds: its codec, rate, channels and frames (FLAC's decoded and
    counted; AAC's from the stream's duration)."""

    codec: str
    sample_rate: int
    channels: int
    frames: int


def probe_audio(path: Path) -> AudioProbe:
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        name = stream.codec_context.name
        if name == "flac":
            frames = sum(frame.samples for frame in container.decode(stream))
        else:
            frames = round(float((stream.duration or 0) * stream.time_base) * stream.rate) if stream.time_base else 0
        return AudioProbe(name, stream.rate, stream.codec_context.channels, frames)


def _interleaved(frame: av.AudioFrame) -> np.ndarray:
    """A decoded frame's samples interleaved, as published: a planar format (AAC decodes to
    ``fltp``) holds a row per channel, a packed one (FLAC's ``s16``/``s32``) one row of them all."""
    array = frame.to_ndarray()
    return array.T.reshape(-1) if frame.format.is_planar else array.reshape(-1)
