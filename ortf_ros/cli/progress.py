"""The progress bar every long command shows on a terminal."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


@contextmanager
def progress_bar(show: bool, what: str) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar (messages/s and time left) on a terminal; nothing otherwise."""
    if not show:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(what, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


@contextmanager
def fleet_progress(show: bool) -> Iterator[Callable[[int, int, int], None] | None]:
    """One bar for a run over many recordings: recordings done of all, the data rate (the
    recordings' bytes per second of the run) and the time left."""
    if not show:
        yield None
        return
    columns = (
        TextColumn("recordings"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
    )
    started = time.monotonic()
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task("recordings", total=None, rate="")

        def report(done: int, total: int, data: int) -> None:
            seconds = max(time.monotonic() - started, 1e-3)
            bar.update(task, completed=done, total=total, rate=f"{data / seconds / 1e6:,.1f} MB/s")

        yield report
