"""``value.non_finite``: NaN or infinity in a numeric column (a vector column of the step
table or of a native-rate stream, a timestamp, an alignment error). The writer refuses
them, so one found was made by another writer or by editing the files."""

from __future__ import annotations

import numpy as np

from ortf_ros.quality.runs import EpisodeFindings, Run, RunTracker


class NonFiniteChecker:
    """One column, fed batch by batch: a run of rows holding a value that is not finite is one finding."""

    def __init__(self, stream: str, column: str, report: EpisodeFindings) -> None:
        self.stream = stream
        self.column = column
        self.report = report
        self._runs = RunTracker(self._on_run)

    def feed(self, times: np.ndarray, values: np.ndarray) -> None:
        with np.errstate(invalid="ignore"):
            finite = np.isfinite(values)
        bad = ~finite if finite.ndim == 1 else ~finite.all(axis=1)
        self._runs.feed(bad, times, times)

    def _on_run(self, run: Run) -> None:
        self.report.add(
            "value.non_finite",
            self.stream,
            run.start_s,
            run.end_s,
            f"{self.column}: NaN or infinite in {run.rows} row(s) (rows {run.first}..{run.last} of the episode)",
        )

    def finish(self) -> None:
        self._runs.finish()
