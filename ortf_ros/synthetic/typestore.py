"""The message types the scene is written in.

rosbags' typestores (ROS 2 Jazzy, ROS 1 Noetic) plus what neither has: ros_control's
``JointTrajectoryControllerState`` in the layout asked for, foxglove's
``CompressedVideo``, vision_msgs and audio_common_msgs, field for field as upstream
defines them, so that the bytes written are what those packages would write.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from ortf_ros.pipeline.streams.audio_definitions import AudioLayout
from ortf_ros.pipeline.streams.audio_definitions import register as register_audio
from ortf_ros.synthetic.detections import register_vision_msgs

ControllerLayout = Literal["jazzy", "humble"]
"""The ROS 2 definition of a controller state in a rosbag2 bag (a ROS 1 bag has ROS 1's)."""

CONTROLLER_STATE_TYPE = "control_msgs/msg/JointTrajectoryControllerState"
COMPRESSED_VIDEO_TYPE = "foxglove_msgs/msg/CompressedVideo"
COMPRESSED_VIDEO_DEFINITION = "builtin_interfaces/Time timestamp\nstring frame_id\nuint8[] data\nstring format\n"
"""foxglove_msgs' CompressedVideo, field for field (ros/foxglove_msgs/msg/CompressedVideo.msg)."""

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
