"""``OrtfDataset``: a PyTorch map-style dataset over one or several ORTF datasets.

The face a trainer sees (``from ortf.torch import OrtfDataset``): samples as tensors, windows
as LeRobot users write them (``delta_timestamps``, ``<key>_is_pad``), native-rate windows,
filters, normalization statistics, and an episode-aware batch sampler. Everything it reads
goes through the torch-free core (``index``, ``windows``, ``samples``, ``batches``), which the
core package tests without torch; this module only turns arrays into tensors and keeps one
``SampleReader`` per process.

Workers: the dataset pickles to its sources and plan (spawn), and a process that finds a
reader made by another process id (fork) makes its own, so no decoder or connection crosses
a fork, and each worker's decoders stay open across its samples.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from ortf_ros.dataset.reader import Dataset as OrtfReader
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.errors import UsageError
from ortf_ros.train.batches import ACTIVE_EPISODES, BatchOrder
from ortf_ros.train.index import DatasetSource, EpisodeFilter, SampleIndex, build_index
from ortf_ros.train.samples import OPEN_EPISODES, SampleReader, plan_samples

Sample = dict[str, Any]

_INHERITED: list[SampleReader] = []
"""Readers a forked worker inherited from its parent (``OrtfDataset._sample_reader``)."""

STAT_NAMES = ("mean", "std", "min", "max", "q01", "q99")


class OrtfDataset(Dataset[Sample]):
    """Samples of ORTF datasets, one per kept step, as tensors.

    ``sources``: a dataset directory, an ``s3://bucket/prefix`` URL, or a list of them (their
    samples one after the other; a sample holds the keys all of them have).

    A sample holds, at its step: every step column (``action``, ``observation.state.*``,
    ``timestamp``, ...) as a tensor of its stored type; each camera as
    ``observation.images.<camera>``, uint8 (3, H, W), or uint16 (1, H, W) millimetres for
    depth, never rescaled; ``task`` (the instruction), ``dataset_index`` and ``episode_index``.
    ``keys`` limits the columns and cameras to those named.

    ``delta_timestamps``: ``{key: [seconds, ...]}`` makes ``key`` a window (T, ...) of the
    steps at those offsets, with ``<key>_is_pad`` (T,) True past the episode's ends, where the
    edge step is repeated (LeRobot's semantics). A camera's window holds the frames the step
    table names for those steps.

    ``native_windows``: ``{stream: (start_s, end_s)}`` (or ``(start_s, end_s, rows)``) gives
    every sample of a native-rate stream within [t + start_s, t + end_s] as ``stream``
    (rows, D) float32, its times ``stream.timestamp`` (seconds, the step clock) and
    ``stream_is_pad`` (rows,) for the rows past its samples.

    Filters (from ``meta/episodes.parquet``, plus the alignment columns for the last):
    ``episodes`` (ids or positions), ``skip_failed``, ``skip_flagged`` (by the review),
    ``max_alignment_ms`` (one bound, or ``{stream: ms}``).

    ``cache_dir``: where an object-storage dataset's reads are kept, so a second epoch reads
    from disk. ``open_episodes``: episodes a worker keeps open (its memory bound).
    """

    def __init__(
        self,
        sources: DatasetSource | Sequence[DatasetSource],
        *,
        delta_timestamps: Mapping[str, Sequence[float]] | None = None,
        native_windows: Mapping[str, Sequence[float]] | None = None,
        keys: Sequence[str] | None = None,
        episodes: Sequence[str | int] | None = None,
        skip_failed: bool = False,
        skip_flagged: bool = False,
        max_alignment_ms: float | Mapping[str, float] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        open_episodes: int = OPEN_EPISODES,
    ) -> None:
        listed = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
        if not listed:
            raise UsageError("OrtfDataset: no dataset given")
        self.sources = [os.fspath(s) for s in listed]
        self.cache_dir = None if cache_dir is None else os.fspath(cache_dir)
        readers = [load_dataset(source, cache_dir=self.cache_dir) for source in self.sources]
        self.delta_timestamps = {k: list(v) for k, v in (delta_timestamps or {}).items()}
        self.plans = plan_samples(readers, self.sources, self.delta_timestamps, dict(native_windows or {}), keys)
        keep = EpisodeFilter(episodes, skip_failed, skip_flagged, max_alignment_ms)
        self.index: SampleIndex = build_index(readers, self.sources, keep)
        self.fps = [plan.fps for plan in self.plans]
        self._stats = [reader.stats for reader in readers]
        self._open_episodes = open_episodes
        self._reader: SampleReader | None = None
        self._pid = -1

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, index: int) -> Sample:
        if index < 0:
            index += len(self)
        episode, step = self.index.locate(index)
        item = self._sample_reader().sample(episode, step)
        return {key: _tensor(value) for key, value in item.items()}

    def _sample_reader(self) -> SampleReader:
        if self._reader is None or self._pid != os.getpid():
            if self._reader is not None:
                # Made before a fork: the parent's decoders. Closing them here (or letting them
                # be collected) would join FFmpeg threads that do not exist in this process and
                # hang: they are kept, unused, for the life of the process.
                _INHERITED.append(self._reader)
            self._reader = SampleReader(self.sources, self.plans, self.cache_dir, self._open_episodes)
            self._pid = os.getpid()
        return self._reader

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_reader"], state["_pid"] = None, -1
        return state

    def close(self) -> None:
        """Close this process's decoders and files (a worker's end closes its own)."""
        if self._reader is not None and self._pid == os.getpid():
            self._reader.close()
        self._reader = None

    @property
    def num_episodes(self) -> int:
        return len(self.index.episodes)

    def dataset(self, source: int = 0) -> OrtfReader:
        """The ORTF dataset ``source`` (as ``ortf.load_dataset`` opens it)."""
        return self._sample_reader().dataset(source)

    @property
    def stats(self) -> dict[str, dict[str, torch.Tensor]]:
        """``meta/stats.json`` as float32 tensors, by key and statistic (mean, std, min, max,
        q01, q99). Several datasets: mean and std pooled by their counts, min and max over
        all, quantiles averaged by count (an approximation; exact ones need the data)."""
        merged: dict[str, dict[str, torch.Tensor]] = {}
        keys = [k for k in self._stats[0] if all(k in s for s in self._stats[1:])] if self._stats else []
        for key in keys:
            parts = [s[key] for s in self._stats if isinstance(s.get(key), dict)]
            if len(parts) != len(self._stats):
                continue
            merged[key] = _merged_stats(parts)
        return merged


def _merged_stats(parts: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
    def array(part: Mapping[str, Any], name: str) -> np.ndarray:
        return np.asarray(part[name], dtype=np.float64)

    names = [n for n in STAT_NAMES if all(n in p for p in parts)]
    if len(parts) == 1:
        return {n: torch.tensor(array(parts[0], n), dtype=torch.float32) for n in names}
    counts = np.array([float(np.sum(p.get("count", [1]))) for p in parts])
    weights = counts / counts.sum()
    out: dict[str, np.ndarray] = {}
    if "mean" in names:
        mean = sum(w * array(p, "mean") for w, p in zip(weights, parts, strict=True))
        out["mean"] = np.asarray(mean)
        if "std" in names:
            second = sum(
                w * (array(p, "std") ** 2 + (array(p, "mean") - mean) ** 2) for w, p in zip(weights, parts, strict=True)
            )
            out["std"] = np.sqrt(np.asarray(second))
    if "min" in names:
        out["min"] = np.min([array(p, "min") for p in parts], axis=0)
    if "max" in names:
        out["max"] = np.max([array(p, "max") for p in parts], axis=0)
    for name in ("q01", "q99"):
        if name in names:
            out[name] = np.asarray(sum(w * array(p, name) for w, p in zip(weights, parts, strict=True)))
    return {n: torch.tensor(v, dtype=torch.float32) for n, v in out.items()}


def _tensor(value: Any) -> Any:
    """A sample's value as a tensor (strings stay strings; numpy scalars become 0-d tensors)."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, np.generic):
        return torch.from_numpy(np.asarray(value))
    if isinstance(value, (bool, int, float)) and not isinstance(value, str):
        return torch.tensor(value)
    return value


class EpisodeBatchSampler(Sampler[list[int]]):
    """Batches that keep each ``DataLoader`` worker near its episodes (``train/batches.py``):
    pass it as ``batch_sampler`` with the loader's ``num_workers``. Every sample once per
    epoch; call ``set_epoch`` each epoch for a new order (as with ``DistributedSampler``)."""

    def __init__(
        self,
        dataset: OrtfDataset,
        batch_size: int,
        *,
        num_workers: int = 0,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        active_episodes: int = ACTIVE_EPISODES,
    ) -> None:
        try:
            self.order = BatchOrder(batch_size, num_workers, shuffle, seed, drop_last, active_episodes)
        except ValueError as exc:
            raise UsageError(f"EpisodeBatchSampler: {exc}") from None
        self.episodes = dataset.index.episode_samples()
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        return self.order.batches(self.episodes, self.epoch)

    def __len__(self) -> int:
        return self.order.count([len(e) for e in self.episodes], self.epoch)


__all__ = ["EpisodeBatchSampler", "OrtfDataset"]
