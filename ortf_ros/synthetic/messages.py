"""Each message of the scene, built and serialized: what a bag holds and what the live
publisher sends, the very same bytes.

``Messages`` keeps one builder per topic (a function of the sequence number and the
header stamp) and serializes with rosbags, as CDR or as ROS 1. It builds the robot's
own messages here (description, TF, joint states or a controller's state, the command,
the wrench); the cameras', the lidar's, the microphone's and the detector's come from
their modules.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ortf_ros.synthetic.camera_messages import CameraMessages
from ortf_ros.synthetic.detections import DETECTIONS_TYPE, detections_message
from ortf_ros.synthetic.message_factory import Build, MessageFactory
from ortf_ros.synthetic.motion import (
    COMMAND_ORDER,
    joint_command,
    joint_efforts,
    joint_positions,
    joint_velocities,
    select_joints,
    wrench,
)
from ortf_ros.synthetic.robot import teleop_urdf
from ortf_ros.synthetic.scene import TeleopConfig
from ortf_ros.synthetic.schedule import seconds
from ortf_ros.synthetic.sensor_messages import audio_info_message, audio_message, laser_scan, point_cloud
from ortf_ros.synthetic.tf import (
    FT_FRAME,
    LIDAR_TRANSFORM,
    WRIST_CAMERA_FRAME,
    Transform,
    dynamic_transforms,
    static_transforms,
)
from ortf_ros.synthetic.topics import (
    TOPIC_AUDIO,
    TOPIC_AUDIO_INFO,
    TOPIC_CONTROLLER_STATE,
    TOPIC_DETECTIONS,
    TOPIC_JOINT_COMMAND,
    TOPIC_JOINT_STATES,
    TOPIC_POINTS,
    TOPIC_ROBOT_DESCRIPTION,
    TOPIC_SCAN,
    TOPIC_TF,
    TOPIC_TF_STATIC,
    TOPIC_WRENCH,
)
from ortf_ros.synthetic.typestore import CONTROLLER_STATE_TYPE


class Messages(MessageFactory):
    """Builds and serializes each message of the schedule."""

    def __init__(self, config: TeleopConfig) -> None:
        super().__init__(config)
        self.tf_type = "tf/msg/tfMessage" if self.ros1 and config.legacy_tf else "tf2_msgs/msg/TFMessage"
        self.cameras = CameraMessages(self)
        self.urdf = teleop_urdf(config.side_camera)
        self.builders: dict[str, tuple[str, Build]] = {
            TOPIC_ROBOT_DESCRIPTION: (
                "std_msgs/msg/String",
                lambda seq, stamp: self.new("std_msgs/msg/String", data=self.urdf),
            ),
            TOPIC_TF_STATIC: ("tf2_msgs/msg/TFMessage", self.tf_static),
            TOPIC_TF: (self.tf_type, self.tf),
            TOPIC_JOINT_STATES: ("sensor_msgs/msg/JointState", self.joint_state),
            TOPIC_JOINT_COMMAND: ("sensor_msgs/msg/JointState", self.command),
            TOPIC_CONTROLLER_STATE: (CONTROLLER_STATE_TYPE, self.controller),
            TOPIC_WRENCH: ("geometry_msgs/msg/WrenchStamped", self.wrench),
            TOPIC_SCAN: ("sensor_msgs/msg/LaserScan", partial(laser_scan, self)),
            TOPIC_POINTS: ("sensor_msgs/msg/PointCloud2", partial(point_cloud, self)),
        }
        if config.audio is not None:
            self.builders[TOPIC_AUDIO] = (config.msgtypes()[TOPIC_AUDIO], partial(audio_message, self))
            self.builders[TOPIC_AUDIO_INFO] = ("audio_common_msgs/msg/AudioInfo", partial(audio_info_message, self))
        self.builders |= self.cameras.builders()
        if config.detections:
            self.builders[TOPIC_DETECTIONS] = (DETECTIONS_TYPE, self.detections)

    def msgtype(self, topic: str) -> str:
        return self.builders[topic][0]

    def serialize(self, topic: str, seq: int, stamp: int, clock_ns: int = 0) -> bytes:
        """Message ``seq`` of ``topic``, of the scene at ``stamp``; its header stamps
        ``clock_ns`` later (a publisher on its own clock: ``TeleopConfig.stamp_offsets``)."""
        msgtype, build = self.builders[topic]
        self.clock_ns = clock_ns
        try:
            msg = build(seq, stamp)
        finally:
            self.clock_ns = 0
        if self.ros1:
            return bytes(self.store.serialize_ros1(msg, msgtype))
        return bytes(self.store.serialize_cdr(msg, msgtype))

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

    def detections(self, seq: int, stamp: int) -> Any:
        header = self.header(stamp, WRIST_CAMERA_FRAME, seq)
        return detections_message(self.store, header, seq, self.config.width, self.config.height)
