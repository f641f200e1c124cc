"""Which steps of which datasets are samples: the episodes kept by the filters a trainer
asks for, and within them the steps whose alignment is good enough.

Episode filters (a failed episode, one the review flagged, a list of episodes) are read
from ``meta/episodes.parquet`` alone, with no step table or video opened, so choosing a
training set from a large dataset costs its index. Only the alignment bound reads step
tables: one column per aligned stream.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ortf_ros.dataset.reader import Dataset, Episode
from ortf_ros.errors import UsageError
from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeRecord

DatasetSource = str | os.PathLike[str]
"""A dataset: a local directory, or an object-storage URL (``s3://bucket/prefix``)."""


@dataclass(frozen=True)
class EpisodeFilter:
    """What keeps an episode or a step out of the samples.

    ``episodes``: only these (ids or positions), ``None`` for all. ``skip_failed``: drop
    episodes marked ``success: false``; ``skip_flagged``: drop those the review flagged.
    ``max_alignment_ms``: drop steps whose sample of an aligned stream lies farther than
    this from the step (one bound for every stream, or one per stream; a stream not named
    is not bounded).
    """

    episodes: Sequence[str | int] | None = None
    skip_failed: bool = False
    skip_flagged: bool = False
    max_alignment_ms: float | Mapping[str, float] | None = None

    def keeps(self, position: int, record: EpisodeRecord, named: set[str] | None) -> bool:
        if named is not None and record.episode_id not in named and str(position) not in named:
            return False
        if self.skip_failed and record.success is False:
            return False
        return not (self.skip_flagged and record.review_flag)

    def bounds(self, dataset: Dataset, where: str) -> dict[str, float]:
        """The alignment columns bounded, and their bound in milliseconds."""
        streams = dataset.manifest.alignment.streams if dataset.manifest.alignment else ()
        if self.max_alignment_ms is None:
            return {}
        if isinstance(self.max_alignment_ms, Mapping):
            unknown = sorted(set(self.max_alignment_ms) - set(streams))
            if unknown:
                raise UsageError(f"max_alignment_ms: {where} aligns no stream {unknown}; it aligns {list(streams)}")
            return {layout.alignment_column(s): float(ms) for s, ms in self.max_alignment_ms.items()}
        return {layout.alignment_column(s): float(self.max_alignment_ms) for s in streams}


@dataclass(frozen=True)
class EpisodeSamples:
    """One kept episode: where it is, its length in steps, and the steps that are samples."""

    source: int  # which dataset
    position: int  # the episode's position in its dataset's index
    length: int
    steps: np.ndarray  # int64, sorted: the sample steps (every step unless filtered)


class SampleIndex:
    """Global sample number -> (dataset, episode, step), over every kept episode in order.

    Memory: one int64 per kept step where an alignment bound filtered some out, else one
    entry per episode (a dataset's index is bounded by its episodes, not their length).
    """

    def __init__(self, episodes: Sequence[EpisodeSamples]) -> None:
        self.episodes = tuple(episodes)
        counts = np.array([len(e.steps) for e in self.episodes], dtype=np.int64)
        self.ends = np.cumsum(counts)

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def locate(self, index: int) -> tuple[EpisodeSamples, int]:
        """The episode of sample ``index`` and the step it is."""
        if not 0 <= index < len(self):
            raise IndexError(f"sample {index} out of range ({len(self)} samples)")
        which = int(np.searchsorted(self.ends, index, side="right"))
        episode = self.episodes[which]
        first = int(self.ends[which - 1]) if which else 0
        return episode, int(episode.steps[index - first])

    def episode_samples(self) -> list[np.ndarray]:
        """Each kept episode's global sample numbers, in order (what an episode-aware sampler groups)."""
        starts = np.concatenate([[0], self.ends[:-1]]) if len(self.ends) else np.zeros(0, np.int64)
        return [np.arange(int(s), int(e), dtype=np.int64) for s, e in zip(starts, self.ends, strict=True)]


def build_index(datasets: Sequence[Dataset], where: Sequence[str], keep: EpisodeFilter) -> SampleIndex:
    named = None if keep.episodes is None else {str(e) for e in keep.episodes}
    found: set[str] = set()
    episodes: list[EpisodeSamples] = []
    for source, (dataset, name) in enumerate(zip(datasets, where, strict=True)):
        bounds = keep.bounds(dataset, name)
        for position, record in enumerate(dataset.episodes):
            if named is not None and (record.episode_id in named or str(position) in named):
                found.update({record.episode_id, str(position)})
            if not keep.keeps(position, record, named) or record.length <= 0:
                continue
            steps = np.arange(record.length, dtype=np.int64)
            if bounds:
                steps = steps[_aligned(Episode(dataset, record), bounds, record.length)]
            if len(steps):
                episodes.append(EpisodeSamples(source, position, record.length, steps))
    if named is not None and named - found:
        raise UsageError(f"episodes: {sorted(named - found)} not found in {', '.join(where)}")
    return SampleIndex(episodes)


def _aligned(episode: Episode, bounds: Mapping[str, float], length: int) -> np.ndarray:
    """A mask of the steps whose every bounded alignment error is within its bound (a step
    with no sample of a stream, a null error, is not held against it)."""
    columns = list(bounds)
    if not columns:
        return np.ones(length, dtype=bool)
    table = episode.steps(columns)
    ok = np.ones(table.num_rows, dtype=bool)
    for column in columns:
        errors = table[column].to_numpy(zero_copy_only=False).astype(np.float64)
        ok &= ~(errors > bounds[column])  # NaN (null) passes
    return ok
