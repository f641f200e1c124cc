"""One error boundary for every console script: what went wrong is one line on stderr
and an exit code, the README's; only a bug keeps its traceback.

- the package's own errors (``OrtfError``): exit 1; a ``UsageError`` (a flag out of
  range, a path of the wrong kind, an unknown episode): exit 2;
- the operating system's (``OSError`` and its kin: permission, not a directory, no space,
  too many open files): exit 1, the line naming the path and the reason;
- standard output closed by its reader (``ortf info D | head -1``): no message, exit 141
  (128 + SIGPIPE, what ``git log | head`` exits with); a broken pipe anywhere else is
  an error like any other;
- Ctrl-C: exit 130 (128 + SIGINT); SIGTERM and SIGHUP stop it the same way (143, 129),
  so what it had not finished is removed as on Ctrl-C.

Command-line parsing goes through ``OneLineParser``, whose errors are one line too (or
``UsageErrorParser``, whose errors this boundary says).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TextIO, cast

from ortf_ros.errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    OrtfError,
    UsageError,
    exit_code,
    failure_line,
    os_error_line,
    with_filename,
)

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PIPE_CLOSED",
    "EXIT_USAGE",
    "OneLineParser",
    "UsageErrorParser",
    "run_guarded",
    "say",
]

EXIT_PIPE_CLOSED = 141
STOP_AGAIN_S = 0.01
"""How long after a stop that a finalizer swallowed it is sent again (``_unraisable``)."""


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP (``timeout``, a closed terminal, a job scheduler), taken as Ctrl-C
    is: the command stops where it is and removes what it had not finished."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop(signum: int, frame: object) -> None:
    raise Stopped(signum)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise ``Stopped`` while the block runs (in the main thread, the
    only one where signals are handled; elsewhere the block runs as it is), and a stop
    that Python ignored is sent again (``_unraisable``)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stops = {signum: signal.signal(signum, _stop) for signum in (signal.SIGTERM, signal.SIGHUP)}
    hook = sys.unraisablehook
    sys.unraisablehook = functools.partial(_unraisable, hook)
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for signum, handler in stops.items():
            signal.signal(signum, handler)


def _unraisable(hook: Callable[[Any], object], unraisable: Any) -> None:
    """A Ctrl-C or a stop signal whose exception was raised in a finalizer or a weakref
    callback, where Python reports it and goes on (the command ran to its end, exit 0):
    the signal is sent again a moment later, to be raised where the command is (or, if
    in a finalizer again, sent again)."""
    exc = unraisable.exc_value
    if not isinstance(exc, KeyboardInterrupt):
        hook(unraisable)
        return
    signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
    again = threading.Timer(STOP_AGAIN_S, os.kill, (os.getpid(), signum))
    again.daemon = True
    again.start()


def interrupted(exc: KeyboardInterrupt) -> int:
    """The exit code of a stop: 128 + the signal (130 for Ctrl-C)."""
    return 128 + exc.signum if isinstance(exc, Stopped) else EXIT_INTERRUPTED


def run_guarded(prog: str | Callable[[], str], run: Callable[[], int]) -> int:
    """``run()``'s exit code, or the code of what it raised, after one line on stderr
    (``prog``: the command's name, or a function that knows it once the line is parsed)."""
    with stop_signals():
        return _guarded(prog if callable(prog) else lambda: prog, run)


def _guarded(name: Callable[[], str], run: Callable[[], int]) -> int:
    stdout = sys.stdout
    standard_output = _StandardOutput(stdout)
    sys.stdout = cast("TextIO", standard_output)
    # The package's log warnings are for programs using it as a library; here the error
    # line says what failed (a writer closed by a failure would add "stays staged" lines).
    quiet = logging.NullHandler()
    logging.getLogger("ortf_ros").addHandler(quiet)
    try:
        try:
            code = run()
        except SystemExit:  # argparse's --help (or a usage line): what it printed must get out too
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # a full disk or a closed pipe is this command's error, not the interpreter's at exit
        return code
    except OrtfError as exc:
        say(name(), str(exc))
        return exit_code(exc)
    except BrokenPipeError as exc:
        if _stdout_closed():
            _silence_stdout()
            return EXIT_PIPE_CLOSED
        say(name(), os_error_line(exc))
        return EXIT_FAILED
    except OSError as exc:
        say(name(), os_error_line(exc))
        return EXIT_FAILED
    except UnicodeError as exc:  # a file of the input that is not the text it must be
        say(name(), failure_line(exc) or str(exc))
        return EXIT_FAILED
    except KeyboardInterrupt as exc:
        return interrupted(exc)
    finally:
        logging.getLogger("ortf_ros").removeHandler(quiet)
        sys.stdout = stdout
        if standard_output.failed is not None:  # what it still buffers would fail at exit: a second message
            _silence_stdout()


class _StandardOutput:
    """Standard output whose write errors name it: ``> /dev/full`` is "standard output: No
    space left on device", not an error without a place. A write error is raised again by
    the next flush: argparse swallows its own (``--help`` unbuffered into a closed pipe),
    and the boundary's last flush must still see it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.failed: OSError | None = None

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            self.failed = _named(exc)
            raise self.failed from None

    def flush(self) -> None:
        if self.failed is not None:
            raise self.failed
        try:
            self._stream.flush()
        except OSError as exc:
            self.failed = _named(exc)
            raise self.failed from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _named(exc: OSError) -> OSError:
    """``exc`` naming standard output (the same subclass: EPIPE stays a BrokenPipeError)."""
    return exc if exc.filename is not None else with_filename(exc, "standard output")


def say(prog: str, message: str) -> None:
    """One line, whatever the message holds (a library's text may span several)."""
    line = " ".join(message.split())
    with contextlib.suppress(OSError):  # stderr closed too: the exit code is all that is left to say it
        print(f"{prog}: {line}", file=sys.stderr, flush=True)


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (poll reports an error on
    the write end of such a pipe, and nothing on a file or a live pipe)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush of what
    was still buffered does not fail (and print a warning) at exit."""
    with contextlib.suppress(OSError, ValueError):  # (a stream without a descriptor: nothing to point)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``PROG: error: MESSAGE (see PROG --help)``,
    and exit 2, as every other usage error (argparse's own prints the usage first)."""

    def error(self, message: str) -> NoReturn:
        say(self.prog, f"error: {message} (see {self.prog} --help)")
        raise SystemExit(EXIT_USAGE)


class UsageErrorParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise ``UsageError`` with argparse's message, for a
    command that parses inside ``run_guarded``: the boundary says it as ``PROG: MESSAGE``
    and returns 2, so a caller of the command's ``main`` gets the exit code back."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)
