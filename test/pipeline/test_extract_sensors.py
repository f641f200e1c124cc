"""decode + extract of camera info, joint states (names in message order, lengths that must
agree, no names at all) and wrenches, stamped and bare."""

from __future__ import annotations

import numpy as np
import pytest

from ortf_ros.pipeline.samples import (
    CameraInfoSample,
    JointStateSample,
    Serialization,
    WrenchSample,
)
from support.messages import RECEIVE_NS, SERIALIZATIONS, bad, build, check_header_stamps, header, one, run, vector3


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_camera_info(ser: Serialization) -> None:
    k = np.array([500.0, 0, 320, 0, 505.0, 240, 0, 0, 1])
    d = np.array([0.1, -0.2, 0.001, 0.002, 0.0])
    fields = {"K": k, "D": d} if ser == "ros1" else {"k": k, "d": d}
    msg = build(
        ser,
        "sensor_msgs/msg/CameraInfo",
        header=header(ser),
        width=640,
        height=480,
        distortion_model="plumb_bob",
        **fields,
    )
    sample = one(run(msg, "sensor_msgs/msg/CameraInfo", ser), CameraInfoSample)
    assert (sample.width, sample.height, sample.distortion_model) == (640, 480, "plumb_bob")
    assert sample.k == tuple(k)
    assert sample.d == tuple(d)
    check_header_stamps(sample.stamps)


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_joint_state_keeps_names_in_message_order(ser: Serialization) -> None:
    msg = build(
        ser,
        "sensor_msgs/msg/JointState",
        header=header(ser, "base_link"),
        name=["elbow", "shoulder", "wrist"],
        position=np.array([0.3, 0.1, 0.5]),
        velocity=np.array([-1.0, 2.0, 0.25]),
    )
    sample = one(run(msg, "sensor_msgs/msg/JointState", ser), JointStateSample)
    assert sample.names == ("elbow", "shoulder", "wrist")
    assert sample.position.dtype == np.float64
    np.testing.assert_array_equal(sample.position, [0.3, 0.1, 0.5])
    np.testing.assert_array_equal(sample.velocity, [-1.0, 2.0, 0.25])
    assert sample.effort.shape == (0,)
    check_header_stamps(sample.stamps, "base_link")
    # reorder-ready: index by name
    order = ["shoulder", "elbow", "wrist"]
    by_name = dict(zip(sample.names, sample.position, strict=True))
    assert [by_name[n] for n in order] == [0.1, 0.3, 0.5]


@pytest.mark.parametrize(
    ("names", "position", "effort", "words"),
    [
        (["a", "b", "c"], [1.0, 2.0], [], ("position has 2 values for 3 joint names",)),
        (["a", "b"], [1.0, 2.0], [1.0, 2.0, 3.0], ("effort has 3 values for 2 joint names",)),
        (["a", "b", "a"], [1.0, 2.0, 3.0], [], ("joint names repeat: a",)),
        ([], [1.0], [1.0, 2.0], ("effort has 2 values for 1 position (the message lists no joint names)",)),
        ([], [], [1.0], ("lists no joint names and no position",)),
    ],
)
def test_joint_state_lengths_must_agree(
    names: list[str], position: list[float], effort: list[float], words: tuple[str, ...]
) -> None:
    msg = build(
        "cdr",
        "sensor_msgs/msg/JointState",
        header=header("cdr"),
        name=names,
        position=np.array(position),
        effort=np.array(effort),
    )
    bad(run(msg, "sensor_msgs/msg/JointState", topic="/joint_states"), "/joint_states", *words)


def test_joint_state_without_positions_is_kept() -> None:
    msg = build("cdr", "sensor_msgs/msg/JointState", name=["a"], effort=np.array([4.0]))
    sample = one(run(msg, "sensor_msgs/msg/JointState"), JointStateSample)
    assert sample.position.shape == (0,)
    np.testing.assert_array_equal(sample.effort, [4.0])


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_joint_state_without_names_keeps_its_values_for_the_layout_to_name(ser: Serialization) -> None:
    msg = build(ser, "sensor_msgs/msg/JointState", header=header(ser), position=np.array([0.1, 0.2, 0.3]))
    sample = one(run(msg, "sensor_msgs/msg/JointState", ser), JointStateSample)
    assert sample.names == ()
    np.testing.assert_array_equal(sample.position, [0.1, 0.2, 0.3])
    assert sample.velocity.shape == sample.effort.shape == (0,)


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_wrench_stamped_and_bare(ser: Serialization) -> None:
    wrench = build(
        ser, "geometry_msgs/msg/Wrench", force=vector3(ser, 1.5, -2.0, 9.81), torque=vector3(ser, 0.1, 0.2, -0.3)
    )
    stamped = build(ser, "geometry_msgs/msg/WrenchStamped", header=header(ser, "ft_sensor"), wrench=wrench)
    sample = one(run(stamped, "geometry_msgs/msg/WrenchStamped", ser), WrenchSample)
    np.testing.assert_array_equal(sample.force, [1.5, -2.0, 9.81])
    np.testing.assert_array_equal(sample.torque, [0.1, 0.2, -0.3])
    check_header_stamps(sample.stamps, "ft_sensor")
    bare = one(run(wrench, "geometry_msgs/msg/Wrench", ser), WrenchSample)
    np.testing.assert_array_equal(bare.force, [1.5, -2.0, 9.81])
    assert bare.stamps.header_ns is None
    assert bare.stamps.receive_ns == RECEIVE_NS
