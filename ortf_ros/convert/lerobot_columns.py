"""ORTF steps as LeRobot frame rows, and the feature declarations that describe them.

Shared by the LeRobot v3 export and the GR00T (LeRobot v2.0) flavour: both store the
state components concatenated in manifest order as ``observation.state`` and the
action as ``action``, ``timestamp = frame_index / fps`` (LeRobot's loader checks it
within 1e-4 s), and ORTF's real step time in ``ortf.timestamp`` so that nothing is lost.
Rows are produced one Parquet row group at a time, so memory does not grow with
the episode.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ortf_ros.dataset.reader import Dataset, Episode, column_array
from ortf_ros.dataset.stats import FeatureStats
from ortf_ros.errors import ExportError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest

STATE = "observation.state"
ACTION = "action"
CAPTURE_TIME = "ortf.timestamp"
DONE = "next.done"
# LeRobot's per-feature statistics (compute_stats.py): moments, extremes and quantiles.
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
INDEX_COLUMNS = ("frame_index", "episode_index", "index", "task_index")


def camera_key(camera: str) -> str:
    return f"observation.images.{camera}"


def depth_frame_column(camera: str) -> str:
    """Step -> frame of the depth file kept beside the export (depth is no LeRobot feature)."""
    return f"ortf.depth.{camera}.frame_index"


@dataclass(frozen=True)
class StateLayout:
    """Where each ORTF state component sits in the concatenated ``observation.state``."""

    slices: Mapping[str, tuple[int, int]]
    names: tuple[str, ...]

    @property
    def dim(self) -> int:
        return len(self.names)

    @classmethod
    def of(cls, manifest: Manifest) -> StateLayout:
        slices: dict[str, tuple[int, int]] = {}
        names: list[str] = []
        for component, spec in manifest.observation_space.state.items():
            parts = spec.names if spec.names and len(spec.names) == spec.dim else tuple(map(str, range(spec.dim)))
            slices[component] = (len(names), len(names) + spec.dim)
            names.extend(f"{component}.{part}" for part in parts)
        return cls(slices, tuple(names))


def dataset_fps(dataset: Dataset) -> int:
    """LeRobot's integer frame rate: the control rate, else the cameras' rate."""
    manifest = dataset.manifest
    rates = [manifest.action_space.control_frequency_hz, *(s.fps for s in manifest.cameras.values())]
    for rate in rates:
        if rate:
            fps = round(rate)
            if fps >= 1 and math.isclose(fps, rate, abs_tol=1e-6):
                return fps
            raise ExportError(f"{layout.MANIFEST}: rate {rate} Hz is not an integer; LeRobot needs integer fps")
    raise ExportError(f"{layout.MANIFEST}: no control_frequency_hz and no camera fps; LeRobot needs fps")


def vector_feature(names: tuple[str, ...]) -> dict[str, Any]:
    return {"dtype": "float32", "shape": [len(names)], "names": list(names)}


def scalar_feature(dtype: str) -> dict[str, Any]:
    return {"dtype": dtype, "shape": [1], "names": None}


def frame_features(manifest: Manifest, state: StateLayout, extra_int64: tuple[str, ...]) -> dict[str, Any]:
    """The non-video features, in column order."""
    features: dict[str, Any] = {
        STATE: vector_feature(state.names),
        ACTION: vector_feature(tuple(d.name for d in manifest.action_space.dimensions)),
        "timestamp": scalar_feature("float32"),
    }
    features.update({name: scalar_feature("int64") for name in INDEX_COLUMNS})
    features[CAPTURE_TIME] = scalar_feature("float64")
    features[DONE] = scalar_feature("bool")
    features.update({name: scalar_feature("int64") for name in extra_int64})
    return features


def arrow_schema(features: Mapping[str, Any]) -> pa.Schema:
    """The Parquet schema of the frame rows, with the ``huggingface`` metadata that
    ``datasets`` reads back as the same features (LeRobot loads rows through it)."""
    fields, hf = [], {}
    for name, feature in features.items():
        if feature["dtype"] in ("video", "image"):
            continue
        value = pa.from_numpy_dtype(np.dtype(feature["dtype"]))
        if feature["shape"] == [1]:
            fields.append(pa.field(name, value))
            hf[name] = {"dtype": feature["dtype"], "_type": "Value"}
        else:
            fields.append(pa.field(name, pa.list_(value, feature["shape"][0])))
            hf[name] = {
                "feature": {"dtype": feature["dtype"], "_type": "Value"},
                "length": feature["shape"][0],
                "_type": "Sequence",
            }
    metadata = {"huggingface": json.dumps({"info": {"features": hf}})}
    return pa.schema(fields, metadata=metadata)


@dataclass(frozen=True)
class EpisodePlacement:
    """Where an episode lands in the export: its index, first global row and task."""

    episode_index: int
    first_index: int
    task_index: int
    annotations: Mapping[str, int]  # GR00T annotation columns: constant per episode


def frame_batches(
    episode: Episode,
    placement: EpisodePlacement,
    fps: int,
    state: StateLayout,
    schema: pa.Schema,
    depth_cameras: tuple[str, ...],
) -> Iterator[pa.RecordBatch]:
    """The episode's rows in LeRobot's layout, a row group at a time."""
    manifest = episode.dataset.manifest
    components = list(manifest.observation_space.state)
    columns = ["timestamp", "is_terminal", ACTION, *map(layout.state_column, components)]
    columns += [layout.image_column(c) for c in depth_cameras]
    done = 0
    for batch in episode.step_batches(columns):
        rows = batch.num_rows
        frame_index = np.arange(done, done + rows, dtype=np.int64)
        parts = [column_array(batch.column(layout.state_column(c))) for c in components]
        state_values = np.concatenate(parts, axis=1) if parts else np.zeros((rows, 0), np.float32)
        values: dict[str, pa.Array | np.ndarray] = {
            STATE: _vectors(state_values.astype(np.float32), state.dim),
            ACTION: batch.column(ACTION),
            "timestamp": (frame_index / fps).astype(np.float32),
            "frame_index": frame_index,
            "episode_index": np.full(rows, placement.episode_index, np.int64),
            "index": frame_index + placement.first_index,
            "task_index": np.full(rows, placement.task_index, np.int64),
            CAPTURE_TIME: batch.column("timestamp"),
            DONE: batch.column("is_terminal"),
        }
        for camera in depth_cameras:
            values[depth_frame_column(camera)] = batch.column(layout.image_column(camera))
        for name, value in placement.annotations.items():
            values[name] = np.full(rows, value, np.int64)
        yield pa.record_batch([_column(values[f.name], f.type) for f in schema], schema=schema)
        done += rows


def _column(values: pa.Array | np.ndarray, type: pa.DataType) -> pa.Array:
    return values.cast(type) if isinstance(values, pa.Array) else pa.array(values, type)


def _vectors(values: np.ndarray, dim: int) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), dim)


class FrameStats:
    """Per-feature statistics of a set of rows, in LeRobot's stats.json shape."""

    def __init__(self, features: Mapping[str, Any]) -> None:
        self.features = {
            name: FeatureStats(int(np.prod(f["shape"])))
            for name, f in features.items()
            if f["dtype"] not in ("video", "image", "bool", "string")
        }

    def update(self, batch: pa.RecordBatch) -> None:
        for name, stats in self.features.items():
            stats.update(column_array(batch.column(name)).reshape(batch.num_rows, stats.dim))

    def merge(self, other: FrameStats) -> None:
        for name, stats in self.features.items():
            stats.merge(other.features[name])

    def summary(self) -> dict[str, dict[str, list[float]]]:
        return {name: lerobot_stats(stats) for name, stats in self.features.items() if stats.count}


def lerobot_stats(stats: FeatureStats) -> dict[str, list[float]]:
    summary = stats.summary()
    out: dict[str, list[float]] = {key: summary[key] for key in ("min", "max", "mean", "std", "count")}
    out.update({key: stats.quantile(q) for key, q in QUANTILES.items()})
    return out
