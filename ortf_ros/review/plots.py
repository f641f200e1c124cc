"""An episode's signals on one time axis, decimated on the server so that what a page
receives is bounded (``MAX_POINTS`` per series) whatever the episode's length.

Read a row group at a time (``Episode.step_batches`` / ``stream_batches``): the time
axis is cut into ``MAX_POINTS`` equal buckets over the episode's duration and the first
row of each bucket is kept, and for the step table also the row with the bucket's largest
alignment error (a spike must not fall between two kept rows); memory is one row group
plus the kept points (at most twice ``MAX_POINTS`` per series). The same
pass keeps, for each camera, the step times at which its frame index changes (decimated
alike): the page maps a video's ``currentTime`` to the episode's time with them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ortf_ros.dataset.reader import Episode, column_array
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.spaces import StateComponent

MAX_POINTS = 1500
"""Points per series sent to the page: a plot a few thousand pixels wide shows no more."""

JOINT_POSITIONS = "joint_positions"


@dataclass
class Panel:
    """One plot of the page: a title, a unit and named series over a shared time axis."""

    title: str
    unit: str
    columns: dict[str, list[str]]  # column -> names of its dimensions
    time: list[float] = field(default_factory=list)
    values: dict[str, list[list[float | None]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        series = []
        for column, names in self.columns.items():
            rows = self.values.get(column, [])
            for d, name in enumerate(names):
                series.append({"name": name, "values": [row[d] for row in rows]})
        return {"title": self.title, "unit": self.unit, "time": self.time, "series": series}


def _dimension_names(prefix: str, component: StateComponent) -> list[str]:
    names = component.names if component.names and len(component.names) == component.dim else None
    return list(names) if names else [f"{prefix}[{d}]" for d in range(component.dim)]


def _state_panel(manifest: Manifest) -> Panel | None:
    state = manifest.observation_space.state
    name = JOINT_POSITIONS if JOINT_POSITIONS in state else next(iter(state), None)
    if name is None:
        return None
    component = state[name]
    return Panel(
        name.replace("_", " "), component.units or "", {layout.state_column(name): _dimension_names(name, component)}
    )


def _action_panel(manifest: Manifest) -> Panel:
    space = manifest.action_space
    units = sorted({d.units for d in space.dimensions})
    return Panel(f"action ({space.type})", ", ".join(units), {"action": [d.name for d in space.dimensions]})


def _alignment_panel(manifest: Manifest) -> Panel | None:
    if manifest.alignment is None or not manifest.alignment.streams:
        return None
    columns = {layout.alignment_column(s): [s] for s in manifest.alignment.streams}
    return Panel("alignment error per stream", "ms", columns)


def force_torque_streams(manifest: Manifest) -> list[str]:
    """Native streams of a force-torque sensor (declared by the sensor, or by columns named
    force and torque when the stream names no sensor)."""
    found = []
    for name, stream in manifest.native_streams.items():
        sensor = manifest.sensor(stream.sensor) if stream.sensor else None
        if (sensor is not None and sensor.type == "force_torque") or {"force", "torque"} <= set(stream.columns):
            found.append(name)
    return found


def _stream_panel(manifest: Manifest, stream: str) -> Panel:
    columns = manifest.native_streams[stream].columns
    units = sorted({c.units for c in columns.values() if c.units})
    names = {
        column: [f"{column}.{axis}" for axis in "xyz"] if c.dim == 3 else _dimension_names(column, c)
        for column, c in columns.items()
    }
    return Panel(f"force-torque: {stream}", ", ".join(units), names)


def _vectors(batch: pa.RecordBatch, column: str, rows: np.ndarray) -> list[list[float | None]]:
    values = column_array(batch.column(column).take(pa.array(rows)))
    if values.ndim == 1:
        values = values.reshape(-1, 1)
    return [[None if not math.isfinite(v) else float(v) for v in row] for row in values.astype(np.float64)]


class _Buckets:
    """Which rows to keep: the first of each of ``points`` equal spans of the time axis, and,
    given a score per row, the row of each span that scores highest (so that one late step
    in an hour still shows on the alignment plot)."""

    def __init__(self, start: float, duration: float, points: int) -> None:
        self.start = start
        self.width = max(duration, 1e-9) / points
        self.points = points
        self.last = -1

    def keep(self, times: np.ndarray, score: np.ndarray | None = None) -> np.ndarray:
        # Clipped: a duration another writer got wrong (0, too short) or times past it put the
        # rows in the end buckets, never in more of them: the bound holds whatever the index says.
        buckets = np.clip(np.floor((times - self.start) / self.width), 0, self.points - 1).astype(np.int64)
        rows = np.flatnonzero(np.diff(buckets, prepend=self.last) > 0)
        if score is not None and len(buckets):
            spans = np.split(np.arange(len(buckets)), np.flatnonzero(np.diff(buckets) != 0) + 1)
            peaks = [int(span[np.argmax(score[span])]) for span in spans]
            rows = np.union1d(rows, np.array(peaks, dtype=np.int64))
        if len(buckets):
            self.last = max(self.last, int(buckets[-1]))
        return rows


def _fill(panel: Panel, batches: Iterator[pa.RecordBatch], buckets: _Buckets, peaks: Sequence[str] = ()) -> None:
    """Keep the panel's points of these batches; ``peaks``: columns whose largest value in
    each span is kept too."""
    for batch in batches:
        score = None
        if peaks:
            values = np.column_stack([column_array(batch.column(c)).astype(np.float64) for c in peaks])
            score = np.max(np.where(np.isfinite(values), values, -np.inf), axis=1)
        rows = buckets.keep(batch.column("timestamp").to_numpy(), score)
        if len(rows) == 0:
            continue
        panel.time.extend(float(t) for t in batch.column("timestamp").to_numpy()[rows])
        for column in panel.columns:
            panel.values.setdefault(column, []).extend(_vectors(batch, column, rows))


def _camera_times(episode: Episode, cameras: Sequence[str], start: float) -> dict[str, dict[str, list[float]]]:
    """Per camera, (frame index, step time) where the frame changes, decimated: the page
    interpolates between them."""
    columns = [layout.image_column(c) for c in cameras]
    if not columns:
        return {}
    kept: dict[str, dict[str, list[float]]] = {c: {"frame": [], "time": []} for c in cameras}
    duration = episode.record.duration_seconds
    buckets = {c: _Buckets(start, duration, MAX_POINTS) for c in cameras}
    previous: dict[str, int] = {}
    for batch in episode.step_batches(["timestamp", *columns]):
        times = batch.column("timestamp").to_numpy()
        for camera, column in zip(cameras, columns, strict=True):
            frames = batch.column(column).to_numpy()
            changed = np.flatnonzero(np.diff(frames, prepend=previous.get(camera, -1)) != 0)
            previous[camera] = int(frames[-1])
            chosen = changed[buckets[camera].keep(times[changed])] if len(changed) else changed
            kept[camera]["frame"].extend(float(f) for f in frames[chosen])
            kept[camera]["time"].extend(float(t) for t in times[chosen])
    return kept


def _first_time(episode: Episode) -> float:
    for batch in episode.step_batches(["timestamp"]):
        return float(batch.column("timestamp")[0].as_py())
    return 0.0


def episode_plots(episode: Episode) -> dict[str, Any]:
    """What the episode page plots: panels on the steps' clock and each camera's frame times."""
    manifest = episode.dataset.manifest
    start = _first_time(episode)
    duration = episode.record.duration_seconds
    step_panels = [p for p in (_state_panel(manifest), _action_panel(manifest), _alignment_panel(manifest)) if p]
    merged = Panel("", "", {c: n for p in step_panels for c, n in p.columns.items()})
    alignment = [c for p in step_panels[2:] for c in p.columns]
    batches = episode.step_batches(["timestamp", *merged.columns])
    _fill(merged, batches, _Buckets(start, duration, MAX_POINTS), peaks=alignment)
    for panel in step_panels:
        panel.time = merged.time
        panel.values = {c: merged.values.get(c, []) for c in panel.columns}
    panels = step_panels[:2]
    for stream in force_torque_streams(manifest):
        panel = _stream_panel(manifest, stream)
        columns = ["timestamp", *panel.columns]
        _fill(panel, episode.stream_batches(stream, columns), _Buckets(start, duration, MAX_POINTS))
        panels.append(panel)
    panels.extend(step_panels[2:])
    cameras = [c for c in manifest.cameras if episode.record.video_files.get(c)]
    return {
        "start": start,
        "duration": duration,
        "panels": [p.to_dict() for p in panels],
        "cameras": {
            c: {"fps": manifest.cameras[c].fps, **times} for c, times in _camera_times(episode, cameras, start).items()
        },
    }
