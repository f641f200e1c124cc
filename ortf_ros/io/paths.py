"""Paths given by a user, checked for what will be done with them before anything is.

An input must exist and be a file or a directory as wanted; an output must be new, or of
the kind that is replaced, in a directory that can be written. A path that fails is a
``UsageError`` naming it and what was expected: the command line tools exit 2 on it,
the recorder refuses its ``output`` parameter with it, and nothing has been touched yet.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ortf_ros.errors import UsageError

STDIO = "-"
"""The word for standard output where a command can write there."""


def _kind(path: Path) -> str:
    """What is at ``path`` in words (for 'expected X, PATH is Y'), following symlinks."""
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _exists(path: Path, expected: str) -> None:
    if path.name == STDIO and str(path) == STDIO:
        raise UsageError(f"-: standard input is not read here; expected {expected}")
    try:
        path.stat()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file or directory; expected {expected}") from None
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}; expected {expected}") from None


def input_dir(word: str, expected: str) -> Path:
    """An existing directory (``expected``: what it must hold, in words)."""
    path = Path(word)
    _exists(path, expected)
    if not path.is_dir():
        raise UsageError(f"{path}: is {_kind(path)}, not a directory; expected {expected}")
    return path


def input_file(word: str, expected: str) -> Path:
    """An existing file to read (a pipe, as from ``<(...)``, reads as well)."""
    path = Path(word)
    _exists(path, expected)
    if path.is_dir():
        raise UsageError(f"{path}: is a directory; expected {expected}")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{path}: cannot be read (permission denied); expected {expected}")
    return path


def input_path(word: str, expected: str) -> Path:
    """An existing file or directory (a bag file, a rosbag2 directory)."""
    path = Path(word)
    _exists(path, expected)
    if not (path.is_dir() or path.is_file()):
        raise UsageError(f"{path}: is {_kind(path)}; expected {expected}")
    return path


def creatable(path: Path, what: str) -> None:
    """The nearest existing ancestor of ``path`` (its parent, when it exists) is a directory
    this process can create ``path`` in (or replace it in)."""
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        if parent.is_symlink():
            raise UsageError(f"{parent}: a dangling symbolic link; cannot create {what} {path}")
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{parent}: is {_kind(parent)}, not a directory; cannot create {what} {path}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{parent}: not writable; cannot create {what} {path}")


def output_dir(word: str, what: str, *, existing: str | None) -> Path:
    """A directory to create, or (``existing``: what an existing one must be, in words)
    to add to; its parents are created as needed."""
    path = Path(word)
    if word == STDIO:
        raise UsageError(f"-: standard output cannot hold {what}; expected a directory path")
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            kind = _kind(path) if path.exists() else "a dangling symbolic link"
            raise UsageError(f"{path}: is {kind}; expected {existing or 'a new directory'} (or a new path) for {what}")
        if existing is None and any(path.iterdir()):
            raise UsageError(f"{path}: exists and is not empty; expected a new or empty directory for {what}")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"{path}: not writable; cannot write {what} there")
        return path
    creatable(path, what)
    return path


def output_file(word: str, what: str, *, replace: bool, stream_ok: bool) -> Path | None:
    """A file to write: None for ``-`` (standard output, where ``stream_ok``). An existing
    regular file is replaced only with ``replace``; a pipe or a device (``/dev/stdout``,
    ``>(...)``) is written into where ``stream_ok``, and is never replaced."""
    if word == STDIO:
        if not stream_ok:
            raise UsageError(f"-: {what} cannot go to standard output; expected a file path")
        return None
    path = Path(word)
    if path.exists():
        if path.is_dir():
            raise UsageError(f"{path}: is a directory; expected the path of {what}")
        if not path.is_file() and not stream_ok:
            raise UsageError(f"{path}: is {_kind(path)}; expected a regular file or a new path for {what}")
        if path.is_file() and not replace:
            raise UsageError(f"{path}: exists; pass --force to replace it")
        if not os.access(path, os.W_OK):
            raise UsageError(f"{path}: not writable; cannot write {what} there")
        if path.is_file():
            creatable(path.resolve(), what)  # replaced by a rename in its directory
        return path
    if path.is_symlink():
        raise UsageError(f"{path}: a dangling symbolic link; expected a regular file or a new path for {what}")
    creatable(path, what)
    return path
