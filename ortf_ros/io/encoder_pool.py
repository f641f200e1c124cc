"""The encoder processes (``encoder_process``) on the writer's side: each started with
its frame ring and a socket (``EncoderProcess``), and kept for reuse.

Reuse: starting an encoder process (Python and PyAV) takes about 0.15 s, too long to pay
at every episode of a live recorder, so a process whose video closed cleanly waits for
the next video of that frame size (at most ``IDLE_PROCESSES`` wait; each exits when the
writer's process does). A live recorder starts its cameras' processes before its first
episode (``Prestart``). A process let go of without waiting (an interrupted close)
finishes its video on its own; ``wait_for_processes_let_go`` waits for those.
"""

from __future__ import annotations

import atexit
import mmap
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

import ortf_ros
from ortf_ros.errors import WriterError
from ortf_ros.io import encoder_process
from ortf_ros.io.encoder_process import CLOSE, CLOSED, MESSAGE_BYTES, frame_layout
from ortf_ros.io.video import FrameKind

IDLE_PROCESSES = 4


class EncoderProcess:
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
    f"runpy.run_module({encoder_process.__name__!r}, run_name='__main__', alter_sys=True)\n"
)
"""The child's program: ``encoder_process`` as ``__main__``, without the working directory that
``python -c`` (and ``-m``) puts first on the path, where another checkout of ortf_ros
would be the one imported. (PYTHONSAFEPATH does the same from Python 3.11 on; this works
on 3.10 too.)"""


def _child_environment() -> dict[str, str]:
    """This environment, with ortf_ros imported from where this process imports it: first
    on the path (see ``_RUN_OFF_THE_WORKING_DIRECTORY``)."""
    package_root = str(Path(ortf_ros.__file__).resolve().parent.parent)
    paths = [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


_idle: list[EncoderProcess] = []
_let_go: list[EncoderProcess] = []  # finishing a video on their own, to be reaped
_idle_lock = threading.Lock()


def take_process(slot_bytes: int, slots: int) -> EncoderProcess:
    """A waiting process with a ring of this size, or a new one."""
    with _idle_lock:
        _let_go[:] = [process for process in _let_go if process.process.poll() is None]
        for process in _idle:
            if (process.slot_bytes, process.slots) == (slot_bytes, slots) and process.process.poll() is None:
                _idle.remove(process)
                return process
    return EncoderProcess(slot_bytes, slots)


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
        self._waiting: list[EncoderProcess] = []
        self._deadline = time.monotonic() + PRESTART_TIMEOUT_S
        for width, height, kind in videos[:IDLE_PROCESSES]:
            shape, dtype = frame_layout(width, height, kind)
            process = EncoderProcess(int(np.prod(shape)) * dtype.itemsize, queue_frames + 1)
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
                keep_process(process)
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


def _answered(process: EncoderProcess) -> bool | None:
    """True once ``process`` answered the close, False when it is gone, None while it is not there yet."""
    while True:
        message = process.receive(wait=False)
        if message is None:
            return None
        if message == b"":
            return False
        if message[:1] == CLOSED:
            return True


def let_go_of(process: EncoderProcess) -> None:
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


def keep_process(process: EncoderProcess) -> None:
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


def _forget_processes_in_child() -> None:
    """In a forked child the waiting processes are the parent's: the child closes its copies
    of their sockets (a process ends when its socket closes, which the parent's close alone
    would then no longer do) and starts processes of its own. The lock is made anew: a
    thread of the parent may have held it at the fork, and that thread does not exist here."""
    global _idle_lock
    for process in [*_idle, *_let_go]:
        process.control.close()
    _idle.clear()
    _let_go.clear()
    _idle_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_processes_in_child)
