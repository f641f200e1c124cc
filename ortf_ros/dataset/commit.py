"""Turn a staged episode into a committed one: the single path shared by
``DatasetWriter.end_episode`` and ``ortf recover``.

What a commit writes depends on its own episode alone, however many the chunk or the dataset
already holds (issue 20): videos and native-rate streams get files of their own, and the
episode's steps are appended to the chunk's ``steps.parquet`` in place
(``ortf_ros.io.parquet_append``), the committed episodes' bytes never rewritten. The episode
index, replaced atomically, is the commit point and comes last among the files that define
the episode.

A commit interrupted at any point is finished by running it again (``ortf recover``): it first
cuts back whatever the interrupted attempt appended, as journalled in the staged episode, then
does everything anew. Once the episode is in the index, running it again only finishes the
derived files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.dataset.accounting import committed_accounts, native_index_columns
from ortf_ros.dataset.audio_files import commit_audio, discard_audio
from ortf_ros.dataset.catalog import Catalog, empty_stats
from ortf_ros.dataset.config import RowGroupLimits
from ortf_ros.dataset.point_clouds import write_cloud_file
from ortf_ros.dataset.staging import EpisodeOutcome, StagedEpisode
from ortf_ros.dataset.stats import DatasetStats
from ortf_ros.errors import EmptyEpisodeError, WriterError
from ortf_ros.format import layout, point_clouds
from ortf_ros.format.accounting import accounts_from_rows
from ortf_ros.format.audio import audio_sensors
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.format.schema import step_schema, stream_schema
from ortf_ros.io import atomic, parquet_append, video
from ortf_ros.io.cpus import usable_cpus
from ortf_ros.io.signals import held_off

PARQUET_COMPRESSION = "zstd"


@dataclass(frozen=True)
class _StepScan:
    """How many leading staged steps have all their frames on disk, and their time span."""

    length: int
    first_timestamp: float
    last_timestamp: float


def _scan_steps(staged: StagedEpisode, limits: Mapping[str, int]) -> _StepScan:
    """``limits``: for each frame or sample index column, how many frames/samples exist."""
    length, first, last = 0, 0.0, 0.0
    for batch in staged.read_steps():
        valid = np.ones(batch.num_rows, dtype=bool)
        for column, count in limits.items():
            indices = batch.column(column).fill_null(-1).to_numpy()
            valid &= indices < count
        # Frames and samples are written before the steps that use them, so the steps
        # whose data survived a crash are a prefix.
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
    staged: StagedEpisode, schema: pa.Schema, start_step: int, length: int, terminal: bool, row_groups: RowGroupLimits
) -> Iterator[pa.Table]:
    """The episode's first ``length`` rows with global step indices and RLDS flags, in blocks."""
    emitted = 0
    for table in _blocks(_first_rows(staged.read_steps(), length), schema, row_groups):
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
        yield table


def _first_rows(batches: Iterable[pa.RecordBatch], count: int) -> Iterator[pa.RecordBatch]:
    """The first ``count`` rows: the steps whose frames and samples all reached the disk (``_scan_steps``)."""
    for batch in batches:
        if count <= 0:
            return
        batch = batch.slice(0, count)
        count -= batch.num_rows
        yield batch


def _blocks(batches: Iterable[pa.RecordBatch], schema: pa.Schema, row_groups: RowGroupLimits) -> Iterator[pa.Table]:
    """The batches as tables within ``row_groups`` (one Parquet row group each: row groups of a
    few rows would make the file's footer, and the memory that writes it, grow with the
    episode). The batches are not combined into one: that would copy the block, and the
    writer makes one row group of a table however it is chunked."""
    pending: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in batches:
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= row_groups.rows or size >= row_groups.bytes:
            yield pa.Table.from_batches(pending, schema=schema)
            pending, rows, size = [], 0, 0
    if pending:
        yield pa.Table.from_batches(pending, schema=schema)


def _write_parquet(path: Path, schema: pa.Schema, blocks: Iterable[pa.Table]) -> None:
    """``blocks`` as a new Parquet file (one row group each), written atomically."""

    def produce(tmp: Path) -> None:
        # Dictionary pages only where values repeat (episode ids): on float vectors they cost
        # memory while the writer falls back, and compress nothing.
        with pq.ParquetWriter(tmp, schema, compression=PARQUET_COMPRESSION, use_dictionary=["episode_id"]) as writer:
            for block in blocks:
                writer.write_table(block)

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_with(path, produce)


def _appended_tables(catalog: Catalog, chunk_id: int) -> list[str]:
    """The chunk's files a commit appends to: the step table, and the stream tables of a
    dataset that files its streams per chunk (written before per-episode stream files)."""
    relatives = [layout.steps_path(chunk_id)]
    if catalog.manifest.stream_files == layout.STREAM_FILES_PER_CHUNK:
        relatives += [layout.stream_path(chunk_id, s) for s in catalog.manifest.native_streams]
    return relatives


def _cut_back_appends(catalog: Catalog, staged: StagedEpisode, chunk_id: int) -> None:
    """Undo what an interrupted commit of ``staged`` appended to the chunk's tables."""
    for relative in _appended_tables(catalog, chunk_id):
        journal = staged.append_journal(relative)
        if journal.exists():
            parquet_append.cut_back(catalog.root / relative, journal)


def _append(
    catalog: Catalog, staged: StagedEpisode, relative: str, schema: pa.Schema, blocks: Iterable[pa.Table]
) -> None:
    """Append ``blocks`` to the chunk's table ``relative``, journalled in the staged episode:
    the rows become a Parquet file of their own first, then its row groups are added in place."""
    journal = staged.append_journal(relative)
    piece = journal.with_name(journal.name.removesuffix(".journal") + ".piece.parquet")
    _write_parquet(piece, schema, blocks)
    target = catalog.root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    parquet_append.append_row_groups(target, piece, journal)
    piece.unlink(missing_ok=True)


class _CountedTables:
    """Staged stream batches in blocks (``_blocks``), counting the rows as they pass."""

    def __init__(self, batches: Iterator[pa.RecordBatch], schema: pa.Schema, row_groups: RowGroupLimits) -> None:
        self._batches = batches
        self.schema = schema
        self.row_groups = row_groups
        self.count = 0

    def __iter__(self) -> Iterator[pa.Table]:
        for table in _blocks(self._batches, self.schema, self.row_groups):
            self.count += table.num_rows
            yield table


def _finalize_video(staged: Path, target: Path) -> int:
    """The staged video put in place (``video.finalize``); how many frames steps may reference
    (0 when the camera had none). Staged videos stay until the commit's last step, so a
    rolled-forward commit remuxes them again rather than trusting a copy it may have cut short."""
    return video.finalize(staged, target) if staged.exists() else 0


def _frames_held(target: Path, usable: int, plain: bool) -> int:
    """How many frames the committed file holds, as a reader counts them (the accounting's
    ``frames_in_video``): ``usable`` where the encoder's plain copy was put in place; after a
    crash, the remuxed file's own count, which a cut inside a B-frame group leaves above the
    gap-free frames steps may reference."""
    return usable if plain or not target.exists() else video.probe(target).frames


def _write_stream(
    catalog: Catalog, staged: StagedEpisode, stream: str, chunk_id: int, episode_index: int, row_groups: RowGroupLimits
) -> int:
    """The staged episode's samples of ``stream`` in place; how many they are."""
    samples = _CountedTables(staged.read_stream(stream), stream_schema(catalog.manifest, stream), row_groups)
    if catalog.manifest.stream_files == layout.STREAM_FILES_PER_EPISODE:
        target = catalog.root / layout.episode_stream_path(chunk_id, stream, episode_index)
        _write_parquet(target, samples.schema, samples)
    else:
        _append(catalog, staged, layout.stream_path(chunk_id, stream), samples.schema, samples)
    return samples.count


_WORKERS: ThreadPoolExecutor | None = None
_WORKERS_LOCK = threading.Lock()


def _commit_workers() -> ThreadPoolExecutor:
    """One pool for every commit of the process, its threads kept. Not a pool per commit: Arrow's
    allocator (mimalloc) keeps a heap per thread, and the heaps of threads that come and go were
    retained, so RSS grew by 0.2 MB an episode (``bench/bench_append.py``)."""
    global _WORKERS
    with _WORKERS_LOCK:
        if _WORKERS is None:
            _WORKERS = ThreadPoolExecutor(usable_cpus(), thread_name_prefix="ortf-commit")
        return _WORKERS


def _forget_workers() -> None:
    """In a forked child the pool's threads do not exist: the next commit makes a pool of its own."""
    global _WORKERS, _WORKERS_LOCK
    _WORKERS, _WORKERS_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_workers)


def _results(futures: Mapping[str, Future[int]]) -> dict[str, int]:
    """Every result, waiting for all before raising the first failure: a task still running
    would write into files the failed commit is about to cut back or leave for ``recover``."""
    wait(futures.values())
    return {name: future.result() for name, future in futures.items()}


def commit_staged(
    catalog: Catalog, staged: StagedEpisode, outcome: EpisodeOutcome, *, row_groups: RowGroupLimits
) -> EpisodeRecord:
    """Commit ``staged`` with ``outcome``; raises EmptyEpisodeError if it holds no complete step."""
    header = staged.header()
    committed = catalog.record(header.episode_id)
    if committed is not None:
        # The process died after the commit point: every file of the episode is in place.
        catalog.refresh_derived()
        staged.remove()
        return committed
    staged.mark_committing(outcome)
    chunk_id = header.episode_index // catalog.chunk_size
    _cut_back_appends(catalog, staged, chunk_id)
    try:
        record, episode_stats = _put_in_place(catalog, staged, outcome, chunk_id, row_groups)
        catalog.add(record)  # the commit point
    except BaseException:
        # Leave the chunk's tables as they were, so that this writer can go on with the next
        # episode; this one stays staged for `ortf recover`, which would cut back the same.
        with contextlib.suppress(Exception):
            _cut_back_appends(catalog, staged, chunk_id)
        raise
    catalog.fold_in(record, episode_stats)
    staged.remove()
    return record


def _put_in_place(
    catalog: Catalog, staged: StagedEpisode, outcome: EpisodeOutcome, chunk_id: int, row_groups: RowGroupLimits
) -> tuple[EpisodeRecord, DatasetStats]:
    """Every file of the episode but the index row: videos, streams, steps, annotations, task."""
    manifest = catalog.manifest
    header = staged.header()
    relatives = {camera: layout.video_path(camera, chunk_id, header.episode_index) for camera in manifest.cameras}
    # The videos and the streams are put in place each in a thread: FFmpeg and Arrow
    # do most of that work without the GIL, and the encoders' cores are free by now.
    # Handed over whole (a Ctrl-C in the middle of a submit could leave a pool thread that
    # the interpreter's shutdown waits for forever), and waited for even when stopped: the
    # tasks would write on into files the caller cuts back or removes next.
    counts: dict[str, Future[int]] = {}
    cloud_counts: dict[str, Future[int]] = {}
    try:
        with held_off():
            workers = _commit_workers()
            plain = {camera: video.plain_copy(staged.video_file(camera)).exists() for camera in relatives}
            for camera, relative in relatives.items():
                video_file, target = staged.video_file(camera), catalog.root / relative
                counts[layout.image_column(camera)] = workers.submit(_finalize_video, video_file, target)
            for stream in manifest.native_streams:
                counts[layout.stream_index_column(stream)] = workers.submit(
                    _write_stream, catalog, staged, stream, chunk_id, header.episode_index, row_groups
                )
            for name, declared in point_clouds.declarations(manifest).items():
                target = catalog.root / point_clouds.cloud_path(name, chunk_id, header.episode_index)
                cloud_counts[name] = workers.submit(write_cloud_file, staged.cloud_file(name), target, declared)
        limits = _results(counts)
        clouds = _results(cloud_counts)
    except BaseException:
        running = [*counts.values(), *cloud_counts.values()]
        for future in running:
            future.cancel()
        wait(running)
        raise
    scan = _scan_steps(staged, limits)
    if scan.length == 0:
        raise EmptyEpisodeError(f"episode {header.episode_id}: no complete step to commit")
    schema = step_schema(manifest)
    start_step = catalog.next_start_step
    episode_stats = empty_stats(manifest)
    sample_columns = native_index_columns(manifest)
    referencing = dict.fromkeys(sample_columns.values(), 0)

    def blocks_with_stats() -> Iterator[pa.Table]:
        for block in _final_blocks(staged, schema, start_step, scan.length, outcome.terminal, row_groups):
            episode_stats.update(block)
            for column, stream in sample_columns.items():
                referencing[stream] += block.num_rows - block.column(column).null_count
            yield block

    _append(catalog, staged, layout.steps_path(chunk_id), schema, blocks_with_stats())
    audio = commit_audio(staged.directory, catalog.root, audio_sensors(manifest), chunk_id, header.episode_index)
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
        video_files=relatives,
        audio_file=next((path for path, _ in audio.values()), None),  # the spec's: the first microphone's
        source=header.source,
        accounting=committed_accounts(
            accounts_from_rows(outcome.accounting),
            manifest,
            length=scan.length,
            frames_in_video={
                camera: _frames_held(catalog.root / relative, limits[layout.image_column(camera)], plain[camera])
                for camera, relative in relatives.items()
            },
            native_samples={stream: limits[column] for column, stream in sample_columns.items()},
            steps_referencing=referencing,
            audio_chunks={microphone: chunks for microphone, (_, chunks) in audio.items()},
            clouds=clouds,
        ),
    )
    return record, episode_stats


def discard_staged(catalog: Catalog, staged: StagedEpisode) -> None:
    """Drop a staged episode and anything an interrupted commit already put in place."""
    header = staged.header()
    if catalog.record(header.episode_id) is not None:
        raise WriterError(f"episode {header.episode_id} is already committed; it cannot be discarded here")
    chunk_id = header.episode_index // catalog.chunk_size
    _cut_back_appends(catalog, staged, chunk_id)
    for camera in catalog.manifest.cameras:
        (catalog.root / layout.video_path(camera, chunk_id, header.episode_index)).unlink(missing_ok=True)
    if catalog.manifest.stream_files == layout.STREAM_FILES_PER_EPISODE:
        for stream in catalog.manifest.native_streams:
            (catalog.root / layout.episode_stream_path(chunk_id, stream, header.episode_index)).unlink(missing_ok=True)
    discard_audio(catalog.root, audio_sensors(catalog.manifest), chunk_id, header.episode_index)
    for name in point_clouds.declarations(catalog.manifest):
        (catalog.root / point_clouds.cloud_path(name, chunk_id, header.episode_index)).unlink(missing_ok=True)
    if staged.outcome() is not None:
        shutil.rmtree(catalog.root / layout.annotations_dir(header.episode_index), ignore_errors=True)
    staged.remove()
