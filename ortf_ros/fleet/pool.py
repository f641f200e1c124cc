"""Recordings converted by worker processes of this machine (``--jobs N``).

Workers are spawned, not forked: a fork copies FFmpeg objects of earlier conversions
whose threads it does not copy, and freeing one in the worker then waits forever.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.process import BaseProcess

from ortf_ros.errors import EXIT_FAILED, ConversionError, describe
from ortf_ros.fleet.task import RecordingTask, TaskResult, run_task
from ortf_ros.io.signals import held_off, started_without_sigint

STOP_WAIT_S = 5.0
"""How long ``stop`` waits for each terminated worker to exit."""


class ProcessRunner:
    """``jobs`` worker processes; a worker that dies breaks the pool, and the run stops
    with one line (what is in the dataset stays; running the command again converts the
    rest)."""

    def __init__(self, jobs: int) -> None:
        self.parallelism = jobs
        self.conversions_at_once: int | None = jobs
        self._pool = ProcessPoolExecutor(
            max_workers=jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_exit_with_parent
        )

    def submit(self, task: RecordingTask) -> Future[TaskResult]:
        with started_without_sigint(), held_off():  # (the pool starts its workers and threads here)
            return self._pool.submit(run_task, task)

    def failure(self, exc: BaseException, task: RecordingTask) -> str | None:
        if isinstance(exc, BrokenProcessPool):
            raise ConversionError(
                f"a worker process ended abruptly (killed, perhaps for lack of memory: {describe(exc)}) while "
                f"converting {task.input} or a recording after it: those are not in the dataset; the recordings "
                "before them are, and running the same command again converts the rest"
            ) from None
        return None

    def describe(self) -> str:
        return f"converting in {self.parallelism} worker processes"

    def stop(self) -> None:
        """After an error or a stop signal (which reaches this process alone, unlike Ctrl-C
        in a terminal), end the conversions still running: leaving the pool would wait for
        them all. Their encoder processes finish their videos, and the scratch directory
        is removed once they have."""
        # (The pool has no public way to end its workers, and forgets them at shutdown.)
        processes = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(timeout=STOP_WAIT_S)  # (reaped: no zombie left to an init that may not)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _exit_with_parent() -> None:
    """Worker initializer: a worker whose parent was killed would go on converting into a
    scratch directory nobody will import."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_when_gone, args=(parent,), daemon=True).start()


def _exit_when_gone(parent: BaseProcess) -> None:
    parent.join()
    os._exit(EXIT_FAILED)
