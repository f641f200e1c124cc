"""The teleop bag generator: its analytic ground truth, and bags that rosbags' own readers accept.

The generator is the reference every converter test compares against, so its pure
functions are checked here independently (rotation matrices, finite differences, an
XML parse of the URDF), and its bags are read back with rosbags' readers rather than
with the project's source.
"""

from __future__ import annotations

import itertools
import math
import tracemalloc
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import yaml
from rosbags.highlevel import AnyReader
from rosbags.interfaces import ConnectionExtRosbag2, QosDurability
from rosbags.rosbag2 import Reader as Rosbag2Reader

from ortf_ros.errors import ConversionError
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.images import CODE_DIGITS, decode_frame_number, depth_frame, rgb_frame
from ortf_ros.synthetic.motion import (
    COMMAND_LEAD_S,
    CONTROLLER_JOINTS,
    JOINT_STATE_ORDER,
    joint_command,
    joint_efforts,
    joint_positions,
    joint_state_names,
    joint_velocities,
    select_joints,
)
from ortf_ros.synthetic.robot import ARM_JOINTS, FINGER_JOINTS, JOINTS, teleop_urdf
from ortf_ros.synthetic.scene import TeleopConfig
from ortf_ros.synthetic.schedule import BASE_LATENCY_NS, JITTER_STEP_NS, schedule, stamp_ns
from ortf_ros.synthetic.tf import HAND, STATIC_TRANSFORMS, dynamic_transforms, ee_pose, quat_from_rpy
from ortf_ros.synthetic.topics import (
    TOPIC_CONTROLLER_STATE,
    TOPIC_DEPTH_IMAGE,
    TOPIC_JOINT_COMMAND,
    TOPIC_JOINT_STATES,
    TOPIC_OVERHEAD_IMAGE,
    TOPIC_ROBOT_DESCRIPTION,
    TOPIC_TF,
    TOPIC_TF_STATIC,
    TOPIC_WRENCH,
    TOPIC_WRIST_IMAGE,
)
from ortf_ros.synthetic.typestore import CONTROLLER_STATE_TYPE

TFMESSAGE_MD5 = "94810edda583a504dfda3829e70d7eec"  # tf2_msgs/TFMessage and tf/tfMessage alike


def _matrix(q: Any) -> np.ndarray:
    """Rotation matrix of an (x, y, z, w) unit quaternion, written out independently."""
    x, y, z, w = (float(v) for v in q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def _link(joint: ET.Element, tag: str) -> str:
    element = joint.find(tag)
    assert element is not None, tag
    return element.get("link", "")


def _homogeneous(translation: Any, rotation: Any) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3] = _matrix(rotation)
    m[:3, 3] = translation
    return m


# ---------------------------------------------------------------- analytic content


def test_joint_velocities_are_the_derivative_of_positions() -> None:
    h = 1e-6
    for t in (0.0, 0.37, 5.0, 123.4):
        numeric = (joint_positions(t + h) - joint_positions(t - h)) / (2 * h)
        np.testing.assert_allclose(joint_velocities(t), numeric, atol=1e-6)
    assert joint_positions(0.3).shape == (len(JOINTS),)
    fingers = np.array([joint_positions(t)[-2:] for t in np.linspace(0, 10, 101)])
    assert fingers.min() >= 0 and fingers.max() <= 0.04


def test_command_leads_the_measured_positions() -> None:
    np.testing.assert_array_equal(joint_command(1.0), joint_positions(1.0 + COMMAND_LEAD_S))


def test_joint_state_names_are_shuffled_and_sometimes_partial() -> None:
    assert sorted(JOINT_STATE_ORDER) == sorted(JOINTS) and JOINT_STATE_ORDER != JOINTS
    assert JOINTS == ARM_JOINTS + FINGER_JOINTS
    subsets = [joint_state_names(seq) for seq in range(10)]
    assert [len(s) for s in subsets] == [9, 9, 9, 9, 2] * 2
    assert set(subsets[4]) == set(FINGER_JOINTS)
    values = np.arange(len(JOINTS), dtype=np.float64)
    picked = select_joints(values, JOINT_STATE_ORDER)
    assert [JOINTS[int(i)] for i in picked] == list(JOINT_STATE_ORDER)


def test_quat_from_rpy_is_the_urdf_convention() -> None:
    roll, pitch, yaw = 0.3, -1.1, 2.5
    rx = np.array([[1, 0, 0], [0, math.cos(roll), -math.sin(roll)], [0, math.sin(roll), math.cos(roll)]])
    ry = np.array([[math.cos(pitch), 0, math.sin(pitch)], [0, 1, 0], [-math.sin(pitch), 0, math.cos(pitch)]])
    rz = np.array([[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]])
    np.testing.assert_allclose(_matrix(quat_from_rpy(roll, pitch, yaw)), rz @ ry @ rx, atol=1e-12)


def test_ee_pose_is_the_composed_tf_chain() -> None:
    for t in (0.0, 0.5, 3.3, 60.0):
        elbow, hand = dynamic_transforms(t)
        assert (elbow.child, hand.parent, hand.child) == ("arm_link4", "arm_link4", HAND)
        chain = _homogeneous(elbow.translation, elbow.rotation_xyzw) @ _homogeneous(
            hand.translation, hand.rotation_xyzw
        )
        position, rotation = ee_pose(t)
        np.testing.assert_allclose(position, chain[:3, 3], atol=1e-12)
        np.testing.assert_allclose(_matrix(rotation), chain[:3, :3], atol=1e-12)
        assert np.linalg.norm(rotation) == pytest.approx(1.0)
        assert all(abs(v) > 1e-3 for v in hand.rotation_xyzw[:3]) or t == 0.0  # not a single-axis rotation
    # It moves: the pose changes over a tenth of a second.
    assert np.linalg.norm(ee_pose(1.1)[0] - ee_pose(1.0)[0]) > 1e-3


def test_urdf_holds_the_arm_fingers_and_cameras() -> None:
    root = ET.fromstring(teleop_urdf())
    joints = {j.get("name"): j for j in root.iter("joint")}
    movable = [n for n, j in joints.items() if j.get("type") != "fixed"]
    assert movable == list(JOINTS)
    assert [joints[n].get("type") for n in JOINTS] == ["revolute"] * 7 + ["prismatic"] * 2
    parent_of = {_link(j, "child"): _link(j, "parent") for j in joints.values()}
    chain = [HAND]
    while chain[-1] in parent_of:
        chain.append(parent_of[chain[-1]])
    assert chain == [HAND, *(f"arm_link{i}" for i in range(7, 0, -1)), "base_link", "world"]
    for name in FINGER_JOINTS:
        assert _link(joints[name], "parent") == HAND
    # The fixed frames agree with /tf_static.
    for tf in STATIC_TRANSFORMS:
        (joint,) = [j for j in joints.values() if (_link(j, "parent"), _link(j, "child")) == (tf.parent, tf.child)]
        assert joint.get("type") == "fixed"
        origin = joint.find("origin")
        assert origin is not None
        xyz = [float(v) for v in origin.get("xyz", "").split()]
        rpy = [float(v) for v in origin.get("rpy", "").split()]
        assert xyz == pytest.approx(tf.translation)
        np.testing.assert_allclose(_matrix(quat_from_rpy(*rpy)), _matrix(tf.rotation_xyzw), atol=1e-12)


@pytest.mark.parametrize(("width", "height"), [(64, 48), (320, 240), (640, 480)])
def test_frame_numbers_survive_noise(width: int, height: int) -> None:
    rng = np.random.default_rng(0)
    for seq in (0, 1, 3, 4, 63, 1000, 17_999, 4**CODE_DIGITS - 1):
        frame = rgb_frame(TOPIC_WRIST_IMAGE, seq, width, height)
        assert frame.shape == (height, width, 3) and frame.dtype == np.uint8
        assert decode_frame_number(frame) == seq
        noisy = np.clip(frame.astype(np.int16) + rng.integers(-25, 26, frame.shape), 0, 255).astype(np.uint8)
        assert decode_frame_number(noisy) == seq
    assert not np.array_equal(rgb_frame(TOPIC_WRIST_IMAGE, 5, 64, 48), rgb_frame(TOPIC_OVERHEAD_IMAGE, 5, 64, 48))
    # Outside the code blocks the picture moves from frame to frame.
    assert not np.array_equal(
        rgb_frame(TOPIC_WRIST_IMAGE, 5, 320, 240)[32:], rgb_frame(TOPIC_WRIST_IMAGE, 6, 320, 240)[32:]
    )


def test_frame_numbers_survive_h264() -> None:
    width, height, seqs = 64, 48, list(range(0, 900, 29))
    codec = av.CodecContext.create("libx264", "w")
    codec.width, codec.height, codec.pix_fmt = width, height, "yuv420p"
    codec.options = {"preset": "ultrafast", "crf": "30"}
    packets = []
    for seq in seqs:
        packets += codec.encode(av.VideoFrame.from_ndarray(rgb_frame(TOPIC_WRIST_IMAGE, seq, width, height), "rgb24"))
    packets += codec.encode(None)
    decoder = av.CodecContext.create("h264", "r")
    frames = [f for p in [*packets, None] for f in decoder.decode(p)]
    assert [decode_frame_number(f.to_ndarray(format="rgb24")) for f in frames] == seqs


def test_image_size_must_hold_the_code() -> None:
    with pytest.raises(ValueError, match="image size 32x32"):
        rgb_frame(TOPIC_WRIST_IMAGE, 0, 32, 32)


def test_depth_is_an_exact_function_of_the_sequence_number() -> None:
    depth = depth_frame(7, 64, 48)
    assert depth.dtype == np.uint16 and depth.shape == (48, 64)
    np.testing.assert_array_equal(depth, depth_frame(7, 64, 48))
    assert not np.array_equal(depth, depth_frame(8, 64, 48))
    assert depth.min() >= 300 and depth.max() < 10_000


def _events_by_topic(config: TeleopConfig) -> dict[str, list[Any]]:
    """The schedule's events by topic, after checking they come in receive order and as many as the scene says."""
    events = list(schedule(config))
    assert [e.receive_ns for e in events] == sorted(e.receive_ns for e in events)
    by_topic: dict[str, list[Any]] = {}
    for event in events:
        by_topic.setdefault(event.topic, []).append(event)
    assert {topic: len(v) for topic, v in by_topic.items()} == {t: config.count(t) for t in config.rates()}
    return by_topic


def test_schedule_times_and_counts() -> None:
    config = TeleopConfig(fmt="mcap", duration_s=0.5, wrench_rate_hz=1000)
    by_topic = _events_by_topic(config)
    assert len(by_topic[TOPIC_WRENCH]) == 500 and len(by_topic[TOPIC_OVERHEAD_IMAGE]) == 15
    for topic, topic_events in by_topic.items():
        rate = config.rates()[topic]
        assert [e.seq for e in topic_events] == list(range(len(topic_events)))
        receive = [e.receive_ns for e in topic_events]
        assert all(a < b for a, b in itertools.pairwise(receive)), topic
        for e in topic_events:
            assert e.stamp_ns == (config.start_ns if rate is None else stamp_ns(e.seq, rate, config.start_ns))
            assert 0 <= e.receive_ns - e.stamp_ns - BASE_LATENCY_NS[topic] <= 10 * JITTER_STEP_NS


def test_schedule_receive_offsets_and_silences() -> None:
    """A topic received later by an offset, one silent for a while, one that stops for good."""
    config = TeleopConfig(
        fmt="mcap",
        duration_s=1.0,
        receive_offsets_s=((TOPIC_JOINT_STATES, 100.0),),
        silences_s=((TOPIC_WRIST_IMAGE, 0.2, 0.3), (TOPIC_OVERHEAD_IMAGE, 0.5, math.inf)),
    )
    by_topic = _events_by_topic(config)
    joints = by_topic[TOPIC_JOINT_STATES]
    assert all(e.receive_ns - e.stamp_ns >= 100 * 10**9 for e in joints) and len(joints) == 100
    wrist = [round((e.stamp_ns - config.start_ns) * 30 / 1e9) for e in by_topic[TOPIC_WRIST_IMAGE]]
    assert wrist == [*range(6), *range(9, 30)]  # frames 6, 7, 8 (0.2 to 0.3 s) not published
    assert len(by_topic[TOPIC_OVERHEAD_IMAGE]) == 15  # 0 .. 0.5 s
    endless = itertools.islice(schedule(config, endless=True), 20_000)
    assert max(e.seq for e in endless if e.topic == TOPIC_OVERHEAD_IMAGE) == 14  # stopped, even endless
    with pytest.raises(ValueError, match="silences_s: '/nowhere' is not a topic of the scene"):
        TeleopConfig(fmt="mcap", silences_s=(("/nowhere", 0.0, 1.0),))


# ---------------------------------------------------------------- written bags, read by rosbags


@pytest.mark.parametrize("fmt", ["mcap", "sqlite3", "ros1"])
def test_rosbags_reads_what_was_written(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / ("teleop.bag" if fmt == "ros1" else "teleop")
    info = write_teleop_bag(path, fmt, duration_s=0.3, wrench_rate_hz=200)  # type: ignore[arg-type]
    assert info.path == path and info.fmt == fmt and info.message_count == sum(info.counts.values())
    assert info.counts[TOPIC_WRENCH] == 60 and info.counts[TOPIC_JOINT_STATES] == 30
    assert info.counts[TOPIC_DEPTH_IMAGE] == 9 and info.counts[TOPIC_TF_STATIC] == 1
    with AnyReader([path]) as reader:
        counts: dict[str, int] = {}
        for conn in reader.connections:
            counts[conn.topic] = counts.get(conn.topic, 0) + conn.msgcount
        assert counts == info.counts
        assert reader.start_time == info.first_receive_ns
        assert reader.end_time == info.last_receive_ns + 1
        for conn, _, data in reader.messages([c for c in reader.connections if c.topic == TOPIC_ROBOT_DESCRIPTION]):
            assert reader.deserialize(data, conn.msgtype).data == info.urdf  # type: ignore[attr-defined]
        image = next(c for c in reader.connections if c.topic == TOPIC_OVERHEAD_IMAGE)
        for seq, (conn, _, data) in enumerate(reader.messages([image])):
            msg: Any = reader.deserialize(data, conn.msgtype)
            assert decode_frame_number(np.asarray(msg.data).reshape(48, 64, 3)) == seq


def test_ros1_legacy_tf(tmp_path: Path) -> None:
    path = tmp_path / "old.bag"
    write_teleop_bag(path, "ros1", duration_s=0.2, legacy_tf=True, bag_compression="bz2")
    with AnyReader([path]) as reader:
        types = {c.topic: (c.msgtype, c.digest) for c in reader.connections}
        assert types[TOPIC_TF] == ("tf/msg/tfMessage", TFMESSAGE_MD5)
        assert types[TOPIC_TF_STATIC] == ("tf2_msgs/msg/TFMessage", TFMESSAGE_MD5)
        tf = next(c for c in reader.connections if c.topic == TOPIC_TF)
        latched = {c.topic for c in reader.connections if getattr(c.ext, "latching", 0) == 1}
        assert latched == {TOPIC_TF_STATIC, TOPIC_ROBOT_DESCRIPTION}
        conn, _, data = next(reader.messages([tf]))
        msg: Any = reader.deserialize(data, conn.msgtype)
        assert [t.child_frame_id for t in msg.transforms] == ["arm_link4", HAND]


def test_split_and_compressed_rosbag2(tmp_path: Path) -> None:
    path = tmp_path / "split"
    info = write_teleop_bag(
        path, "sqlite3", duration_s=0.5, wrench_rate_hz=100, bag_compression="file", max_bagfile_duration_s=0.2
    )
    assert [f.name for f in info.files] == ["split_0.db3.zstd", "split_1.db3.zstd", "split_2.db3.zstd"]
    assert sorted(p.name for p in path.iterdir()) == ["metadata.yaml", *(f.name for f in info.files)]
    meta = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["relative_file_paths"] == [f.name for f in info.files]
    assert meta["message_count"] == info.message_count == sum(f["message_count"] for f in meta["files"])
    assert meta["compression_mode"] == "file" and meta["compression_format"] == "zstd"
    with Rosbag2Reader(path) as reader:  # rosbags' own directory reader
        assert reader.message_count == info.message_count
        assert sum(1 for _ in reader.messages()) == info.message_count
        assert reader.start_time == info.first_receive_ns
        static = next(c for c in reader.connections if c.topic == TOPIC_TF_STATIC)
        tf = next(c for c in reader.connections if c.topic == TOPIC_TF)
        assert isinstance(static.ext, ConnectionExtRosbag2) and isinstance(tf.ext, ConnectionExtRosbag2)
        assert static.ext.offered_qos_profiles[0].durability == QosDurability.TRANSIENT_LOCAL
        assert tf.ext.offered_qos_profiles[0].durability == QosDurability.VOLATILE


def test_compressed_cameras_are_jpeg(tmp_path: Path) -> None:
    path = tmp_path / "jpeg"
    info = write_teleop_bag(path, "mcap", duration_s=0.2, compressed=True, bag_compression="message")
    assert info.msgtypes[TOPIC_WRIST_IMAGE + "/compressed"] == "sensor_msgs/msg/CompressedImage"
    assert info.msgtypes[TOPIC_DEPTH_IMAGE] == "sensor_msgs/msg/Image"
    assert TOPIC_WRIST_IMAGE not in info.counts
    with AnyReader([path]) as reader:
        conn = next(c for c in reader.connections if c.topic == TOPIC_WRIST_IMAGE + "/compressed")
        for seq, (_, _, data) in enumerate(reader.messages([conn])):
            msg: Any = reader.deserialize(data, conn.msgtype)
            assert "jpeg" in msg.format and bytes(msg.data[:2]) == b"\xff\xd8"
            frame = av.CodecContext.create("mjpeg", "r").decode(av.Packet(bytes(msg.data)))[0]
            assert decode_frame_number(frame.to_ndarray(format="rgb24")) == seq


# Upstream's field order (ros-controls/control_msgs: ROS 1, and ROS 2 on humble and jazzy), typed
# out here, apart from the generator's definitions, which must match it.
CONTROLLER_FIELDS = {
    "ros1": ["header", "joint_names", "desired", "actual", "error"],
    "jazzy": [
        *("header", "joint_names", "reference", "feedback", "error", "output", "multi_dof_joint_names"),
        *("multi_dof_reference", "multi_dof_feedback", "multi_dof_error", "multi_dof_output"),
    ],
    "humble": [
        *("header", "joint_names", "reference", "feedback", "error", "output", "desired", "actual"),
        *("multi_dof_joint_names", "multi_dof_reference", "multi_dof_feedback", "multi_dof_error"),
        *("multi_dof_output", "multi_dof_desired", "multi_dof_actual"),
    ],
}


@pytest.mark.parametrize(("fmt", "layout"), [("ros1", "ros1"), ("mcap", "jazzy"), ("sqlite3", "humble")])
def test_controller_state_bags_hold_upstreams_layout(tmp_path: Path, fmt: Any, layout: str) -> None:
    options: dict[str, Any] = {} if fmt == "ros1" else {"controller_layout": layout}
    path = tmp_path / ("state.bag" if fmt == "ros1" else "state")
    info = write_teleop_bag(path, fmt, duration_s=0.3, with_depth=False, controller_state=True, **options)
    assert info.counts[TOPIC_CONTROLLER_STATE] == 30 and info.msgtypes[TOPIC_CONTROLLER_STATE] == CONTROLLER_STATE_TYPE
    assert TOPIC_JOINT_STATES not in info.counts and TOPIC_JOINT_COMMAND not in info.counts
    with AnyReader([info.path]) as reader:  # (its types from the bag's own definitions)
        (conn,) = [c for c in reader.connections if c.topic == TOPIC_CONTROLLER_STATE]
        assert [name for name, _ in reader.typestore.fielddefs[conn.msgtype][1]] == CONTROLLER_FIELDS[layout]
        if fmt == "ros1":
            assert conn.digest == "10817c60c2486ef6b33e97dcd87f4474"  # ROS 1's md5sum of the type
        measured, target = ("actual", "desired") if layout != "jazzy" else ("feedback", "reference")
        for seq, (_, _, data) in enumerate(reader.messages([conn])):
            msg: Any = reader.deserialize(data, conn.msgtype)
            t = (msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec - info.start_ns) / 1e9
            assert t == seq / 100 and msg.joint_names == list(CONTROLLER_JOINTS)
            point = getattr(msg, measured)
            for values, function in ((point.positions, joint_positions), (point.effort, joint_efforts)):
                np.testing.assert_array_equal(values, select_joints(function(t), CONTROLLER_JOINTS))
            np.testing.assert_array_equal(
                getattr(msg, target).positions, select_joints(joint_command(t), CONTROLLER_JOINTS)
            )
            if layout == "humble":  # the new fields empty, as a driver written before them leaves them
                assert len(msg.feedback.positions) == len(msg.reference.positions) == 0


def test_unnamed_joint_states_and_no_command(tmp_path: Path) -> None:
    info = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=0.2, unnamed_joints="arm", with_command=False)
    assert TOPIC_JOINT_COMMAND not in info.counts
    with AnyReader([info.path]) as reader:
        (conn,) = [c for c in reader.connections if c.topic == TOPIC_JOINT_STATES]
        for _, _, data in reader.messages([conn]):
            msg: Any = reader.deserialize(data, conn.msgtype)
            t = (msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec - info.start_ns) / 1e9
            assert msg.name == []
            np.testing.assert_array_equal(msg.position, joint_positions(t)[:7])  # the arm's, in the URDF's order


def test_the_controller_state_is_for_bags_only() -> None:
    assert TeleopConfig("mcap", controller_state=True).bag_only_topics() == (TOPIC_CONTROLLER_STATE,)
    assert TeleopConfig("mcap", unnamed_joints="all").bag_only_topics() == ()


def test_options_are_checked(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(ConversionError, match="exists already"):
        write_teleop_bag(tmp_path / "taken", "mcap")
    with pytest.raises(ValueError, match="legacy_tf"):
        write_teleop_bag(tmp_path / "a", "mcap", legacy_tf=True)
    with pytest.raises(ValueError, match="'bz2' does not apply to mcap"):
        write_teleop_bag(tmp_path / "b", "mcap", bag_compression="bz2")
    with pytest.raises(ValueError, match="'storage' does not apply to sqlite3"):
        write_teleop_bag(tmp_path / "c", "sqlite3", bag_compression="storage")
    with pytest.raises(ValueError, match="splits rosbag2"):
        write_teleop_bag(tmp_path / "d.bag", "ros1", max_bagfile_duration_s=1.0)
    with pytest.raises(ValueError, match="bag format"):
        write_teleop_bag(tmp_path / "e", "db3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a ROS 1 bag has ROS 1's"):
        write_teleop_bag(tmp_path / "f.bag", "ros1", controller_state=True, controller_layout="humble")
    with pytest.raises(ValueError, match="the arm controller's joints are the arm's"):
        write_teleop_bag(tmp_path / "g", "mcap", controller_state=True, unnamed_joints="all")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_writing_streams(tmp_path: Path) -> None:
    """Peak memory while writing does not grow with the number of messages (ROS 1: the
    writer's per-message chunk index would, ~120 bytes a message, without the sink's trim)."""
    sparse: dict[str, Any] = {"fps": 5, "with_depth": False, "tf_rate_hz": 10, "joint_rate_hz": 10}
    options: dict[str, Any] = {**sparse, "command_rate_hz": 10, "wrench_rate_hz": 10_000}
    write_teleop_bag(tmp_path / "warm.bag", "ros1", duration_s=0.05)  # one-time caches

    def peak(name: str, duration_s: float) -> tuple[int, int]:
        tracemalloc.start()
        try:
            info = write_teleop_bag(tmp_path / name, "ros1", duration_s=duration_s, **options)
            return info.message_count, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    short_count, short_peak = peak("short.bag", 0.6)
    long_count, long_peak = peak("long.bag", 3.0)
    assert long_count > 4 * short_count
    # Both hold at most one open ~1 MB chunk; 24k more index entries would add ~3 MB.
    assert long_peak < short_peak + 1_500_000, (short_peak, long_peak)
