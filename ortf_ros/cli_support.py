"""What every ortf command-line tool shares: errors (the package's own become one line
on stderr and exit 1; Ctrl-C exits 130; anything else is a bug and keeps its traceback)
and the progress bar."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ortf_ros.errors import OrtfError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def run_guarded(prog: str, run: Callable[[], int]) -> int:
    try:
        return run()
    except OrtfError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


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
