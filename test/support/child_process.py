"""Children that a test starts do not outlive it, whatever assertion failed first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any


def kill_if_running(child: subprocess.Popen[Any]) -> None:
    """SIGKILL ``child`` unless it already exited, and reap it; for a ``finally``."""
    if child.poll() is None:
        child.kill()
        child.wait()


def kill_when(arguments: list[str], ready: Callable[[], bool]) -> None:
    """Run ``python ARGUMENTS`` and SIGKILL it as soon as ``ready()``; fails if it ended first."""
    child = subprocess.Popen(
        [sys.executable, *arguments], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ)
    )
    try:
        deadline = time.monotonic() + 120
        while not ready() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL, f"{arguments} ended before it could be killed"
    finally:
        kill_if_running(child)


# Put before a child's script: the child plays a machine without ROS (test_ros_env, test_playback_export).
BLOCK_ROS = """
import sys
class BlockRos:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"rclpy", "rosidl_runtime_py", "sensor_msgs", "tf2_msgs"}:
            raise ImportError(f"{name} is blocked: this process plays a machine without ROS")
sys.meta_path.insert(0, BlockRos())
"""
