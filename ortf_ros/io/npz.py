"""Depth stored as an NPZ stack, the spec's other lossless depth option (other writers use it).

The stack is the archive's first array, shaped (frames, height, width). A compressed
NPZ member cannot be read frame by frame, so the stack is loaded on first access: its
memory is one episode's depth, which is why our writer stores depth as FFV1 instead.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from ortf_ros.errors import ReaderError


class NpzDepthReader:
    """``file``, when given, is what is read (an object in object storage), ``path`` its name."""

    def __init__(self, path: Path | str, *, file: io.IOBase | None = None) -> None:
        self.path = path
        self._file = file
        self._stack: np.ndarray | None = None

    def __enter__(self) -> NpzDepthReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stack = None
        if self._file is not None:
            self._file.close()

    def _load(self) -> np.ndarray:
        if self._stack is None:
            try:
                with np.load(self._file if self._file is not None else self.path) as archive:
                    if not archive.files:
                        raise ReaderError(f"{self.path}: NPZ holds no array")
                    stack = archive[archive.files[0]]
            except (OSError, ValueError, zipfile.BadZipFile) as exc:
                raise ReaderError(f"{self.path}: not a readable NPZ depth stack: {exc}") from None
            if stack.ndim != 3:
                raise ReaderError(f"{self.path}: depth stack has shape {stack.shape}; expected (frames, height, width)")
            self._stack = stack
        return self._stack

    def read(self, index: int, *, channels_first: bool = False) -> np.ndarray:
        """Frame ``index``: HxW uint16 (1xHxW with ``channels_first``, as ``VideoReader``)."""
        stack = self._load()
        if not 0 <= index < len(stack):
            raise ReaderError(f"{self.path}: has no frame {index} ({len(stack)} frames)")
        frame: np.ndarray = stack[index]
        return frame[np.newaxis] if channels_first else frame
