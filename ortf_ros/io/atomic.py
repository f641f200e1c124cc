"""Replace files so that a crash leaves either the old or the new version.

Every committed file of a dataset is written to a temporary sibling, fsynced, renamed
over its target and the directory fsynced, so a reader never sees half a manifest or
a Parquet file without its footer, whatever instant the process dies at.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ortf_ros.errors import with_filename

TMP_SUFFIX = ".tmp-ortf"


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def temporary_for(target: Path) -> Path:
    """The hidden sibling that ``target`` is written as before ``install`` makes it ``target``."""
    return target.with_name(f".{target.name}{TMP_SUFFIX}")


def install(tmp: Path, target: Path) -> None:
    """Make the written file ``tmp`` become ``target``, durably: synced, renamed, directory synced."""
    fsync_file(tmp)
    os.replace(tmp, target)
    fsync_dir(target.parent)


def install_in(directory: int, tmp: str, target: str) -> None:
    """``install`` within the directory open as ``directory``: where that directory was
    removed meanwhile (and perhaps made anew at its path), the rename stays in the removed
    one instead of putting a file into the new one."""
    fd = os.open(tmp, os.O_RDONLY, dir_fd=directory)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target, src_dir_fd=directory, dst_dir_fd=directory)
    os.fsync(directory)


def replaceable(target: Path) -> Path:
    """The path a new version of ``target`` is renamed onto: ``target``, or the file a
    symbolic link at ``target`` points to (the link stays a link). Only a regular file, or
    a new path, is ever replaced: a rename over ``/dev/stdout`` would put a file where the
    device link was (FileExistsError naming it)."""
    real = target.resolve() if target.is_symlink() else target
    if real.exists() and not real.is_file():
        raise FileExistsError(errno.EEXIST, "not a regular file; only regular files are replaced", str(target))
    return real


@contextlib.contextmanager
def replacing(target: Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it atomically becomes ``target``
    (``replaceable``: a regular file or a new path)."""
    target = replaceable(target)
    tmp = temporary_for(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        install(tmp, target)
    except OSError as exc:
        if exc.filename is not None and os.fsdecode(exc.filename) == str(tmp):  # the user named target, not tmp
            raise with_filename(exc, target) from exc
        raise
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(target: Path, data: bytes) -> None:
    with replacing(target) as tmp:
        tmp.write_bytes(data)


def write_text(target: Path, text: str) -> None:
    write_bytes(target, text.encode("utf-8"))


def write_json(target: Path, data: Any) -> None:
    write_text(target, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write_with(target: Path, produce: Callable[[Path], None]) -> None:
    """Atomically create ``target`` from a function that writes a given path."""
    with replacing(target) as tmp:
        produce(tmp)
