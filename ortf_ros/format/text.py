"""Text files of a dataset or of a configuration, read with their name in every error.

A manifest, a task list or a parameter file that is not UTF-8 (a binary file given by
mistake, a file cut by a crash) would raise a bare UnicodeDecodeError, naming no file:
here it is a FormatError naming the file, one line on a command line.
"""

from __future__ import annotations

import os
from pathlib import Path

from ortf_ros.errors import FormatError


def read_text(path: str | os.PathLike[str]) -> str:
    """The UTF-8 text of ``path`` (OSError as it comes: it names the file)."""
    return decode_text(Path(path).read_bytes(), os.fspath(path))


def decode_text(data: bytes, name: str) -> str:
    """``data`` read from the file ``name`` (a path, a URL) as UTF-8 text."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{name}: not UTF-8 text (byte {exc.start}: {data[exc.start]:#04x})") from None
