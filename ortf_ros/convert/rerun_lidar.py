"""Laser scans and point clouds in ``ortf export rerun``: ``/lidar/<name>``, a ``Points3D``
per scan or cloud at its time, in the sensor's frame (which the manifest's frames place in
the 3D scene).

A scan's points are its finite ranges at their angles (``angle_min + i *
angle_increment``) in the scan plane, z = 0; REP 117's +inf, -inf and NaN are no points. A
cloud's points are its ``x``, ``y``, ``z`` fields where all three are finite (a cloud
without them is left out). Scans and clouds are read a row group at a time, so memory is
one row group's whatever the episode's length. Their native tables are not plotted as
scalar series (a 360-beam scan would be 360 plots).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ortf_ros.convert import rerun_plan
from ortf_ros.dataset.reader import Episode, column_array
from ortf_ros.format import point_clouds
from ortf_ros.format.manifest import Manifest

Log = Callable[[str, float, Any], None]  # (entity, episode seconds, archetype)


def scan_sensor(manifest: Manifest, stream: str) -> str:
    return manifest.native_streams[stream].sensor or stream


def frames(manifest: Manifest) -> dict[str, str]:
    """Entity -> the frame its points are in, for every lidar with a frame."""
    found = {}
    for name in point_clouds.scan_streams(manifest):
        frame = point_clouds.lidar_frame(manifest.sensor(scan_sensor(manifest, name)))
        if frame is not None:
            found[rerun_plan.path("lidar", name)] = frame
    for name in point_clouds.declarations(manifest):
        frame = point_clouds.lidar_frame(manifest.sensor(name))
        if frame is not None:
            found[rerun_plan.path("lidar", name)] = frame
    return found


def _scan_points(episode: Episode, name: str) -> Iterator[tuple[float, np.ndarray]]:
    manifest = episode.dataset.manifest
    sensor = manifest.sensor(scan_sensor(manifest, name))
    extra = sensor.extra if sensor is not None else {}
    angle_min, increment = float(extra.get("angle_min", 0.0)), float(extra.get("angle_increment", 0.0))
    for batch in episode.stream_batches(name, ["timestamp", "ranges"]):
        seconds = column_array(batch.column("timestamp")).astype(np.float64)
        ranges = column_array(batch.column("ranges")).astype(np.float64).reshape(batch.num_rows, -1)
        angles = angle_min + increment * np.arange(ranges.shape[1])
        for second, row in zip(seconds.tolist(), ranges, strict=True):
            hit = np.isfinite(row)
            points = np.stack([row * np.cos(angles), row * np.sin(angles), np.zeros_like(row)], axis=1)
            yield second, points[hit]


def _cloud_points(episode: Episode, name: str) -> Iterator[tuple[float, np.ndarray]]:
    declared = point_clouds.declarations(episode.dataset.manifest)[name]
    axes = [point_clouds.field_column(axis) for axis in ("x", "y", "z")]
    if not {"x", "y", "z"} <= {str(f.get("name")) for f in declared.get("fields", [])}:
        return
    for batch in episode.cloud_batches(name, ["timestamp", *axes]):
        for row in range(batch.num_rows):
            xyz = np.stack([np.asarray(batch.column(a)[row].values, np.float64) for a in axes], axis=1)
            yield float(batch.column("timestamp")[row].as_py()), xyz[np.isfinite(xyz).all(axis=1)]


def log_episode(rr: Any, episode: Episode, log: Log) -> None:
    """Every scan and cloud of ``episode`` as ``Points3D`` under ``/lidar``."""
    manifest = episode.dataset.manifest
    sources = [(name, _scan_points(episode, name)) for name in point_clouds.scan_streams(manifest)]
    sources += [(name, _cloud_points(episode, name)) for name in point_clouds.declarations(manifest)]
    for name, points in sources:
        entity = rerun_plan.path("lidar", name)
        for second, positions in points:
            log(entity, second, rr.Points3D(positions))
