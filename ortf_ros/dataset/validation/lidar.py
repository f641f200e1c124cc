"""Rules of laser scans and point clouds (an ortf_ros extension; see ``format.point_clouds``).

Laser scans are native-rate streams, whose tables the stream rules check (fixed-size
columns, sample indices, rows against the accounting); here, that each scan stream agrees
with its ``lidar`` sensor (``samples`` ranges, intensities or not). Point clouds: each
declaration is usable (known datatypes, fields inside ``point_step``, a lidar sensor of the
name) and each episode's cloud file has the declared schema, as many rows as its accounting
says, clouds numbered 0..n-1 with times that are finite and do not go back, and as many
values in each field's list as the cloud has points.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.dataset.validation.accounting import check_native_stream
from ortf_ros.dataset.validation.findings import Finding, finding
from ortf_ros.dataset.validation.tables import Episode
from ortf_ros.format import layout, point_clouds
from ortf_ros.format.manifest import Manifest

_SIZES = {"INT8": 1, "UINT8": 1, "INT16": 2, "UINT16": 2, "INT32": 4, "UINT32": 4, "FLOAT32": 4, "FLOAT64": 8}


def check_lidar_manifest(manifest: Manifest) -> list[Finding]:
    found: list[Finding] = []
    for name, stream in manifest.native_streams.items():
        sensor = manifest.sensor(stream.sensor or "")
        if sensor is None or sensor.type != "lidar":
            continue
        samples = sensor.extra.get("samples")
        ranges = stream.columns.get("ranges")
        if ranges is None or ranges.dim != samples:
            given = ranges.dim if ranges else "no"
            message = f"scan stream {name}: ranges of {given} values, the sensor says {samples} samples"
            found.append(finding("lidar.scan_columns", layout.MANIFEST, message, field=f"native_streams.{name}"))
        intensities = stream.columns.get("intensities")
        if (intensities is not None) != bool(sensor.extra.get("intensities")) or (
            intensities is not None and intensities.dim != samples
        ):
            declared = sensor.extra.get("intensities")
            message = f"scan stream {name}: intensities do not match the sensor's (intensities {declared})"
            found.append(finding("lidar.scan_columns", layout.MANIFEST, message, field=f"native_streams.{name}"))
    for name, declaration in point_clouds.declarations(manifest).items():
        problem = _declaration_problem(manifest, name, declaration)
        if problem is not None:
            message = f"point cloud {name}: {problem}"
            found.append(finding("lidar.cloud_declaration", layout.MANIFEST, message, field=f"point_clouds.{name}"))
    return found


def _declaration_problem(manifest: Manifest, name: str, declaration: dict[str, Any]) -> str | None:
    sensor = manifest.sensor(str(declaration.get("sensor", "")))
    if sensor is None or sensor.type != "lidar":
        return f"sensor {declaration.get('sensor')!r} is not a lidar sensor of the manifest"
    try:
        point_step = int(declaration["point_step"])
        for field in declaration["fields"]:
            end = int(field["offset"]) + _SIZES[str(field["datatype"])] * int(field["count"])
            if end > point_step or int(field["count"]) < 1:
                return f"field {field['name']!r} does not fit in point_step {point_step}"
        point_clouds.cloud_schema(declaration)
    except (KeyError, TypeError, ValueError) as exc:
        return f"fields and point_step are not a usable layout ({type(exc).__name__}: {exc})"
    return None


def check_cloud_files(root: Path, manifest: Manifest, episodes: list[Episode]) -> list[Finding]:
    found: list[Finding] = []
    for name, declaration in point_clouds.declarations(manifest).items():
        if _declaration_problem(manifest, name, declaration) is not None:
            continue  # (reported with the manifest)
        schema = point_clouds.cloud_schema(declaration)
        for episode in episodes:
            relative = point_clouds.cloud_path(name, episode.record.chunk_id, episode.index)
            found += _check_file(root / relative, relative, schema, name, episode)
    return found


def _check_file(path: Path, relative: str, schema: pa.Schema, name: str, episode: Episode) -> list[Finding]:
    if not path.exists():
        return check_native_stream(episode, name, 0, None)
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        return [finding("lidar.cloud_file", relative, f"not readable Parquet: {exc}", episode=episode.id)]
    if not parquet.schema_arrow.equals(schema):
        message = f"schema {parquet.schema_arrow} is not the declared {schema}"
        return [finding("lidar.cloud_file", relative, " ".join(message.split()), episode=episode.id)]
    found: list[Finding] = []
    expected_index, last_time = 0, -np.inf
    fields = [n for n in schema.names if n.startswith(point_clouds.FIELD_PREFIX)]
    for group in range(parquet.num_row_groups):  # (a cloud a row group: memory is one cloud)
        table = parquet.read_row_group(group)
        index = table.column("cloud_index").to_numpy()
        times = table.column("timestamp").to_numpy()
        points = (table.column("height").to_numpy() * table.column("width").to_numpy()).astype(np.int64)
        problem = None
        if not np.array_equal(index, np.arange(expected_index, expected_index + len(index))):
            problem = f"cloud_index is not 0..n-1 in order (row group {group})"
        elif not np.isfinite(times).all() or (np.diff(times, prepend=last_time) < 0).any():
            problem = f"timestamps are not finite and non-decreasing (row group {group})"
        elif any(
            table.column(n).combine_chunks().value_lengths().to_numpy().tolist() != points.tolist() for n in fields
        ):
            problem = f"a field's list does not hold height x width values (row group {group})"
        elif (table.column("episode_id").to_numpy(zero_copy_only=False) != episode.id).any():
            problem = f"rows of another episode (row group {group})"
        if problem is not None:
            found.append(finding("lidar.cloud_file", relative, problem, episode=episode.id))
            break
        expected_index += len(index)
        last_time = float(times[-1]) if len(times) else last_time
    return found + check_native_stream(episode, name, parquet.metadata.num_rows, None)
