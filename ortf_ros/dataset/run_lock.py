"""One ``ortf-bag2ortf`` run a dataset at a time (and no edit of the dataset during one).

Two runs over the same recordings into one dataset (an hourly job whose run took more
than an hour) would each find the same recordings missing and convert them twice: what
the dataset holds is decided once, at the start, and the dataset's writer lock is held
only while a recording is written into it. So a run holds a lock of its own for all its
length, on a file beside the dataset (inside it, a new dataset's directory would not be
empty when its writer makes it): a second run stops at once, saying so.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ortf_ros.errors import DatasetBusyError, WriterError
from ortf_ros.io.paths import DirectoryTimes

PROBE_WAIT_S = 0.5
"""How long taking the lock retries: ``lock_held`` (``ortf review`` asking whether a run is
going on) holds it shared for a few microseconds, which must not stop a run."""


def _lock_soon(handle: IO[bytes]) -> bool:
    """The exclusive lock on ``handle``, retried for ``PROBE_WAIT_S``; whether it was taken."""
    deadline = time.monotonic() + PROBE_WAIT_S
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def lock_held(path: Path) -> bool:
    """Whether another process holds ``path`` locked, asked with a shared lock taken and
    dropped at once, on the file only if it exists (it is never created here); a writer
    starting at that instant waits for it the few microseconds it lasts."""
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


def run_lock_path(output: Path) -> Path:
    absolute = Path(os.path.abspath(output))
    return absolute.parent / f".{absolute.name}.ortf-bag2ortf.lock"


@contextlib.contextmanager
def run_lock(output: Path) -> Iterator[None]:
    """Hold the lock of runs into ``output`` while the block runs, then remove its file.

    The lock is that of the file at the path when taken: a run that ends removes the
    file, and a lock taken meanwhile on the removed one would exclude nobody."""
    path = run_lock_path(output)
    times = DirectoryTimes.of(path.parent) if path.parent.is_dir() and not path.exists() else None
    while True:
        try:
            handle = open(path, "ab")  # noqa: SIM115 - held for the block
        except OSError as exc:
            raise WriterError(f"{path}: cannot take the run lock ({exc.strerror or exc})") from None
        if not _lock_soon(handle):
            handle.close()
            raise DatasetBusyError(f"{output}: another ortf-bag2ortf run or an edit is using this dataset") from None
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(handle.fileno()).st_ino:
            break
        handle.close()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        handle.close()
        if times is not None:  # (a run that added nothing beside the dataset leaves its directory's times)
            times.put_back()
