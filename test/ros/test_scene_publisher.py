"""The scene publisher over real DDS on loopback, and the synthetic scene's options it needs.

``ortf_scene_publisher`` runs as a child process (its environment built from
``os.environ``, which conftest set up for DDS); a real rclpy node in this process takes
every message as raw CDR, decodes it with the real message classes and checks it against
``ortf_ros.synthetic``: frame numbers, joint values, the latched topics, and byte for byte
against a bag ``write_teleop_bag`` writes with the same options and ``start_ns``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message

from ortf_ros.errors import UsageError
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.ros.message_types import message_class
from ortf_ros.ros.scene_arguments import Options
from ortf_ros.ros.scene_publisher import ScenePublisher
from ortf_ros.ros.scene_publisher import main as scene_publisher_main
from ortf_ros.synthetic.bag import write_scene_bag, write_teleop_bag
from ortf_ros.synthetic.images import decode_frame_number, depth_frame
from ortf_ros.synthetic.motion import joint_positions, joint_state_names, joint_velocities, select_joints
from ortf_ros.synthetic.robot import teleop_urdf
from ortf_ros.synthetic.scene import TeleopConfig
from ortf_ros.synthetic.schedule import schedule, seconds, stamp_ns
from ortf_ros.synthetic.tf import SIDE_CAMERA_FRAME, static_transforms
from ortf_ros.synthetic.topics import (
    CAMERAS,
    TOPIC_CONTROLLER_STATE,
    TOPIC_DEPTH_IMAGE,
    TOPIC_JOINT_STATES,
    TOPIC_OVERHEAD_IMAGE,
    TOPIC_ROBOT_DESCRIPTION,
    TOPIC_SIDE_CAMERA_INFO,
    TOPIC_SIDE_IMAGE,
    TOPIC_TF_STATIC,
    TOPIC_WRIST_IMAGE,
)
from support.child_process import kill_if_running

WIDTH, HEIGHT = 64, 48
LATCHED = (TOPIC_ROBOT_DESCRIPTION, TOPIC_TF_STATIC)
OVERHEAD_COMPRESSED = TOPIC_OVERHEAD_IMAGE + "/compressed"
# The live scene: raw wrist camera, JPEG overhead camera, 16-bit depth; rates kept low
# enough for a Python subscriber on a loaded 2-core machine.
LIVE = TeleopConfig(
    fmt="mcap",
    width=WIDTH,
    height=HEIGHT,
    fps=30,
    joint_rate_hz=100,
    command_rate_hz=50,
    wrench_rate_hz=200,
    tf_rate_hz=50,
    compressed_cameras=(TOPIC_OVERHEAD_IMAGE,),
)
LIVE_ARGUMENTS = ["--width", str(WIDTH), "--height", str(HEIGHT), "--fps", "30", "--joint-rate", "100"]
LIVE_ARGUMENTS += ["--command-rate", "50", "--wrench-rate", "200", "--tf-rate", "50"]
LIVE_ARGUMENTS += ["--compressed-cameras", TOPIC_OVERHEAD_IMAGE]
RECEIVE_S = 1.5


@pytest.fixture(scope="module")
def ros() -> Iterator[None]:
    rclpy.init()
    yield
    rclpy.shutdown()


def start_publisher(log: Path, *arguments: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "ortf_ros.ros.scene_publisher", *arguments]
    with log.open("w") as out:
        return subprocess.Popen(command, env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT)


class Subscriber:
    """Raw, reliable, deep subscriptions; transient-local for the latched topics."""

    def __init__(self) -> None:
        self.node = rclpy.create_node("ortf_scene_test_subscriber")
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.received: dict[str, list[bytes]] = {}

    def subscribe(self, topic: str, msgtype: str) -> None:
        latched = topic in LATCHED
        qos = QoSProfile(  # type: ignore[no-untyped-call]
            depth=10_000,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
        )
        sink = self.received.setdefault(topic, [])
        # rclpy hands a raw subscription's callback the serialized bytes
        self.node.create_subscription(message_class(msgtype), topic, sink.append, qos, raw=True)

    def spin_until(self, done: Callable[[], bool], timeout_s: float, child: subprocess.Popen[bytes], log: Path) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, f"timed out; the publisher said:\n{log.read_text()}"
            assert child.poll() is None or done(), f"the publisher exited with {child.returncode}:\n{log.read_text()}"
            self.executor.spin_once(timeout_sec=0.01)

    def spin_for(self, seconds_: float) -> None:
        end = time.monotonic() + seconds_
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.01)

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()  # type: ignore[no-untyped-call]


def _decode(data: bytes, msgtype: str) -> Any:
    return deserialize_message(data, message_class(msgtype))


def _stamp(header: Any) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def _jpeg_frame_number(data: Any) -> int:
    frame = av.CodecContext.create("mjpeg", "r").decode(av.Packet(bytes(data)))[0]
    return decode_frame_number(frame.to_ndarray(format="rgb24"))


def test_a_subscriber_receives_the_scene_live(ros: None, tmp_path: Path) -> None:
    start_ns = time.time_ns()
    config = dataclasses.replace(LIVE, start_ns=start_ns)
    msgtypes = config.msgtypes()
    streams = {topic: msgtype for topic, msgtype in msgtypes.items() if topic not in LATCHED}
    assert OVERHEAD_COMPRESSED in streams and TOPIC_WRIST_IMAGE in streams and TOPIC_DEPTH_IMAGE in streams
    report_path, ready, log = tmp_path / "report.json", tmp_path / "ready", tmp_path / "publisher.log"
    subscriber = Subscriber()
    for topic, msgtype in streams.items():
        subscriber.subscribe(topic, msgtype)
    child = start_publisher(
        log,
        *LIVE_ARGUMENTS,
        *("--start-ns", str(start_ns), "--wait-topic", "all", "--depth", "1000"),
        *("--report", str(report_path), "--ready-file", str(ready)),
    )
    try:
        joints = subscriber.received[TOPIC_JOINT_STATES]
        subscriber.spin_until(lambda: len(joints) >= 30, 60, child, log)
        assert ready.exists()
        # Subscribed once the scene runs: the latched topics still arrive.
        for topic in LATCHED:
            subscriber.subscribe(topic, msgtypes[topic])
        wanted = round(RECEIVE_S * config.joint_rate_hz)
        subscriber.spin_until(
            lambda: len(joints) >= wanted and all(subscriber.received[t] for t in LATCHED), 60, child, log
        )
        child.send_signal(signal.SIGINT)
        subscriber.spin_until(lambda: child.poll() is not None, 30, child, log)
        assert child.returncode == 0, log.read_text()
        subscriber.spin_for(0.3)  # anything still in flight
    finally:
        kill_if_running(child)
        subscriber.close()
    output = log.read_text()
    assert "ortf_scene_publisher: published" in output and "lateness p50" in output, output

    received = subscriber.received
    report = json.loads(report_path.read_text())
    assert report["start_ns"] == start_ns and report["interrupted"] is True and report["duration_s"] is None
    assert set(report["topics"]) == set(msgtypes)
    for topic, entry in report["topics"].items():
        assert entry["msgtype"] == msgtypes[topic]
        assert entry["published"] == len(received[topic]), topic
        assert (entry["first_seq"], entry["last_seq"]) == (0, len(received[topic]) - 1), topic
        assert start_ns <= entry["first_wall_ns"] <= entry["last_wall_ns"] <= report["end_wall_ns"]
    assert report["timing"]["published"] == sum(e["published"] for e in report["topics"].values())
    assert report["timing"]["lateness_ms"]["p50"] is not None
    assert len(received[TOPIC_WRIST_IMAGE]) >= 40

    # Frame numbers: consecutive from 0 on the raw and the compressed camera, and the stamps.
    for topic in (TOPIC_WRIST_IMAGE, OVERHEAD_COMPRESSED):
        numbers, stamps = [], []
        for data in received[topic]:
            msg = _decode(data, msgtypes[topic])
            stamps.append(_stamp(msg.header))
            if topic == TOPIC_WRIST_IMAGE:
                assert (msg.encoding, msg.width, msg.height) == ("rgb8", WIDTH, HEIGHT)
                numbers.append(decode_frame_number(np.frombuffer(bytes(msg.data), np.uint8).reshape(HEIGHT, WIDTH, 3)))
            else:
                assert "jpeg" in msg.format
                numbers.append(_jpeg_frame_number(msg.data))
        assert numbers == list(range(len(received[topic]))), topic
        assert stamps == [stamp_ns(seq, config.fps, start_ns) for seq in numbers], topic
    for seq, data in enumerate(received[TOPIC_DEPTH_IMAGE]):
        depth = _decode(data, msgtypes[TOPIC_DEPTH_IMAGE])
        assert depth.encoding == "16UC1"
        pixels = np.frombuffer(bytes(depth.data), "<u2").reshape(HEIGHT, WIDTH)
        np.testing.assert_array_equal(pixels, depth_frame(seq, WIDTH, HEIGHT))

    # Joint values are the synthetic scene's at each message's stamp.
    for seq, data in enumerate(received[TOPIC_JOINT_STATES]):
        msg = _decode(data, msgtypes[TOPIC_JOINT_STATES])
        stamp = _stamp(msg.header)
        assert stamp == stamp_ns(seq, config.joint_rate_hz, start_ns)
        names = tuple(msg.name)
        assert names == joint_state_names(seq)
        t = seconds(stamp, start_ns)
        np.testing.assert_array_equal(msg.position, select_joints(joint_positions(t), names))
        np.testing.assert_array_equal(msg.velocity, select_joints(joint_velocities(t), names))

    (description,) = received[TOPIC_ROBOT_DESCRIPTION]
    assert _decode(description, msgtypes[TOPIC_ROBOT_DESCRIPTION]).data == teleop_urdf()
    (static,) = received[TOPIC_TF_STATIC]
    transforms = _decode(static, msgtypes[TOPIC_TF_STATIC]).transforms
    assert [(t.header.frame_id, t.child_frame_id) for t in transforms] == [
        (t.parent, t.child) for t in static_transforms()
    ]

    # The same scene written to a bag: every message received is the bag's, byte for byte.
    longest_s = max((len(received[topic]) + 1) / rate for topic, rate in config.rates().items() if rate is not None)
    bag = write_scene_bag(
        tmp_path / "same-scene", replace(config, fmt="mcap", duration_s=math.ceil(longest_s), start_ns=start_ns)
    )
    in_bag: dict[str, list[bytes]] = {topic: [] for topic in msgtypes}
    with BagSource(bag.path) as source:
        for message in source.messages():
            in_bag[message.topic].append(bytes(message.data))
    # DDS pads a serialized message to a multiple of 4 bytes (a JPEG's length is anything).
    for topic, got in received.items():
        assert got == [data + bytes(-len(data) % 4) for data in in_bag[topic][: len(got)]], topic


def test_a_finite_scene_ends_by_itself(tmp_path: Path) -> None:
    """``--duration``: the schedule of a bag of that length, the side camera without depth, no waiting."""
    report_path, ready, log = tmp_path / "report.json", tmp_path / "ready", tmp_path / "publisher.log"
    child = start_publisher(
        log,
        *("--duration", "0.4", "--width", str(WIDTH), "--height", str(HEIGHT), "--side-camera", "--no-depth"),
        *("--compressed-cameras", TOPIC_SIDE_IMAGE + "/compressed"),
        *("--report", str(report_path), "--ready-file", str(ready)),
    )
    try:
        assert child.wait(timeout=60) == 0, log.read_text()
    finally:
        kill_if_running(child)
    assert ready.exists()
    config = TeleopConfig(
        fmt="mcap",
        duration_s=0.4,
        width=WIDTH,
        height=HEIGHT,
        with_depth=False,
        side_camera=True,
        compressed_cameras=(TOPIC_SIDE_IMAGE,),
    )
    report = json.loads(report_path.read_text())
    assert report["interrupted"] is False and report["duration_s"] == 0.4
    assert report["config"]["side_camera"] is True and report["config"]["compressed_cameras"] == [TOPIC_SIDE_IMAGE]
    assert {topic: entry["published"] for topic, entry in report["topics"].items()} == {
        topic: config.count(topic) for topic in config.rates()
    }
    assert report["topics"][TOPIC_SIDE_IMAGE + "/compressed"]["msgtype"] == "sensor_msgs/msg/CompressedImage"
    assert report["start_ns"] == report["t0_wall_ns"]  # stamps are wall-clock times by default
    assert 0.35 < report["elapsed_s"] < 5


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--width", "32", "--height", "32"], "image size 32x32"),
        (["--fps", "0"], "argument --fps: invalid positive int value: '0'"),
        (["--duration", "-1"], "argument --duration"),
        (["--compressed-cameras", TOPIC_SIDE_IMAGE], "compressed camera '/side_camera/image_raw'"),
        (["--wait-topic", "/nope"], "--wait-topic /nope: not published"),
        (["--wait-topic", TOPIC_SIDE_IMAGE], "--wait-topic /side_camera/image_raw: not published"),
    ],
)
def test_bad_options_are_one_line(arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert scene_publisher_main(arguments) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"ortf_scene_publisher: {message}") and captured.err.count("\n") == 1, captured.err


def test_bad_option_exit_code(tmp_path: Path) -> None:
    log = tmp_path / "publisher.log"
    child = start_publisher(log, "--depth", "0")
    try:
        assert child.wait(timeout=60) == 2
    finally:
        kill_if_running(child)
    assert log.read_text() == "ortf_scene_publisher: argument --depth: invalid positive int value: '0'\n"


# ---------------------------------------------------------------- the synthetic scene's options


def test_per_camera_compression_and_side_camera_in_a_bag(tmp_path: Path) -> None:
    info = write_teleop_bag(
        tmp_path / "three-cameras",
        "mcap",
        duration_s=0.3,
        compressed_cameras=(TOPIC_OVERHEAD_IMAGE,),
        side_camera=True,
        with_depth=False,
    )
    expected = {
        OVERHEAD_COMPRESSED: "sensor_msgs/msg/CompressedImage",
        TOPIC_WRIST_IMAGE: "sensor_msgs/msg/Image",
        TOPIC_SIDE_IMAGE: "sensor_msgs/msg/Image",
        TOPIC_SIDE_CAMERA_INFO: "sensor_msgs/msg/CameraInfo",
    }
    assert expected.items() <= info.msgtypes.items()
    assert TOPIC_OVERHEAD_IMAGE not in info.msgtypes and TOPIC_DEPTH_IMAGE not in info.msgtypes
    with BagSource(info.path) as source:
        assert {t.topic: t.msgtype for t in source.topics()} == info.msgtypes
        assert {t.topic: t.count for t in source.topics()} == info.counts
        assert info.counts[TOPIC_SIDE_IMAGE] == info.counts[OVERHEAD_COMPRESSED] == 9
        messages: dict[str, list[Any]] = {}
        for message in source.messages(set(expected) | set(LATCHED)):
            messages.setdefault(message.topic, []).append(_decode(bytes(message.data), message.msgtype))
    for seq, image in enumerate(messages[TOPIC_SIDE_IMAGE]):
        assert image.header.frame_id == SIDE_CAMERA_FRAME
        pixels = np.frombuffer(bytes(image.data), np.uint8).reshape(48, 64, 3)
        assert decode_frame_number(pixels) == seq
    assert [_jpeg_frame_number(m.data) for m in messages[OVERHEAD_COMPRESSED]] == list(range(9))
    assert {m.header.frame_id for m in messages[TOPIC_SIDE_CAMERA_INFO]} == {SIDE_CAMERA_FRAME}
    (static,) = messages[TOPIC_TF_STATIC]
    children = [t.child_frame_id for t in static.transforms]
    assert children == [t.child for t in static_transforms(side_camera=True)] and children[-1] == SIDE_CAMERA_FRAME
    (description,) = messages[TOPIC_ROBOT_DESCRIPTION]
    assert description.data == info.urdf == teleop_urdf(side_camera=True)
    assert 'name="side_camera_joint"' in info.urdf and "side_camera" not in teleop_urdf()


def test_compressing_every_camera_by_name_is_compressed(tmp_path: Path) -> None:
    """``compressed_cameras`` naming both cameras writes what ``compressed=True`` writes."""

    def payloads(path: Path) -> list[tuple[str, int, bytes]]:
        with BagSource(path) as source:
            return [(m.topic, m.receive_ns, bytes(m.data)) for m in source.messages()]

    write_teleop_bag(tmp_path / "all", "mcap", duration_s=0.2, compressed=True)
    write_teleop_bag(tmp_path / "named", "mcap", duration_s=0.2, compressed_cameras=tuple(CAMERAS))
    assert payloads(tmp_path / "all") == payloads(tmp_path / "named")
    with pytest.raises(ValueError, match="compressed camera '/side_camera/image_raw'"):
        write_teleop_bag(tmp_path / "bad", "mcap", compressed_cameras=(TOPIC_SIDE_IMAGE,))
    assert not (tmp_path / "bad").exists()


def test_the_endless_schedule_extends_the_finite_one() -> None:
    config = TeleopConfig(fmt="mcap", duration_s=1.0, side_camera=True)
    finite = list(schedule(config))
    endless = schedule(config, endless=True)
    prefix = []
    for event in endless:
        if event.receive_ns > finite[-1].receive_ns:
            break
        prefix.append(event)
    assert [e for e in prefix if e.stamp_ns < config.start_ns + 1_000_000_000] == finite
    assert next(endless).seq > 0


def test_depth_frames_are_the_formula() -> None:
    y, x = np.mgrid[0:48, 0:64]
    for seq in (0, 1, 1357, 9499, 10**7, 4**12 + 5):
        expected = ((500 + 3 * x + 5 * y + 7 * seq) % 9500 + 300).astype(np.uint16)
        np.testing.assert_array_equal(depth_frame(seq, 64, 48), expected)


def test_a_controller_state_is_refused_before_the_scene_starts() -> None:
    options = Options(TeleopConfig("mcap", controller_state=True), False, None, (), 10, None, None)
    with pytest.raises(UsageError, match=f"{TOPIC_CONTROLLER_STATE}: written to bags only"):
        ScenePublisher(options)
