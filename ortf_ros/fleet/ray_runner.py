"""Recordings converted as Ray tasks (``--ray [ADDRESS]``), on this machine or a cluster.

Ray is an optional extra (``pip install 'ortf_ros[ray]'``), imported only here. ADDRESS is
what ``ray.init`` takes (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``); without one, a
Ray instance of this machine is started for the run, its servers bound to the loopback
interface, and stopped at its end. A caller that connected to Ray already (a notebook,
a test) keeps its connection.

Each task asks for one CPU, so a node runs as many conversions at once as it has CPUs,
and each conversion's encoders take their share of the node's cores. A worker that dies
(killed, out of memory, its node lost) is retried by Ray up to ``MAX_RETRIES`` times;
each attempt writes a directory of its own (``task.py``). The recordings and the scratch
directory (beside the output) must be at the same paths on every node: shared storage.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from concurrent.futures import Future
from typing import Any

from ortf_ros.errors import ConversionError, UsageError, describe
from ortf_ros.fleet.task import RecordingTask, TaskResult, run_task
from ortf_ros.io.cpus import usable_cpus
from ortf_ros.io.signals import started_without_sigint

MAX_RETRIES = 3
CONNECT_TIMEOUT_S = 10.0
LOCAL = None
"""The ADDRESS of ``--ray`` given without one: a Ray instance of this machine."""


class RayRunner:
    """Connects at the first recording to convert: a run that finds every recording in the
    dataset already starts no cluster. (Ray is imported at once: a missing extra is a
    usage error before anything is done.)"""

    def __init__(self, address: str | None) -> None:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report leaves this machine
        # Ray's C++ crash handler would take the command's SIGTERM too, print a stack and
        # abort: the command's own handler stops the run instead (read as Ray is imported).
        os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
        if address is LOCAL:
            # Ray binds its servers to the address it takes as this node's, the one other
            # nodes would reach; a single-machine instance has no other nodes: loopback.
            # (Read as Ray is imported.)
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        try:
            import ray  # (an optional extra, imported when asked for)
        except ImportError:
            raise UsageError("--ray needs Ray, an optional extra: pip install 'ortf_ros[ray]'") from None
        self._ray: Any = ray  # (typed in part)
        self._address = address
        if address is not LOCAL:
            _host_and_port(address)  # (a usage error now, not at the first recording to convert)
        self._started = False
        self._remote: Any = None
        self.conversions_at_once: int | None = None  # (one a core of the node it runs on)
        self._running: dict[int, Any] = {}

    @property
    def parallelism(self) -> int:
        """The cluster's CPUs: one conversion each."""
        self._connect()
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))

    def describe(self) -> str:
        """The cluster, as the run found it: a cluster with no CPU yet (its head started
        with ``--num-cpus 0``, workers still to join) is said to be waited for."""
        nodes = sum(1 for node in self._ray.nodes() if node.get("Alive"))
        cpus = int(self._ray.cluster_resources().get("CPU", 0))
        where = "a Ray instance of this machine" if self._address is LOCAL else f"the Ray cluster at {self._address}"
        waiting = "; no CPU yet: the conversions wait for nodes with CPUs to join" if not cpus else ""
        return f"converting on {where}: {nodes} node(s), {cpus} CPU(s){waiting}"

    def _connect(self) -> None:
        if self._remote is not None:
            return
        if not self._ray.is_initialized():
            self._started = True  # (first: a Ctrl-C held back until it returns still shuts down what it started)
            _connect(self._ray, self._address)
        self._remote = self._ray.remote(run_task).options(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)

    def submit(self, task: RecordingTask) -> Future[TaskResult]:
        self._connect()
        reference = self._remote.remote(task)
        self._running[task.index] = reference
        future: Future[TaskResult] = reference.future()
        future.add_done_callback(lambda _: self._running.pop(task.index, None))
        return future

    def failure(self, exc: BaseException, task: RecordingTask) -> str | None:
        """A task lost to the cluster (its worker or node died on every attempt) fails its
        recording; a task that raised is a bug, and keeps its traceback."""
        errors = self._ray.exceptions
        if isinstance(exc, errors.RayTaskError) or not isinstance(exc, errors.RayError):
            return None
        return f"{task.input}: its Ray task failed ({describe(exc).splitlines()[0]})"

    def stop(self) -> None:
        for reference in list(self._running.values()):
            try:
                self._ray.cancel(reference, force=True)
            except Exception:  # finished meanwhile, or the cluster is gone: nothing to stop
                continue

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()


def _connect(ray: Any, address: str | None) -> None:
    options: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    if address is not LOCAL:
        _reachable(address)
    # ray.init makes SIGTERM exit at once (code 15); the command's own handler stops the
    # run as Ctrl-C does, removing what it had not finished, and exits 143: kept, and a
    # SIGTERM that came while Ray's was in place is handed to it.
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    terminated = False
    try:
        with started_without_sigint():  # Ray's servers, and the workers they start
            if address is LOCAL:
                # "local": a new instance even where this machine runs a cluster (RAY_ADDRESS,
                # or the one `ray start` recorded), which ADDRESS "auto" is for.
                ray.init(address="local", num_cpus=usable_cpus(), include_dashboard=False, **options)
            else:
                ray.init(address=address, **options)
    except SystemExit as exc:
        if exc.code != signal.SIGTERM:
            raise
        terminated = True
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        where = "a Ray instance of this machine" if address is LOCAL else f"the Ray cluster at {address}"
        raise ConversionError(f"--ray: cannot connect to {where}: {describe(exc)}") from None
    finally:
        if threading.current_thread() is threading.main_thread():
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
    if terminated:
        signal.raise_signal(signal.SIGTERM)


def _reachable(address: str) -> None:
    """A ``HOST:PORT`` (or ``ray://HOST:PORT``) that nothing answers at is one line now:
    ``ray.init`` would retry it for ever, logging every few seconds. (``auto`` is looked up
    by Ray, which says at once when it finds no cluster.)"""
    where = _host_and_port(address)
    if where is None:
        return
    try:
        socket.create_connection(where, timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ConversionError(
            f"--ray {address}: no Ray cluster answers there ({exc.strerror or describe(exc)}); "
            "start one with `ray start --head`, or leave ADDRESS out for a Ray instance of this machine"
        ) from None


def _host_and_port(address: str) -> tuple[str, int] | None:
    """``HOST:PORT`` of ``address``; None for ``auto``."""
    if address == "auto":
        return None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--ray {address}: expected auto, HOST:PORT or ray://HOST:PORT")
    return host.strip("[]"), int(port)
