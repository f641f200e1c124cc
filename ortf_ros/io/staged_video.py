"""The writer's end of a camera's encoder process (``encoder_process``): frames handed
over through the process's ring, or for a frame that lies in a mapped recording, where
it lies; slots taken back as the process frees them; the process's failure raised as
the camera's."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ortf_ros.errors import WriterError
from ortf_ros.io.encoder_pool import keep_process, let_go_of, take_process
from ortf_ros.io.encoder_process import (
    CLOSE,
    CLOSED,
    FAILED,
    FRAME,
    FREE,
    MESSAGE_BYTES,
    OPEN,
    frame_layout,
    freed_slots,
    map_message,
    mapped_frame_message,
    slot_message,
)
from ortf_ros.io.mapped_file import MappedFile, locate
from ortf_ros.io.video import FrameKind, VideoSettings, as_frame_rate

MAPPED_QUEUE_FRAMES = 32
"""Frames per camera that may wait for the encoder process when they lie in a mapped file,
whatever ``queue_frames``: such a frame takes no memory while it waits. The reader hands
frames to its cameras in turn, and waits whenever one encoder is behind; a deeper queue
keeps the other encoders busy meanwhile (on the benchmark's two cores, they were busy
1.77 of the time with 9 waiting frames, and 1.84 with 32)."""


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
        self.shape, self._dtype = frame_layout(width, height, kind)
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
        self._process = take_process(int(np.prod(self.shape)) * self._dtype.itemsize, slots)
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
            return slot_message(FRAME, slot)
        mapped, offset = located
        if mapped.serial != self._mapped:
            if not self._process.send(map_message(mapped.serial), [mapped.fileno()]):
                return None
            self._mapped = mapped.serial
        return mapped_frame_message(slot, mapped.serial, offset)

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
                    keep_process(self._process)
                elif self._failure is None:  # interrupted: the process finishes the video on its own
                    self._fail("closing the video was interrupted")
                    let_go_of(self._process)
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
            let_go_of(self._process)

    def _receive(self, wait: bool) -> None:
        """Take in what the process has sent: the first message waited for when ``wait``."""
        while self._alive:
            message = self._process.receive(wait)
            wait = False
            if message is None:
                return
            kind, body = message[:1], message[1:]
            if kind == FREE:
                for slot in freed_slots(body):
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
