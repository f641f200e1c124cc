"""The live recorder's tests over real DDS: a scene publisher child process, the recorder
as a child process (the colcon-installed executable, or the module), and a
``RecorderClient`` in the test process that drives the episode services and reads ``~/status``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import rclpy

from ortf_ros.ros.recorder_client import RecorderClient
from ortf_ros.synthetic.bag import TeleopBagInfo, write_scene_bag
from ortf_ros.synthetic.scene import H264Message, TeleopConfig
from support.child_process import kill_if_running

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Scene:
    """What the scene publisher publishes, and the same scene as a bag can be written."""

    width: int = 64
    height: int = 48
    fps: int = 30
    joint_rate: int = 100
    command_rate: int = 100  # (at 30 Hz steps, a 50 Hz command is up to 20 ms from a step: past the tolerance)
    compressed: tuple[str, ...] = ("/overhead_camera/image_raw",)
    lidar: bool = False  # a LaserScan and a PointCloud2 (TeleopConfig.lidar)
    h264: tuple[str, ...] = ()  # image topics published H.264 on <topic>/h264
    h264_message: H264Message = "CompressedVideo"
    detections: bool = False  # vision_msgs/Detection2DArray per wrist frame (synthetic.detections)

    def arguments(self) -> list[str]:
        args = ["--width", str(self.width), "--height", str(self.height), "--fps", str(self.fps)]
        args += ["--joint-rate", str(self.joint_rate), "--command-rate", str(self.command_rate)]
        if self.compressed:
            args += ["--compressed-cameras", *self.compressed]
        if self.lidar:
            args += ["--lidar"]
        if self.h264:
            args += ["--h264-cameras", *self.h264, "--h264-message", self.h264_message]
        if self.detections:
            args.append("--detections")
        return args

    def teleop(self, duration_s: float, start_ns: int) -> TeleopConfig:
        """The scene as ``ortf_ros.synthetic`` describes it."""
        return TeleopConfig(
            fmt="mcap",
            duration_s=duration_s,
            width=self.width,
            height=self.height,
            fps=self.fps,
            joint_rate_hz=self.joint_rate,
            command_rate_hz=self.command_rate,
            compressed_cameras=self.compressed,
            h264_cameras=self.h264,
            h264_message=self.h264_message,
            start_ns=start_ns,
            lidar=self.lidar,
            detections=self.detections,
        )

    def bag(self, path: Path, duration_s: float, start_ns: int) -> TeleopBagInfo:
        """The scene's first ``duration_s`` as an MCAP rosbag2: with the ``start_ns`` the
        publisher reported, the same messages, stamps and values it published."""
        return write_scene_bag(path, self.teleop(duration_s, start_ns))


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

    def interrupt(self, timeout_s: float = 60, *, twice: bool = False) -> int:
        """SIGINT to its own pid, and its exit code. ``twice``: two at once, as a Ctrl-C in a
        terminal running ``ros2 launch`` delivers (the process group's, then launch's)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            if twice:
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


def client_for(recorder: Child | None = None) -> RecorderClient:
    """A ``RecorderClient`` on a node of the test process (whose rclpy the test initialised),
    that stops waiting when ``recorder`` exits."""
    alive = (lambda: recorder.process.poll() is None) if recorder is not None else (lambda: True)
    return RecorderClient(rclpy.create_node("ortf_recorder_test_client"), alive=alive)


RECORDER_PARAMS = REPO / "config" / "record.yaml"
"""The parameters ``record.launch.py`` passes to the recorder."""


def record_one_episode(
    scene: Scene,
    tmp: Path,
    mapping: Path,
    root: Path,
    seconds: float,
    *scene_args: str,
    executable: Path | None = None,
    params: Path = RECORDER_PARAMS,
    env: dict[str, str] | None = None,
    recorder_args: tuple[str, ...] = (),
) -> str:
    """The scene published (``scene_args`` added to its options) and one episode of it
    recorded over DDS by the recorder module (or the installed ``executable``, with ``params``,
    ``env`` and ``recorder_args`` added to its command line) with ``mapping`` into ``root``:
    started when ready, ``seconds`` long, stopped, both processes interrupted. The recorder's
    log, which holds no traceback."""
    publisher = start_scene(scene, tmp, *scene_args)
    command = recorder_command(executable, params, f"output:={root}", f"mapping:={mapping}", *recorder_args)
    recorder = Child(command, tmp / "rec.log", env=env)
    client = client_for(recorder)
    try:
        assert client.start_when_ready().success
        client.spin_for(seconds)
        reply = client.call("stop_episode")
        assert reply.success, reply.message
        assert recorder.interrupt() == 0, recorder.text()
        publisher.interrupt()
    finally:
        client.close()
        recorder.kill()
        publisher.kill()
    log = recorder.text()
    assert "Traceback" not in log, log
    return log
