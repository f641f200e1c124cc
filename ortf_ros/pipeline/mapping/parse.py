"""Reading a mapping: a YAML file (``load_mapping``), parsed YAML (``mapping_from_dict``) or
flat ROS parameters (``mapping_from_parameters``) into a ``TopicMapping``.

Everything a mistake could hide in is checked: unknown keys, wrong types, unknown
policies, kinds and time sources, step clock, names, episode splitting, writer settings.
Each key is read with ``format.fields`` in the mapping's ``WORDING``, so each problem is one
``MappingError`` line naming the file and the dotted key path, e.g.
``teleop.yaml: cameras[1].policy: expected one of latest, nearest, linear, got 'mean'``.
Frame names lose a leading ``/`` (ROS 1 style), as ``extract`` does for TF.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from ortf_ros import bounds
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.errors import MappingError, OrtfError
from ortf_ros.format import fields
from ortf_ros.format.fields import Fields, Wording
from ortf_ros.pipeline.calibration import normalized_url
from ortf_ros.pipeline.mapping.model import (
    AUDIO_CODECS,
    CAMERA_KINDS,
    NAME_PATTERN,
    SPLIT_MODES,
    TIME_SOURCES,
    ActionMapping,
    AudioMapping,
    CameraMapping,
    ClockOffset,
    DetectionsMapping,
    EpisodeLabels,
    EpisodeSplit,
    JointStateMapping,
    LaserScanMapping,
    PointCloudMapping,
    StepClock,
    TimeSource,
    TopicMapping,
    WrenchMapping,
)
from ortf_ros.pipeline.sync import POLICIES, Policy

WORDING = Wording(MappingError)
"""How the mapping words its errors: ``SOURCE: cameras.wrist.topic: expected ..., got ...``
(a value shown as YAML spells it, ``required key is missing``, ``unknown key (expected one of ...)``)."""

_TOPICS = fields.list_of(fields.topic_name, "a list of topic names", unique=True)
_NAMES = fields.list_of(fields.nonempty_string, "a list of names", unique=True)


def _time(m: Fields) -> TimeSource:
    return m.get("time", fields.one_of(TIME_SOURCES), "header")


def _clock_offset(m: Fields, key: str, value: object) -> ClockOffset:
    """``auto`` or milliseconds (``pipeline.clock_offsets``)."""
    if value == "auto":
        return "auto"
    problem = bounds.CLOCK_OFFSET_MS.problem(value)
    if problem is not None:
        raise m.fail(key, f"auto or a number of milliseconds within +-{bounds.CLOCK_OFFSET_MS.high:g}", value)
    return float(value)  # type: ignore[arg-type]


def _offset(m: Fields) -> ClockOffset:
    return m.optional("clock_offset_ms", _clock_offset)


def _policy(m: Fields, default: Policy) -> Policy:
    return m.get("policy", fields.one_of(POLICIES), default)


def _topic(m: Fields) -> str:
    return m.required("topic", fields.topic_name)


def _tolerance(m: Fields) -> float | None:
    """A sampled stream's own ``sync_tolerance_ms`` (None: the mapping's)."""
    return m.optional("sync_tolerance_ms", fields.bounded(bounds.SYNC_TOLERANCE_MS))


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
_CAMERA_KEYS = (
    "topic",
    "kind",
    "camera_info_topic",
    "camera_info_url",
    "time",
    "clock_offset_ms",
    "policy",
    "sync_tolerance_ms",
)
_JOINT_KEYS = ("topic", "time", "clock_offset_ms", "policy", "native", "sync_tolerance_ms")
_WRENCH_KEYS = (
    "topic",
    "frame",
    "time",
    "clock_offset_ms",
    "policy",
    "native",
    "range_force",
    "range_torque",
    "sync_tolerance_ms",
)
_AUDIO_KEYS = ("topic", "info_topic", "time", "clock_offset_ms", "codec")
_ACTION_KEYS = ("topic", "time", "clock_offset_ms", "policy", "sync_tolerance_ms")
_LASER_SCAN_KEYS = ("topic", "time", "clock_offset_ms", "policy", "native", "sync_tolerance_ms")
_POINT_CLOUD_KEYS = ("topic", "time", "clock_offset_ms")
_DETECTIONS_KEYS = ("topic", "camera", "labels", "time", "clock_offset_ms")
_STEP_KEYS = ("rate_hz", "camera")
_EPISODE_KEYS = ("mode", "topic", "gap_s", "ranges")
_LABEL_KEYS = ("task", "task_topic", "success", "failure_reason", "operator_notes")


def _by_name(m: Fields, key: str, value: object) -> Mapping[Any, Any] | list[Any]:
    if not isinstance(value, (Mapping, list)):
        raise m.fail(key, "a mapping of name -> settings", value)
    return value


def _name(m: Fields, key: str, value: object) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise m.fail(key, f"a name matching {NAME_PATTERN.pattern}", value)
    return value


def _named(top: Fields, key: str, keys: tuple[str, ...]) -> list[tuple[str, Fields]]:
    """Entries of ``cameras``/``wrenches``: a mapping name -> settings, or a list of
    settings with a ``name`` each."""
    value = top.optional(key, _by_name)
    if value is None:
        return []
    entries: list[tuple[str, Fields]] = []
    if isinstance(value, Mapping):
        named = top.child(value, top.where(key))
        for name, settings in value.items():
            if not isinstance(name, str):
                raise top.error(key, f"names must be strings, got {WORDING.show(name)}")
            if not NAME_PATTERN.fullmatch(name):
                raise named.error(name, f"name {name!r} must match {NAME_PATTERN.pattern}")
            entries.append((name, named.child(settings, named.where(name), keys)))
        return entries
    first: dict[str, str] = {}
    for i, settings in enumerate(value):  # (each checked before the next is read)
        entry = top.child(settings, f"{top.where(key)}[{i}]", ("name", *keys))
        name = entry.required("name", _name)
        if name in first:
            raise entry.error("name", f"{name!r} is already the name of {first[name]}")
        first[name] = entry.path
        entries.append((name, entry))
    return entries


def _camera(name: str, m: Fields, relative_to: Path | None) -> CameraMapping:
    if not m.given("kind"):
        raise m.error("kind", f"{WORDING.missing} (one of {', '.join(CAMERA_KINDS)})")
    policy = _policy(m, "nearest")
    if policy == "linear":
        raise m.error("policy", "linear interpolation is for numeric streams; a camera takes latest or nearest")
    url = m.optional("camera_info_url", fields.nonempty_string)
    if url is not None:
        try:
            url = normalized_url(url, relative_to)
        except ValueError as exc:
            raise m.error("camera_info_url", str(exc)) from None
    return CameraMapping(
        name=name,
        topic=_topic(m),
        kind=m.get("kind", fields.one_of(CAMERA_KINDS), "rgb"),
        camera_info_topic=m.optional("camera_info_topic", fields.topic_name),
        time=_time(m),
        clock_offset_ms=_offset(m),
        policy=policy,
        camera_info_url=url,
        sync_tolerance_ms=_tolerance(m),
    )


def _wrench(name: str, m: Fields) -> WrenchMapping:
    return WrenchMapping(
        name=name,
        topic=_topic(m),
        frame=m.optional("frame", fields.frame_name),
        time=_time(m),
        clock_offset_ms=_offset(m),
        policy=_policy(m, "nearest"),
        native=m.get("native", fields.flag, True),
        range_force=m.optional("range_force", fields.bounded(bounds.RATED_RANGE)),
        range_torque=m.optional("range_torque", fields.bounded(bounds.RATED_RANGE)),
        sync_tolerance_ms=_tolerance(m),
    )


def _audio(name: str, m: Fields) -> AudioMapping:
    return AudioMapping(
        name=name,
        topic=_topic(m),
        info_topic=m.optional("info_topic", fields.topic_name),
        time=_time(m),
        clock_offset_ms=_offset(m),
        codec=m.get("codec", fields.one_of(AUDIO_CODECS), "wav"),
    )


def _laser_scan(name: str, m: Fields) -> LaserScanMapping:
    policy = _policy(m, "nearest")
    if policy == "linear":
        raise m.error("policy", "a step points at one scan: latest or nearest, not linear")
    if not m.get("native", fields.flag, True):
        raise m.error("native", "a scan is kept only at its native rate (steps point at it); false is not supported")
    return LaserScanMapping(
        name=name,
        topic=_topic(m),
        time=_time(m),
        clock_offset_ms=_offset(m),
        policy=policy,
        sync_tolerance_ms=_tolerance(m),
    )


def _point_cloud(name: str, m: Fields) -> PointCloudMapping:
    return PointCloudMapping(name=name, topic=_topic(m), time=_time(m), clock_offset_ms=_offset(m))


def _camera_name(m: Fields, cameras: Sequence[CameraMapping], camera: str) -> str:
    """``camera``, which must name one of ``cameras``."""
    if camera not in {c.name for c in cameras}:
        names = ", ".join(c.name for c in cameras) or "none"
        raise m.error("camera", f"{camera!r} is not one of the cameras ({names})")
    return camera


def _class_labels(m: Fields, key: str, value: object) -> dict[str, str]:
    if not value:  # (an empty anything is no labels, as null is)
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, (str, int)) and not isinstance(k, bool) and isinstance(v, str) and v.strip()
        for k, v in value.items()
    ):
        raise m.fail(key, "a mapping of class id -> label", value)
    return {str(k): v for k, v in value.items()}


def _detections(m: Fields | None, cameras: Sequence[CameraMapping]) -> DetectionsMapping | None:
    if m is None:
        return None
    camera = m.optional("camera", fields.nonempty_string)
    if camera is None:
        raise m.error("camera", f"{WORDING.missing} (the camera whose frames the boxes are in)")
    camera = _camera_name(m, cameras, camera)
    labels = m.optional("labels", _class_labels) or {}
    return DetectionsMapping(topic=_topic(m), camera=camera, labels=labels, time=_time(m), clock_offset_ms=_offset(m))


def _joint_states(m: Fields | None) -> JointStateMapping | None:
    if m is None:
        return None
    return JointStateMapping(
        topic=_topic(m),
        time=_time(m),
        clock_offset_ms=_offset(m),
        policy=_policy(m, "linear"),
        native=m.get("native", fields.flag, True),
        sync_tolerance_ms=_tolerance(m),
    )


def _action(m: Fields | None) -> ActionMapping:
    if m is None:
        return ActionMapping()
    return ActionMapping(
        topic=m.optional("topic", fields.topic_name),
        time=_time(m),
        clock_offset_ms=_offset(m),
        policy=_policy(m, "latest"),
        sync_tolerance_ms=_tolerance(m),
    )


def _step(m: Fields | None, cameras: Sequence[CameraMapping]) -> StepClock:
    if m is None or not m.data:
        return StepClock()
    rate = m.optional("rate_hz", fields.bounded(bounds.STEP_RATE_HZ))
    camera = m.optional("camera", fields.nonempty_string)
    if (rate is None) == (camera is None):
        raise m.error("", "give exactly one of rate_hz (a fixed control rate) and camera (steps at a camera's frames)")
    return StepClock(rate_hz=rate, camera=None if camera is None else _camera_name(m, cameras, camera))


def _ranges(m: Fields, key: str, value: object) -> tuple[tuple[float, float], ...]:
    if not isinstance(value, list):
        raise m.fail(key, "a list of [start, end] pairs", value)
    if value and not any(isinstance(v, list) for v in value):
        # A ROS parameter cannot hold a list of lists: [s0, e0, s1, e1, ...] reads the same.
        if len(value) % 2:
            raise m.fail(key, "[start, end] pairs (an even number of seconds)", value)
        value = [value[i : i + 2] for i in range(0, len(value), 2)]
    seconds = fields.bounded(bounds.RANGE_S)
    ranges: list[tuple[float, float]] = []
    for i, pair in enumerate(value):
        where = f"{key}[{i}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise m.fail(where, "[start, end] in seconds from the bag's start", pair)
        start, end = (seconds(m, where, v) for v in pair)
        if end <= start:
            raise m.error(where, f"ends at {end:g} s, not after its start {start:g} s")
        if ranges and start < ranges[-1][1]:
            raise m.error(
                where,
                f"starts at {start:g} s, before the previous range ends ({ranges[-1][1]:g} s); "
                "ranges must be in order and not overlap",
            )
        ranges.append((start, end))
    return tuple(ranges)


def _episodes(m: Fields | None) -> EpisodeSplit:
    if m is None:
        return EpisodeSplit()
    split = EpisodeSplit(
        mode=m.get("mode", fields.one_of(SPLIT_MODES), "input"),
        topic=m.optional("topic", fields.topic_name),
        gap_s=m.optional("gap_s", fields.bounded(bounds.GAP_S)),
        ranges=m.optional("ranges", _ranges) or (),
    )
    needs = {"topic": ("topic", split.topic), "gap": ("gap_s", split.gap_s), "ranges": ("ranges", split.ranges)}
    for mode, (key, value) in needs.items():
        if split.mode == mode and not value:
            raise m.error(key, f"required with mode {mode}")
        if split.mode != mode and value:
            raise m.error(key, f"only used with mode {mode}, but mode is {split.mode}")
    return split


def _labels(m: Fields | None) -> EpisodeLabels:
    if m is None:
        return EpisodeLabels()
    return EpisodeLabels(
        task=m.get("task", fields.nonempty_string, "teleoperation"),
        task_topic=m.optional("task_topic", fields.topic_name),
        success=m.optional("success", fields.flag),
        failure_reason=m.optional("failure_reason", fields.nonempty_string),
        operator_notes=m.optional("operator_notes", fields.nonempty_string),
    )


def _writer_settings(m: Fields, key: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise m.fail(key, "a mapping of DatasetWriter settings", value)
    return value


def _writer_section(section: Mapping[str, Any], source: str) -> tuple[WriterConfig, tuple[str, ...]]:
    """The ``writer:`` section read by the writer's own reader (``WriterConfig.from_mapping``,
    its words, a mapping's error), and the settings it gives (``TopicMapping.writer_given``)."""
    try:
        writer = WriterConfig.from_mapping(section, source)
    except OrtfError as exc:
        raise MappingError(str(exc)) from None
    given: list[str] = []
    for key in section:  # (from_mapping took only known names, and video as a mapping)
        given += [key, *(f"video.{k}" for k in section[key])] if key == "video" else [key]
    return writer, tuple(given)


def with_writer(mapping: TopicMapping, section: Mapping[str, Any], source: str = "writer") -> TopicMapping:
    """``mapping`` with the ``writer:`` section ``section`` (checked as a file's is)."""
    writer, given = _writer_section(section, source)
    return replace(mapping, writer=writer, writer_given=given)


def mapping_from_dict(data: object, source: str, *, relative_to: Path | None = None) -> TopicMapping:
    """A mapping from parsed YAML (or nested ROS parameters); ``source`` names it in errors.

    Missing keys take the dataclass defaults; ``null`` means unset where a value is optional.
    A relative ``camera_info_url`` is taken relative to ``relative_to`` (the mapping
    file's directory; None: the working directory) and kept absolute.
    """
    top = Fields({} if data is None else data, source, WORDING, keys=MAPPING_KEYS)
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
    section = top.optional("writer", _writer_settings)
    writer, writer_given = (WriterConfig(), ()) if section is None else _writer_section(section, f"{source}: writer")
    return TopicMapping(
        cameras=cameras,
        joint_states=_joint_states(top.sub("joint_states", _JOINT_KEYS)),
        wrenches=wrenches,
        audio=audio,
        action=_action(top.sub("action", _ACTION_KEYS)),
        detections=_detections(top.sub("detections", _DETECTIONS_KEYS), cameras),
        tf_topics=top.get("tf_topics", _TOPICS, ("/tf",)),
        tf_static_topics=top.get("tf_static_topics", _TOPICS, ("/tf_static",)),
        robot_description_topic=top.get("robot_description_topic", fields.topic_name, "/robot_description"),
        base_frame=top.optional("base_frame", fields.frame_name),
        end_effector_frame=top.optional("end_effector_frame", fields.frame_name),
        world_frame=top.optional("world_frame", fields.frame_name),
        gripper_joints=top.get("gripper_joints", _NAMES, ()),
        step=_step(top.sub("step", _STEP_KEYS), cameras),
        sync_tolerance_ms=_tolerance(top),
        drop_outside_tolerance=top.get("drop_outside_tolerance", fields.flag, False),
        max_latency_ms=top.get("max_latency_ms", fields.bounded(bounds.MAX_LATENCY_MS), TopicMapping.max_latency_ms),
        episodes=_episodes(top.sub("episodes", _EPISODE_KEYS)),
        labels=_labels(top.sub("labels", _LABEL_KEYS)),
        writer=writer,
        writer_given=writer_given,
        laser_scans=scans,
        point_clouds=clouds,
    )


def mapping_from_parameters(parameters: Mapping[str, Any], source: str = "parameters") -> TopicMapping:
    """The mapping from flat ROS parameter names (``cameras.wrist_camera.topic``)."""
    return mapping_from_dict(Fields(parameters, source, WORDING).nested(), source)


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


def load_mapping(path: str | Path) -> TopicMapping:
    """Read a topic mapping YAML file; an empty file is the default mapping."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise MappingError(f"{path}: cannot read the topic mapping ({reason})") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        raise MappingError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    return mapping_from_dict(data, str(path), relative_to=Path(path).absolute().parent)
