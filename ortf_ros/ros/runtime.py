"""Start-up and shutdown shared by the nodes: stop signals, a spinning thread, an orderly close.

A node's own work (the player's publishing loop, a recorder's pipeline) runs on the
main thread, and the executor that serves its services and timers spins in a thread
beside it. Ctrl-C and SIGTERM must stop the main thread's work cleanly, so rclpy is
initialised without its signal handlers: those would shut the context down under a
publish or a write, which then fails half-way. Here the signals raise
KeyboardInterrupt in the main thread instead, the node finishes what it was doing and
calls ``close``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Sequence

import rclpy
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import try_shutdown

__all__ = ["STOP_SIGNALS", "close", "init", "install_stop_signals", "spin_in_thread", "try_shutdown"]
"""``try_shutdown`` too: a node that failed to start has no executor to close, only rclpy
to shut down (the nodes log the error line and call it)."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""SIGINT too, not only Python's default for it: a shell starts background jobs ignoring SIGINT."""


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def install_stop_signals() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread (``init`` calls this;
    rclpy must have been initialised with ``SignalHandlerOptions.NO``)."""
    for stop in STOP_SIGNALS:
        signal.signal(stop, _interrupt)


def init(args: Sequence[str] | None = None) -> None:
    """rclpy with the command line ``args`` (None: ``sys.argv``), without its signal
    handlers, and the stop signals as KeyboardInterrupt."""
    rclpy.init(args=list(args) if args is not None else None, signal_handler_options=SignalHandlerOptions.NO)
    install_stop_signals()


def _spin(executor: Executor) -> None:
    with contextlib.suppress(ExternalShutdownException):  # the context went down: the main thread winds up
        executor.spin()


def spin_in_thread(executor: Executor, name: str) -> threading.Thread:
    """``executor`` spinning in a started daemon thread called ``name`` (a daemon, so that a
    main thread that dies of an error is not kept waiting by it); ``close`` stops it."""
    spinner = threading.Thread(target=_spin, args=(executor,), name=name, daemon=True)
    spinner.start()
    return spinner


def close(node: Node, executor: Executor, spinner: threading.Thread) -> None:
    """Stop the executor, wait for its thread, destroy the node and shut rclpy down (if no
    one has yet), in that order: nothing runs a callback on a destroyed node."""
    executor.shutdown()
    spinner.join()
    node.destroy_node()  # type: ignore[no-untyped-call]
    try_shutdown()
