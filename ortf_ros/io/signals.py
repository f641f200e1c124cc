"""Stop signals (Ctrl-C, SIGTERM, SIGHUP) kept from where they would do harm.

- ``held_off``: a few steps that must not be cut in two, such as handing work to a pool
  (``ThreadPoolExecutor.submit`` cut between starting a thread and registering it for
  the interpreter's shutdown leaves a thread that shutdown waits for forever). A signal
  that arrives meanwhile is handled as the block ends.
- ``started_without_sigint``: the helper processes a command starts (``--jobs``'
  workers, ``--ray``'s servers). A Ctrl-C at a terminal reaches every process of the
  foreground process group, and each would stop on its own, wherever it was: a worker
  printing the traceback of the import or the wait it was in, Ray's servers dying in no
  order and leaving their agents behind. The command alone is to hear it, and it stops
  them as it stops itself.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def held_off() -> Iterator[None]:
    """The stop signals' Python handlers held off while the block runs (a signal that
    arrives is raised again as it ends); outside the main thread, where no handler
    runs, the block runs as it is. A signal without a Python handler (its default, or
    ignored) acts as it would."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def hold(signum: int, frame: object) -> None:
        arrived.append(signum)

    held = {signum: handler for signum in STOP_SIGNALS if callable(handler := signal.getsignal(signum))}
    for signum in held:
        signal.signal(signum, hold)
    try:
        yield
    finally:
        for signum, handler in held.items():
            signal.signal(signum, handler)
        for number in dict.fromkeys(arrived):
            signal.raise_signal(number)


@contextlib.contextmanager
def started_without_sigint() -> Iterator[None]:
    """SIGINT blocked in this thread while the block runs, so that the processes it starts
    are born with it blocked (a signal mask is inherited through fork and exec, and
    Python does not unblock it): a terminal's Ctrl-C does not reach them. This process
    still hears it, from another of its threads or as the block ends."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
