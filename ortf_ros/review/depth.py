"""Depth cameras as pictures a browser shows: a browser cannot play FFV1 gray16, so the
frame a step saw is decoded here and sent as a colourised JPEG.

Memory: the decoders of the last ``OPEN_DEPTH_VIDEOS`` (episode, camera) pairs, each
holding a GOP at most; a page playing forward asks for frames in order, which the
reader decodes without seeking (``VideoReader``'s forward window).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import cv2
import numpy as np

from ortf_ros.dataset.reader import Episode
from ortf_ros.format import layout
from ortf_ros.io.pictures import colourise_depth, depth_span

OPEN_DEPTH_VIDEOS = 4
MAX_WIDTH = 640
JPEG_QUALITY = 85


def frame_at(episode: Episode, camera: str, time_s: float) -> int:
    """The frame index of the last step at or before ``time_s`` (the first step's before it)."""
    column = layout.image_column(camera)
    frame: int | None = None
    for batch in episode.step_batches(["timestamp", column]):
        times = batch.column("timestamp").to_numpy()
        frames = batch.column(column).to_numpy()
        if frame is None:
            frame = int(frames[0])
        upto = int(np.searchsorted(times, time_s, side="right"))
        if upto > 0:
            frame = int(frames[upto - 1])
        if upto < len(times):
            break
    return frame if frame is not None else 0


class DepthPictures:
    """Colourised depth frames by episode time, decoders kept for the last few videos."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: OrderedDict[tuple[str, str], tuple[Episode, tuple[float, float] | None]] = OrderedDict()

    def jpeg(self, episode: Episode, camera: str, time_s: float) -> bytes:
        key = (episode.episode_id, camera)
        with self._lock:
            reader, span = self._open.pop(key, (episode, None))
            if reader.record != episode.record:  # the episode was edited since: its files may have moved
                reader.close()
                reader, span = episode, None
            depth = reader.frame(camera, frame_at(reader, camera, time_s))
            span = span or depth_span(depth)  # once per video: a colour means one distance in every frame
            self._open[key] = (reader, span)
            while len(self._open) > OPEN_DEPTH_VIDEOS:
                self._open.popitem(last=False)[1][0].close()
        picture = colourise_depth(depth, span)
        height, width = picture.shape[:2]
        if width > MAX_WIDTH:
            picture = cv2.resize(picture, (MAX_WIDTH, round(height * MAX_WIDTH / width)), interpolation=cv2.INTER_AREA)
        ok, encoded = cv2.imencode(".jpg", picture, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            raise ValueError("JPEG encoding failed")
        return bytes(encoded)

    def close(self) -> None:
        with self._lock:
            for episode, _ in self._open.values():
                episode.close()
            self._open.clear()
