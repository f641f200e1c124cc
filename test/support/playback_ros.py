"""The player as a child process, and a real rclpy subscriber in the test process that
takes every message as raw CDR (as a recorder would) and can write them to a bag."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import StoragePlugin, Writer
from std_srvs.srv import Trigger

from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.samples import RawMessage
from ortf_ros.playback.rosmsg import RosMessages
from ortf_ros.ros.message_types import message_class
from support.child_process import kill_if_running

REPO = Path(__file__).resolve().parents[2]
PLAYER_PARAMS = REPO / "config" / "playback.yaml"
PLAYER = "/ortf_player"
SUBSCRIBER_DEPTH = 10_000


def start_player(dataset: Path | None, log: Path, *parameters: str) -> subprocess.Popen[bytes]:
    """``ortf_player`` with the repository's config/playback.yaml and ``name:=value`` overrides."""
    command = [sys.executable, "-m", "ortf_ros.ros.player_node", "--ros-args", "--params-file", str(PLAYER_PARAMS)]
    command += ["-p", f"dataset:={dataset}"] if dataset is not None else []
    for parameter in parameters:
        command += ["-p", parameter]
    with log.open("w") as out:
        return subprocess.Popen(command, env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT)


@dataclass
class Received:
    receive_ns: int
    data: bytes


@dataclass
class Recorder:
    """Raw subscriptions to the given topics (topic -> message type), reliable, deep, and
    transient-local where the player latches."""

    topics: dict[str, str]
    latched: set[str] = field(default_factory=set)
    received: dict[str, list[Received]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.node = rclpy.create_node("ortf_playback_test_recorder")
        self.decoder = Decoder()
        for topic, msgtype in self.topics.items():
            self.received[topic] = []
            durability = DurabilityPolicy.TRANSIENT_LOCAL if topic in self.latched else DurabilityPolicy.VOLATILE
            qos = QoSProfile(depth=SUBSCRIBER_DEPTH, reliability=ReliabilityPolicy.RELIABLE, durability=durability)  # type: ignore[no-untyped-call]
            # rclpy passes the message info to a callback that takes two arguments (its types say one)
            keeper = self._keeper(topic)
            self.node.create_subscription(message_class(msgtype), topic, keeper, qos, raw=True)  # type: ignore[arg-type]

    def _keeper(self, topic: str) -> Callable[[bytes, dict[str, int]], None]:
        """Keeps each message with the time the middleware received it (not when this
        process's executor got round to the callback)."""
        sink = self.received[topic]
        return lambda data, info: sink.append(Received(info["received_timestamp"], data))

    def spin_until(self, done: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, "timed out"
            rclpy.spin_once(self.node, timeout_sec=0.01)

    def wait_for_publishers(self, player: subprocess.Popen[bytes], log: Path, timeout_s: float = 30) -> None:
        def matched() -> bool:
            assert player.poll() is None, f"the player exited with {player.returncode}:\n{log.read_text()}"
            return all(self.node.count_publishers(topic) > 0 for topic in self.topics)

        self.spin_until(matched, timeout_s)

    def call(self, service: str, timeout_s: float = 30) -> Any:
        client = self.node.create_client(Trigger, f"{PLAYER}/{service}")
        assert client.wait_for_service(timeout_sec=timeout_s), service
        settle = time.monotonic() + 0.5  # (for the player's response writer to see this client: see RecorderClient)
        self.spin_until(lambda: time.monotonic() > settle, 1.0)
        future = client.call_async(Trigger.Request())
        self.spin_until(future.done, timeout_s)
        self.node.destroy_client(client)
        return future.result()  # type: ignore[no-untyped-call]

    def drain(self, player: subprocess.Popen[bytes], log: Path, timeout_s: float = 60) -> None:
        """Spin until the player exits 0, then a little longer for what is in flight."""
        self.spin_until(lambda: player.poll() is not None, timeout_s)
        assert player.returncode == 0, log.read_text()
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            rclpy.spin_once(self.node, timeout_sec=0.01)

    def messages(self, topic: str) -> list[Any]:
        msgtype = self.topics[topic]
        return [self.decoder.decode(RawMessage(topic, msgtype, r.receive_ns, r.data)) for r in self.received[topic]]

    def write_bag(self, path: Path) -> None:
        """Everything received, in receive order, as rosbags writes a recording."""
        store = RosMessages().store
        everything = sorted((r.receive_ns, topic, r.data) for topic, got in self.received.items() for r in got)
        with Writer(path, version=Writer.VERSION_LATEST, storage_plugin=StoragePlugin.MCAP) as writer:
            connections = {
                topic: writer.add_connection(topic, msgtype, typestore=store) for topic, msgtype in self.topics.items()
            }
            for receive_ns, topic, data in everything:
                writer.write(connections[topic], receive_ns, data)

    def close(self) -> None:
        self.node.destroy_node()  # type: ignore[no-untyped-call]


DEEP_HISTORY = tuple(f"qos.{kind}.depth:=1000" for kind in ("image", "depth", "camera_info"))
"""A reliable publisher keeps its last ``depth`` messages for a subscriber that lags; the
default 10 frames (0.3 s) are not enough for this process's Python callbacks on a loaded
machine, and a test that counts every message must not lose one."""


def play_through(recorder: Recorder, dataset: Path, log: Path, *parameters: str) -> None:
    """Start the player paused, wait until every topic is matched, resume, and receive to the end."""
    player = start_player(dataset, log, "start_paused:=true", *DEEP_HISTORY, *parameters)
    try:
        recorder.wait_for_publishers(player, log)
        assert recorder.call("resume").success
        recorder.drain(player, log)
    finally:
        kill_if_running(player)
