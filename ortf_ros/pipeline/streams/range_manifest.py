"""How laser scans and point clouds are declared in the manifest, from each topic's first
message (``Prologue.scans`` / ``Prologue.clouds``), and read back from it.

A ``sensor_msgs/LaserScan`` topic becomes a ``lidar`` sensor (the spec's ``scan_rate``,
``range``, ``channels`` 1 and ``fov_horizontal``, plus the scan's own geometry, angles in
radians) and a native-rate stream of the same name: ``ranges`` (metres) and
``intensities`` (where the scanner gives them), one fixed-size row per scan. REP 117 gives
+inf, -inf and NaN meanings in ``ranges``; they are kept as sent (``NON_FINITE_KEY``).

A ``sensor_msgs/PointCloud2`` topic becomes a ``lidar`` sensor too (``format``
``point_cloud``; range and channels are not in the message: the rings are the organized
cloud's height, or the ``ring`` field's values, when the first cloud shows them, else
"unknown") and an entry of the manifest's ``point_clouds``: its fields, their datatypes and
offsets and the ``point_step`` (the layout a player rebuilds the message with), and where
its files are (``layout``-like path template).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ortf_ros.errors import SourceError
from ortf_ros.format import point_clouds
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.native_streams import NativeStream
from ortf_ros.format.point_clouds import NON_FINITE_KEY
from ortf_ros.format.sensors import Sensor
from ortf_ros.format.spaces import StateComponent
from ortf_ros.pipeline.mapping import LaserScanMapping, PointCloudMapping, TopicMapping
from ortf_ros.pipeline.samples import LaserScanSample, PointCloudSample, PointField
from ortf_ros.pipeline.streams.range_sensors import DATATYPE_NAMES

REP117 = "kept as sent (REP 117): +inf no return within range_max, -inf closer than range_min, NaN invalid"
POINT_CLOUD_FILES = "point_clouds/{name}/chunk-NNN/episode_NNNNNN.parquet"
_CODES = {name: code for code, name in DATATYPE_NAMES.items()}


@dataclass(frozen=True)
class CloudLayout:
    """A point cloud topic's point layout, as declared."""

    fields: tuple[PointField, ...]
    point_step: int

    def describe(self) -> str:
        fields = ", ".join(f"{f.name} {DATATYPE_NAMES[f.datatype]}x{f.count}@{f.offset}" for f in self.fields)
        return f"[{fields}] in {self.point_step} bytes"


def scan_sensor(mapping: LaserScanMapping, first: LaserScanSample, rate_hz: float) -> Sensor:
    extra: dict[str, object] = {
        "scan_rate": rate_hz,
        "range": [first.range_min, first.range_max],
        "channels": 1,
        "fov_horizontal": first.angle_max - first.angle_min,
        "angle_units": "radians",
        "angle_min": first.angle_min,
        "angle_max": first.angle_max,
        "angle_increment": first.angle_increment,
        "time_increment": first.time_increment,
        "scan_time": first.scan_time,
        "samples": int(first.ranges.size),
        "intensities": bool(first.intensities.size),
        "frame": first.stamps.frame_id,
        "source": mapping.topic,
        "message_type": "sensor_msgs/msg/LaserScan",
    }
    return Sensor(name=mapping.name, type="lidar", mount_link=first.stamps.frame_id or None, extra=extra)


def scan_stream(mapping: LaserScanMapping, first: LaserScanSample, rate_hz: float) -> NativeStream:
    samples = int(first.ranges.size)
    columns = {"ranges": StateComponent(samples, "meters")}
    if first.intensities.size:
        columns["intensities"] = StateComponent(samples, "device_specific")
    return NativeStream(
        columns=columns, sensor=mapping.name, rate_hz=rate_hz, source=mapping.topic, extra={NON_FINITE_KEY: REP117}
    )


def _channels(first: PointCloudSample) -> int | str:
    if first.height > 1:
        return first.height
    ring = first.values.get("ring")
    if ring is not None and ring.ndim == 1 and ring.size and np.issubdtype(ring.dtype, np.integer):
        return int(np.unique(ring).size)
    return "unknown"


def cloud_sensor(mapping: PointCloudMapping, first: PointCloudSample, rate_hz: float) -> Sensor:
    extra: dict[str, object] = {
        "format": "point_cloud",
        "scan_rate": rate_hz,
        "range": "unknown",
        "channels": _channels(first),
        "frame": first.stamps.frame_id,
        "source": mapping.topic,
        "message_type": "sensor_msgs/msg/PointCloud2",
    }
    return Sensor(name=mapping.name, type="lidar", mount_link=first.stamps.frame_id or None, extra=extra)


def cloud_declaration(mapping: PointCloudMapping, first: PointCloudSample, rate_hz: float) -> dict[str, object]:
    return {
        "sensor": mapping.name,
        "source": mapping.topic,
        "rate_hz": rate_hz,
        "frame": first.stamps.frame_id,
        "fields": declared_fields(first.fields),
        "point_step": first.point_step,
        "is_bigendian": False,
        "organized": first.height > 1,
        "files": POINT_CLOUD_FILES.replace("{name}", mapping.name),
        "columns": "points.<field>: a list per cloud of the height x width points in row-major order",
    }


def declared_fields(fields: tuple[PointField, ...]) -> list[dict[str, object]]:
    """The manifest's form of a cloud's fields (what later clouds are compared with)."""
    return [
        {"name": f.name, "datatype": DATATYPE_NAMES[f.datatype], "count": f.count, "offset": f.offset} for f in fields
    ]


_T = TypeVar("_T")


def _first(found: Mapping[str, _T], name: str, missing: str) -> _T:
    """A sensor's first message, which the manifest is described from (none: ``missing``)."""
    if name not in found:
        raise SourceError(missing)
    return found[name]


def range_description(
    config: TopicMapping,
    scans: dict[str, LaserScanSample],
    clouds: dict[str, PointCloudSample],
    rates: dict[str, float],
) -> tuple[list[Sensor], dict[str, NativeStream], dict[str, Any]]:
    """The sensors, native-rate streams and ``point_clouds`` entries of the mapped scans and clouds."""
    sensors: list[Sensor] = []
    streams: dict[str, NativeStream] = {}
    declared: dict[str, Any] = {}
    for scan in config.laser_scans:
        first = _first(scans, scan.name, f"{scan.topic}: laser scan {scan.name!r} has no decodable scan")
        rate = rates.get(scan.topic, 0.0)
        sensors.append(scan_sensor(scan, first, rate))
        streams[scan.name] = scan_stream(scan, first, rate)
    for cloud in config.point_clouds:
        first_cloud = _first(clouds, cloud.name, f"{cloud.topic}: point cloud {cloud.name!r} has no decodable cloud")
        rate = rates.get(cloud.topic, 0.0)
        sensors.append(cloud_sensor(cloud, first_cloud, rate))
        declared[cloud.name] = cloud_declaration(cloud, first_cloud, rate)
    return sensors, streams, declared


def scan_columns(manifest: Manifest, name: str) -> tuple[int, bool]:
    """A scan stream's number of ranges, and whether it has intensities."""
    stream = manifest.native_streams[name]
    return stream.columns["ranges"].dim, "intensities" in stream.columns


def cloud_layout(manifest: Manifest, name: str) -> CloudLayout | None:
    """The declared layout of point cloud ``name`` (None: not declared, or not readable)."""
    declared = point_clouds.declarations(manifest).get(name)
    if declared is None:
        return None
    try:
        fields = tuple(
            PointField(str(f["name"]), int(f["offset"]), _CODES[str(f["datatype"])], int(f["count"]))
            for f in declared["fields"]
        )
        return CloudLayout(fields, int(declared["point_step"]))
    except (KeyError, TypeError, ValueError):
        return None
