"""LaserScan and PointCloud2 messages -> ``LaserScanSample`` / ``PointCloudSample``.

Both keep what the sensor measured bit for bit: a scan's ranges and intensities stay the
float32 they were sent as (REP 117's +inf "no return", -inf "too close" and NaN "invalid"
included), a cloud's fields keep their own datatypes. A cloud is decoded into one array per
``PointField`` (``PointCloudSample.values``), in the host's little-endian order, whatever
byte order, padding between fields or row padding it came with: the dataset stores those
arrays as list columns (``dataset.point_clouds``), which a reader uses as they are, where
raw bytes would need the layout applied again by every reader.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ortf_ros.errors import InvalidRangeDataError
from ortf_ros.pipeline.samples import LaserScanSample, PointCloudSample, PointField, Stamps

POINT_DATATYPES: dict[int, str] = {1: "i1", 2: "u1", 3: "i2", 4: "u2", 5: "i4", 6: "u4", 7: "f4", 8: "f8"}
"""``sensor_msgs/PointField`` datatype codes -> numpy type codes (without byte order)."""
DATATYPE_NAMES: dict[int, str] = {
    1: "INT8",
    2: "UINT8",
    3: "INT16",
    4: "UINT16",
    5: "INT32",
    6: "UINT32",
    7: "FLOAT32",
    8: "FLOAT64",
}


PCL_PADDING = "_"
"""The name PCL gives a padding field: bytes that hold no value (left out, as other padding is)."""


def _f32(values: object) -> np.ndarray:
    if isinstance(values, np.ndarray):
        return values.astype(np.float32, copy=True).reshape(-1)
    return np.array(values, dtype=np.float32).reshape(-1)


def laser_scan(msg: Any, topic: str, stamps: Stamps) -> LaserScanSample:
    ranges = _f32(msg.ranges)
    intensities = _f32(msg.intensities)
    if ranges.size == 0:
        raise InvalidRangeDataError("the scan has no ranges")
    if intensities.size not in (0, ranges.size):
        given = f"{intensities.size} intensities for {ranges.size} ranges"
        raise InvalidRangeDataError(f"{given} (expected as many, or none)")
    return LaserScanSample(
        topic=topic,
        stamps=stamps,
        angle_min=float(msg.angle_min),
        angle_max=float(msg.angle_max),
        angle_increment=float(msg.angle_increment),
        time_increment=float(msg.time_increment),
        scan_time=float(msg.scan_time),
        range_min=float(msg.range_min),
        range_max=float(msg.range_max),
        ranges=ranges,
        intensities=intensities,
    )


def _fields(msg: Any) -> tuple[PointField, ...]:
    fields = []
    for field in msg.fields:
        if str(field.name) == PCL_PADDING:
            continue
        datatype = int(field.datatype)
        if datatype not in POINT_DATATYPES:
            raise InvalidRangeDataError(f"field {field.name!r} has datatype {datatype}, expected 1..8 (INT8..FLOAT64)")
        fields.append(PointField(str(field.name), int(field.offset), datatype, max(1, int(field.count))))
    names = [f.name for f in fields]
    if not fields:
        raise InvalidRangeDataError("the cloud has no fields")
    if len(set(names)) != len(names) or not all(names):
        raise InvalidRangeDataError(f"field names must be unique and not empty, got {names}")
    return tuple(fields)


def point_dtype(fields: tuple[PointField, ...], point_step: int, big_endian: bool) -> np.dtype[Any]:
    """A point as a numpy record: each field at its offset, ``point_step`` bytes in all."""
    order = ">" if big_endian else "<"
    formats: list[Any] = []
    for f in fields:
        base = order + POINT_DATATYPES[f.datatype]
        formats.append(base if f.count == 1 else (base, (f.count,)))
    spec = {"names": [f.name for f in fields], "formats": formats, "offsets": [f.offset for f in fields]}
    return np.dtype({**spec, "itemsize": point_step})  # type: ignore[call-overload,no-any-return]


def point_cloud(msg: Any, topic: str, stamps: Stamps) -> PointCloudSample:
    height, width = int(msg.height), int(msg.width)
    point_step, row_step = int(msg.point_step), int(msg.row_step)
    fields = _fields(msg)
    for f in fields:
        end = f.offset + np.dtype(POINT_DATATYPES[f.datatype]).itemsize * f.count
        if end > point_step:
            raise InvalidRangeDataError(f"field {f.name!r} ends at byte {end}, past point_step {point_step}")
    if row_step < width * point_step:
        raise InvalidRangeDataError(f"row_step {row_step} is less than width {width} x point_step {point_step}")
    data = msg.data
    raw = np.frombuffer(data, np.uint8) if isinstance(data, (bytes, bytearray, memoryview)) else np.asarray(data)
    raw = raw.astype(np.uint8, copy=False).reshape(-1)
    if raw.size < height * row_step:
        raise InvalidRangeDataError(
            f"data holds {raw.size} bytes, {height} rows of row_step {row_step} need {height * row_step}"
        )
    dtype = point_dtype(fields, point_step, bool(msg.is_bigendian))
    rows = raw[: height * row_step].reshape(height, row_step)[:, : width * point_step] if height else raw[:0]
    points = np.ascontiguousarray(rows).reshape(-1).view(dtype) if height and width else np.zeros(0, dtype)
    values = {}
    for f in fields:
        column = points[f.name]
        values[f.name] = np.ascontiguousarray(column.astype(column.dtype.newbyteorder("<")))
    return PointCloudSample(
        topic=topic,
        stamps=stamps,
        height=height,
        width=width,
        fields=fields,
        point_step=point_step,
        is_dense=bool(msg.is_dense),
        values=values,
    )


def cloud_bytes(sample_values: dict[str, np.ndarray], fields: tuple[PointField, ...], point_step: int) -> bytes:
    """A cloud's points as PointCloud2 ``data`` of layout ``fields`` / ``point_step``
    (little-endian, rows not padded; padding bytes zero): what a player publishes."""
    dtype = point_dtype(fields, point_step, big_endian=False)
    count = len(next(iter(sample_values.values()))) if sample_values else 0
    points = np.zeros(count, dtype)
    for f in fields:
        points[f.name] = sample_values[f.name]
    return points.tobytes()
