"""Rules on the episode index (meta/episodes.parquet) and the task list (meta/tasks.jsonl).

Both files are small (a row per episode or task), so they are read whole; every row is
checked and reported, unlike ``ortf_ros.format.metadata``, which stops at the first bad row.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.dataset.validation.findings import Finding, finding
from ortf_ros.format import layout
from ortf_ros.format.accounting import (
    ACCOUNTING_COLUMN,
    LEGACY_ACCOUNTING_TYPES,
    accounts_from_rows,
    inconsistencies,
)
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.metadata import EpisodeRecord, EpisodeSource
from ortf_ros.format.schema import OPTIONAL_EPISODE_COLUMNS, SOURCE_COLUMN, episode_schema

_EPISODES = layout.EPISODES
_TASKS = layout.TASKS
_VIDEO_FILES = "video_files"


@dataclass(frozen=True)
class Episode:
    """An episode index row and the number its files are named after."""

    record: EpisodeRecord
    index: int

    @property
    def id(self) -> str:
        return self.record.episode_id


def load_episodes(root: Path, manifest: Manifest) -> tuple[list[Episode] | None, list[Finding]]:
    """The episode rows, or None when the columns that locate steps are unusable."""
    try:
        table = pq.read_table(root / _EPISODES)
    except FileNotFoundError:
        return None, [finding("episodes.missing", _EPISODES, "the episode index is missing")]
    except (pa.ArrowException, OSError) as exc:
        return None, [finding("episodes.unreadable", _EPISODES, f"not readable Parquet: {exc}")]
    usable, found = _check_columns(table, manifest)
    # Without these the rows cannot be checked or their steps found.
    required = {f.name for f in episode_schema(manifest) if not f.nullable or f.name == _VIDEO_FILES}
    if not required <= usable:
        return None, found
    episodes = []
    for position, row in enumerate(table.to_pylist()):
        values: dict[str, Any] = {name: row[name] for name in usable}
        values[_VIDEO_FILES] = dict(values.get(_VIDEO_FILES) or {})
        values[SOURCE_COLUMN] = EpisodeSource.from_dict(values.get(SOURCE_COLUMN))
        try:
            values[ACCOUNTING_COLUMN] = accounts_from_rows(values.get(ACCOUNTING_COLUMN))
        except (KeyError, TypeError, ValueError) as exc:
            message = f"episode {row['episode_id']}: not per-stream counts: {exc}"
            found.append(finding("episodes.accounting", _EPISODES, message, field=ACCOUNTING_COLUMN))
            values[ACCOUNTING_COLUMN] = None
        record = EpisodeRecord(**values)
        episodes.append(Episode(record, layout.file_index(record.episode_id, position)))
    return episodes, found


def _check_columns(table: pa.Table, manifest: Manifest) -> tuple[set[str], list[Finding]]:
    """Columns that have their expected type (and no nulls where none are allowed)."""
    usable: set[str] = set()
    found = []
    for expected in episode_schema(manifest):
        if expected.name in OPTIONAL_EPISODE_COLUMNS and expected.name not in table.column_names:
            continue
        problem = _column_problem(table, expected)
        if problem is None:
            usable.add(expected.name)
        else:
            found.append(finding("episodes.schema", _EPISODES, problem, field=expected.name))
    return usable, found


def _column_problem(table: pa.Table, expected: pa.Field) -> str | None:
    if expected.name not in table.column_names:
        return f"column is missing (expected {expected.type})"
    column = table.column(expected.name)
    if expected.name == _VIDEO_FILES:
        return _video_files_problem(column.type, expected.type)
    if column.type != expected.type and not (
        expected.name == ACCOUNTING_COLUMN and column.type in LEGACY_ACCOUNTING_TYPES
    ):
        return f"has type {column.type}; expected {expected.type}"
    if not expected.nullable and column.null_count:
        return f"has {column.null_count} null value(s)"
    return None


def _video_files_problem(actual: pa.DataType, expected: pa.StructType) -> str | None:
    """A struct with a string per camera; other members (a tool's extras) are allowed."""
    if not pa.types.is_struct(actual):
        return f"has type {actual}; expected {expected}"
    names = [actual.field(i).name for i in range(actual.num_fields)]
    bad = [
        camera
        for camera in (expected.field(i).name for i in range(expected.num_fields))
        if camera not in names or actual.field(camera).type != pa.string()
    ]
    return f"needs a string member per camera; missing or not strings: {', '.join(bad)}" if bad else None


def check_episode(root: Path, manifest: Manifest, episode: Episode, tasks: set[int] | None) -> list[Finding]:
    """The rules on one row; ``tasks`` is None when tasks.jsonl is unusable (reported on its own)."""
    r = episode.record

    def note(rule: str, message: str, field: str) -> None:
        found.append(finding(rule, _EPISODES, message, episode=r.episode_id, field=field))

    found: list[Finding] = []
    if r.length != r.end_step - r.start_step:
        note("episodes.length", f"length {r.length} != end_step {r.end_step} - start_step {r.start_step}", "length")
    if r.length < 1:
        note("episodes.empty", f"episode has length {r.length}; an episode needs at least one step", "length")
    if tasks is not None and r.task_id not in tasks:
        note("episodes.task_id", f"task {r.task_id} is not defined in {_TASKS}", "task_id")
    if r.recorded_at is not None and not _is_iso8601(r.recorded_at):
        note("episodes.recorded_at", f"{r.recorded_at!r} is not an ISO 8601 timestamp", "recorded_at")
    if r.success is True and r.failure_reason:
        note("episodes.success_reason", f"success is true but failure_reason is {r.failure_reason!r}", "failure_reason")
    if r.audio_file is not None and not (root / r.audio_file).is_file():
        note("episodes.audio_file", f"{r.audio_file} does not exist", "audio_file")
    for camera, sensor in manifest.cameras.items():
        field = f"{_VIDEO_FILES}.{camera}"
        path = r.video_files.get(camera)
        suffix = ".npz" if sensor.encoding == "npz" else ".mp4"
        canonical = PurePosixPath(layout.video_path(camera, r.chunk_id, episode.index, suffix))
        if path is None:
            note("episodes.video_path", f"no video for camera {camera!r}; expected {canonical}", field)
        elif PurePosixPath(path).parent != canonical.parent:
            note("episodes.video_path", f"{path} is not under {canonical.parent}/ (chunk {r.chunk_id})", field)
        elif PurePosixPath(path).name != canonical.name:
            note("episodes.video_name", f"{path} is not named {canonical.name}", field)
    for account in r.accounting or ():
        for problem in inconsistencies(account):
            note("episodes.accounting_stages", f"stream {account.stream}: {problem}", ACCOUNTING_COLUMN)
    return found


def _is_iso8601(text: str) -> bool:
    # Python 3.10 (ROS 2 Humble) does not read the "Z" suffix that most writers use.
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def check_episode_index(episodes: Iterable[Episode]) -> list[Finding]:
    """Rules across rows: unique ids and disjoint step ranges."""
    rows = list(episodes)
    found = [
        finding("episodes.unique_id", _EPISODES, f"id appears {n} times", episode=episode_id, field="episode_id")
        for episode_id, n in Counter(e.id for e in rows).items()
        if n > 1
    ]
    ordered = sorted((e for e in rows if e.record.length > 0), key=lambda e: e.record.start_step)
    reach: Episode | None = None  # the episode reaching furthest so far
    for episode in ordered:
        if reach is not None and episode.record.start_step < reach.record.end_step:
            message = (
                f"steps [{episode.record.start_step}, {episode.record.end_step}) overlap episode {reach.id}'s "
                f"[{reach.record.start_step}, {reach.record.end_step})"
            )
            found.append(finding("episodes.overlap", _EPISODES, message, episode=episode.id, field="start_step"))
        if reach is None or episode.record.end_step > reach.record.end_step:
            reach = episode
    return found


def load_tasks(root: Path, *, required: bool) -> tuple[set[int] | None, list[Finding]]:
    """Defined task ids; ``required`` when episodes exist to reference them."""
    try:
        with (root / _TASKS).open(encoding="utf-8") as lines:
            return _parse_tasks(lines)
    except FileNotFoundError:
        missing = finding("tasks.missing", _TASKS, "episodes reference tasks but there is no task list")
        return None, [missing] if required else []
    except (OSError, UnicodeDecodeError) as exc:
        return None, [finding("tasks.invalid", _TASKS, f"cannot be read: {exc}")]


def _parse_tasks(lines: Iterable[str]) -> tuple[set[int], list[Finding]]:
    ids: set[int] = set()
    found: list[Finding] = []

    def note(rule: str, number: int, message: str, field: str | None = None) -> None:
        found.append(finding(rule, _TASKS, f"line {number}: {message}", field=field))

    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            note("tasks.invalid", number, f"not valid JSON: {exc}")
            continue
        if not isinstance(data, Mapping):
            note("tasks.invalid", number, f"expected an object, got {type(data).__name__}")
            continue
        task_id = data.get("task_id")
        if not isinstance(task_id, int) or isinstance(task_id, bool):
            note("tasks.invalid", number, f"expected an integer, got {task_id!r}", "task_id")
            continue
        instruction = data.get("instruction")
        if instruction is None and "task" in data:
            note("tasks.task_key", number, "instruction is under LeRobot's 'task' key", "task")
            instruction = data["task"]
        if not isinstance(instruction, str):
            note("tasks.invalid", number, f"expected a string, got {instruction!r}", "instruction")
        if task_id in ids:
            note("tasks.unique_id", number, f"task {task_id} is defined again", "task_id")
        ids.add(task_id)
    return ids, found
