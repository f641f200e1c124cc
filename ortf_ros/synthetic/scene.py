"""What a synthetic teleop scene holds: ``TeleopConfig``, its streams, their rates and types.

The default scene is a 7-joint arm with a two-finger gripper, two RGB cameras, a depth
camera, a force-torque sensor, TF and a joint command (the action); the options add a
side camera, JPEG or H.264 cameras, a controller state instead of the joint states,
joint states without names, a lidar, a microphone or detections, and leave out a
camera's camera_info. One config describes a bag (``bag.write_scene_bag``) and the live
scene (``ortf_scene_publisher``) alike, so the two can be compared byte for byte.

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
  at its frame rate, except those listed in ``without_camera_info``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ortf_ros.pipeline.streams.audio_definitions import AudioLayout
from ortf_ros.synthetic import topics
from ortf_ros.synthetic.audio import AUDIO_FORMAT_CODES
from ortf_ros.synthetic.detections import DETECTIONS_TYPE
from ortf_ros.synthetic.images import H264_GOP
from ortf_ros.synthetic.lidar import CLOUD_RATE_HZ, SCAN_RATE_HZ
from ortf_ros.synthetic.motion import CONTROLLER_JOINTS, joint_state_names
from ortf_ros.synthetic.robot import ARM_JOINTS, JOINTS
from ortf_ros.synthetic.typestore import COMPRESSED_VIDEO_TYPE, CONTROLLER_STATE_TYPE, ControllerLayout

BagFormat = Literal["mcap", "sqlite3", "ros1"]
UnnamedJoints = Literal["all", "arm"]
"""Joint states without names: the values of ``all`` the joints, or of the ``arm``'s 7
(fewer than the URDF's 9 movable joints), in the URDF's order."""
H264Message = Literal["CompressedVideo", "CompressedImage"]

START_NS = 1_700_000_000_000_000_000  # header stamp of t = 0 (2023-11-14 22:13:20 UTC)


@dataclass(frozen=True)
class TeleopConfig:
    """One scene: its streams, their rates and types, in the recording format ``fmt``
    (checked as it is made: a combination no recording could hold is a ValueError)."""

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
    # (topic, seconds): that topic's messages are received this much later (a recorder on
    # another clock, or a slow link); the header stamps stay as they are.
    receive_offsets_s: tuple[tuple[str, float], ...] = ()
    # (topic, from, until): that topic publishes nothing stamped from ``from`` to before
    # ``until`` seconds after t = 0 (a sensor that paused; one that stopped: until inf).
    silences_s: tuple[tuple[str, float, float], ...] = ()
    # Clocks that disagree (``schedule``): every receive time later by ``receive_offset_ns``
    # (the recorder's clock ahead of the publishers'), and by ``receive_jump``'s ns more from
    # its t (seconds of stamp time) on (the recorder's clock stepped); a topic of
    # ``stamp_offsets`` stamps its messages that much later (its publisher's own clock):
    # what the messages hold is the scene's at the true time either way.
    receive_offset_ns: int = 0
    receive_jump: tuple[float, int] | None = None
    stamp_offsets: tuple[tuple[str, int], ...] = ()

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
        object.__setattr__(self, "receive_offsets_s", tuple((t, float(s)) for t, s in self.receive_offsets_s))
        object.__setattr__(self, "silences_s", tuple((t, float(a), float(b)) for t, a, b in self.silences_s))
        object.__setattr__(self, "stamp_offsets", tuple(self.stamp_offsets))
        for what, topic in [("receive_offsets_s", t) for t, _ in self.receive_offsets_s] + [
            ("silences_s", t) for t, _, _ in self.silences_s
        ]:
            if topic not in self.rates():
                raise ValueError(f"{what}: {topic!r} is not a topic of the scene")
        for topic, _ in self.stamp_offsets:
            if topic not in self.rates():
                raise ValueError(f"stamp offset of {topic!r}: expected one of the scene's topics")
        if self.audio is not None and self.audio_format not in AUDIO_FORMAT_CODES:
            raise ValueError(f"audio_format {self.audio_format!r}: expected one of {', '.join(AUDIO_FORMAT_CODES)}")
        if self.detections and self.fmt == "ros1":
            raise ValueError("detections: vision_msgs are recorded in ROS 2 recordings only")
        if self.controller_state and self.unnamed_joints == "all":
            raise ValueError("unnamed_joints 'all' with controller_state: the arm controller's joints are the arm's")

    def joint_state_topic(self) -> str:
        """The topic of the joint states: ``/joint_states``, or the controller state's."""
        return topics.TOPIC_CONTROLLER_STATE if self.controller_state else topics.TOPIC_JOINT_STATES

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
        return (topics.TOPIC_CONTROLLER_STATE,) if self.controller_state else ()

    def cameras(self) -> dict[str, str]:
        """The RGB cameras of the scene: raw image topic -> optical frame."""
        return topics.CAMERA_FRAMES if self.side_camera else topics.CAMERAS

    def camera_info_topics(self) -> dict[str, str]:
        """Every camera of the scene, depth included: raw image topic -> its camera_info topic."""
        info = {camera: topics.CAMERA_INFO_TOPICS[camera] for camera in self.cameras()}
        if self.with_depth:
            info[topics.TOPIC_DEPTH_IMAGE] = topics.TOPIC_DEPTH_CAMERA_INFO
        return info

    def has_camera_info(self, camera: str) -> bool:
        """Whether camera ``camera`` (its raw image topic) publishes its camera_info."""
        return camera not in self.without_camera_info

    def is_compressed(self, camera: str) -> bool:
        return self.compressed or camera in self.compressed_cameras

    def image_topic(self, topic: str) -> str:
        """The topic camera ``topic`` (its raw image topic) publishes on."""
        if topic in self.h264_cameras:
            return topic + topics.H264_SUFFIX
        return topic + topics.COMPRESSED_SUFFIX if self.is_compressed(topic) else topic

    def image_type(self, camera: str) -> str:
        """The message type camera ``camera`` (its raw image topic) publishes."""
        if camera in self.h264_cameras:
            video = self.h264_message == "CompressedVideo"
            return COMPRESSED_VIDEO_TYPE if video else "sensor_msgs/msg/CompressedImage"
        return "sensor_msgs/msg/CompressedImage" if self.is_compressed(camera) else "sensor_msgs/msg/Image"

    def rates(self) -> dict[str, float | None]:
        """Topic -> publish rate (None: published once, at t = 0)."""
        rates: dict[str, float | None] = {
            topics.TOPIC_ROBOT_DESCRIPTION: None,
            topics.TOPIC_TF_STATIC: None,
            topics.TOPIC_TF: self.tf_rate_hz,
            self.joint_state_topic(): self.joint_rate_hz,
        }
        if self.records_command():
            rates[topics.TOPIC_JOINT_COMMAND] = self.command_rate_hz
        rates |= {self.image_topic(camera): self.fps for camera in self.cameras()}
        rates |= {
            topics.CAMERA_INFO_TOPICS[camera]: self.fps for camera in self.cameras() if self.has_camera_info(camera)
        }
        rates[topics.TOPIC_WRENCH] = self.wrench_rate_hz
        if self.lidar:
            rates |= {topics.TOPIC_SCAN: SCAN_RATE_HZ, topics.TOPIC_POINTS: CLOUD_RATE_HZ}
        if self.with_depth:
            rates[topics.TOPIC_DEPTH_IMAGE] = self.fps
            if self.has_camera_info(topics.TOPIC_DEPTH_IMAGE):
                rates[topics.TOPIC_DEPTH_CAMERA_INFO] = self.fps
        if self.audio is not None:
            rates[topics.TOPIC_AUDIO] = self.audio_rate_hz / self.audio_chunk
            if self.audio == "older":
                rates[topics.TOPIC_AUDIO_INFO] = None
        if self.detections:
            rates[topics.TOPIC_DETECTIONS] = self.fps
        return rates

    def count(self, topic: str) -> int:
        rate = self.rates()[topic]
        count = 1 if rate is None else round(self.duration_s * rate)
        if self.silences(topic):
            count = sum(
                1 for seq in range(count) if not self.silent(topic, 0 if rate is None else round(seq * 1e9 / rate))
            )
        return count - len(self.dropped(topic))

    def stamp_offset_ns(self, topic: str) -> int:
        """How much later than the true time ``topic``'s header stamps are (``stamp_offsets``)."""
        return dict(self.stamp_offsets).get(topic, 0)

    def receive_offset_at(self, stamp_ns: int) -> int:
        """How much later than the publishers' clock the recorder's is for a message of this
        (true) stamp: ``receive_offset_ns``, and ``receive_jump``'s from its time on."""
        jump = self.receive_jump
        later = jump is not None and stamp_ns - self.start_ns >= round(jump[0] * 1e9)
        return self.receive_offset_ns + (jump[1] if later and jump is not None else 0)

    def topic_receive_offset_ns(self, topic: str) -> int:
        """How much later than by its latency ``topic``'s messages are received (``receive_offsets_s``)."""
        return round(dict(self.receive_offsets_s).get(topic, 0.0) * 1e9)

    def silences(self, topic: str) -> list[tuple[float, float]]:
        """When ``topic`` publishes nothing (``silences_s``): (from, until) in ns after t = 0."""
        return [(a * 1e9, b * 1e9) for t, a, b in self.silences_s if t == topic]

    def silent(self, topic: str, after_ns: int) -> bool:
        """Whether ``topic`` publishes nothing stamped ``after_ns`` after t = 0 (``silences_s``)."""
        return any(a <= after_ns < b for a, b in self.silences(topic))

    def dropped(self, topic: str) -> frozenset[int]:
        """The messages of ``topic`` (seq) the recording lacks."""
        return frozenset(self.audio_dropped) if topic == topics.TOPIC_AUDIO else frozenset()

    def msgtypes(self) -> dict[str, str]:
        """Topic -> ROS 2 message type name (a ROS 1 bag's ``tf/tfMessage`` reads as TFMessage)."""
        types = {
            topics.TOPIC_ROBOT_DESCRIPTION: "std_msgs/msg/String",
            topics.TOPIC_TF_STATIC: "tf2_msgs/msg/TFMessage",
            topics.TOPIC_TF: "tf2_msgs/msg/TFMessage",
            self.joint_state_topic(): CONTROLLER_STATE_TYPE if self.controller_state else "sensor_msgs/msg/JointState",
        }
        if self.records_command():
            types[topics.TOPIC_JOINT_COMMAND] = "sensor_msgs/msg/JointState"
        for camera in self.cameras():
            types[self.image_topic(camera)] = self.image_type(camera)
        types |= {
            topics.CAMERA_INFO_TOPICS[camera]: "sensor_msgs/msg/CameraInfo"
            for camera in self.cameras()
            if self.has_camera_info(camera)
        }
        types[topics.TOPIC_WRENCH] = "geometry_msgs/msg/WrenchStamped"
        if self.lidar:
            types |= {
                topics.TOPIC_SCAN: "sensor_msgs/msg/LaserScan",
                topics.TOPIC_POINTS: "sensor_msgs/msg/PointCloud2",
            }
        if self.with_depth:
            types[topics.TOPIC_DEPTH_IMAGE] = "sensor_msgs/msg/Image"
            if self.has_camera_info(topics.TOPIC_DEPTH_IMAGE):
                types[topics.TOPIC_DEPTH_CAMERA_INFO] = "sensor_msgs/msg/CameraInfo"
        if self.audio == "ros2":
            types[topics.TOPIC_AUDIO] = "audio_common_msgs/msg/AudioStamped"
        elif self.audio == "older":
            types[topics.TOPIC_AUDIO] = "audio_common_msgs/msg/AudioData"
            types[topics.TOPIC_AUDIO_INFO] = "audio_common_msgs/msg/AudioInfo"
        if self.detections:
            types[topics.TOPIC_DETECTIONS] = DETECTIONS_TYPE
        return types
