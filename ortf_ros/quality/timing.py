"""The time rules of one stream (steps, a native-rate stream, a video's frames, a camera's
frames as the steps saw them): stamps that go back or repeat, silences longer than
``gap_periods`` periods, and a mean interval that disagrees with the declared rate.

The rate is judged on the mean of the intervals that are not gaps (a gap is its own
finding), not on their median: a camera at 25 fps seen through steps at 30 Hz advances
by one and two steps in turn, and only the mean of those is its rate.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ortf_ros.quality.runs import Run, RunTracker
from ortf_ros.quality.settings import DoctorSettings

Report = Callable[[str, Run, str], None]
"""``report(rule, run, message)``: the caller puts the run on the episode's clock."""

ESTIMATE_INTERVALS = 64
"""A stream without a declared rate: its period is the median of its first intervals."""
MIN_RATE_INTERVALS = 10
"""Fewer intervals than this say too little about a rate to judge it."""


class IntervalChecker:
    """Checks one stream's times fed batch by batch. Memory: a few numbers, plus the first
    ``ESTIMATE_INTERVALS`` times of a stream without a declared rate."""

    def __init__(
        self,
        stream: str,
        declared_hz: float | None,
        settings: DoctorSettings,
        report: Report,
        *,
        rate_rule: str = "time.rate_mismatch",
        what: str = "samples",
    ) -> None:
        self.stream = stream
        self.declared_hz = declared_hz if declared_hz and np.isfinite(declared_hz) and declared_hz > 0 else None
        self.period = 1.0 / self.declared_hz if self.declared_hz else None
        self.settings = settings
        self.report = report
        self.rate_rule = rate_rule
        self.what = what
        self.first: float | None = None
        self.last: float | None = None
        self.sum_s = 0.0
        self.intervals = 0
        self.sum_all_s = 0.0  # gaps included: a stream stretched beyond gap_periods is all gaps
        self.all_intervals = 0
        self._pending: list[np.ndarray] = []  # times held until the period is estimated
        self._pending_count = 0
        self._backwards = RunTracker(lambda run: self._say("time.non_monotonic", run))
        self._repeated = RunTracker(lambda run: self._say("time.duplicate", run))
        self._gaps = RunTracker(lambda run: self._say("stream.gap", run))

    def feed(self, times: np.ndarray) -> None:
        times = np.asarray(times, dtype=np.float64)
        if self.period is None:
            self._pending.append(times)
            self._pending_count += len(times)
            if self._pending_count > ESTIMATE_INTERVALS:
                self._estimate()
            return
        self._check(times)

    def _estimate(self) -> None:
        held = np.concatenate(self._pending) if self._pending else np.zeros(0)
        self._pending, self._pending_count = [], 0
        steps = np.diff(held)
        steps = steps[np.isfinite(steps) & (steps > 0)]
        # No positive interval at all: any period works, the stamps are findings of their own.
        self.period = float(np.median(steps)) if len(steps) else 1.0
        self._check(held)

    def _check(self, times: np.ndarray) -> None:
        if not len(times):
            return
        assert self.period is not None
        previous = np.concatenate([[self.last if self.last is not None else np.nan], times[:-1]])
        if self.first is None:
            self.first = float(times[0])
        self.last = float(times[-1])
        with np.errstate(invalid="ignore"):
            dt = times - previous
            known = np.isfinite(dt)
            gap = known & (dt > self.settings.gap_s(self.period))
            self._backwards.feed(known & (dt < 0), previous, times, -dt)
            self._repeated.feed(known & (dt == 0), previous, times)
            self._gaps.feed(gap, previous, times, dt)
            steady = known & (dt > 0) & ~gap
        self.sum_s += float(dt[steady].sum())
        self.intervals += int(steady.sum())
        forward = known & (dt > 0)
        self.sum_all_s += float(dt[forward].sum())
        self.all_intervals += int(forward.sum())

    def finish(self) -> None:
        if self.period is None:
            self._estimate()
        for tracker in (self._backwards, self._repeated, self._gaps):
            tracker.finish()
        if self.declared_hz is None or self.first is None or self.last is None:
            return
        check_rate(
            self.rate_rule,
            self.what,
            self.declared_hz,
            (self.sum_s, self.intervals),
            (self.sum_all_s, self.all_intervals),
            (self.first, self.last),
            self.settings,
            self.report,
        )

    def check_edges(self, start_s: float | None, end_s: float | None) -> None:
        """After ``finish``: a stream that starts more than a gap after the episode's first
        step, or ends more than a gap before its last, was silent there."""
        if self.period is None or start_s is None or end_s is None:
            return
        longest = self.settings.gap_s(self.period)
        first, last = self.first, self.last
        if first is None or last is None:  # (no sample at all: the stream's file says so)
            return
        for begin, finish in ((start_s, first), (last, end_s)):
            if finish - begin > longest:
                self._say("stream.gap", Run(0, 0, begin, finish, 1, finish - begin))

    def _say(self, rule: str, run: Run) -> None:
        period_ms = (self.period or 0.0) * 1000
        if rule == "time.non_monotonic":
            message = f"{run.rows} {self.what} go back in time, by up to {run.worst * 1000:.3f} ms"
        elif rule == "time.duplicate":
            message = f"{run.rows} {self.what} repeat the previous timestamp"
        else:
            periods = run.worst / self.period if self.period else 0.0
            message = (
                f"silent for {run.worst:.3f} s ({periods:.1f} periods of {period_ms:.2f} ms; "
                f"more than {self.settings.gap_periods:g} and {self.settings.min_gap_s:g} s is a gap)"
            )
            if run.rows > 1:
                message += f", {run.rows} gaps in a row"
        self.report(rule, run, message)


def check_rate(
    rule: str,
    what: str,
    declared_hz: float,
    steady: tuple[float, int],
    every: tuple[float, int],
    span: tuple[float, float],
    settings: DoctorSettings,
    report: Report,
) -> None:
    """The mean interval (``steady``: seconds and count of the intervals that are not gaps)
    against the declared rate. When gaps are most intervals (time stretched by more than
    ``gap_periods``), all of them (``every``) are the evidence."""
    total, count = steady
    if count < every[1] / 2:
        total, count = every
    if count < MIN_RATE_INTERVALS:
        return
    mean = total / count
    factor = mean * declared_hz
    if abs(factor - 1.0) > settings.rate_tolerance:
        report(
            rule,
            Run(0, 0, span[0], span[1], count, factor),
            f"{what} every {mean * 1000:.2f} ms on average ({1 / mean:.4g} Hz over {count} intervals), "
            f"declared {declared_hz:.4g} Hz: time runs {factor:.2f}x",
        )
