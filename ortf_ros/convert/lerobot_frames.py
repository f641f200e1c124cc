"""A LeRobot camera's frames, as HxWx3 uint8 RGB arrays.

Video cameras: an episode's frames lie in a shard MP4 from ``from_timestamp`` on, so
the frame of a row with timestamp ``t`` is the one shown at ``from_timestamp + t``, as
LeRobot's own loader seeks it. The shard is decoded with PyAV (its FFmpeg has
libdav1d, so AV1 decodes as well as H.264) through the package's ``VideoReader``,
which keeps decoding forward instead of seeking while frames are read in order: an
episode costs one decode per frame, whatever its codec's GOP.

When the episode's range of the shard is cut at keyframes, the import copies its packets
instead (``episode_segment``, ``DatasetWriter.add_encoded_video``) and each step names
its frame of the copy by the same rule (``shard_frame``).

Image cameras: each row holds the encoded still (PNG, as the ``datasets`` library
writes ``Image`` features), decoded with PyAV too.
"""

from __future__ import annotations

import io
from pathlib import Path
from types import TracebackType
from typing import Any

import av
import numpy as np
from av.container import InputContainer

from ortf_ros.convert.lerobot_meta import Feature, VideoSpan
from ortf_ros.errors import ExportError, ReaderError
from ortf_ros.io.segment import VideoSegment
from ortf_ros.io.video import VideoReader


def shard_frame(span: VideoSpan, timestamp: float, fps: float) -> int:
    """Index in the shard of the frame a row with LeRobot ``timestamp`` shows."""
    return round((span.from_timestamp + timestamp) * fps)


def episode_segment(span: VideoSpan, fps: float) -> VideoSegment | None:
    """The episode's frames of the shard, from ``from_timestamp`` up to ``to_timestamp``
    (None when the metadata gives no end)."""
    if span.to_timestamp is None:
        return None
    first = shard_frame(span, 0.0, fps)
    return VideoSegment(span.path, first, round(span.to_timestamp * fps) - first)


class ShardFrames:
    """One camera's video shards; the shard in use stays open while episodes follow in it."""

    def __init__(self, feature: Feature) -> None:
        self.feature = feature
        self._reader: VideoReader | None = None

    def frame(self, span: VideoSpan, timestamp: float) -> np.ndarray:
        reader = self._open(span.path)
        index = shard_frame(span, timestamp, reader.fps)
        try:
            return reader.read(index)
        except ReaderError as exc:
            raise ExportError(f"{self.feature.key}: frame at {span.from_timestamp + timestamp:.4f} s: {exc}") from None

    def _open(self, path: Path) -> VideoReader:
        if self._reader is not None and self._reader.path == path:
            return self._reader
        self.close()
        try:
            self._reader = VideoReader(path, "rgb")
        except ReaderError as exc:
            raise ExportError(str(exc)) from None
        return self._reader

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> ShardFrames:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def decode_still(cell: Any, where: str) -> np.ndarray:
    """An ``Image`` cell ({bytes, path}) decoded to RGB."""
    data = cell.get("bytes") if isinstance(cell, dict) else None
    if not data:
        raise ExportError(f"{where}: expected an embedded image ({{bytes, path}}), got no bytes")
    try:
        with av.open(io.BytesIO(data)) as container:
            assert isinstance(container, InputContainer)
            for frame in container.decode(video=0):
                return frame.to_ndarray(format="rgb24")
    except (av.error.FFmpegError, EOFError) as exc:
        raise ExportError(f"{where}: image does not decode: {exc}") from None
    raise ExportError(f"{where}: image holds no frame")
