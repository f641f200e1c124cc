"""Rules on native-rate side tables and on the per-step alignment columns.

Both are ortf_ros extensions the manifest declares (``native_streams``, ``alignment``).
They are read in their own pass over a handful of narrow columns, so the main step
scan stays unaware of them; memory holds one counter per episode and stream.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.dataset.validation.accounting import check_native_stream
from ortf_ros.dataset.validation.findings import Finding, finding
from ortf_ros.dataset.validation.tables import Episode
from ortf_ros.errors import FormatError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest

BATCH_ROWS = 65536


@dataclass
class _StreamCount:
    samples: int = 0
    last_timestamp: float = -np.inf
    problems: dict[str, str] = field(default_factory=dict)  # rule -> first problem


def check_streams(
    root: Path, manifest: Manifest, episodes: Sequence[Episode], *, only: Episode | None, pending: Collection[str]
) -> list[Finding]:
    if not manifest.native_streams and not manifest.alignment:
        return []
    selected = [only] if only is not None else list(episodes)
    by_chunk: dict[int, list[Episode]] = defaultdict(list)
    for episode in selected:
        by_chunk[episode.record.chunk_id].append(episode)
    known = {e.id for e in episodes} | set(pending)
    try:
        files = manifest.stream_files
    except FormatError:
        return []  # the manifest rule reports it
    found: list[Finding] = []
    for chunk_id, chunk_episodes in sorted(by_chunk.items()):
        ids = {e.id for e in chunk_episodes}
        counts: dict[str, dict[str, _StreamCount]] = {}
        for stream in manifest.native_streams:
            if files == layout.STREAM_FILES_PER_CHUNK:
                file = layout.stream_path(chunk_id, stream)
                counts[stream], problems = _scan_stream_table(root, file, ids, known, only is None)
            else:
                counts[stream], problems = _scan_episode_files(root, chunk_id, stream, chunk_episodes)
                if only is None:
                    problems += _orphan_files(root, chunk_id, stream, episodes, pending)
            found += problems
        problems, referencing = _check_step_columns(root, manifest, chunk_id, ids, counts)
        found += problems
        for episode in chunk_episodes:
            for stream, by_episode in counts.items():
                samples = by_episode.get(episode.id, _StreamCount()).samples
                column = layout.stream_index_column(stream)
                steps = referencing.get((episode.id, column), 0) if column in referencing.columns else None
                found += check_native_stream(episode, stream, samples, steps)
    return found


class _Referencing(dict[tuple[str, str], int]):
    """(episode, sample index column) -> steps whose index is set; ``columns``: those read."""

    def __init__(self, columns: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.columns = columns


def _scan_episode_files(
    root: Path, chunk_id: int, stream: str, episodes: Sequence[Episode]
) -> tuple[dict[str, _StreamCount], list[Finding]]:
    """Each episode's own file of ``stream`` (the ``"episode"`` layout): one at a time."""
    counts: dict[str, _StreamCount] = {}
    found: list[Finding] = []
    for episode in episodes:
        file = layout.episode_stream_path(chunk_id, stream, episode.index)
        episode_counts, problems = _scan_stream_table(root, file, {episode.id}, {episode.id}, True)
        counts.update(episode_counts)
        found += [replace(f, episode=episode.id) if f.episode is None else f for f in problems]
    return counts, found


def _orphan_files(
    root: Path, chunk_id: int, stream: str, episodes: Sequence[Episode], pending: Collection[str]
) -> list[Finding]:
    """Files of the stream's chunk folder that no episode in the index (or staged) is named after."""
    folder = root / layout.episode_stream_dir(chunk_id, stream)
    if not folder.is_dir():
        return []
    named = {layout.episode_file_stem(e.index) for e in episodes}
    named |= {layout.episode_file_stem(int(i)) for i in pending if i.isascii() and i.isdigit()}
    message = "samples of an episode not in episodes.parquet"
    where = layout.episode_stream_dir(chunk_id, stream)
    return [
        finding("streams.orphan", f"{where}/{path.name}", message)
        for path in sorted(folder.iterdir())
        if path.suffix == ".parquet" and path.stem not in named
    ]


def _batches(path: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
    yield from pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS, columns=columns)


def _scan_stream_table(
    root: Path, file: str, ids: set[str], known: set[str], report_orphans: bool
) -> tuple[dict[str, _StreamCount], list[Finding]]:
    counts: dict[str, _StreamCount] = defaultdict(_StreamCount)
    orphans: dict[str, int] = defaultdict(int)
    try:
        for batch in _batches(root / file, ["episode_id", "sample_index", "timestamp"]):
            indices = batch.column(1).to_numpy()
            stamps = batch.column(2).to_numpy()
            for episode_id, rows in _runs(batch.column(0)):
                if episode_id not in ids:
                    if episode_id not in known:
                        orphans[episode_id] += rows.stop - rows.start
                    continue
                _count_run(counts[episode_id], indices[rows], stamps[rows])
    except FileNotFoundError:
        return {}, [finding("streams.missing", file, "the manifest declares this stream but its file is missing")]
    except (pa.ArrowException, OSError, KeyError) as exc:
        return {}, [finding("streams.unreadable", file, f"unreadable: {exc}")]
    found = [
        finding(rule, file, message, episode=episode_id)
        for episode_id, count in counts.items()
        for rule, message in count.problems.items()
    ]
    if report_orphans:
        found += [
            finding("streams.orphan", file, f"{rows} sample(s) of an episode not in episodes.parquet", episode=eid)
            for eid, rows in orphans.items()
        ]
    return counts, found


def _runs(episode_ids: pa.Array) -> Iterator[tuple[str, slice]]:
    """The batch as runs of rows of one episode each (a table holds an episode's rows together,
    so this is one run per episode, found without a Python step per row)."""
    values = episode_ids.fill_null("").dictionary_encode()
    codes = values.indices.to_numpy(zero_copy_only=False)
    names = values.dictionary.to_pylist()
    starts = np.flatnonzero(np.diff(codes)) + 1
    bounds = [0, *starts.tolist(), len(codes)]
    for start, stop in itertools.pairwise(bounds):
        if stop > start:
            yield str(names[codes[start]]), slice(start, stop)


def _count_run(count: _StreamCount, indices: np.ndarray, stamps: np.ndarray) -> None:
    """Check one run of an episode's samples against what came before it, and count them."""
    expected = np.arange(count.samples, count.samples + len(indices))
    wrong = np.flatnonzero(indices != expected)
    if len(wrong):
        row = int(wrong[0])
        count.problems.setdefault(
            "streams.sample_index", f"sample {count.samples + row} has sample_index {indices[row]}"
        )
    previous = np.concatenate(([count.last_timestamp], stamps[:-1]))
    back = np.flatnonzero(~(stamps >= previous))
    if len(back):
        row = int(back[0])
        count.problems.setdefault(
            "streams.timestamp", f"sample {count.samples + row}: timestamp {stamps[row]} goes back in time"
        )
    count.samples += len(indices)
    if len(stamps):
        count.last_timestamp = float(stamps[-1])


def _check_step_columns(
    root: Path, manifest: Manifest, chunk_id: int, ids: set[str], counts: dict[str, dict[str, _StreamCount]]
) -> tuple[list[Finding], _Referencing]:
    """Step -> sample indices must exist and not go back; alignment beyond tolerance is reported.
    Also counts the steps that point into each stream, for the accounting rule."""
    file = layout.steps_path(chunk_id)
    index_columns = {layout.stream_index_column(s): s for s in manifest.native_streams if s in counts}
    # Each aligned stream's sync tolerance: its own, else the dataset's (none: not judged).
    aligned = manifest.alignment.streams if manifest.alignment else ()
    tolerance = {s: ms for s in aligned if (ms := manifest.stream_tolerance_ms(s)) is not None}
    alignment_columns = {layout.alignment_column(s): s for s in tolerance}
    try:
        present = set(pq.ParquetFile(root / file).schema_arrow.names)
    except (FileNotFoundError, pa.ArrowException, OSError):
        return [], _Referencing()  # the step rules report the file itself
    columns = [c for c in [*index_columns, *alignment_columns] if c in present]
    referencing = _Referencing(columns=frozenset(c for c in columns if c in index_columns))
    if not columns:
        return [], referencing
    highest: dict[tuple[str, str], int] = {}
    late: dict[tuple[str, str], tuple[int, float]] = {}
    for batch in _batches(root / file, ["episode_id", *columns]):
        table = pa.Table.from_batches([batch])
        for episode_id in set(table.column(0).to_pylist()) & ids:
            rows = table.filter(pa.compute.equal(table.column(0), episode_id))
            for column in columns:
                values = rows.column(column).drop_null().to_numpy()
                key = (episode_id, column)
                if column in index_columns:
                    referencing[key] = referencing.get(key, 0) + len(values)
                if not len(values):
                    continue
                if column in index_columns:
                    highest[key] = max(highest.get(key, -1), int(values.max()))
                else:
                    over = values[values > tolerance[alignment_columns[column]]]
                    if len(over):
                        seen, worst = late.get(key, (0, 0.0))
                        late[key] = (seen + len(over), max(worst, float(over.max())))
    found = []
    for (episode_id, column), top in highest.items():
        stream = index_columns[column]
        samples = counts[stream].get(episode_id, _StreamCount()).samples
        if top >= samples:
            message = f"step uses sample {top} of {stream!r}, which has {samples} sample(s) in this episode"
            found.append(finding("steps.stream_index", file, message, episode=episode_id, field=column))
    for (episode_id, column), (steps, worst) in late.items():
        stream = alignment_columns[column]
        message = (
            f"{steps} step(s) used a sample of {stream!r} further than its "
            f"{tolerance[stream]:g} ms sync tolerance (worst {worst:.1f} ms)"
        )
        found.append(finding("alignment.tolerance", file, message, episode=episode_id, field=column))
    return found, referencing
