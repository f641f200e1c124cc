"""Paths given by a user, checked for what will be done with them before anything is.

An input must exist and be a file or a directory as wanted; an output must be new, or of
the kind that is replaced, in a directory that can be written, and never one of the
inputs or inside one. A path that fails is a ``UsageError`` naming it and what was
expected: the command line tools exit 2 on it, the nodes refuse their parameters with
it, and nothing has been touched yet. The words are taken as typed: an empty one is no
path (not "."), and a trailing slash names a directory.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ortf_ros.errors import UsageError

STDIO = "-"
"""The word for standard output where a command can write there."""

NAME_MAX = 255
"""Bytes in one path component (every Linux file system's limit)."""


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


URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
"""What a location given as a URL (``s3://bucket/prefix``) starts with, rather than a path."""


def is_url(word: str | os.PathLike[str]) -> bool:
    return isinstance(word, str) and URL.match(word) is not None


def _path(word: str, expected: str) -> Path:
    """The word as a path: not empty, no component longer than a file system takes, and no
    URL: a command writes only to this machine (an ``s3:`` directory made of
    ``s3://bucket/x`` would be a surprise), and reads object storage only through
    ``load_dataset`` (Python)."""
    if not word:
        raise UsageError(f"an empty path; expected {expected}")
    if is_url(word):
        raise UsageError(f"{word}: a URL; expected {expected} on this machine (only load_dataset reads s3:// URLs)")
    for part in Path(word).parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise UsageError(f"{word}: a name longer than {NAME_MAX} bytes ({part[:20]}...); expected {expected}")
    return Path(word)


def exists(path: Path) -> bool:
    """Whether something (a dangling link aside) is at ``path``; a path the system cannot
    look at (too long, a loop of links, not searchable) is a UsageError naming it."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    return True


def resolved(path: Path) -> Path:
    """``path`` with its symbolic links followed; a loop of them is a UsageError naming it
    (pathlib raises RuntimeError for one on Python 3.10 to 3.12, OSError after)."""
    try:
        return path.resolve()
    except RuntimeError:
        raise UsageError(f"{path}: {os.strerror(errno.ELOOP)}") from None
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None


def _exists(word: str, expected: str) -> Path:
    if word == STDIO:
        raise UsageError(f"-: standard input is not read here; expected {expected}")
    path = _path(word, expected)
    if not exists(path):
        raise UsageError(f"{path}: no such file or directory; expected {expected}")
    if word.endswith("/") and not path.is_dir():
        raise UsageError(f"{word}: is {_kind(path)}, not a directory (a trailing / names one); expected {expected}")
    return path


def input_dir(word: str, expected: str) -> Path:
    """An existing directory (``expected``: what it must hold, in words)."""
    path = _exists(word, expected)
    if not path.is_dir():
        raise UsageError(f"{path}: is {_kind(path)}, not a directory; expected {expected}")
    return path


def input_file(word: str, expected: str) -> Path:
    """An existing file to read (a pipe, as from ``<(...)``, reads as well)."""
    path = _exists(word, expected)
    if path.is_dir():
        raise UsageError(f"{path}: is a directory; expected {expected}")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{path}: cannot be read (permission denied); expected {expected}")
    return path


def input_path(word: str, expected: str) -> Path:
    """An existing file or directory (a bag file, a rosbag2 directory)."""
    path = _exists(word, expected)
    if not (path.is_dir() or path.is_file()):
        raise UsageError(f"{path}: is {_kind(path)}; expected {expected}")
    return path


def creatable(path: Path, what: str) -> None:
    """The nearest existing ancestor of ``path`` (its parent, when it exists) is a directory
    this process can create ``path`` in (or replace it in). Tried, not guessed from its
    mode: root passes every mode check, and a read-only mount, an immutable directory or
    /proc refuse all the same (the ancestor's times are put back after the try)."""
    parent = path.absolute().parent
    while not exists(parent) and parent != parent.parent:
        if parent.is_symlink():
            raise UsageError(f"{parent}: a dangling symbolic link; cannot create {what} {path}")
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{parent}: is {_kind(parent)}, not a directory; cannot create {what} {path}")
    before = DirectoryTimes.of(parent)
    probe = parent / f".ortf-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except FileExistsError:
        pass
    except OSError as exc:
        reason = "not writable" if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else exc.strerror
        raise UsageError(f"{parent}: {reason}; cannot create {what} {path}") from None
    else:
        probe.rmdir()
        before.put_back()


@dataclass(frozen=True)
class DirectoryTimes:
    """A directory's access and modification times and the names in it, taken before
    something is made in it for a while (a probe, a lock file), to be put back once that
    is removed: a command that changed nothing there leaves no trace, not even a time."""

    directory: Path
    atime_ns: int
    mtime_ns: int
    names: frozenset[str]

    @classmethod
    def of(cls, directory: Path) -> DirectoryTimes:
        info = directory.stat()
        return cls(directory, info.st_atime_ns, info.st_mtime_ns, frozenset(os.listdir(directory)))

    def put_back(self) -> None:
        """The times put back, when the directory holds the same names as then (what was
        made in it is gone, and nothing else came or went meanwhile)."""
        with contextlib.suppress(OSError):  # (gone meanwhile, or not ours to touch: its times stay)
            if frozenset(os.listdir(self.directory)) == self.names:
                os.utime(self.directory, ns=(self.atime_ns, self.mtime_ns))


def output_dir(word: str, what: str, *, existing: str | None, inputs: Iterable[Path] = ()) -> Path:
    """A directory to create, or (``existing``: what an existing one must be, in words)
    to add to; its parents are created as needed. It must be apart from ``inputs``
    (``apart_from``), which is checked first: a refused output tries nothing on the disk."""
    if word == STDIO:
        raise UsageError(f"-: standard output cannot hold {what}; expected a directory path")
    path = _path(word, f"a directory for {what}")
    apart_from(path, inputs, what)
    if exists(path) or path.is_symlink():
        if not path.is_dir():
            kind = _kind(path) if exists(path) else "a dangling symbolic link"
            raise UsageError(f"{path}: is {kind}; expected {existing or 'a new directory'} (or a new path) for {what}")
        if existing is None and any(path.iterdir()):
            raise UsageError(f"{path}: exists and is not empty; expected a new or empty directory for {what}")
        creatable(resolved(path) / "x", what)  # what is made inside it
        return path
    creatable(path, what)
    return path


def output_file(word: str, what: str, *, replace: bool, stream_ok: bool, inputs: Iterable[Path] = ()) -> Path | None:
    """A file to write: None for ``-`` (standard output, where ``stream_ok``). An existing
    regular file is replaced only with ``replace``; a pipe or a device (``/dev/stdout``,
    ``>(...)``) is written into where ``stream_ok``, and is never replaced. It must be apart
    from ``inputs`` (``apart_from``), checked before the directory is tried (``creatable``
    touches it: two processes trying one directory at once could leave its times changed)."""
    if word == STDIO:
        if not stream_ok:
            raise UsageError(f"-: {what} cannot go to standard output; expected a file path")
        return None
    path = _path(word, f"the path of {what}")
    if word.endswith("/"):
        raise UsageError(f"{word}: a trailing / names a directory; expected the path of {what}")
    apart_from(path, inputs, what)
    if exists(path):
        if path.is_dir():
            raise UsageError(f"{path}: is a directory; expected the path of {what}")
        if not path.is_file() and not stream_ok:
            raise UsageError(f"{path}: is {_kind(path)}; expected a regular file or a new path for {what}")
        if path.is_file() and not replace:
            raise UsageError(f"{path}: exists; pass --force to replace it")
        if not os.access(path, os.W_OK):
            raise UsageError(f"{path}: not writable; cannot write {what} there")
        if path.is_file():
            creatable(resolved(path), what)  # replaced by a rename in its directory
        return path
    if path.is_symlink():
        raise UsageError(f"{path}: a dangling symbolic link; expected a regular file or a new path for {what}")
    creatable(path, what)
    return path


def apart_from(output: Path, inputs: Iterable[Path], what: str) -> None:
    """``output`` is none of ``inputs`` and, when it exists, no file inside one: ``--write-config
    x.mcap`` must not replace the recording it describes, nor an export a file of its source
    (a new path inside an input's directory takes nothing from it)."""
    target = resolved(output)
    for source in inputs:
        real = resolved(source)
        if target == real or (exists(target) and target.is_relative_to(real)):
            inside = "is" if target == real else "is a file of"
            raise UsageError(f"{output}: {inside} the input {source}; expected another path for {what}")
