"""``to_lerobot(..., flavor="gr00t")``: GR00T's LeRobot v2.0 flavour with ``meta/modality.json``.

GR00T's loader (its "Robot Data Conversion Guide") reads LeRobot v2.0: one Parquet file
and one MP4 per camera for each episode, ``meta/episodes.jsonl`` and ``meta/tasks.jsonl``,
plus ``meta/modality.json``, which slices the concatenated ``observation.state`` and
``action`` back into named parts: here one state entry per ORTF state component and
one action entry per ORTF action dimension. Annotations are task indices in
``annotation.<source>.<type>`` columns: the task instruction in
``annotation.human.action.task_description`` and the episode's outcome in
``annotation.human.validity`` ("valid" for a success, "invalid" for a failure,
"unknown" when ORTF has no outcome). Rows, time columns and depth files are as in
the v3 export (``lerobot_columns``, ``lerobot_common``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ortf_ros.convert import lerobot_columns as cols
from ortf_ros.convert import lerobot_common as common
from ortf_ros.convert.episode_video import episode_video
from ortf_ros.convert.video_shards import ShardWriter, stream_key
from ortf_ros.dataset.reader import Dataset
from ortf_ros.format.manifest import Manifest
from ortf_ros.io import atomic
from ortf_ros.io.video import VideoSettings

CODEBASE_VERSION = "v2.0"
DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
TASK_ANNOTATION = "annotation.human.action.task_description"
VALIDITY_ANNOTATION = "annotation.human.validity"
VALIDITY = {True: "valid", False: "invalid", None: "unknown"}
# Quaternion components get GR00T's rotation type, so its transforms treat them as rotations.
ROTATION_UNITS = {"quaternion": "quaternion", "axis_angle": "axis_angle", "rpy": "euler_angles_rpy"}


def modality(manifest: Manifest, state: cols.StateLayout, cameras: list[str]) -> dict[str, Any]:
    """``meta/modality.json``: state slices per component, action slices per dimension."""
    states: dict[str, Any] = {}
    for name, (start, end) in state.slices.items():
        entry: dict[str, Any] = {"start": start, "end": end}
        rotation = ROTATION_UNITS.get(manifest.observation_space.state[name].units or "")
        if rotation:
            entry["rotation_type"] = rotation
        states[name] = entry
    actions = {d.name: {"start": d.index, "end": d.index + 1} for d in manifest.action_space.dimensions}
    return {
        "state": states,
        "action": actions,
        "video": {camera: {"original_key": cols.camera_key(camera)} for camera in cameras},
        "annotation": {
            TASK_ANNOTATION.removeprefix("annotation."): {},
            VALIDITY_ANNOTATION.removeprefix("annotation."): {},
        },
    }


def write_gr00t(
    dataset: Dataset, root: Path, settings: VideoSettings, progress: common.Progress | None
) -> common.ExportSummary:
    fps = cols.dataset_fps(dataset)
    state = cols.StateLayout.of(dataset.manifest)
    depth = common.depth_cameras(dataset)
    cameras = {key: common.camera_size(dataset, key) for key in common.colour_cameras(dataset)}
    features = cols.frame_features(
        dataset.manifest, state, (*map(cols.depth_frame_column, depth), TASK_ANNOTATION, VALIDITY_ANNOTATION)
    )
    features.update({cols.camera_key(k): common.video_feature(size, fps) for k, size in cameras.items()})
    schema = cols.arrow_schema(features)
    tasks = common.task_indices(dataset)
    texts = [dataset.task(task_id).instruction for task_id in tasks]
    validity = {outcome: len(texts) + i for i, outcome in enumerate(VALIDITY.values())}
    texts += list(VALIDITY.values())
    summary = common.ExportSummary(root, "gr00t")
    frames = common.FrameProgress(progress, dataset, len(cameras))
    totals = cols.FrameStats(features)
    scratch = root / ".reencode"
    scratch.mkdir()
    episodes_lines = []
    for episode_index, episode in enumerate(dataset):
        record = episode.record
        chunk = episode_index // common.CHUNKS_SIZE
        task_index = tasks[record.task_id]
        outcome = VALIDITY[record.success]
        annotations = {TASK_ANNOTATION: task_index, VALIDITY_ANNOTATION: validity[outcome]}
        placement = cols.EpisodePlacement(episode_index, summary.frames, task_index, annotations)
        path = root / DATA_PATH.format(episode_chunk=chunk, episode_index=episode_index)
        path.parent.mkdir(parents=True, exist_ok=True)
        with episode, pq.ParquetWriter(path, schema) as writer:
            for batch in cols.frame_batches(episode, placement, fps, state, schema, depth):
                writer.write_batch(batch)
                totals.update(batch)
            for camera, size in cameras.items():
                source = episode_video(episode, camera, fps, size, scratch, settings, frames.advance)
                target = VIDEO_PATH.format(
                    episode_chunk=chunk, video_key=cols.camera_key(camera), episode_index=episode_index
                )
                shard = ShardWriter(root / target, fps, stream_key(source.path))
                try:
                    common.append_video(shard, source, episode, camera, summary, frames)
                finally:
                    shard.close()
            common.copy_depth(episode, episode_index, depth, root)
        episodes_lines.append(
            {"episode_index": episode_index, "tasks": [episode.task.instruction, outcome], "length": record.length}
        )
        summary.episodes += 1
        summary.frames += record.length
        if not cameras:
            frames.advance(record.length)
    scratch.rmdir()
    meta = root / "meta"
    atomic.write_text(meta / "episodes.jsonl", "".join(json.dumps(line) + "\n" for line in episodes_lines))
    atomic.write_text(
        meta / "tasks.jsonl", "".join(json.dumps({"task_index": i, "task": t}) + "\n" for i, t in enumerate(texts))
    )
    atomic.write_json(meta / "modality.json", modality(dataset.manifest, state, list(cameras)))
    atomic.write_json(meta / "stats.json", totals.summary())
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": dataset.manifest.robot.name,
        "total_episodes": summary.episodes,
        "total_frames": summary.frames,
        "total_tasks": len(texts),
        "total_videos": summary.episodes * len(cameras),
        "total_chunks": (summary.episodes - 1) // common.CHUNKS_SIZE + 1,
        "chunks_size": common.CHUNKS_SIZE,
        "fps": fps,
        "splits": {"train": f"0:{summary.episodes}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if cameras else None,
        "features": features,
        "ortf": common.ortf_info(dataset, state, depth),
    }
    atomic.write_json(meta / "info.json", info)
    common.keep_ortf_files(dataset, root)
    return summary
