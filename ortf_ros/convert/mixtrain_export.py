"""``ortf export mixtrain``: an ORTF dataset as a Mixtrain v1.0 dataset (standalone Parquet).

Mixtrain keeps one row per temporal sequence, so curating tools filter episodes by
their scalar columns and trainers slice windows out of whole trajectories. Mapping:

- ``sequence_id`` = episode id; scalar columns ``task`` (instruction), ``success``
  (null when not evaluated), ``failure_reason``, ``operator_notes``,
  ``duration_seconds``, ``length`` (steps), ``recorded_at``, ``robot``.
- Trajectories ``list<list<float32>>`` of shape [T, dim] (inner lists fixed-size, so they
  convert to tensors without copying): ``action`` and ``obs_<component>`` for each
  state component, float32 exactly as in ORTF.
- ``mcap``: the episode's source recording (``source.path`` in episodes.parquet, as
  ``ortf-bag2ortf`` kept it: absolute, so it resolves from any dataset root); null for a
  live episode or a dataset that does not know it.
- ``timestamp``: [T] float64 step times in seconds (ORTF's real capture times).
- ``video_<camera>``: the episode's video copied, unchanged, to
  ``files/<camera>/ep_<id>.<ext>`` and referenced relative to the dataset root (colour
  H.264; depth FFV1 ``gray16le`` in millimetres, lossless, or an NPZ archive declared
  as type ``3d``). ORTF keeps every frame a
  camera delivered, so frame i is not always step i: ``video_<camera>_frame_index``
  ([T] int64) names the frame each step saw.
- ``mixtrain.json``: ``column_types`` for every trajectory, video and index column,
  with dimension names and units from the manifest.

- ``audio`` (the first microphone; ``audio_<name>`` for others): the episode's WAV copied
  to ``files/<microphone>/ep_<id>.wav``, its chunk table beside it
  (``.chunks.parquet``), typed ``audio`` with ``sample_rate``, ``channels``, ``codec``.
- ``lidar_<name>`` (with ``lidar_<name>_index``) and ``point_cloud_<name>``: a lidar's
  scans and a point cloud stream's clouds, as files (``convert.mixtrain_lidar``).

Other native-rate side tables and alignment columns are not exported.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.convert.export_audio import audio_column, audio_type, copy_audio
from ortf_ros.convert.mixtrain_lidar import index_sources, lidar_fields, lidar_files, lidar_types
from ortf_ros.convert.output_dir import open_source, staged_directory
from ortf_ros.dataset.reader import Dataset, Episode
from ortf_ros.errors import ReaderError
from ortf_ros.format import layout
from ortf_ros.format.audio import audio_sensors
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.sensors import Sensor
from ortf_ros.format.spaces import StateComponent
from ortf_ros.io import atomic

MIXTRAIN_VERSION = "1.0"
SIDECAR = "mixtrain.json"
FILES_DIR = "files"
NPZ_DEPTH = "npz"  # the manifest encoding of depth stored as NPZ archives


@dataclass(frozen=True)
class MixtrainResult:
    path: Path
    episodes: int
    steps: int
    data_files: tuple[str, ...]


def trajectory_column(component: str) -> str:
    """The Mixtrain column of an ORTF state component (``joint_positions`` -> ``obs_joint_positions``)."""
    return f"obs_{component}"


def video_column(camera: str) -> str:
    return f"video_{camera}"


def frame_index_column(camera: str) -> str:
    return f"video_{camera}_frame_index"


def data_file(part: int) -> str:
    return f"data/part-{part:05d}.parquet"


def to_mixtrain(
    dataset: Dataset | str | os.PathLike[str], out: str | os.PathLike[str], *, episodes_per_file: int = 1000
) -> MixtrainResult:
    """Write the dataset to ``out`` (a new or empty directory); memory holds one episode's steps."""
    source = open_source(dataset)
    manifest = source.manifest
    schema = row_schema(manifest)
    files: list[str] = []
    steps = 0
    with staged_directory(out) as scratch:
        writer: pq.ParquetWriter | None = None
        try:
            for position, record in enumerate(source.episodes):
                if position % episodes_per_file == 0:
                    if writer is not None:
                        writer.close()
                    files.append(data_file(len(files)))
                    (scratch / files[-1]).parent.mkdir(parents=True, exist_ok=True)
                    writer = pq.ParquetWriter(scratch / files[-1], schema)
                assert writer is not None
                with Episode(source, record) as episode:
                    writer.write_table(episode_row(episode, schema, scratch))
                steps += record.length
        finally:
            if writer is not None:
                writer.close()
        atomic.write_json(scratch / SIDECAR, sidecar(manifest))
    return MixtrainResult(Path(out), len(source.episodes), steps, tuple(files))


def row_schema(manifest: Manifest) -> pa.Schema:
    fields = [
        pa.field("sequence_id", pa.string(), nullable=False),
        pa.field("task", pa.string()),
        pa.field("success", pa.bool_()),
        pa.field("failure_reason", pa.string()),
        pa.field("operator_notes", pa.string()),
        pa.field("duration_seconds", pa.float64()),
        pa.field("length", pa.int64()),
        pa.field("recorded_at", pa.string()),
        pa.field("robot", pa.string()),
        pa.field("mcap", pa.string()),
        pa.field("timestamp", pa.list_(pa.float64())),
        pa.field("action", pa.list_(pa.list_(pa.float32(), manifest.action_space.dim))),
    ]
    for name, component in manifest.observation_space.state.items():
        fields.append(pa.field(trajectory_column(name), pa.list_(pa.list_(pa.float32(), component.dim))))
    for camera in manifest.cameras:
        fields.append(pa.field(video_column(camera), pa.string()))
        fields.append(pa.field(frame_index_column(camera), pa.list_(pa.int64())))
    fields += [pa.field(audio_column(manifest, sensor), pa.string()) for sensor in audio_sensors(manifest)]
    fields += lidar_fields(manifest)
    return pa.schema(fields)


def episode_row(episode: Episode, schema: pa.Schema, root: Path, files_dir: str = FILES_DIR) -> pa.Table:
    """One episode as one row; its video files are copied under ``root``/``files_dir``."""
    manifest = episode.dataset.manifest
    record = episode.record
    sources = {"timestamp": "timestamp", "action": "action"}
    sources |= {trajectory_column(n): layout.state_column(n) for n in manifest.observation_space.state}
    sources |= {frame_index_column(c): layout.image_column(c) for c in manifest.cameras}
    sources |= index_sources(manifest)
    steps = episode.steps(list(sources.values()))
    values: dict[str, Any] = {
        "sequence_id": record.episode_id,
        "task": episode.task.instruction,
        "success": record.success,
        "failure_reason": record.failure_reason,
        "operator_notes": record.operator_notes,
        "duration_seconds": record.duration_seconds,
        "length": steps.num_rows,
        "recorded_at": record.recorded_at,
        "robot": manifest.robot.name,
        "mcap": None if record.source is None else record.source.path,
    }
    columns = {name: _one_row_list(steps[column].combine_chunks()) for name, column in sources.items()}
    for camera in manifest.cameras:
        values[video_column(camera)] = _copy_video(episode, camera, root, files_dir)
    for sensor in audio_sensors(manifest):
        stem = f"{files_dir}/{sensor.name}/ep_{episode.episode_id}"
        values[audio_column(manifest, sensor)] = copy_audio(episode, sensor, root, stem)
    values |= lidar_files(episode, root, files_dir)
    return pa.table(
        [columns[f.name] if f.name in columns else pa.array([values[f.name]], f.type) for f in schema],
        schema=schema,
    )


def _one_row_list(values: pa.Array) -> pa.Array:
    """A whole column as the single list cell of one row (no copy)."""
    return pa.ListArray.from_arrays(pa.array([0, len(values)], pa.int32()), values)


def _copy_video(episode: Episode, camera: str, root: Path, files_dir: str) -> str | None:
    if not episode.record.video_files.get(camera):
        return None
    source = episode.video_path(camera)
    relative = f"{files_dir}/{camera}/ep_{episode.episode_id}{source.suffix}"
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copyfile(source, root / relative)
    except FileNotFoundError:
        where = source.relative_to(episode.dataset.root)
        raise ReaderError(f"{where}: missing (episode {episode.episode_id}, camera {camera})") from None
    return relative


def sidecar(manifest: Manifest) -> dict[str, Any]:
    """``mixtrain.json``: the format marker and the semantics Parquet types cannot carry."""
    action = manifest.action_space
    column_types: dict[str, Any] = {
        "timestamp": {"type": "timestamps", "units": "s", "reference": manifest.timestamp_reference},
        "mcap": {"type": "mcap"},
        "action": _drop_none(
            {
                "type": "trajectory",
                "dim": action.dim,
                "names": [d.name for d in action.dimensions],
                "units": [d.units for d in action.dimensions],
                "action_type": action.type,
                "coordinate_frame": action.frame,
            }
        ),
    }
    for name, component in manifest.observation_space.state.items():
        column_types[trajectory_column(name)] = _state_type(component)
    for camera, sensor in manifest.cameras.items():
        column_types[video_column(camera)] = _video_type(sensor)
        column_types[frame_index_column(camera)] = {"type": "frame_index", "video": video_column(camera)}
    for sensor in audio_sensors(manifest):
        column_types[audio_column(manifest, sensor)] = audio_type(sensor)
    column_types |= {name: _drop_none(entry) for name, entry in lidar_types(manifest).items()}
    return {
        "mixtrain": MIXTRAIN_VERSION,
        "column_types": column_types,
        "ortf": {
            "ortf_version": manifest.ortf_version,
            "dataset_id": manifest.dataset_id,
            "name": manifest.name,
        },
    }


def _state_type(component: StateComponent) -> dict[str, Any]:
    return _drop_none(
        {
            "type": "trajectory",
            "dim": component.dim,
            "names": list(component.names) if component.names else None,
            "units": component.units,
            "coordinate_frame": component.frame,
            "order": component.order,
        }
    )


def _video_type(sensor: Sensor) -> dict[str, Any]:
    resolution = sensor.resolution
    entry: dict[str, Any] = {
        "type": "video",
        "fps": sensor.fps,
        "codec": sensor.encoding,
        "resolution": [resolution.width, resolution.height] if resolution else None,
    }
    if sensor.encoding == NPZ_DEPTH:
        # Depth frames as a NumPy archive (the spec's other lossless option): not a video.
        entry |= {"type": "3d", "format": "npz", "codec": None, "units": "mm"}
    elif sensor.is_depth:
        entry |= {"pix_fmt": "gray16le", "units": "mm"}  # 16-bit millimetres, lossless (FFV1)
    return _drop_none(entry)


def _drop_none(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if v is not None}
