"""What a command writes, and what it removes when it fails.

A text output (a mapping) goes to standard output, into a pipe or a device as a shell
redirection would, or replaces a regular file atomically; never is a device or a link
replaced by a file. A command that creates a directory and fails before finishing
anything in it removes it again: no half directories, no empty datasets.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ortf_ros.io import atomic


def write_text(target: Path | None, text: str) -> None:
    """``text`` to ``target``: None is standard output; a pipe or a device is written into;
    a regular file (or a new path) is replaced atomically."""
    if target is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    elif target.exists() and not target.is_file():
        with open(target, "w", encoding="utf-8") as stream:
            stream.write(text)
    else:
        atomic.write_text(target, text)


def first_new(path: Path) -> Path | None:
    """The outermost directory that creating ``path`` (with its parents) would create;
    None when ``path`` exists."""
    path = path.absolute()
    if path.exists() or path.is_symlink():
        return None
    while not path.parent.exists() and path.parent != path.parent.parent:
        path = path.parent
    return path


@contextmanager
def removed_on_failure(path: Path, finished: Callable[[Path], bool] = lambda _: False) -> Iterator[Callable[[], None]]:
    """Run the block; when it raises (Ctrl-C included), or calls the ``discard`` it is
    given, remove what it created at ``path`` (and the parents created for it), unless
    ``finished(path)`` says something there is done and must be kept (a dataset with
    committed episodes). A path that existed before is never removed."""
    created = first_new(path)

    def discard() -> None:
        if created is not None and created.exists() and not (path.exists() and finished(path)):
            shutil.rmtree(created, ignore_errors=True)

    try:
        yield discard
    except BaseException:
        discard()
        raise
