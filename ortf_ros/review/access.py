"""What a request may reach: files inside the dataset, and writes only when no recorder
writes it.

Paths come from ``meta/episodes.parquet`` (any writer's, so any string) and requests
name episodes and cameras, never paths: both are checked here, against the index and
the manifest, and every file is resolved (symlinks followed) and refused when it lands
outside the dataset.
"""

from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path, PurePosixPath

from ortf_ros.dataset.staging import LOCK_FILE, staging_root
from ortf_ros.fleet.run_lock import run_lock_path


class OutsideDatasetError(Exception):
    """A path that leaves the dataset (``..``, an absolute path, a symlink pointing out)."""


def dataset_file(root: Path, relative: str) -> Path:
    """The regular file ``relative`` names inside ``root``, resolved; ``OutsideDatasetError``
    when it would leave the dataset, ``FileNotFoundError`` when there is none."""
    parts = PurePosixPath(relative)
    if not relative or "\x00" in relative or "\\" in relative or parts.is_absolute() or ".." in parts.parts:
        raise OutsideDatasetError(relative)
    base = root.resolve()
    target = (base / parts).resolve()
    if not target.is_relative_to(base):
        raise OutsideDatasetError(relative)
    if not target.is_file():
        raise FileNotFoundError(relative)
    return target


def writer_active(root: Path) -> bool:
    """Whether a writer holds the dataset: its writer lock (a recorder, a conversion writing
    a recording, ``ortf recover``, an edit) or the lock of an ``ortf-bag2ortf`` run into it
    (held between its recordings too)."""
    return _held(staging_root(root) / LOCK_FILE) or _held(run_lock_path(root))


def _held(path: Path) -> bool:
    """Whether another process holds ``path`` locked, asked with a shared lock taken and
    dropped at once, on the file only if it exists: the review never creates it, and a
    writer starting at that instant waits for it the few microseconds it lasts
    (``staging.lock_dataset`` retries)."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        with contextlib.suppress(OSError):
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return False
