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
import itertools
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import rclpy
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import try_shutdown

from ortf_ros.errors import EXIT_FAILED, EXIT_USAGE, OrtfError, UsageError, exit_code, os_error_line
from ortf_ros.io import paths

__all__ = [
    "STOP_SIGNALS",
    "close",
    "exit_on_start_failure",
    "init",
    "install_stop_signals",
    "spin_in_thread",
    "try_shutdown",
]
"""``try_shutdown`` too: a node that failed to start has no executor to close, only rclpy
to shut down (the nodes log the error line and call it)."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""SIGINT too, not only Python's default for it: a shell starts background jobs ignoring SIGINT."""


def _interrupt(signum: int, frame: object) -> None:
    """The first stop signal stops the node; later ones are ignored instead of raised into the
    shutdown they would cut short (a commit, a close). A Ctrl-C reaches a node twice under
    ``ros2 launch`` (the terminal's process group, then launch), or in a pipeline: the second,
    a moment later, used to land between the first's handler and the recorder's own ignoring,
    a traceback and no commit. SIGKILL still ends a node; ``ortf recover`` finishes an episode."""
    for stop in STOP_SIGNALS:
        signal.signal(stop, signal.SIG_IGN)
    raise KeyboardInterrupt


def install_stop_signals() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread (``init`` calls this;
    rclpy must have been initialised with ``SignalHandlerOptions.NO``)."""
    for stop in STOP_SIGNALS:
        signal.signal(stop, _interrupt)


def init(args: Sequence[str] | None = None) -> None:
    """rclpy with the command line ``args`` (None: ``sys.argv``), without its signal
    handlers, and the stop signals as KeyboardInterrupt. A command line rcl refuses is a
    ``UsageError`` of one line; a ``--params-file`` is checked first, as rcl would log
    a line of its own before refusing it."""
    words = list(sys.argv if args is None else args)
    for flag, value in itertools.pairwise(words):
        if flag == "--params-file":
            paths.input_file(value, "a ROS 2 parameter YAML file")
    with _stderr_held() as held:
        try:
            rclpy.init(args=words, signal_handler_options=SignalHandlerOptions.NO)
        except Exception as exc:  # RCLError (rclpy raises no narrower type): the command line is at fault
            held.drop()  # rcl's own "[ERROR] [rcl]: Failed to parse global arguments": this line says it
            raise UsageError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    install_stop_signals()


class _HeldStderr:
    """What ``_stderr_held`` yields: ``drop()`` discards what was held."""

    def __init__(self) -> None:
        self.dropped = False

    def drop(self) -> None:
        self.dropped = True


@contextlib.contextmanager
def _stderr_held() -> Iterator[_HeldStderr]:
    """What the C libraries write to stderr meanwhile, kept aside and written out after the
    block unless it was ``drop``ped (rcl logs a refusal of its own before raising one)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as aside:
        os.dup2(aside.fileno(), 2)
        held = _HeldStderr()
        try:
            yield held
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if not held.dropped:
                aside.seek(0)
                os.write(2, aside.read())


def exit_on_start_failure(name: str, exc: BaseException) -> int:
    """A node that cannot start: its error logged as one line, rclpy shut down; the exit
    code (2 for a bad parameter, 1 otherwise)."""
    line = os_error_line(exc) if isinstance(exc, OSError) else str(exc)
    rclpy.logging.get_logger(name).error(" ".join(line.split()))  # type: ignore[no-untyped-call]
    try_shutdown()
    return exit_code(exc) if isinstance(exc, OrtfError) else EXIT_FAILED


NodeT = TypeVar("NodeT", bound=Node)


def start(
    name: str,
    args: Sequence[str] | None,
    make: Callable[[], NodeT],
    failures: tuple[type[BaseException], ...],
    *,
    interrupt_exits: bool = False,
) -> NodeT | int:
    """A node's start, the same for each node's ``main``: rclpy with ``args`` (``init``),
    then the node ``make`` builds; or, if it cannot start, the exit code ``main`` returns: a
    command line rcl refuses is said in one line (2), one of ``failures`` while making the
    node is ``exit_on_start_failure``, and with ``interrupt_exits`` a Ctrl-C while making it
    shuts rclpy down and exits 0."""
    try:
        init(args)
    except UsageError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return make()
    except failures as exc:
        return exit_on_start_failure(name, exc)
    except KeyboardInterrupt:
        if not interrupt_exits:
            raise
        try_shutdown()
        return 0


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
