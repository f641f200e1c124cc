"""``to_lerobot``: an ORTF dataset as a LeRobotDataset v3.0 that ``lerobot`` 0.4.4 loads as is.

The layout is the one LeRobot's own writer produces (``meta/info.json``,
``meta/episodes/chunk-XXX/file-XXX.parquet`` with each episode's offsets into the
shared files and its statistics, ``meta/tasks.parquet``, ``meta/stats.json``,
``data/chunk-XXX/file-XXX.parquet``, ``videos/<key>/chunk-XXX/file-XXX.mp4``), so a
trainer reads it without hand edits. Colour videos are remuxed into the shards
without re-encoding when ORTF's files allow it (``episode_video``); what LeRobot has
no place for is kept beside its files under ``ortf/``: the manifest, the robot
description, the tasks with their ids, and lossless 16-bit depth (LeRobot's decoders
return 8-bit RGB, which would lose it), with a step column pointing at its frames.
Audio, which LeRobot has no feature for, is kept under ``audio/`` (``export_audio``),
named in ``info.json``'s ``ortf.audio``.

Everything is written in a scratch directory beside the target and renamed onto it
at the end (``output_dir``), so a failed export leaves the destination untouched.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.convert import lerobot_columns as cols
from ortf_ros.convert.episode_video import episode_video
from ortf_ros.convert.export_audio import copy_lerobot_audio
from ortf_ros.convert.gr00t_export import write_gr00t
from ortf_ros.convert.lerobot_common import (
    CHUNKS_SIZE,
    ExportSummary,
    FrameProgress,
    Progress,
    append_video,
    camera_size,
    colour_cameras,
    copy_depth,
    depth_cameras,
    keep_ortf_files,
    ortf_info,
    task_indices,
    video_feature,
)
from ortf_ros.convert.output_dir import open_source, staged_directory
from ortf_ros.convert.video_shards import ShardWriter, stream_key
from ortf_ros.dataset.reader import Dataset, Episode
from ortf_ros.errors import ExportError
from ortf_ros.io import atomic
from ortf_ros.io.video import VideoSettings

Flavor = Literal["lerobot", "gr00t"]

CODEBASE_VERSION = "v3.0"
DATA_FILES_SIZE_IN_MB = 100
VIDEO_FILES_SIZE_IN_MB = 200
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-000/file-000.parquet"
# A re-encode is a second generation of loss on top of the recording's: a lower CRF
# than ORTF records with keeps the export's frames >= 35 dB PSNR of the source's.
REENCODE_SETTINGS = VideoSettings(crf=18)


def to_lerobot(
    dataset: Dataset | str | os.PathLike[str],
    out: str | os.PathLike[str],
    flavor: Flavor = "lerobot",
    *,
    settings: VideoSettings | None = None,
    data_files_size_in_mb: float = DATA_FILES_SIZE_IN_MB,
    video_files_size_in_mb: float = VIDEO_FILES_SIZE_IN_MB,
    progress: Progress | None = None,
) -> ExportSummary:
    """Export ``dataset`` to the new directory ``out`` (LeRobot v3.0, or GR00T's v2.0 flavour)."""
    if flavor not in ("lerobot", "gr00t"):
        raise ExportError(f"unknown flavor {flavor!r}; expected 'lerobot' or 'gr00t'")
    source = open_source(dataset)
    if len(source) == 0:
        raise ExportError(f"{source.root}: has no episodes to export")
    settings = settings or REENCODE_SETTINGS
    with staged_directory(out) as scratch:
        if flavor == "gr00t":
            summary = write_gr00t(source, scratch, settings, progress)
        else:
            limits = (int(data_files_size_in_mb * 2**20), int(video_files_size_in_mb * 2**20))
            summary = _V3Writer(source, scratch, settings, limits, progress).write()
    summary.path = Path(out)
    return summary


class _ShardPosition:
    """(chunk, file) of the current shard, advancing as LeRobot's writer does."""

    def __init__(self) -> None:
        self.chunk = 0
        self.file = 0

    def advance(self) -> None:
        self.file += 1
        if self.file == CHUNKS_SIZE:
            self.chunk, self.file = self.chunk + 1, 0


class _V3Writer:
    """One pass over the episodes: rows and videos appended to the open shards, one
    ``meta/episodes`` row and its statistics per episode; the metadata files last."""

    def __init__(
        self, dataset: Dataset, root: Path, settings: VideoSettings, limits: tuple[int, int], progress: Progress | None
    ) -> None:
        self.dataset = dataset
        self.root = root
        self.settings = settings
        self.data_limit, self.video_limit = limits
        self.fps = cols.dataset_fps(dataset)
        self.state = cols.StateLayout.of(dataset.manifest)
        self.depth = depth_cameras(dataset)
        self.cameras = {key: camera_size(dataset, key) for key in colour_cameras(dataset)}
        self.features = cols.frame_features(
            dataset.manifest, self.state, tuple(map(cols.depth_frame_column, self.depth))
        )
        self.features.update({cols.camera_key(k): video_feature(size, self.fps) for k, size in self.cameras.items()})
        self.schema = cols.arrow_schema(self.features)
        self.tasks = task_indices(dataset)
        self.summary = ExportSummary(root, "lerobot")
        self.progress = FrameProgress(progress, dataset, len(self.cameras))
        self.scratch = root / ".reencode"
        self._data_position = _ShardPosition()
        self._data: pq.ParquetWriter | None = None
        self._video_positions = {key: _ShardPosition() for key in self.cameras}
        self._videos: dict[str, ShardWriter] = {}

    def write(self) -> ExportSummary:
        episodes_meta: list[dict[str, Any]] = []
        totals = cols.FrameStats(self.features)
        try:
            for episode_index, episode in enumerate(self.dataset):
                with episode:
                    row, stats = self._episode(episode, episode_index)
                episodes_meta.append(row)
                totals.merge(stats)
        finally:
            self._close_data()
            for shard in self._videos.values():
                shard.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
        self._write_meta(episodes_meta, totals)
        keep_ortf_files(self.dataset, self.root)
        return self.summary

    def _episode(self, episode: Episode, episode_index: int) -> tuple[dict[str, Any], cols.FrameStats]:
        record = episode.record
        placement = cols.EpisodePlacement(episode_index, self.summary.frames, self.tasks[record.task_id], {})
        data_file = self._data_file()
        stats = cols.FrameStats(self.features)
        assert self._data is not None
        for batch in cols.frame_batches(episode, placement, self.fps, self.state, self.schema, self.depth):
            self._data.write_batch(batch)
            stats.update(batch)
        row: dict[str, Any] = {
            "episode_index": episode_index,
            "tasks": [episode.task.instruction],
            "length": record.length,
            "data/chunk_index": data_file[0],
            "data/file_index": data_file[1],
            "dataset_from_index": placement.first_index,
            "dataset_to_index": placement.first_index + record.length,
        }
        for camera, size in self.cameras.items():
            row.update(self._episode_video(episode, camera, size))
        if not self.cameras:
            self.progress.advance(record.length)
        for name, values in stats.summary().items():
            row.update({f"stats/{name}/{key}": value for key, value in values.items()})
        row.update({"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
        row.update(episode_extras(episode))
        copy_depth(episode, episode_index, self.depth, self.root)
        self.summary.audio_files += copy_lerobot_audio(episode, episode_index, self.root)
        self.summary.episodes += 1
        self.summary.frames += record.length
        return row, stats

    def _data_file(self) -> tuple[int, int]:
        """The data shard the next episode goes to; a full one is closed first."""
        position = self._data_position
        if self._data is not None and self._data_path().stat().st_size >= self.data_limit:
            self._close_data()
            position.advance()
        if self._data is None:
            self._data_path().parent.mkdir(parents=True, exist_ok=True)
            self._data = pq.ParquetWriter(self._data_path(), self.schema)
        return position.chunk, position.file

    def _data_path(self) -> Path:
        return self.root / DATA_PATH.format(chunk_index=self._data_position.chunk, file_index=self._data_position.file)

    def _close_data(self) -> None:
        if self._data is not None:
            self._data.close()
            self._data = None

    def _episode_video(self, episode: Episode, camera: str, size: tuple[int, int]) -> dict[str, Any]:
        key = cols.camera_key(camera)
        self.scratch.mkdir(exist_ok=True)
        source = episode_video(episode, camera, self.fps, size, self.scratch, self.settings, self.progress.advance)
        stream = stream_key(source.path)
        shard = self._videos.get(camera)
        if shard is not None and (shard.key != stream or shard.bytes >= self.video_limit or shard.full):
            shard.close()
            del self._videos[camera]
            self._video_positions[camera].advance()
        position = self._video_positions[camera]
        if camera not in self._videos:
            path = VIDEO_PATH.format(video_key=key, chunk_index=position.chunk, file_index=position.file)
            self._videos[camera] = ShardWriter(self.root / path, self.fps, stream)
        shard = self._videos[camera]
        start = shard.seconds
        append_video(shard, source, episode, camera, self.summary, self.progress)
        return {
            f"videos/{key}/chunk_index": position.chunk,
            f"videos/{key}/file_index": position.file,
            f"videos/{key}/from_timestamp": start,
            f"videos/{key}/to_timestamp": shard.seconds,
        }

    def _write_meta(self, episodes_meta: list[dict[str, Any]], totals: cols.FrameStats) -> None:
        meta = self.root / "meta"
        (meta / "episodes" / "chunk-000").mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.Table.from_pylist(episodes_meta, schema=episodes_schema(episodes_meta)), self.root / EPISODES_PATH
        )
        write_tasks_parquet(self.dataset, self.tasks, meta / "tasks.parquet")
        atomic.write_json(meta / "stats.json", totals.summary())
        info = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": self.dataset.manifest.robot.name,
            "total_episodes": self.summary.episodes,
            "total_frames": self.summary.frames,
            "total_tasks": len(self.tasks),
            "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": _megabytes(self.data_limit),
            "video_files_size_in_mb": _megabytes(self.video_limit),
            "fps": self.fps,
            "splits": {"train": f"0:{self.summary.episodes}"},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if self.cameras else None,
            "features": self.features,
            "ortf": ortf_info(self.dataset, self.state, self.depth),
        }
        atomic.write_json(meta / "info.json", info)


def _megabytes(size: int) -> int | float:
    """Whole megabytes as an integer, as LeRobot writes them."""
    megabytes = size / 2**20
    return int(megabytes) if megabytes.is_integer() else megabytes


def episode_extras(episode: Episode) -> dict[str, Any]:
    """The ORTF episode fields LeRobot has no column for, as ``ortf/...`` columns."""
    record = episode.record
    return {
        "ortf/episode_id": record.episode_id,
        "ortf/task_id": record.task_id,
        "ortf/success": record.success,
        "ortf/failure_reason": record.failure_reason,
        "ortf/operator_notes": record.operator_notes,
        "ortf/recorded_at": record.recorded_at,
        "ortf/duration_seconds": record.duration_seconds,
    }


EXTRA_TYPES = {
    "ortf/episode_id": pa.string(),
    "ortf/task_id": pa.int64(),
    "ortf/success": pa.bool_(),
    "ortf/failure_reason": pa.string(),
    "ortf/operator_notes": pa.string(),
    "ortf/recorded_at": pa.string(),
    "ortf/duration_seconds": pa.float64(),
}


def episodes_schema(rows: list[dict[str, Any]]) -> pa.Schema:
    """Inferred from the first row, except the nullable ORTF fields (all-null would be typeless)."""
    inferred = pa.Table.from_pylist(rows[:1]).schema
    return pa.schema([pa.field(f.name, EXTRA_TYPES.get(f.name, f.type)) for f in inferred])


def write_tasks_parquet(dataset: Dataset, tasks: dict[int, int], path: Path) -> None:
    """``meta/tasks.parquet`` as pandas writes it: the task text is the index, ``task_index`` the column."""
    by_index = sorted(tasks.items(), key=lambda item: item[1])
    table = pa.table(
        {
            "task_index": pa.array([index for _, index in by_index], pa.int64()),
            "ortf_task_id": pa.array([task_id for task_id, _ in by_index], pa.int64()),
            "__index_level_0__": pa.array([dataset.task(task_id).instruction for task_id, _ in by_index]),
        }
    )
    pandas_meta = {
        "index_columns": ["__index_level_0__"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": "ortf_task_id",
                "field_name": "ortf_task_id",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": None,
                "field_name": "__index_level_0__",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.3.3",
    }
    pq.write_table(table.replace_schema_metadata({"pandas": json.dumps(pandas_meta)}), path)
