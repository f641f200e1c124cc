"""An episode's audio files: a WAV per microphone, written as the chunks come, and its chunk table.

The WAV holds every sample published, in order, as published (PCM; 8-bit signed samples
are stored +128, as WAV's 8-bit PCM is unsigned; 24-bit ones in 3 bytes): nothing is
inserted where a message was dropped, since "the samples in the file are the samples
published". Where each message's samples are and when they were recorded is in the chunk
table (``format.audio.AUDIO_CHUNK_SCHEMA``), which says where a gap is: a reader that
wants a sample-aligned signal inserts ``gap_samples`` of silence there itself.

Memory is a chunk at a time: samples go to the file as they come; the chunk rows are
logged to an Arrow stream in the staging directory, a block at a time, their times on
the writer's clock, and become the Parquet table when the episode ends
(``AudioFile.finish``), their times then counted from the episode's time origin (its
first step or native sample, which audio does not move; noted beside the log as soon as
it is known, for ``finish_staged``). The commit then only moves the two files
(``commit_audio``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ortf_ros.dataset.audio_codecs import encode
from ortf_ros.errors import WriterError
from ortf_ros.format import layout
from ortf_ros.format.audio import (
    AUDIO_CHUNK_SCHEMA,
    SAMPLE_FORMATS,
    AudioFormat,
    audio_codec,
    audio_relative,
    sensor_format,
)
from ortf_ros.format.sensors import Sensor
from ortf_ros.format.units import NS
from ortf_ros.io import atomic
from ortf_ros.io.wav import HEADER, WAV_MAX_DATA_BYTES, file_bytes, wav_header

ROWS_PER_BLOCK = 64  # chunk rows held before they are logged: 4 s of 1024-sample chunks at 16 kHz
GAP_FACTOR = 1.5
"""A message whose time is this many of the previous message's durations after it follows a gap."""


class AudioFile:
    """One microphone's audio of the episode being recorded, in the staging directory.

    The chunk rows are logged every ``ROWS_PER_BLOCK`` chunks, after the samples they
    describe were flushed to the WAV: a killed recorder leaves a log whose every row's
    samples are in the file, which ``finish_staged`` makes a committed pair of."""

    def __init__(self, wav: Path, fmt: AudioFormat, codec: str = "wav") -> None:
        self.wav = wav
        self.format = fmt
        self.codec = codec  # the committed file's: wav, or flac / aac encoded from the WAV at the end
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
        block = SAMPLE_FORMATS[self.format.sample_format].bit_depth // 8 * self.format.channels
        if (self.frames + frames) * block > WAV_MAX_DATA_BYTES:
            minutes = self.frames / self.format.sample_rate / 60
            raise WriterError(
                f"{self.wav}: a WAV file holds at most 4 GiB of samples, which this episode's audio reached "
                f"after {minutes:.0f} min: end episodes sooner"
            )
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
        row = (self.chunks, first, frames, timestamp, time_ns, stamp_ns, receive_ns, gap)
        for column, value in zip(self._rows.values(), row, strict=True):
            column.append(value)
        self.chunks += 1
        self.frames += frames
        if len(self._rows["chunk_index"]) >= ROWS_PER_BLOCK:
            self._flush_rows()
        return first

    def set_origin(self, origin: float) -> None:
        """The episode's time 0 on the writer's clock, which the chunks' times will count
        from; noted in the staging directory (``finish_staged`` reads it)."""
        if self.origin is not None:
            return
        self.origin = origin
        try:
            atomic.write_json(origin_note(self.wav), {"origin": origin})
        except OSError as exc:
            raise WriterError(f"{origin_note(self.wav)}: cannot write ({exc.strerror or exc})") from exc

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

    def copy_from(self, audio: Path, table: Path) -> None:
        """Stage another dataset's episode audio instead (``importing.import_episode``)."""
        self.close()
        self.wav.unlink()
        shutil.copyfile(audio, self.wav.with_suffix(audio.suffix))
        shutil.copyfile(table, self.table_path)
        self._copied = True

    def finish(self, origin: float) -> None:
        """Close, and write the chunk table (``origin``: the episode's time 0, if no step or
        sample said it yet)."""
        self.set_origin(origin)
        self.close()
        if not self._copied:
            write_chunk_table(self.wav, origin if self.origin is None else self.origin)
            encode_staged(self.wav, self.format, self.codec)

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


def origin_note(wav: Path) -> Path:
    """Where a staged WAV's episode time origin is noted once known."""
    return wav.with_suffix(".origin.json")


def write_chunk_table(wav: Path, origin: float, limit_frames: int | None = None) -> int:
    """The logged rows as the Parquet chunk table beside ``wav``, their times counted from
    ``origin`` (only the rows whose samples are all in the first ``limit_frames`` frames,
    when given), a block at a time; the frames they cover."""
    covered = 0

    def produce(tmp: Path) -> None:
        nonlocal covered
        with pq.ParquetWriter(tmp, AUDIO_CHUNK_SCHEMA) as writer:
            for batch in _logged(chunk_log(wav)):
                ends = (pc.add(batch["first_sample"], batch["sample_count"])).to_pylist()
                whole = len(ends) if limit_frames is None else sum(end <= limit_frames for end in ends)
                if whole:
                    seconds = pc.subtract(batch["timestamp"], pa.scalar(origin, pa.float64()))
                    index = AUDIO_CHUNK_SCHEMA.get_field_index("timestamp")
                    field = AUDIO_CHUNK_SCHEMA.field(index)
                    writer.write_batch(batch.set_column(index, field, seconds).slice(0, whole))
                    covered = ends[whole - 1]
                if whole < len(ends):
                    break

    try:
        atomic.write_with(chunk_table(wav), produce)
    except OSError as exc:
        raise WriterError(f"{chunk_table(wav)}: cannot write the chunk table ({exc.strerror or exc})") from exc
    chunk_log(wav).unlink(missing_ok=True)
    return covered


def encode_staged(wav: Path, fmt: AudioFormat, codec: str) -> None:
    """The finished staged WAV as the MP4 of ``codec`` beside it, and removed (nothing for wav)."""
    if codec != "wav" and wav.exists():
        encode(wav, fmt, codec, wav.with_suffix(".mp4"))
        wav.unlink()


def finish_staged(wav: Path, fmt: AudioFormat, codec: str) -> None:
    """A staged WAV a killed writer left (its header's sizes 0, its chunk rows in the log)
    made whole: the table of the logged chunks, the file cut to their samples, its header
    written, then encoded as ``codec``. Nothing to do for one that was finished."""
    if chunk_table(wav).exists() or not wav.exists():
        encode_staged(wav, fmt, codec)  # (killed between the table and the encoding)
        return
    block = SAMPLE_FORMATS[fmt.sample_format].bit_depth // 8 * fmt.channels
    frames = (wav.stat().st_size - HEADER.size) // block
    note = origin_note(wav)
    origin = float(json.loads(note.read_text())["origin"]) if note.exists() else 0.0  # (none: no step, nothing kept)
    covered = write_chunk_table(wav, origin, max(frames, 0))
    with wav.open("r+b") as f:
        f.truncate(HEADER.size + covered * block)
        f.seek(0)
        f.write(wav_header(fmt, covered))
        f.flush()
        os.fsync(f.fileno())
    encode_staged(wav, fmt, codec)


def episode_audio(dataset_root: Path, chunk_id: int, file_index: int, sensor: Sensor) -> tuple[Path, Path]:
    """A committed episode's audio file and chunk table of the microphone ``sensor``."""
    return (
        dataset_root / audio_relative(sensor, chunk_id, file_index),
        dataset_root / layout.audio_chunks_path(sensor.name, chunk_id, file_index),
    )


def staged_audio(directory: Path, microphone: str) -> Path:
    """Where a staged episode keeps a microphone's WAV."""
    return directory / "audio" / f"{microphone}.wav"


def commit_audio(
    staged_dir: Path, root: Path, microphones: Sequence[Sensor], chunk_id: int, episode_index: int
) -> dict[str, tuple[str, int]]:
    """Each microphone's staged WAV and chunk table moved to their places in the dataset
    (every microphone has both, empty when it delivered nothing; a killed writer's made
    whole first: ``finish_staged``); per microphone, its WAV's path and the rows of its
    chunk table. A file already moved (a commit rolled forward) stays."""
    paths = {}
    for sensor in microphones:
        microphone, codec = sensor.name, audio_codec(sensor)
        wav = staged_audio(staged_dir, microphone)
        finish_staged(wav, sensor_format(sensor), codec)
        relative = audio_relative(sensor, chunk_id, episode_index)
        moves = [
            (wav.with_suffix(PurePosixPath(relative).suffix), root / relative),
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


def discard_audio(root: Path, microphones: Sequence[Sensor], chunk_id: int, episode_index: int) -> None:
    """An interrupted commit's audio files removed."""
    for sensor in microphones:
        for path in episode_audio(root, chunk_id, episode_index, sensor):
            path.unlink(missing_ok=True)
