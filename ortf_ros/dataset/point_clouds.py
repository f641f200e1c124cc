"""An episode's point clouds, from the writer to their committed file (``format.point_clouds``).

While the episode records, each cloud is appended to the staged episode as one record of
an Arrow IPC log (``logs.StepLog``: in the OS when the call returns, whole or absent), so
a killed process loses only the cloud in flight and memory holds one cloud. The commit
reads the log a record at a time and writes the Parquet file a row group per cloud, so it
too holds one cloud at a time, however long the episode.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.dataset.logs import StepLog, read_messages
from ortf_ros.errors import WriterError
from ortf_ros.format import point_clouds
from ortf_ros.io import atomic

PARQUET_COMPRESSION = "zstd"


def _points(values: np.ndarray, field: dict[str, Any], count: int, what: str) -> pa.Array:
    """One field's values of a cloud's ``count`` points as its list column's single row."""
    column_type = point_clouds.field_type(field)
    element = column_type.value_type
    elements = int(field["count"])
    base = element.value_type if pa.types.is_fixed_size_list(element) else element
    array = np.asarray(values)
    expected = (count,) if elements == 1 else (count, elements)
    if array.shape != expected:
        raise WriterError(f"{what}: field {field['name']!r} has shape {array.shape}, expected {expected}")
    flat = pa.array(array.reshape(-1), type=base)
    inner = flat if elements == 1 else pa.FixedSizeListArray.from_arrays(flat, elements)
    return pa.ListArray.from_arrays(pa.array([0, count], pa.int32()), inner)


class CloudLog:
    """One point cloud stream's clouds in the staged episode."""

    def __init__(self, path: Path, name: str, declaration: dict[str, Any], episode_id: str) -> None:
        self.path = path
        self.name = name
        self.declaration = declaration
        self.schema = point_clouds.cloud_schema(declaration)
        self.episode_id = episode_id
        self.count = 0
        self.last_timestamp = -float("inf")
        self._log: StepLog | None = None

    def add(
        self,
        timestamp: float,
        values: Mapping[str, np.ndarray],
        *,
        height: int,
        width: int,
        is_dense: bool,
        frame_id: str | None,
        stamp_ns: int | None,
        receive_ns: int | None,
    ) -> int:
        """Append one cloud, checked against the declaration; returns its index."""
        what = f"point cloud {self.name!r} {self.count}"
        if not np.isfinite(timestamp) or timestamp < self.last_timestamp:
            raise WriterError(f"{what}: timestamp {timestamp} must be finite and not before {self.last_timestamp}")
        names = [str(f["name"]) for f in self.declaration["fields"]]
        if sorted(values) != sorted(names):
            raise WriterError(f"{what}: fields {sorted(values)}, the manifest declares {sorted(names)}")
        count = height * width
        columns: dict[str, pa.Array] = {
            "episode_id": pa.array([self.episode_id], pa.string()),
            "cloud_index": pa.array([self.count], pa.int64()),
            "timestamp": pa.array([timestamp], pa.float64()),
            "stamp_ns": pa.array([stamp_ns], pa.int64()),
            "receive_ns": pa.array([receive_ns], pa.int64()),
            "frame_id": pa.array([frame_id], pa.string()),
            "height": pa.array([height], pa.int64()),
            "width": pa.array([width], pa.int64()),
            "is_dense": pa.array([is_dense], pa.bool_()),
        }
        for field in self.declaration["fields"]:
            name = str(field["name"])
            columns[point_clouds.field_column(name)] = _points(values[name], field, count, what)
        batch = pa.RecordBatch.from_arrays([columns[n] for n in self.schema.names], schema=self.schema)
        if self._log is None:
            self._log = StepLog(self.path, self.schema)
        self._log.append(batch)
        self.count += 1
        self.last_timestamp = timestamp
        return self.count - 1

    def append_file(self, path: Path) -> None:
        """Another dataset's committed clouds of this stream (``importing.import_episode``),
        a row group (a cloud) at a time, relabelled with this episode's id."""
        if not path.exists():
            return
        parquet = pq.ParquetFile(path)
        index = self.schema.get_field_index("episode_id")
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group).cast(self.schema)
            ids = pa.array([self.episode_id] * table.num_rows, pa.string())
            table = table.set_column(index, self.schema.field(index), ids)
            for batch in table.to_batches():
                if self._log is None:
                    self._log = StepLog(self.path, self.schema)
                self._log.append(batch)
                self.count += batch.num_rows

    def close(self) -> None:
        if self._log is not None:
            self._log.close()


def staged_clouds(path: Path) -> Iterator[pa.RecordBatch]:
    """The staged clouds, one record (a cloud) at a time; a torn last one (a crash) ends them."""
    return read_messages(path)


def write_cloud_file(staged: Path, target: Path, declaration: dict[str, Any]) -> int:
    """The staged clouds as the episode's Parquet file (a row group per cloud), written
    atomically; how many clouds. No file when the episode has none."""
    schema = point_clouds.cloud_schema(declaration)
    count = 0

    def produce(tmp: Path) -> None:
        nonlocal count
        with pq.ParquetWriter(
            tmp, schema, compression=PARQUET_COMPRESSION, use_dictionary=["episode_id", "frame_id"]
        ) as writer:
            for batch in staged_clouds(staged):
                writer.write_batch(batch.cast(schema) if batch.schema != schema else batch)
                count += batch.num_rows

    if not staged.exists():
        target.unlink(missing_ok=True)
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_with(target, produce)
    return count
