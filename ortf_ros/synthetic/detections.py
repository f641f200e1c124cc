"""Synthetic detections for the teleop scene (opt-in ``TeleopConfig.detections``):
a ``vision_msgs/Detection2DArray`` per wrist camera frame, stamped as the frame, with a box per
synthetic object, so a conversion or a recorder has detections to turn into an episode's
``scene_objects.json``.

The objects are the scene's code blocks (``images.rgb_frame``): each detection frames a
block, which a test finds again in the picture drawn. ``VISION_MSGS`` are the ROS 2 vision_msgs
4.x (Humble, Jazzy) definitions of the types a ``Detection2DArray`` holds, field for field, for
the typestore that serializes them (``ros/vision_msgs`` builds the same package for rclpy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from rosbags.typesys import get_types_from_msg
from rosbags.typesys.store import Typestore

DETECTIONS_TYPE = "vision_msgs/msg/Detection2DArray"

VISION_MSGS: dict[str, str] = {
    "vision_msgs/msg/Point2D": "float64 x\nfloat64 y\n",
    "vision_msgs/msg/Pose2D": "vision_msgs/Point2D position\nfloat64 theta\n",
    "vision_msgs/msg/BoundingBox2D": "vision_msgs/Pose2D center\nfloat64 size_x\nfloat64 size_y\n",
    "vision_msgs/msg/ObjectHypothesis": "string class_id\nfloat64 score\n",
    "vision_msgs/msg/ObjectHypothesisWithPose": (
        "vision_msgs/ObjectHypothesis hypothesis\ngeometry_msgs/PoseWithCovariance pose\n"
    ),
    "vision_msgs/msg/Detection2D": (
        "std_msgs/Header header\nvision_msgs/ObjectHypothesisWithPose[] results\n"
        "vision_msgs/BoundingBox2D bbox\nstring id\n"
    ),
    "vision_msgs/msg/Detection2DArray": "std_msgs/Header header\nvision_msgs/Detection2D[] detections\n",
}


def register_vision_msgs(store: Typestore) -> None:
    for name, definition in VISION_MSGS.items():
        store.register(get_types_from_msg(definition, name))


@dataclass(frozen=True)
class SyntheticObject:
    class_id: str
    center_x: float
    center_y: float
    size: float


def detected_objects(seq: int, width: int, height: int) -> tuple[SyntheticObject, ...]:
    """The objects in wrist frame ``seq``: the first two code blocks (16 px, from the top left),
    each framed by a box 2 px larger on every side; class ids "1" and "2". The blocks do not
    move, so the boxes are the same in every frame; the score (``detection_score``) changes."""
    block = 16
    return tuple(SyntheticObject(str(n + 1), (n + 0.5) * block, 0.5 * block, block + 4.0) for n in range(2))


def detection_score(seq: int) -> float:
    return 0.5 + 0.25 * ((seq % 3) / 2)


def detections_message(store: Typestore, header: Any, seq: int, width: int, height: int) -> Any:
    """Frame ``seq``'s ``Detection2DArray`` under ``header`` (the frame's)."""
    types = store.types
    detections = []
    for item in detected_objects(seq, width, height):
        point = types["vision_msgs/msg/Point2D"](x=item.center_x, y=item.center_y)
        bbox = types["vision_msgs/msg/BoundingBox2D"](
            center=types["vision_msgs/msg/Pose2D"](position=point, theta=0.0), size_x=item.size, size_y=item.size
        )
        hypothesis = types["vision_msgs/msg/ObjectHypothesisWithPose"](
            hypothesis=types["vision_msgs/msg/ObjectHypothesis"](class_id=item.class_id, score=detection_score(seq)),
            pose=_no_pose(types),
        )
        detections.append(types["vision_msgs/msg/Detection2D"](header=header, results=[hypothesis], bbox=bbox, id=""))
    return types[DETECTIONS_TYPE](header=header, detections=detections)


def _no_pose(types: Any) -> Any:
    point = types["geometry_msgs/msg/Point"](x=0.0, y=0.0, z=0.0)
    rotation = types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)
    pose = types["geometry_msgs/msg/Pose"](position=point, orientation=rotation)
    return types["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.zeros(36, np.float64))
