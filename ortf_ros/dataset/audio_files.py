"""An episode's audio files: a WAV per microphone, written as the chunks come, and its chunk table.

The WAV holds every sample published, in order, as published (PCM; 8-bit signed samples
are stored +128, as WAV's 8-bit PCM is unsigned; 24-bit ones in 3 bytes): nothing is
inserted where a message was dropped, since "the samples in the file are the samples
published". Where each message's samples are and when they were recorded is in the chunk
table (``format.audio.AUDIO_CHUNK_SCHEMA``), which says where a gap is: a reader that
wants a sample-aligned signal inserts ``gap_samples`` of silence there itself.

Memory is a chunk at a time: samples go to the file as they come; the chunk rows are
logged to an Arrow stream in the staging directory, a block at a time, and become the
Parquet table when the episode ends (``AudioFile.finish``), once the episode's time
origin is known (its first step or native sample, which audio does not move). The
commit then only moves the two files (``commit_audio``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ortf_ros.errors import WriterError
from ortf_ros.format import layout
from ortf_ros.format.audio import AUDIO_CHUNK_SCHEMA, SAMPLE_FORMATS, AudioFormat
from ortf_ros.io import atomic

NS = 1_000_000_000
ROWS_PER_BLOCK = 64  # chunk rows held before they are logged: 4 s of 1024-sample chunks at 16 kHz
_WAVE_PCM, _WAVE_FLOAT = 1, 3
_HEADER = struct.Struct("<4sI4s4sIHHIIHH4sI")
GAP_FACTOR = 1.5
"""A message whose time is this many of the previous message's durations after it follows a gap."""


def wav_header(fmt: AudioFormat, frames: int) -> bytes:
    """The 44-byte RIFF/WAVE header of ``frames`` frames of ``fmt``."""
    stored = SAMPLE_FORMATS[fmt.sample_format]
    block = stored.bit_depth // 8 * fmt.channels
    data = frames * block
    tag = _WAVE_FLOAT if stored.is_float else _WAVE_PCM
    return _HEADER.pack(
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


def file_samples(data: bytes, sample_format: str) -> np.ndarray:
    """What ``file_bytes`` stored, as the samples it was given (for readers and tests)."""
    if sample_format == "s8":
        return (np.frombuffer(data, np.uint8).astype(np.int16) - 128).astype(np.int8)
    if sample_format == "s24le":
        triples = np.frombuffer(data, np.uint8).reshape(-1, 3).astype(np.int32)
        values = triples[:, 0] | (triples[:, 1] << 8) | (triples[:, 2] << 16)
        return np.where(values >= 1 << 23, values - (1 << 24), values).astype("<i4")
    return np.frombuffer(data, SAMPLE_FORMATS[sample_format].dtype)


class AudioFile:
    """One microphone's audio of the episode being recorded, in the staging directory.

    The chunk rows wait in memory until the episode's time origin is known (its first step
    or native sample: ``set_origin``; audio does not set it), then are logged with their
    time on the step clock every ``ROWS_PER_BLOCK`` chunks, after the samples they
    describe were flushed to the WAV: a killed recorder leaves a log whose every row's
    samples are in the file, which ``finish_staged`` makes a committed pair of."""

    def __init__(self, wav: Path, fmt: AudioFormat) -> None:
        self.wav = wav
        self.format = fmt
        self.frames = 0
        self.chunks = 0
        self.origin: float | None = None
        self._rows: dict[str, list[float | None]] = {f.name: [] for f in AUDIO_CHUNK_SCHEMA}
        self._previous: tuple[int, int] | None = None  # the last chunk's time and frames
        wav.parent.mkdir(parents=True, exist_ok=True)
        self._file = wav.open("wb")
        self._file.write(wav_header(fmt, 0))
        self._log: pa.ipc.RecordBatchStreamWriter | None = None
        self._copied = False

    @property
    def log_path(self) -> Path:
        return chunk_log(self.wav)

    @property
    def table_path(self) -> Path:
        return chunk_table(self.wav)

    def add(self, samples: np.ndarray, timestamp: float, *, time_ns: int, stamp_ns: int | None, receive_ns: int) -> int:
        """A message's samples (interleaved, in the format's dtype), appended; the index of
        its first frame in the file. ``timestamp``: its time on the writer's clock (as the
        steps' are given), ``time_ns`` the same time in ns, as its stream's time source gave it."""
        frames = len(samples) // self.format.channels
        first = self.frames
        try:
            self._file.write(file_bytes(samples, self.format.sample_format))
        except OSError as exc:
            raise WriterError(f"{self.wav}: cannot write audio ({exc.strerror or exc})") from exc
        gap = 0
        if self._previous is not None:
            before_ns, before_frames = self._previous
            duration_ns = before_frames * NS / self.format.sample_rate
            if duration_ns and time_ns - before_ns > GAP_FACTOR * duration_ns:
                gap = max(0, round((time_ns - before_ns) * self.format.sample_rate / NS) - before_frames)
        self._previous = (time_ns, frames)
        seconds = timestamp if self.origin is None else timestamp - self.origin  # (``set_origin`` shifts the first)
        row = (self.chunks, first, frames, seconds, time_ns, stamp_ns, receive_ns, gap)
        for column, value in zip(self._rows.values(), row, strict=True):
            column.append(value)
        self.chunks += 1
        self.frames += frames
        if self.origin is not None and len(self._rows["chunk_index"]) >= ROWS_PER_BLOCK:
            self._flush_rows()
        return first

    def set_origin(self, origin: float) -> None:
        """The episode's time 0 on the writer's clock: the rows that waited for it are put on the step clock."""
        if self.origin is not None:
            return
        self.origin = origin
        self._rows["timestamp"] = [t - origin for t in self._rows["timestamp"]]  # type: ignore[operator]

    def _flush_rows(self) -> None:
        if not self._rows["chunk_index"]:
            return
        try:
            self._file.flush()  # (the samples before the rows that point at them)
            columns = [pa.array(v, f.type) for v, f in zip(self._rows.values(), AUDIO_CHUNK_SCHEMA, strict=True)]
            if self._log is None:
                self._log = pa.ipc.new_stream(str(self.log_path), AUDIO_CHUNK_SCHEMA)
            self._log.write_batch(pa.record_batch(columns, schema=AUDIO_CHUNK_SCHEMA))
        except OSError as exc:
            raise WriterError(f"{self.log_path}: cannot log audio chunks ({exc.strerror or exc})") from exc
        for column in self._rows.values():
            column.clear()

    def close(self) -> None:
        """The rows logged, the WAV's sizes written in its header, the file synced."""
        if self._file.closed:
            return
        try:
            self._flush_rows()
            if self._log is not None:
                self._log.close()
            self._file.seek(0)
            self._file.write(wav_header(self.format, self.frames))
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise WriterError(f"{self.wav}: cannot write audio ({exc.strerror or exc})") from exc
        finally:
            self._file.close()

    def copy_from(self, wav: Path, table: Path) -> None:
        """Stage another dataset's episode audio instead (``DatasetWriter.import_episode``)."""
        self.close()
        shutil.copyfile(wav, self.wav)
        shutil.copyfile(table, self.table_path)
        self._copied = True

    def finish(self, origin: float) -> None:
        """Close, and write the chunk table (``origin``: the episode's time 0, if no step or
        sample said it yet)."""
        self.set_origin(origin)
        self.close()
        if not self._copied:
            write_chunk_table(self.wav)

    def abandon(self) -> None:
        with contextlib.suppress(OSError, WriterError):
            self.close()


def chunk_log(wav: Path) -> Path:
    """Where a staged WAV's chunk rows are logged while it is written."""
    return wav.with_suffix(".chunks.arrows")


def chunk_table(wav: Path) -> Path:
    """The chunk table beside a WAV."""
    return wav.with_suffix(".chunks.parquet")


def _logged(log: Path) -> Iterator[pa.RecordBatch]:
    """The log's whole batches; a batch a killed writer left half written ends it."""
    if not log.exists():
        return
    try:
        with pa.ipc.open_stream(str(log)) as reader:
            yield from reader
    except (OSError, pa.ArrowInvalid):
        return


def write_chunk_table(wav: Path, limit_frames: int | None = None) -> int:
    """The logged rows as the Parquet chunk table beside ``wav`` (only those whose samples
    are all in the first ``limit_frames`` frames, when given), a block at a time; the
    frames they cover."""
    covered = 0

    def produce(tmp: Path) -> None:
        nonlocal covered
        with pq.ParquetWriter(tmp, AUDIO_CHUNK_SCHEMA) as writer:
            for batch in _logged(chunk_log(wav)):
                ends = (pc.add(batch["first_sample"], batch["sample_count"])).to_pylist()
                whole = len(ends) if limit_frames is None else sum(end <= limit_frames for end in ends)
                if whole:
                    writer.write_batch(batch.slice(0, whole))
                    covered = ends[whole - 1]
                if whole < len(ends):
                    break

    try:
        atomic.write_with(chunk_table(wav), produce)
    except OSError as exc:
        raise WriterError(f"{chunk_table(wav)}: cannot write the chunk table ({exc.strerror or exc})") from exc
    chunk_log(wav).unlink(missing_ok=True)
    return covered


def finish_staged(wav: Path, fmt: AudioFormat) -> None:
    """A staged WAV a killed writer left (its header's sizes 0, its chunk rows in the log)
    made whole: the table of the logged chunks, the file cut to their samples, its header
    written. Nothing to do for one that was finished."""
    if chunk_table(wav).exists() or not wav.exists():
        return
    block = SAMPLE_FORMATS[fmt.sample_format].bit_depth // 8 * fmt.channels
    frames = (wav.stat().st_size - _HEADER.size) // block
    covered = write_chunk_table(wav, max(frames, 0))
    with wav.open("r+b") as f:
        f.truncate(_HEADER.size + covered * block)
        f.seek(0)
        f.write(wav_header(fmt, covered))
        f.flush()
        os.fsync(f.fileno())


def episode_audio(dataset_root: Path, chunk_id: int, file_index: int, microphone: str) -> tuple[Path, Path]:
    """A committed episode's WAV and chunk table of ``microphone``."""
    return (
        dataset_root / layout.audio_path(microphone, chunk_id, file_index),
        dataset_root / layout.audio_chunks_path(microphone, chunk_id, file_index),
    )


def staged_audio(directory: Path, microphone: str) -> Path:
    """Where a staged episode keeps a microphone's WAV."""
    return directory / "audio" / f"{microphone}.wav"


def commit_audio(
    staged_dir: Path, root: Path, microphones: Mapping[str, AudioFormat], chunk_id: int, episode_index: int
) -> dict[str, tuple[str, int]]:
    """Each microphone's staged WAV and chunk table moved to their places in the dataset
    (every microphone has both, empty when it delivered nothing; a killed writer's made
    whole first: ``finish_staged``); per microphone, its WAV's path and the rows of its
    chunk table. A file already moved (a commit rolled forward) stays."""
    paths = {}
    for microphone, fmt in microphones.items():
        wav = staged_audio(staged_dir, microphone)
        finish_staged(wav, fmt)
        relative = layout.audio_path(microphone, chunk_id, episode_index)
        moves = [
            (wav, root / relative),
            (wav.with_suffix(".chunks.parquet"), root / layout.audio_chunks_path(microphone, chunk_id, episode_index)),
        ]
        for source, target in moves:
            if source.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                source.replace(target)
                atomic.fsync_dir(target.parent)
        table = root / layout.audio_chunks_path(microphone, chunk_id, episode_index)
        paths[microphone] = (relative, pq.ParquetFile(table).metadata.num_rows)
    return paths


def discard_audio(root: Path, microphones: list[str], chunk_id: int, episode_index: int) -> None:
    """An interrupted commit's audio files removed."""
    for microphone in microphones:
        (root / layout.audio_path(microphone, chunk_id, episode_index)).unlink(missing_ok=True)
        (root / layout.audio_chunks_path(microphone, chunk_id, episode_index)).unlink(missing_ok=True)


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
                return WavInfo(tag == _WAVE_FLOAT, channels, rate, bits, available // block, f.tell())
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
