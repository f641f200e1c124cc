"""The on-disk state of an episode that is still recording or being committed.

Everything an episode produces is appended here as it arrives, so a killed process
loses only what was in flight:

    .staging/episode_000007/
        episode.json     who the episode is (written once, atomically, at begin)
        steps.arrows     Arrow IPC stream of steps in batches (see logs.StepRows), never rewritten
        streams/<name>.arrows  native-rate samples, in batches (see logs.SampleLog)
        videos/<cam>.mp4 fragmented MP4, every packet flushed
        videos/<cam>.mp4.plain  the committed plain MP4, once the encoder closed cleanly
        annotations/     given at the end, moved into place on commit
        COMMIT.json      present once end_episode started committing (the outcome)
        appends/<file>.piece.parquet  a chunk table's new rows, before they are appended to it
        appends/<file>.journal  how to undo that append (io.parquet_append)

Committed episodes never live here; the directory is removed after a commit, and
``ortf recover`` finishes or discards whatever a crash left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from ortf_ros.dataset.logs import read_log
from ortf_ros.errors import DatasetBusyError, FormatError
from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeSource
from ortf_ros.format.text import read_text
from ortf_ros.io import atomic
from ortf_ros.io.paths import DirectoryTimes

HEADER_FILE = "episode.json"
COMMIT_FILE = "COMMIT.json"
STEPS_FILE = "steps.arrows"
LOCK_FILE = "writer.lock"


@dataclass(frozen=True)
class EpisodeHeader:
    """What is known when an episode begins."""

    episode_index: int
    episode_id: str
    task: str
    recorded_at: str
    task_type: str | None = None
    task_description: str | None = None
    source: EpisodeSource | None = None  # the recording it is converted from (offline)

    @classmethod
    def from_dict(cls, data: dict[str, Any], file: str) -> EpisodeHeader:
        try:
            return cls(
                episode_index=int(data["episode_index"]),
                episode_id=str(data["episode_id"]),
                task=str(data["task"]),
                recorded_at=str(data["recorded_at"]),
                task_type=data.get("task_type"),
                task_description=data.get("task_description"),
                source=EpisodeSource.from_dict(data.get("source")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"{file}: malformed staged episode header: {exc!r}") from None


@dataclass(frozen=True)
class EpisodeOutcome:
    """What is known when an episode ends; ``terminal`` follows RLDS is_terminal."""

    success: bool | None = None
    failure_reason: str | None = None
    operator_notes: str | None = None
    terminal: bool = False
    # The pipeline's per-stream counts and the frames handed to each encoder, as JSON
    # (``StreamAccount.to_dict``); None when the episode was not ended by its writer.
    accounting: list[dict[str, Any]] | None = None


def staging_root(root: Path) -> Path:
    return root / layout.STAGING_DIR


def staged_episode_dirs(root: Path) -> list[Path]:
    base = staging_root(root)
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and p.name.startswith("episode_"))


LOCK_WAIT_S = 5.0
"""How long taking the writer lock waits for it. The encoder processes of a writer hold
the lock too, until its videos are closed: after the writer is killed they encode what
they were handed and close the files, well within this, and only then may the episode
be recovered or a new writer begin."""


@dataclass
class DatasetLock:
    """The writer lock, held (``lock_dataset``), and what taking it made: the lock file and
    the staging directory when they were not there, and the episodes staged then. A holder
    that staged nothing (an append or ``ortf recover`` refused by what was staged before)
    leaves the dataset as it found it (``unlock_dataset``)."""

    handle: IO[bytes]
    made: tuple[Path, ...]
    staged: frozenset[Path]
    times: DirectoryTimes | None  # of the directory the lock file (or the staging directory) was made in

    def fileno(self) -> int:
        return self.handle.fileno()

    def close(self) -> None:
        """Release the lock, leaving its file (``unlock_dataset`` removes it)."""
        self.handle.close()


def lock_dataset(root: Path, wait_s: float = LOCK_WAIT_S) -> DatasetLock:
    """Take the dataset's writer lock (released by closing it, or by the kernel when the
    process dies, so a crash never leaves a stale lock), waiting up to ``wait_s``.

    The lock is that of the file now at the lock's path: a writer that ends with nothing
    staged removes the file, and a lock taken meanwhile on the file it removed would
    exclude nobody, so it is taken again on the new one."""
    deadline = time.monotonic() + wait_s
    while True:
        lock = _locked_file(root)
        if lock is not None:
            return lock
        if time.monotonic() >= deadline:
            raise DatasetBusyError(
                f"{root}: another process is writing this dataset (waited {wait_s:g} s for it to finish)"
            )
        time.sleep(0.02)


def _locked_file(root: Path) -> DatasetLock | None:
    """The lock file, locked; None while another process holds it. What this try made
    (the file, the staging directory) is told by making it, not by looking first: two
    processes refused one after the other must each remove their own."""
    staging = staging_root(root)
    path = staging / LOCK_FILE
    made: list[Path] = []
    times = DirectoryTimes.of(root) if root.is_dir() and not staging.exists() else None
    try:
        staging.mkdir(parents=True)
        made.append(staging)
    except FileExistsError:
        times = DirectoryTimes.of(staging) if not path.exists() else None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL)
        made.insert(0, path)
    except FileExistsError:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:  # removed by the writer that just ended
            return None
    handle = os.fdopen(fd, "ab")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        held, current = os.fstat(handle.fileno()), os.stat(path)
    except (BlockingIOError, FileNotFoundError):  # held elsewhere; or removed by the writer that just ended
        handle.close()
        return None
    if (held.st_dev, held.st_ino) != (current.st_dev, current.st_ino):
        handle.close()
        return None
    return DatasetLock(handle, tuple(made), frozenset(staged_episode_dirs(root)), times if made else None)


def unlock_dataset(root: Path, lock: DatasetLock) -> None:
    """Release the lock; with nothing staged, leave no trace of the writer in the dataset
    (unless another writer has begun meanwhile: then its lock file stays). With episodes
    staged, the lock file stays (a writer's encoder processes hold it until their videos
    are closed), unless the holder staged none of them and taking the lock made it."""
    staging = staging_root(root)
    staged = staged_episode_dirs(root)
    if not staged or (staging / LOCK_FILE in lock.made and lock.staged.issuperset(staged)):
        (staging / LOCK_FILE).unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # (ENOTEMPTY: another writer's lock file, just made; or staged episodes)
            staging.rmdir()
        if lock.times is not None:
            lock.times.put_back()
    lock.close()


class StagedEpisode:
    """One staged episode directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @staticmethod
    def exists(root: Path, episode_index: int) -> bool:
        return (staging_root(root) / layout.episode_file_stem(episode_index)).exists()

    @classmethod
    def create(cls, root: Path, header: EpisodeHeader) -> StagedEpisode:
        directory = staging_root(root) / layout.episode_file_stem(header.episode_index)
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        staged = cls(directory)
        try:
            staged.write_header(header)
        except BaseException:
            staged.remove()  # (a full disk): no episode began, none is left to recover
            raise
        return staged

    def write_header(self, header: EpisodeHeader) -> None:
        atomic.write_json(self.directory / HEADER_FILE, asdict(header))

    @property
    def steps_file(self) -> Path:
        return self.directory / STEPS_FILE

    @property
    def annotations_dir(self) -> Path:
        return self.directory / "annotations"

    def video_file(self, camera: str) -> Path:
        return self.directory / "videos" / f"{camera}.mp4"

    def header(self) -> EpisodeHeader:
        path = self.directory / HEADER_FILE
        try:
            data = json.loads(read_text(path))
        except (OSError, json.JSONDecodeError) as exc:
            raise FormatError(f"{path}: staged episode header unreadable: {exc}") from None
        return EpisodeHeader.from_dict(data, str(path))

    def outcome(self) -> EpisodeOutcome | None:
        """The outcome recorded when a commit started, or None if it never started."""
        path = self.directory / COMMIT_FILE
        if not path.exists():
            return None
        try:
            return EpisodeOutcome(**json.loads(read_text(path)))
        except (OSError, json.JSONDecodeError, TypeError) as exc:
            raise FormatError(f"{path}: commit record unreadable: {exc}") from None

    def mark_committing(self, outcome: EpisodeOutcome) -> None:
        atomic.write_json(self.directory / COMMIT_FILE, asdict(outcome))

    def append_journal(self, relative: str) -> Path:
        """Where the commit journals its append to the dataset file ``relative``."""
        return self.directory / "appends" / (relative.replace("/", "%") + ".journal")

    def stream_file(self, stream: str) -> Path:
        return self.directory / "streams" / f"{stream}.arrows"

    def cloud_file(self, name: str) -> Path:
        """Point cloud stream ``name``'s clouds (``dataset.point_clouds``)."""
        return self.directory / "point_clouds" / f"{name}.arrows"

    def read_steps(self) -> Iterator[pa.RecordBatch]:
        return read_log(self.steps_file)

    def read_stream(self, stream: str) -> Iterator[pa.RecordBatch]:
        return read_log(self.stream_file(stream))

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
