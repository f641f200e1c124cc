"""Deleting committed episodes with a commit's crash guarantees (``ortf episodes delete``).

An episode occupies many files: its index row, its rows in the chunk's ``steps.parquet`` (and,
in the older layout, in the chunk's stream tables), its videos, its native-rate stream files
and its annotations. No single rename removes all of them, so a delete goes in three stages,
each safe to interrupt:

1. **Plan.** ``.staging/deletion.json`` (the journal) lists each episode to delete with every
   table that holds its rows and every file and directory of its own; written atomically
   before anything else changes.
2. **Commit point.** ``meta/episodes.parquet`` rewritten atomically without their rows. Before
   it, the delete has not happened: finishing the journal then finds the episodes still in the
   index and only drops the journal (the delete is rolled back, not forward).
3. **Clean-up.** Each table rewritten without the rows of episodes the index no longer holds,
   a row group at a time (memory: a row group, as the writer bounds it, never a chunk); the
   files and directories removed (a video another remaining episode names stays); tasks no
   episode uses any more dropped; statistics computed anew from the remaining steps (running
   quantile sketches cannot take values out) with the manifest totals; the journal removed.

Every clean-up step is idempotent, so an interrupted one is finished by running it again: by
``ortf recover``, by the next edit, or by the next writer that opens the dataset, each under
the writer lock and before anything else touches the dataset. Until then the validator reads
the journal: rows and files of those episodes are reported as an interrupted delete (info,
``staging.interrupted_delete``), never as orphans, and manifest totals that still count
them are expected.

Deleting leaves the other episodes exactly as they were, ``start_step`` and ``end_step``
included: the gap left in the step ranges is allowed (ranges must only not overlap), and a
later commit starts past every range (``Catalog.next_start_step``), so no other chunk is
rewritten.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ortf_ros.dataset.catalog import Catalog, empty_stats
from ortf_ros.dataset.commit import PARQUET_COMPRESSION
from ortf_ros.dataset.staging import staging_root
from ortf_ros.dataset.stats import DatasetStats
from ortf_ros.errors import FormatError, OrtfError, UnknownEpisodeError, WriterError, failure_line
from ortf_ros.format import layout, point_clouds
from ortf_ros.format.audio import audio_relative, audio_sensors
from ortf_ros.format.metadata import EpisodeRecord, EpisodeSource
from ortf_ros.format.text import read_text
from ortf_ros.io import atomic

JOURNAL_FILE = "deletion.json"
STATS_BATCH_ROWS = 8192  # step rows read at a time to compute the statistics anew (about 1 MB of features)


@dataclass(frozen=True)
class PlannedDeletion:
    """One episode to delete: the tables holding its rows, and the files and directories of its
    own; its length and duration, which the manifest totals count until they are made anew."""

    episode_id: str
    tables: tuple[str, ...]
    files: tuple[str, ...]
    directories: tuple[str, ...]
    length: int = 0
    duration_seconds: float = 0.0
    source: EpisodeSource | None = None  # the recording it was converted from, remembered once deleted

    def to_dict(self) -> dict[str, object]:
        return {
            "episode_id": self.episode_id,
            "tables": list(self.tables),
            "files": list(self.files),
            "directories": list(self.directories),
            "length": self.length,
            "duration_seconds": self.duration_seconds,
            "source": None if self.source is None else self.source.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: object, file: str) -> PlannedDeletion:
        if not isinstance(data, dict) or not isinstance(data.get("episode_id"), str):
            raise FormatError(f"{file}: malformed deletion entry {data!r}")

        def strings(key: str) -> tuple[str, ...]:
            values = data.get(key, [])
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise FormatError(f"{file}: {key}: expected a list of paths")
            return tuple(values)

        length, seconds = data.get("length", 0), data.get("duration_seconds", 0.0)
        if not isinstance(length, int) or not isinstance(seconds, (int, float)):
            raise FormatError(f"{file}: length, duration_seconds: expected numbers")
        return cls(
            data["episode_id"],
            strings("tables"),
            strings("files"),
            strings("directories"),
            length,
            float(seconds),
            EpisodeSource.from_dict(data.get("source")),
        )


def journal_path(root: Path) -> Path:
    return staging_root(root) / JOURNAL_FILE


def pending_deletion(root: Path) -> list[PlannedDeletion] | None:
    """The deletion an interrupted ``delete_committed`` left to finish; None if there is none."""
    path = journal_path(root)
    relative = f"{layout.STAGING_DIR}/{JOURNAL_FILE}"
    try:
        data = json.loads(read_text(path))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"{relative}: deletion journal unreadable: {exc}") from None
    entries = data.get("episodes") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise FormatError(f"{relative}: expected an object with an 'episodes' list")
    return [PlannedDeletion.from_dict(entry, relative) for entry in entries]


def records_to_delete(catalog: Catalog, episode_ids: Sequence[str]) -> list[EpisodeRecord]:
    """The committed episodes named (each once, in the index's order); an UnknownEpisodeError
    (a usage error) naming the first id the dataset does not hold."""
    wanted = list(dict.fromkeys(episode_ids))
    for episode_id in wanted:
        if catalog.record(episode_id) is None:
            raise UnknownEpisodeError(f"{catalog.root}: no episode with id {episode_id!r}")
    chosen = set(wanted)
    return [e for e in catalog.episodes if e.episode_id in chosen]


def delete_committed(catalog: Catalog, episode_ids: Sequence[str]) -> list[EpisodeRecord]:
    """Delete these committed episodes (see the module's description); the records deleted.
    The caller holds the writer lock, and nothing is staged (a staged commit's journal
    records byte offsets in the chunk tables that a rewrite would invalidate)."""
    doomed = records_to_delete(catalog, episode_ids)
    if not doomed:
        return []
    positions = {record.episode_id: position for position, record in enumerate(catalog.episodes)}
    _check_file_names_stay(catalog, min(positions[record.episode_id] for record in doomed))
    plan = [_plan(catalog, record, positions[record.episode_id]) for record in doomed]
    for planned in plan:
        for relative in (*planned.tables, *planned.files, *planned.directories):
            if _inside(catalog.root, relative) is None:
                raise WriterError(
                    f"{catalog.root}: episode {planned.episode_id} names {relative}, outside the dataset; "
                    "nothing deleted"
                )
    atomic.write_json(journal_path(catalog.root), {"episodes": [p.to_dict() for p in plan]})
    gone = {record.episode_id for record in doomed}
    catalog.rewrite([e for e in catalog.episodes if e.episode_id not in gone])  # the commit point
    try:
        finish_deletion(catalog, plan)
    except (OSError, OrtfError) as exc:  # (a full disk): deleted all the same, its leftovers journalled
        raise WriterError(
            f"{catalog.root}: episode(s) {', '.join(sorted(gone))} deleted, but removing their files failed "
            f"({failure_line(exc)}); `ortf recover {catalog.root}` finishes it"
        ) from exc
    return doomed


def _check_file_names_stay(catalog: Catalog, first: int) -> None:
    """Files of an episode whose id is not a number are named after its row's position
    (``layout.file_index``): deleting the row at ``first`` would rename those of every such
    episode after it; refused."""
    for record in catalog.episodes[first:]:
        if not (record.episode_id.isascii() and record.episode_id.isdigit()):
            raise WriterError(
                f"{catalog.root}: episode {record.episode_id!r} has its files named after its position in "
                f"the index, which deleting an episode before it would change; episodes are deleted only "
                f"from datasets whose ids are numbers (as ortf_ros writes them)"
            )


def _plan(catalog: Catalog, record: EpisodeRecord, position: int) -> PlannedDeletion:
    manifest = catalog.manifest
    index = layout.file_index(record.episode_id, position)
    tables = [layout.steps_path(record.chunk_id)]
    files = [path for path in record.video_files.values() if path is not None]
    if record.audio_file is not None:
        files.append(record.audio_file)
    for sensor in audio_sensors(manifest):  # (every microphone's file and chunk table)
        files += [
            audio_relative(sensor, record.chunk_id, index),
            layout.audio_chunks_path(sensor.name, record.chunk_id, index),
        ]
    for stream in manifest.native_streams:
        if manifest.stream_files == layout.STREAM_FILES_PER_CHUNK:
            tables.append(layout.stream_path(record.chunk_id, stream))
        else:
            files.append(layout.episode_stream_path(record.chunk_id, stream, index))
    files += [point_clouds.cloud_path(name, record.chunk_id, index) for name in point_clouds.declarations(manifest)]
    directories = (layout.annotations_dir(index),)
    return PlannedDeletion(
        record.episode_id,
        tuple(tables),
        tuple(files),
        directories,
        record.length,
        record.duration_seconds,
        record.source,
    )


def finish_pending_deletion(catalog: Catalog) -> list[str]:
    """Finish the deletion an interrupted run left (``pending_deletion``); the ids it deleted
    (those still in the index were never deleted: they stay)."""
    plan = pending_deletion(catalog.root)
    return finish_deletion(catalog, plan) if plan is not None else []


def finish_deletion(catalog: Catalog, plan: Sequence[PlannedDeletion]) -> list[str]:
    """Stage 3 of a delete (idempotent): every trace of the planned episodes the index no
    longer holds removed, the derived metadata made anew, the journal dropped."""
    held = {e.episode_id for e in catalog.episodes}
    deleted = [p for p in plan if p.episode_id not in held]
    by_table: dict[str, set[str]] = defaultdict(set)
    for planned in deleted:
        for table in planned.tables:
            by_table[table].add(planned.episode_id)
    for table, ids in sorted(by_table.items()):
        if (path := _inside(catalog.root, table)) is not None:
            _remove_rows(path, ids)
    referenced = {path for e in catalog.episodes for path in (*e.video_files.values(), e.audio_file) if path}
    for planned in deleted:
        for file in planned.files:
            if file not in referenced and (path := _inside(catalog.root, file)) is not None:
                _remove_file(path)
        for directory in planned.directories:
            if (path := _inside(catalog.root, directory)) is not None:
                _remove_tree(path)
    if deleted:
        catalog.note_numbers_taken([p.episode_id for p in deleted])
        catalog.note_sources_deleted([(p.episode_id, p.source) for p in deleted if p.source is not None])
        catalog.drop_unused_tasks()
        catalog.replace_stats(recomputed_stats(catalog))
    journal = journal_path(catalog.root)
    journal.unlink(missing_ok=True)
    with contextlib.suppress(FileNotFoundError):
        atomic.fsync_dir(journal.parent)
    return [p.episode_id for p in deleted]


def _inside(root: Path, relative: str) -> Path | None:
    """``relative`` under ``root``; None for a path outside the dataset, which is never touched
    (a delete naming one is refused before it starts; a journal naming one, skipped, so it can
    always be finished)."""
    path = root / relative
    return path if path.resolve().is_relative_to(root.resolve()) else None


def _remove_file(path: Path) -> None:
    path.unlink(missing_ok=True)
    _prune(path.parent)


def _remove_tree(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        for child in sorted(path.rglob("*"), reverse=True):
            if child.is_dir() and not child.is_symlink():
                child.rmdir()
            else:
                child.unlink()
        path.rmdir()
        _prune(path.parent)


def _prune(directory: Path) -> None:
    """The directory (a chunk's, a camera's) removed once empty, made durable."""
    with contextlib.suppress(OSError):
        directory.rmdir()
    with contextlib.suppress(OSError):
        atomic.fsync_dir(directory if directory.exists() else directory.parent)


def _remove_rows(path: Path, episode_ids: Iterable[str]) -> None:
    """``path`` (a chunk's step or stream table) without the rows of ``episode_ids``, a row group
    at a time; removed when no row is left. Untouched when it holds none of them."""
    if not path.exists():
        return
    with pq.ParquetFile(path) as parquet:
        _rewrite_without(path, parquet, pa.array(sorted(episode_ids), pa.string()))


def _rewrite_without(path: Path, parquet: pq.ParquetFile, doomed: pa.Array) -> None:
    """``_remove_rows`` on the table open as ``parquet``: one pass over its ids to find the row
    groups that hold rows of ``doomed``, a second one to rewrite it if some do."""
    matches = [
        pc.sum(pc.is_in(parquet.read_row_group(g, columns=["episode_id"])["episode_id"], value_set=doomed)).as_py() or 0
        for g in range(parquet.num_row_groups)
    ]
    if not any(matches):
        return
    if sum(matches) == (parquet.metadata.num_rows or 0):
        _remove_file(path)
        return

    def produce(tmp: Path) -> None:
        options = {"compression": PARQUET_COMPRESSION, "use_dictionary": ["episode_id"]}
        with pq.ParquetWriter(tmp, parquet.schema_arrow, **options) as writer:
            for group, count in enumerate(matches):
                rows = parquet.read_row_group(group)
                if count:
                    rows = rows.filter(pc.invert(pc.is_in(rows["episode_id"], value_set=doomed)))
                if rows.num_rows:
                    writer.write_table(rows, row_group_size=rows.num_rows)

    atomic.write_with(path, produce)


def recomputed_stats(catalog: Catalog) -> DatasetStats:
    """The statistics of every step of the index's episodes, read chunk by chunk in batches
    of the feature columns (memory: a batch, and the ids of one chunk's episodes)."""
    stats = empty_stats(catalog.manifest)
    by_chunk: dict[int, list[str]] = defaultdict(list)
    for record in catalog.episodes:
        by_chunk[record.chunk_id].append(record.episode_id)
    columns = ["episode_id", *stats.features]
    for chunk_id, ids in sorted(by_chunk.items()):
        held = pa.array(ids, pa.string())
        with pq.ParquetFile(catalog.root / layout.steps_path(chunk_id)) as parquet:
            for batch in parquet.iter_batches(batch_size=STATS_BATCH_ROWS, columns=columns):
                rows = pa.Table.from_batches([batch])
                stats.update(rows.filter(pc.is_in(rows["episode_id"], value_set=held)))
    return stats
