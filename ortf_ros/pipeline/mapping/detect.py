"""A mapping guessed from a recording's topics (``detect_mapping``), by message type and
topic name, so that a conventional teleop bag converts with no file at all, and a live
recorder records with none; the names it gives cameras, sensors and microphones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ortf_ros.pipeline.decode import canonical_msgtype
from ortf_ros.pipeline.mapping.model import (
    ActionMapping,
    AudioMapping,
    CameraMapping,
    DetectionsMapping,
    JointStateMapping,
    LaserScanMapping,
    PointCloudMapping,
    StepClock,
    TimeSource,
    TopicMapping,
    WrenchMapping,
)
from ortf_ros.pipeline.samples import CONTROLLER_STATE_TYPE

if TYPE_CHECKING:
    from ortf_ros.pipeline.sources.bag import TopicInfo

_IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage", "foxglove_msgs/msg/CompressedVideo")
_TRANSPORTS = ("compressed", "compresseddepth", "h264")
_IMAGE_PART = re.compile(r"(\w+_)?image(_\w+)?|color|rgb")
_WRENCH_PARTS = frozenset({"wrench", "wrench_stamped", "wrench_raw", "wrench_filtered", "raw", "data"})
_COMMAND_WORDS = ("command", "cmd", "target", "action", "desired", "setpoint")
AUDIO_TYPES = (
    "audio_common_msgs/msg/AudioStamped",
    "audio_common_msgs/msg/AudioData",
    "audio_common_msgs/msg/AudioDataStamped",
)
"""The audio message types a microphone topic may have (``pipeline.streams.audio``)."""
_AUDIO_PARTS = frozenset({"audio", "audio_raw", "audio_stamped", "data", "raw"})


def _parts(topic: str) -> list[str]:
    return [p for p in topic.split("/") if p]


def _sanitize(parts: Iterable[str], fallback: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]+", "_", "_".join(parts))
    name = re.sub(r"_+", "_", name).strip("_")
    return name or fallback


def _words(topic: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", topic.lower()) if w]


def is_command_topic(topic: str) -> bool:
    """Named like a command: a word of the topic starts with command, cmd, target, action,
    desired or setpoint (``/joint_command``, ``/cmd_vel``, ``/arm/targets``)."""
    return any(word.startswith(_COMMAND_WORDS) for word in _words(topic))


def _image_base(topic: str) -> str:
    """The image topic without its image_transport suffix (``/compressed``)."""
    head, _, last = topic.rpartition("/")
    return head if head and last.lower() in _TRANSPORTS else topic


def camera_name(topic: str) -> str:
    """A camera name from its topic: the transport (``compressed``) and one image part
    (``image_raw``, ``image_rect_color``, ``image``, ``rgb_image``, ``color``, ``rgb``) are
    dropped, the rest joined by ``_``: ``/wrist_camera/image_raw`` -> ``wrist_camera``,
    ``/camera/color/image_raw`` -> ``camera_color``."""
    parts = _parts(_image_base(topic))
    if parts and _IMAGE_PART.fullmatch(parts[-1].lower()):
        parts.pop()
    return _sanitize(parts, "camera")


def wrench_name(topic: str) -> str:
    """A force-torque sensor name from its topic: ``/ft_sensor/wrench`` -> ``ft_sensor``."""
    parts = _parts(topic)
    while parts and parts[-1].lower() in _WRENCH_PARTS:
        parts.pop()
    return _sanitize(parts, "wrench")


def audio_name(topic: str) -> str:
    """A microphone name from its topic: ``/mic/audio`` -> ``mic``, ``/audio`` -> ``audio``."""
    parts = _parts(topic)
    while len(parts) > 1 and parts[-1].lower() in _AUDIO_PARTS:
        parts.pop()
    return _sanitize(parts, "audio")


def _audio_mappings(by_type: Mapping[str, list[TopicInfo]], taken: set[str]) -> tuple[AudioMapping, ...]:
    """Every audio topic, a microphone; the older layout's with the ``AudioInfo`` topic
    beside it (``AudioMapping.info_topics``) when one was recorded, else the recording's
    only one. ``AudioData`` has no header: its time is the receive time."""
    infos = {t.topic for t in by_type.get("audio_common_msgs/msg/AudioInfo", [])}
    topics = sorted((t for k in AUDIO_TYPES for t in by_type.get(k, [])), key=lambda t: t.topic)
    names = _unique_names([(audio_name(t.topic), _sanitize(_parts(t.topic), "audio")) for t in topics], taken)
    found = []
    for name, info in zip(names, topics, strict=True):
        msgtype = canonical_msgtype(info.msgtype)
        sibling = next((t for t in AudioMapping(name, info.topic).info_topics if t in infos), None)
        sibling = sibling or (next(iter(infos)) if len(infos) == 1 else None)
        info_topic = None if msgtype.endswith("/AudioStamped") else sibling
        time: TimeSource = "receive" if msgtype.endswith("/AudioData") else "header"
        found.append(AudioMapping(name, info.topic, info_topic=info_topic, time=time))
    return tuple(found)


def _unique_names(wanted: Sequence[tuple[str, str]], taken: set[str]) -> list[str]:
    """Names for (preferred, fallback) pairs: a preferred name shared by several topics gives
    way to the fallbacks (the full topic names), then to numbered suffixes."""
    counts: dict[str, int] = {}
    for preferred, _ in wanted:
        counts[preferred] = counts.get(preferred, 0) + 1
    names = []
    for preferred, fallback in wanted:
        name = preferred if counts[preferred] == 1 and preferred not in taken else fallback
        candidate, n = name, 2
        while candidate in taken:
            candidate, n = f"{name}_{n}", n + 1
        taken.add(candidate)
        names.append(candidate)
    return names


def _cameras(images: list[TopicInfo], infos: set[str]) -> list[CameraMapping]:
    raw = {t.topic for t in images if canonical_msgtype(t.msgtype) == "sensor_msgs/msg/Image"}
    chosen = [t for t in images if not (_image_base(t.topic) != t.topic and _image_base(t.topic) in raw)]
    names = _unique_names([(camera_name(t.topic), _sanitize(_parts(t.topic), "camera")) for t in chosen], set())
    cameras = []
    for name, info in zip(names, chosen, strict=True):
        base = _image_base(info.topic)
        sibling = f"{base.rpartition('/')[0]}/camera_info"
        depth = "depth" in info.topic.lower()
        cameras.append(
            CameraMapping(
                name=name,
                topic=info.topic,
                kind="depth" if depth else "rgb",
                camera_info_topic=sibling if sibling in infos else None,
            )
        )
    return cameras


def _state_topic(joint_states: list[TopicInfo]) -> TopicInfo | None:
    candidates = [t for t in joint_states if not is_command_topic(t.topic)]

    def rank(t: TopicInfo) -> tuple[int, int, str]:
        last = _parts(t.topic)[-1].lower() if _parts(t.topic) else ""
        named = 0 if last in ("joint_states", "joint_state") else 1 if "joint_state" in t.topic.lower() else 2
        return named, len(_parts(t.topic)), t.topic

    return min(candidates, key=rank, default=None)


def _controllers(controller_states: list[TopicInfo]) -> list[TopicInfo]:
    """Controller state topics, best first: an arm's (``/arm_controller/state``: a robot
    has controllers for its torso, head or gripper too), then the shortest name."""
    return sorted(controller_states, key=lambda t: ("arm" not in _words(t.topic), len(_parts(t.topic)), t.topic))


# Action candidates, best first: (type, must be named like a command, time source). Last,
# a controller state: its reference, where the controller was taking the joints.
_ACTION_KINDS: tuple[tuple[str, bool, TimeSource], ...] = (
    ("sensor_msgs/msg/JointState", True, "header"),
    ("trajectory_msgs/msg/JointTrajectory", True, "header"),
    ("std_msgs/msg/Float64MultiArray", True, "receive"),
    ("trajectory_msgs/msg/JointTrajectory", False, "header"),
    ("geometry_msgs/msg/TwistStamped", True, "header"),
    ("geometry_msgs/msg/Twist", True, "receive"),
    ("geometry_msgs/msg/PoseStamped", True, "header"),
    (CONTROLLER_STATE_TYPE, False, "header"),
)


def _action_mapping(by_type: Mapping[str, list[TopicInfo]], state: str | None) -> ActionMapping:
    for msgtype, named, time in _ACTION_KINDS:
        candidates = by_type.get(msgtype, [])
        reference = msgtype == CONTROLLER_STATE_TYPE  # (the state's topic too: its reference is apart)
        for info in _controllers(candidates) if reference else candidates:
            if (info.topic != state or reference) and (is_command_topic(info.topic) or not named):
                return ActionMapping(topic=info.topic, time=time)
    return ActionMapping()


def _last_part(topic: str) -> str:
    parts = _parts(topic)
    return parts[-1] if parts else ""


def detect_mapping(topics: Sequence[TopicInfo], *, step_rate_hz: float = 30.0) -> TopicMapping:
    """A mapping guessed from a recording's topics (see ``describe_mapping`` for the result).

    - ``sensor_msgs/Image`` and ``CompressedImage`` topics are cameras, named by
      ``camera_name`` (made unique), depth when the topic name says ``depth``, with the
      sibling ``camera_info`` topic (none recorded: no camera_info_topic, and the intrinsics
      are declared unknown unless a ``camera_info_url`` is added). A ``.../compressed``
      stream of a raw topic that is recorded too is left out (the same images).
    - The ``JointState`` topic named like ``joint_states`` (and not like a command) is the
      state; without one, a ros_control ``JointTrajectoryControllerState`` topic, an arm's
      first (``_controllers``). The action is, in this order, a JointState, JointTrajectory
      or Float64MultiArray topic named like a command (``is_command_topic``), any
      JointTrajectory, a Twist(Stamped) / PoseStamped named like a command (``/cmd_vel``),
      or a controller state's reference; none: the next step's joint positions. Headerless
      types use receive time.
    - ``WrenchStamped`` topics are force-torque sensors named by ``wrench_name``.
    - ``audio_common_msgs`` audio topics are microphones named by ``audio_name``.
    - ``TFMessage`` topics named ``tf`` / ``tf_static``, a ``String`` topic named
      ``robot_description``; steps at ``step_rate_hz``.
    - A ``vision_msgs/Detection2DArray`` topic, when the recording has one, is the detections
      of the camera whose topic shares most of its namespace (``/wrist_camera/detections``:
      ``/wrist_camera/image_raw``'s); none shares any: no detections.

    Only topics with messages are used, so the mapping names no topic the recording lacks
    (except ``robot_description_topic``, which keeps its default when none is recorded).
    """
    by_type: dict[str, list[TopicInfo]] = {}
    for info in sorted(topics, key=lambda t: t.topic):
        if info.count > 0:
            by_type.setdefault(canonical_msgtype(info.msgtype), []).append(info)
    images = [t for t in sorted((t for k in _IMAGE_TYPES for t in by_type.get(k, [])), key=lambda t: t.topic)]
    infos = {t.topic for t in by_type.get("sensor_msgs/msg/CameraInfo", [])}
    cameras = _cameras(images, infos)

    state = _state_topic(by_type.get("sensor_msgs/msg/JointState", []))
    state = state or next(iter(_controllers(by_type.get(CONTROLLER_STATE_TYPE, []))), None)
    wrench_topics = by_type.get("geometry_msgs/msg/WrenchStamped", [])
    wrench_names = _unique_names(
        [(wrench_name(t.topic), _sanitize(_parts(t.topic), "wrench")) for t in wrench_topics], {c.name for c in cameras}
    )
    # (one set of names for every sensor and stream: a microphone and a lidar on /front/... are
    # front and front_scan, as a mapping file that named both front would be refused)
    audio = _audio_mappings(by_type, {c.name for c in cameras} | set(wrench_names))
    scan_topics = by_type.get("sensor_msgs/msg/LaserScan", [])
    cloud_topics = by_type.get("sensor_msgs/msg/PointCloud2", [])
    taken = {c.name for c in cameras} | set(wrench_names) | {a.name for a in audio}
    taken |= {"joint_states", "action", "end_effector"}
    scan_names = _unique_names(
        [(range_sensor_name(t.topic, "scan"), _sanitize(_parts(t.topic), "scan")) for t in scan_topics], taken
    )
    cloud_names = _unique_names(
        [(range_sensor_name(t.topic, "points"), _sanitize(_parts(t.topic), "points")) for t in cloud_topics],
        taken | set(scan_names),
    )
    tf = by_type.get("tf2_msgs/msg/TFMessage", [])
    descriptions = [
        t.topic for t in by_type.get("std_msgs/msg/String", []) if _last_part(t.topic) == "robot_description"
    ]
    return TopicMapping(
        cameras=tuple(cameras),
        joint_states=JointStateMapping(state.topic) if state else None,
        wrenches=tuple(WrenchMapping(name, t.topic) for name, t in zip(wrench_names, wrench_topics, strict=True)),
        audio=audio,
        action=_action_mapping(by_type, state.topic if state else None),
        tf_topics=tuple(t.topic for t in tf if _last_part(t.topic) == "tf"),
        tf_static_topics=tuple(t.topic for t in tf if _last_part(t.topic) == "tf_static"),
        robot_description_topic=min(descriptions, key=lambda t: (len(t), t), default="/robot_description"),
        step=StepClock(rate_hz=step_rate_hz),
        laser_scans=tuple(LaserScanMapping(n, t.topic) for n, t in zip(scan_names, scan_topics, strict=True)),
        point_clouds=tuple(PointCloudMapping(n, t.topic) for n, t in zip(cloud_names, cloud_topics, strict=True)),
        detections=_detections_mapping(by_type.get("vision_msgs/msg/Detection2DArray", []), cameras),
    )


_RANGE_SENSOR_PARTS = frozenset({"scan", "points", "cloud", "point_cloud", "pointcloud", "raw", "data"})


def range_sensor_name(topic: str, fallback: str) -> str:
    """A lidar's name from its topic: ``/front_lidar/scan`` -> ``front_lidar``, ``/scan`` -> ``scan``."""
    parts = _parts(topic)
    while len(parts) > 1 and parts[-1].lower() in _RANGE_SENSOR_PARTS:
        parts.pop()
    return _sanitize(parts, fallback)


def _detections_mapping(topics: Sequence[TopicInfo], cameras: Sequence[CameraMapping]) -> DetectionsMapping | None:
    """The only detections topic, with the camera sharing most of its namespace (``detect_mapping``)."""
    if len(topics) != 1:
        return None
    namespace = _parts(topics[0].topic)[:-1]

    def shared(camera: CameraMapping) -> int:
        parts = _parts(camera.topic)
        common = min(len(namespace), len(parts))
        return next((i for i in range(common) if namespace[i] != parts[i]), common)

    best = max(cameras, key=shared, default=None)
    if best is None or shared(best) == 0:
        return None
    return DetectionsMapping(topics[0].topic, best.name)
