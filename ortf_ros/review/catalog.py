"""The episode index as the review pages see it: reopened when ``meta/episodes.parquet``
changes (a save, a delete, a recorder's commit), with the review's own columns.

The review flag is an extension column of the index (``review_flag``, written by
``ortf_ros.dataset.edits``), read here with pyarrow because the reader's records do not
carry extensions.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeRecord

REVIEW_FLAG_COLUMN = "review_flag"


def episode_drops(record: EpisodeRecord) -> int | None:
    """Frames and messages the recording dropped in this episode; None while the episode
    index carries no per-stream accounting (issue 25 §1 wires it in)."""
    del record
    return None


def outcome_word(success: bool | None) -> str:
    return "unlabelled" if success is None else "success" if success else "failure"


@dataclass(frozen=True)
class Snapshot:
    """One reading of the dataset: its reader and the review flags of its episodes."""

    dataset: Dataset
    review_flags: dict[str, bool | None]
    identity: tuple[int, int, int, int]

    def review_flag(self, episode_id: str) -> bool | None:
        return self.review_flags.get(episode_id)


def _identity(path: Path) -> tuple[int, int, int, int]:
    status = path.stat()
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def _review_flags(root: Path) -> dict[str, bool | None]:
    path = root / layout.EPISODES
    if REVIEW_FLAG_COLUMN not in pq.read_schema(path).names:
        return {}
    table = pq.read_table(path, columns=["episode_id", REVIEW_FLAG_COLUMN])
    return dict(zip(table["episode_id"].to_pylist(), table[REVIEW_FLAG_COLUMN].to_pylist(), strict=True))


class DatasetView:
    """The dataset as last read, read again when its episode index is replaced."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._snapshot = self._read()

    def _read(self) -> Snapshot:
        identity = _identity(self.root / layout.EPISODES)
        return Snapshot(load_dataset(self.root), _review_flags(self.root), identity)

    def current(self) -> Snapshot:
        with self._lock:
            try:
                changed = _identity(self.root / layout.EPISODES) != self._snapshot.identity
            except FileNotFoundError:  # the index gone from under us: the last reading stands
                changed = False
            if changed:
                self._snapshot = self._read()
            return self._snapshot
