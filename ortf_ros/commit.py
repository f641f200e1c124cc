"""Turn a staged episode into a committed one: the single path shared by
``DatasetWriter.end_episode`` and ``ortf recover``.

Every step is idempotent, so a commit interrupted at any point is finished by running
it again: videos are remuxed from the staged files, the chunk's step table is rebuilt
from the committed episodes plus this one, and the episode index is replaced last
among the files that define the episode.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ortf_ros.catalog import Catalog
from ortf_ros.errors import WriterError
from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.format.schema import step_schema, vector_columns
from ortf_ros.io import atomic, video
from ortf_ros.staging import EpisodeOutcome, StagedEpisode
from ortf_ros.stats import DatasetStats

PARQUET_COMPRESSION = "zstd"


class EmptyEpisodeError(WriterError):
    """The staged episode holds no step whose frames all reached the disk."""


@dataclass(frozen=True)
class _StepScan:
    """How many leading staged steps have all their frames on disk, and their time span."""

    length: int
    first_timestamp: float
    last_timestamp: float


def _scan_steps(staged: StagedEpisode, frame_counts: Mapping[str, int]) -> _StepScan:
    length, first, last = 0, 0.0, 0.0
    for batch in staged.read_steps():
        valid = np.ones(batch.num_rows, dtype=bool)
        for camera, count in frame_counts.items():
            valid &= batch.column(layout.image_column(camera)).to_numpy() < count
        # Frames arrive in order, so the steps whose frames survived are a prefix.
        keep = int(np.argmin(valid)) if not valid.all() else batch.num_rows
        if keep:
            timestamps = batch.column("timestamp").to_numpy()
            if length == 0:
                first = float(timestamps[0])
            last = float(timestamps[keep - 1])
            length += keep
        if keep < batch.num_rows:
            break
    return _StepScan(length, first, last)


def _final_blocks(
    staged: StagedEpisode, schema: pa.Schema, start_step: int, length: int, terminal: bool, block_rows: int
) -> Iterator[pa.Table]:
    """The episode's rows with global step indices and RLDS flags, in blocks of <= block_rows."""
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    emitted = 0

    def flush() -> pa.Table:
        nonlocal emitted
        table = pa.Table.from_batches(pending, schema=schema).combine_chunks()
        rows = table.num_rows
        position = np.arange(emitted, emitted + rows)
        is_last = position == length - 1
        replacements = {
            "step_index": pa.array(start_step + position, pa.int64()),
            "is_first": pa.array(position == 0),
            "is_last": pa.array(is_last),
            "is_terminal": pa.array(is_last & terminal),
        }
        for name, values in replacements.items():
            index = schema.get_field_index(name)
            table = table.set_column(index, schema.field(index), values)
        emitted += rows
        pending.clear()
        return table

    remaining = length
    for batch in staged.read_steps():
        if remaining <= 0:
            break
        batch = batch.slice(0, remaining)
        remaining -= batch.num_rows
        pending.append(batch)
        pending_rows += batch.num_rows
        if pending_rows >= block_rows:
            yield flush()
            pending_rows = 0
    if pending:
        yield flush()


def _rewrite_chunk(
    root: Path, chunk_id: int, schema: pa.Schema, keep_ids: set[str], new_blocks: Iterator[pa.Table]
) -> None:
    """Rebuild a chunk's step table: committed episodes' row groups, then the new rows.

    Rows of episodes that are not committed (left by an interrupted commit that was
    later discarded) are dropped here, so they can never be mistaken for data.
    """
    target = root / layout.steps_path(chunk_id)

    def produce(tmp: Path) -> None:
        with pq.ParquetWriter(tmp, schema, compression=PARQUET_COMPRESSION) as writer:
            if target.exists():
                existing = pq.ParquetFile(target)
                keep = pa.array(sorted(keep_ids), pa.string())
                for group in range(existing.num_row_groups):
                    table = existing.read_row_group(group)
                    table = table.filter(pc.is_in(table["episode_id"], value_set=keep))
                    if table.num_rows:
                        writer.write_table(table.select(schema.names).cast(schema))
            for block in new_blocks:
                writer.write_table(block)

    atomic.write_with(target, produce)


def commit_staged(
    catalog: Catalog, staged: StagedEpisode, outcome: EpisodeOutcome, *, block_rows: int
) -> EpisodeRecord:
    """Commit ``staged`` with ``outcome``; raises EmptyEpisodeError if it holds no complete step."""
    manifest = catalog.manifest
    header = staged.header()
    staged.mark_committing(outcome)
    chunk_id = header.episode_index // catalog.chunk_size
    video_files: dict[str, str | None] = {}
    frame_counts: dict[str, int] = {}
    for camera in manifest.cameras:
        relative = layout.video_path(camera, chunk_id, header.episode_index)
        # Staged videos stay until the commit's last step, so a rolled-forward commit
        # remuxes them again rather than trusting a copy it may have cut short.
        source = staged.video_file(camera)
        frame_counts[camera] = video.finalize(source, catalog.root / relative) if source.exists() else 0
        video_files[camera] = relative
    scan = _scan_steps(staged, frame_counts)
    if scan.length == 0:
        raise EmptyEpisodeError(f"episode {header.episode_id}: no complete step to commit")
    schema = step_schema(manifest)
    start_step = sum(e.length for e in catalog.episodes if e.episode_id != header.episode_id)
    episode_stats = DatasetStats(vector_columns(manifest))

    def blocks_with_stats() -> Iterator[pa.Table]:
        for block in _final_blocks(staged, schema, start_step, scan.length, outcome.terminal, block_rows):
            episode_stats.update(block)
            yield block

    keep_ids = {e.episode_id for e in catalog.episodes if e.chunk_id == chunk_id} - {header.episode_id}
    _rewrite_chunk(catalog.root, chunk_id, schema, keep_ids, blocks_with_stats())
    if staged.annotations_dir.is_dir():
        target = catalog.root / layout.annotations_dir(header.episode_index)
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        staged.annotations_dir.rename(target)
        atomic.fsync_dir(target.parent)
    task_id = catalog.task_id(header.task, header.task_type, header.task_description)
    record = EpisodeRecord(
        episode_id=header.episode_id,
        task_id=task_id,
        start_step=start_step,
        end_step=start_step + scan.length,
        length=scan.length,
        duration_seconds=scan.last_timestamp - scan.first_timestamp,
        chunk_id=chunk_id,
        success=outcome.success,
        failure_reason=outcome.failure_reason,
        operator_notes=outcome.operator_notes,
        recorded_at=header.recorded_at,
        video_files=video_files,
    )
    catalog.commit(record, episode_stats)
    staged.remove()
    return record


def discard_staged(catalog: Catalog, staged: StagedEpisode) -> None:
    """Drop a staged episode and anything an interrupted commit already put in place."""
    header = staged.header()
    if header.episode_id in catalog.episode_ids():
        raise WriterError(f"episode {header.episode_id} is already committed; it cannot be discarded here")
    chunk_id = header.episode_index // catalog.chunk_size
    for camera in catalog.manifest.cameras:
        (catalog.root / layout.video_path(camera, chunk_id, header.episode_index)).unlink(missing_ok=True)
    if (catalog.root / layout.steps_path(chunk_id)).exists():
        keep_ids = {e.episode_id for e in catalog.episodes if e.chunk_id == chunk_id}
        _rewrite_chunk(catalog.root, chunk_id, step_schema(catalog.manifest), keep_ids, iter(()))
    if staged.outcome() is not None:
        shutil.rmtree(catalog.root / layout.annotations_dir(header.episode_index), ignore_errors=True)
    staged.remove()
