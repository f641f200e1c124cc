"""Shared fixtures. DDS traffic stays on this machine: every rclpy process the tests
start (this one included) runs with LOCALHOST discovery and a domain of its own."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_DOMAIN_ID"] = str(20 + os.getpid() % 80)
os.environ.pop("ROS_LOCALHOST_ONLY", None)
os.environ.setdefault("ROS_LOG_DIR", str(Path(tempfile.gettempdir()) / "ortf_ros-test-ros-log"))

from collections.abc import Callable

from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.synthetic import write_demo_dataset


@pytest.fixture
def small_dataset(tmp_path: Path) -> tuple[Path, list[EpisodeRecord]]:
    """Three small episodes (two RGB cameras and depth); the third one failed."""
    root = tmp_path / "ds"
    records = write_demo_dataset(root, episodes=3, steps=12, width=64, height=48)
    return root, records


@pytest.fixture(scope="session")
def announce(pytestconfig: pytest.Config) -> Callable[[str], None]:
    """Say a line on the terminal now, past pytest's capture: for a fixture that works for
    minutes the first time (building an environment), so the run does not look hung."""

    def say(line: str) -> None:
        capture = pytestconfig.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            print(f"\n[ortf_ros tests] {line}", flush=True)

    return say
