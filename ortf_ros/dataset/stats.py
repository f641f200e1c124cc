"""Normalisation statistics kept current as episodes are committed.

Moments are merged with Chan's parallel update and quantiles come from KLL sketches
(Apache DataSketches): both have a fixed memory cost and merge exactly, so stats.json
is updated from each new episode alone, never by re-reading the dataset. The running
state is saved beside stats.json so that an appending writer resumes it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from datasketches import kll_floats_sketch

SKETCH_K = 200
QUANTILES = {"q01": 0.01, "q99": 0.99}


@dataclass
class FeatureStats:
    """Running statistics of one fixed-size vector feature."""

    dim: int
    # Values above it are counted exactly (alignment errors beyond the sync tolerance).
    threshold: float | None = None
    count: int = 0
    above: int = 0
    mean: np.ndarray = field(init=False)
    m2: np.ndarray = field(init=False)
    minimum: np.ndarray = field(init=False)
    maximum: np.ndarray = field(init=False)
    sketches: list[kll_floats_sketch] = field(init=False)

    def __post_init__(self) -> None:
        self.mean = np.zeros(self.dim)
        self.m2 = np.zeros(self.dim)
        self.minimum = np.full(self.dim, np.inf)
        self.maximum = np.full(self.dim, -np.inf)
        self.sketches = [kll_floats_sketch(SKETCH_K) for _ in range(self.dim)]

    def update(self, values: np.ndarray) -> None:
        """Fold in a (rows, dim) block of values."""
        if len(values) == 0:
            return
        values = np.asarray(values, dtype=np.float64).reshape(len(values), self.dim)
        n = len(values)
        block_mean = values.mean(axis=0)
        block_m2 = ((values - block_mean) ** 2).sum(axis=0)
        self._merge_moments(n, block_mean, block_m2)
        self.minimum = np.minimum(self.minimum, values.min(axis=0))
        self.maximum = np.maximum(self.maximum, values.max(axis=0))
        if self.threshold is not None:
            self.above += int((values > self.threshold).sum())
        as_float32 = values.astype(np.float32)
        for d, sketch in enumerate(self.sketches):
            sketch.update(np.ascontiguousarray(as_float32[:, d]))

    def merge(self, other: FeatureStats) -> None:
        if other.count == 0:
            return
        self._merge_moments(other.count, other.mean, other.m2)
        self.above += other.above
        self.minimum = np.minimum(self.minimum, other.minimum)
        self.maximum = np.maximum(self.maximum, other.maximum)
        for mine, theirs in zip(self.sketches, other.sketches, strict=True):
            mine.merge(theirs)

    def _merge_moments(self, n: int, mean: np.ndarray, m2: np.ndarray) -> None:
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self.m2 = self.m2 + m2 + delta**2 * (self.count * n / total)
        self.count = total

    def summary(self) -> dict[str, list[float]]:
        """The stats.json entry: mean, std, min, max, q01, q99 and count."""
        std = np.sqrt(self.m2 / self.count) if self.count else np.zeros(self.dim)
        out: dict[str, list[float]] = {
            "mean": self.mean.tolist(),
            "std": std.tolist(),
            "min": self.minimum.tolist(),
            "max": self.maximum.tolist(),
        }
        for key, q in QUANTILES.items():
            out[key] = self.quantile(q)
        out["count"] = [self.count]
        if self.threshold is not None:
            out["above_threshold"] = [self.above]
        return out

    def quantile(self, q: float) -> list[float]:
        return [float(s.get_quantile(q)) if self.count else 0.0 for s in self.sketches]

    def to_state(self) -> dict[str, Any]:
        return {
            "dim": self.dim,
            "threshold": self.threshold,
            "count": self.count,
            "above": self.above,
            "mean": self.mean.tolist(),
            "m2": self.m2.tolist(),
            "min": self.minimum.tolist(),
            "max": self.maximum.tolist(),
            "sketches": [base64.b64encode(s.serialize()).decode("ascii") for s in self.sketches],
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> FeatureStats:
        stats = cls(int(state["dim"]), state.get("threshold"))
        stats.count = int(state["count"])
        stats.above = int(state.get("above", 0))
        stats.mean = np.asarray(state["mean"], dtype=np.float64)
        stats.m2 = np.asarray(state["m2"], dtype=np.float64)
        stats.minimum = np.asarray(state["min"], dtype=np.float64)
        stats.maximum = np.asarray(state["max"], dtype=np.float64)
        stats.sketches = [kll_floats_sketch.deserialize(base64.b64decode(s)) for s in state["sketches"]]
        return stats


class DatasetStats:
    """Statistics of every vector column of the step table."""

    def __init__(self, columns: Mapping[str, int], thresholds: Mapping[str, float] | None = None) -> None:
        thresholds = thresholds or {}
        self.features = {name: FeatureStats(dim, thresholds.get(name)) for name, dim in columns.items()}

    def update(self, table: pa.Table) -> None:
        """Fold in the feature columns of a block of step rows (nulls, steps without a sample, skipped)."""
        for name, feature in self.features.items():
            column = table[name].combine_chunks().drop_null()
            if pa.types.is_fixed_size_list(column.type):
                column = column.flatten()
            feature.update(column.to_numpy().reshape(-1, feature.dim))

    def merge(self, other: DatasetStats) -> None:
        for name, feature in other.features.items():
            self.features[name].merge(feature)

    def summary(self) -> dict[str, dict[str, list[float]]]:
        return {name: f.summary() for name, f in self.features.items() if f.count}

    def to_state(self) -> dict[str, Any]:
        return {name: f.to_state() for name, f in self.features.items()}

    @classmethod
    def from_state(
        cls, columns: Mapping[str, int], thresholds: Mapping[str, float], state: Mapping[str, Any]
    ) -> DatasetStats:
        """Resume saved state; columns missing from it start empty."""
        stats = cls(columns, thresholds)
        for name, dim in columns.items():
            if name in state and int(state[name]["dim"]) == dim:
                stats.features[name] = FeatureStats.from_state(state[name])
        return stats
