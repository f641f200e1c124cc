"""Point cloud files: the manifest's ``point_clouds`` declaration, where each episode's
clouds are, and the Arrow schema of those files (a pure function of the declaration, so
the writer, the validator and the players agree on it).

One Parquet file per stream and episode, ``point_clouds/<name>/chunk-NNN/episode_NNNNNN.parquet``,
a row per cloud: its index, time on the steps' clock, raw header stamp and receive time,
frame, ``height`` x ``width`` (an organized cloud's rows and columns; 1 x N otherwise),
``is_dense``, and per ``PointField`` a list column ``points.<field>`` of the cloud's points in
row-major order, in the field's own type (a field of several elements: a list of
fixed-size lists). Decoded columns rather than the message's bytes: a reader takes
``points.x`` as it is, with no layout to apply, and padding (up to half of a cloud's bytes
in the common 32-byte x, y, z, intensity layout) is not stored; the values are the bytes
sent, so a player rebuilds the message exactly (``point_step`` and offsets declared).
The ``points.`` prefix keeps a field named like a row's own columns (``timestamp``, which
some lidars' clouds have) from colliding with them.

Also the two facts of a laser scan's native-rate stream that readers of the format need:
which streams are scans (``scan_streams``) and that their values may be non-finite by
meaning (``NON_FINITE_KEY``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.sensors import Sensor

POINT_CLOUDS_KEY = "point_clouds"
"""The manifest's top-level key declaring the point cloud streams (an ortf_ros extension)."""
ARROW_TYPES: dict[str, pa.DataType] = {
    "INT8": pa.int8(),
    "UINT8": pa.uint8(),
    "INT16": pa.int16(),
    "UINT16": pa.uint16(),
    "INT32": pa.int32(),
    "UINT32": pa.uint32(),
    "FLOAT32": pa.float32(),
    "FLOAT64": pa.float64(),
}
"""``sensor_msgs/PointField`` datatypes (by name) -> the Arrow type of their values."""
FIELD_PREFIX = "points."
NON_FINITE_KEY = "non_finite"
"""A native-rate stream's key saying its values may be non-finite, and what that means (a
laser scan's ranges: REP 117's +inf, -inf and NaN); such a stream's values are kept as sent."""


def lidar_frame(sensor: Sensor | None) -> str | None:
    """The frame a lidar sensor declares its points in (``frame``); None without one."""
    frame = sensor.extra.get("frame") if sensor is not None else None
    return frame if isinstance(frame, str) and frame else None


def scan_streams(manifest: Manifest) -> list[str]:
    """The native-rate streams that are a lidar's scans (a ``lidar`` sensor's, with ``ranges``)."""
    found = []
    for name, stream in manifest.native_streams.items():
        sensor = manifest.sensor(stream.sensor or "")
        if sensor is not None and sensor.type == "lidar" and "ranges" in stream.columns:
            found.append(name)
    return found


def declarations(manifest: Manifest) -> dict[str, dict[str, Any]]:
    """Point cloud stream name -> its declaration (``{}`` when the dataset has none)."""
    value = manifest.extra.get(POINT_CLOUDS_KEY)
    return {k: v for k, v in value.items() if isinstance(v, dict)} if isinstance(value, dict) else {}


def cloud_path(name: str, chunk_id: int, episode_index: int) -> str:
    return f"point_clouds/{name}/{layout.chunk_dir_name(chunk_id)}/{layout.episode_file_stem(episode_index)}.parquet"


def field_column(field: str) -> str:
    return FIELD_PREFIX + field


def field_type(field: dict[str, Any]) -> pa.DataType:
    """A declared field's column type (KeyError/TypeError/ValueError when malformed)."""
    base = ARROW_TYPES[str(field["datatype"])]
    count = int(field["count"])
    return pa.list_(base if count == 1 else pa.list_(base, count))


def cloud_schema(declaration: dict[str, Any]) -> pa.Schema:
    """The schema of a point cloud file of this declaration."""
    fields = [
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("cloud_index", pa.int64(), nullable=False),
        pa.field("timestamp", pa.float64(), nullable=False),
        pa.field("stamp_ns", pa.int64()),
        pa.field("receive_ns", pa.int64()),
        pa.field("frame_id", pa.string()),
        pa.field("height", pa.int64(), nullable=False),
        pa.field("width", pa.int64(), nullable=False),
        pa.field("is_dense", pa.bool_(), nullable=False),
    ]
    for field in declaration["fields"]:
        fields.append(pa.field(field_column(str(field["name"])), field_type(field), nullable=False))
    return pa.schema(fields)
