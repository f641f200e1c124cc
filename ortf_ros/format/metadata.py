"""Episode index rows and task definitions, to and from their files.

One implementation serves the writer (which appends) and the reader (which may meet
datasets from other writers), so both agree on column names, types and nulls.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ortf_ros.errors import FormatError
from ortf_ros.format import layout
from ortf_ros.format.accounting import ACCOUNTING_COLUMN, StreamAccount, accounts_to_rows, stored_accounts
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.schema import episode_schema
from ortf_ros.format.stored_files import Storage, as_storage


@dataclass(frozen=True)
class Task:
    task_id: int
    instruction: str
    type: str | None = None
    description: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"task_id": self.task_id}
        if self.type is not None:
            data["type"] = self.type
        data["instruction"] = self.instruction
        if self.description is not None:
            data["description"] = self.description
        return data


@dataclass(frozen=True)
class EpisodeSource:
    """Where an episode converted from a recording came from (the ``source`` column of
    meta/episodes.parquet, an extension: null for a live episode, absent in other writers'
    datasets). It is what lets ``ortf-bag2ortf`` run again over the same recordings and
    convert only those the dataset does not hold yet (``fleet/ledger.py``).

    A recording is known by ``fingerprint`` (``pipeline/sources/identity.py``), not by its
    path or time: copied to shared storage, or seen at another mount point on another
    node, it is the same recording. ``path``, ``size`` and ``mtime_ns`` are what it was
    when converted, for people and for the warning that a path now holds other content.
    ``episode`` is this episode's place among those the recording gave, ``episodes`` how
    many it gave: None while a conversion straight into the dataset has not committed the
    last of them (an import has it from the start). A recording is whole in a dataset
    when it holds every place below ``episodes``: one whose conversion was cut off between
    two of its episodes is known to be incomplete either way."""

    path: str
    size: int
    mtime_ns: int
    fingerprint: str
    episode: int = 0
    episodes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "mtime_ns": self.mtime_ns,
            "fingerprint": self.fingerprint,
            "episode": self.episode,
            "episodes": self.episodes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> EpisodeSource | None:
        """From a row's struct (or a staged header's JSON); None for a null one (or one not
        of this shape: another tool's column of that name, which the validator reports)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("fingerprint"), str):
            return None
        episodes = data.get("episodes")
        return cls(
            path=str(data.get("path") or ""),
            size=int(data.get("size") or 0),
            mtime_ns=int(data.get("mtime_ns") or 0),
            fingerprint=str(data["fingerprint"]),
            episode=int(data.get("episode") or 0),
            episodes=None if episodes is None else int(episodes),
        )


@dataclass(frozen=True)
class EpisodeRecord:
    """One row of meta/episodes.parquet."""

    episode_id: str
    task_id: int
    start_step: int
    end_step: int
    length: int
    duration_seconds: float
    chunk_id: int
    success: bool | None = None
    failure_reason: str | None = None
    operator_notes: str | None = None
    recorded_at: str | None = None
    video_files: Mapping[str, str | None] = field(default_factory=dict)
    audio_file: str | None = None
    source: EpisodeSource | None = None
    # Per stream, what it delivered at each stage (``format.accounting``); None: not counted
    # (another writer's dataset, an older one).
    accounting: Sequence[StreamAccount] | None = None
    review_flag: bool | None = None  # an extension (``schema.REVIEW_FLAG_COLUMN``); None: not reviewed


def read_tasks(root: Path | Storage) -> list[Task]:
    """Tasks by line; LeRobot-style ``{"task": ...}`` lines are read as instructions."""
    try:
        text = as_storage(root).read_text(layout.TASKS)
    except FileNotFoundError:
        return []
    tasks = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{layout.TASKS}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{where}: not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise FormatError(f"{where}: expected an object")
        task_id = data.get("task_id")
        instruction = data.get("instruction", data.get("task"))
        if not isinstance(task_id, int) or isinstance(task_id, bool):
            raise FormatError(f"{where}: task_id: expected an integer, got {task_id!r}")
        if not isinstance(instruction, str):
            raise FormatError(f"{where}: instruction: expected a string, got {instruction!r}")
        tasks.append(Task(task_id, instruction, data.get("type"), data.get("description")))
    return tasks


def tasks_jsonl(tasks: Iterable[Task]) -> str:
    return "".join(json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in tasks)


REQUIRED_EPISODE_COLUMNS = ("episode_id", "task_id", "start_step", "end_step", "length", "duration_seconds", "chunk_id")


def read_episodes(root: Path | Storage) -> list[EpisodeRecord]:
    try:
        table = as_storage(root).read_table(layout.EPISODES)
    except FileNotFoundError:
        raise FormatError(f"{layout.EPISODES}: missing") from None
    except (pa.ArrowException, OSError) as exc:
        raise FormatError(f"{layout.EPISODES}: unreadable Parquet: {exc}") from None
    for column in REQUIRED_EPISODE_COLUMNS:
        if column not in table.column_names:
            raise FormatError(f"{layout.EPISODES}: column {column!r} is missing")
    # (The accounting stays Arrow until it is read: ``StoredAccounts``.)
    rows = table.drop_columns([c for c in (ACCOUNTING_COLUMN,) if c in table.column_names]).to_pylist()
    accounting = stored_accounts(table, [str(row["episode_id"]) for row in rows])
    records = []
    for row, accounts in zip(rows, accounting, strict=True):
        try:
            records.append(
                EpisodeRecord(
                    episode_id=str(row["episode_id"]),
                    task_id=int(row["task_id"]),
                    start_step=int(row["start_step"]),
                    end_step=int(row["end_step"]),
                    length=int(row["length"]),
                    duration_seconds=float(row["duration_seconds"]),
                    chunk_id=int(row["chunk_id"]),
                    success=row.get("success"),
                    failure_reason=row.get("failure_reason"),
                    operator_notes=row.get("operator_notes"),
                    recorded_at=row.get("recorded_at"),
                    video_files=dict(row.get("video_files") or {}),
                    audio_file=row.get("audio_file"),
                    source=EpisodeSource.from_dict(row.get("source")),
                    accounting=accounts,
                    review_flag=_flag(row.get("review_flag")),
                )
            )
        except (TypeError, ValueError, KeyError) as exc:
            raise FormatError(f"{layout.EPISODES}: episode {row.get('episode_id')!r}: bad value: {exc}") from None
    return records


def _flag(value: object) -> bool | None:
    """A review flag as stored; another tool's column of that name that holds no booleans
    reads as not reviewed (the validator reports its type)."""
    return value if isinstance(value, bool) else None


def episodes_table(records: Iterable[EpisodeRecord], manifest: Manifest) -> pa.Table:
    schema = episode_schema(manifest)
    cameras = list(manifest.cameras)
    rows = []
    for r in records:
        row: dict[str, Any] = {
            "episode_id": r.episode_id,
            "task_id": r.task_id,
            "start_step": r.start_step,
            "end_step": r.end_step,
            "length": r.length,
            "duration_seconds": r.duration_seconds,
            "success": r.success,
            "failure_reason": r.failure_reason,
            "operator_notes": r.operator_notes,
            "chunk_id": r.chunk_id,
            "recorded_at": r.recorded_at,
            "audio_file": r.audio_file,
            "source": None if r.source is None else r.source.to_dict(),
            "accounting": accounts_to_rows(r.accounting),
            "review_flag": r.review_flag,
        }
        if cameras:
            row["video_files"] = {c: r.video_files.get(c) for c in cameras}
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema)
