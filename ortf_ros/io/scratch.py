"""Scratch directories beside an output that a killed run does not leave behind for good.

A run holds a lock on its scratch directory for as long as it works there. The kernel
drops the lock when the process dies, however it dies, so a later run tells a dead
run's directory (lock free) from a live one's (lock held) and removes only the former.
A pid in the name could not: pids are reused, and differ between containers sharing
a disk.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from ortf_ros.errors import WriterError, describe
from ortf_ros.io.encoder_pool import wait_for_processes_let_go

OWNER_FILE = ".owner.lock"


@contextlib.contextmanager
def scratch_directory(parent: Path, prefix: str, settle: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """A new directory ``parent/prefix*``, locked while the block runs, then removed, after
    ``settle(directory)`` (as for ``remove_stale``: what the block started may outlive it)
    and after this process's encoder processes that a writer interrupted in the block let
    go of have finished their videos, which may lie in it."""
    try:
        parent.mkdir(parents=True, exist_ok=True)
        directory, owner = _claim(parent, prefix)
    except OSError as exc:
        # The scratch directory's own name would only confuse: the user named ``parent``'s child.
        raise WriterError(f"{parent}: cannot write there ({exc.strerror or describe(exc)})") from None
    try:
        yield directory
    finally:
        try:
            if settle is not None:
                settle(directory)
            with contextlib.suppress(WriterError):  # (one still at it after a minute: removed under it)
                wait_for_processes_let_go()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
            owner.close()


def remove_stale(parent: Path, prefix: str, settle: Callable[[Path], None] | None = None) -> list[Path]:
    """Remove the ``parent/prefix*`` directories whose owner is gone; returns them.

    ``settle(directory)`` runs first, with the owner's lock held: to wait for what the
    dead owner started and that outlives it (a killed writer's encoder processes finish
    their videos). The owner file goes last, so a directory that something still wrote
    into while it was removed keeps it, and the next run removes the rest."""
    removed = []
    for directory in sorted(parent.glob(f"{prefix}*")):
        owner = _lock(directory, create=False) if directory.is_dir() else None
        if owner is None:
            continue
        with owner:
            if settle is not None:
                settle(directory)
            for entry in directory.iterdir():
                if entry.name != OWNER_FILE:
                    _remove(entry)
            if any(entry.name != OWNER_FILE for entry in directory.iterdir()):
                continue  # written into meanwhile: kept, with its owner file, for the next run
            (directory / OWNER_FILE).unlink()
            with contextlib.suppress(OSError):
                directory.rmdir()
            removed.append(directory)
    return removed


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)


def _lock(directory: Path, create: bool = True) -> IO[bytes] | None:
    """The directory's owner lock, taken; None while another process holds it (or the
    directory is gone, or not ours to open). Without ``create``, a directory that has no
    owner file is not taken either: it is being claimed this instant, or it is not one
    of ours at all."""
    try:
        handle = open(directory / OWNER_FILE, "ab" if create else "rb")  # noqa: SIM115 - the caller holds it
    except OSError:
        return None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _claim(parent: Path, prefix: str) -> tuple[Path, IO[bytes]]:
    """A new directory with its lock held. (A run cleaning up at the same instant skips a
    directory without its owner file; should it remove this one all the same, another is
    made.)"""
    while True:
        directory = Path(tempfile.mkdtemp(dir=parent, prefix=prefix))
        owner = _lock(directory)
        if owner is not None and directory.is_dir():
            return directory, owner
        if owner is not None:
            owner.close()
