"""decode + extract of the robot description and of action-like messages: joint
trajectories, Float64MultiArray, twists, poses, gripper commands; other types ignored."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ortf_ros.pipeline.extract import SUPPORTED_TYPES, supports
from ortf_ros.pipeline.samples import (
    RobotDescriptionSample,
    Serialization,
    VectorSample,
)
from support.messages import SERIALIZATIONS, bad, build, check_header_stamps, header, one, run, vector3


def test_string_becomes_robot_description() -> None:
    urdf = '<robot name="r"><link name="base"/></robot>'
    sample = one(run(build("cdr", "std_msgs/msg/String", data=urdf), "std_msgs/msg/String"), RobotDescriptionSample)
    assert sample.urdf == urdf
    assert sample.stamps.header_ns is None


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_joint_trajectory_first_point(ser: Serialization) -> None:
    points = [
        build(ser, "trajectory_msgs/msg/JointTrajectoryPoint", positions=np.array([0.5, -0.5])),
        build(ser, "trajectory_msgs/msg/JointTrajectoryPoint", positions=np.array([9.0, 9.0])),
    ]
    msg = build(ser, "trajectory_msgs/msg/JointTrajectory", header=header(ser), joint_names=["j2", "j1"], points=points)
    sample = one(run(msg, "trajectory_msgs/msg/JointTrajectory", ser), VectorSample)
    assert sample.names == ("j2", "j1")
    np.testing.assert_array_equal(sample.values, [0.5, -0.5])
    check_header_stamps(sample.stamps)


def test_joint_trajectory_without_points_or_with_wrong_length_is_bad() -> None:
    empty = build("cdr", "trajectory_msgs/msg/JointTrajectory", joint_names=["a"])
    bad(run(empty, "trajectory_msgs/msg/JointTrajectory"), "no points")
    point = build("cdr", "trajectory_msgs/msg/JointTrajectoryPoint", positions=np.array([1.0, 2.0]))
    wrong = build("cdr", "trajectory_msgs/msg/JointTrajectory", joint_names=["a"], points=[point])
    bad(run(wrong, "trajectory_msgs/msg/JointTrajectory"), "2 positions for 1 joint names")


def multi_array(labels: list[str], data: list[float], offset: int = 0) -> Any:
    dims = [build("cdr", "std_msgs/msg/MultiArrayDimension", label=label, size=1, stride=1) for label in labels]
    layout = build("cdr", "std_msgs/msg/MultiArrayLayout", dim=dims, data_offset=offset)
    return build("cdr", "std_msgs/msg/Float64MultiArray", layout=layout, data=np.array(data))


@pytest.mark.parametrize(
    ("labels", "data", "offset", "names", "values"),
    [
        ([], [1.0, 2.0, 3.0], 0, ("0", "1", "2"), [1.0, 2.0, 3.0]),
        (["x", "y"], [1.0, 2.0], 0, ("x", "y"), [1.0, 2.0]),
        (["joints"], [4.0, 5.0], 0, ("joints_0", "joints_1"), [4.0, 5.0]),
        ([], [0.0, 7.0, 8.0], 1, ("0", "1"), [7.0, 8.0]),
    ],
)
def test_float64_multi_array(
    labels: list[str], data: list[float], offset: int, names: tuple[str, ...], values: list[float]
) -> None:
    sample = one(run(multi_array(labels, data, offset), "std_msgs/msg/Float64MultiArray"), VectorSample)
    assert sample.names == names
    np.testing.assert_array_equal(sample.values, values)


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_twist_and_twist_stamped(ser: Serialization) -> None:
    twist = build(ser, "geometry_msgs/msg/Twist", linear=vector3(ser, 1, 2, 3), angular=vector3(ser, 4, 5, 6))
    names = ("linear_x", "linear_y", "linear_z", "angular_x", "angular_y", "angular_z")
    sample = one(run(twist, "geometry_msgs/msg/Twist", ser), VectorSample)
    assert sample.names == names
    np.testing.assert_array_equal(sample.values, [1, 2, 3, 4, 5, 6])
    assert sample.stamps.header_ns is None
    stamped = build(ser, "geometry_msgs/msg/TwistStamped", header=header(ser), twist=twist)
    sample = one(run(stamped, "geometry_msgs/msg/TwistStamped", ser), VectorSample)
    np.testing.assert_array_equal(sample.values, [1, 2, 3, 4, 5, 6])
    check_header_stamps(sample.stamps)


def test_pose_stamped_is_xyz_wxyz() -> None:
    position = build("cdr", "geometry_msgs/msg/Point", x=0.1, y=0.2, z=0.3)
    orientation = build("cdr", "geometry_msgs/msg/Quaternion", x=0.0, y=0.0, z=0.7071, w=0.7071)
    pose = build("cdr", "geometry_msgs/msg/Pose", position=position, orientation=orientation)
    msg = build("cdr", "geometry_msgs/msg/PoseStamped", header=header("cdr", "base"), pose=pose)
    sample = one(run(msg, "geometry_msgs/msg/PoseStamped"), VectorSample)
    assert sample.names == ("x", "y", "z", "qw", "qx", "qy", "qz")
    np.testing.assert_array_equal(sample.values, [0.1, 0.2, 0.3, 0.7071, 0.0, 0.0, 0.7071])
    check_header_stamps(sample.stamps, "base")


@pytest.mark.parametrize(
    ("typename", "value", "expected"),
    [("std_msgs/msg/Float64", 0.042, 0.042), ("std_msgs/msg/Bool", True, 1.0), ("std_msgs/msg/Bool", False, 0.0)],
)
def test_gripper_commands(typename: str, value: float | bool, expected: float) -> None:
    sample = one(run(build("cdr", typename, data=value), typename), VectorSample)
    assert sample.names == ("gripper",)
    np.testing.assert_array_equal(sample.values, [expected])


def test_other_types_are_ignored() -> None:
    imu = build("cdr", "sensor_msgs/msg/Imu", header=header("cdr"))
    assert run(imu, "sensor_msgs/msg/Imu") == []
    assert not supports("sensor_msgs/msg/Imu")
    assert supports("sensor_msgs/Image")
    assert supports("tf/tfMessage")
    assert "tf2_msgs/msg/TFMessage" in SUPPORTED_TYPES
