"""The recordings a run converts: paths as given, directories searched, ``--inputs-from``.

A fleet's recordings are thousands of files in dated folders, more than a command line
holds. A directory given as an input is either one recording or a folder to search:

- a rosbag2 directory is one recording: it has a ``metadata.yaml``, or (a recording
  never closed, whose ``metadata.yaml`` was not written) its storage files are named as
  rosbag2 names a directory's files, ``<directory name>_<N>.mcap`` / ``.db3``;
- any other directory is searched, in name order, for recordings: ``.mcap``, ``.db3``
  (also zstd-compressed) and ROS 1 ``.bag`` files, and rosbag2 directories (not
  searched further). Hidden entries are passed over (``.ortf-bag2ortf-*`` scratch).

``--inputs-from FILE`` names one path a line (``#`` comments and blank lines skipped;
``-`` reads standard input), each taken as a command-line input is. A recording found
twice (two inputs naming it) is converted once.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from ortf_ros.errors import UsageError
from ortf_ros.io import paths
from ortf_ros.pipeline.sources.rosbag2_dir import METADATA_FILE, STORAGE_SUFFIXES

RECORDING_SUFFIXES = (*STORAGE_SUFFIXES, ".bag")


def recordings(words: Sequence[str], inputs_from: str | None = None) -> list[Path]:
    """Every recording named by ``words`` and the lines of ``inputs_from``, in order, once
    each; a path that is missing or of no recording kind is a ``UsageError`` naming it."""
    found: list[Path] = []
    seen: set[Path] = set()
    for word in [*words, *_lines(inputs_from)]:
        for path in _expand(word):
            key = path.resolve()
            if key not in seen:
                seen.add(key)
                found.append(path)
    if not found:
        raise UsageError("no recording to convert: " + ", ".join([*words, *([inputs_from] if inputs_from else [])]))
    return found


def _lines(inputs_from: str | None) -> Iterator[str]:
    if inputs_from is None:
        return
    if inputs_from == paths.STDIO:
        lines = sys.stdin.read().splitlines()
    else:
        file = paths.input_file(inputs_from, "a file of recording paths, one a line")
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start}); expected recording paths, one a line"
            ) from None
        base = file.parent
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if inputs_from != paths.STDIO and not os.path.isabs(text):
            text = str(base / text)  # relative to the file, as a playlist's entries are
        where = f"{inputs_from}:{number}"
        if not os.path.lexists(text):
            raise UsageError(f"{where}: {text}: no such file or directory")
        yield text


def _expand(word: str) -> list[Path]:
    path = paths.input_path(word, "a recording (bag file or rosbag2 directory) or a directory of recordings")
    if not path.is_dir() or is_recording_dir(path):
        return [path]
    found = list(_search(path, set()))
    if not found:
        raise UsageError(
            f"{path}: no recording in this directory (expected {', '.join(RECORDING_SUFFIXES)} files "
            "or rosbag2 directories)"
        )
    return found


def is_recording_dir(path: Path) -> bool:
    """Whether the directory ``path`` is one rosbag2 recording (see the module's docstring)."""
    if (path / METADATA_FILE).is_file():
        return True
    storage = [entry.name for entry in path.iterdir() if entry.name.endswith(STORAGE_SUFFIXES)]
    own = re.compile(re.escape(path.name) + r"_\d+\.")
    return bool(storage) and all(own.match(name) for name in storage)


def _search(directory: Path, visited: set[Path]) -> Iterator[Path]:
    """Recordings below ``directory``; a directory reached again through a link (a link
    to a parent would never end) is searched once."""
    visited.add(directory.resolve())
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            if is_recording_dir(entry):
                yield entry
            elif entry.resolve() not in visited:
                yield from _search(entry, visited)
        elif entry.is_file() and entry.name.endswith(RECORDING_SUFFIXES):
            yield entry
