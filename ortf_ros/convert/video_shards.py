"""Episode videos joined into multi-episode MP4 shards without re-encoding.

LeRobot v3 keeps several episodes in one MP4 per camera and finds an episode by the
time it starts at in that file. ORTF episode files start with a keyframe and store
frame ``i`` at ``pts = i`` ticks of ``1/fps``, so appending an episode is a remux of
its packets with pts and dts moved by the frames already in the shard: the decoder
sees the same bitstream, and every frame decodes bit-exactly as in the source.

Packets can share one stream only when their decoder setup (codec parameters and
extradata: SPS/PPS for H.264) is identical; a shard therefore takes episodes whose
``StreamKey`` matches, and a different key starts a new shard file.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
from av.container import InputContainer, OutputContainer
from av.video.stream import VideoStream

from ortf_ros.io.video import FINAL_MUX_OPTIONS, pixel_format


@dataclass(frozen=True)
class StreamKey:
    """What must be equal for two episode files to share a shard's stream."""

    codec: str
    width: int
    height: int
    pix_fmt: str
    extradata: bytes


def stream_key(path: Path) -> StreamKey:
    with av.open(str(path)) as container:
        assert isinstance(container, InputContainer)
        stream = container.streams.video[0]
        context = stream.codec_context
        return StreamKey(context.name, context.width, context.height, pixel_format(stream), context.extradata or b"")


SHARD_FRAMES_MAX = 108_000
"""Frames per shard at most (an hour at 30 fps), whatever its size in bytes: the MP4 muxer keeps
an entry per frame until the file is closed (about 80 bytes), and small frames would fill a
500 MB shard with millions of them (the LeRobot export of 1000 episodes of 96x72 video grew by
0.15 MB an episode). LeRobot reads any split: ``from_timestamp``/``to_timestamp`` per file."""


class ShardWriter:
    """One open shard: appends whole episode files, each at the next frame boundary."""

    def __init__(self, path: Path, fps: int, key: StreamKey) -> None:
        self.path = path
        self.key = key
        self.frames = 0
        self.bytes = 0  # of packets appended: the muxer buffers, so the file size lags behind
        self._fps = fps
        self._tick = Fraction(1, fps)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._container: OutputContainer = av.open(str(path), "w", format="mp4", options=FINAL_MUX_OPTIONS)
        self._stream: VideoStream | None = None

    @property
    def seconds(self) -> float:
        """Where the next episode starts, in the shard's timeline."""
        return self.frames / self._fps

    def append(self, source: Path) -> int:
        """Copy every frame of ``source`` (frame i at i/fps) to the end of the shard; returns how many."""
        with av.open(str(source)) as src:
            assert isinstance(src, InputContainer)
            in_stream = src.streams.video[0]
            if self._stream is None:
                self._stream = self._container.add_stream_from_template(in_stream)
                # Ticks of 1/fps: pts = frame index, as ORTF stores it and LeRobot finds it.
                self._stream.time_base = self._tick
            frames_per_tick = float(in_stream.time_base or self._tick) * self._fps  # float: Fraction is slow per packet
            start = in_stream.start_time or 0
            offset = self.frames
            frames = 0
            for packet in src.demux(in_stream):
                if packet.dts is None or packet.pts is None:
                    continue
                packet.pts = offset + round((packet.pts - start) * frames_per_tick)
                packet.dts = offset + round((packet.dts - start) * frames_per_tick)
                packet.duration = 1  # one frame, in ticks of 1/fps
                packet.stream = self._stream
                packet.time_base = self._tick  # the muxer rescales to its own time base
                self._container.mux(packet)
                frames += 1
                self.bytes += packet.size
        self.frames += frames
        return frames

    @property
    def full(self) -> bool:
        """Whether the next episode goes to a new shard, by frames (``SHARD_FRAMES_MAX``)."""
        return self.frames >= SHARD_FRAMES_MAX

    def close(self) -> None:
        self._container.close()
