"""The runners' helper processes are started deaf to Ctrl-C: the command stops them.

A Ctrl-C at a terminal reaches every process of the foreground process group: the
command, and the workers and servers it started (``--jobs``'s worker processes, the Ray
instance of ``--ray``). Each of those would stop on its own, wherever it was: a worker
printing the traceback of the import or the wait it was in, Ray's servers dying in no
order and leaving their agents behind. The command alone is to hear it, and it stops
them (``Runner.stop``, ``Runner.close``) as it stops itself.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def started_without_sigint() -> Iterator[None]:
    """SIGINT blocked in this thread while the block runs, so that the processes it starts
    are born with it blocked (a signal mask is inherited through fork and exec, and Python
    does not unblock it). A Ctrl-C meanwhile is delivered here once the block ends."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
