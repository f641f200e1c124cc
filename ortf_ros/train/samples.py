"""What one process reads to make samples: the datasets opened, the episodes lately used
kept open (their step columns and native streams as arrays, their video decoders), and a
sample as numpy arrays.

A ``SampleReader`` belongs to one process. Data loader workers each make their own (the
torch face makes one per process id), so no decoder, file or object-store connection is
shared across a fork, and a worker's decoders stay open from one sample to the next: a
frame near the last one read continues decoding instead of seeking (``io/video.py``).

Memory is bounded by configuration: ``open_episodes`` episodes open, each with its decoders
and a few row groups of its step table and native streams (``row_groups``), whatever the
number or length of the episodes in the datasets.
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ortf_ros.dataset.reader import Dataset, Episode, load_dataset
from ortf_ros.errors import ReaderError, UsageError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.train.index import DatasetSource, EpisodeSamples
from ortf_ros.train.row_groups import GroupedRows
from ortf_ros.train.windows import (
    NativeWindow,
    StepWindow,
    camera_key,
    native_windows,
    pad_key,
    step_windows,
    times_key,
)

OPEN_EPISODES = 8
"""Episodes a reader keeps open by default: with the episode-aware sampler a worker draws
from a few episodes at a time, so its decoders are reused; the bound on a worker's memory."""


@dataclass(frozen=True)
class SamplePlan:
    """What a sample of one dataset holds: plain step columns and cameras at the step,
    windows of either, and native windows; ``fps`` is the dataset's step rate."""

    columns: tuple[str, ...]
    cameras: tuple[str, ...]
    windows: tuple[StepWindow, ...]
    natives: tuple[NativeWindow, ...]
    fps: float

    def step_columns(self) -> list[str]:
        """The step columns an episode's reading needs."""
        needed = list(self.columns)
        needed += [layout.image_column(c) for c in self.cameras]
        for window in self.windows:
            needed.append(layout.image_column(window.camera) if window.camera else window.key)
        if self.natives:
            needed.append("timestamp")  # where a native window is centred
        return list(dict.fromkeys(needed))


def step_rate(manifest: Manifest, where: str) -> float:
    """The rate of a dataset's steps: the action space's control rate, else its cameras'."""
    for rate in (manifest.action_space.control_frequency_hz, *(s.fps for s in manifest.cameras.values())):
        if rate and rate > 0:
            return float(rate)
    raise UsageError(
        f"{where}: its manifest gives no control_frequency_hz and no camera fps; windows need the step rate"
    )


def step_column_names(dataset: Dataset) -> list[str]:
    """The columns of a dataset's step table (its first chunk's schema)."""
    if not dataset.episodes:
        return []
    episode = dataset.episode(0)
    names: list[str] = episode.rows_table(episode.steps_file).metadata.schema.to_arrow_schema().names
    return names


def plan_samples(
    datasets: Sequence[Dataset],
    where: Sequence[str],
    delta_timestamps: Mapping[str, Sequence[float]],
    native_spans: Mapping[str, Sequence[float]],
    keys: Sequence[str] | None,
) -> list[SamplePlan]:
    """Each dataset's plan. Every dataset gives a sample the same keys, so batches stack: by
    default the step columns and cameras all of them have (``keys`` picks some)."""
    schemas = [step_column_names(d) for d in datasets]
    common_columns = [c for c in schemas[0] if c != "episode_id" and all(c in s for s in schemas[1:])]
    common_cameras = [c for c in datasets[0].manifest.cameras if all(c in d.manifest.cameras for d in datasets[1:])]
    windowed = set(delta_timestamps)
    if keys is None:
        columns = [c for c in common_columns if c not in windowed and not _is_image_column(c)]
        cameras = [c for c in common_cameras if camera_key(c) not in windowed]
    else:
        available = {*common_columns, *(camera_key(c) for c in common_cameras)}
        unknown = [k for k in keys if k not in available]
        if unknown:
            raise UsageError(
                f"keys: {unknown} not in every dataset ({', '.join(where)}); they share {sorted(available)}"
            )
        columns = [k for k in keys if k in common_columns and k not in windowed]
        cameras = [c for c in common_cameras if camera_key(c) in keys and camera_key(c) not in windowed]
    plans = []
    for dataset, name, schema in zip(datasets, where, schemas, strict=True):
        fps = step_rate(dataset.manifest, name)
        plans.append(
            SamplePlan(
                tuple(columns),
                tuple(cameras),
                step_windows(delta_timestamps, dataset.manifest, schema, fps, name),
                native_windows(native_spans, dataset.manifest, name),
                fps,
            )
        )
    return plans


def _is_image_column(column: str) -> bool:
    return column.startswith("observation.images.") and column.endswith(".frame_index")


class _OpenEpisode:
    """An episode in use: its step table and native streams read a row group at a time
    (``row_groups``), and its decoders (``Episode.frame``)."""

    def __init__(self, episode: Episode, plan: SamplePlan) -> None:
        self.episode = episode
        self.steps = GroupedRows(episode, episode.steps_file, "step_index", plan.step_columns())
        self.natives: dict[str, tuple[GroupedRows, list[str]]] = {}
        for window in plan.natives:
            columns = list(episode.dataset.manifest.native_streams[window.stream].columns)
            rows = GroupedRows(episode, episode.stream_file(window.stream), "sample_index", ["timestamp", *columns])
            self.natives[window.stream] = (rows, columns)

    def close(self) -> None:
        self.episode.close()


class SampleReader:
    """Samples of ``sources`` as numpy arrays, for one process (see the module's docstring)."""

    def __init__(
        self,
        sources: Sequence[DatasetSource],
        plans: Sequence[SamplePlan],
        cache_dir: str | os.PathLike[str] | None = None,
        open_episodes: int = OPEN_EPISODES,
    ) -> None:
        if open_episodes < 1:
            raise UsageError(f"open_episodes must be at least 1, got {open_episodes}")
        self.sources = [os.fspath(s) for s in sources]
        self.plans = list(plans)
        self._cache_dir = cache_dir
        self._datasets: dict[int, Dataset] = {}
        self._open: OrderedDict[tuple[int, int], _OpenEpisode] = OrderedDict()
        self._capacity = open_episodes
        self._overflow_said: set[tuple[int, str]] = set()

    def dataset(self, source: int) -> Dataset:
        dataset = self._datasets.get(source)
        if dataset is None:
            dataset = self._datasets[source] = load_dataset(self.sources[source], cache_dir=self._cache_dir)
        return dataset

    def close(self) -> None:
        for opened in self._open.values():
            opened.close()
        self._open.clear()

    def _episode(self, samples: EpisodeSamples) -> _OpenEpisode:
        key = (samples.source, samples.position)
        opened = self._open.pop(key, None)
        if opened is None:
            dataset = self.dataset(samples.source)
            opened = _OpenEpisode(dataset.episode(samples.position), self.plans[samples.source])
        self._open[key] = opened
        while len(self._open) > self._capacity:
            self._open.popitem(last=False)[1].close()
        return opened

    def sample(self, samples: EpisodeSamples, step: int) -> dict[str, Any]:
        """Step ``step`` of an episode with its windows: numpy arrays, and the task's text."""
        plan = self.plans[samples.source]
        opened = self._episode(samples)
        episode = opened.episode
        here = np.array([step])
        item: dict[str, Any] = {c: opened.steps.at(c, here)[0] for c in plan.columns}
        for camera in plan.cameras:
            indices = opened.steps.at(layout.image_column(camera), here)
            item[camera_key(camera)] = self._frames(samples.source, opened, camera, indices)[0]
        for window in plan.windows:
            positions, pads = window.positions(step, samples.length)
            if window.camera is not None:
                indices = opened.steps.at(layout.image_column(window.camera), positions)
                item[window.key] = self._frames(samples.source, opened, window.camera, indices)
            else:
                item[window.key] = opened.steps.at(window.key, positions)
            item[pad_key(window.key)] = pads
        if plan.natives:
            at = float(opened.steps.at("timestamp", here)[0])
            for native in plan.natives:
                self._native(item, opened, native, at, samples.source)
        item["task"] = episode.task.instruction
        item["dataset_index"] = samples.source
        item["episode_index"] = samples.position
        return item

    def _frames(self, source: int, opened: _OpenEpisode, camera: str, indices: np.ndarray) -> np.ndarray:
        """The frames at ``indices``, channels first: (T, 3, H, W) uint8 or (T, 1, H, W) uint16.
        Each distinct frame is decoded once, in increasing order (a decoder goes forward; the
        edge frame a pad repeats is not sought again)."""
        episode = opened.episode
        out: np.ndarray | None = None
        for index in sorted(set(indices.tolist())):
            if index < 0:
                raise ReaderError(
                    f"{self.sources[source]}: episode {episode.episode_id}, camera {camera}: "
                    "a step without a frame (null frame_index)"
                )
            try:
                frame = episode.frame(camera, int(index), channels_first=True)
            except ReaderError as exc:
                raise ReaderError(
                    f"{self.sources[source]}: episode {episode.episode_id}, camera {camera}: {exc}"
                ) from None
            if out is None:
                out = np.empty((len(indices), *frame.shape), dtype=frame.dtype)
            out[indices == index] = frame
        assert out is not None
        return out

    def _native(self, item: dict[str, Any], opened: _OpenEpisode, window: NativeWindow, at: float, source: int) -> None:
        rows, columns = opened.natives[window.stream]
        found = rows.between(at + window.start, at + window.end, columns)
        times = found["timestamp"]
        values = np.concatenate([found[c].reshape(len(times), -1) for c in columns], axis=1)
        if len(times) > window.capacity:
            if (source, window.stream) not in self._overflow_said:
                self._overflow_said.add((source, window.stream))
                warnings.warn(
                    f"native_windows[{window.stream!r}]: more than {window.capacity} samples in a window of "
                    f"{self.sources[source]} (episode {opened.episode.episode_id}); the nearest to the window's end "
                    "are kept: pass a capacity, (start_s, end_s, rows)",
                    stacklevel=3,
                )
            times, values = times[-window.capacity :], values[-window.capacity :]
        count = len(times)
        out = np.zeros((window.capacity, values.shape[1]), dtype=np.float32)
        out[:count] = values
        out_times = np.zeros(window.capacity, dtype=np.float64)
        out_times[:count] = times
        pads = np.ones(window.capacity, dtype=bool)
        pads[:count] = False
        item[window.stream] = out
        item[times_key(window.stream)] = out_times
        item[pad_key(window.stream)] = pads
