"""What of a dataset the player publishes, on which topic, in which frame: decided once
from the manifest and the settings, before a message is built.

Names and frames come from the manifest. A manifest frame whose entry says which TF
frame it stands for (``tf_frame``, as ``ortf-bag2ortf`` writes for ``robot_base`` and
``end_effector``) is published under that TF name, so the tree the player publishes is
the one that was recorded. What the dataset does not hold is not invented: a dynamic
frame other than the end effector (an elbow, say) has no poses in the dataset and is
not published (``unpublished_frames`` lists them), nor is a ``CameraInfo`` for a camera
whose intrinsics are unknown (``cameras_without_info``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ortf_ros.format import layout
from ortf_ros.format.audio import audio_sensors
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.sensors import Sensor
from ortf_ros.format.spaces import StateComponent
from ortf_ros.pipeline.extract import POSE_NAMES, TWIST_NAMES
from ortf_ros.pipeline.streams.audio_definitions import AUDIO_STAMPED
from ortf_ros.playback.lidar import LASER_SCAN_TYPE, POINT_CLOUD_TYPE, CloudOut, ScanOut, cloud_outputs, scan_outputs
from ortf_ros.playback.settings import (
    COMPRESSED_SUFFIX,
    DEFAULT_ACTION_TOPIC,
    MessageSettings,
    StreamKind,
)

ActionForm = Literal["joint_state", "twist", "pose", "array"]
ACTION_TYPES: dict[ActionForm, str] = {
    "joint_state": "sensor_msgs/msg/JointState",
    "twist": "geometry_msgs/msg/TwistStamped",
    "pose": "geometry_msgs/msg/PoseStamped",
    "array": "std_msgs/msg/Float64MultiArray",
}


@dataclass(frozen=True)
class CameraOut:
    key: str  # observation key: the step column and the topic's {name}
    sensor: Sensor
    frame_id: str
    kind: StreamKind  # "image" or "depth"
    topic: str
    msgtype: str
    info_topic: str | None  # None: no intrinsics in the manifest, or camera_info not published


@dataclass(frozen=True)
class WrenchOut:
    name: str  # the force-torque sensor
    topic: str
    frame_id: str
    native: bool  # every sample of its native-rate stream; else its step-state column at step times


@dataclass(frozen=True)
class AudioOut:
    name: str  # the microphone
    topic: str
    sensor: Sensor


@dataclass(frozen=True)
class ActionOut:
    topic: str
    form: ActionForm
    names: tuple[str, ...]
    frame_id: str

    @property
    def msgtype(self) -> str:
        return ACTION_TYPES[self.form]


@dataclass(frozen=True)
class StaticTransform:
    parent: str
    child: str
    translation: tuple[float, float, float]
    rotation: tuple[float, float, float, float]  # w, x, y, z (ORTF)


@dataclass(frozen=True)
class Publication:
    settings: MessageSettings
    arm_joints: tuple[str, ...]  # joint_positions (and velocities, torques) in order
    gripper_joints: tuple[str, ...]  # gripper_position in order
    ee_frames: tuple[str, str] | None  # (parent, child) of the end-effector transform on /tf
    cameras: tuple[CameraOut, ...]
    wrenches: tuple[WrenchOut, ...]
    action: ActionOut | None
    static_transforms: tuple[StaticTransform, ...]
    unpublished_frames: tuple[str, ...]  # dynamic TF frames the dataset has no poses of
    audio: tuple[AudioOut, ...] = ()  # microphones: AudioStamped at each chunk's time (``playback.audio``)
    scans: tuple[ScanOut, ...] = ()
    clouds: tuple[CloudOut, ...] = ()

    def enabled(self, kind: StreamKind) -> bool:
        return kind in self.settings.streams

    @property
    def joints(self) -> tuple[str, ...]:
        return self.arm_joints + self.gripper_joints

    def cameras_without_info(self) -> tuple[str, ...]:
        """Cameras whose ``CameraInfo`` is not published though camera_info is: the dataset
        has no intrinsics for them (declared unknown, or not given)."""
        if not self.enabled("camera_info"):
            return ()
        return tuple(c.key for c in self.cameras if c.info_topic is None)

    def without_info_line(self) -> str | None:
        """``cameras_without_info`` in words, for where the published topics are reported."""
        cameras = self.cameras_without_info()
        if not cameras:
            return None
        return f"no CameraInfo published for camera(s) {', '.join(cameras)}: the dataset has no intrinsics for them"

    def topics(self) -> dict[str, tuple[StreamKind, str]]:
        """Every topic published for the dataset: topic -> (stream kind, message type)."""
        found: list[tuple[StreamKind, str, str]] = [
            ("robot_description", self.settings.topic("robot_description"), "std_msgs/msg/String"),
            ("tf_static", self.settings.topic("tf_static"), "tf2_msgs/msg/TFMessage"),
            ("task", self.settings.topic("task"), "std_msgs/msg/String"),
            ("episode", self.settings.topic("episode"), "std_msgs/msg/Bool"),
        ]
        if self.joints:
            found.append(("joint_states", self.settings.topic("joint_states"), "sensor_msgs/msg/JointState"))
        if self.ee_frames is not None:
            found.append(("tf", self.settings.topic("tf"), "tf2_msgs/msg/TFMessage"))
        found += [("wrench", w.topic, "geometry_msgs/msg/WrenchStamped") for w in self.wrenches]
        found += [("audio", a.topic, AUDIO_STAMPED) for a in self.audio]
        found += [("laser_scan", s.topic, LASER_SCAN_TYPE) for s in self.scans]
        found += [("point_cloud", c.topic, POINT_CLOUD_TYPE) for c in self.clouds]
        if self.action is not None:
            found.append(("action", self.action.topic, self.action.msgtype))
        for camera in self.cameras:
            found.append((camera.kind, camera.topic, camera.msgtype))
            if camera.info_topic is not None:
                found.append(("camera_info", camera.info_topic, "sensor_msgs/msg/CameraInfo"))
        return {topic: (kind, msgtype) for kind, topic, msgtype in found if self.enabled(kind)}

    @classmethod
    def of(cls, manifest: Manifest, settings: MessageSettings) -> Publication:
        state = manifest.observation_space.state
        robot_joints = [j.name for j in sorted(manifest.robot.joints, key=lambda j: j.index)]
        listed = (manifest.robot.gripper or {}).get("joints")
        arm = _names(state.get("joint_positions"), robot_joints, "joint_{}")
        gripper = _names(state.get("gripper_position"), listed if isinstance(listed, list) else [], "gripper_{}")
        if gripper == ("gripper_0",):
            gripper = ("gripper",)  # one value: the gripper itself (the name the demo's action uses)
        ee = _end_effector(manifest)
        statics = _static_transforms(manifest, ee)
        published = {t.child for t in statics} | ({ee[1]} if ee is not None else set())
        moving = {
            tf_name(manifest, key)
            for key, frame in manifest.frames.items()
            if frame.type == "dynamic" and key != "end_effector"
        }
        return cls(
            settings=settings,
            arm_joints=arm,
            gripper_joints=gripper,
            ee_frames=ee,
            cameras=tuple(_camera(key, sensor, settings) for key, sensor in manifest.cameras.items()),
            wrenches=_wrenches(manifest, settings),
            action=_action(manifest, settings),
            static_transforms=statics,
            unpublished_frames=tuple(sorted(moving - published)),
            audio=tuple(AudioOut(s.name, settings.topic("audio", s.name), s) for s in audio_sensors(manifest)),
            scans=scan_outputs(manifest, settings),
            clouds=cloud_outputs(manifest, settings),
        )


def tf_name(manifest: Manifest, key: str) -> str:
    """The TF frame a manifest frame (or frame reference) stands for."""
    frame = manifest.frames.get(key)
    alias = frame.extra.get("tf_frame") if frame is not None else None
    return alias if isinstance(alias, str) and alias else key


def _names(component: StateComponent | None, fallback: list[str], generic: str) -> tuple[str, ...]:
    """A state vector's element names: its own, else the fallback when it has as many, else numbered."""
    if component is None:
        return ()
    if component.names is not None and len(component.names) == component.dim:
        return tuple(component.names)
    if len(fallback) == component.dim and all(isinstance(n, str) for n in fallback):
        return tuple(fallback)
    return tuple(generic.format(i) for i in range(component.dim))


def _end_effector(manifest: Manifest) -> tuple[str, str] | None:
    """(parent, child) TF frames of the end-effector pose, when the state holds one."""
    state = manifest.observation_space.state
    position, orientation = state.get("ee_position"), state.get("ee_orientation")
    if position is None or orientation is None or position.dim != 3 or orientation.dim != 4:
        return None
    parent = tf_name(manifest, position.frame or "robot_base")
    alias = manifest.frames.get("end_effector")
    child = None
    if alias is not None and isinstance(alias.extra.get("tf_frame"), str):
        child = str(alias.extra["tf_frame"])
    child = child or manifest.robot.end_effector_link or "end_effector"
    return (parent, child) if parent != child else None


def _static_transforms(manifest: Manifest, ee: tuple[str, str] | None) -> tuple[StaticTransform, ...]:
    """The manifest's fixed frames with a parent, then sensor extrinsics; one parent per child
    (the first), never the end effector (it moves)."""
    found: dict[str, StaticTransform] = {}

    def add(parent: str, child: str, translation: tuple[float, ...], rotation: tuple[float, ...]) -> None:
        if child == parent or child in found or (ee is not None and child == ee[1]):
            return
        found[child] = StaticTransform(parent, child, translation, rotation)  # type: ignore[arg-type]

    for key, frame in manifest.frames.items():
        if frame.type == "fixed" and frame.parent and frame.transform is not None:
            t = frame.transform
            add(tf_name(manifest, frame.parent), tf_name(manifest, key), t.translation, t.rotation)
    for sensor in manifest.sensors:
        if sensor.extrinsics is not None:
            t = sensor.extrinsics.transform
            add(tf_name(manifest, sensor.extrinsics.parent_frame), sensor_frame(sensor), t.translation, t.rotation)
    return tuple(found.values())


def sensor_frame(sensor: Sensor) -> str:
    """The frame a sensor's messages are stamped in: the recorded header frame
    (``frame_id``, as ``ortf-bag2ortf`` keeps it), else the sensor's name."""
    frame_id = sensor.extra.get("frame_id")
    return frame_id if isinstance(frame_id, str) and frame_id else sensor.name


def _camera(key: str, sensor: Sensor, settings: MessageSettings) -> CameraOut:
    kind: StreamKind = "depth" if sensor.is_depth else "image"
    topic, msgtype = settings.topic(kind, key), "sensor_msgs/msg/Image"
    if kind == "image" and settings.image_format == "jpeg":
        topic, msgtype = topic + COMPRESSED_SUFFIX, "sensor_msgs/msg/CompressedImage"
    intrinsics = sensor.intrinsics or {}
    calibrated = sensor.resolution is not None and all(
        isinstance(intrinsics.get(k), (int, float)) for k in ("fx", "fy", "cx", "cy")
    )
    return CameraOut(
        key=key,
        sensor=sensor,
        frame_id=sensor_frame(sensor),
        kind=kind,
        topic=topic,
        msgtype=msgtype,
        info_topic=settings.topic("camera_info", key) if calibrated else None,
    )


def _wrenches(manifest: Manifest, settings: MessageSettings) -> tuple[WrenchOut, ...]:
    found = []
    state = manifest.observation_space.state
    for sensor in manifest.sensors:
        if sensor.type != "force_torque":
            continue
        stream = manifest.native_streams.get(sensor.name)
        native = (
            stream is not None
            and stream.columns.get("force", None) is not None
            and stream.columns.get("torque", None) is not None
            and stream.columns["force"].dim == 3
            and stream.columns["torque"].dim == 3
        )
        in_state = sensor.name in state and state[sensor.name].dim == 6
        if native or in_state:
            frame_id = sensor.mount_link or sensor_frame(sensor)
            found.append(WrenchOut(sensor.name, settings.topic("wrench", sensor.name), frame_id, native))
    return tuple(found)


def action_topic(manifest: Manifest, settings: MessageSettings) -> str:
    """``topics.action``; empty: the topic the manifest says the action came from, else
    ``/action`` (also for an action that was a field of another message, a controller's
    reference: its topic carries another type)."""
    if settings.topics["action"]:
        return settings.topics["action"]
    source = manifest.action_space.extra.get("source")
    of_its_own = "source_field" not in manifest.action_space.extra
    if of_its_own and isinstance(source, str) and source.startswith("/") and not any(c.isspace() for c in source):
        return source
    return DEFAULT_ACTION_TOPIC


def _action(manifest: Manifest, settings: MessageSettings) -> ActionOut | None:
    space = manifest.action_space
    names = tuple(d.name for d in sorted(space.dimensions, key=lambda d: d.index))
    if not names:
        return None
    form: ActionForm
    if space.type == "joint_position":
        form = "joint_state"
    elif sorted(names) == sorted(TWIST_NAMES):
        form = "twist"
    elif sorted(names) == sorted(POSE_NAMES):
        form = "pose"
    else:
        form = "array"
    frame_id = tf_name(manifest, space.frame) if space.frame else ""
    return ActionOut(action_topic(manifest, settings), form, names, frame_id)


def step_columns(publication: Publication, manifest: Manifest) -> list[str]:
    """The step-table columns the messages are built from."""
    state = manifest.observation_space.state
    columns = ["timestamp", "action"]
    columns += [layout.state_column(name) for name in state]
    columns += [layout.image_column(camera.key) for camera in publication.cameras]
    return columns
