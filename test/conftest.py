"""Shared fixtures. DDS traffic stays on this machine: every rclpy process the tests
start (this one included) runs with LOCALHOST discovery and a domain of its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_DOMAIN_ID"] = str(20 + os.getpid() % 80)
os.environ.pop("ROS_LOCALHOST_ONLY", None)

from ortf_ros.format.metadata import EpisodeRecord  # noqa: E402
from ortf_ros.synthetic import write_demo_dataset  # noqa: E402

SMALL = {"width": 64, "height": 48}


@pytest.fixture(autouse=True)
def _ros_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    os.environ["ROS_LOG_DIR"] = str(tmp_path_factory.getbasetemp() / "ros-log")
    yield


@pytest.fixture
def small_dataset(tmp_path: Path) -> tuple[Path, list[EpisodeRecord]]:
    """Three small episodes (two RGB cameras and depth); the third one failed."""
    root = tmp_path / "ds"
    records = write_demo_dataset(root, episodes=3, steps=12, **SMALL)
    return root, records
