"""Children that a test starts do not outlive it, whatever assertion failed first."""

from __future__ import annotations

import subprocess
from typing import Any


def kill_if_running(child: subprocess.Popen[Any]) -> None:
    """SIGKILL ``child`` unless it already exited, and reap it; for a ``finally``."""
    if child.poll() is None:
        child.kill()
        child.wait()
