"""Where a dataset's files are read from: the interface, and a directory on this machine.

Every reader of a dataset names its files by their path relative to the root (``layout``)
and asks a ``Storage`` for them: the bytes of a small file (the manifest, the tasks), a whole
table (the episode index), or what ``pq.ParquetFile`` and PyAV read by ranges. The format
layer's own readers (``metadata``, ``catalog``) take one, so they read a dataset in object
storage as they read a directory; the object-storage implementation is the io layer's
(``io/object_storage.py``). A directory hands back the path itself: local reads stay files
opened by path, with nothing in between.
"""

from __future__ import annotations

import io
from abc import ABC, abstractmethod
from collections.abc import Hashable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.format.text import decode_text


class Storage(ABC):
    """A dataset's files by relative path (``layout``'s forward-slash names)."""

    location: str
    """The dataset's directory or URL, as errors name it."""

    @abstractmethod
    def name(self, relative: str) -> str:
        """The file as an error names it: its path, or the URL of the object."""

    @abstractmethod
    def read_bytes(self, relative: str) -> bytes:
        """The whole file (FileNotFoundError when there is none)."""

    @abstractmethod
    def exists(self, relative: str) -> bool:
        """Whether the file is there."""

    @abstractmethod
    def source(self, relative: str) -> Path | io.RawIOBase:
        """What ``pq.ParquetFile`` and ``av.open`` read the file from: its path, or a random-access
        file fetched by ranges (FileNotFoundError when there is none)."""

    @abstractmethod
    def identity(self, relative: str) -> Hashable:
        """What changes when the file is replaced or appended to (OSError when it is gone)."""

    @property
    def local_root(self) -> Path | None:
        """The directory on this machine, None for object storage."""
        return None

    def read_text(self, relative: str) -> str:
        """The file as UTF-8 text (FormatError naming it if it is not)."""
        return decode_text(self.read_bytes(relative), self.name(relative))

    def read_table(self, relative: str) -> pa.Table:
        """A whole Parquet file (FileNotFoundError when there is none)."""
        source = self.source(relative)
        if isinstance(source, Path):
            return pq.read_table(source)
        with source:
            return pq.read_table(source)


class LocalStorage(Storage):
    """A directory on this machine: files read and opened by path, as the reader always did."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)

    def name(self, relative: str) -> str:
        return str(self.root / relative)

    def read_bytes(self, relative: str) -> bytes:
        return (self.root / relative).read_bytes()

    def exists(self, relative: str) -> bool:
        return (self.root / relative).is_file()

    def source(self, relative: str) -> Path:
        return self.root / relative

    def identity(self, relative: str) -> Hashable:
        status = (self.root / relative).stat()
        return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns

    @property
    def local_root(self) -> Path:
        return self.root


def as_storage(root: Path | Storage) -> Storage:
    return root if isinstance(root, Storage) else LocalStorage(root)
