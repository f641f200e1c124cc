"""A recording mapped into memory, so that its camera frames are read where they lie.

A raw 640x480 rgb8 frame is 0.9 MB, and a conversion of two cameras moves 3 GB a minute.
Read into buffers, each frame was copied three times by the converter's own process
(file to chunk buffer, chunk to message, message to the encoder's ring): on the
benchmark's 60 s bag that process used 2.8-3.0 s of CPU then, 2.0 s mapped. Mapped,
a frame is never copied there: its message keeps a view of the map, the decoded image
is a view of that, and the encoder process, given the file (``fileno``) and the frame's
``offset``, reads the frame from the file itself (``encoder_process``). Only the pages of
what is read are touched.

The file must not shrink while it is mapped (reading a page past its end would be a
SIGBUS); a recording being converted is not written to.
"""

from __future__ import annotations

import itertools
import mmap
import os
import weakref

import numpy as np

_serials = itertools.count()


class MappedFile(mmap.mmap):
    """A file mapped read-only, with an open descriptor to hand to another process and a
    serial number no other map of this process will have (an ``id`` can be reused)."""

    path: str
    serial: int
    address: int  # where the map starts in this process
    _fd: int

    def __new__(cls, path: str | os.PathLike[str]) -> MappedFile:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            self = super().__new__(cls, fd, 0, access=mmap.ACCESS_READ)
        except BaseException:
            os.close(fd)
            raise
        weakref.finalize(self, os.close, fd)  # (the map outlives any close while views of it live)
        self._fd = fd
        self.path = os.fspath(path)
        self.serial = next(_serials)
        self.address = int(np.frombuffer(self, np.uint8).ctypes.data)
        return self

    def fileno(self) -> int:
        """A descriptor of the mapped file, open as long as this object lives."""
        return self._fd


def locate(array: np.ndarray) -> tuple[MappedFile, int] | None:
    """The map a C-contiguous array lies in and its offset there; None for an array in
    memory of its own (or not contiguous)."""
    if not array.flags.c_contiguous:
        return None
    base = array.base
    while isinstance(base, np.ndarray):
        base = base.base
    if not isinstance(base, memoryview) or not isinstance(base.obj, MappedFile):
        return None
    mapped = base.obj
    return mapped, int(array.ctypes.data) - mapped.address
