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

import numpy as np

ACTIVE_EPISODES = 4
"""Episodes a worker draws a batch from at a time: more mixes batches more, fewer decodes
less (a worker keeps ``SampleReader.open_episodes`` of them open)."""


def episode_batches(
    episodes: Sequence[np.ndarray],
    batch_size: int,
    workers: int,
    *,
    shuffle: bool,
    seed: int,
    epoch: int = 0,
    drop_last: bool = False,
    active: int = ACTIVE_EPISODES,
) -> Iterator[list[int]]:
    """Batches of sample numbers (``episodes``: each episode's samples) in the loader's order."""
    if batch_size < 1 or workers < 0 or active < 1:
        raise ValueError(
            f"batch_size >= 1, workers >= 0 and active >= 1 expected, got {batch_size}, {workers}, {active}"
        )
    rng = np.random.default_rng([seed, epoch])
    shares = [[episodes[i] for i in lane] for lane in _lanes([len(e) for e in episodes], workers, shuffle, rng)]
    per_lane = [list(_lane_batches(share, batch_size, shuffle, rng, drop_last, active)) for share in shares]
    for position in range(max((len(b) for b in per_lane), default=0)):
        for batches in per_lane:
            if position < len(batches):
                yield batches[position]


def _lanes(sizes: Sequence[int], workers: int, shuffle: bool, rng: np.random.Generator) -> list[list[int]]:
    """Each worker's episodes (positions in ``sizes``): the episodes in (shuffled) order, each
    to the least loaded worker, so every worker has about as many samples."""
    order = rng.permutation(len(sizes)) if shuffle else np.arange(len(sizes))
    lanes: list[list[int]] = [[] for _ in range(max(workers, 1))]
    loads = np.zeros(len(lanes), dtype=np.int64)
    for which in order.tolist():
        lane = int(np.argmin(loads))
        lanes[lane].append(which)
        loads[lane] += sizes[which]
    return lanes


def _lane_batches(
    share: Sequence[np.ndarray], batch_size: int, shuffle: bool, rng: np.random.Generator, drop_last: bool, active: int
) -> Iterator[list[int]]:
    pending: list[int] = []
    for start in range(0, len(share), active):
        group = np.concatenate(share[start : start + active])
        if shuffle:
            group = rng.permutation(group)
        pending.extend(group.tolist())
        while len(pending) >= batch_size:
            yield pending[:batch_size]
            del pending[:batch_size]
    if pending and not drop_last:
        yield pending


def batch_count(
    sizes: Sequence[int],
    batch_size: int,
    workers: int,
    *,
    shuffle: bool,
    seed: int,
    epoch: int = 0,
    drop_last: bool = False,
) -> int:
    """How many batches ``episode_batches`` yields for episodes of ``sizes`` samples, from the
    same split of the episodes among the workers (a partial batch ends each worker's share)."""
    lanes = _lanes(sizes, workers, shuffle, np.random.default_rng([seed, epoch]))
    loads = [sum(sizes[i] for i in lane) for lane in lanes]
    return sum(load // batch_size if drop_last else -(-load // batch_size) for load in loads)
