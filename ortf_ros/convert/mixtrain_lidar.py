"""Laser scans and point clouds in ``ortf export mixtrain``, as file references the way
videos are (Mixtrain's "3d" and "4d" types are file references of point clouds and of
temporal 3D data):

- ``lidar_<name>``: the episode's scan table (ORTF's native-rate Parquet file, every scan
  with its stamps, ``ranges`` and ``intensities``) copied to ``files/<name>/ep_<id>.parquet``,
  type ``3d`` (format ``parquet``, ``scan_rate``, the scan geometry, ``coordinate_frame``);
  ``lidar_<name>_index`` ([T] int64) names the scan each step points at, as
  ``video_<camera>_frame_index`` names frames;
- ``point_cloud_<name>``: the episode's point cloud file copied likewise, type ``4d``
  (format ``parquet``, ``fps``, ``coordinate_frame``, the declared ``fields``). Steps do not
  point at clouds: they are aligned by their ``timestamp`` column.

The files are the ORTF files unchanged (value-exact), so their layout is ORTF's
(``format.point_clouds``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa

from ortf_ros.dataset.reader import Episode
from ortf_ros.format import layout, point_clouds
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.point_clouds import scan_streams

_GEOMETRY = ("angle_min", "angle_max", "angle_increment", "time_increment", "scan_time", "samples", "range")


def scan_column(name: str) -> str:
    return f"lidar_{name}"


def scan_index_column(name: str) -> str:
    return f"lidar_{name}_index"


def cloud_column(name: str) -> str:
    return f"point_cloud_{name}"


def lidar_fields(manifest: Manifest) -> list[pa.Field]:
    fields = []
    for name in scan_streams(manifest):
        fields += [pa.field(scan_column(name), pa.string()), pa.field(scan_index_column(name), pa.list_(pa.int64()))]
    fields += [pa.field(cloud_column(name), pa.string()) for name in point_clouds.declarations(manifest)]
    return fields


def index_sources(manifest: Manifest) -> dict[str, str]:
    """Row column -> the step column it is the list of."""
    return {scan_index_column(n): layout.stream_index_column(n) for n in scan_streams(manifest)}


def _copy(source: Path, root: Path, relative: str) -> str | None:
    if not source.exists():
        return None
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, root / relative)
    return relative


def lidar_files(episode: Episode, root: Path, files_dir: str) -> dict[str, str | None]:
    """The episode's scan tables and cloud files copied under ``root``; row column -> where."""
    dataset = episode.dataset
    manifest = dataset.manifest
    values: dict[str, str | None] = {}
    for name in scan_streams(manifest):
        source = dataset.root / episode.stream_file(name)
        values[scan_column(name)] = _copy(source, root, f"{files_dir}/{name}/ep_{episode.episode_id}.parquet")
    for name in point_clouds.declarations(manifest):
        index = dataset.file_index(episode.record)
        source = dataset.root / point_clouds.cloud_path(name, episode.record.chunk_id, index)
        values[cloud_column(name)] = _copy(source, root, f"{files_dir}/{name}/ep_{episode.episode_id}.parquet")
    return values


def lidar_types(manifest: Manifest) -> dict[str, Any]:
    """``column_types`` of the lidar columns."""
    types: dict[str, Any] = {}
    for name in scan_streams(manifest):
        stream = manifest.native_streams[name]
        sensor = manifest.sensor(stream.sensor or "")
        extra = sensor.extra if sensor is not None else {}
        types[scan_column(name)] = {
            "type": "3d",
            "format": "parquet",
            "content": "laser_scan",
            "units": "m",
            "angle_units": "rad",
            "scan_rate": stream.rate_hz,
            "coordinate_frame": extra.get("frame"),
            "columns": list(stream.columns),
            **{key: extra[key] for key in _GEOMETRY if key in extra},
        }
        types[scan_index_column(name)] = {"type": "frame_index", "file": scan_column(name)}
    for name, declaration in point_clouds.declarations(manifest).items():
        types[cloud_column(name)] = {
            "type": "4d",
            "format": "parquet",
            "content": "point_cloud",
            "units": "m",
            "fps": declaration.get("rate_hz"),
            "coordinate_frame": declaration.get("frame"),
            "fields": declaration.get("fields"),
        }
    return types
