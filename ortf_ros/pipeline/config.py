"""The topic mapping: which recorded topic becomes which part of an ORTF dataset.

One schema for the bag converter (a YAML file, ``--config``) and the live recorder (ROS
parameters): nested mappings whose leaves are scalars or lists of scalars, so every
value has a dotted parameter name (``cameras.wrist_camera.topic``). Cameras and wrenches
are mappings keyed by their name for that reason; a YAML file may also list them
(``cameras: [{name: wrist_camera, topic: ...}]``), which reads the same.

``config_from_mapping`` checks everything a mistake could hide in: unknown keys, wrong
types, unknown policies, kinds and time sources, step clock, names, episode splitting,
writer settings. Each problem is one ``ConversionError`` line naming the file and the
dotted key path, e.g. ``teleop.yaml: cameras[1].policy: expected one of latest,
nearest, linear, got 'mean'``. ``config_to_mapping``/``write_config`` write every key
(``null`` where unset, so the file shows what can be set) and read back to an equal
config. Frame names lose a leading ``/`` (ROS 1 style), as ``extract`` does for TF.

``auto_config`` guesses a mapping from a recording's topics, by message type and topic
name, so that a conventional teleop bag converts with no file at all; ``describe_mapping``
says in words what a mapping will do (``ortf-bag2ortf --list``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import yaml

from ortf_ros import bounds
from ortf_ros.bounds import Bound
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.errors import ConversionError, OrtfError
from ortf_ros.io import atomic
from ortf_ros.pipeline.calibration import normalized_url
from ortf_ros.pipeline.decode import canonical_msgtype
from ortf_ros.pipeline.samples import CONTROLLER_STATE_TYPE
from ortf_ros.pipeline.samples import TimeSource as TimeSource  # (defined beside Stamps; the mapping names it)
from ortf_ros.pipeline.sync import POLICIES, Policy

if TYPE_CHECKING:
    from ortf_ros.pipeline.sources.bag import TopicInfo

CameraKind = Literal["rgb", "depth"]
SplitMode = Literal["input", "topic", "gap", "ranges"]

TIME_SOURCES: tuple[TimeSource, ...] = ("header", "receive")
CAMERA_KINDS: tuple[CameraKind, ...] = ("rgb", "depth")
SPLIT_MODES: tuple[SplitMode, ...] = ("input", "topic", "gap", "ranges")
NAME_PATTERN = re.compile(r"[A-Za-z0-9_]+")
"""Camera and wrench names: they become sensor, stream, file and parameter names."""

_T = TypeVar("_T")
_S = TypeVar("_S", bound=str)


@dataclass(frozen=True)
class CameraMapping:
    """A ``sensor_msgs/Image`` or ``CompressedImage`` topic stored as the video ``name``.

    Its intrinsics come from the ``camera_info_topic`` when one delivers, else from the
    calibration file ``camera_info_url`` (``pipeline.calibration``: read as an absolute
    path or a ``package://`` URL), else they are declared unknown, with a warning."""

    name: str
    topic: str
    kind: CameraKind
    camera_info_topic: str | None = None
    time: TimeSource = "header"
    policy: Policy = "nearest"
    camera_info_url: str | None = None


@dataclass(frozen=True)
class JointStateMapping:
    """The topic of the robot's joint state: ``sensor_msgs/JointState``, or a ros_control
    ``control_msgs/JointTrajectoryControllerState`` (its ``feedback`` / ``actual``: the
    recording says which type the topic has); ``native`` also keeps every message in a
    native-rate side table."""

    topic: str
    time: TimeSource = "header"
    policy: Policy = "linear"
    native: bool = True


@dataclass(frozen=True)
class WrenchMapping:
    """A ``geometry_msgs/WrenchStamped`` topic, the force-torque sensor ``name``;
    ``frame`` None: the messages' header frame. The rated ranges (N, N m) come only
    from the user: a bag does not carry them, and the manifest says "unknown" without."""

    name: str
    topic: str
    frame: str | None = None
    time: TimeSource = "header"
    policy: Policy = "nearest"
    native: bool = True
    range_force: float | None = None
    range_torque: float | None = None


AudioCodec = Literal["wav", "flac", "aac"]
AUDIO_CODECS: tuple[AudioCodec, ...] = ("wav", "flac", "aac")


@dataclass(frozen=True)
class AudioMapping:
    """An ``audio_common_msgs`` topic, the microphone ``name`` (``pipeline.streams.audio``): the
    ROS 2 layout (``AudioStamped``, which says its format itself) or the older one
    (``AudioData`` / ``AudioDataStamped`` bytes, described by the ``AudioInfo`` messages
    on ``info_topic``; None: the sibling ``audio_info`` / ``info`` topic). ``codec``: how
    the episode's file stores it (``wav``: the PCM as received)."""

    name: str
    topic: str
    info_topic: str | None = None
    time: TimeSource = "header"
    codec: AudioCodec = "wav"

    @property
    def info_topics(self) -> tuple[str, ...]:
        """Where the older layout's ``AudioInfo`` is looked for: ``info_topic``, else the
        siblings ``audio_info`` and ``info`` (``/mic/audio`` -> ``/mic/audio_info``, ``/mic/info``)."""
        if self.info_topic is not None:
            return (self.info_topic,)
        head = self.topic.rpartition("/")[0]
        return (f"{head}/audio_info", f"{head}/info")


@dataclass(frozen=True)
class LaserScanMapping:
    """A ``sensor_msgs/LaserScan`` topic, the lidar ``name``: every scan kept at its native
    rate in a side table (``native`` must stay true: a scan is too large for a step), and
    each step pointing at the scan ``policy`` picks."""

    name: str
    topic: str
    time: TimeSource = "header"
    policy: Policy = "nearest"
    native: bool = True


@dataclass(frozen=True)
class PointCloudMapping:
    """A ``sensor_msgs/PointCloud2`` topic, the sensor ``name``: every cloud kept, a row
    each, in the episode's point cloud file (``pipeline.point_clouds``)."""

    name: str
    topic: str
    time: TimeSource = "header"


@dataclass(frozen=True)
class DetectionsMapping:
    """A ``vision_msgs/Detection2DArray`` topic of detections in camera ``camera``'s frames:
    those nearest in time to each episode's first frame of that camera become its
    ``scene_objects.json`` and ``first_frame.jpg`` (``pipeline.streams.detections``). ``labels``:
    class id -> the name stored as the object's class (a detector's ids are often numbers)."""

    topic: str
    camera: str
    labels: Mapping[str, str] = field(default_factory=dict)
    time: TimeSource = "header"


@dataclass(frozen=True)
class ActionMapping:
    """The command topic (a controller state's: its reference, ``reference`` / ``desired``);
    ``topic`` None is the documented fallback: the next step's joint positions."""

    topic: str | None = None
    time: TimeSource = "header"
    policy: Policy = "latest"


@dataclass(frozen=True)
class StepClock:
    """Exactly one of: a fixed control rate, or steps driven by a camera's frames."""

    rate_hz: float | None = 30.0
    camera: str | None = None

    def __post_init__(self) -> None:
        # Checked here too, not only where a mapping is read: the step grid advances by the
        # period, and a negative one would never reach the end of a recording.
        problem = None if self.rate_hz is None else bounds.STEP_RATE_HZ.problem(self.rate_hz)
        if problem is not None:
            raise ConversionError(f"step.rate_hz: {problem}")


@dataclass(frozen=True)
class EpisodeSplit:
    """``input``: one episode per input; ``topic``: a boundary topic (Bool / String /
    Empty); ``gap``: a new episode after ``gap_s`` seconds without messages; ``ranges``:
    explicit ``(start, end)`` seconds from the bag's start, in order, not overlapping."""

    mode: SplitMode = "input"
    topic: str | None = None
    gap_s: float | None = None
    ranges: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class EpisodeLabels:
    task: str = "teleoperation"
    task_topic: str | None = None
    success: bool | None = None
    failure_reason: str | None = None
    operator_notes: str | None = None


@dataclass(frozen=True)
class ConversionConfig:
    cameras: tuple[CameraMapping, ...] = ()
    joint_states: JointStateMapping | None = None
    wrenches: tuple[WrenchMapping, ...] = ()
    audio: tuple[AudioMapping, ...] = ()
    action: ActionMapping = ActionMapping()
    detections: DetectionsMapping | None = None
    tf_topics: tuple[str, ...] = ("/tf",)
    tf_static_topics: tuple[str, ...] = ("/tf_static",)
    robot_description_topic: str = "/robot_description"
    base_frame: str | None = None
    end_effector_frame: str | None = None
    world_frame: str | None = None
    gripper_joints: tuple[str, ...] = ()
    step: StepClock = StepClock()
    sync_tolerance_ms: float | None = None  # None: half the step period
    # How long after its stamp a sample may be received: a step waits this long in input
    # time for the samples around it (TF a second longer). Later ones are counted as late.
    max_latency_ms: float = 200.0
    drop_outside_tolerance: bool = False
    episodes: EpisodeSplit = EpisodeSplit()
    labels: EpisodeLabels = EpisodeLabels()
    writer: Mapping[str, Any] = field(default_factory=dict)  # WriterConfig.from_mapping
    laser_scans: tuple[LaserScanMapping, ...] = ()
    point_clouds: tuple[PointCloudMapping, ...] = ()

    def camera(self, name: str) -> CameraMapping | None:
        return next((c for c in self.cameras if c.name == name), None)

    def topics(self) -> list[str]:
        """Every topic the mapping reads, each once, in mapping order."""
        found: list[str | None] = [c.topic for c in self.cameras]
        found += [c.camera_info_topic for c in self.cameras]
        found.append(self.joint_states.topic if self.joint_states else None)
        found += [w.topic for w in self.wrenches]
        found += [t for a in self.audio for t in (a.topic, *a.info_topics)]
        found += [s.topic for s in self.laser_scans] + [p.topic for p in self.point_clouds]
        found += [self.action.topic, *self.tf_topics, *self.tf_static_topics, self.robot_description_topic]
        found += [self.episodes.topic, self.labels.task_topic]
        found.append(self.detections.topic if self.detections else None)
        return list(dict.fromkeys(t for t in found if t))


# ---------------------------------------------------------------- reading


_MISSING: Any = object()


_show = bounds.show


class _Map:
    """One mapping of the config: typed getters whose errors name the file and key path."""

    def __init__(self, data: object, path: str, source: str, keys: Iterable[str]) -> None:
        self.path = path
        self.source = source
        if not isinstance(data, Mapping):
            raise self.error("", f"expected a mapping, got {_show(data)}")
        allowed = tuple(keys)
        for key in data:
            if not isinstance(key, str):
                raise self.error("", f"keys must be strings, got {_show(key)}")
            if key not in allowed:
                raise self.error(key, f"unknown key (expected one of {', '.join(allowed)})")
        self.data: Mapping[str, Any] = data

    def where(self, key: str) -> str:
        if not key:
            return self.path or "top level"
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, problem: str) -> ConversionError:
        return ConversionError(f"{self.source}: {self.where(key)}: {problem}")

    def fail(self, key: str, expected: str, value: object) -> ConversionError:
        return self.error(key, f"expected {expected}, got {_show(value)}")

    def given(self, key: str) -> bool:
        """Whether ``key`` is present with a non-null value."""
        return self.data.get(key) is not None

    def _get(self, key: str, default: _T, convert: Callable[[object], _T], optional: bool) -> _T:
        value = self.data.get(key, _MISSING)
        if value is _MISSING:
            return default
        if value is None:
            if optional:
                return None  # type: ignore[return-value]
            raise self.error(key, "must not be null")
        return convert(value)

    def string(self, key: str, default: str) -> str:
        return self._get(key, default, lambda v: self._string(key, v), optional=False)

    def opt_string(self, key: str) -> str | None:
        return self._get(key, None, lambda v: self._string(key, v), optional=True)

    def _string(self, key: str, value: object) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, "a non-empty string", value)
        return value

    def topic(self, key: str, default: str) -> str:
        return self._get(key, default, lambda v: _topic(self, key, v), optional=False)

    def opt_topic(self, key: str) -> str | None:
        return self._get(key, None, lambda v: _topic(self, key, v), optional=True)

    def opt_frame(self, key: str) -> str | None:
        return self._get(key, None, lambda v: _frame(self, key, v), optional=True)

    def choice(self, key: str, choices: tuple[_S, ...], default: _S) -> _S:
        def convert(value: object) -> _S:
            if value not in choices:
                raise self.fail(key, f"one of {', '.join(choices)}", value)
            return value

        return self._get(key, default, convert, optional=False)

    def number(self, key: str, bound: Bound, default: float) -> float:
        return self._get(key, default, lambda v: _number(self, key, v, bound), optional=False)

    def opt_number(self, key: str, bound: Bound) -> float | None:
        return self._get(key, None, lambda v: _number(self, key, v, bound), optional=True)

    def boolean(self, key: str, default: bool) -> bool:
        return self._get(key, default, lambda v: self._bool(key, v), optional=False)

    def opt_boolean(self, key: str) -> bool | None:
        return self._get(key, None, lambda v: self._bool(key, v), optional=True)

    def _bool(self, key: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, "true or false", value)
        return value

    def topics(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        def convert(value: object) -> tuple[str, ...]:
            if not isinstance(value, list):
                raise self.fail(key, "a list of topic names", value)
            return _unique(self, key, [_topic(self, f"{key}[{i}]", v) for i, v in enumerate(value)])

        return self._get(key, default, convert, optional=False)

    def strings(self, key: str) -> tuple[str, ...]:
        def convert(value: object) -> tuple[str, ...]:
            if not isinstance(value, list):
                raise self.fail(key, "a list of names", value)
            return _unique(self, key, [self._string(f"{key}[{i}]", v) for i, v in enumerate(value)])

        return self._get(key, (), convert, optional=False)

    def sub(self, key: str, keys: Iterable[str]) -> _Map | None:
        """The nested mapping ``key``; None when absent or null."""
        value = self.data.get(key)
        return None if value is None else _Map(value, self.where(key), self.source, keys)


def _topic(m: _Map, key: str, value: object) -> str:
    if not isinstance(value, str) or not value.startswith("/") or value == "/" or any(c.isspace() for c in value):
        raise m.fail(key, "a topic name starting with '/'", value)
    return value


def _frame(m: _Map, key: str, value: object) -> str:
    if not isinstance(value, str) or not value.lstrip("/") or any(c.isspace() for c in value):
        raise m.fail(key, "a frame name", value)
    return value.lstrip("/")


def _number(m: _Map, key: str, value: object, bound: Bound) -> float:
    """``value`` within ``bound`` (the one check a flag or parameter of the same setting has)."""
    problem = bound.problem(value)
    if problem is not None:
        raise m.error(key, problem)
    return float(value)  # type: ignore[arg-type]


def _unique(m: _Map, key: str, values: list[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    for i, value in enumerate(values):
        if value in seen:
            raise m.error(f"{key}[{i}]", f"{value!r} is listed twice")
        seen.add(value)
    return tuple(values)


MAPPING_KEYS = (
    "step",
    "sync_tolerance_ms",
    "drop_outside_tolerance",
    "max_latency_ms",
    "cameras",
    "joint_states",
    "wrenches",
    "audio",
    "action",
    "detections",
    "tf_topics",
    "tf_static_topics",
    "robot_description_topic",
    "base_frame",
    "end_effector_frame",
    "world_frame",
    "gripper_joints",
    "episodes",
    "labels",
    "writer",
    "laser_scans",
    "point_clouds",
)
"""The mapping's top-level keys; a recorder's parameters under these namespaces are mapping keys."""
_CAMERA_KEYS = ("topic", "kind", "camera_info_topic", "camera_info_url", "time", "policy")
_JOINT_KEYS = ("topic", "time", "policy", "native")
_WRENCH_KEYS = ("topic", "frame", "time", "policy", "native", "range_force", "range_torque")
_AUDIO_KEYS = ("topic", "info_topic", "time", "codec")
_ACTION_KEYS = ("topic", "time", "policy")
_LASER_SCAN_KEYS = ("topic", "time", "policy", "native")
_POINT_CLOUD_KEYS = ("topic", "time")
_DETECTIONS_KEYS = ("topic", "camera", "labels", "time")
_STEP_KEYS = ("rate_hz", "camera")
_EPISODE_KEYS = ("mode", "topic", "gap_s", "ranges")
_LABEL_KEYS = ("task", "task_topic", "success", "failure_reason", "operator_notes")


def _named(top: _Map, key: str, keys: tuple[str, ...]) -> list[tuple[str, _Map]]:
    """Entries of ``cameras``/``wrenches``: a mapping name -> settings, or a list of
    settings with a ``name`` each."""
    value = top.data.get(key)
    if value is None:
        return []
    entries: list[tuple[str, _Map]] = []
    if isinstance(value, Mapping):
        for name, settings in value.items():
            if not isinstance(name, str):
                raise top.error(key, f"names must be strings, got {_show(name)}")
            where = f"{top.where(key)}.{name}"
            if not NAME_PATTERN.fullmatch(name):
                raise ConversionError(f"{top.source}: {where}: name {name!r} must match {NAME_PATTERN.pattern}")
            entries.append((name, _Map(settings, where, top.source, keys)))
    elif isinstance(value, list):
        first: dict[str, str] = {}
        for i, settings in enumerate(value):
            entry = _Map(settings, f"{top.where(key)}[{i}]", top.source, ("name", *keys))
            name = entry.data.get("name", _MISSING)
            if name is _MISSING or name is None:
                raise entry.error("name", "required key is missing")
            if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
                raise entry.fail("name", f"a name matching {NAME_PATTERN.pattern}", name)
            if name in first:
                raise entry.error("name", f"{name!r} is already the name of {first[name]}")
            first[name] = entry.path
            entries.append((name, entry))
    else:
        raise top.fail(key, "a mapping of name -> settings", value)
    return entries


def _required_topic(m: _Map, key: str = "topic") -> str:
    if not m.given(key):
        raise m.error(key, "required key is missing")
    return m.topic(key, "")


def _camera(name: str, m: _Map, relative_to: Path | None) -> CameraMapping:
    if not m.given("kind"):
        raise m.error("kind", f"required key is missing (one of {', '.join(CAMERA_KINDS)})")
    policy = m.choice("policy", POLICIES, "nearest")
    if policy == "linear":
        raise m.error("policy", "linear interpolation is for numeric streams; a camera takes latest or nearest")
    url = m.opt_string("camera_info_url")
    if url is not None:
        try:
            url = normalized_url(url, relative_to)
        except ValueError as exc:
            raise m.error("camera_info_url", str(exc)) from None
    return CameraMapping(
        name=name,
        topic=_required_topic(m),
        kind=m.choice("kind", CAMERA_KINDS, "rgb"),
        camera_info_topic=m.opt_topic("camera_info_topic"),
        time=m.choice("time", TIME_SOURCES, "header"),
        policy=policy,
        camera_info_url=url,
    )


def _wrench(name: str, m: _Map) -> WrenchMapping:
    return WrenchMapping(
        name=name,
        topic=_required_topic(m),
        frame=m.opt_frame("frame"),
        time=m.choice("time", TIME_SOURCES, "header"),
        policy=m.choice("policy", POLICIES, "nearest"),
        native=m.boolean("native", True),
        range_force=m.opt_number("range_force", bounds.RATED_RANGE),
        range_torque=m.opt_number("range_torque", bounds.RATED_RANGE),
    )


def _audio(name: str, m: _Map) -> AudioMapping:
    return AudioMapping(
        name=name,
        topic=_required_topic(m),
        info_topic=m.opt_topic("info_topic"),
        time=m.choice("time", TIME_SOURCES, "header"),
        codec=m.choice("codec", AUDIO_CODECS, "wav"),
    )


def _laser_scan(name: str, m: _Map) -> LaserScanMapping:
    policy = m.choice("policy", POLICIES, "nearest")
    if policy == "linear":
        raise m.error("policy", "a step points at one scan: latest or nearest, not linear")
    if not m.boolean("native", True):
        raise m.error("native", "a scan is kept only at its native rate (steps point at it); false is not supported")
    return LaserScanMapping(
        name=name, topic=_required_topic(m), time=m.choice("time", TIME_SOURCES, "header"), policy=policy
    )


def _point_cloud(name: str, m: _Map) -> PointCloudMapping:
    return PointCloudMapping(name=name, topic=_required_topic(m), time=m.choice("time", TIME_SOURCES, "header"))


def _detections(m: _Map | None, cameras: Sequence[CameraMapping]) -> DetectionsMapping | None:
    if m is None:
        return None
    camera = m.opt_string("camera")
    if camera is None:
        raise m.error("camera", "required key is missing (the camera whose frames the boxes are in)")
    if camera not in {c.name for c in cameras}:
        names = ", ".join(c.name for c in cameras) or "none"
        raise m.error("camera", f"{camera!r} is not one of the cameras ({names})")
    labels = m.data.get("labels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, (str, int)) and not isinstance(k, bool) and isinstance(v, str) and v.strip()
        for k, v in labels.items()
    ):
        raise m.fail("labels", "a mapping of class id -> label", labels)
    return DetectionsMapping(
        topic=_required_topic(m),
        camera=camera,
        labels={str(k): v for k, v in labels.items()},
        time=m.choice("time", TIME_SOURCES, "header"),
    )


def _joint_states(m: _Map | None) -> JointStateMapping | None:
    if m is None:
        return None
    return JointStateMapping(
        topic=_required_topic(m),
        time=m.choice("time", TIME_SOURCES, "header"),
        policy=m.choice("policy", POLICIES, "linear"),
        native=m.boolean("native", True),
    )


def _action(m: _Map | None) -> ActionMapping:
    if m is None:
        return ActionMapping()
    return ActionMapping(
        topic=m.opt_topic("topic"),
        time=m.choice("time", TIME_SOURCES, "header"),
        policy=m.choice("policy", POLICIES, "latest"),
    )


def _step(m: _Map | None, cameras: Sequence[CameraMapping]) -> StepClock:
    if m is None or not m.data:
        return StepClock()
    rate = m.opt_number("rate_hz", bounds.STEP_RATE_HZ)
    camera = m.opt_string("camera")
    if (rate is None) == (camera is None):
        raise m.error("", "give exactly one of rate_hz (a fixed control rate) and camera (steps at a camera's frames)")
    if camera is not None and camera not in {c.name for c in cameras}:
        names = ", ".join(c.name for c in cameras) or "none"
        raise m.error("camera", f"{camera!r} is not one of the cameras ({names})")
    return StepClock(rate_hz=rate, camera=camera)


def _ranges(m: _Map) -> tuple[tuple[float, float], ...]:
    value = m.data.get("ranges")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise m.fail("ranges", "a list of [start, end] pairs", value)
    if value and not any(isinstance(v, list) for v in value):
        # A ROS parameter cannot hold a list of lists: [s0, e0, s1, e1, ...] reads the same.
        if len(value) % 2:
            raise m.fail("ranges", "[start, end] pairs (an even number of seconds)", value)
        value = [value[i : i + 2] for i in range(0, len(value), 2)]
    ranges: list[tuple[float, float]] = []
    for i, pair in enumerate(value):
        key = f"ranges[{i}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise m.fail(key, "[start, end] in seconds from the bag's start", pair)
        start, end = (_number(m, key, v, bounds.RANGE_S) for v in pair)
        if end <= start:
            raise m.error(key, f"ends at {end:g} s, not after its start {start:g} s")
        if ranges and start < ranges[-1][1]:
            raise m.error(
                key,
                f"starts at {start:g} s, before the previous range ends ({ranges[-1][1]:g} s); "
                "ranges must be in order and not overlap",
            )
        ranges.append((start, end))
    return tuple(ranges)


def _episodes(m: _Map | None) -> EpisodeSplit:
    if m is None:
        return EpisodeSplit()
    split = EpisodeSplit(
        mode=m.choice("mode", SPLIT_MODES, "input"),
        topic=m.opt_topic("topic"),
        gap_s=m.opt_number("gap_s", bounds.GAP_S),
        ranges=_ranges(m),
    )
    needs = {"topic": ("topic", split.topic), "gap": ("gap_s", split.gap_s), "ranges": ("ranges", split.ranges)}
    for mode, (key, value) in needs.items():
        if split.mode == mode and not value:
            raise m.error(key, f"required with mode {mode}")
        if split.mode != mode and value:
            raise m.error(key, f"only used with mode {mode}, but mode is {split.mode}")
    return split


def _labels(m: _Map | None) -> EpisodeLabels:
    if m is None:
        return EpisodeLabels()
    return EpisodeLabels(
        task=m.string("task", "teleoperation"),
        task_topic=m.opt_topic("task_topic"),
        success=m.opt_boolean("success"),
        failure_reason=m.opt_string("failure_reason"),
        operator_notes=m.opt_string("operator_notes"),
    )


def _writer(top: _Map) -> dict[str, Any]:
    value = top.data.get("writer")
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise top.fail("writer", "a mapping of DatasetWriter settings", value)
    try:
        WriterConfig.from_mapping(value, f"{top.source}: writer")
    except OrtfError as exc:
        raise ConversionError(str(exc)) from None
    return _plain(value)  # type: ignore[no-any-return]


def _plain(value: Any) -> Any:
    """A deep copy in YAML's own types (dict, list, scalars)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def config_from_mapping(data: object, source: str, *, relative_to: Path | None = None) -> ConversionConfig:
    """A mapping from parsed YAML (or nested ROS parameters); ``source`` names it in errors.

    Missing keys take the dataclass defaults; ``null`` means unset where a value is optional.
    A relative ``camera_info_url`` is taken relative to ``relative_to`` (the mapping
    file's directory; None: the working directory) and kept absolute.
    """
    top = _Map({} if data is None else data, "", source, MAPPING_KEYS)
    cameras = tuple(_camera(name, m, relative_to) for name, m in _named(top, "cameras", _CAMERA_KEYS))
    wrenches = tuple(_wrench(name, m) for name, m in _named(top, "wrenches", _WRENCH_KEYS))
    audio = tuple(_audio(name, m) for name, m in _named(top, "audio", _AUDIO_KEYS))
    camera_names = {c.name for c in cameras}
    for wrench in wrenches:
        if wrench.name in camera_names:
            raise top.error("wrenches", f"{wrench.name!r} is also a camera; sensor names must be unique")
    scans = tuple(_laser_scan(name, m) for name, m in _named(top, "laser_scans", _LASER_SCAN_KEYS))
    clouds = tuple(_point_cloud(name, m) for name, m in _named(top, "point_clouds", _POINT_CLOUD_KEYS))
    taken = camera_names | {w.name for w in wrenches} | {"joint_states", "action", "end_effector"}
    for what, names in (
        ("audio", [a.name for a in audio]),
        ("laser_scans", [s.name for s in scans]),
        ("point_clouds", [p.name for p in clouds]),
    ):
        for name in names:
            if name in taken:
                raise top.error(what, f"{name!r} is also the name of another sensor or stream; names must be unique")
            taken.add(name)
    for what, topics in (
        ("cameras", [c.topic for c in cameras]),
        ("wrenches", [w.topic for w in wrenches]),
        ("audio", [a.topic for a in audio]),
        ("laser_scans", [s.topic for s in scans]),
        ("point_clouds", [p.topic for p in clouds]),
    ):
        for i, topic in enumerate(topics):
            if topic in topics[:i]:
                raise top.error(what, f"topic {topic} is mapped twice")
    return ConversionConfig(
        cameras=cameras,
        joint_states=_joint_states(top.sub("joint_states", _JOINT_KEYS)),
        wrenches=wrenches,
        audio=audio,
        action=_action(top.sub("action", _ACTION_KEYS)),
        detections=_detections(top.sub("detections", _DETECTIONS_KEYS), cameras),
        tf_topics=top.topics("tf_topics", ("/tf",)),
        tf_static_topics=top.topics("tf_static_topics", ("/tf_static",)),
        robot_description_topic=top.topic("robot_description_topic", "/robot_description"),
        base_frame=top.opt_frame("base_frame"),
        end_effector_frame=top.opt_frame("end_effector_frame"),
        world_frame=top.opt_frame("world_frame"),
        gripper_joints=top.strings("gripper_joints"),
        step=_step(top.sub("step", _STEP_KEYS), cameras),
        sync_tolerance_ms=top.opt_number("sync_tolerance_ms", bounds.SYNC_TOLERANCE_MS),
        drop_outside_tolerance=top.boolean("drop_outside_tolerance", False),
        max_latency_ms=top.number("max_latency_ms", bounds.MAX_LATENCY_MS, ConversionConfig.max_latency_ms),
        episodes=_episodes(top.sub("episodes", _EPISODE_KEYS)),
        labels=_labels(top.sub("labels", _LABEL_KEYS)),
        writer=_writer(top),
        laser_scans=scans,
        point_clouds=clouds,
    )


def config_from_parameters(parameters: Mapping[str, Any], source: str = "parameters") -> ConversionConfig:
    """The mapping from flat ROS parameter names (``cameras.wrist_camera.topic``)."""
    nested: dict[str, Any] = {}
    for name, value in parameters.items():
        node = nested
        *parents, leaf = name.split(".")
        for i, part in enumerate(parents):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConversionError(f"{source}: {'.'.join(parents[: i + 1])}: is a value and a namespace")
            node = child
        if isinstance(node.get(leaf), dict):
            raise ConversionError(f"{source}: {name}: is a value and a namespace")
        node[leaf] = list(value) if isinstance(value, tuple) else value
    return config_from_mapping(nested, source)


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice (PyYAML would keep the last silently)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, (str, int, float, bool)) and key in seen:
            line = key_node.start_mark.line + 1
            raise yaml.constructor.ConstructorError(None, None, f"key {key!r} given twice (line {line})")
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_config(path: str | Path) -> ConversionConfig:
    """Read a topic mapping YAML file; an empty file is the default mapping."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConversionError(f"{path}: cannot read the topic mapping ({reason})") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        raise ConversionError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    return config_from_mapping(data, str(path), relative_to=Path(path).absolute().parent)


# ---------------------------------------------------------------- writing


def config_to_mapping(cfg: ConversionConfig) -> dict[str, Any]:
    """Every key of the schema (``null`` where unset): ``config_from_mapping`` reads it back
    to an equal config."""
    return {
        "step": {"rate_hz": cfg.step.rate_hz, "camera": cfg.step.camera},
        "sync_tolerance_ms": cfg.sync_tolerance_ms,
        "drop_outside_tolerance": cfg.drop_outside_tolerance,
        "max_latency_ms": cfg.max_latency_ms,
        "cameras": {
            c.name: {
                "topic": c.topic,
                "kind": c.kind,
                "camera_info_topic": c.camera_info_topic,
                "camera_info_url": c.camera_info_url,
                "time": c.time,
                "policy": c.policy,
            }
            for c in cfg.cameras
        },
        "joint_states": None
        if cfg.joint_states is None
        else {
            "topic": cfg.joint_states.topic,
            "time": cfg.joint_states.time,
            "policy": cfg.joint_states.policy,
            "native": cfg.joint_states.native,
        },
        "wrenches": {
            w.name: {
                "topic": w.topic,
                "frame": w.frame,
                "time": w.time,
                "policy": w.policy,
                "native": w.native,
                "range_force": w.range_force,
                "range_torque": w.range_torque,
            }
            for w in cfg.wrenches
        },
        "audio": {
            a.name: {"topic": a.topic, "info_topic": a.info_topic, "time": a.time, "codec": a.codec} for a in cfg.audio
        },
        "action": {"topic": cfg.action.topic, "time": cfg.action.time, "policy": cfg.action.policy},
        "detections": None
        if cfg.detections is None
        else {
            "topic": cfg.detections.topic,
            "camera": cfg.detections.camera,
            "labels": dict(cfg.detections.labels),
            "time": cfg.detections.time,
        },
        "tf_topics": list(cfg.tf_topics),
        "tf_static_topics": list(cfg.tf_static_topics),
        "robot_description_topic": cfg.robot_description_topic,
        "base_frame": cfg.base_frame,
        "end_effector_frame": cfg.end_effector_frame,
        "world_frame": cfg.world_frame,
        "gripper_joints": list(cfg.gripper_joints),
        "episodes": {
            "mode": cfg.episodes.mode,
            "topic": cfg.episodes.topic,
            "gap_s": cfg.episodes.gap_s,
            "ranges": [list(r) for r in cfg.episodes.ranges],
        },
        "labels": {
            "task": cfg.labels.task,
            "task_topic": cfg.labels.task_topic,
            "success": cfg.labels.success,
            "failure_reason": cfg.labels.failure_reason,
            "operator_notes": cfg.labels.operator_notes,
        },
        "writer": _plain(cfg.writer),
        "laser_scans": {
            s.name: {"topic": s.topic, "time": s.time, "policy": s.policy, "native": s.native} for s in cfg.laser_scans
        },
        "point_clouds": {p.name: {"topic": p.topic, "time": p.time} for p in cfg.point_clouds},
    }


CONFIG_HEADER = """\
# ortf-bag2ortf topic mapping: which recorded topic becomes which part of an ORTF dataset.
#   ortf-bag2ortf BAG... -o DATASET --config THIS_FILE
# The live recorder takes the same keys as ROS parameters (cameras.wrist_camera.topic).
# Keys left out take their defaults; null means "unset" / "derive it".
#
# step                 steps at a fixed control rate (rate_hz) or at each frame of one
#                      camera (camera: its name); set exactly one of the two
# sync_tolerance_ms    how far from its step a sample may be (null: as far as each stream's
#                      rate and policy allow, at least half the step period; the summary
#                      says which stream set it); steps beyond it are counted, or dropped
#                      with drop_outside_tolerance
# max_latency_ms       how long after its stamp a message may be recorded (default 200):
#                      steps wait this long in recording time for the samples around them;
#                      messages later than that are counted as late, per topic
# cameras              name -> sensor_msgs/Image or CompressedImage topic; kind rgb or depth
#                      (16-bit, stored losslessly); the intrinsics come from camera_info_topic,
#                      else from camera_info_url (a camera_calibration YAML: file:///abs.yaml,
#                      package://pkg/calib.yaml or a path relative to this file), else unknown
#                      (H.264: foxglove_msgs CompressedVideo, CompressedImage h264: stored as published)
# joint_states         the robot's state: a sensor_msgs/JointState topic, or a ros_control
#                      control_msgs/JointTrajectoryControllerState one (its feedback/actual)
# wrenches             name -> geometry_msgs/WrenchStamped topic (force-torque sensors);
#                      frame null: the messages' header frame; range_force (N) and
#                      range_torque (N m): the sensor's rated ranges (null: "unknown")
# audio                name -> audio_common_msgs topic (microphones): AudioStamped (ROS 2
#                      layout), or AudioData / AudioDataStamped described by the AudioInfo
#                      messages on info_topic (null: the sibling audio_info or info topic);
#                      codec wav (default: the PCM as received), flac or aac; every sample is
#                      kept, a file per episode, with a table of the chunks' times
# laser_scans          name -> sensor_msgs/LaserScan topic (a 2D lidar): every scan kept at its
#                      native rate (ranges, intensities), steps point at one (latest/nearest)
# point_clouds         name -> sensor_msgs/PointCloud2 topic: every cloud kept, a row each, in
#                      the episode's point_clouds/<name>/chunk-NNN/episode_NNNNNN.parquet
# action               the command topic (JointState, JointTrajectory, Float64MultiArray,
#                      Twist(Stamped), PoseStamped, Float64/Bool), or a controller state
#                      (its reference/desired); topic null: the next step's joint
#                      positions; the manifest says which
# detections           a vision_msgs/Detection2DArray topic (topic) of boxes in a camera's
#                      frames (camera: its name); those nearest the episode's first frame
#                      become annotations/episode_N/scene_objects.json and first_frame.jpg;
#                      labels: class id -> name stored as the object's class
# time                 header: the message's header stamp; receive: when it was recorded
#                      (use receive for messages without a header)
# policy               latest (newest at or before the step), nearest, linear (numbers only)
# native               also keep every sample at its native rate in a side table
# tf_topics, tf_static_topics, robot_description_topic   TF and the URDF (std_msgs/String)
# base_frame, end_effector_frame, world_frame   null: from the URDF and the TF tree
# gripper_joints       [] : the URDF's movable joints named like finger or gripper
# episodes.mode        input (one episode per input), topic (boundary topic), gap (gap_s
#                      seconds without messages), ranges ([start, end] s from the bag start)
# labels               task instruction, success, failure_reason and notes of the episodes
# writer               DatasetWriter settings: chunk_size, row_group_steps,
#                      row_group_bytes, encoder_queue_frames, step_batch (here 64 unless given), video
#                      (codec, crf, preset, gop, pix_fmt), as in config/writer.yaml
"""


def dump_config(cfg: ConversionConfig) -> str:
    """The YAML text ``write_config`` writes (checked to read back)."""
    mapping = config_to_mapping(cfg)
    config_from_mapping(mapping, "the mapping to write")  # refuse to write what would not load
    return CONFIG_HEADER + "\n" + yaml.safe_dump(mapping, sort_keys=False, allow_unicode=True, width=100)


def write_config(cfg: ConversionConfig, path: str | Path) -> None:
    """Save ``cfg`` as YAML that ``load_config`` reads back to an equal config."""
    text = dump_config(cfg)
    try:
        atomic.write_text(Path(path), text)
    except OSError as exc:
        raise ConversionError(f"{path}: cannot write the topic mapping ({exc.strerror or exc})") from None


# ---------------------------------------------------------------- auto-detection

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


def auto_config(topics: Sequence[TopicInfo], *, step_rate_hz: float = 30.0) -> ConversionConfig:
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
    return ConversionConfig(
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
    """The only detections topic, with the camera sharing most of its namespace (``auto_config``)."""
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


# ---------------------------------------------------------------- sync tolerance

JITTER_MARGIN = 1.25
"""Room over a stream's nominal reach for the jitter of its stamps."""


@dataclass(frozen=True)
class SyncTolerance:
    """The sync tolerance a dataset declares, and in words what set it."""

    ms: float
    set_by: str

    def line(self) -> str:
        return f"sync tolerance {self.ms:g} ms ({self.set_by})"


def sync_tolerance(cfg: ConversionConfig, rates: Mapping[str, float]) -> SyncTolerance:
    """The mapping's ``sync_tolerance_ms``, or the distance every mapped stream can keep
    from its step by its own rate (``rates``: topic -> Hz) and policy: ``latest`` up to
    one period of the stream, ``nearest`` and ``linear`` half of one, with
    ``JITTER_MARGIN``; at least half the step period. A 50 Hz command sampled ``latest``
    is up to 20 ms from a 30 Hz step by nature, a 15 Hz camera up to 33 ms: half the step
    period (16.7 ms) would declare every such dataset out of sync."""
    if cfg.sync_tolerance_ms is not None:
        return SyncTolerance(cfg.sync_tolerance_ms, "the mapping's sync_tolerance_ms")
    step_camera = cfg.camera(cfg.step.camera) if cfg.step.camera else None
    step_hz = cfg.step.rate_hz or (rates.get(step_camera.topic, 0.0) if step_camera else 0.0) or 30.0
    best = SyncTolerance(500.0 / step_hz, f"half the {step_hz:g} Hz step period")
    streams: list[tuple[str, str, Policy]] = []
    if cfg.joint_states is not None:
        streams.append(("joint states", cfg.joint_states.topic, cfg.joint_states.policy))
    streams += [(f"force-torque {w.name}", w.topic, w.policy) for w in cfg.wrenches]
    streams += [(f"laser scan {s.name}", s.topic, s.policy) for s in cfg.laser_scans]
    streams += [(f"camera {c.name}", c.topic, c.policy) for c in cfg.cameras if c is not step_camera]
    if cfg.action.topic is not None:
        streams.append(("action", cfg.action.topic, cfg.action.policy))
    for what, topic, policy in streams:
        if not rates.get(topic):
            continue
        hz = max(1, round(rates[topic]))  # a nominal rate: the same for every recording of a setup
        reach = (1000.0 / hz) * (1.0 if policy == "latest" else 0.5) * JITTER_MARGIN
        if reach > best.ms:
            best = SyncTolerance(reach, f"set by {what}: {topic} at {hz} Hz, {policy}")
    return SyncTolerance(math.ceil(best.ms * 10) / 10, best.set_by)


# ---------------------------------------------------------------- description


def _timing(time: TimeSource, policy: Policy) -> str:
    return f"{time} time, {policy}"


def _intrinsics(camera: CameraMapping) -> str:
    """Where a camera's intrinsics will come from, in the order they are tried."""
    fallback = f"intrinsics from {camera.camera_info_url}" if camera.camera_info_url else "intrinsics unknown"
    if camera.camera_info_topic:
        return f"camera_info {camera.camera_info_topic}, without it {fallback}"
    return f"no camera_info: {fallback}"


def describe_mapping(
    cfg: ConversionConfig, rates: Mapping[str, float] | None, types: Mapping[str, str] | None = None
) -> list[str]:
    """What the mapping does, one line per item, for ``ortf-bag2ortf --list``; ``rates``
    (topic -> Hz) decide the sync tolerance when the mapping does not (None: not known
    yet, as for a live recorder before its warm-up); ``types`` (topic -> message type, any
    spelling) say what a controller state topic gives."""
    controllers = {t for t, msgtype in (types or {}).items() if canonical_msgtype(msgtype) == CONTROLLER_STATE_TYPE}
    lines = []
    if cfg.step.camera is not None:
        lines.append(f"steps: at each frame of camera {cfg.step.camera}")
    else:
        lines.append(f"steps: {cfg.step.rate_hz:g} Hz control rate")
    beyond = "dropped" if cfg.drop_outside_tolerance else "kept and counted"
    if rates is None and cfg.sync_tolerance_ms is None:
        tolerance = "sync tolerance from the streams' rates, once measured (at least half the step period)"
    else:
        tolerance = sync_tolerance(cfg, rates or {}).line()
    lines.append(f"{tolerance}; steps beyond it are {beyond}")
    lines.append(f"max latency: {cfg.max_latency_ms:g} ms from a stamp to its recording")
    for c in cfg.cameras:
        lines.append(f"camera {c.name} ({c.kind}): {c.topic} ({_timing(c.time, c.policy)}, {_intrinsics(c)})")
    if not cfg.cameras:
        lines.append("cameras: none")
    if cfg.joint_states is not None:
        j = cfg.joint_states
        native = ", every message kept at its native rate" if j.native else ""
        fields = ", the controller state's feedback (else actual)" if j.topic in controllers else ""
        lines.append(f"joint state: {j.topic} ({_timing(j.time, j.policy)}{fields}{native})")
    else:
        lines.append("joint state: none")
    for mic in cfg.audio:
        info = f", format from {mic.info_topic}" if mic.info_topic else ""
        lines.append(f"audio {mic.name}: {mic.topic} ({mic.time} time, every sample kept, {mic.codec} file{info})")
    for w in cfg.wrenches:
        frame = f"frame {w.frame}" if w.frame else "frame from the header"
        native = ", every message kept at its native rate" if w.native else ""
        lines.append(f"force-torque {w.name}: {w.topic} ({_timing(w.time, w.policy)}, {frame}{native})")
    for s in cfg.laser_scans:
        lines.append(
            f"laser scan {s.name}: {s.topic} ({_timing(s.time, s.policy)}, every scan kept at its native rate)"
        )
    for p in cfg.point_clouds:
        lines.append(f"point cloud {p.name}: {p.topic} ({p.time} time, every cloud kept in the episode's cloud file)")
    a = cfg.action
    if a.topic in controllers:
        lines.append(
            f"action: {a.topic} ({_timing(a.time, a.policy)}, the controller's reference (else desired): "
            "declared so in the manifest)"
        )
    elif a.topic is not None:
        lines.append(f"action: {a.topic} ({_timing(a.time, a.policy)})")
    else:
        lines.append("action: none recorded; the next step's joint positions (declared so in the manifest)")
    if cfg.detections is not None:
        d = cfg.detections
        lines.append(f"detections: {d.topic} (boxes in camera {d.camera}'s first frame -> scene_objects.json)")
    lines.append(f"tf: {', '.join(cfg.tf_topics) or 'none'}; static: {', '.join(cfg.tf_static_topics) or 'none'}")
    lines.append(f"robot description: {cfg.robot_description_topic}")
    frames = [
        f"{what} {value or 'auto'}"
        for what, value in (
            ("base", cfg.base_frame),
            ("end effector", cfg.end_effector_frame),
            ("world", cfg.world_frame),
        )
    ]
    lines.append(f"frames: {', '.join(frames)}")
    grippers = ", ".join(cfg.gripper_joints) if cfg.gripper_joints else "auto (URDF joints named finger/gripper)"
    lines.append(f"gripper joints: {grippers}")
    e = cfg.episodes
    if e.mode == "input":
        lines.append("episodes: one per input")
    elif e.mode == "topic":
        lines.append(f"episodes: split at messages on {e.topic}")
    elif e.mode == "gap":
        lines.append(f"episodes: split at gaps of {e.gap_s:g} s or more")
    else:
        lines.append("episodes: " + ", ".join(f"{s:g}-{t:g} s" for s, t in e.ranges))
    labels = cfg.labels
    task = f"from {labels.task_topic} (default {labels.task!r})" if labels.task_topic else repr(labels.task)
    outcome = "unknown" if labels.success is None else "success" if labels.success else "failure"
    if labels.failure_reason:
        outcome += f" ({labels.failure_reason})"
    lines.append(f"task: {task}; outcome: {outcome}")
    if cfg.writer:
        lines.append(f"writer: {cfg.writer}")
    return lines
