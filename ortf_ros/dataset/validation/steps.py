"""Rules on the step tables (data/chunk-NNN/steps.parquet), streamed in record batches.

Each episode's rows are folded into a small running summary as they stream past
(flag counts, last timestamp, largest frame index, first problem per rule), so memory
is bounded by the batch size and the number of episodes in a chunk, never by how long
an episode is or how many chunks there are. Batches are split into runs of consecutive rows of one episode and
every rule is a vectorised numpy test on a run.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.dataset.validation.findings import Finding, finding
from ortf_ros.dataset.validation.tables import Episode
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.schema import step_schema, vector_columns

BATCH_ROWS = 65536
SAMPLE_ROWS = 3  # rows quoted in a message
FLAGS = ("is_first", "is_last", "is_terminal")
Arrays = Mapping[str, np.ndarray]


def _same_type(actual: pa.DataType, expected: pa.DataType) -> bool:
    """Type equality that ignores the list item's name and nullability, which writers choose freely."""
    if pa.types.is_fixed_size_list(actual) and pa.types.is_fixed_size_list(expected):
        return bool(actual.list_size == expected.list_size and actual.value_type == expected.value_type)
    return bool(actual == expected)


def _null_fill(kind: pa.DataType) -> pa.Scalar:
    """What a null reads as: a value that the row rules reject, so nulls are never silently valid."""
    if pa.types.is_fixed_size_list(kind):
        return pa.scalar([math.nan] * kind.list_size, kind)
    if pa.types.is_boolean(kind):
        return pa.scalar(False)
    if pa.types.is_integer(kind):
        return pa.scalar(-1, kind)
    if pa.types.is_floating(kind):
        return pa.scalar(math.nan, kind)
    return pa.scalar("", kind)


@dataclass
class _Flag:
    """Rows where a boolean column is set: how many, and the first few for the message."""

    count: int = 0
    rows: list[int] = field(default_factory=list)

    def add(self, rows: np.ndarray) -> None:
        self.count += len(rows)
        self.rows.extend(rows[: SAMPLE_ROWS - len(self.rows)].tolist())

    def is_only(self, row: int) -> bool:
        return self.count == 1 and self.rows == [row]

    def describe(self) -> str:
        more = ", ..." if self.count > len(self.rows) else ""
        return f"set on {self.count} row(s)" + (f" ({', '.join(map(str, self.rows))}{more})" if self.rows else "")


class _EpisodeScan:
    """The running summary of one episode's rows."""

    def __init__(self, start_step: int, columns: frozenset[str], vectors: Collection[str], frames: Mapping[str, str]):
        self.start_step = start_step
        self.columns = columns
        self.vectors = [c for c in vectors if c in columns]
        self.frames = {c: camera for c, camera in frames.items() if c in columns}
        self.rows = 0
        self.flags = {name: _Flag() for name in FLAGS}
        self.last_timestamp = -math.inf
        self.from_start = True  # step_index == start_step + row (a dataset-wide counter)
        self.from_zero = True  # step_index == row (a per-episode counter)
        self.last_frame: dict[str, int] = {}
        self.max_frame: dict[str, int] = {}
        self.problems: dict[tuple[str, str | None], str] = {}  # (rule, column) -> the first problem

    def note(self, rule: str, column: str | None, message: str) -> None:
        self.problems.setdefault((rule, column), message)

    def update(self, run: Arrays, rows: int) -> None:
        positions = np.arange(self.rows, self.rows + rows)
        for name in FLAGS:
            if name in run:
                self.flags[name].add(positions[run[name].astype(bool)])
        if "timestamp" in run:
            self._timestamps(run["timestamp"], positions)
        if "step_index" in run:
            self.from_start &= bool(np.array_equal(run["step_index"], positions + self.start_step))
            self.from_zero &= bool(np.array_equal(run["step_index"], positions))
        for column in self.vectors:
            self._finite(column, run[column], positions)
        for column in self.frames:
            self._frame_indices(column, run[column], positions)
        self.rows += rows

    def _timestamps(self, stamps: np.ndarray, positions: np.ndarray) -> None:
        previous = np.concatenate(([self.last_timestamp], stamps[:-1]))
        bad = ~np.isfinite(stamps) | ~(stamps > previous)
        if bad.any():
            i = int(np.argmax(bad))
            message = f"row {positions[i]}: {stamps[i]} after {previous[i]}; timestamps must be finite and increasing"
            self.note("steps.timestamp", "timestamp", message)
        self.last_timestamp = float(stamps[-1])

    def _finite(self, column: str, values: np.ndarray, positions: np.ndarray) -> None:
        bad = ~np.isfinite(values).all(axis=1)
        if bad.any():
            i = int(np.argmax(bad))
            rule = "steps.action_finite" if column == "action" else "steps.state_finite"
            self.note(rule, column, f"row {positions[i]} holds {values[i].tolist()}; values must be finite")

    def _frame_indices(self, column: str, indices: np.ndarray, positions: np.ndarray) -> None:
        previous = np.concatenate(([self.last_frame.get(column, 0)], indices[:-1]))
        bad = (indices < 0) | (indices < previous)
        if bad.any():
            i = int(np.argmax(bad))
            message = f"row {positions[i]}: frame index {indices[i]} after {previous[i]}; must be >= 0, non-decreasing"
            self.note("steps.frame_index", column, message)
        self.last_frame[column] = int(indices[-1])
        self.max_frame[column] = max(self.max_frame.get(column, -1), int(indices.max()))

    def step_index(self) -> tuple[bool, bool] | None:
        """Whether step_index counted from start_step, and from 0; None if the column was unusable."""
        return (self.from_start, self.from_zero) if "step_index" in self.columns else None

    def findings(self, episode: Episode, file: str, frame_counts: Mapping[str, int]) -> list[Finding]:
        problems = dict(self.problems)
        if self.rows != episode.record.length:
            message = f"has {self.rows} rows; episodes.parquet gives length {episode.record.length}"
            problems[("steps.length", None)] = message
        last = self.rows - 1
        first, final, terminal = (self.flags[name] for name in FLAGS)
        expectations = {
            "is_first": (first.is_only(0), "expected exactly row 0"),
            "is_last": (final.is_only(last), f"expected exactly row {last}"),
            "is_terminal": (terminal.count == 0 or terminal.is_only(last), f"allowed on the last row {last} only"),
        }
        for name, (ok, expected) in expectations.items():
            if name in self.columns and not ok:
                problems[(f"steps.{name}", name)] = f"{self.flags[name].describe()}; {expected}"
        for column, camera in self.frames.items():
            count = frame_counts.get(camera)
            if count is not None and self.max_frame.get(column, -1) >= count:
                message = f"frame index {self.max_frame[column]} is past the end of {camera}'s video ({count} frames)"
                problems.setdefault(("steps.frame_index", column), message)
        return [
            finding(rule, file, message, episode=episode.id, field=column)
            for (rule, column), message in problems.items()
        ]


def _chunks_on_disk(root: Path) -> Iterator[int]:
    for path in (root / "data").glob("chunk-*/steps.parquet"):
        match = re.fullmatch(r"chunk-([0-9]+)", path.parent.name)
        if match and layout.chunk_dir_name(int(match.group(1))) == path.parent.name:
            yield int(match.group(1))


def _row_groups_with(parquet: pq.ParquetFile, episode_id: str) -> list[int]:
    """Row groups whose episode_id statistics do not rule ``episode_id`` out."""
    meta = parquet.metadata
    column = next(i for i in range(meta.num_columns) if meta.schema.column(i).path == "episode_id")
    groups = []
    for group in range(meta.num_row_groups):
        stats = meta.row_group(group).column(column).statistics
        if stats is None or not stats.has_min_max or stats.min <= episode_id <= stats.max:
            groups.append(group)
    return groups


_CONVENTION_NAMES = {(True, False): "start_step + row", (False, True): "row (from 0)"}


class _StepIndexConvention:
    """The spec leaves open whether step_index counts across the dataset or within the
    episode. Both are accepted, but the first episode that tells them apart (one whose
    start_step is not 0) fixes the convention for the rest."""

    def __init__(self) -> None:
        self.convention: tuple[bool, bool] | None = None

    def check(self, episode: Episode, file: str, from_start: bool, from_zero: bool) -> list[Finding]:
        if not (from_start or from_zero):
            message = f"step_index is neither start_step ({episode.record.start_step}) + row nor the row from 0"
            return [finding("steps.step_index", file, message, episode=episode.id, field="step_index")]
        if from_start == from_zero:  # start_step 0: both conventions agree
            return []
        if self.convention is None:
            self.convention = (from_start, from_zero)
        if (from_start, from_zero) == self.convention:
            return []
        message = (
            f"inconsistent step_index convention: counts {_CONVENTION_NAMES[(from_start, from_zero)]} while earlier "
            f"episodes count {_CONVENTION_NAMES[self.convention]}"
        )
        return [finding("steps.step_index_convention", file, message, episode=episode.id, field="step_index")]


class StepScan:
    """Rules on every chunk (or, with ``only``, on one episode's rows): ``run``.

    Reads chunk after chunk; an episode's summary is turned into findings and dropped as soon
    as its chunk is read, so at most one chunk's episodes are held. ``pending`` are episode ids
    whose commit or deletion was interrupted: their rows are expected to lack an index entry.
    ``frame_counts`` gives, per episode, each camera's frames.
    """

    def __init__(
        self,
        root: Path,
        manifest: Manifest,
        episodes: Sequence[Episode],
        *,
        only: Episode | None,
        pending: Collection[str],
        frame_counts: Mapping[str, Mapping[str, int]],
    ) -> None:
        self.root = root
        self.expected = step_schema(manifest)
        self.vectors = vector_columns(manifest)
        self.frames = {layout.image_column(camera): camera for camera in manifest.cameras}
        self.episodes = {e.id: e for e in episodes}
        self.only = only
        self.by_chunk: dict[int, list[Episode]] = defaultdict(list)
        for episode in [only] if only is not None else episodes:
            self.by_chunk[episode.record.chunk_id].append(episode)
        self.pending = pending
        self.frame_counts = frame_counts
        self.found: list[Finding] = []
        self.scans: dict[str, _EpisodeScan] = {}
        self.convention = _StepIndexConvention()
        self.rowless: list[Episode] = []  # no rows in their chunk: misplaced, or missing
        self.elsewhere: dict[str, set[int]] = defaultdict(set)  # episode -> other chunks holding its rows
        self.orphans: Counter[tuple[str, str]] = Counter()  # (file, episode id) -> rows
        self.reference: tuple[str, pa.Schema] | None = None  # the first chunk's schema
        self.reported_nulls: set[tuple[str, str]] = set()

    def run(self) -> list[Finding]:
        """The findings of every chunk read."""
        for chunk_id in self.chunks():
            self.scan(chunk_id)
        return self.finish()

    def chunks(self) -> list[int]:
        """The chunks the selected episodes name, plus (for the whole dataset) any on disk."""
        chunks = set(self.by_chunk)
        if self.only is None:
            chunks.update(_chunks_on_disk(self.root))
        return sorted(chunks)

    def scan(self, chunk_id: int) -> None:
        file = layout.steps_path(chunk_id)
        complete = self._read(chunk_id, file)
        for episode in self.by_chunk.get(chunk_id, []):
            scan = self.scans.pop(episode.id, None)
            if not complete:
                continue  # the file's own finding says why; partial rows would only add noise
            if scan is None:
                self.rowless.append(episode)
                continue
            self.found += scan.findings(episode, file, self.frame_counts.get(episode.id, {}))
            index = scan.step_index()
            if index is not None:
                self.found += self.convention.check(episode, file, *index)

    def _read(self, chunk_id: int, file: str) -> bool:
        """Fold the chunk's rows into episode summaries; False unless all could be read."""
        try:
            parquet = pq.ParquetFile(self.root / file)
            columns = self._usable_columns(file, parquet.schema_arrow)
            if "episode_id" not in columns:
                return False
            groups = _row_groups_with(parquet, self.only.id) if self.only is not None else None
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=sorted(columns), row_groups=groups):
                self._scan_batch(chunk_id, file, columns, batch)
        except FileNotFoundError:
            self.found.append(finding("steps.missing", file, "the chunk's step table is missing"))
            return False
        except (pa.ArrowException, OSError) as exc:
            self.found.append(finding("steps.unreadable", file, f"not readable Parquet: {exc}"))
            return False
        return True

    def _usable_columns(self, file: str, actual: pa.Schema) -> frozenset[str]:
        if self.reference is None:
            self.reference = (file, actual)
        else:
            self.found += _schema_mismatch(file, actual, *self.reference)
        usable = set()
        for expected in self.expected:
            index = actual.get_field_index(expected.name)
            if index < 0:
                problem = f"column is missing (expected {expected.type})"
            elif not _same_type(actual.field(index).type, expected.type):
                problem = f"has type {actual.field(index).type}; expected {expected.type}"
            else:
                usable.add(expected.name)
                continue
            self.found.append(finding("steps.schema", file, problem, field=expected.name))
        return frozenset(usable)

    def _arrays(self, file: str, batch: pa.RecordBatch) -> dict[str, np.ndarray]:
        arrays = {}
        for name in batch.schema.names:
            column = batch.column(name)
            kind = self.expected.field(name).type
            if column.null_count:
                if (file, name) not in self.reported_nulls:
                    self.reported_nulls.add((file, name))
                    self.found.append(finding("steps.null", file, f"has {column.null_count} null(s)", field=name))
                column = column.fill_null(_null_fill(kind))
            if pa.types.is_fixed_size_list(kind):
                arrays[name] = column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), kind.list_size)
            else:
                arrays[name] = column.to_numpy(zero_copy_only=False)
        return arrays

    def _scan_batch(self, chunk_id: int, file: str, columns: frozenset[str], batch: pa.RecordBatch) -> None:
        arrays = self._arrays(file, batch)
        ids = arrays.pop("episode_id")
        bounds = [0, *(np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist(), len(ids)]
        for start, stop in itertools.pairwise(bounds):
            run = {name: values[start:stop] for name, values in arrays.items()}
            self._scan_run(chunk_id, file, columns, str(ids[start]), run, stop - start)

    def _scan_run(
        self, chunk_id: int, file: str, columns: frozenset[str], episode_id: str, run: Arrays, rows: int
    ) -> None:
        episode = self.episodes.get(episode_id)
        if episode is None:
            if self.only is None:
                self.orphans[(file, episode_id)] += rows
            return
        if self.only is not None and episode is not self.only:
            return
        if episode.record.chunk_id != chunk_id:
            self.elsewhere[episode_id].add(chunk_id)
            return
        scan = self.scans.get(episode_id)
        if scan is None:
            scan = self.scans[episode_id] = _EpisodeScan(episode.record.start_step, columns, self.vectors, self.frames)
        scan.update(run, rows)

    def finish(self) -> list[Finding]:
        """The findings that need every chunk read: misplaced, missing and orphaned rows."""
        for episode in self.rowless:
            if episode.id not in self.elsewhere:
                message = f"has no rows; episodes.parquet gives length {episode.record.length}"
                file = layout.steps_path(episode.record.chunk_id)
                self.found.append(finding("steps.length", file, message, episode=episode.id))
        for episode_id, chunks in self.elsewhere.items():
            files = ", ".join(layout.steps_path(c) for c in sorted(chunks))
            message = f"rows found in {files}, but chunk_id is {self.episodes[episode_id].record.chunk_id}"
            self.found.append(
                finding("episodes.chunk_id", layout.EPISODES, message, episode=episode_id, field="chunk_id")
            )
        for (file, episode_id), rows in self.orphans.items():
            if episode_id in self.pending:
                message = f"{rows} row(s) of episode {episode_id}, whose commit or deletion was interrupted: "
                message += f"run `ortf recover {self.root}`"
                self.found.append(finding("steps.pending_commit", file, message, episode=episode_id))
            else:
                message = f"{rows} row(s) belong to episode {episode_id!r}, which is not in episodes.parquet"
                self.found.append(finding("steps.orphan", file, message, episode=episode_id))
        return self.found


def _schema_mismatch(file: str, schema: pa.Schema, first: str, reference: pa.Schema) -> list[Finding]:
    """RLDS INV-R3: every step has the same fields, so every chunk has the same columns."""
    expected = {f.name: f.type for f in reference}
    actual = {f.name: f.type for f in schema}
    differing = sorted(
        name
        for name in expected.keys() | actual.keys()
        if name not in expected or name not in actual or not _same_type(actual[name], expected[name])
    )
    if not differing:
        return []
    return [finding("steps.schema_mismatch", file, f"columns differ from {first}: {', '.join(differing)}")]
