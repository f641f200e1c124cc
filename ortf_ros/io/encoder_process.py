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

Reuse: starting an encoder process (Python and PyAV) takes about 0.15 s, too long to pay
at every episode of a live recorder, so a process whose video closed cleanly waits for
the next video of that frame size (at most ``IDLE_PROCESSES`` wait; each exits when the
writer's process does).

Run as ``python -m ortf_ros.io.encoder_process CONTROL_FD RING_FD RING_BYTES`` by
``StagedVideoWriter`` only.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import mmap
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import numpy as np

import ortf_ros
from ortf_ros.errors import WriterError, describe
from ortf_ros.io.mapped_file import MappedFile, locate
from ortf_ros.io.video import FrameKind, StagingEncoder, VideoSettings, as_frame_rate

# Writer to encoder process: open a video (JSON body), encode a slot, take a file (its
# descriptor attached), encode a frame that lies in that file, close the video.
OPEN, FRAME, MAP, MAPPED_FRAME, CLOSE = b"O", b"F", b"M", b"P", b"C"
# Encoder process to writer: slots are free again (their numbers), the video failed
# (text), it is closed.
FREE, FAILED, CLOSED = b"R", b"E", b"D"
MESSAGE_BYTES = 4096
IDLE_PROCESSES = 4
MAPPED_QUEUE_FRAMES = 32
"""Frames per camera that may wait for the encoder process when they lie in a mapped file,
whatever ``queue_frames``: such a frame takes no memory while it waits. The reader hands
frames to its cameras in turn, and waits whenever one encoder is behind; a deeper queue
keeps the other encoders busy meanwhile (on the benchmark's two cores, they were busy
1.77 of the time with 9 waiting frames, and 1.84 with 32)."""


_SLOT = struct.Struct("<I")
_SERIAL = struct.Struct("<Q")  # a MappedFile's serial number
_MAPPED_FRAME = struct.Struct("<IQQ")  # slot, the file's serial number, offset of the frame in it


def _slot_message(kind: bytes, slot: int) -> bytes:
    return kind + _SLOT.pack(slot)


FREE_SLOTS_MAX = (MESSAGE_BYTES - 1) // _SLOT.size  # slot numbers one FREE message holds


def _free_message(slots: list[int]) -> bytes:
    return FREE + struct.pack(f"<{len(slots)}I", *slots)


def _freed_slots(body: bytes) -> tuple[int, ...]:
    return struct.unpack(f"<{len(body) // _SLOT.size}I", body)


def _frame_layout(width: int, height: int, kind: FrameKind) -> tuple[tuple[int, ...], np.dtype[np.generic]]:
    """(shape, dtype) of a frame as the writer takes it and a ring slot holds it."""
    if kind == "depth":
        return (height, width), np.dtype(np.uint16)
    return (height, width, 3), np.dtype(np.uint8)


class _EncoderProcess:
    """One encoder process, its frame ring and the writer's end of its socket."""

    def __init__(self, slot_bytes: int, slots: int) -> None:
        self.slot_bytes = slot_bytes
        self.slots = slots
        size = slot_bytes * slots
        ring_fd = os.memfd_create("ortf-frames")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            os.ftruncate(ring_fd, size)
            self.ring = mmap.mmap(ring_fd, size)
            command = [
                sys.executable,
                "-c",
                _RUN_OFF_THE_WORKING_DIRECTORY,
                str(theirs.fileno()),
                str(ring_fd),
                str(size),
            ]
            # A session (and so a process group) of its own: a terminal's Ctrl-C is the
            # writer's to handle. (start_new_session, not process_group=0: that is 3.11's.)
            self.process = subprocess.Popen(
                command,
                pass_fds=(theirs.fileno(), ring_fd),
                stdin=subprocess.DEVNULL,
                env=_child_environment(),
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
            os.close(ring_fd)
        self.control = ours

    def send(self, message: bytes, fds: list[int] | None = None) -> bool:
        """False when the process is gone. ``fds`` go with the message (SCM_RIGHTS)."""
        try:
            if fds:
                socket.send_fds(self.control, [message], fds)
            else:  # (a frame: a plain send, without sendmsg's ancillary data to build)
                self.control.send(message)
        except OSError:  # EPIPE, ECONNRESET: it exited
            return False
        return True

    def receive(self, wait: bool) -> bytes | None:
        """The next message; b"" once the process is gone; None when nothing waits and ``wait`` is false."""
        while True:
            try:
                return self.control.recv(MESSAGE_BYTES, 0 if wait else socket.MSG_DONTWAIT)
            except BlockingIOError:
                return None
            except ConnectionResetError:  # it exited with messages unread; those it sent still follow
                continue
            except OSError:
                return b""

    def exit_status(self) -> str:
        """How the process ended, for an error message (it has closed its socket)."""
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "the encoder process stopped answering"
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
            return f"the encoder process was killed by {name}"
        return f"the encoder process exited with code {code}"

    def stop(self) -> None:
        """End the process: closing the socket ends its loop, after what it was sent."""
        self.control.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_RUN_OFF_THE_WORKING_DIRECTORY = (
    "import runpy, sys\n"
    "if sys.path and sys.path[0] == '': del sys.path[0]\n"
    f"runpy.run_module({__name__!r}, run_name='__main__', alter_sys=True)\n"
)
"""The child's program: this module as ``__main__``, without the working directory that
``python -c`` (and ``-m``) puts first on the path, where another checkout of ortf_ros
would be the one imported. (PYTHONSAFEPATH does the same from Python 3.11 on; this works
on 3.10 too.)"""


def _child_environment() -> dict[str, str]:
    """This environment, with ortf_ros imported from where this process imports it: first
    on the path (see ``_RUN_OFF_THE_WORKING_DIRECTORY``)."""
    package_root = str(Path(ortf_ros.__file__).resolve().parent.parent)
    paths = [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


_idle: list[_EncoderProcess] = []
_let_go: list[_EncoderProcess] = []  # finishing a video on their own, to be reaped
_idle_lock = threading.Lock()


def _take_process(slot_bytes: int, slots: int) -> _EncoderProcess:
    """A waiting process with a ring of this size, or a new one."""
    with _idle_lock:
        _let_go[:] = [process for process in _let_go if process.process.poll() is None]
        for process in _idle:
            if (process.slot_bytes, process.slots) == (slot_bytes, slots) and process.process.poll() is None:
                _idle.remove(process)
                return process
    return _EncoderProcess(slot_bytes, slots)


PRESTART_TIMEOUT_S = 60.0


class Prestart:
    """Encoder processes started ahead of their videos, one per (width, height, kind), to
    wait among the idle ones. A process takes a while to import PyAV and OpenCV (seconds
    on a busy machine), during which ``write`` waits once the ring is full: a live
    recorder starts its cameras' before the first episode, whose first second of frames
    would otherwise be held up and its subscriptions' queues overflow.

    Nothing here blocks: ``ready`` says whether every process serves yet (a close with no
    video open is answered once its imports are done), so the caller keeps taking its
    input meanwhile. One that does not answer within ``PRESTART_TIMEOUT_S`` is stopped;
    its video gets a process at its first frame, as without a prestart."""

    def __init__(self, videos: list[tuple[int, int, FrameKind]], queue_frames: int) -> None:
        self._waiting: list[_EncoderProcess] = []
        self._deadline = time.monotonic() + PRESTART_TIMEOUT_S
        for width, height, kind in videos[:IDLE_PROCESSES]:
            shape, dtype = _frame_layout(width, height, kind)
            process = _EncoderProcess(int(np.prod(shape)) * dtype.itemsize, queue_frames + 1)
            if process.send(CLOSE):
                self._waiting.append(process)
            else:
                process.stop()

    def ready(self) -> bool:
        """Whether every process answered (or was given up on); those that did wait idle."""
        still = []
        for process in self._waiting:
            answer = _answered(process)
            if answer is None and time.monotonic() < self._deadline:
                still.append(process)
            elif answer:
                _keep_process(process)
            else:
                process.stop()
        self._waiting = still
        return not still

    def wait(self, timeout_s: float = PRESTART_TIMEOUT_S) -> bool:
        """Block until ``ready`` (tests, scripts); whether every process answered in time."""
        deadline = time.monotonic() + timeout_s
        while not self.ready():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True


def _answered(process: _EncoderProcess) -> bool | None:
    """True once ``process`` answered the close, False when it is gone, None while it is not there yet."""
    while True:
        message = process.receive(wait=False)
        if message is None:
            return None
        if message == b"":
            return False
        if message[:1] == CLOSED:
            return True


def _let_go_of(process: _EncoderProcess) -> None:
    """Close its socket without waiting: it encodes what it was handed, closes the file,
    lets go of what it holds and exits on its own (reaped by a later ``_take_process``)."""
    process.control.close()
    with _idle_lock:
        _let_go.append(process)


def wait_for_processes_let_go(timeout_s: float = 60.0) -> None:
    """Wait until every process let go of (``abandon``, an interrupted ``close``) has
    finished its video and exited. One that had not read its OPEN yet opens its video by
    path: in a directory made anew there for another episode, or (making it again) in one
    just removed, if the writer did not wait. Raises ``WriterError`` when one is still
    running after ``timeout_s`` in all."""
    deadline = time.monotonic() + timeout_s
    with _idle_lock:
        waiting = list(_let_go)
    for process in waiting:
        try:
            process.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise WriterError(
                f"an encoder process let go of (pid {process.process.pid}) is still finishing its video "
                f"after {timeout_s:.0f} s"
            ) from None
    with _idle_lock:
        _let_go[:] = [process for process in _let_go if process.process.poll() is None]


def _keep_process(process: _EncoderProcess) -> None:
    with _idle_lock:
        _idle.append(process)
        surplus = _idle[:-IDLE_PROCESSES]
        del _idle[:-IDLE_PROCESSES]
    for old in surplus:
        old.stop()


@atexit.register
def _stop_idle_processes() -> None:
    with _idle_lock:
        waiting = list(_idle)
        _idle.clear()
    for process in waiting:
        process.stop()


class StagedVideoWriter:
    """Encodes one camera's frames into a fragmented MP4, in an encoder process.

    ``write`` copies the frame into the ring (the caller may reuse its array), or for a
    view of a ``MappedFile`` sends where it lies, and returns at once unless all
    ``queue_frames`` + 1 slots wait for the encoder (for a view, unless
    ``MAPPED_QUEUE_FRAMES`` frames or all slots wait, whichever are more): memory is
    that many frames plus one GOP inside the encoder. A failure of the encoder (its
    error, or the process's death) is raised as a ``WriterError`` naming the camera by
    every ``write`` and ``close`` after it, so an episode missing frames is never taken
    for a complete one; what reached the file stays there. The encoder process keeps
    ``hold`` (a file descriptor) open until the video is closed, also when this process
    dies.
    """

    def __init__(
        self,
        path: Path,
        width: int,
        height: int,
        fps: float,
        kind: FrameKind,
        settings: VideoSettings,
        *,
        camera: str,
        queue_frames: int = 8,
        hold: int | None = None,
    ) -> None:
        self.path = path
        self.camera = camera
        self.kind = kind
        self.shape, self._dtype = _frame_layout(width, height, kind)
        self.frames_written = 0
        job = {
            "path": str(path),
            "width": width,
            "height": height,
            "fps": as_frame_rate(fps),
            "kind": kind,
            "settings": asdict(settings),
        }
        slots = queue_frames + 1
        self._process = _take_process(int(np.prod(self.shape)) * self._dtype.itemsize, slots)
        self._ring: np.ndarray = np.frombuffer(self._process.ring, self._dtype).reshape(slots, *self.shape)
        self._slots = slots
        self._free = list(range(slots))  # the ring's slots
        # Numbers past the ring, for frames that lie in a mapped file only (they need no slot's memory).
        self._free_mapped = list(range(slots, max(slots, MAPPED_QUEUE_FRAMES)))
        self._mapped: int | None = None  # serial number of the file the process holds for this video
        self._failure: str | None = None
        self._alive = True  # the process has not closed its socket
        self._closed = False  # the process confirmed the close
        self._finished = False
        opening = OPEN + json.dumps(job).encode()
        if len(opening) > MESSAGE_BYTES:
            self._process.stop()
            raise WriterError(f"camera {camera!r}: {path}: the path is too long for the encoder process")
        if not self._process.send(opening, None if hold is None else [hold]):
            self._lost()

    def write(self, image: np.ndarray) -> int:
        """Hand one frame to the encoder; returns its frame index."""
        if self._finished:
            raise WriterError(f"camera {self.camera!r}: {self.path} is closed; it takes no more frames")
        self._receive(wait=False)
        self._raise_failure()
        if image.shape != self.shape or image.dtype != self._dtype:
            raise WriterError(
                f"camera {self.camera!r}: expected a {self._dtype.name} image of shape {self.shape}, "
                f"got {image.dtype.name} {image.shape}"
            )
        located = locate(image)
        while (free := self._free_for(located)) is None:
            self._receive(wait=True)
            self._raise_failure()
        slot = free.pop()
        try:
            message = self._handover(slot, image, located)
        except BaseException:  # (an interrupt): the frame was not handed over, so its slot is free again
            free.append(slot)
            raise
        if message is None or not self._process.send(message):
            self._lost()
            self._raise_failure()
        self.frames_written += 1
        return self.frames_written - 1

    def _free_for(self, located: tuple[MappedFile, int] | None) -> list[int] | None:
        """The free numbers a frame takes one of: a frame in a mapped file (``located``)
        those past the ring first; None while none is free."""
        if located is not None and self._free_mapped:
            return self._free_mapped
        return self._free or None

    def _handover(self, slot: int, image: np.ndarray, located: tuple[MappedFile, int] | None) -> bytes | None:
        """The message that hands ``image`` over in ``slot``: where it lies in a mapped file
        (``located``; the file sent first if need be), or the slot it was copied into. None
        when the process is gone."""
        if located is None:
            self._ring[slot] = image
            return _slot_message(FRAME, slot)
        mapped, offset = located
        if mapped.serial != self._mapped:
            if not self._process.send(MAP + _SERIAL.pack(mapped.serial), [mapped.fileno()]):
                return None
            self._mapped = mapped.serial
        return MAPPED_FRAME + _MAPPED_FRAME.pack(slot, mapped.serial, offset)

    def close(self) -> None:
        """Encode what was written, flush the encoder and close the file (waits for it)."""
        if not self._finished:
            self._finished = True
            try:
                if self._alive and not self._process.send(CLOSE):
                    self._lost()
                while self._alive and not self._closed:
                    self._receive(wait=True)
            finally:
                del self._ring  # the process may be reused: this writer no longer writes into its ring
                if self._closed and self._failure is None:
                    _keep_process(self._process)
                elif self._failure is None:  # interrupted: the process finishes the video on its own
                    self._fail("closing the video was interrupted")
                    _let_go_of(self._process)
                else:
                    self._process.stop()
        self._raise_failure()

    def abandon(self) -> None:
        """Let go of the video without waiting: the encoder process encodes what it was
        handed, closes the file, lets go of ``hold`` and exits on its own (as when this
        process dies). For an interrupted close of the episode's other videos."""
        if not self._finished:
            self._finished = True
            self._fail("the video was abandoned before it was closed")
            del self._ring
            _let_go_of(self._process)

    def _receive(self, wait: bool) -> None:
        """Take in what the process has sent: the first message waited for when ``wait``."""
        while self._alive:
            message = self._process.receive(wait)
            wait = False
            if message is None:
                return
            kind, body = message[:1], message[1:]
            if kind == FREE:
                for slot in _freed_slots(body):
                    (self._free if slot < self._slots else self._free_mapped).append(slot)
            elif kind == FAILED:
                self._fail(body.decode(errors="replace"))
            elif kind == CLOSED:
                self._closed = True
                return
            else:  # b"": the socket closed
                self._lost()

    def _lost(self) -> None:
        self._alive = False
        self._fail(self._process.exit_status())

    def _fail(self, reason: str) -> None:
        if self._failure is None:
            self._failure = f"camera {self.camera!r}: encoding into {self.path} failed: {reason}"

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise WriterError(self._failure)


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
                shape, dtype = _frame_layout(job["width"], job["height"], job["kind"])
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
