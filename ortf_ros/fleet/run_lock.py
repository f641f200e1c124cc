"""One ``ortf-bag2ortf`` run a dataset at a time.

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
from collections.abc import Iterator
from pathlib import Path

from ortf_ros.errors import DatasetBusyError, WriterError


def run_lock_path(output: Path) -> Path:
    absolute = Path(os.path.abspath(output))
    return absolute.parent / f".{absolute.name}.ortf-bag2ortf.lock"


@contextlib.contextmanager
def run_lock(output: Path) -> Iterator[None]:
    """Hold the lock of runs into ``output`` while the block runs, then remove its file.

    The lock is that of the file at the path when taken: a run that ends removes the
    file, and a lock taken meanwhile on the removed one would exclude nobody."""
    path = run_lock_path(output)
    while True:
        try:
            handle = open(path, "ab")  # noqa: SIM115 - held for the block
        except OSError as exc:
            raise WriterError(f"{path}: cannot take the run lock ({exc.strerror or exc})") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise DatasetBusyError(f"{output}: another ortf-bag2ortf run is converting into this dataset") from None
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
