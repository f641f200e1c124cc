"""An episode video made of a camera's published H.264 packets, one packet as it comes.

A camera that publishes H.264 (``io.h264``) is not decoded and encoded again: each packet
is muxed as it arrives into the episode's staged fragmented MP4, flushed (what a killed
process leaves decodes up to its last packet, as for an encoded camera), and the commit's
``video.finalize`` copies it into the plain MP4, as after a crash. Frame ``i`` is stored
at ``i / fps`` like every episode video (the real times are in the step table), so the
stream must not reorder frames; the assembler refuses one that does.

The MP4 muxer turns each Annex B packet into length-prefixed NAL units, the same units
byte for byte, and the first keyframe's SPS and PPS into the track's ``avcC``. It runs in
the writer's process: a packet costs a write, no encoder process is needed. Memory holds
one packet.
"""

from __future__ import annotations

import contextlib
import io
from fractions import Fraction
from pathlib import Path

import av
from av.container import InputContainer, OutputContainer

from ortf_ros.errors import WriterError, describe
from ortf_ros.io.video import STAGING_MUX_OPTIONS, as_frame_rate


class StagedPacketVideo:
    """A camera's episode video from its published packets; the first must be a keyframe
    with its SPS and PPS (``PacketFacts.keyframe``), which the stream's description is
    taken from. A failure to write is a WriterError naming the camera and file; the
    packets written before it stay in the staged file."""

    def __init__(self, path: Path, fps: float, *, camera: str) -> None:
        self.path = path
        self.camera = camera
        self.frames_written = 0
        self._time_base = Fraction(1, as_frame_rate(fps))
        self._container: OutputContainer | None = None
        self._stream: av.video.stream.VideoStream | None = None

    def write(self, data: bytes, keyframe: bool) -> int:
        """Mux one packet as the next frame; returns its frame index."""
        try:
            if self._container is None:
                if not keyframe:
                    raise WriterError(f"camera {self.camera!r}: its video must start at a keyframe")
                self._open(data)
            assert self._container is not None and self._stream is not None
            packet = av.Packet(data)
            packet.pts = packet.dts = self.frames_written
            packet.duration = 1
            packet.time_base = self._time_base
            packet.is_keyframe = keyframe
            packet.stream = self._stream
            self._container.mux_one(packet)
        except (av.error.FFmpegError, OSError) as exc:
            raise WriterError(f"camera {self.camera!r}: {self.path}: cannot write packet: {describe(exc)}") from None
        self.frames_written += 1
        return self.frames_written - 1

    def _open(self, keyframe: bytes) -> None:
        """The staged file, its track described as the keyframe's SPS and PPS say (the
        raw H.264 demuxer parses them as it would a stream's first packet)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with av.open(io.BytesIO(keyframe), format="h264") as template:
            assert isinstance(template, InputContainer)
            container = av.open(str(self.path), "w", format="mp4", options=STAGING_MUX_OPTIONS)
            try:
                stream = container.add_stream_from_template(template.streams.video[0])
                stream.time_base = self._time_base
            except BaseException:
                container.close()
                raise
        self._container, self._stream = container, stream

    def close(self) -> None:
        """Close the staged file; ``video.finalize`` makes the committed one of it."""
        container, self._container = self._container, None
        if container is None:
            return
        try:
            container.close()
        except (av.error.FFmpegError, OSError) as exc:
            raise WriterError(f"camera {self.camera!r}: {self.path}: cannot close: {describe(exc)}") from None

    def abandon(self) -> None:
        """Close after a failure, keeping what reached the file."""
        container, self._container = self._container, None
        if container is not None:
            with contextlib.suppress(av.error.FFmpegError, OSError):
                container.close()
