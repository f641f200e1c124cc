"""The live recorder's tests over real DDS: a scene publisher child process, the recorder
as a child process (the colcon-installed executable, or the module), and an rclpy client
in the test process that drives the episode services and reads ``~/status``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rclpy
from child_process import kill_if_running
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from std_srvs.srv import SetBool, Trigger

from ortf_ros.synthetic_bag import TeleopBagInfo, write_teleop_bag

REPO = Path(__file__).resolve().parents[1]
RECORDER = "/ortf_recorder"


@dataclass(frozen=True)
class Scene:
    """What the scene publisher publishes, and the same scene as a bag can be written."""

    width: int = 64
    height: int = 48
    fps: int = 30
    joint_rate: int = 100
    command_rate: int = 100  # (at 30 Hz steps, a 50 Hz command is up to 20 ms from a step: past the tolerance)
    compressed: tuple[str, ...] = ("/overhead_camera/image_raw",)

    def arguments(self) -> list[str]:
        args = ["--width", str(self.width), "--height", str(self.height), "--fps", str(self.fps)]
        args += ["--joint-rate", str(self.joint_rate), "--command-rate", str(self.command_rate)]
        if self.compressed:
            args += ["--compressed-cameras", *self.compressed]
        return args

    def bag(self, path: Path, duration_s: float, start_ns: int) -> TeleopBagInfo:
        """The scene's first ``duration_s`` as an MCAP rosbag2: with the ``start_ns`` the
        publisher reported, the same messages, stamps and values it published."""
        return write_teleop_bag(
            path,
            "mcap",
            duration_s=duration_s,
            width=self.width,
            height=self.height,
            fps=self.fps,
            joint_rate_hz=self.joint_rate,
            command_rate_hz=self.command_rate,
            compressed_cameras=self.compressed,
            start_ns=start_ns,
        )


class Child:
    """A child process with its output in a log file."""

    def __init__(self, command: Sequence[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        with log.open("w") as out:
            self.process = subprocess.Popen(
                list(command), stdout=out, stderr=subprocess.STDOUT, env=env if env is not None else dict(os.environ)
            )

    def text(self) -> str:
        return self.log.read_text()

    def interrupt(self, timeout_s: float = 60) -> int:
        """SIGINT to its own pid (the process group would get it twice), and its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=timeout_s)

    def kill(self) -> None:
        kill_if_running(self.process)


def start_scene(scene: Scene, tmp: Path, *extra: str) -> Child:
    command = [sys.executable, "-m", "ortf_ros.ros.scene_publisher", *scene.arguments(), *extra]
    return Child([*command, "--report", str(tmp / "scene.json")], tmp / "scene.log")


def recorder_command(executable: Path | None, params: Path, *parameters: str) -> list[str]:
    """The installed ``ortf_recorder`` (or the module) with ``params`` and ``name:=value`` overrides."""
    command = [str(executable)] if executable is not None else [sys.executable, "-m", "ortf_ros.ros.recorder_node"]
    command += ["--ros-args", "--params-file", str(params)]
    for parameter in parameters:
        command += ["-p", parameter]
    return command


class Client:
    """An rclpy node of the test process that calls the recorder's services and hears its status."""

    def __init__(self) -> None:
        self.node = rclpy.create_node("ortf_recorder_test_client")
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )  # type: ignore[no-untyped-call]
        self.statuses: list[dict[str, Any]] = []
        self.node.create_subscription(String, f"{RECORDER}/status", self._status, latched)
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)  # type: ignore[no-untyped-call]
        self.labels = {
            name: self.node.create_publisher(String, f"{RECORDER}/{name}", reliable)
            for name in ("task", "failure_reason", "operator_notes")
        }

    def _status(self, message: String) -> None:
        self.statuses.append(json.loads(message.data))

    def spin_until(self, done: Callable[[], bool], timeout_s: float, what: str = "") -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, f"timed out: {what}"
            rclpy.spin_once(self.node, timeout_sec=0.02)

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(self.node, timeout_sec=0.02)

    def call(self, service: str, data: bool | None = None, timeout_s: float = 60) -> Any:
        kind: Any = Trigger if data is None else SetBool
        client = self.node.create_client(kind, f"{RECORDER}/{service}")
        try:
            assert client.wait_for_service(timeout_sec=timeout_s), f"no service {service}"
            request = kind.Request()
            if data is not None:
                request.data = data
            future = client.call_async(request)
            self.spin_until(future.done, timeout_s, service)
            return future.result()  # type: ignore[no-untyped-call]
        finally:
            self.node.destroy_client(client)

    def start_when_ready(self, recorder: Child, timeout_s: float = 60) -> Any:
        """``~/start_episode`` until it succeeds (it refuses while the warm-up lacks a stream)."""
        deadline = time.monotonic() + timeout_s
        while True:
            assert recorder.process.poll() is None, f"the recorder exited:\n{recorder.text()}"
            reply = self.call("start_episode")
            if reply.success:
                return reply
            assert time.monotonic() < deadline, f"never ready: {reply.message}\n{recorder.text()}"
            self.spin_for(0.3)

    def say(self, label: str, text: str) -> None:
        """Publish on ``~/<label>`` and wait until the recorder has a subscription to hear it."""
        publisher = self.labels[label]
        self.spin_until(lambda: publisher.get_subscription_count() > 0, 30, label)
        publisher.publish(String(data=text))

    def status(self) -> dict[str, Any]:
        count = len(self.statuses)
        self.spin_until(lambda: len(self.statuses) > count, 10, "a status")
        return self.statuses[-1]

    def close(self) -> None:
        self.node.destroy_node()  # type: ignore[no-untyped-call]
