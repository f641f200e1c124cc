"""What a request may reach: files inside the dataset, and writes only when no recorder
writes it.

Paths come from ``meta/episodes.parquet`` (any writer's, so any string) and requests
name episodes and cameras, never paths: both are checked here, against the index and
the manifest, and every file is resolved (symlinks followed) and refused when it lands
outside the dataset.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from ortf_ros.dataset.run_lock import lock_held, run_lock_path
from ortf_ros.dataset.staging import LOCK_FILE, staging_root
from ortf_ros.errors import OutsideDatasetError


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
    return lock_held(staging_root(root) / LOCK_FILE) or lock_held(run_lock_path(root))
