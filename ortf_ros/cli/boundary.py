"""One error boundary for every console script: what went wrong is one line on stderr
and an exit code, the README's; only a bug keeps its traceback.

- the package's own errors (``OrtfError``): exit 1; a ``UsageError`` (a flag out of
  range, a path of the wrong kind, an unknown episode): exit 2;
- the operating system's (``OSError`` and its kin: permission, not a directory, no space,
  too many open files): exit 1, the line naming the path and the reason;
- standard output closed by its reader (``ortf info D | head -1``): no message, exit 141
  (128 + SIGPIPE, what ``git log | head`` exits with); a broken pipe anywhere else is
  an error like any other;
- Ctrl-C: exit 130 (128 + SIGINT).

Command-line parsing goes through ``OneLineParser``, whose errors are one line too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import sys
from collections.abc import Callable
from typing import NoReturn

from ortf_ros.errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    OrtfError,
    exit_code,
    os_error_line,
)

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PIPE_CLOSED",
    "EXIT_USAGE",
    "OneLineParser",
    "run_guarded",
]

EXIT_PIPE_CLOSED = 141


def run_guarded(prog: str, run: Callable[[], int]) -> int:
    """``run()``'s exit code, or the code of what it raised, after one line on stderr."""
    try:
        return run()
    except OrtfError as exc:
        _say(prog, str(exc))
        return exit_code(exc)
    except BrokenPipeError as exc:
        if _stdout_closed():
            _silence_stdout()
            return EXIT_PIPE_CLOSED
        _say(prog, os_error_line(exc))
        return EXIT_FAILED
    except OSError as exc:
        _say(prog, os_error_line(exc))
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _say(prog: str, message: str) -> None:
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
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``PROG: error: MESSAGE (see PROG --help)``,
    and exit 2, as every other usage error (argparse's own prints the usage first)."""

    def error(self, message: str) -> NoReturn:
        _say(self.prog, f"error: {message} (see {self.prog} --help)")
        raise SystemExit(EXIT_USAGE)
