"""What both flavours of ``to_lerobot`` write alike: the export summary and progress, the
cameras and their video features, task indices, and the files LeRobot has no place for
(the ORTF manifest, tasks and robot description, lossless depth) kept under ``ortf/``.

The LeRobot v3.0 writer (``lerobot_export``) and GR00T's v2.0 flavour (``gr00t_export``)
both import it, and neither imports the other: ``to_lerobot`` picks one of them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortf_ros.convert import lerobot_columns as cols
from ortf_ros.convert.episode_video import EpisodeVideo
from ortf_ros.convert.export_audio import lerobot_audio_info
from ortf_ros.convert.video_shards import ShardWriter
from ortf_ros.dataset.reader import Dataset, Episode
from ortf_ros.errors import ExportError
from ortf_ros.format import layout
from ortf_ros.format.sensors import Sensor
from ortf_ros.io import video

Progress = Callable[[int, int], None]

CHUNKS_SIZE = 1000
ORTF_DIR = "ortf"
DEPTH_PATH = "ortf/depth/{camera}/episode_{episode_index:06d}{suffix}"


@dataclass
class ExportSummary:
    """What an export wrote: counts, and which colour videos were reused or re-encoded."""

    path: Path
    flavor: str
    episodes: int = 0
    frames: int = 0
    videos_reused: int = 0
    videos_reencoded: int = 0
    audio_files: int = 0  # episode WAVs kept beside the dataset (``export_audio``)


class FrameProgress:
    """Video frames written (re-encoded ones as they are encoded) out of all there are:
    a re-encode is what takes minutes, so the bar moves with it."""

    def __init__(self, report: Progress | None, dataset: Dataset, cameras: int) -> None:
        self._report = report
        self.total = dataset.total_steps * max(cameras, 1)
        self.done = 0

    def advance(self, frames: int = 1) -> None:
        self.done += frames
        if self._report is not None:
            self._report(self.done, self.total)


def colour_cameras(dataset: Dataset) -> dict[str, Sensor]:
    return {k: s for k, s in dataset.manifest.cameras.items() if not s.is_depth}


def depth_cameras(dataset: Dataset) -> tuple[str, ...]:
    return tuple(k for k, s in dataset.manifest.cameras.items() if s.is_depth)


def camera_size(dataset: Dataset, camera: str) -> tuple[int, int]:
    """(width, height): the manifest's resolution, else the first episode's video."""
    sensor = dataset.manifest.cameras[camera]
    if sensor.resolution is not None:
        return sensor.resolution.width, sensor.resolution.height
    info = video.probe(next(iter(dataset)).video_path(camera))
    return info.width, info.height


def video_feature(size: tuple[int, int], fps: int, codec: str = "h264") -> dict[str, Any]:
    width, height = size
    return {
        "dtype": "video",
        "shape": [height, width, 3],
        "names": ["height", "width", "channels"],
        "info": {
            "video.height": height,
            "video.width": width,
            "video.codec": codec,
            "video.pix_fmt": "yuv420p",
            "video.is_depth_map": False,
            "video.fps": fps,
            "video.channels": 3,
            "has_audio": False,
        },
    }


def task_indices(dataset: Dataset) -> dict[int, int]:
    """ORTF task id -> LeRobot task index (LeRobot finds a task by its row position)."""
    used = sorted({record.task_id for record in dataset.episodes})
    return {task_id: position for position, task_id in enumerate(used)}


def keep_ortf_files(dataset: Dataset, root: Path) -> None:
    """Copy the manifest, tasks and robot description, which LeRobot has no place for."""
    for relative in (layout.MANIFEST, layout.TASKS):
        if (dataset.root / relative).exists():
            target = root / ORTF_DIR / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(dataset.root / relative, target)
    if (dataset.root / layout.ROBOT_DIR).is_dir():
        shutil.copytree(dataset.root / layout.ROBOT_DIR, root / ORTF_DIR / layout.ROBOT_DIR)


def copy_depth(episode: Episode, episode_index: int, cameras: tuple[str, ...], root: Path) -> None:
    """Depth files verbatim (FFV1 gray16le, or NPZ): lossless, beside LeRobot's videos."""
    for camera in cameras:
        path = episode.video_path(camera)
        target = root / DEPTH_PATH.format(camera=camera, episode_index=episode_index, suffix=path.suffix)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def ortf_info(dataset: Dataset, state: cols.StateLayout, depth: tuple[str, ...]) -> dict[str, Any]:
    """``info.json``'s ``ortf`` entry: where the things LeRobot has no field for are."""
    audio = lerobot_audio_info(dataset.manifest)
    return {
        "dataset_id": dataset.manifest.dataset_id,
        "capture_time_column": cols.CAPTURE_TIME,
        "state_slices": {name: list(bounds) for name, bounds in state.slices.items()},
        "manifest": f"{ORTF_DIR}/{layout.MANIFEST}",
        "depth": {
            camera: {
                "path": DEPTH_PATH.replace("{camera}", camera),
                "frame_index_column": cols.depth_frame_column(camera),
            }
            for camera in depth
        },
        **({"audio": audio} if audio else {}),
    }


def append_video(
    shard: ShardWriter,
    source: EpisodeVideo,
    episode: Episode,
    camera: str,
    summary: ExportSummary,
    progress: FrameProgress,
) -> None:
    """Append an episode's video (one frame per step, checked) to its shard and count it."""
    frames = shard.append(source.path)
    if frames != episode.record.length:
        raise ExportError(
            f"{episode.video_path(camera)}: {frames} frames for {episode.record.length} steps "
            f"(episode {episode.episode_id})"
        )
    if source.reused:
        summary.videos_reused += 1
        progress.advance(frames)
    else:
        summary.videos_reencoded += 1
        source.path.unlink()
