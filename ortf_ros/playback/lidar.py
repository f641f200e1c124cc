"""Laser scans and point clouds as the player publishes them (node and ``ortf export mcap``).

Every scan of a lidar's native-rate table becomes a ``sensor_msgs/LaserScan`` at its
sample's time, its geometry from the lidar sensor (angles, increments, range limits), its
ranges and intensities the float32 values stored (so REP 117's +inf, -inf and NaN too).
Every cloud of an episode's point cloud file becomes a ``sensor_msgs/PointCloud2`` at its
time, rebuilt with the declared layout (fields, offsets, ``point_step``; little-endian, no
row padding; padding bytes zero): the values are the ones recorded, bit for bit. Both are
read a row group at a time (a cloud is one), so memory does not grow with the episode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ortf_ros.dataset.reader import Episode, column_array
from ortf_ros.format import point_clouds
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.sensors import Sensor
from ortf_ros.pipeline.streams.range_manifest import CloudLayout, cloud_layout
from ortf_ros.pipeline.streams.range_sensors import cloud_bytes
from ortf_ros.playback.rosmsg import RosMessages
from ortf_ros.playback.settings import MessageSettings

LASER_SCAN_TYPE = "sensor_msgs/msg/LaserScan"
POINT_CLOUD_TYPE = "sensor_msgs/msg/PointCloud2"


@dataclass(frozen=True)
class ScanOut:
    name: str  # the lidar sensor and its native-rate stream
    topic: str
    frame_id: str
    sensor: Sensor
    intensities: bool


@dataclass(frozen=True)
class CloudOut:
    name: str  # the point cloud stream (and its sensor)
    topic: str
    frame_id: str
    layout: CloudLayout


def _frame(sensor: Sensor | None, fallback: object, name: str) -> str:
    """The lidar's declared frame, else ``fallback`` (a string), else its name."""
    frame = point_clouds.lidar_frame(sensor)
    if frame is None and isinstance(fallback, str) and fallback:
        frame = fallback
    return frame or name


def scan_outputs(manifest: Manifest, settings: MessageSettings) -> tuple[ScanOut, ...]:
    """Each lidar whose scans the dataset keeps at their native rate."""
    found = []
    for name in point_clouds.scan_streams(manifest):
        stream = manifest.native_streams[name]
        sensor = manifest.sensor(stream.sensor or "")
        assert sensor is not None
        topic = settings.topic("laser_scan", name)
        found.append(
            ScanOut(name, topic, _frame(sensor, sensor.mount_link, name), sensor, "intensities" in stream.columns)
        )
    return tuple(found)


def cloud_outputs(manifest: Manifest, settings: MessageSettings) -> tuple[CloudOut, ...]:
    """Each point cloud stream whose layout the manifest declares."""
    found = []
    for name, declaration in point_clouds.declarations(manifest).items():
        layout = cloud_layout(manifest, name)
        if layout is None:
            continue
        frame = _frame(manifest.sensor(name), declaration.get("frame"), name)
        found.append(CloudOut(name, settings.topic("point_cloud", name), frame, layout))
    return tuple(found)


def _number(sensor: Sensor, key: str) -> float:
    value = sensor.extra.get(key)
    return float(value) if isinstance(value, (int, float)) else 0.0


def laser_scan(ros: RosMessages, t: int, scan: ScanOut, ranges: np.ndarray, intensities: np.ndarray) -> Any:
    sensor = scan.sensor
    limits = sensor.extra.get("range")
    range_min, range_max = (float(limits[0]), float(limits[1])) if isinstance(limits, list) else (0.0, 0.0)
    return ros.new(
        LASER_SCAN_TYPE,
        header=ros.header(t, scan.frame_id),
        angle_min=_number(sensor, "angle_min"),
        angle_max=_number(sensor, "angle_max"),
        angle_increment=_number(sensor, "angle_increment"),
        time_increment=_number(sensor, "time_increment"),
        scan_time=_number(sensor, "scan_time"),
        range_min=range_min,
        range_max=range_max,
        ranges=np.asarray(ranges, np.float32),
        intensities=np.asarray(intensities, np.float32),
    )


def point_cloud(
    ros: RosMessages, t: int, cloud: CloudOut, height: int, width: int, dense: bool, values: dict[str, np.ndarray]
) -> Any:
    layout = cloud.layout
    fields = [
        ros.new("sensor_msgs/msg/PointField", name=f.name, offset=f.offset, datatype=f.datatype, count=f.count)
        for f in layout.fields
    ]
    return ros.new(
        POINT_CLOUD_TYPE,
        header=ros.header(t, cloud.frame_id),
        height=height,
        width=width,
        fields=fields,
        is_bigendian=False,
        point_step=layout.point_step,
        row_step=width * layout.point_step,
        data=np.frombuffer(cloud_bytes(values, layout.fields, layout.point_step), np.uint8),
        is_dense=dense,
    )


Timed = Callable[[float], int]  # an episode time (s) -> the playback timeline (ns)
Emit = Callable[[int, str, str, Any], Any]  # (time ns, topic, message type, message) -> an outgoing item


def scan_items(
    episode: Episode, scan: ScanOut, ros: RosMessages, at: Timed, plays_from_s: float, emit: Emit
) -> Iterator[Any]:
    columns = ["timestamp", "ranges", *(["intensities"] if scan.intensities else [])]
    for batch in episode.stream_batches(scan.name, columns):
        timestamps = column_array(batch.column("timestamp"))
        ranges = column_array(batch.column("ranges"))
        intensities = column_array(batch.column("intensities")) if scan.intensities else np.zeros((len(ranges), 0))
        for timestamp, row, strengths in zip(timestamps, ranges, intensities, strict=True):
            if timestamp >= plays_from_s:
                t = at(float(timestamp))
                yield emit(t, scan.topic, LASER_SCAN_TYPE, laser_scan(ros, t, scan, row, strengths))


def cloud_values(table: Any, row: int, cloud: CloudOut) -> dict[str, np.ndarray]:
    """One cloud's values per field, from its row of a cloud file."""
    values = {}
    for f in cloud.layout.fields:
        column = table.column(point_clouds.field_column(f.name))[row].values
        flat = column.flatten() if f.count > 1 else column
        array = flat.to_numpy(zero_copy_only=False)
        values[f.name] = array.reshape(-1, f.count) if f.count > 1 else array
    return values


def cloud_items(
    episode: Episode, cloud: CloudOut, ros: RosMessages, at: Timed, plays_from_s: float, emit: Emit
) -> Iterator[Any]:
    for table in episode.cloud_batches(cloud.name):
        for row in range(table.num_rows):
            timestamp = float(table.column("timestamp")[row].as_py())
            if timestamp < plays_from_s:
                continue
            t = at(timestamp)
            height, width = int(table.column("height")[row].as_py()), int(table.column("width")[row].as_py())
            dense = bool(table.column("is_dense")[row].as_py())
            message = point_cloud(ros, t, cloud, height, width, dense, cloud_values(table, row, cloud))
            yield emit(t, cloud.topic, POINT_CLOUD_TYPE, message)
