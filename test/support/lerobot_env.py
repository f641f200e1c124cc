"""LeRobot's own loader, in its own venv (``../shared/lerobot-env/setup.sh``, cached in
``.cache/lerobot-venv``): the tests that check what a LeRobot user gets run its children there."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO.parent / "shared" / "lerobot-env" / "setup.sh"


def lerobot_python(announce: Callable[[str], None]) -> Path:
    """The LeRobot venv's python, built the first time (skips where the setup script is missing)."""
    if not SETUP.exists():
        pytest.skip(f"{SETUP} is missing: LeRobot's own loader cannot be built here")
    venv = REPO / ".cache" / "lerobot-venv"
    if not (venv / "bin" / "python").exists():
        announce(f"building {venv} (lerobot 0.4.4, ~1.5 GB, about 1.5 minutes) for the tests against LeRobot, once")
    # (without PYTHON: the setup script takes its own Python 3.11 unless told otherwise, and
    # `PYTHON=python3.12 make test` names this suite's interpreter, not LeRobot's)
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    built = subprocess.run([str(SETUP), str(venv)], capture_output=True, text=True, env=env)
    assert built.returncode == 0, built.stderr
    return Path(built.stdout.strip().splitlines()[-1])


def run_in_lerobot(python: Path, child: Path, *args: str, home: Path) -> None:
    """``child`` run by LeRobot's python, offline (a missing file would be a Hub fetch)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(home)}
    done = subprocess.run([str(python), str(child), *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
