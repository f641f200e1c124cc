"""Each camera's video is encoded in a process of its own, fed through shared memory.

Why processes: PyAV releases the GIL while x264 converts and encodes, but an encoder
thread still needs it several times a frame (queue, encode call, mux), and while the
converter's Python pipeline holds it the thread waits up to a switch interval each
time. On two cores, encoder threads beside a busy pipeline sat idle for a quarter of a
conversion; in processes of their own the same work ran about 25 % faster
(``bench/bench_bag2ortf.py``).

How a frame travels: ``StagedVideoWriter.write`` copies the image into a free slot of a
ring (a memfd both processes map) and sends the slot's number over a SOCK_SEQPACKET
socket; the encoder process encodes from the slot and gives it back (several slots in
one message, ``_FreedSlots``). There are ``queue_frames`` + 1 slots, so memory is
bounded as with a queue, and the writer waits only when every slot is taken. An image
that is a view of a mapped recording (``mapped_file``: a raw frame in an uncompressed
MCAP chunk) is not copied by the writer: it sends the file (its descriptor) and then, in
place of the slot's contents, where the frame lies in it; the encoder process reads the
frame from the file (``_FramesFile``). It holds one file at a time (a recording split
into hundreds of files would otherwise hold as many descriptors), so the writer sends
the file again whenever frames come from another. Such a frame needs no slot's memory, so up to
``MAPPED_QUEUE_FRAMES`` of them may wait (a number stands for each); and as the file is
read-only, the caller may drop its view at once, as it may reuse a copied array.

Crash safety: when the writer's process dies, its end of the socket closes; the encoder
process then encodes the frames it was already sent, flushes the encoder and closes the
fragmented MP4 (and puts its plain copy in place, ``video.StagingEncoder``), so a kill
loses only what had not been handed over. The writer can hand the encoder process a file
to hold open until the video is closed (``hold``): the dataset's writer lock, so that
``ortf recover`` waits for a killed writer's videos to be complete instead of recovering
them while they are still being written. The encoder process ignores SIGINT and SIGTERM,
which a terminal's Ctrl-C or a service manager's stop send to every process of the
group, and SIGHUP: what they mean for the episode is the writer's decision, and the
encoder process lives exactly as long as the writer's end of the socket.

The writer's side: ``staged_video.StagedVideoWriter`` (a video's frames) and
``encoder_pool`` (the processes, started ahead and reused). Here: the protocol between
them and the encoder process, and the process itself.

Run as ``python -m ortf_ros.io.encoder_process CONTROL_FD RING_FD RING_BYTES`` by
``encoder_pool.EncoderProcess`` only.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import select
import signal
import socket
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ortf_ros.errors import WriterError, describe
from ortf_ros.io.video import FrameKind, StagingEncoder, VideoSettings

# Writer to encoder process: open a video (JSON body), encode a slot, take a file (its
# descriptor attached), encode a frame that lies in that file, close the video.
OPEN, FRAME, MAP, MAPPED_FRAME, CLOSE = b"O", b"F", b"M", b"P", b"C"
# Encoder process to writer: slots are free again (their numbers), the video failed
# (text), it is closed.
FREE, FAILED, CLOSED = b"R", b"E", b"D"
MESSAGE_BYTES = 4096

_SLOT = struct.Struct("<I")
_SERIAL = struct.Struct("<Q")  # a MappedFile's serial number
_MAPPED_FRAME = struct.Struct("<IQQ")  # slot, the file's serial number, offset of the frame in it


def slot_message(kind: bytes, slot: int) -> bytes:
    return kind + _SLOT.pack(slot)


def map_message(serial: int) -> bytes:
    """MAP: the file sent with this message is the writer's ``serial``."""
    return MAP + _SERIAL.pack(serial)


def mapped_frame_message(slot: int, serial: int, offset: int) -> bytes:
    """MAPPED_FRAME: the frame numbered ``slot`` lies at ``offset`` in file ``serial``."""
    return MAPPED_FRAME + _MAPPED_FRAME.pack(slot, serial, offset)


FREE_SLOTS_MAX = (MESSAGE_BYTES - 1) // _SLOT.size  # slot numbers one FREE message holds


def _free_message(slots: list[int]) -> bytes:
    return FREE + struct.pack(f"<{len(slots)}I", *slots)


def freed_slots(body: bytes) -> tuple[int, ...]:
    return struct.unpack(f"<{len(body) // _SLOT.size}I", body)


def frame_layout(width: int, height: int, kind: FrameKind) -> tuple[tuple[int, ...], np.dtype[np.generic]]:
    """(shape, dtype) of a frame as the writer takes it and a ring slot holds it."""
    if kind == "depth":
        return (height, width), np.dtype(np.uint16)
    return (height, width, 3), np.dtype(np.uint8)


# -- the encoder process ---------------------------------------------------------------


def _serve(control: socket.socket, ring: mmap.mmap) -> None:
    """Encode videos one after another until the writer's end of the socket closes."""
    encoder: StagingEncoder | None = None
    frames = np.empty(0)
    held: list[int] = []  # what the writer handed over to keep open until the video is closed
    source = _FramesFile()  # the writer's file that frames lie in, for this video
    freed = _FreedSlots(control)
    for message, fds in _messages(control, freed):
        kind, body = message[:1], message[1:]
        if kind == OPEN:
            _close_all(held)
            held = fds
            source.let_go()
            try:
                job = json.loads(body)
                shape, dtype = frame_layout(job["width"], job["height"], job["kind"])
                frames = np.frombuffer(ring, dtype).reshape(-1, *shape)
                freed.batch = max(1, min(len(frames) // 2, FREE_SLOTS_MAX))
                encoder = StagingEncoder(
                    Path(job["path"]),
                    job["width"],
                    job["height"],
                    job["fps"],
                    job["kind"],
                    VideoSettings(**job["settings"]),
                )
            except Exception as exc:
                encoder = None
                _report(control, exc)
        elif kind in (FRAME, MAPPED_FRAME):
            slot = _SLOT.unpack_from(body)[0]
            if encoder is not None:
                try:
                    if kind == FRAME:
                        encoder.encode(frames[slot])
                    else:
                        _, serial, offset = _MAPPED_FRAME.unpack(body)
                        encoder.encode(source.read(serial, offset, frames[0]))
                except Exception as exc:
                    encoder.abandon()
                    encoder = None
                    _report(control, exc)
            freed.add(slot)
        elif kind == MAP:
            source.let_go()
            if len(fds) == 1 and len(body) == _SERIAL.size:
                source.hold(_SERIAL.unpack(body)[0], fds.pop())
            else:  # (its frames then fail as not sent)
                _report(control, WriterError(f"a malformed file message ({len(fds)} descriptors, {len(body)} bytes)"))
            _close_all(fds)
        elif kind == CLOSE:
            if encoder is not None:
                try:
                    encoder.close()
                except Exception as exc:
                    _report(control, exc)
                encoder = None
            _close_all(held)
            source.let_go()
            freed.send()
            _reply(control, CLOSED)
        else:
            _close_all(fds)
    if encoder is not None:  # the writer is gone: keep every frame it handed over
        with contextlib.suppress(Exception):
            encoder.close()
    _close_all(held)


class _FramesFile:
    """The writer's file that MAPPED_FRAME messages point into, read a frame at a time
    into a buffer of this process. Reading costs less than mapping the file: each of a
    mapped frame's pages faults in as the encoder reads it, and the pages must be let go
    of after (or they would count in this process's RSS until the whole recording did);
    for a 640x480 frame that was about 85 us against 50 us for the read (benchmark VM)."""

    def __init__(self) -> None:
        self._serial: int | None = None  # the writer's number for the file
        self._fd = -1
        self._buffer = np.empty(0, np.uint8)  # the frame last read: the encoder is done with it when it returns

    def hold(self, serial: int, fd: int) -> None:
        self.let_go()
        self._serial, self._fd = serial, fd

    def let_go(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._serial, self._fd = None, -1

    def read(self, serial: int, offset: int, like: np.ndarray) -> np.ndarray:
        """The frame at ``offset`` of file ``serial``, shaped ``like`` a ring slot."""
        if serial != self._serial:
            raise WriterError(f"a frame in file {serial}, which was not sent")
        if self._buffer.nbytes != like.nbytes:
            self._buffer = np.empty(like.nbytes, np.uint8)
        got = 0
        while got < like.nbytes:  # (a read may return less than asked, on a network file system say)
            read = os.preadv(self._fd, [self._buffer.data[got:]], offset + got)
            if read == 0:
                raise WriterError(f"a {like.nbytes}-byte frame at offset {offset}: the file ends {got} bytes on")
            got += read
        return self._buffer.view(like.dtype).reshape(like.shape)


class _FreedSlots:
    """Slots whose frames are encoded, told to the writer together: each message wakes a
    writer that waits for a slot, and a wake-up costs tens of microseconds of CPU on a
    VM, which a frame every millisecond would spend on both sides. They go once ``batch``
    wait (half the ring: the writer keeps the other half queued here), and whenever this
    process is about to wait for a message (``_messages``), so a writer is never left
    waiting for slots that are free."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.batch = 1  # at most FREE_SLOTS_MAX: what waits always fits in one message
        self._slots: list[int] = []

    def add(self, slot: int) -> None:
        self._slots.append(slot)
        if len(self._slots) >= self.batch:
            self.send()

    def send(self) -> None:
        if self._slots:
            _reply(self.control, _free_message(self._slots))
            self._slots = []


def _messages(control: socket.socket, freed: _FreedSlots) -> Iterator[tuple[bytes, list[int]]]:
    """What the writer sends (and the file descriptors with it), until its end of the
    socket closes; the freed slots are sent before waiting for it."""
    waiting = select.poll()  # (not select.select: the socket's number may be past 1023)
    waiting.register(control, select.POLLIN)
    while True:
        if not waiting.poll(0):  # (recv_fds ignores MSG_DONTWAIT before Python 3.12)
            freed.send()
        try:
            message, fds, _, _ = socket.recv_fds(control, MESSAGE_BYTES, 1)
        except ConnectionResetError:  # it died with replies unread: what it sent still follows
            continue
        if not message:
            return
        yield message, fds


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
    fds.clear()


def _report(control: socket.socket, failure: Exception) -> None:
    _reply(control, FAILED + describe(failure).encode()[: MESSAGE_BYTES - 1])


def _reply(control: socket.socket, message: bytes) -> None:
    """Send to the writer; if it is gone, the loop ends at the socket's end all the same."""
    with contextlib.suppress(OSError):
        control.send(message)


def main(argv: list[str] | None = None) -> None:
    control_fd, ring_fd, ring_bytes = (int(arg) for arg in (argv if argv is not None else sys.argv[1:]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # Sent with SIGCONT when the writer dies while this process is stopped (its process
    # group is orphaned then): the frames it was handed are still to be encoded.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # A file size limit then fails the write (EFBIG), which is reported, instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    # One thread for OpenCV's colour conversion (``colour``): with its default, a thread per
    # core, it used about 75 % more CPU for the same frames, and each camera has a process.
    # (Imported here, as in ``video``: the writer's process, which imports this module, needs no OpenCV.)
    import cv2

    cv2.setNumThreads(1)
    ring = mmap.mmap(ring_fd, ring_bytes)
    os.close(ring_fd)
    with socket.socket(fileno=control_fd) as control:
        _serve(control, ring)


if __name__ == "__main__":
    main()
