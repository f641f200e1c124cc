"""The frame protocol between a writer and its encoder process, over real sockets: the
slots the process has encoded go back to the writer several in one message, and never
later than when the process is about to wait for the writer (so a writer waiting for a
slot is not left waiting for one that is free); frames that lie in a mapped file may wait
beyond the ring's slots."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import av
import numpy as np
import psutil
import pytest

from ortf_ros.io.encoder_process import (
    CLOSE,
    FREE,
    MAPPED_QUEUE_FRAMES,
    StagedVideoWriter,
    _freed_slots,
    _FreedSlots,
    _messages,
)
from ortf_ros.io.mapped_file import MappedFile
from ortf_ros.io.video import VideoSettings


def _next_reply(writer: socket.socket) -> tuple[int, ...]:
    reply = writer.recv(4096)
    assert reply[:1] == FREE
    return _freed_slots(reply[1:])


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


@pytest.mark.parametrize("in_file", [True, False])
def test_frames_that_lie_in_a_mapped_file_wait_beyond_the_ring(tmp_path: Path, in_file: bool) -> None:
    """With the encoder process stopped, ``MAPPED_QUEUE_FRAMES`` frames that lie in a mapped
    file are handed over before the writer waits (they need no ring memory), and only
    ``queue_frames`` + 1 copied ones; once it goes on, every frame is in the video."""
    width, height, queue_frames = 64, 48, 1
    frames = [np.full((height, width, 3), 6 * i, np.uint8) for i in range(MAPPED_QUEUE_FRAMES + 3)]
    (tmp_path / "frames.bin").write_bytes(b"".join(frame.tobytes() for frame in frames))
    mapped = MappedFile(tmp_path / "frames.bin")
    size = frames[0].size
    views = [np.frombuffer(mapped, np.uint8, size, i * size).reshape(height, width, 3) for i in range(len(frames))]
    writer = StagedVideoWriter(
        tmp_path / "video.mp4", width, height, 30, "rgb", VideoSettings(), camera="cam", queue_frames=queue_frames
    )
    process = psutil.Process(writer._process.process.pid)
    process.suspend()
    try:
        thread, handed = _handed_over(writer, views if in_file else frames)
        assert _stalls_at(thread, handed, MAPPED_QUEUE_FRAMES if in_file else queue_frames + 1)
    finally:
        process.resume()
    thread.join(timeout=60)
    assert handed == list(range(len(frames)))
    writer.close()
    with av.open(str(tmp_path / "video.mp4")) as video:
        decoded = [frame.to_ndarray(format="rgb24") for frame in video.decode(video=0)]
    levels = np.array([frame.mean() for frame in decoded])  # (frames apart by 6 levels; YUV costs 1 or 2)
    assert len(levels) == len(frames) and np.abs(levels - 6 * np.arange(len(frames))).max() <= 2
