"""The committed metadata of a dataset: manifest, episode index, tasks and statistics.

``meta/episodes.parquet`` is the commit point: an episode exists once its row is
there. Files are replaced atomically in an order that keeps every intermediate
state valid: tasks first (an unused task is harmless), then the episode index, then
the derived files (statistics, manifest totals), which can lag by one episode after
a crash and are brought up to date by the next commit or by ``ortf recover``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.dataset.stats import DatasetStats
from ortf_ros.errors import FormatError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest, Statistics
from ortf_ros.format.metadata import (
    EpisodeRecord,
    EpisodeSource,
    Task,
    episodes_table,
    read_episodes,
    read_tasks,
    tasks_jsonl,
)
from ortf_ros.format.native_streams import AlignmentSummary
from ortf_ros.format.schema import feature_thresholds, stats_features
from ortf_ros.format.stored_files import Storage, as_storage
from ortf_ros.format.text import read_text
from ortf_ros.io import atomic

log = logging.getLogger(__name__)


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_utc(time_ns: int) -> str:
    """A time in nanoseconds since the epoch as ``recorded_at`` writes it (ISO 8601, UTC)."""
    return datetime.fromtimestamp(time_ns / 1e9, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_manifest_identity(manifest: Manifest) -> Manifest:
    """Fill the identity fields a caller may leave empty: dataset id and creation time."""
    return replace(
        manifest,
        dataset_id=manifest.dataset_id or str(uuid.uuid4()),
        created_at=manifest.created_at or utc_now_iso(),
    )


def empty_stats(manifest: Manifest) -> DatasetStats:
    return DatasetStats(stats_features(manifest), feature_thresholds(manifest))


def load_manifest(root: Path | Storage) -> Manifest:
    storage = as_storage(root)
    try:
        text = storage.read_text(layout.MANIFEST)
    except FileNotFoundError:
        raise FormatError(f"{layout.MANIFEST}: missing (is {storage.location} an ORTF dataset?)") from None
    return Manifest.from_json(text, storage.name(layout.MANIFEST))


_INDEX_CHUNKS = 64  # one-row pieces of the index table gathered into one past this many


def _folded_episodes(state: dict[str, object], episodes: list[EpisodeRecord]) -> set[str] | None:
    """The episodes the saved statistics include: the first ``episode_count`` of the index, or,
    in a state written before counts, the ids it lists; None if the state says neither."""
    count = state.get("episode_count")
    if isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= len(episodes):
        return {e.episode_id for e in episodes[:count]}
    listed = state.get("episodes")
    if isinstance(listed, list) and {str(i) for i in listed} <= {e.episode_id for e in episodes}:
        return {str(i) for i in listed}
    return None


NUMBERED_UP_TO_KEY = "episode_numbers_taken"
"""Manifest key: how many episode numbers were given, once the last of them was deleted."""


TASK_IDS_TAKEN_KEY = "task_ids_taken"
"""Manifest key: how many task ids were given, once the last of them was dropped with the
episodes that used it, so that a new task does not take the id of a dropped one."""


DELETED_SOURCES_KEY = "deleted_sources"
"""Manifest key: the recordings' episodes that were converted and then deleted (``source``
structs with the episode's ``episode_id``), so that converting the same recordings again
does not bring them back (``fleet.ledger``) unless asked to (``--again``), and ``ortf info``
lists them (``held_recordings``)."""

DELETED_ID_KEY = "episode_id"
"""The deleted episode's id, beside its source in a ``DELETED_SOURCES_KEY`` entry (absent in
entries written before it was kept)."""


def _number(episode_id: str) -> int:
    """The number of a sequential id (``layout.episode_id_for``); -1 for an id of another form."""
    return int(episode_id) if episode_id.isascii() and episode_id.isdigit() else -1


def write_episode_index(root: Path, table: pa.Table) -> None:
    """``meta/episodes.parquet`` replaced atomically by ``table``: the commit point of every change."""
    atomic.write_with(root / layout.EPISODES, lambda tmp: pq.write_table(table, tmp))


class Catalog:
    def __init__(
        self,
        root: Path,
        manifest: Manifest,
        episodes: list[EpisodeRecord],
        tasks: list[Task],
        stats: DatasetStats,
        stats_episode_count: int,
    ) -> None:
        self.root = root
        self.manifest = manifest
        self.episodes = episodes
        self.tasks = tasks
        self.stats = stats
        # How many leading rows of the index are folded into ``stats``, so a commit that is
        # rolled forward after a crash is never counted twice. A count, not a list of ids:
        # the state written at every commit stays the same size however many episodes there are.
        self.stats_episode_count = stats_episode_count
        self._by_id = {e.episode_id: e for e in episodes}
        self._index: pa.Table | None = None  # ``episodes`` as the Arrow table of the index file
        self._count_totals()

    @classmethod
    def create(cls, root: Path, manifest: Manifest) -> Catalog:
        catalog = cls(root, manifest, [], [], empty_stats(manifest), 0)
        atomic.write_text(root / layout.TASKS, "")
        catalog._write_episodes(catalog._index_table())
        catalog._write_stats()
        catalog._write_manifest()
        return catalog

    @classmethod
    def load(cls, root: Path) -> Catalog:
        manifest = load_manifest(root)
        episodes = read_episodes(root)
        tasks = read_tasks(root)
        state_path = root / layout.STATS_STATE
        if state_path.exists():
            try:
                state = json.loads(read_text(state_path))
            except json.JSONDecodeError as exc:
                raise FormatError(f"{layout.STATS_STATE}: not valid JSON: {exc}") from None
            included = _folded_episodes(state, episodes)
        else:
            included = None
        if included is None:  # no state, or one that does not say what it holds: start anew
            stats, included = empty_stats(manifest), set()
        else:
            features = state.get("features", {})
            stats = DatasetStats.from_state(stats_features(manifest), feature_thresholds(manifest), features)
        missing = [e for e in episodes if e.episode_id not in included]
        if missing:
            # Another writer made this dataset, or a crash came between the episode
            # index and the statistics: fold in just the episodes the state lacks.
            log.warning("%s: statistics lack %d episode(s); reading their steps once", root, len(missing))
            cls._fold_in_steps(root, stats, missing)
        return cls(root, manifest, episodes, tasks, stats, len(episodes))

    @staticmethod
    def _fold_in_steps(root: Path, stats: DatasetStats, episodes: list[EpisodeRecord]) -> None:
        for episode in episodes:
            table = pq.read_table(
                root / layout.steps_path(episode.chunk_id),
                columns=list(stats.features),
                filters=[("episode_id", "=", episode.episode_id)],
            )
            stats.update(table)

    @property
    def chunk_size(self) -> int:
        """Episodes per chunk, as recorded at creation (a dataset keeps its chunking)."""
        value = self.manifest.extra.get("chunk_size", layout.DEFAULT_CHUNK_SIZE)
        return value if isinstance(value, int) and value > 0 else layout.DEFAULT_CHUNK_SIZE

    @property
    def total_steps(self) -> int:
        return self._total_steps

    @property
    def next_start_step(self) -> int:
        """Where the next episode's steps begin: past every episode's, not the sum of their
        lengths, since a deleted episode (``ortf episodes delete``) leaves a gap in the step
        ranges and the episodes after it keep theirs."""
        return self._next_start_step

    @property
    def next_episode_index(self) -> int:
        """The number the next episode is given: past every numbered episode's, and past every
        deleted one's (``NUMBERED_UP_TO_KEY``), so that the id of a deleted episode is not given
        again (a review, a note, a link may name it)."""
        numbered = self.manifest.extra.get(NUMBERED_UP_TO_KEY, 0)
        numbered = numbered if isinstance(numbered, int) and not isinstance(numbered, bool) else 0
        return max(len(self.episodes), self._next_number, numbered)

    def note_numbers_taken(self, episode_ids: Sequence[str]) -> None:
        """Remember that these (deleted) episodes' numbers were given, in the manifest written next."""
        taken = max((_number(i) + 1 for i in episode_ids), default=0)
        if taken > self.next_episode_index:
            self.manifest = replace(self.manifest, extra={**self.manifest.extra, NUMBERED_UP_TO_KEY: taken})

    def note_sources_deleted(self, deleted: Sequence[tuple[str, EpisodeSource]]) -> None:
        """Remember the deleted episodes' sources, each with the episode's id
        (``DELETED_SOURCES_KEY``; ``held_recordings`` reads them), in the manifest written next."""
        if not deleted:
            return
        known = self.manifest.extra.get(DELETED_SOURCES_KEY)
        listed = list(known) if isinstance(known, list) else []
        entries = [{**source.to_dict(), DELETED_ID_KEY: episode_id} for episode_id, source in deleted]
        listed += [entry for entry in entries if entry not in listed]
        self.manifest = replace(self.manifest, extra={**self.manifest.extra, DELETED_SOURCES_KEY: listed})

    def _count_totals(self) -> None:
        self._total_steps = sum(e.length for e in self.episodes)
        self._total_seconds = sum(e.duration_seconds for e in self.episodes)
        self._next_start_step = max((e.end_step for e in self.episodes), default=0)
        self._next_number = max((_number(e.episode_id) + 1 for e in self.episodes), default=0)

    def task_id(self, instruction: str, task_type: str | None = None, description: str | None = None) -> int:
        """The id of this instruction, defining a new task on first use."""
        for task in self.tasks:
            if task.instruction == instruction:
                return task.task_id
        taken = self.manifest.extra.get(TASK_IDS_TAKEN_KEY, 0)
        taken = taken if isinstance(taken, int) and not isinstance(taken, bool) else 0
        number = max(max((t.task_id for t in self.tasks), default=-1) + 1, taken)
        task = Task(number, instruction, task_type, description)
        self.tasks.append(task)
        atomic.write_text(self.root / layout.TASKS, tasks_jsonl(self.tasks))
        return task.task_id

    def record(self, episode_id: str) -> EpisodeRecord | None:
        """The committed episode ``episode_id``, if it is."""
        return self._by_id.get(episode_id)

    def add(self, record: EpisodeRecord) -> None:
        """The commit point: the episode index with ``record``, replaced atomically. Until the
        file is in place the episode is not committed, here as on disk.

        The index is kept as an Arrow table and grown by a row, so a commit costs a copy of the
        index's bytes (a few hundred per episode), not a Python object per episode."""
        index = pa.concat_tables([self._index_table(), episodes_table([record], self.manifest)])
        if index.column(0).num_chunks > _INDEX_CHUNKS:
            index = index.combine_chunks()
        self._write_episodes(index)
        self._index = index
        self.episodes.append(record)
        self._by_id[record.episode_id] = record
        self._total_steps += record.length
        self._total_seconds += record.duration_seconds
        self._next_start_step = max(self._next_start_step, record.end_step)
        self._next_number = max(self._next_number, _number(record.episode_id) + 1)

    def rewrite(self, episodes: list[EpisodeRecord]) -> None:
        """The commit point of an edit (``ortf_ros.dataset.edits``): the index replaced
        atomically by ``episodes`` (labels changed, rows removed). The statistics are then
        the caller's to bring up to date (``replace_stats``), as after ``add``."""
        index = episodes_table(episodes, self.manifest)
        self._write_episodes(index)
        self._index = index
        self.episodes = episodes
        self._by_id = {e.episode_id: e for e in episodes}
        self._count_totals()

    def replace_stats(self, stats: DatasetStats) -> None:
        """Statistics computed anew over every episode of the index, written with the manifest totals."""
        self.stats = stats
        self.stats_episode_count = len(self.episodes)
        self.refresh_derived()

    def drop_unused_tasks(self) -> None:
        """Tasks.jsonl without the tasks no episode uses any more (after a delete; the
        episodes' task ids stay as they are, and a dropped task's id is not given again:
        ``TASK_IDS_TAKEN_KEY``)."""
        used = {e.task_id for e in self.episodes}
        kept = [t for t in self.tasks if t.task_id in used]
        if len(kept) != len(self.tasks):
            # The ids given so far go into the manifest before the tasks leave tasks.jsonl: a
            # crash in between leaves the delete's journal to drop them, with the ids remembered.
            taken = max(t.task_id for t in self.tasks) + 1
            if taken > max((t.task_id + 1 for t in kept), default=0):
                self.manifest = replace(self.manifest, extra={**self.manifest.extra, TASK_IDS_TAKEN_KEY: taken})
                self._write_manifest()
            self.tasks = kept
            atomic.write_text(self.root / layout.TASKS, tasks_jsonl(kept))

    def complete_source(self, episode_ids: Sequence[str], count: int) -> None:
        """Write on these episodes (of one recording) that the recording gave ``count``
        (``EpisodeSource.episodes``): the index replaced atomically once, as at a commit.

        They are looked for from the end, where a conversion just committed them; when they
        are the index's last rows, only those rows are made anew, so the cost does not grow
        with the dataset (a fleet's run calls this once a recording)."""
        wanted = set(episode_ids)
        positions = []
        for position in range(len(self.episodes) - 1, -1, -1):
            if not wanted:
                break
            if self.episodes[position].episode_id in wanted:
                wanted.discard(self.episodes[position].episode_id)
                positions.append(position)
        changed = []
        for position in positions:
            record = self.episodes[position]
            if record.source is not None and record.source.episodes != count:
                self.episodes[position] = replace(record, source=replace(record.source, episodes=count))
                self._by_id[record.episode_id] = self.episodes[position]
                changed.append(position)
        if not changed:
            return
        first = min(changed)
        index = self._index_table()
        if first >= len(self.episodes) - len(positions) and index.num_rows == len(self.episodes):
            tail = episodes_table(self.episodes[first:], self.manifest)
            index = pa.concat_tables([index.slice(0, first), tail]).combine_chunks()
        else:
            index = episodes_table(self.episodes, self.manifest)
        self._write_episodes(index)
        self._index = index

    def fold_in(self, record: EpisodeRecord, episode_stats: DatasetStats) -> None:
        """After ``add``: the statistics and manifest totals that derive from the index."""
        if self.stats_episode_count == len(self.episodes) - 1 and self.episodes[-1] is record:
            self.stats.merge(episode_stats)
            self.stats_episode_count += 1
        self._write_stats()
        self._write_manifest()

    def refresh_derived(self) -> None:
        """Rewrite statistics and manifest totals from the current index."""
        self._write_stats()
        self._write_manifest()

    def _index_table(self) -> pa.Table:
        if self._index is None:
            self._index = episodes_table(self.episodes, self.manifest)
        return self._index

    def _write_episodes(self, table: pa.Table) -> None:
        write_episode_index(self.root, table)

    def _write_stats(self) -> None:
        state = {"episode_count": self.stats_episode_count, "features": self.stats.to_state()}
        atomic.write_json(self.root / layout.STATS_STATE, state)
        atomic.write_json(self.root / layout.STATS, self.stats.summary())

    def _alignment_summary(self, stream: str) -> AlignmentSummary:
        feature = self.stats.features[layout.alignment_column(stream)]
        return AlignmentSummary(
            steps=feature.count,
            max_ms=float(feature.maximum[0]) if feature.count else 0.0,
            p95_ms=feature.quantile(0.95)[0],
            steps_outside_tolerance=feature.above,
        )

    def _write_manifest(self) -> None:
        statistics = Statistics(len(self.episodes), self._total_steps, self._total_seconds / 3600.0)
        self.manifest = self.manifest.with_statistics(statistics)
        if self.manifest.alignment is not None:
            summary = {s: self._alignment_summary(s) for s in self.manifest.alignment.streams}
            self.manifest = replace(self.manifest, alignment=replace(self.manifest.alignment, summary=summary))
        atomic.write_json(self.root / layout.MANIFEST, self.manifest.to_dict())
