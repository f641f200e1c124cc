"""The mapping's model: which recorded topic becomes which stream of an ORTF dataset, as
frozen dataclasses, one per kind of stream, gathered in ``TopicMapping``.

Only the shapes and the checks a value carries with it live here (a step rate within its
bound): reading one from a file or ROS parameters is ``parse``, writing it back ``dump``,
guessing one from a recording ``detect``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ortf_ros import bounds
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.errors import MappingError
from ortf_ros.pipeline.samples import TimeSource as TimeSource  # (defined beside Stamps; the mapping names it)
from ortf_ros.pipeline.sync import Policy

CameraKind = Literal["rgb", "depth"]
ClockOffset = Literal["auto"] | float | None
"""A stream's ``clock_offset_ms``: None (its clock is the other streams'), ``"auto"`` (measured
at each episode's start, ``pipeline.clock_offsets``) or milliseconds added to its times."""
SplitMode = Literal["input", "topic", "gap", "ranges"]

TIME_SOURCES: tuple[TimeSource, ...] = ("header", "receive")
CAMERA_KINDS: tuple[CameraKind, ...] = ("rgb", "depth")
SPLIT_MODES: tuple[SplitMode, ...] = ("input", "topic", "gap", "ranges")
NAME_PATTERN = re.compile(r"[A-Za-z0-9_]+")
"""Camera and wrench names: they become sensor, stream, file and parameter names."""


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
    sync_tolerance_ms: float | None = None  # None: the mapping's (``mapping.tolerance``)
    clock_offset_ms: ClockOffset = None


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
    sync_tolerance_ms: float | None = None  # None: the mapping's (``mapping.tolerance``)
    clock_offset_ms: ClockOffset = None


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
    sync_tolerance_ms: float | None = None  # None: the mapping's (``mapping.tolerance``)
    clock_offset_ms: ClockOffset = None


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
    clock_offset_ms: ClockOffset = None

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
    sync_tolerance_ms: float | None = None  # None: the mapping's (``mapping.tolerance``)
    clock_offset_ms: ClockOffset = None


@dataclass(frozen=True)
class PointCloudMapping:
    """A ``sensor_msgs/PointCloud2`` topic, the sensor ``name``: every cloud kept, a row
    each, in the episode's point cloud file (``dataset.point_clouds``)."""

    name: str
    topic: str
    time: TimeSource = "header"
    clock_offset_ms: ClockOffset = None


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
    clock_offset_ms: ClockOffset = None


@dataclass(frozen=True)
class ActionMapping:
    """The command topic (a controller state's: its reference, ``reference`` / ``desired``);
    ``topic`` None is the documented fallback: the next step's joint positions."""

    topic: str | None = None
    time: TimeSource = "header"
    policy: Policy = "latest"
    clock_offset_ms: ClockOffset = None
    sync_tolerance_ms: float | None = None  # None: the mapping's (``mapping.tolerance``)


@dataclass(frozen=True)
class TimedStream:
    """A stream as its clock sees it: the mapping key it is set under (``cameras.wrist``),
    its topic, which of a message's times it takes, and its ``clock_offset_ms``."""

    key: str
    topic: str
    time: TimeSource
    clock_offset_ms: ClockOffset


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
            raise MappingError(f"step.rate_hz: {problem}")


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
class TopicMapping:
    """The mapping: every stream of the dataset, the topic it is read from and how. One for
    the bag converter (a YAML file, ``--config``) and the live recorder (ROS parameters);
    every field has a default, so an empty file is a mapping (cameras and joints none)."""

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
    # Every sampled stream's default (its own ``sync_tolerance_ms`` over it); None: what each
    # stream's rate and policy allow, at least half the step period (``mapping.tolerance``).
    sync_tolerance_ms: float | None = None
    # How long after its stamp a sample may be received: a step waits this long in input
    # time for the samples around it (TF a second longer). Later ones are counted as late.
    max_latency_ms: float = 200.0
    drop_outside_tolerance: bool = False
    episodes: EpisodeSplit = EpisodeSplit()
    labels: EpisodeLabels = EpisodeLabels()
    # The writer: section, parsed. A setting it does not give holds WriterConfig's default,
    # which a converter or a live recorder replaces with its own (writer_over).
    writer: WriterConfig = field(default_factory=WriterConfig)
    # The settings the writer: section gives, by dotted name in its order ("chunk_size",
    # "video", "video.crf"): what is written back (writer_settings) and what overrides.
    writer_given: tuple[str, ...] = ()
    laser_scans: tuple[LaserScanMapping, ...] = ()
    point_clouds: tuple[PointCloudMapping, ...] = ()

    def timed_streams(self) -> list[TimedStream]:
        """Every stream that has a time of its own (``time``, ``clock_offset_ms``), in mapping
        order, a topic once (a controller state that is both the joint state and the action
        is ``joint_states``)."""
        found = [TimedStream(f"cameras.{c.name}", c.topic, c.time, c.clock_offset_ms) for c in self.cameras]
        if self.joint_states is not None:
            j = self.joint_states
            found.append(TimedStream("joint_states", j.topic, j.time, j.clock_offset_ms))
        found += [TimedStream(f"wrenches.{w.name}", w.topic, w.time, w.clock_offset_ms) for w in self.wrenches]
        found += [TimedStream(f"audio.{a.name}", a.topic, a.time, a.clock_offset_ms) for a in self.audio]
        found += [TimedStream(f"laser_scans.{s.name}", s.topic, s.time, s.clock_offset_ms) for s in self.laser_scans]
        found += [TimedStream(f"point_clouds.{p.name}", p.topic, p.time, p.clock_offset_ms) for p in self.point_clouds]
        if self.action.topic is not None:
            found.append(TimedStream("action", self.action.topic, self.action.time, self.action.clock_offset_ms))
        if self.detections is not None:
            d = self.detections
            found.append(TimedStream("detections", d.topic, d.time, d.clock_offset_ms))
        return list({s.topic: s for s in reversed(found)}.values())[::-1]

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

    def writer_settings(self) -> dict[str, Any]:
        """The ``writer:`` section as the mapping gives it (``writer_given``, with its values)."""
        section: dict[str, Any] = {}
        for name in self.writer_given:
            group, _, key = name.partition(".")
            if group != "video":
                section[name] = getattr(self.writer, name)
            elif key:
                section.setdefault("video", {})[key] = getattr(self.writer.video, key)
            else:
                section.setdefault("video", {})
        return section

    def writer_over(self, defaults: WriterConfig) -> WriterConfig:
        """The writer settings of a run: what the ``writer:`` section gives, and ``defaults``
        (a converter's or a live recorder's own) for the rest."""
        given = self.writer_settings()
        video = replace(defaults.video, **given.pop("video", {}))
        return replace(defaults, **given, video=video)
