"""The frame protocol between a writer and its encoder process, over real sockets: the
slots the process has encoded go back to the writer several in one message, and never
later than when the process is about to wait for the writer (so a writer waiting for a
slot is not left waiting for one that is free); frames that lie in a mapped file may wait
beyond the ring's slots."""

from __future__ import annotations

import json
import mmap
import os
import resource
import socket
import threading
import time
from dataclasses import asdict
from pathlib import Path

import av
import numpy as np
import psutil
import pytest

from ortf_ros.io import encoder_pool
from ortf_ros.io.encoder_process import (
    CLOSE,
    CLOSED,
    FRAME,
    FREE,
    OPEN,
    _FreedSlots,
    _messages,
    _serve,
    freed_slots,
    slot_message,
)
from ortf_ros.io.mapped_file import MappedFile
from ortf_ros.io.staged_video import MAPPED_QUEUE_FRAMES, StagedVideoWriter
from ortf_ros.io.video import VideoSettings


def _next_reply(writer: socket.socket) -> tuple[int, ...]:
    reply = writer.recv(4096)
    assert reply[:1] == FREE
    return freed_slots(reply[1:])


def test_freed_slots_go_back_together_and_before_the_process_waits() -> None:
    writer, process = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with writer, process:
        writer.settimeout(10)
        freed = _FreedSlots(process)
        freed.batch = 3
        freed.add(5)
        freed.add(6)
        writer.setblocking(False)
        with pytest.raises(BlockingIOError):  # two of three: nothing sent yet
            writer.recv(4096)
        writer.settimeout(10)
        freed.add(7)
        assert _next_reply(writer) == (5, 6, 7)

        freed.add(8)
        messages = _messages(process, freed)
        writer.send(CLOSE)
        assert next(messages)[0] == CLOSE  # a message was waiting: read without sending slot 8
        writer.setblocking(False)
        with pytest.raises(BlockingIOError):
            writer.recv(4096)
        writer.settimeout(10)

        rest: list[tuple[bytes, list[int]]] = []
        reader = threading.Thread(target=lambda: rest.extend(messages))
        reader.start()  # nothing waits now: slot 8 goes before the process waits
        assert _next_reply(writer) == (8,)
        writer.shutdown(socket.SHUT_WR)  # the writer's end closes: the messages end
        reader.join(timeout=10)
        assert not reader.is_alive() and rest == []


def _handed_over(writer: StagedVideoWriter, images: list[np.ndarray]) -> tuple[threading.Thread, list[int]]:
    """Hand ``images`` to ``writer`` in a thread; returns it and the frame indices handed so far."""
    handed: list[int] = []
    thread = threading.Thread(target=lambda: handed.extend(writer.write(image) for image in images), daemon=True)
    thread.start()
    return thread, handed


def _stalls_at(thread: threading.Thread, handed: list[int], count: int) -> bool:
    """Whether the thread has handed over ``count`` frames and waits there."""
    deadline = time.monotonic() + 30
    while len(handed) < count and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    thread.join(timeout=0.3)  # (it would hand over more by now if it could)
    return len(handed) == count and thread.is_alive()


@pytest.mark.parametrize(("kinds", "stall"), [("m", MAPPED_QUEUE_FRAMES), ("c", 2), ("cm", 4)])
def test_frames_that_lie_in_a_mapped_file_wait_beyond_the_ring(tmp_path: Path, kinds: str, stall: int) -> None:
    """With the encoder process stopped, ``MAPPED_QUEUE_FRAMES`` frames that lie in a mapped
    file ("m") are handed over before the writer waits (they need no ring memory), and
    only ``queue_frames`` + 1 copied ones ("c"); mixed, each kind takes its own numbers.
    Once the process goes on, every frame is in the video, in order."""
    width, height, queue_frames = 64, 48, 1
    frames = [np.full((height, width, 3), 6 * i, np.uint8) for i in range(MAPPED_QUEUE_FRAMES + 9)]
    (tmp_path / "frames.bin").write_bytes(b"".join(frame.tobytes() for frame in frames))
    mapped = MappedFile(tmp_path / "frames.bin")
    size = frames[0].size
    images = [
        np.frombuffer(mapped, np.uint8, size, i * size).reshape(height, width, 3)
        if kinds[i % len(kinds)] == "m"
        else frame
        for i, frame in enumerate(frames)
    ]
    writer = StagedVideoWriter(
        tmp_path / "video.mp4", width, height, 30, "rgb", VideoSettings(), camera="cam", queue_frames=queue_frames
    )
    process = psutil.Process(writer._process.process.pid)
    process.suspend()
    try:
        thread, handed = _handed_over(writer, images)
        assert _stalls_at(thread, handed, stall)
    finally:
        process.resume()
    thread.join(timeout=60)
    assert handed == list(range(len(frames)))
    writer.close()
    assert _levels(tmp_path / "video.mp4") == [6 * i for i in range(len(frames))]


def _levels(video: Path) -> list[int]:
    """Each decoded frame's grey level, to the nearest multiple of 6 (frames here are 6
    levels apart; the YUV round trip costs one or two)."""
    with av.open(str(video)) as container:
        return [6 * round(frame.to_ndarray(format="rgb24").mean() / 6) for frame in container.decode(video=0)]


def test_slots_freed_before_a_close_go_back_before_it_is_confirmed(tmp_path: Path) -> None:
    """The process is reused for the next video: slots of this one freed but not yet sent
    must reach this writer before CLOSED, never the next one."""
    writer, process = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    width, height, slots = 32, 16, 9
    ring = mmap.mmap(-1, slots * width * height * 3)
    job = {"path": str(tmp_path / "v.mp4"), "width": width, "height": height, "fps": 30, "kind": "rgb"}
    job["settings"] = asdict(VideoSettings())
    with writer, process:
        writer.settimeout(30)
        for message in (OPEN + json.dumps(job).encode(), *(slot_message(FRAME, slot) for slot in range(3)), CLOSE):
            writer.send(message)  # (all waiting at once: no reply is due before the close)
        server = threading.Thread(target=_serve, args=(process, ring), daemon=True)
        server.start()
        assert _next_reply(writer) == (0, 1, 2)  # (three of nine: fewer than half the ring)
        assert writer.recv(4096) == CLOSED
        writer.shutdown(socket.SHUT_WR)
        server.join(timeout=30)
        assert not server.is_alive()
    assert len(_levels(tmp_path / "v.mp4")) == 3


def test_an_encoder_process_serves_a_socket_numbered_past_1023(tmp_path: Path) -> None:
    """``select.select`` cannot watch descriptors from 1024 on, which a writer that holds
    many files open (a recording split into a thousand parts) gives its encoder sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this machine allows {hard} open files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        width, height = 80, 48  # (a frame size no other test uses: a process of its own)
        writer = StagedVideoWriter(tmp_path / "video.mp4", width, height, 30, "rgb", VideoSettings(), camera="cam")
        assert writer._process.control.fileno() >= 1024
        for level in range(12):
            writer.write(np.full((height, width, 3), 6 * level, np.uint8))
        writer.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert _levels(tmp_path / "video.mp4") == [6 * level for level in range(12)]


def test_an_encoder_process_imports_this_ortf_ros_whatever_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m`` puts the working directory first on the path: another ortf_ros there
    (a checkout of another version) must not be the one the encoder process imports."""
    other = tmp_path / "ortf_ros"
    other.mkdir()
    (other / "__init__.py").write_text('raise ImportError("the ortf_ros of the working directory")\n')
    monkeypatch.chdir(tmp_path)
    # (a frame size no other test uses: an idle encoder process of another test is not reused)
    writer = StagedVideoWriter(tmp_path / "video.mp4", 72, 40, 30, "rgb", VideoSettings(), camera="cam")
    for index in range(5):
        writer.write(np.full((40, 72, 3), 40 * index, np.uint8))
    writer.close()
    with av.open(str(tmp_path / "video.mp4")) as container:
        assert sum(1 for _ in container.decode(video=0)) == 5


def test_prestarted_processes_serve_before_they_are_needed_and_are_taken(tmp_path: Path) -> None:
    """A prestart is ready once each process answers (its imports done); a video of that
    size then takes one of them instead of starting its own."""
    prestart = encoder_pool.Prestart([(64, 48, "rgb"), (64, 48, "depth")], 4)
    assert prestart.wait()
    with encoder_pool._idle_lock:
        waiting = {process.process.pid for process in encoder_pool._idle}
    assert len(waiting) >= 2 and all(psutil.pid_exists(pid) for pid in waiting)
    writer = StagedVideoWriter(
        tmp_path / "rgb.mp4", 64, 48, 30.0, "rgb", VideoSettings(preset="ultrafast"), camera="c", queue_frames=4
    )
    assert writer._process.process.pid in waiting
    writer.write(np.zeros((48, 64, 3), np.uint8))
    writer.close()
    with av.open(str(tmp_path / "rgb.mp4")) as container:
        assert sum(1 for _ in container.decode(video=0)) == 1


def test_a_forked_child_leaves_the_parents_waiting_processes_to_end_when_the_parent_closes_them() -> None:
    """A waiting process ends when its socket closes. A child forked while processes wait
    must not keep its copies of their sockets open: the parent's close would then not end
    them (``stop`` waits, then kills), and a child that encodes would share their sockets."""
    prestart = encoder_pool.Prestart([(32, 24, "rgb")], 2)
    assert prestart.wait()
    with encoder_pool._idle_lock:
        waiting = list(encoder_pool._idle)
    assert waiting
    release_read, release_write = os.pipe()
    report_read, report_write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: how many processes it believes wait, then block until released
        try:
            os.write(report_write, str(len(encoder_pool._idle)).encode())
            os.read(release_read, 1)
        finally:
            os._exit(0)
    try:
        assert os.read(report_read, 16) == b"0"
        started = time.monotonic()
        for process in waiting:
            with encoder_pool._idle_lock:
                encoder_pool._idle.remove(process)
            process.stop()
            assert process.process.returncode == 0  # ended by its socket's close, not killed
        assert time.monotonic() - started < 10
    finally:
        os.write(release_write, b"x")
        os.waitpid(child, 0)
        for fd in (release_read, release_write, report_read, report_write):
            os.close(fd)
