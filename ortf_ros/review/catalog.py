"""The episode index as the review pages see it: read again when ``meta/episodes.parquet``
is replaced (a save, a delete, a recorder's commit), and the columns the list adds."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeRecord


def episode_drops(record: EpisodeRecord) -> int | None:
    """Messages and frames of this episode that did not become data: dropped (by reason),
    undecodable or lost in transport, over every stream (``format.accounting``); None when
    the episode was not counted (another writer's dataset)."""
    if record.accounting is None:
        return None
    return sum(account.losses for account in record.accounting)


def outcome_word(success: bool | None) -> str:
    return "unlabelled" if success is None else "success" if success else "failure"


def flag_word(flag: bool | None) -> str:
    return "not reviewed" if flag is None else "flagged" if flag else "reviewed"


@dataclass(frozen=True)
class Snapshot:
    """One reading of the dataset, and what identified its episode index then."""

    dataset: Dataset
    identity: tuple[int, int, int, int]


def _identity(path: Path) -> tuple[int, int, int, int]:
    status = path.stat()
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


class DatasetView:
    """The dataset as last read, read again when its episode index is replaced."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._snapshot = self._read()

    def _read(self) -> Snapshot:
        identity = _identity(self.root / layout.EPISODES)
        return Snapshot(load_dataset(self.root), identity)

    def current(self) -> Snapshot:
        with self._lock:
            try:
                changed = _identity(self.root / layout.EPISODES) != self._snapshot.identity
            except FileNotFoundError:  # the index gone from under us: the last reading stands
                changed = False
            if changed:
                self._snapshot = self._read()
            return self._snapshot
