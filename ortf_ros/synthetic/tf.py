"""The scene's TF tree: its frames, the fixed transforms (``/tf_static`` and the URDF's
fixed joints) and the moving ones (``/tf``), as exact functions of time.

``/tf`` publishes ``base_link -> arm_link4 -> hand`` (``dynamic_transforms``), so the
end-effector pose is ``ee_pose(t)``; it is not forward kinematics of the joint states.
A converter's TF code is tested against these, so the quaternion math here is its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

WORLD, BASE_LINK, ELBOW_LINK, HAND = "world", "base_link", "arm_link4", "hand"
WRIST_CAMERA_FRAME = "wrist_camera_optical_frame"
OVERHEAD_CAMERA_FRAME = "overhead_camera_optical_frame"
SIDE_CAMERA_FRAME = "side_camera_optical_frame"
FT_FRAME = HAND
DEPTH_FRAME = OVERHEAD_CAMERA_FRAME  # the depth camera is co-located with the overhead one
LIDAR_FRAME = "lidar_link"

StaticFrame = tuple[str, str, tuple[float, float, float], tuple[float, float, float]]
"""(parent, child, xyz, rpy) of a fixed frame."""


@dataclass(frozen=True)
class Transform:
    """``child`` in ``parent``; rotation in ROS order (x, y, z, w)."""

    parent: str
    child: str
    translation: tuple[float, float, float]
    rotation_xyzw: tuple[float, float, float, float]


def quat_from_rpy(roll: float, pitch: float, yaw: float) -> tuple[float, float, float, float]:
    """(x, y, z, w) of URDF/ROS fixed-axis roll, pitch, yaw (R = Rz(yaw) Ry(pitch) Rx(roll))."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return (
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
        cr * cp * cy + sr * sp * sy,
    )


def quat_from_axis_angle(axis: tuple[float, float, float], angle: float) -> tuple[float, float, float, float]:
    n = math.sqrt(sum(a * a for a in axis))
    s = math.sin(angle / 2) / n
    return (axis[0] * s, axis[1] * s, axis[2] * s, math.cos(angle / 2))


# Quaternion math of its own, in ROS's (x, y, z, w) order, on purpose: this module is the
# ground truth the converter's TF code (ortf_ros.pipeline.tf, wxyz) is tested against,
# so it must not share that code.
def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of two (x, y, z, w) quaternions."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ]
    )


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vector ``v`` by the (x, y, z, w) quaternion ``q``."""
    u, w = np.asarray(q[:3], dtype=np.float64), float(q[3])
    vec = np.asarray(v, dtype=np.float64)
    return np.asarray(vec + 2.0 * np.cross(u, np.cross(u, vec) + w * vec))


# (parent, child, xyz, rpy): the fixed frames, on /tf_static and as fixed joints in the URDF.
_STATIC: tuple[StaticFrame, ...] = (
    (WORLD, BASE_LINK, (0.0, 0.0, 0.75), (0.0, 0.0, 0.0)),
    (HAND, WRIST_CAMERA_FRAME, (0.05, 0.0, 0.02), (-math.pi / 2, 0.0, -math.pi / 2)),
    (WORLD, OVERHEAD_CAMERA_FRAME, (0.5, 0.0, 1.6), (math.pi, 0.0, -math.pi / 2)),
)
# The side camera, beside the table at y = -1 m looking along +y, tilted down by 0.4 rad.
_SIDE_STATIC: tuple[StaticFrame, ...] = ((WORLD, SIDE_CAMERA_FRAME, (0.5, -1.0, 1.2), (-math.pi / 2 - 0.4, 0.0, 0.0)),)


def static_frames(side_camera: bool) -> tuple[StaticFrame, ...]:
    """The fixed frames as (parent, child, xyz, rpy): what ``/tf_static`` and the URDF's
    fixed joints both hold (the side camera's too, with ``side_camera``)."""
    return _STATIC + _SIDE_STATIC if side_camera else _STATIC


def static_transforms(side_camera: bool = False) -> tuple[Transform, ...]:
    """What ``/tf_static`` holds: the fixed frames (and the side camera's, with ``side_camera``)."""
    return tuple(Transform(p, c, xyz, quat_from_rpy(*rpy)) for p, c, xyz, rpy in static_frames(side_camera))


STATIC_TRANSFORMS = static_transforms()  # the default scene's (no side camera)
# The lidar (``TeleopConfig.lidar``), on the table's edge, 0.4 m up, turned 90 degrees.
LIDAR_TRANSFORM = Transform(WORLD, LIDAR_FRAME, (1.0, 0.2, 0.4), quat_from_rpy(0.0, 0.0, math.pi / 2))

_ELBOW_AXIS = (0.0, 0.0, 1.0)
_WRIST_AXIS = (0.3, 0.5, 0.8)


def dynamic_transforms(t: float) -> tuple[Transform, Transform]:
    """What one ``/tf`` message holds at time ``t``: base_link -> arm_link4 -> hand."""
    elbow = Transform(
        BASE_LINK,
        ELBOW_LINK,
        (0.1 * math.sin(0.5 * t), 0.1 * math.cos(0.5 * t), 0.45),
        quat_from_axis_angle(_ELBOW_AXIS, 0.6 * math.sin(0.4 * t)),
    )
    hand = Transform(
        ELBOW_LINK,
        HAND,
        (0.3 + 0.05 * math.sin(0.9 * t), 0.02 * math.cos(0.6 * t), 0.1 * math.cos(0.7 * t)),
        quat_from_axis_angle(_WRIST_AXIS, 0.2 + 0.8 * math.sin(0.8 * t)),
    )
    return elbow, hand


def ee_pose(t: float) -> tuple[np.ndarray, np.ndarray]:
    """Pose of ``hand`` in ``base_link`` at time ``t``: (position (3,), rotation (x, y, z, w))."""
    elbow, hand = dynamic_transforms(t)
    q1 = np.array(elbow.rotation_xyzw)
    position = np.array(elbow.translation) + quat_rotate(q1, np.array(hand.translation))
    rotation = quat_multiply(q1, np.array(hand.rotation_xyzw))
    return position, rotation
