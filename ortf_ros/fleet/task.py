"""One recording converted into a scratch dataset of its own: what a worker runs, in a
process pool of this machine or as a Ray task on any node of a cluster.

Each attempt makes its own directory, ``part-<index>-<random>``, and writes there who it
is (``attempt.json``: host and process). A worker that dies is retried (by Ray) into a
new directory, so two attempts never write into one dataset; the driver removes every
``part-<index>-*`` once the recording is imported or has failed.

A recording that cannot be converted is a ``TaskResult`` with its one-line error, not
an exception: it fails its task only, and Ray keeps its retries for workers that die.
A bug is still an exception, with its traceback.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ortf_ros.errors import DatasetBusyError, failure_line
from ortf_ros.fleet.settings import ConversionSettings
from ortf_ros.io import atomic
from ortf_ros.io.cpus import usable_cpus
from ortf_ros.pipeline.offline import ConversionResult, convert_recording
from ortf_ros.pipeline.sources.bag import BagSource

ATTEMPT_FILE = "attempt.json"
DATASET_DIR = "dataset"


def part_prefix(index: int) -> str:
    """The name every attempt's directory at recording ``index`` begins with."""
    return f"part-{index:06d}-"


@dataclass(frozen=True)
class RecordingTask:
    """Recording ``index`` of the run (``input``), into a new directory under ``scratch``;
    ``conversions_at_once``: how many share this machine's cores (None: as many as it has,
    one a core, as Ray schedules them)."""

    index: int
    input: Path
    scratch: Path
    settings: ConversionSettings
    conversions_at_once: int | None = 1


@dataclass(frozen=True)
class TaskResult:
    """The scratch dataset and the conversion's result, or the one line it failed with;
    ``storage``: the failure is the storage's (full, read-only), not the recording's."""

    index: int
    dataset: Path | None = None
    result: ConversionResult | None = None
    error: str | None = None
    storage: bool = False


STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def storage_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it: an encoder's WriterError wraps the OSError) is
    storage that takes nothing more, a full disk or quota, a read-only mount. Every later
    recording would fail the same way: the run stops instead."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in STORAGE_ERRNOS:
            return True
        if isinstance(current, DatasetBusyError):
            return True
        current = current.__cause__ or current.__context__
    return False


def run_task(task: RecordingTask) -> TaskResult:
    """Convert ``task.input`` into a scratch dataset of this attempt's own."""
    try:
        attempt = Path(tempfile.mkdtemp(dir=task.scratch, prefix=part_prefix(task.index)))
        atomic.write_json(attempt / ATTEMPT_FILE, {"host": socket.gethostname(), "pid": os.getpid()})
        with BagSource([task.input]) as source:
            config = task.settings.mapping_for(source)
            at_once = task.conversions_at_once or usable_cpus()
            result = convert_recording(
                source,
                attempt / DATASET_DIR,
                config,
                urdf=task.settings.urdf,
                writer_config=task.settings.writer_config(config, at_once),
                mesh_path=task.settings.mesh_path,
            )
    except Exception as exc:
        line = failure_line(exc)
        if line is None:
            raise
        return TaskResult(task.index, error=line, storage=storage_failure(exc))
    return TaskResult(task.index, attempt / DATASET_DIR, result)
