"""Synthetic teleop recordings with analytically known content, in every bag format.

``write_teleop_bag`` writes a recording of a 7-joint arm with a two-finger gripper, two
RGB cameras (a third one, ``side_camera``, on request), a depth camera, a force-torque
sensor, TF and a joint command (the action), as rosbag2 (MCAP or sqlite3) or ROS 1, with
rosbags and no ROS install. Tests, ``make demo`` and the benchmark convert these bags;
``ortf_ros.ros.scene_publisher`` publishes the same scene live over DDS (``schedule`` and
``Messages`` are shared, so a bag written with the same options and ``start_ns`` holds
the very bytes that were published).

Everything in the bag is a pure function of time or sequence number, public here, so a
test can compute what a converter must produce:

- every stream publishes at ``t = seq / rate`` for ``seq = 0 .. count - 1`` (``count =
  round(duration_s * rate)``); the header stamp is ``start_ns + stamp offset`` and the
  receive (bag) time adds ``receive_latency_ns(topic, seq)``; analytic values are
  taken at ``t = (stamp_ns - start_ns) / 1e9`` (``stamp_ns`` below);
- ``/joint_states`` lists joints in ``JOINT_STATE_ORDER`` (not the URDF's order), and
  every ``FINGERS_ONLY_EVERY``-th message only the finger joints (``joint_state_names``);
  with ``unnamed_joints`` it lists no names, only values, every message of all joints or
  of the arm's, in the URDF's order (``TeleopConfig.state_joints``);
- with ``controller_state`` the arm records no ``/joint_states`` (and no ``/joint_command``
  unless ``with_command``), but a ros_control ``control_msgs/JointTrajectoryControllerState``
  on ``/arm_controller/state`` of the arm's joints in ``CONTROLLER_JOINTS`` order: what
  they did (``actual`` / ``feedback``) is ``joint_positions``, ``joint_velocities`` and
  ``joint_efforts``, where they were taken (``desired`` / ``reference``) ``joint_command``;
  in ROS 1's layout in a ROS 1 bag, else Jazzy's, or Humble's (``controller_layout``) with
  its deprecated ``desired`` / ``actual`` filled and its new fields empty, as drivers
  written before those do; the definitions come from ``controller_state_definition``;
- ``/tf`` publishes ``base_link -> arm_link4 -> hand`` (``dynamic_transforms``), so the
  end-effector pose is ``ee_pose(t)``; it is not forward kinematics of the joint states;
- camera frames carry their own sequence number in 16x16 grey blocks that survive H.264
  and JPEG (``rgb_frame`` / ``decode_frame_number``); depth is ``depth_frame(seq)``,
  for bit-exactness checks;
- cameras publish raw ``sensor_msgs/Image`` rgb8 on ``<camera>/image_raw``, or JPEG
  ``sensor_msgs/CompressedImage`` on ``<camera>/image_raw/compressed``: all of them
  (``compressed``) or the ones listed in ``compressed_cameras``; depth is always raw;
- ``h264_cameras`` publish H.264 instead (``AnnexBEncoder``: libx264, no B-frames, an IDR
  frame with its SPS and PPS every ``H264_GOP`` frames) on ``<camera>/image_raw/h264``, as
  ``foxglove_msgs/msg/CompressedVideo`` or ``sensor_msgs/CompressedImage`` of format
  ``h264`` (``h264_message``; ROS 2 recordings only); with ``h264_lead`` the recording
  begins that many packets before the first keyframe (the encoder started earlier); with
  ``h264_bframes`` their streams reorder frames (2 B-frames), their packets in decode order;
- each camera publishes ``camera_info`` with ``camera_intrinsics`` and ``CAMERA_DISTORTION``
  at its frame rate, except those listed in ``without_camera_info``;
- with ``audio`` a microphone publishes ``audio_samples`` on ``TOPIC_AUDIO``, a message of
  ``audio_chunk`` frames each: ``audio_common_msgs/AudioStamped`` (the ROS 2 layout), or
  the older layout's ``AudioData`` bytes with one latched ``AudioInfo`` on
  ``TOPIC_AUDIO_INFO``; the messages listed in ``audio_dropped`` are not recorded.

Writing streams: messages are generated, serialized and written one at a time in
receive-time order, so a 10-minute bag takes no more memory than a 10-second one.
"""

from __future__ import annotations

import heapq
import itertools
import math
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.rosbag1 import Writer as Rosbag1Writer
from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin
from rosbags.rosbag2 import Writer as Rosbag2Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from ortf_ros.errors import ConversionError
from ortf_ros.io.h264 import AnnexBEncoder
from ortf_ros.io.jpeg import JpegEncoder
from ortf_ros.io.wav import file_bytes
from ortf_ros.pipeline.streams.audio_definitions import (
    PORTAUDIO_FORMATS,
    AudioLayout,
    audio_data_arrays,
    portaudio_format,
)
from ortf_ros.pipeline.streams.audio_definitions import register as register_audio
from ortf_ros.synthetic_detections import DETECTIONS_TYPE, TOPIC_DETECTIONS, detections_message, register_vision_msgs

BagFormat = Literal["mcap", "sqlite3", "ros1"]
ControllerLayout = Literal["jazzy", "humble"]
"""The ROS 2 definition of a controller state in a rosbag2 bag (a ROS 1 bag has ROS 1's)."""
UnnamedJoints = Literal["all", "arm"]
"""Joint states without names: the values of ``all`` the joints, or of the ``arm``'s 7
(fewer than the URDF's 9 movable joints), in the URDF's order."""
BagCompression = Literal["none", "file", "message", "storage", "bz2", "lz4"]
"""``file``/``message``: rosbag2 zstd per file or per message; ``storage``: MCAP zstd
chunks; ``bz2``/``lz4``: ROS 1 chunks."""

START_NS = 1_700_000_000_000_000_000  # header stamp of t = 0 (2023-11-14 22:13:20 UTC)

ROBOT_NAME = "ortf_teleop_arm"
ARM_JOINTS = tuple(f"arm_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("finger_joint1", "finger_joint2")
JOINTS = ARM_JOINTS + FINGER_JOINTS  # the URDF's order
JOINT_STATE_ORDER = (
    "finger_joint2",
    "arm_joint4",
    "arm_joint1",
    "arm_joint7",
    "finger_joint1",
    "arm_joint2",
    "arm_joint6",
    "arm_joint3",
    "arm_joint5",
)
COMMAND_ORDER = tuple(reversed(JOINTS))
CONTROLLER_JOINTS = tuple(reversed(ARM_JOINTS))  # the arm controller's joints, in its order (not the URDF's)
FINGERS_ONLY_EVERY = 5  # joint_states messages with seq % 5 == 4 list only the fingers
COMMAND_LEAD_S = 0.1  # the command leads the measured positions by this much
ARM_LIMIT = 2.8
FINGER_LIMIT = 0.04

WORLD, BASE_LINK, ELBOW_LINK, HAND = "world", "base_link", "arm_link4", "hand"
WRIST_CAMERA_FRAME = "wrist_camera_optical_frame"
OVERHEAD_CAMERA_FRAME = "overhead_camera_optical_frame"
SIDE_CAMERA_FRAME = "side_camera_optical_frame"
FT_FRAME = HAND

TOPIC_ROBOT_DESCRIPTION = "/robot_description"
TOPIC_TF = "/tf"
TOPIC_TF_STATIC = "/tf_static"
TOPIC_JOINT_STATES = "/joint_states"
TOPIC_JOINT_COMMAND = "/joint_command"
TOPIC_WRIST_IMAGE = "/wrist_camera/image_raw"
TOPIC_OVERHEAD_IMAGE = "/overhead_camera/image_raw"
TOPIC_SIDE_IMAGE = "/side_camera/image_raw"  # only with TeleopConfig.side_camera
TOPIC_WRIST_CAMERA_INFO = "/wrist_camera/camera_info"
TOPIC_OVERHEAD_CAMERA_INFO = "/overhead_camera/camera_info"
TOPIC_SIDE_CAMERA_INFO = "/side_camera/camera_info"
TOPIC_DEPTH_CAMERA_INFO = "/depth_camera/camera_info"
TOPIC_DEPTH_IMAGE = "/depth_camera/image_raw"
TOPIC_WRENCH = "/ft_sensor/wrench"
TOPIC_CONTROLLER_STATE = "/arm_controller/state"  # only with TeleopConfig.controller_state
TOPIC_AUDIO = "/microphone/audio"  # only with TeleopConfig.audio
TOPIC_AUDIO_INFO = "/microphone/audio_info"  # only with TeleopConfig.audio "older"
AUDIO_FORMAT_CODES = {name: code for code, (name, _) in PORTAUDIO_FORMATS.items()}  # (the ROS 2 layout's formats)
AUDIO_GSTREAMER_NAMES = {"f32le": "F32LE", "s32le": "S32LE", "s24le": "S24LE", "s16le": "S16LE", "s8": "S8", "u8": "U8"}
TOPIC_SCAN = "/lidar/scan"  # only with TeleopConfig.lidar
TOPIC_POINTS = "/lidar/points"  # only with TeleopConfig.lidar
LIDAR_FRAME = "lidar_link"
CONTROLLER_STATE_TYPE = "control_msgs/msg/JointTrajectoryControllerState"
COMPRESSED_SUFFIX = "/compressed"  # image_transport's name for the JPEG stream
CAMERAS = {TOPIC_WRIST_IMAGE: WRIST_CAMERA_FRAME, TOPIC_OVERHEAD_IMAGE: OVERHEAD_CAMERA_FRAME}  # the default scene's
SIDE_CAMERAS = {TOPIC_SIDE_IMAGE: SIDE_CAMERA_FRAME}  # added by TeleopConfig.side_camera
CAMERA_FRAMES = CAMERAS | SIDE_CAMERAS  # every RGB camera image topic -> its optical frame
CAMERA_INFO_TOPICS = {
    TOPIC_WRIST_IMAGE: TOPIC_WRIST_CAMERA_INFO,
    TOPIC_OVERHEAD_IMAGE: TOPIC_OVERHEAD_CAMERA_INFO,
    TOPIC_SIDE_IMAGE: TOPIC_SIDE_CAMERA_INFO,
}
DEPTH_FRAME = OVERHEAD_CAMERA_FRAME  # the depth camera is co-located with the overhead one
JPEG_FORMAT = "rgb8; jpeg compressed bgr8"
H264_SUFFIX = "/h264"  # an H.264 camera's topic: <image topic>/h264
H264_GOP = 10  # an H.264 camera's keyframe interval
COMPRESSED_VIDEO_TYPE = "foxglove_msgs/msg/CompressedVideo"
COMPRESSED_VIDEO_DEFINITION = "builtin_interfaces/Time timestamp\nstring frame_id\nuint8[] data\nstring format\n"
"""foxglove_msgs' CompressedVideo, field for field (ros/foxglove_msgs/msg/CompressedVideo.msg)."""
H264Message = Literal["CompressedVideo", "CompressedImage"]

# Fixed part of each topic's receive latency (publish -> bag), nanoseconds.
BASE_LATENCY_NS = {
    TOPIC_ROBOT_DESCRIPTION: 3_000_000,
    TOPIC_TF_STATIC: 2_000_000,
    TOPIC_TF: 1_000_000,
    TOPIC_JOINT_STATES: 500_000,
    TOPIC_JOINT_COMMAND: 300_000,
    TOPIC_WRIST_IMAGE: 8_000_000,
    TOPIC_OVERHEAD_IMAGE: 9_000_000,
    TOPIC_SIDE_IMAGE: 10_000_000,
    TOPIC_WRIST_CAMERA_INFO: 8_000_000,
    TOPIC_OVERHEAD_CAMERA_INFO: 9_000_000,
    TOPIC_SIDE_CAMERA_INFO: 10_000_000,
    TOPIC_DEPTH_CAMERA_INFO: 12_000_000,
    TOPIC_DEPTH_IMAGE: 12_000_000,
    TOPIC_WRENCH: 200_000,
    TOPIC_CONTROLLER_STATE: 500_000,
    TOPIC_AUDIO: 2_000_000,
    TOPIC_AUDIO_INFO: 2_000_000,
    TOPIC_SCAN: 4_000_000,
    TOPIC_POINTS: 6_000_000,
    TOPIC_DETECTIONS: 20_000_000,  # a detector runs on the wrist frames after they are published
}
JITTER_STEP_NS = 40_000  # latency jitter: 0..10 steps, a deterministic function of seq


# ---------------------------------------------------------------- timing


def stamp_ns(seq: int, rate_hz: float, start_ns: int = START_NS) -> int:
    """Header stamp of message ``seq`` of a stream published at ``rate_hz``."""
    return start_ns + round(seq * 1_000_000_000 / rate_hz)


def receive_latency_ns(topic: str, seq: int) -> int:
    """Receive time minus header stamp: a fixed per-topic latency plus 0..0.4 ms of jitter."""
    base = BASE_LATENCY_NS[topic.removesuffix(COMPRESSED_SUFFIX).removesuffix(H264_SUFFIX)]
    return base + ((seq * 7919) % 11) * JITTER_STEP_NS


def seconds(stamp: int, start_ns: int = START_NS) -> float:
    """The ``t`` of the analytic functions for a header stamp."""
    return (stamp - start_ns) / 1e9


# ---------------------------------------------------------------- joints and wrench


_OMEGA = 0.5 + 0.1 * np.arange(7)
_PHASE = 0.7 * np.arange(7)


def joint_positions(t: float) -> np.ndarray:
    """(9,) float64 in ``JOINTS`` order: arm in radians, fingers in metres (0..0.04)."""
    arm = 0.5 * np.sin(_OMEGA * t + _PHASE)
    finger = 0.02 + 0.015 * math.sin(1.3 * t)
    return np.concatenate([arm, [finger, finger]])


def joint_velocities(t: float) -> np.ndarray:
    """Exact time derivative of ``joint_positions``."""
    arm = 0.5 * _OMEGA * np.cos(_OMEGA * t + _PHASE)
    finger = 0.015 * 1.3 * math.cos(1.3 * t)
    return np.concatenate([arm, [finger, finger]])


def joint_efforts(t: float) -> np.ndarray:
    """(9,) float64 in ``JOINTS`` order, newton-metres / newtons."""
    arm = 10.0 * np.cos(0.3 * t + _PHASE) + np.arange(7)
    grip = 5.0 + 2.0 * math.sin(0.9 * t)
    return np.concatenate([arm, [grip, -grip]])


def joint_command(t: float) -> np.ndarray:
    """(9,) float64 target positions in ``JOINTS`` order: where the arm is ``COMMAND_LEAD_S`` later."""
    return joint_positions(t + COMMAND_LEAD_S)


def joint_state_names(seq: int) -> tuple[str, ...]:
    """Names that ``/joint_states`` message ``seq`` lists, in its order."""
    if seq % FINGERS_ONLY_EVERY == FINGERS_ONLY_EVERY - 1:
        return tuple(n for n in JOINT_STATE_ORDER if n in FINGER_JOINTS)
    return JOINT_STATE_ORDER


def select_joints(values: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """Pick entries of a ``JOINTS``-ordered vector in the order of ``names``."""
    return np.array([values[JOINTS.index(n)] for n in names], dtype=np.float64)


SAMPLE_BITS = {"f32le": 32, "s32le": 32, "s24le": 24, "s16le": 16, "s8": 8, "u8": 8}


def audio_samples(config: TeleopConfig, seq: int) -> np.ndarray:
    """Audio message ``seq``'s samples, interleaved (``audio_chunk`` frames of
    ``audio_channels``), in the dtype of ``audio_format``: a function of each sample's
    index in the stream, so a file's samples tell where they came from."""
    count = config.audio_chunk * config.audio_channels
    index = np.arange(seq * count, (seq + 1) * count, dtype=np.int64)
    base = (index * 37) % 65536 - 32768  # int16's range
    fmt = config.audio_format
    if fmt == "f32le":
        return (base / 32768.0).astype(np.float32)
    if fmt == "s32le":
        return (base * 65536 + index % 65536).astype(np.int32)
    if fmt == "s24le":
        return (base * 256 + index % 256).astype(np.int32)
    if fmt == "s8":
        return (base >> 8).astype(np.int8)
    if fmt == "u8":
        return ((base >> 8) + 128).astype(np.uint8)
    return base.astype(np.int16)


def wrench(t: float) -> tuple[np.ndarray, np.ndarray]:
    """(force (3,) N, torque (3,) N m) of the FT sensor in ``FT_FRAME``."""
    force = np.array(
        [2.0 * math.sin(2 * math.pi * 1.5 * t), 1.5 * math.cos(2 * math.pi * 0.7 * t), -9.81 + 0.5 * math.sin(6 * t)]
    )
    torque = np.array([0.1 * math.sin(5 * t), 0.2 * math.cos(3 * t), 0.05 * math.sin(11 * t)])
    return force, torque


# ---------------------------------------------------------------- transforms


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
_STATIC = (
    (WORLD, BASE_LINK, (0.0, 0.0, 0.75), (0.0, 0.0, 0.0)),
    (HAND, WRIST_CAMERA_FRAME, (0.05, 0.0, 0.02), (-math.pi / 2, 0.0, -math.pi / 2)),
    (WORLD, OVERHEAD_CAMERA_FRAME, (0.5, 0.0, 1.6), (math.pi, 0.0, -math.pi / 2)),
)
# The side camera, beside the table at y = -1 m looking along +y, tilted down by 0.4 rad.
_SIDE_STATIC = ((WORLD, SIDE_CAMERA_FRAME, (0.5, -1.0, 1.2), (-math.pi / 2 - 0.4, 0.0, 0.0)),)


def _static(side_camera: bool) -> tuple[tuple[str, str, tuple[float, float, float], tuple[float, float, float]], ...]:
    return _STATIC + _SIDE_STATIC if side_camera else _STATIC


def static_transforms(side_camera: bool = False) -> tuple[Transform, ...]:
    """What ``/tf_static`` holds: the fixed frames (and the side camera's, with ``side_camera``)."""
    return tuple(Transform(p, c, xyz, quat_from_rpy(*rpy)) for p, c, xyz, rpy in _static(side_camera))


STATIC_TRANSFORMS = static_transforms()  # the default scene's (no side camera)
# The lidar (``TeleopConfig.lidar``), on the table's edge, 0.4 m up, turned 90 degrees.
LIDAR_TRANSFORM = Transform(WORLD, LIDAR_FRAME, (1.0, 0.2, 0.4), quat_from_rpy(0.0, 0.0, math.pi / 2))

# ---------------------------------------------------------------- lidar (TeleopConfig.lidar)

SCAN_RATE_HZ = 10
SCAN_SAMPLES = 90
SCAN_ANGLE_MIN, SCAN_ANGLE_INCREMENT = -math.pi / 2, math.pi / 90
SCAN_RANGE = (0.05, 12.0)
CLOUD_RATE_HZ = 5
CLOUD_HEIGHT, CLOUD_WIDTH = 2, 8  # an organized cloud
CLOUD_POINT_STEP = 32  # x, y, z (float32) at 0, 4, 8; 4 bytes of padding; intensity, ring, time after
CLOUD_ROW_PADDING = 8  # bytes after each row's points (row_step = width * point_step + this)
CLOUD_FIELDS = (
    ("x", 0, 7, 1),
    ("y", 4, 7, 1),
    ("z", 8, 7, 1),
    ("intensity", 16, 7, 1),
    ("ring", 20, 4, 1),
    ("time", 24, 8, 1),
)
"""(name, offset, datatype, count) of each PointField: float32 xyz and intensity, uint16 ring, float64 time."""


def scan_ranges(seq: int) -> np.ndarray:
    """Scan ``seq``'s ranges (float32): a wall that moves, with REP 117's +inf (no return),
    -inf (too close) and NaN (invalid) at fixed places."""
    i = np.arange(SCAN_SAMPLES)
    ranges = (2.0 + 0.01 * i + 0.05 * math.sin(seq / 3)).astype(np.float32)
    ranges[7::17] = np.inf
    ranges[3] = -np.inf
    ranges[11] = np.nan
    return ranges


def scan_intensities(seq: int) -> np.ndarray:
    return (np.arange(SCAN_SAMPLES) * 0.5 + seq).astype(np.float32)


def cloud_values(seq: int) -> dict[str, np.ndarray]:
    """Cloud ``seq``'s points, row-major, per field (``CLOUD_FIELDS``); one point is NaN (not dense)."""
    n = CLOUD_HEIGHT * CLOUD_WIDTH
    k = np.arange(n)
    x = (0.5 + 0.1 * k + 0.01 * seq).astype(np.float32)
    x[5] = np.nan
    return {
        "x": x,
        "y": (np.sin(k + seq) * 2).astype(np.float32),
        "z": (0.25 * (k // CLOUD_WIDTH)).astype(np.float32),
        "intensity": (k * 3.0 + seq).astype(np.float32),
        "ring": (k // CLOUD_WIDTH).astype(np.uint16),
        "time": (seq / CLOUD_RATE_HZ + k * 1e-5).astype(np.float64),
    }


def cloud_data(seq: int) -> bytes:
    """Cloud ``seq`` as PointCloud2 ``data``: ``CLOUD_FIELDS`` at their offsets, padding of
    0xAB between fields and after each row (which must not reach the dataset)."""
    names = [f[0] for f in CLOUD_FIELDS]
    formats = ["<" + {4: "u2", 7: "f4", 8: "f8"}[f[2]] for f in CLOUD_FIELDS]
    # (Any: numpy's stubs type this dict differently for Python 3.10 and 3.12)
    spec: Any = {
        "names": names,
        "formats": formats,
        "offsets": [f[1] for f in CLOUD_FIELDS],
        "itemsize": CLOUD_POINT_STEP,
    }
    dtype = np.dtype(spec)
    raw = np.full((CLOUD_HEIGHT, CLOUD_WIDTH * CLOUD_POINT_STEP + CLOUD_ROW_PADDING), 0xAB, np.uint8)
    points = raw[:, : CLOUD_WIDTH * CLOUD_POINT_STEP].copy().reshape(-1).view(dtype)
    for name, values in cloud_values(seq).items():
        points[name] = values
    raw[:, : CLOUD_WIDTH * CLOUD_POINT_STEP] = points.view(np.uint8).reshape(CLOUD_HEIGHT, -1)
    return raw.tobytes()


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


# ---------------------------------------------------------------- robot description


def _rpy(xyz: tuple[float, float, float], rpy: tuple[float, float, float]) -> str:
    return f'<origin xyz="{xyz[0]:.17g} {xyz[1]:.17g} {xyz[2]:.17g}" rpy="{rpy[0]:.17g} {rpy[1]:.17g} {rpy[2]:.17g}"/>'


def teleop_urdf(side_camera: bool = False) -> str:
    """URDF of the arm: world -> base_link -> arm_link1..7 -> hand -> two fingers, and the cameras."""
    links = [WORLD, BASE_LINK, *(f"arm_link{i}" for i in range(1, 8)), HAND, "left_finger", "right_finger"]
    links += [WRIST_CAMERA_FRAME, OVERHEAD_CAMERA_FRAME]
    links += [SIDE_CAMERA_FRAME] if side_camera else []
    joints = []
    static = {(p, c): (xyz, rpy) for p, c, xyz, rpy in _static(side_camera)}

    def fixed(name: str, parent: str, child: str) -> None:
        xyz, rpy = static[(parent, child)]
        joints.append(
            f'  <joint name="{name}" type="fixed">\n'
            f'    <parent link="{parent}"/><child link="{child}"/>\n    {_rpy(xyz, rpy)}\n  </joint>'
        )

    fixed("world_joint", WORLD, BASE_LINK)
    parent = BASE_LINK
    for i, name in enumerate(ARM_JOINTS, start=1):
        child = f"arm_link{i}"
        joints.append(
            f'  <joint name="{name}" type="revolute">\n'
            f'    <parent link="{parent}"/><child link="{child}"/>\n'
            f'    <origin xyz="0 0 {0.333 if i == 1 else 0.1}" rpy="0 0 0"/><axis xyz="0 0 1"/>\n'
            f'    <limit lower="{-ARM_LIMIT}" upper="{ARM_LIMIT}" effort="87" velocity="2.1"/>\n'
            "  </joint>"
        )
        parent = child
    joints.append(
        '  <joint name="hand_joint" type="fixed">\n'
        f'    <parent link="{parent}"/><child link="{HAND}"/>\n'
        '    <origin xyz="0 0 0.107" rpy="0 0 0"/>\n  </joint>'
    )
    for name, child, axis in (("finger_joint1", "left_finger", "0 1 0"), ("finger_joint2", "right_finger", "0 -1 0")):
        joints.append(
            f'  <joint name="{name}" type="prismatic">\n'
            f'    <parent link="{HAND}"/><child link="{child}"/>\n'
            f'    <origin xyz="0 0 0.0584" rpy="0 0 0"/><axis xyz="{axis}"/>\n'
            f'    <limit lower="0" upper="{FINGER_LIMIT}" effort="20" velocity="0.2"/>\n'
            "  </joint>"
        )
    fixed("wrist_camera_joint", HAND, WRIST_CAMERA_FRAME)
    fixed("overhead_camera_joint", WORLD, OVERHEAD_CAMERA_FRAME)
    if side_camera:
        fixed("side_camera_joint", WORLD, SIDE_CAMERA_FRAME)
    body = "\n".join([*(f'  <link name="{n}"/>' for n in links), *joints])
    return f'<?xml version="1.0"?>\n<robot name="{ROBOT_NAME}">\n{body}\n</robot>\n'


# ---------------------------------------------------------------- images

BLOCK = 16  # code block size in pixels (one H.264 macroblock)
CODE_DIGITS = 12  # base-4 digits: frame numbers up to 4**12 - 1
CODE_LEVELS = (32, 96, 160, 224)
_BACKGROUND_TINT = {TOPIC_WRIST_IMAGE: (40, 0, 0), TOPIC_OVERHEAD_IMAGE: (0, 0, 60), TOPIC_SIDE_IMAGE: (0, 40, 0)}
# Colour of each camera's code blocks around their grey level (mean zero, so the decoded
# level is unchanged): the cameras' frames differ even when blocks fill the image.
CODE_TINT = {TOPIC_WRIST_IMAGE: (0, 0, 0), TOPIC_OVERHEAD_IMAGE: (24, 0, -24), TOPIC_SIDE_IMAGE: (0, 24, -24)}


def check_size(width: int, height: int) -> None:
    if (width // BLOCK) * (height // BLOCK) < CODE_DIGITS or width % 2 or height % 2:
        raise ValueError(
            f"image size {width}x{height}: expected even sides and {CODE_DIGITS} {BLOCK}px code blocks (e.g. 64x48)"
        )


def _blocks(width: int) -> Iterator[tuple[int, int]]:
    cols = width // BLOCK
    for i in range(CODE_DIGITS):
        yield (i // cols) * BLOCK, (i % cols) * BLOCK


@lru_cache(maxsize=8)
def _background(camera: str, width: int, height: int) -> np.ndarray:
    """A smooth gradient twice as wide as the image; frames show a window sliding along it."""
    x = np.arange(2 * width)[None, :]
    y = np.arange(height)[:, None]
    tint = _BACKGROUND_TINT.get(camera, (0, 0, 0))
    r = 90 + 60 * np.sin(2 * np.pi * x / width) + 0 * y + tint[0]
    g = 100 + 50 * np.cos(2 * np.pi * y / height) + 0 * x + tint[1]
    b = 110 + 40 * np.sin(2 * np.pi * (x + y) / (width + height)) + tint[2]
    img: np.ndarray = np.clip(np.stack(np.broadcast_arrays(r, g, b), axis=-1), 0, 255).astype(np.uint8)
    img.flags.writeable = False
    return img


def rgb_frame(camera: str, seq: int, width: int, height: int) -> np.ndarray:
    """Frame ``seq`` of a camera topic: HxWx3 uint8 RGB, a moving gradient with the number in blocks.

    The first ``CODE_DIGITS`` 16x16 blocks (row-major from the top left) are grey, one
    base-4 digit each (least significant first) at levels ``CODE_LEVELS``, plus the
    camera's ``CODE_TINT``.
    """
    check_size(width, height)
    shift = (seq * 2) % width
    img = np.array(_background(camera, width, height)[:, shift : shift + width])
    tint = np.array(CODE_TINT.get(camera, (0, 0, 0)))
    value = seq
    for y, x in _blocks(width):
        img[y : y + BLOCK, x : x + BLOCK] = CODE_LEVELS[value % 4] + tint
        value //= 4
    return img


def decode_frame_number(rgb: np.ndarray) -> int:
    """The sequence number ``rgb_frame`` wrote into a frame (also after lossy compression)."""
    levels = np.array(CODE_LEVELS, dtype=np.float64)
    value = 0
    for i, (y, x) in enumerate(_blocks(rgb.shape[1])):
        inner = rgb[y + 4 : y + BLOCK - 4, x + 4 : x + BLOCK - 4].astype(np.float64).mean()
        value += int(np.argmin(np.abs(levels - inner))) * 4**i
    return value


@lru_cache(maxsize=4)
def _depth_base(width: int, height: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    base: np.ndarray = ((500 + 3 * x + 5 * y) % 9500).astype(np.uint16)
    base.flags.writeable = False
    return base


def depth_frame(seq: int, width: int, height: int) -> np.ndarray:
    """Depth frame ``seq``: HxW uint16 millimetres, an exact function of the pixel and ``seq``:
    ``(500 + 3 x + 5 y + 7 seq) % 9500 + 300``."""
    # Computed from a cached (500 + 3 x + 5 y) % 9500 in uint16 (a 640x480 frame in 0.05 ms
    # rather than 2-5 ms, for the live scene publisher): adding (7 seq) % 9500 + 300 gives
    # at most 19298, and 9500 comes off where the sum wrapped, i.e. where it is >= 9800.
    depth: np.ndarray = _depth_base(width, height) + np.uint16((7 * seq) % 9500 + 300)
    np.subtract(depth, 9500, out=depth, where=depth >= 9800)
    return depth


def camera_intrinsics(width: int, height: int) -> tuple[float, float, float, float]:
    """(fx, fy, cx, cy) of the wrist camera."""
    return 0.9 * width, 0.9 * width, width / 2, height / 2


CAMERA_DISTORTION = ("plumb_bob", (0.1, -0.05, 0.001, 0.002, 0.0))


# ---------------------------------------------------------------- the schedule


@dataclass(frozen=True)
class TeleopConfig:
    fmt: BagFormat
    duration_s: float = 2.0
    width: int = 64
    height: int = 48
    fps: int = 30
    joint_rate_hz: int = 100
    command_rate_hz: int = 50
    wrench_rate_hz: int = 1000
    tf_rate_hz: int = 100
    with_depth: bool = True
    compressed: bool = False  # every camera JPEG on <image topic>/compressed
    legacy_tf: bool = False
    start_ns: int = START_NS
    compressed_cameras: tuple[str, ...] = ()  # image topics (of CAMERA_FRAMES) published JPEG
    side_camera: bool = False  # a third RGB camera, TOPIC_SIDE_IMAGE
    without_camera_info: tuple[str, ...] = ()  # image topics (of cameras(), or the depth one) with no camera_info
    controller_state: bool = False  # TOPIC_CONTROLLER_STATE instead of /joint_states (bags only)
    controller_layout: ControllerLayout = "jazzy"  # of the controller state in a rosbag2 bag
    with_command: bool | None = None  # /joint_command; None: unless controller_state
    unnamed_joints: UnnamedJoints | None = None  # the joint states list no names (see UnnamedJoints)
    audio: AudioLayout | None = None  # a microphone on TOPIC_AUDIO, in this layout (see audio_samples)
    audio_format: str = "s16le"  # its sample format (a key of AUDIO_FORMAT_CODES)
    audio_channels: int = 1
    audio_rate_hz: int = 16000
    audio_chunk: int = 1024  # frames per message
    audio_dropped: tuple[int, ...] = ()  # the audio messages (seq) not recorded: dropped chunks
    lidar: bool = False  # a LaserScan (TOPIC_SCAN) and a PointCloud2 (TOPIC_POINTS) in LIDAR_FRAME
    h264_cameras: tuple[str, ...] = ()  # image topics (of cameras()) published H.264 on <topic>/h264
    h264_message: H264Message = "CompressedVideo"  # what carries their packets
    h264_lead: int = 0  # packets each publishes before its first keyframe (< H264_GOP)
    detections: bool = False  # vision_msgs/Detection2DArray per wrist frame on TOPIC_DETECTIONS (ROS 2 only)
    h264_bframes: bool = False  # their streams reorder frames (2 B-frames; bags only)

    def __post_init__(self) -> None:
        object.__setattr__(self, "h264_cameras", tuple(self.h264_cameras))
        for camera in self.h264_cameras:
            if camera not in self.cameras() or self.is_compressed(camera):
                raise ValueError(f"H.264 camera {camera!r}: expected one of the image topics not published JPEG")
        if self.h264_cameras and self.fmt == "ros1":
            raise ValueError("H.264 cameras: ROS 2 recordings only")
        if not 0 <= self.h264_lead < H264_GOP:
            raise ValueError(f"h264_lead: expected 0 .. {H264_GOP - 1}, got {self.h264_lead}")
        object.__setattr__(self, "compressed_cameras", tuple(self.compressed_cameras))
        for camera in self.compressed_cameras:
            if camera not in self.cameras():
                known = ", ".join(self.cameras())
                raise ValueError(f"compressed camera {camera!r}: expected one of the image topics {known}")
        object.__setattr__(self, "without_camera_info", tuple(self.without_camera_info))
        for camera in self.without_camera_info:
            if camera not in self.camera_info_topics():
                known = ", ".join(self.camera_info_topics())
                raise ValueError(f"camera without camera_info {camera!r}: expected one of the image topics {known}")
        object.__setattr__(self, "audio_dropped", tuple(self.audio_dropped))
        if self.audio is not None and self.audio_format not in AUDIO_FORMAT_CODES:
            raise ValueError(f"audio_format {self.audio_format!r}: expected one of {', '.join(AUDIO_FORMAT_CODES)}")
        if self.detections and self.fmt == "ros1":
            raise ValueError("detections: vision_msgs are recorded in ROS 2 recordings only")
        if self.controller_state and self.unnamed_joints == "all":
            raise ValueError("unnamed_joints 'all' with controller_state: the arm controller's joints are the arm's")

    def joint_state_topic(self) -> str:
        """The topic of the joint states: ``/joint_states``, or the controller state's."""
        return TOPIC_CONTROLLER_STATE if self.controller_state else TOPIC_JOINT_STATES

    def records_command(self) -> bool:
        """Whether ``/joint_command`` is recorded."""
        return self.with_command if self.with_command is not None else not self.controller_state

    def state_joints(self, seq: int) -> tuple[str, ...]:
        """The joints joint state message ``seq`` gives values of, in its order (it lists
        these names, or none with ``unnamed_joints``)."""
        if self.unnamed_joints is not None:
            return JOINTS if self.unnamed_joints == "all" else ARM_JOINTS
        return CONTROLLER_JOINTS if self.controller_state else joint_state_names(seq)

    def bag_only_topics(self) -> tuple[str, ...]:
        """Topics of types only a bag can hold here (no ``control_msgs`` Python package to
        publish them live with)."""
        return (TOPIC_CONTROLLER_STATE,) if self.controller_state else ()

    def cameras(self) -> dict[str, str]:
        """The RGB cameras of the scene: raw image topic -> optical frame."""
        return CAMERA_FRAMES if self.side_camera else CAMERAS

    def camera_info_topics(self) -> dict[str, str]:
        """Every camera of the scene, depth included: raw image topic -> its camera_info topic."""
        topics = {camera: CAMERA_INFO_TOPICS[camera] for camera in self.cameras()}
        if self.with_depth:
            topics[TOPIC_DEPTH_IMAGE] = TOPIC_DEPTH_CAMERA_INFO
        return topics

    def has_camera_info(self, camera: str) -> bool:
        """Whether camera ``camera`` (its raw image topic) publishes its camera_info."""
        return camera not in self.without_camera_info

    def is_compressed(self, camera: str) -> bool:
        return self.compressed or camera in self.compressed_cameras

    def image_topic(self, topic: str) -> str:
        """The topic camera ``topic`` (its raw image topic) publishes on."""
        if topic in self.h264_cameras:
            return topic + H264_SUFFIX
        return topic + COMPRESSED_SUFFIX if self.is_compressed(topic) else topic

    def image_type(self, camera: str) -> str:
        """The message type camera ``camera`` (its raw image topic) publishes."""
        if camera in self.h264_cameras:
            video = self.h264_message == "CompressedVideo"
            return COMPRESSED_VIDEO_TYPE if video else "sensor_msgs/msg/CompressedImage"
        return "sensor_msgs/msg/CompressedImage" if self.is_compressed(camera) else "sensor_msgs/msg/Image"

    def rates(self) -> dict[str, float | None]:
        """Topic -> publish rate (None: published once, at t = 0)."""
        rates: dict[str, float | None] = {
            TOPIC_ROBOT_DESCRIPTION: None,
            TOPIC_TF_STATIC: None,
            TOPIC_TF: self.tf_rate_hz,
            self.joint_state_topic(): self.joint_rate_hz,
        }
        if self.records_command():
            rates[TOPIC_JOINT_COMMAND] = self.command_rate_hz
        rates |= {self.image_topic(camera): self.fps for camera in self.cameras()}
        rates |= {CAMERA_INFO_TOPICS[camera]: self.fps for camera in self.cameras() if self.has_camera_info(camera)}
        rates[TOPIC_WRENCH] = self.wrench_rate_hz
        if self.lidar:
            rates |= {TOPIC_SCAN: SCAN_RATE_HZ, TOPIC_POINTS: CLOUD_RATE_HZ}
        if self.with_depth:
            rates[TOPIC_DEPTH_IMAGE] = self.fps
            if self.has_camera_info(TOPIC_DEPTH_IMAGE):
                rates[TOPIC_DEPTH_CAMERA_INFO] = self.fps
        if self.audio is not None:
            rates[TOPIC_AUDIO] = self.audio_rate_hz / self.audio_chunk
            if self.audio == "older":
                rates[TOPIC_AUDIO_INFO] = None
        if self.detections:
            rates[TOPIC_DETECTIONS] = self.fps
        return rates

    def count(self, topic: str) -> int:
        rate = self.rates()[topic]
        count = 1 if rate is None else round(self.duration_s * rate)
        return count - len(self.dropped(topic))

    def dropped(self, topic: str) -> frozenset[int]:
        """The messages of ``topic`` (seq) the recording lacks."""
        return frozenset(self.audio_dropped) if topic == TOPIC_AUDIO else frozenset()

    def msgtypes(self) -> dict[str, str]:
        """Topic -> ROS 2 message type name (a ROS 1 bag's ``tf/tfMessage`` reads as TFMessage)."""
        types = {
            TOPIC_ROBOT_DESCRIPTION: "std_msgs/msg/String",
            TOPIC_TF_STATIC: "tf2_msgs/msg/TFMessage",
            TOPIC_TF: "tf2_msgs/msg/TFMessage",
            self.joint_state_topic(): CONTROLLER_STATE_TYPE if self.controller_state else "sensor_msgs/msg/JointState",
        }
        if self.records_command():
            types[TOPIC_JOINT_COMMAND] = "sensor_msgs/msg/JointState"
        for camera in self.cameras():
            types[self.image_topic(camera)] = self.image_type(camera)
        types |= {
            CAMERA_INFO_TOPICS[camera]: "sensor_msgs/msg/CameraInfo"
            for camera in self.cameras()
            if self.has_camera_info(camera)
        }
        types[TOPIC_WRENCH] = "geometry_msgs/msg/WrenchStamped"
        if self.lidar:
            types |= {TOPIC_SCAN: "sensor_msgs/msg/LaserScan", TOPIC_POINTS: "sensor_msgs/msg/PointCloud2"}
        if self.with_depth:
            types[TOPIC_DEPTH_IMAGE] = "sensor_msgs/msg/Image"
            if self.has_camera_info(TOPIC_DEPTH_IMAGE):
                types[TOPIC_DEPTH_CAMERA_INFO] = "sensor_msgs/msg/CameraInfo"
        if self.audio == "ros2":
            types[TOPIC_AUDIO] = "audio_common_msgs/msg/AudioStamped"
        elif self.audio == "older":
            types[TOPIC_AUDIO] = "audio_common_msgs/msg/AudioData"
            types[TOPIC_AUDIO_INFO] = "audio_common_msgs/msg/AudioInfo"
        if self.detections:
            types[TOPIC_DETECTIONS] = DETECTIONS_TYPE
        return types


@dataclass(frozen=True, order=True)
class Event:
    """One message of the schedule: ``topic``'s message ``seq``, stamped and received."""

    receive_ns: int
    order: int  # tie-break between topics received at the same instant
    topic: str
    seq: int
    stamp_ns: int


def schedule(config: TeleopConfig, *, endless: bool = False) -> Iterator[Event]:
    """Every message of the recording in receive-time order, generated lazily.

    ``endless``: ignore ``duration_s`` and never end; every stream goes on with the same
    formulas (``seq`` 0, 1, 2, ..., ``stamp_ns(seq)``), so the schedule of any ``duration_s``
    (of whole periods of every rate) is this one's events stamped before ``duration_s``.
    """

    def stream(order: int, topic: str, rate: float | None) -> Iterator[Event]:
        n = 1 if rate is None else round(config.duration_s * rate)
        dropped = config.dropped(topic)
        for seq in itertools.count() if endless and rate is not None else range(n):
            if seq in dropped:
                continue
            stamp = config.start_ns if rate is None else stamp_ns(seq, rate, config.start_ns)
            yield Event(stamp + receive_latency_ns(topic, seq), order, topic, seq, stamp)

    streams = [stream(i, topic, rate) for i, (topic, rate) in enumerate(config.rates().items())]
    return heapq.merge(*streams)


@dataclass(frozen=True)
class TeleopBagInfo:
    """What ``write_teleop_bag`` wrote."""

    path: Path  # the rosbag2 directory or the ROS 1 .bag file
    files: tuple[Path, ...]  # the storage files
    config: TeleopConfig
    counts: dict[str, int]  # topic -> messages written
    msgtypes: dict[str, str]  # topic -> ROS 2 type name, as BagSource reports it
    start_ns: int  # stamp of t = 0
    first_receive_ns: int
    last_receive_ns: int
    urdf: str = field(repr=False)

    @property
    def fmt(self) -> BagFormat:
        return self.config.fmt

    @property
    def message_count(self) -> int:
        return sum(self.counts.values())


# ---------------------------------------------------------------- messages


_TRAJECTORY_POINTS = "trajectory_msgs/JointTrajectoryPoint {}\n"
_MULTI_DOF_POINTS = "trajectory_msgs/MultiDOFJointTrajectoryPoint multi_dof_{}\n"


def controller_state_definition(ros1: bool, layout: ControllerLayout = "jazzy") -> str:
    """The ``.msg`` text of ``control_msgs/JointTrajectoryControllerState``, field for field
    as upstream defines it: ROS 1's (header, joint_names, desired, actual, error), ROS 2
    Jazzy's (reference, feedback, error, output, and the multi-DOF ones), or Humble's
    (Jazzy's with the deprecated desired and actual after output, in both halves)."""
    if ros1:
        return "Header header\nstring[] joint_names\n" + "".join(
            _TRAJECTORY_POINTS.format(f) for f in ("desired", "actual", "error")
        )
    fields = ("reference", "feedback", "error", "output") + (("desired", "actual") if layout == "humble" else ())
    return (
        "std_msgs/Header header\nstring[] joint_names\n"
        + "".join(_TRAJECTORY_POINTS.format(f) for f in fields)
        + "string[] multi_dof_joint_names\n"
        + "".join(_MULTI_DOF_POINTS.format(f) for f in fields)
    )


@lru_cache(maxsize=6)
def typestore(ros1: bool, controller_layout: ControllerLayout = "jazzy", audio: AudioLayout | None = None) -> Typestore:
    """ROS 2 Jazzy, or ROS 1 Noetic plus tf2_msgs/TFMessage and the legacy tf/tfMessage;
    both with ``control_msgs/JointTrajectoryControllerState`` (``controller_state_definition``),
    which neither has, and ``audio_common_msgs`` of the ``audio`` layout, if any."""
    store = get_typestore(Stores.ROS1_NOETIC if ros1 else Stores.ROS2_JAZZY)
    definition = controller_state_definition(ros1, controller_layout)
    store.register(get_types_from_msg(definition, CONTROLLER_STATE_TYPE))
    if audio is not None:
        register_audio(store, audio)
    if not ros1:
        store.register(get_types_from_msg(COMPRESSED_VIDEO_DEFINITION, COMPRESSED_VIDEO_TYPE))
        register_vision_msgs(store)  # (for TeleopConfig.detections; other recordings do not use them)
        return store
    definition = "geometry_msgs/TransformStamped[] transforms"
    store.register(get_types_from_msg(definition, "tf2_msgs/msg/TFMessage"))
    store.register(get_types_from_msg(definition, "tf/msg/tfMessage"))
    return store


class Messages:
    """Builds and serializes each message of the schedule."""

    def __init__(self, config: TeleopConfig) -> None:
        self.config = config
        self.ros1 = config.fmt == "ros1"
        self.store = typestore(self.ros1, config.controller_layout, config.audio)
        self.types = self.store.types
        self.tf_type = "tf/msg/tfMessage" if self.ros1 and config.legacy_tf else "tf2_msgs/msg/TFMessage"
        any_jpeg = any(config.is_compressed(camera) for camera in config.cameras())
        self.jpeg = JpegEncoder(config.width, config.height) if any_jpeg else None
        self.urdf = teleop_urdf(config.side_camera)
        self.builders: dict[str, tuple[str, Callable[[int, int], Any]]] = {
            TOPIC_ROBOT_DESCRIPTION: (
                "std_msgs/msg/String",
                lambda seq, stamp: self.new("std_msgs/msg/String", data=self.urdf),
            ),
            TOPIC_TF_STATIC: ("tf2_msgs/msg/TFMessage", self.tf_static),
            TOPIC_TF: (self.tf_type, self.tf),
            TOPIC_JOINT_STATES: ("sensor_msgs/msg/JointState", self.joint_state),
            TOPIC_JOINT_COMMAND: ("sensor_msgs/msg/JointState", self.command),
            TOPIC_CONTROLLER_STATE: (CONTROLLER_STATE_TYPE, self.controller),
            TOPIC_WRIST_CAMERA_INFO: ("sensor_msgs/msg/CameraInfo", self._camera_info_builder(WRIST_CAMERA_FRAME)),
            TOPIC_OVERHEAD_CAMERA_INFO: (
                "sensor_msgs/msg/CameraInfo",
                self._camera_info_builder(OVERHEAD_CAMERA_FRAME),
            ),
            TOPIC_SIDE_CAMERA_INFO: ("sensor_msgs/msg/CameraInfo", self._camera_info_builder(SIDE_CAMERA_FRAME)),
            TOPIC_DEPTH_CAMERA_INFO: ("sensor_msgs/msg/CameraInfo", self._camera_info_builder(DEPTH_FRAME)),
            TOPIC_DEPTH_IMAGE: ("sensor_msgs/msg/Image", self.depth),
            TOPIC_WRENCH: ("geometry_msgs/msg/WrenchStamped", self.wrench),
            TOPIC_SCAN: ("sensor_msgs/msg/LaserScan", self.laser_scan),
            TOPIC_POINTS: ("sensor_msgs/msg/PointCloud2", self.point_cloud),
        }
        if config.audio is not None:
            self.builders[TOPIC_AUDIO] = (config.msgtypes()[TOPIC_AUDIO], self.audio)
            self.builders[TOPIC_AUDIO_INFO] = ("audio_common_msgs/msg/AudioInfo", self.audio_info)
        for camera in CAMERA_FRAMES:
            compressed = config.is_compressed(camera)
            build = self._h264_builder(camera) if camera in config.h264_cameras else None
            build = build or self._image_builder(camera, compressed)
            self.builders[config.image_topic(camera)] = (config.image_type(camera), build)
        if config.detections:
            self.builders[TOPIC_DETECTIONS] = (DETECTIONS_TYPE, self.detections)

    def new(self, msgtype: str, **fields: Any) -> Any:
        """An instance of the typestore's class for ``msgtype``."""
        return self.types[msgtype](**fields)

    def msgtype(self, topic: str) -> str:
        return self.builders[topic][0]

    def serialize(self, topic: str, seq: int, stamp: int) -> bytes:
        msgtype, build = self.builders[topic]
        msg = build(seq, stamp)
        if self.ros1:
            return bytes(self.store.serialize_ros1(msg, msgtype))
        return bytes(self.store.serialize_cdr(msg, msgtype))

    def header(self, stamp: int, frame_id: str, seq: int = 0) -> Any:
        time = self.new("builtin_interfaces/msg/Time", sec=stamp // 1_000_000_000, nanosec=stamp % 1_000_000_000)
        if self.ros1:
            return self.new("std_msgs/msg/Header", seq=seq, stamp=time, frame_id=frame_id)
        return self.new("std_msgs/msg/Header", stamp=time, frame_id=frame_id)

    def transform(self, tf: Transform, stamp: int, seq: int = 0) -> Any:
        return self.new(
            "geometry_msgs/msg/TransformStamped",
            header=self.header(stamp, tf.parent, seq),
            child_frame_id=tf.child,
            transform=self.new(
                "geometry_msgs/msg/Transform",
                translation=self.new(
                    "geometry_msgs/msg/Vector3", x=tf.translation[0], y=tf.translation[1], z=tf.translation[2]
                ),
                rotation=self.new(
                    "geometry_msgs/msg/Quaternion",
                    x=tf.rotation_xyzw[0],
                    y=tf.rotation_xyzw[1],
                    z=tf.rotation_xyzw[2],
                    w=tf.rotation_xyzw[3],
                ),
            ),
        )

    def tf_static(self, seq: int, stamp: int) -> Any:
        transforms = [self.transform(tf, stamp) for tf in static_transforms(self.config.side_camera)]
        if self.config.lidar:
            transforms.append(self.transform(LIDAR_TRANSFORM, stamp))
        return self.new("tf2_msgs/msg/TFMessage", transforms=transforms)

    def tf(self, seq: int, stamp: int) -> Any:
        t = seconds(stamp, self.config.start_ns)
        return self.new(self.tf_type, transforms=[self.transform(tf, stamp, seq) for tf in dynamic_transforms(t)])

    def joint_state(self, seq: int, stamp: int) -> Any:
        t = seconds(stamp, self.config.start_ns)
        names = self.config.state_joints(seq)
        return self.new(
            "sensor_msgs/msg/JointState",
            header=self.header(stamp, "", seq),
            name=list(names) if self.config.unnamed_joints is None else [],
            position=select_joints(joint_positions(t), names),
            velocity=select_joints(joint_velocities(t), names),
            effort=select_joints(joint_efforts(t), names),
        )

    def controller(self, seq: int, stamp: int) -> Any:
        """The controller state: actual/feedback what the joints did, desired/reference the
        command, error their difference; in the layout of the bag's definition."""
        t = seconds(stamp, self.config.start_ns)
        names = self.config.state_joints(seq)
        positions = select_joints(joint_positions(t), names)
        velocities = select_joints(joint_velocities(t), names)
        command = select_joints(joint_command(t), names)
        measured = self.trajectory_point(positions, velocities, select_joints(joint_efforts(t), names))
        target = self.trajectory_point(command)
        error = self.trajectory_point(command - positions, -velocities)
        fields: dict[str, Any] = {
            "header": self.header(stamp, "", seq),
            "joint_names": list(names) if self.config.unnamed_joints is None else [],
        }
        if self.ros1:
            return self.new(CONTROLLER_STATE_TYPE, **fields, desired=target, actual=measured, error=error)
        if self.config.controller_layout == "humble":  # the new fields left empty, the deprecated ones filled
            empty = self.trajectory_point()
            points = {"reference": empty, "feedback": empty, "error": error, "output": empty}
            points |= {"desired": target, "actual": measured}
        else:
            points = {"reference": target, "feedback": measured, "error": error, "output": self.trajectory_point()}
        no_motion = self.new(
            "trajectory_msgs/msg/MultiDOFJointTrajectoryPoint",
            transforms=[],
            velocities=[],
            accelerations=[],
            time_from_start=self.new("builtin_interfaces/msg/Duration", sec=0, nanosec=0),
        )
        multi_dof = {f"multi_dof_{name}": no_motion for name in points}
        return self.new(CONTROLLER_STATE_TYPE, **fields, **points, multi_dof_joint_names=[], **multi_dof)

    def trajectory_point(self, *values: np.ndarray) -> Any:
        """A JointTrajectoryPoint of positions, velocities, efforts (the ones given; no accelerations)."""
        empty = np.zeros(0, dtype=np.float64)
        positions, velocities, effort = (values[i] if i < len(values) else empty for i in range(3))
        return self.new(
            "trajectory_msgs/msg/JointTrajectoryPoint",
            positions=positions,
            velocities=velocities,
            accelerations=empty,
            effort=effort,
            time_from_start=self.new("builtin_interfaces/msg/Duration", sec=0, nanosec=0),
        )

    def command(self, seq: int, stamp: int) -> Any:
        t = seconds(stamp, self.config.start_ns)
        empty = np.zeros(0, dtype=np.float64)
        return self.new(
            "sensor_msgs/msg/JointState",
            header=self.header(stamp, "", seq),
            name=list(COMMAND_ORDER),
            position=select_joints(joint_command(t), COMMAND_ORDER),
            velocity=empty,
            effort=empty,
        )

    def audio(self, seq: int, stamp: int) -> Any:
        """Audio message ``seq``: ``audio_samples``, as AudioStamped or as AudioData bytes."""
        config = self.config
        samples = audio_samples(config, seq)
        if config.audio == "older":
            packed = file_bytes(samples, "s24le") if config.audio_format == "s24le" else samples.tobytes()  # (3 bytes)
            return self.new("audio_common_msgs/msg/AudioData", data=np.frombuffer(packed, np.uint8))
        code, field = portaudio_format(config.audio_format)
        arrays = audio_data_arrays(samples, field)
        info = self.new(
            "audio_common_msgs/msg/AudioInfo",
            format=code,
            channels=config.audio_channels,
            rate=config.audio_rate_hz,
            chunk=config.audio_chunk,
        )
        data = self.new("audio_common_msgs/msg/AudioData", **arrays)
        audio = self.new("audio_common_msgs/msg/Audio", audio_data=data, info=info)
        return self.new("audio_common_msgs/msg/AudioStamped", header=self.header(stamp, "microphone", seq), audio=audio)

    def audio_info(self, seq: int, stamp: int) -> Any:
        """The older layout's AudioInfo (published once, latched)."""
        config = self.config
        return self.new(
            "audio_common_msgs/msg/AudioInfo",
            channels=config.audio_channels,
            sample_rate=config.audio_rate_hz,
            sample_format=AUDIO_GSTREAMER_NAMES[config.audio_format],
            bitrate=config.audio_rate_hz * config.audio_channels * SAMPLE_BITS[config.audio_format],
            coding_format="wave",
        )

    def wrench(self, seq: int, stamp: int) -> Any:
        force, torque = wrench(seconds(stamp, self.config.start_ns))
        return self.new(
            "geometry_msgs/msg/WrenchStamped",
            header=self.header(stamp, FT_FRAME, seq),
            wrench=self.new(
                "geometry_msgs/msg/Wrench",
                force=self.new("geometry_msgs/msg/Vector3", x=force[0], y=force[1], z=force[2]),
                torque=self.new("geometry_msgs/msg/Vector3", x=torque[0], y=torque[1], z=torque[2]),
            ),
        )

    def laser_scan(self, seq: int, stamp: int) -> Any:
        return self.new(
            "sensor_msgs/msg/LaserScan",
            header=self.header(stamp, LIDAR_FRAME, seq),
            angle_min=SCAN_ANGLE_MIN,
            angle_max=SCAN_ANGLE_MIN + (SCAN_SAMPLES - 1) * SCAN_ANGLE_INCREMENT,
            angle_increment=SCAN_ANGLE_INCREMENT,
            time_increment=1.0 / SCAN_RATE_HZ / SCAN_SAMPLES,
            scan_time=1.0 / SCAN_RATE_HZ,
            range_min=SCAN_RANGE[0],
            range_max=SCAN_RANGE[1],
            ranges=scan_ranges(seq),
            intensities=scan_intensities(seq),
        )

    def point_cloud(self, seq: int, stamp: int) -> Any:
        fields = [
            self.new("sensor_msgs/msg/PointField", name=name, offset=offset, datatype=datatype, count=count)
            for name, offset, datatype, count in CLOUD_FIELDS
        ]
        return self.new(
            "sensor_msgs/msg/PointCloud2",
            header=self.header(stamp, LIDAR_FRAME, seq),
            height=CLOUD_HEIGHT,
            width=CLOUD_WIDTH,
            fields=fields,
            is_bigendian=False,
            point_step=CLOUD_POINT_STEP,
            row_step=CLOUD_WIDTH * CLOUD_POINT_STEP + CLOUD_ROW_PADDING,
            data=np.frombuffer(cloud_data(seq), np.uint8),
            is_dense=False,
        )

    def _image_builder(self, camera: str, compressed: bool) -> Callable[[int, int], Any]:
        frame_id = CAMERA_FRAMES[camera]

        def build(seq: int, stamp: int) -> Any:
            rgb = rgb_frame(camera, seq, self.config.width, self.config.height)
            if compressed:
                assert self.jpeg is not None
                data = np.frombuffer(self.jpeg.encode(rgb), dtype=np.uint8)
                return self.new(
                    "sensor_msgs/msg/CompressedImage",
                    header=self.header(stamp, frame_id, seq),
                    format=JPEG_FORMAT,
                    data=data,
                )
            return self.image(stamp, frame_id, seq, rgb, "rgb8")

        return build

    def _h264_builder(self, camera: str) -> Callable[[int, int], Any]:
        """Camera ``camera``'s frames through an ``AnnexBEncoder``, one per message in
        order from message 0 (built again, it starts the stream anew); with ``h264_lead``
        the encoder has had frames before the recording's first."""
        config = self.config
        frame_id = CAMERA_FRAMES[camera]
        topic = config.image_topic(camera)
        encoders: list[AnnexBEncoder] = []  # the current one; a new one whenever message 0 is built (again)
        built = [0]  # the messages it has made

        def packet(seq: int) -> bytes:
            if config.h264_bframes:
                return reordered(seq)
            if seq == 0:
                encoders[:] = [AnnexBEncoder(config.width, config.height, H264_GOP)]
                for _ in range(H264_GOP - config.h264_lead if config.h264_lead else 0):
                    encoders[0].encode(rgb_frame(camera, 0, config.width, config.height))
                built[0] = 0
            if seq != built[0]:
                raise ValueError(f"{camera}: H.264 message {seq} built after message {built[0] - 1}: in order only")
            built[0] += 1
            return encoders[0].encode(rgb_frame(camera, seq, config.width, config.height))

        stream: list[bytes] = []

        def reordered(seq: int) -> bytes:
            """A stream with B-frames, in decode order: encoded whole at its first message."""
            if not stream:
                frames = [rgb_frame(camera, n, config.width, config.height) for n in range(config.count(topic))]
                stream.extend(AnnexBEncoder(config.width, config.height, H264_GOP, bframes=2).encode_all(frames))
            return stream[seq]

        def build(seq: int, stamp: int) -> Any:
            data = np.frombuffer(packet(seq), np.uint8)
            if config.h264_message == "CompressedImage":
                header = self.header(stamp, frame_id, seq)
                return self.new("sensor_msgs/msg/CompressedImage", header=header, format="h264", data=data)
            timestamp = self.header(stamp, frame_id).stamp
            return self.new(COMPRESSED_VIDEO_TYPE, timestamp=timestamp, frame_id=frame_id, data=data, format="h264")

        return build

    def detections(self, seq: int, stamp: int) -> Any:
        header = self.header(stamp, WRIST_CAMERA_FRAME, seq)
        return detections_message(self.store, header, seq, self.config.width, self.config.height)

    def image(self, stamp: int, frame_id: str, seq: int, pixels: np.ndarray, encoding: str) -> Any:
        height, width = pixels.shape[:2]
        return self.new(
            "sensor_msgs/msg/Image",
            header=self.header(stamp, frame_id, seq),
            height=height,
            width=width,
            encoding=encoding,
            is_bigendian=0,
            step=pixels.strides[0],
            data=np.ascontiguousarray(pixels).reshape(-1).view(np.uint8),
        )

    def depth(self, seq: int, stamp: int) -> Any:
        pixels = depth_frame(seq, self.config.width, self.config.height).astype("<u2")
        return self.image(stamp, DEPTH_FRAME, seq, pixels, "16UC1")

    def _camera_info_builder(self, frame_id: str) -> Callable[[int, int], Any]:
        return lambda seq, stamp: self.camera_info(seq, stamp, frame_id)

    def camera_info(self, seq: int, stamp: int, frame_id: str) -> Any:
        fx, fy, cx, cy = camera_intrinsics(self.config.width, self.config.height)
        k = np.array([fx, 0, cx, 0, fy, cy, 0, 0, 1], dtype=np.float64)
        r = np.eye(3).reshape(-1)
        p = np.array([fx, 0, cx, 0, 0, fy, cy, 0, 0, 0, 1, 0], dtype=np.float64)
        d = np.array(CAMERA_DISTORTION[1], dtype=np.float64)
        roi = self.new("sensor_msgs/msg/RegionOfInterest", x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
        common = {
            "header": self.header(stamp, frame_id, seq),
            "height": self.config.height,
            "width": self.config.width,
            "distortion_model": CAMERA_DISTORTION[0],
            "binning_x": 0,
            "binning_y": 0,
            "roi": roi,
        }
        if self.ros1:
            return self.new("sensor_msgs/msg/CameraInfo", **common, D=d, K=k, R=r, P=p)
        return self.new("sensor_msgs/msg/CameraInfo", **common, d=d, k=k, r=r, p=p)


# ---------------------------------------------------------------- sinks

_LATCHED = (TOPIC_ROBOT_DESCRIPTION, TOPIC_TF_STATIC, TOPIC_AUDIO_INFO)
_INFINITE = QosTime(2147483647, 4294967295)


def _qos(latched: bool) -> list[Qos]:
    return [
        Qos(
            history=QosHistory.KEEP_LAST,
            depth=1 if latched else 10,
            reliability=QosReliability.RELIABLE,
            durability=QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE,
            deadline=_INFINITE,
            lifespan=_INFINITE,
            liveliness=QosLiveliness.AUTOMATIC,
            liveliness_lease_duration=_INFINITE,
            avoid_ros_namespace_conventions=False,
        )
    ]


class _Rosbag2Sink:
    """A rosbag2 directory, split into ``<name>_<k>`` storage files every ``max_duration_ns``.

    rosbags' writer makes one storage file per bag, so each split file is written as its
    own bag in a subdirectory, moved up when closed, and the metadata merged at the end.
    """

    def __init__(
        self,
        path: Path,
        storage: StoragePlugin,
        compression: BagCompression,
        max_duration_ns: int | None,
        topics: dict[str, str],
        store: Typestore,
    ) -> None:
        self.path, self.storage, self.compression = path, storage, compression
        self.max_duration_ns = max_duration_ns
        self.topics, self.store = topics, store
        self.path.mkdir(parents=True)
        self.segment_meta: list[dict[str, Any]] = []
        self.files: list[Path] = []
        self.writer: Rosbag2Writer | None = None
        self.connections: dict[str, Any] = {}
        self.segment_start = 0

    def _open_segment(self, first_ns: int) -> None:
        index = len(self.segment_meta)
        writer = Rosbag2Writer(self.path / f"{self.path.name}_{index}", version=9, storage_plugin=self.storage)
        if self.compression in ("file", "message"):
            mode = CompressionMode.FILE if self.compression == "file" else CompressionMode.MESSAGE
            writer.set_compression(mode, CompressionFormat.ZSTD)
        elif self.compression == "storage":
            writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        writer.open()
        self.connections = {
            topic: writer.add_connection(
                topic, msgtype, typestore=self.store, offered_qos_profiles=_qos(topic in _LATCHED)
            )
            for topic, msgtype in self.topics.items()
        }
        self.writer = writer
        self.segment_start = first_ns

    def _close_segment(self) -> None:
        writer, self.writer = self.writer, None
        assert writer is not None
        writer.close()
        meta = yaml.safe_load((writer.path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        for name in meta["relative_file_paths"]:
            target = self.path / name
            (writer.path / name).rename(target)
            self.files.append(target)
        shutil.rmtree(writer.path)
        self.segment_meta.append(meta)

    def write(self, topic: str, receive_ns: int, data: bytes) -> None:
        if self.writer is not None and self.max_duration_ns and receive_ns - self.segment_start >= self.max_duration_ns:
            self._close_segment()
        if self.writer is None:
            self._open_segment(receive_ns)
        assert self.writer is not None
        self.writer.write(self.connections[topic], receive_ns, data)

    def close(self) -> None:
        if self.writer is None and not self.segment_meta:
            self._open_segment(0)
        if self.writer is not None:
            self._close_segment()
        metas = self.segment_meta
        starts = [m["starting_time"]["nanoseconds_since_epoch"] for m in metas if m["message_count"]]
        ends = [
            m["starting_time"]["nanoseconds_since_epoch"] + m["duration"]["nanoseconds"]
            for m in metas
            if m["message_count"]
        ]
        merged = dict(metas[0])
        counts: dict[str, int] = {}
        for meta in metas:
            for entry in meta["topics_with_message_count"]:
                name = entry["topic_metadata"]["name"]
                counts[name] = counts.get(name, 0) + entry["message_count"]
        merged["topics_with_message_count"] = [
            {**entry, "message_count": counts[entry["topic_metadata"]["name"]]}
            for entry in metas[0]["topics_with_message_count"]
        ]
        merged["relative_file_paths"] = [f.name for f in self.files]
        merged["files"] = [file for meta in metas for file in meta["files"]]
        merged["message_count"] = sum(m["message_count"] for m in metas)
        merged["starting_time"] = {"nanoseconds_since_epoch": min(starts) if starts else 0}
        merged["duration"] = {"nanoseconds": (max(ends) - min(starts)) if starts else 0}
        text = yaml.safe_dump({"rosbag2_bagfile_information": merged}, sort_keys=False)
        (self.path / "metadata.yaml").write_text(text)

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()


class _Rosbag1Sink:
    def __init__(self, path: Path, compression: BagCompression, topics: dict[str, str], store: Typestore) -> None:
        self.writer = Rosbag1Writer(path)
        if compression in ("bz2", "lz4"):
            fmt = Rosbag1Writer.CompressionFormat.BZ2 if compression == "bz2" else Rosbag1Writer.CompressionFormat.LZ4
            self.writer.set_compression(fmt)
        self.writer.open()
        self.connections = {
            topic: self.writer.add_connection(
                topic, msgtype, typestore=store, callerid="/ortf_teleop", latching=1 if topic in _LATCHED else 0
            )
            for topic, msgtype in topics.items()
        }
        self.files = [path]
        self._flushed = 1

    def write(self, topic: str, receive_ns: int, data: bytes) -> None:
        self.writer.write(self.connections[topic], receive_ns, data)
        chunks = self.writer.chunks
        if len(chunks) > self._flushed:
            # rosbags keeps every written chunk's (time, offset) index for the final chunk
            # infos, which only need the counts: keep O(1) stand-ins so memory stays flat.
            for chunk in chunks[self._flushed - 1 : -1]:
                for cid, items in chunk.connections.items():
                    chunk.connections[cid] = range(len(items))  # type: ignore[assignment]
            self._flushed = len(chunks)

    def close(self) -> None:
        self.writer.close()

    def abort(self) -> None:
        self.writer.abort()


# ---------------------------------------------------------------- entry point


def write_teleop_bag(
    path: Path,
    fmt: BagFormat,
    *,
    duration_s: float = 2.0,
    width: int = 64,
    height: int = 48,
    fps: int = 30,
    joint_rate_hz: int = 100,
    command_rate_hz: int = 50,
    wrench_rate_hz: int = 1000,
    tf_rate_hz: int = 100,
    with_depth: bool = True,
    compressed: bool = False,
    legacy_tf: bool = False,
    bag_compression: BagCompression = "none",
    max_bagfile_duration_s: float | None = None,
    start_ns: int = START_NS,
    compressed_cameras: tuple[str, ...] = (),
    side_camera: bool = False,
    controller_state: bool = False,
    controller_layout: ControllerLayout = "jazzy",
    with_command: bool | None = None,
    unnamed_joints: UnnamedJoints | None = None,
    without_camera_info: tuple[str, ...] = (),
    lidar: bool = False,
    detections: bool = False,
    audio: AudioLayout | None = None,
) -> TeleopBagInfo:
    """Write a synthetic teleop recording to ``path`` (a new rosbag2 directory, or a ROS 1 .bag).

    ``compressed``: the cameras publish ``sensor_msgs/CompressedImage`` JPEG on
    ``<image topic>/compressed`` (depth stays raw); ``compressed_cameras``: only these
    cameras do (raw image topics, e.g. ``(TOPIC_OVERHEAD_IMAGE,)``). ``side_camera``: a
    third RGB camera, ``TOPIC_SIDE_IMAGE`` with ``TOPIC_SIDE_CAMERA_INFO``, its frame in
    ``/tf_static`` and the URDF. ``legacy_tf`` (ROS 1 only): ``/tf`` is
    ``tf/tfMessage`` as in old bags. ``bag_compression``: see ``BagCompression``.
    ``max_bagfile_duration_s`` (rosbag2 only): start a new storage file after this much
    recording time, as ``ros2 bag record --max-bag-duration`` does. ``controller_state``:
    the arm's state as a ros_control controller's on ``TOPIC_CONTROLLER_STATE`` (of
    ``controller_layout`` in a rosbag2 bag), no ``/joint_states``, and no ``/joint_command``
    unless ``with_command``; ``unnamed_joints``: joint states without names (see the
    module's docstring).
    ``without_camera_info``: these cameras (raw image topics, depth's too) record no
    camera_info; everything else is as without it. ``lidar``: a LaserScan on ``TOPIC_SCAN``
    and a PointCloud2 on ``TOPIC_POINTS`` (``scan_ranges``, ``cloud_values``), in
    ``LIDAR_FRAME``, whose transform goes to ``/tf_static``. ``detections``: a
    ``vision_msgs/Detection2DArray`` per wrist frame on ``TOPIC_DETECTIONS`` (``synthetic_detections``).
    ``audio``: a microphone on ``TOPIC_AUDIO`` in that layout (``TeleopConfig.audio``'s defaults).
    """
    config = TeleopConfig(
        fmt=fmt,
        duration_s=duration_s,
        width=width,
        height=height,
        fps=fps,
        joint_rate_hz=joint_rate_hz,
        command_rate_hz=command_rate_hz,
        wrench_rate_hz=wrench_rate_hz,
        tf_rate_hz=tf_rate_hz,
        with_depth=with_depth,
        compressed=compressed,
        legacy_tf=legacy_tf,
        start_ns=start_ns,
        compressed_cameras=tuple(compressed_cameras),
        side_camera=side_camera,
        controller_state=controller_state,
        controller_layout=controller_layout,
        with_command=with_command,
        unnamed_joints=unnamed_joints,
        without_camera_info=tuple(without_camera_info),
        lidar=lidar,
        detections=detections,
        audio=audio,
    )
    return write_scene_bag(path, config, bag_compression=bag_compression, max_bagfile_duration_s=max_bagfile_duration_s)


def write_scene_bag(
    path: Path,
    config: TeleopConfig,
    *,
    bag_compression: BagCompression = "none",
    max_bagfile_duration_s: float | None = None,
) -> TeleopBagInfo:
    """Write the scene ``config`` describes (as ``write_teleop_bag`` does from its
    arguments): the scene a live publisher published, as a bag, from the same config."""
    path = Path(path)
    fmt = config.fmt
    if path.exists():
        raise ConversionError(f"{path}: exists already, not overwriting")
    if fmt not in ("mcap", "sqlite3", "ros1"):
        raise ValueError(f"bag format {fmt!r}: expected mcap, sqlite3 or ros1")
    allowed = {"mcap": ("none", "file", "message", "storage"), "sqlite3": ("none", "file", "message")}
    if bag_compression not in allowed.get(fmt, ("none", "bz2", "lz4")):
        raise ValueError(f"bag_compression {bag_compression!r} does not apply to {fmt} bags")
    if config.legacy_tf and fmt != "ros1":
        raise ValueError("legacy_tf (tf/tfMessage) exists only in ROS 1 bags")
    if config.controller_layout != "jazzy" and fmt == "ros1":
        raise ValueError("controller_layout chooses a ROS 2 definition; a ROS 1 bag has ROS 1's")
    if max_bagfile_duration_s is not None and fmt == "ros1":
        raise ValueError("max_bagfile_duration_s splits rosbag2 directories; ROS 1 bags are one file")
    check_size(config.width, config.height)
    messages = Messages(config)
    topics = {topic: messages.msgtype(topic) for topic in config.rates()}
    sink: _Rosbag2Sink | _Rosbag1Sink
    if fmt == "ros1":
        sink = _Rosbag1Sink(path, bag_compression, topics, messages.store)
    else:
        storage = StoragePlugin.MCAP if fmt == "mcap" else StoragePlugin.SQLITE3
        max_ns = None if max_bagfile_duration_s is None else round(max_bagfile_duration_s * 1e9)
        sink = _Rosbag2Sink(path, storage, bag_compression, max_ns, topics, messages.store)
    counts = dict.fromkeys(topics, 0)
    first = last = 0
    try:
        for event in schedule(config):
            sink.write(event.topic, event.receive_ns, messages.serialize(event.topic, event.seq, event.stamp_ns))
            counts[event.topic] += 1
            first = first or event.receive_ns
            last = event.receive_ns
        sink.close()
    except BaseException:
        sink.abort()
        raise
    return TeleopBagInfo(
        path=path,
        files=tuple(sink.files),
        config=config,
        counts=counts,
        msgtypes=config.msgtypes(),
        start_ns=config.start_ns,
        first_receive_ns=first,
        last_receive_ns=last,
        urdf=messages.urdf,
    )


def cut_recording(info: TeleopBagInfo, at_byte: int, dest: Path, *, unclosed: bool = False) -> Path:
    """A copy of the recording's (first) storage file, cut after ``at_byte`` bytes: what a
    recorder killed mid-write, or a copy interrupted, leaves. ``unclosed`` (ROS 1): also
    zero the header's ``index_pos``, as ``rosbag record`` leaves a bag it did not close.
    Returns the file written (``dest``)."""
    source = info.files[0]
    with source.open("rb") as f:
        data = bytearray(f.read(at_byte))
    if unclosed:
        if info.fmt != "ros1":
            raise ValueError("unclosed: a ROS 1 bag's index_pos; an MCAP cut short has no footer anyway")
        field = data.find(b"index_pos=")
        if field < 0 or field + 18 > len(data):
            raise ValueError(f"cut at byte {at_byte}: before the bag header's index_pos")
        data[field + 10 : field + 18] = bytes(8)
    dest.write_bytes(bytes(data))
    return dest
