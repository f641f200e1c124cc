"""Turning rows that break a rule into findings: consecutive offending rows are one run (one
finding with its time range), found batch by batch so a run may span batches; and the
per-episode collection that caps how many findings one rule and stream may list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ortf_ros.quality.findings import QualityFinding, quality_finding


@dataclass
class Run:
    """Consecutive offending rows: their first and last row (a position in the stream),
    the time range they cover, how many, and the worst value seen among them."""

    first: int
    last: int
    start_s: float
    end_s: float
    rows: int
    worst: float


class RunTracker:
    """Finds runs of offending rows in a stream fed batch by batch; ``on_run`` is called for
    each run once it has ended (or at ``finish``). Memory: the one open run."""

    def __init__(self, on_run: Callable[[Run], None]) -> None:
        self._on_run = on_run
        self._open: Run | None = None
        self._position = 0  # row index of the next batch's first row

    def feed(self, bad: np.ndarray, starts: np.ndarray, ends: np.ndarray, values: np.ndarray | None = None) -> None:
        """``bad`` marks offending rows; a run's time range goes from the ``starts`` of its
        first row to the ``ends`` of its last (the same array for a sample's own time; the
        previous sample's time and this one's for an interval)."""
        count = len(bad)
        base = self._position
        self._position += count
        if not count:
            return
        hits = np.flatnonzero(bad)
        if not len(hits):
            self._close()
            return
        worst = values if values is not None else np.zeros(count)
        # Split the offending rows into consecutive groups.
        breaks = np.flatnonzero(np.diff(hits) > 1)
        firsts = np.concatenate([[hits[0]], hits[breaks + 1]])
        lasts = np.concatenate([hits[breaks], [hits[-1]]])
        for first, last in zip(firsts.tolist(), lasts.tolist(), strict=True):
            value = float(np.max(worst[first : last + 1]))
            run = self._open
            if run is not None and first == 0 and run.last == base - 1:  # continues across the batch
                run.last, run.end_s, run.rows = base + last, float(ends[last]), run.rows + last + 1
                run.worst = max(run.worst, value)
            else:
                self._close()
                run = Run(base + first, base + last, float(starts[first]), float(ends[last]), last - first + 1, value)
                self._open = run
            if last < count - 1:
                self._close()

    def _close(self) -> None:
        if self._open is not None:
            run, self._open = self._open, None
            self._on_run(run)

    def finish(self) -> None:
        self._close()


class EpisodeFindings:
    """The findings of one episode, at most ``max_per_rule`` per rule and stream; the rest
    counted into one ``doctor.truncated`` finding each, so a stream broken throughout
    costs a bounded amount of memory and output."""

    def __init__(self, episode_id: str, max_per_rule: int) -> None:
        self.episode_id = episode_id
        self.max_per_rule = max_per_rule
        self._found: list[QualityFinding] = []
        self._counts: Counter[tuple[str, str | None]] = Counter()

    def add(self, rule: str, stream: str | None, start_s: float | None, end_s: float | None, message: str) -> None:
        key = (rule, stream)
        self._counts[key] += 1
        if self._counts[key] <= self.max_per_rule:
            self._found.append(quality_finding(rule, self.episode_id, stream, start_s, end_s, message))

    def findings(self) -> list[QualityFinding]:
        """In time order (findings about no moment first), then by rule and stream."""
        found = list(self._found)
        for (rule, stream), count in sorted(self._counts.items(), key=lambda item: (item[0][0], item[0][1] or "")):
            if count > self.max_per_rule:
                found.append(
                    quality_finding(
                        "doctor.truncated",
                        self.episode_id,
                        stream,
                        None,
                        None,
                        f"{count - self.max_per_rule} more {rule} finding(s) not listed (--max-per-rule "
                        f"{self.max_per_rule})",
                    )
                )
        return sorted(found, key=_order)


def _order(item: QualityFinding) -> tuple[bool, float, str, str]:
    return (item.start_s is not None, item.start_s or 0.0, item.rule, item.stream or "")
