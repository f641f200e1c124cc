"""The append-only logs a staged episode is recorded into: steps (``StepLog`` of ``StepRows``)
and native-rate samples (``SampleLog``), Arrow IPC streams that a crash can only cut short.

Split from ``staging`` (which says where an episode's files are, and who may write the
dataset): these say how its rows are written and read back.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from ortf_ros.errors import WriterError, describe
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest


def read_log(path: Path, batch_rows: int = 1024) -> Iterator[pa.RecordBatch]:
    """Every complete record of an append-only log, merged into batches of about ``batch_rows``
    rows (more only when one message holds more).

    A log holds one message per record, of one or many rows; each one read back as its
    own batch costs kilobytes of object overhead, so small ones are merged. Counting rows,
    not messages, keeps a commit's memory flat in episode length. A torn last message (a
    crash) ends the stream; a missing log is empty.
    """
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in _read_messages(path):
        pending.append(batch)
        rows += batch.num_rows
        if rows >= batch_rows:
            yield pa.concat_batches(pending)
            pending, rows = [], 0
    if pending:
        yield pa.concat_batches(pending)


def read_messages(path: Path) -> Iterator[pa.RecordBatch]:
    """Every complete record of an append-only log, one batch each (for records too large
    to merge: a point cloud each)."""
    return _read_messages(path)


def _read_messages(path: Path) -> Iterator[pa.RecordBatch]:
    if not path.exists():
        return
    with pa.OSFile(str(path), "rb") as source:
        try:
            reader = pa.ipc.open_stream(source)
        except (pa.ArrowInvalid, OSError):
            return
        while True:
            try:
                yield reader.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowInvalid, OSError):
                return


class StepLog:
    """Append-only log of steps or stream samples: an Arrow IPC stream, one message per batch.

    Each append is in the OS before the call returns, and whole or absent: a write that
    fails (a full disk, a file-size limit) is cut back off the file, so the log never
    holds a torn record that would end it early for the reader, and the caller can tell
    exactly what it holds. There is no end marker: a log ends where its last record does,
    as a crash leaves it.
    """

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.schema = schema
        self._size = 0  # bytes of whole records
        self._broken: str | None = None  # why nothing more can be appended
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        except OSError as exc:
            raise WriterError(f"{path}: cannot create the staging log: {describe(exc)}") from None
        try:
            self._write_all([schema.serialize()])
        except BaseException:
            os.close(self._fd)
            raise

    def append(self, batch: pa.RecordBatch) -> None:
        self.append_all([batch])

    def append_all(self, batches: Iterable[pa.RecordBatch]) -> None:
        """Append the batches as one: all of them, or none and a WriterError. They are
        serialized one at a time, so memory is one batch, however many there are."""
        self._write_all(batch.serialize() for batch in batches)

    def _write_all(self, messages: Iterable[pa.Buffer]) -> None:
        if self._broken is not None:
            raise WriterError(self._broken)
        size = self._size
        try:
            for message in messages:
                data = memoryview(message)
                while data:
                    written = os.write(self._fd, data)
                    data = data[written:]
                    size += written
        except BaseException as exc:
            self._cut_back(exc)
            if isinstance(exc, OSError):
                raise WriterError(f"{self.path}: cannot append to the staging log: {describe(exc)}") from None
            raise
        self._size = size

    def _cut_back(self, failure: BaseException) -> None:
        """Take a failed append's bytes off the file; if that fails too, refuse any more."""
        try:
            os.ftruncate(self._fd, self._size)
        except OSError as exc:
            self._broken = (
                f"{self.path}: an append failed ({describe(failure)}) and could not be cut off ({describe(exc)}); "
                "the records before it stay readable"
            )

    def close(self) -> None:
        """Idempotent: a failed commit closes the files again when the episode is discarded."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._broken = f"{self.path}: the staging log is closed"


class StepRows:
    """Steps on their way to the staging log, appended as one RecordBatch of several rows.

    A batch per step (30 a second and more) costs more in Arrow conversions and writes
    than the step is worth, so the writer appends them together, up to
    ``WriterConfig.step_batch`` at a time. Values come in as numpy vectors and indices;
    the constant columns are built once per batch.
    """

    def __init__(self, manifest: Manifest, schema: pa.Schema, episode_id: str) -> None:
        self.schema = schema
        self.action = slice(0, manifest.action_space.dim)
        self.state: dict[str, slice] = {}
        self._vector_columns = {"action": self.action}
        start = self.action.stop
        for name, component in manifest.observation_space.state.items():
            part = self.state[name] = slice(start, start + component.dim)
            self._vector_columns[layout.state_column(name)] = part
            start = part.stop
        self.width = start
        self.cameras = list(manifest.cameras)
        self.camera_set = set(self.cameras)
        self.streams = list(manifest.native_streams)
        self.stream_set = set(self.streams)
        self.aligned = list(manifest.alignment.streams) if manifest.alignment else []
        self.aligned_set = set(self.aligned)
        self._episode_id = episode_id
        self._timestamps: list[float] = []
        self._vectors: list[np.ndarray] = []
        self._indices: list[list[int]] = []  # step index, frame per camera, sample per stream (-1: none)
        self._errors: list[list[float]] = []  # alignment per aligned stream (NaN: none)

    def __len__(self) -> int:
        return len(self._timestamps)

    def add(
        self,
        step_index: int,
        timestamp: float,
        vectors: np.ndarray,
        frames: list[int],
        samples: list[int | None],
        alignment: list[float | None],
    ) -> None:
        """Hold one checked step: ``vectors`` float32 (action and state side by side)."""
        self._timestamps.append(timestamp)
        self._vectors.append(vectors)
        self._indices.append([step_index, *frames, *(-1 if i is None else i for i in samples)])
        self._errors.append([math.nan if e is None else e for e in alignment])

    def batch(self) -> pa.RecordBatch | None:
        """The steps held, as one batch (None if there are none); they stay held until
        ``clear``, so a batch that could not be appended is built again with the next."""
        rows = len(self._timestamps)
        if not rows:
            return None
        indices = np.array(self._indices, np.int64)
        errors = np.array(self._errors, np.float32).reshape(rows, len(self.aligned))
        vectors = np.stack(self._vectors)
        no = pa.array(np.zeros(rows, np.bool_))
        columns: dict[str, pa.Array] = {
            "episode_id": pa.array([self._episode_id] * rows, pa.string()),
            "timestamp": pa.array(np.array(self._timestamps)),
            "is_first": pa.array(indices[:, 0] == 0),
            "is_last": no,
            "is_terminal": no,
        }
        for name, part in self._vector_columns.items():
            flat = np.ascontiguousarray(vectors[:, part]).reshape(-1)
            columns[name] = pa.FixedSizeListArray.from_arrays(pa.array(flat), part.stop - part.start)
        names = ["step_index", *map(layout.image_column, self.cameras), *map(layout.stream_index_column, self.streams)]
        for column, values in zip(names, indices.T, strict=True):
            columns[column] = pa.array(values, mask=values < 0)
        for stream, values in zip(self.aligned, errors.T, strict=True):
            columns[layout.alignment_column(stream)] = pa.array(values, mask=np.isnan(values))
        return pa.RecordBatch.from_arrays([columns[name] for name in self.schema.names], schema=self.schema)

    def clear(self) -> None:
        """Forget the steps held: their batch is in the log."""
        self._timestamps, self._vectors, self._indices, self._errors = [], [], [], []


PENDING_SAMPLES_MAX = 1024
"""Native-rate samples appended to their log in batches: before any step that uses them,
and at the latest every this many samples (what a crash can lose of a stream that no step
has used yet)."""
_FLOAT32_MAX = float(np.finfo(np.float32).max)
# Row numbers of a batch, made once.
_ROW_NUMBERS = np.arange(PENDING_SAMPLES_MAX, dtype=np.int64)


class SampleLog:
    """A native-rate stream's samples on their way to its log.

    One Arrow batch per sample would cost more than the sample (at 1 kHz, more than the
    stream is worth), so samples wait in fixed-size column buffers and go to the log as
    one batch, cast to the float32 they are stored as. The log file is created by the
    first batch.
    """

    def __init__(self, path: Path, stream: str, schema: pa.Schema, dims: dict[str, int], episode_id: str) -> None:
        self.path = path
        self.stream = stream
        self.schema = schema
        self.dims = dims
        self.count = 0  # samples recorded, the next sample's index
        self.last_timestamp = -float("inf")  # the caller's clock, to refuse a sample from the past
        self._slices: list[slice] = []
        start = 0
        for dim in dims.values():
            self._slices.append(slice(start, start + dim))
            start += dim
        self._values = np.empty((PENDING_SAMPLES_MAX, start), np.float64)
        self._timestamps = np.empty(PENDING_SAMPLES_MAX, np.float64)
        self._stamp_ns: list[int | None] = []  # one per waiting sample: its length is their count
        self._receive_ns: list[int | None] = []
        self._episode_ids = pa.array([episode_id] * PENDING_SAMPLES_MAX, pa.string())  # sliced by each batch
        # False for a stream whose values may be non-finite by meaning (a laser scan's ranges)
        self.finite_only = True
        self._log: StepLog | None = None

    def add(
        self,
        timestamps: np.ndarray,
        rows: np.ndarray,
        stamp_ns: Sequence[int | None],
        receive_ns: Sequence[int | None],
        origin: float,
    ) -> int:
        """Keep consecutive samples, all or none; returns the index of the first.

        ``timestamps`` (float64) must be finite and not decrease, from the last one kept
        on. ``rows`` holds one float64 row per sample, the columns of ``dims`` side by
        side; values must be finite as float32 (NaN, inf or beyond float32 is refused).
        They are stored as ``timestamps - origin`` (the episode's clock). When the
        buffers fill, they go to the log with every whole batch of this call in one
        ``StepLog.append_all``; if that fails (WriterError), the log, the count and the
        buffers are as they were before the call.
        """
        count = len(timestamps)
        steps = np.diff(timestamps, prepend=self.last_timestamp)
        if not (np.isfinite(timestamps).all() and (steps >= 0).all()):
            bad = int(np.flatnonzero(~(np.isfinite(timestamps) & (steps >= 0)))[0])
            previous = timestamps[bad - 1] if bad else self.last_timestamp
            raise WriterError(
                f"stream {self.stream!r}: sample timestamp {timestamps[bad]} must be finite and not before "
                f"the previous ({previous})"
            )
        in_range = (np.abs(rows) <= _FLOAT32_MAX).all(axis=1)  # NaN fails too
        if self.finite_only and not in_range.all():
            row = rows[int(np.flatnonzero(~in_range)[0])]
            raise WriterError(
                f"stream {self.stream!r}: values must be finite, got "
                + ", ".join(f"{name} {row[part].tolist()}" for name, part in zip(self.dims, self._slices, strict=True))
            )
        stored = timestamps - origin
        waiting = len(self._stamp_ns)
        room = PENDING_SAMPLES_MAX - waiting
        if count < room:
            self._values[waiting : waiting + count] = rows
            self._timestamps[waiting : waiting + count] = stored
            self._stamp_ns += stamp_ns
            self._receive_ns += receive_ns
        else:
            # The buffers' free rows take the first samples (the waiting ones stay as they are).
            self._values[waiting:] = rows[:room]
            self._timestamps[waiting:] = stored[:room]
            whole = room + (count - room) // PENDING_SAMPLES_MAX * PENDING_SAMPLES_MAX
            try:
                self._log_file().append_all(self._full_batches(rows, stored, stamp_ns, receive_ns, room, whole))
            except WriterError as exc:
                raise WriterError(
                    f"stream {self.stream!r}: {count} samples not recorded, none of them kept "
                    f"({self.count} recorded before them): {exc}"
                ) from None
            rest = count - whole
            self._values[:rest] = rows[whole:]
            self._timestamps[:rest] = stored[whole:]
            self._stamp_ns = list(stamp_ns[whole:])
            self._receive_ns = list(receive_ns[whole:])
        first = self.count
        self.count += count
        self.last_timestamp = float(timestamps[-1])
        return first

    def _full_batches(
        self,
        rows: np.ndarray,
        stored: np.ndarray,
        stamp_ns: Sequence[int | None],
        receive_ns: Sequence[int | None],
        room: int,
        whole: int,
    ) -> Iterator[pa.RecordBatch]:
        """The full buffers (the waiting samples, then this call's first ``room``), then this
        call's samples up to ``whole`` in batches of ``PENDING_SAMPLES_MAX``, built as written."""
        waiting = len(self._stamp_ns)
        yield self._batch(
            self._values,
            self._timestamps,
            [*self._stamp_ns, *stamp_ns[:room]],
            [*self._receive_ns, *receive_ns[:room]],
            self.count - waiting,
        )
        for start in range(room, whole, PENDING_SAMPLES_MAX):
            end = start + PENDING_SAMPLES_MAX
            yield self._batch(
                rows[start:end], stored[start:end], stamp_ns[start:end], receive_ns[start:end], self.count + start
            )

    def flush(self) -> None:
        """Append the samples that wait as one batch; if that fails (WriterError) they still wait."""
        waiting = len(self._stamp_ns)
        if not waiting:
            return
        self._log_file().append(
            self._batch(self._values, self._timestamps, self._stamp_ns, self._receive_ns, self.count - waiting)
        )
        self._stamp_ns = []
        self._receive_ns = []

    def _batch(
        self,
        values: np.ndarray,
        timestamps: np.ndarray,
        stamp_ns: Sequence[int | None],
        receive_ns: Sequence[int | None],
        first: int,
    ) -> pa.RecordBatch:
        """The samples numbered from ``first``, one per entry of ``stamp_ns`` (the leading rows
        of ``values`` and ``timestamps``), as they are stored."""
        rows = len(stamp_ns)
        columns: dict[str, pa.Array] = {
            "episode_id": self._episode_ids.slice(0, rows),
            "sample_index": pa.array(_ROW_NUMBERS[:rows] + first),
            "timestamp": pa.array(timestamps[:rows]),
            "stamp_ns": pa.array(stamp_ns, pa.int64()),
            "receive_ns": pa.array(receive_ns, pa.int64()),
        }
        for (name, dim), part in zip(self.dims.items(), self._slices, strict=True):
            flat = values[:rows, part].astype(np.float32).reshape(-1)
            columns[name] = pa.FixedSizeListArray.from_arrays(pa.array(flat), dim)
        return pa.RecordBatch.from_arrays([columns[n] for n in self.schema.names], schema=self.schema)

    def append(self, batch: pa.RecordBatch) -> None:
        """Append rows as they are (another dataset's, when importing an episode)."""
        self._log_file().append(batch)

    def _log_file(self) -> StepLog:
        if self._log is None:
            self._log = StepLog(self.path, self.schema)
        return self._log

    def close(self) -> None:
        """Append what waits and close the log (closed even if the append fails)."""
        try:
            self.flush()
        finally:
            if self._log is not None:
                self._log.close()
