"""A camera's episode as an H.264 file whose frame ``i`` is step ``i``: LeRobot's contract.

ORTF's own episode file is used as it is when it already keeps that contract (H.264,
yuv420p, the camera's size, one frame per step at the export's rate); anything else
(another codec, a different size, dropped or repeated frames) is decoded step by step
and re-encoded with the settings ORTF records with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ortf_ros.dataset.reader import Episode
from ortf_ros.format import layout
from ortf_ros.io import video
from ortf_ros.io.staged_video import StagedVideoWriter
from ortf_ros.io.video import VideoSettings

REUSABLE_CODEC = "h264"
REUSABLE_PIX_FMT = "yuv420p"


@dataclass(frozen=True)
class EpisodeVideo:
    path: Path
    reused: bool


def reusable(episode: Episode, camera: str, fps: int, size: tuple[int, int]) -> bool:
    """Whether the ORTF file decodes to exactly the step frames, as LeRobot addresses them."""
    path = episode.video_path(camera)
    if path.suffix != ".mp4" or not path.exists():
        return False
    info = video.probe(path)
    if (info.codec, info.pix_fmt, (info.width, info.height)) != (REUSABLE_CODEC, REUSABLE_PIX_FMT, size):
        return False
    if round(info.fps) != fps or info.frames != episode.record.length:
        return False
    done = 0  # a row group at a time: memory does not grow with the episode
    for batch in episode.step_batches([layout.image_column(camera)]):
        frames = batch.column(0).to_numpy()
        if not np.array_equal(frames, np.arange(done, done + len(frames))):
            return False
        done += len(frames)
    return True


def episode_video(
    episode: Episode,
    camera: str,
    fps: int,
    size: tuple[int, int],
    scratch: Path,
    settings: VideoSettings,
    on_frame: Callable[[], None] | None = None,
) -> EpisodeVideo:
    """The file to copy packets from: ORTF's own, or a re-encode in ``scratch``."""
    if reusable(episode, camera, fps, size):
        return EpisodeVideo(episode.video_path(camera), reused=True)
    staged = scratch / f"{camera}-{episode.episode_id}.staged.mp4"
    target = scratch / f"{camera}-{episode.episode_id}.mp4"
    writer = StagedVideoWriter(staged, size[0], size[1], fps, "rgb", settings, camera=camera)
    try:
        for image in episode.step_frames(camera):
            writer.write(_fit(image, size))
            if on_frame is not None:
                on_frame()
    finally:
        writer.close()
    video.finalize(staged, target)
    staged.unlink()
    return EpisodeVideo(target, reused=False)


def _fit(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """A frame of another size, scaled (nearest neighbour) to the camera's declared size."""
    width, height = size
    if image.shape[1] == width and image.shape[0] == height:
        return image
    rows = np.arange(height) * image.shape[0] // height
    cols = np.arange(width) * image.shape[1] // width
    fitted: np.ndarray = image[rows][:, cols]
    return fitted
