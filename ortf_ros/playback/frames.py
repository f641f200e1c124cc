"""The camera frame each step saw, decoded in step order through the reader.

Consecutive steps often show the same frame: it is decoded once and shared. A frame
that cannot be decoded (a damaged video) is skipped with a warning and playback goes
on; the episode's video readers are reopened, so the next frame is sought afresh
instead of read from a decoder that failed. (With H.264 the frames up to the next
keyframe depend on a damaged one, so they fail, and are skipped, too.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ortf_ros.dataset.reader import Episode
from ortf_ros.errors import ReaderError


class StepFrames:
    def __init__(self, episode: Episode, warn: Callable[[str], None]) -> None:
        self.episode = episode
        self.warn = warn
        self._last: dict[str, tuple[int, np.ndarray]] = {}

    def frame(self, camera: str, index: int, step: int) -> np.ndarray | None:
        """Frame ``index`` of ``camera`` for ``step``; None when it cannot be decoded."""
        last = self._last.get(camera)
        if last is not None and last[0] == index:
            return last[1]
        try:
            pixels = self.episode.frame(camera, index)
        except ReaderError as exc:
            self.warn(f"episode {self.episode.episode_id} step {step}: {camera} frame {index} skipped: {exc}")
            self.episode.close()
            self._last.pop(camera, None)
            return None
        self._last[camera] = (index, pixels)
        return pixels

    def close(self) -> None:
        self.episode.close()
        self._last.clear()
