"""The order of batches that keeps each data loader worker near its episodes.

A data loader hands batch ``i`` to worker ``i % workers``. Shuffled uniformly, every batch
touches ~``batch_size`` episodes and every worker opens every episode's videos, seeking from
a keyframe for each frame; its open decoders are never reused. Here each worker gets its own
share of the episodes, drawn ``active`` episodes at a time with their steps shuffled
together, and the batches are interleaved in the loader's round-robin order, so a worker's
decoders continue forward through a few episodes at a time. An epoch still covers every
sample exactly once, in an order reseeded by ``epoch``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

ACTIVE_EPISODES = 4
"""Episodes a worker draws a batch from at a time: more mixes batches more, fewer decodes
less (a worker keeps ``SampleReader.open_episodes`` of them open)."""


@dataclass(frozen=True)
class BatchOrder:
    """How an epoch's batches are made: their size, the loader's workers (0: the loader's own
    process), shuffled or in order from ``seed``, a last partial batch kept or dropped, and
    the episodes a worker draws from at a time."""

    batch_size: int
    workers: int = 0
    shuffle: bool = True
    seed: int = 0
    drop_last: bool = False
    active: int = ACTIVE_EPISODES

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.workers < 0 or self.active < 1:
            raise ValueError(
                "batch_size >= 1, workers >= 0 and active episodes >= 1 expected, "
                f"got {self.batch_size}, {self.workers}, {self.active}"
            )

    def batches(self, episodes: Sequence[np.ndarray], epoch: int = 0) -> Iterator[list[int]]:
        """Batches of sample numbers (``episodes``: each episode's samples) in the loader's order."""
        rng = np.random.default_rng([self.seed, epoch])
        shares = [[episodes[i] for i in lane] for lane in self._lanes([len(e) for e in episodes], rng)]
        per_lane = [list(self._lane_batches(share, rng)) for share in shares]
        for position in range(max((len(b) for b in per_lane), default=0)):
            for batches in per_lane:
                if position < len(batches):
                    yield batches[position]

    def count(self, sizes: Sequence[int], epoch: int = 0) -> int:
        """How many batches ``batches`` yields for episodes of ``sizes`` samples, from the same
        split of the episodes among the workers (a partial batch ends each worker's share)."""
        lanes = self._lanes(sizes, np.random.default_rng([self.seed, epoch]))
        loads = [sum(sizes[i] for i in lane) for lane in lanes]
        size = self.batch_size
        return sum(load // size if self.drop_last else -(-load // size) for load in loads)

    def _lanes(self, sizes: Sequence[int], rng: np.random.Generator) -> list[list[int]]:
        """Each worker's episodes (positions in ``sizes``): the episodes in (shuffled) order, each
        to the least loaded worker, so every worker has about as many samples."""
        order = rng.permutation(len(sizes)) if self.shuffle else np.arange(len(sizes))
        lanes: list[list[int]] = [[] for _ in range(max(self.workers, 1))]
        loads = np.zeros(len(lanes), dtype=np.int64)
        for which in order.tolist():
            lane = int(np.argmin(loads))
            lanes[lane].append(which)
            loads[lane] += sizes[which]
        return lanes

    def _lane_batches(self, share: Sequence[np.ndarray], rng: np.random.Generator) -> Iterator[list[int]]:
        pending: list[int] = []
        for start in range(0, len(share), self.active):
            group = np.concatenate(share[start : start + self.active])
            if self.shuffle:
                group = rng.permutation(group)
            pending.extend(group.tolist())
            while len(pending) >= self.batch_size:
                yield pending[: self.batch_size]
                del pending[: self.batch_size]
        if pending and not self.drop_last:
            yield pending
