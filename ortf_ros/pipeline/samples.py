"""Typed samples: what ``extract`` makes of a ROS message, and all the assembler sees.

Times are integer nanoseconds, as ROS keeps them (float seconds lose sub-microsecond
precision at epoch scale). Every sample carries both clocks, the header stamp (None
for messages without a header) and the receive time, because the stream's time
policy chooses between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Serialization = Literal["cdr", "ros1"]


@dataclass(frozen=True)
class RawMessage:
    """One serialized message as a source delivers it."""

    topic: str
    msgtype: str  # ROS 2 style name, e.g. "sensor_msgs/msg/Image"
    receive_ns: int
    data: bytes
    serialization: Serialization = "cdr"


@dataclass(frozen=True)
class Stamps:
    receive_ns: int
    header_ns: int | None = None
    frame_id: str = ""


@dataclass(frozen=True)
class ImageSample:
    """A decoded frame: HxWx3 uint8 RGB, or HxW uint16 depth in millimetres."""

    topic: str
    stamps: Stamps
    kind: Literal["rgb", "depth"]
    pixels: np.ndarray


@dataclass(frozen=True)
class CameraInfoSample:
    topic: str
    stamps: Stamps
    width: int
    height: int
    k: tuple[float, ...]  # 3x3 row-major
    d: tuple[float, ...]
    distortion_model: str


@dataclass(frozen=True)
class JointStateSample:
    """Joint vectors keyed by name (messages may list joints in any order, or only some)."""

    topic: str
    stamps: Stamps
    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray  # empty when the message has none
    effort: np.ndarray  # empty when the message has none


@dataclass(frozen=True)
class WrenchSample:
    topic: str
    stamps: Stamps
    force: np.ndarray  # (3,)
    torque: np.ndarray  # (3,)


@dataclass(frozen=True)
class TransformSample:
    """``child`` in ``parent``: p_parent = T * p_child; rotation (w, x, y, z)."""

    parent: str
    child: str
    stamps: Stamps
    translation: np.ndarray  # (3,)
    rotation: np.ndarray  # (4,) w, x, y, z
    static: bool


@dataclass(frozen=True)
class VectorSample:
    """A numeric command (action) flattened to a vector, with its element names."""

    topic: str
    stamps: Stamps
    names: tuple[str, ...]
    values: np.ndarray


@dataclass(frozen=True)
class RobotDescriptionSample:
    topic: str
    stamps: Stamps
    urdf: str


@dataclass(frozen=True)
class BadMessage:
    """A message that could not be decoded or did not hold what it claimed: counted, never written."""

    topic: str
    receive_ns: int
    reason: str


Sample = (
    ImageSample
    | CameraInfoSample
    | JointStateSample
    | WrenchSample
    | TransformSample
    | VectorSample
    | RobotDescriptionSample
    | BadMessage
)
