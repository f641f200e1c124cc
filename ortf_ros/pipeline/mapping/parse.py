"""Reading a mapping: a YAML file (``load_mapping``), parsed YAML (``mapping_from_dict``) or
flat ROS parameters (``mapping_from_parameters``) into a ``TopicMapping``.

Everything a mistake could hide in is checked: unknown keys, wrong types, unknown
policies, kinds and time sources, step clock, names, episode splitting, writer settings.
Each problem is one ``ConversionError`` line naming the file and the dotted key path, e.g.
``teleop.yaml: cameras[1].policy: expected one of latest, nearest, linear, got 'mean'``.
Frame names lose a leading ``/`` (ROS 1 style), as ``extract`` does for TF.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ortf_ros import bounds
from ortf_ros.bounds import Bound
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.errors import ConversionError, OrtfError
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
    DetectionsMapping,
    EpisodeLabels,
    EpisodeSplit,
    JointStateMapping,
    LaserScanMapping,
    PointCloudMapping,
    StepClock,
    TopicMapping,
    WrenchMapping,
)
from ortf_ros.pipeline.sync import POLICIES

_T = TypeVar("_T")
_S = TypeVar("_S", bound=str)

_MISSING: Any = object()


_show = bounds.show


class _Map:
    """One YAML mapping of the mapping file: typed getters whose errors name the file and key path."""

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


def _writer(top: _Map) -> tuple[WriterConfig, tuple[str, ...]]:
    value = top.data.get("writer")
    if value is None:
        return WriterConfig(), ()
    if not isinstance(value, Mapping):
        raise top.fail("writer", "a mapping of DatasetWriter settings", value)
    return _writer_section(value, f"{top.source}: writer")


def _writer_section(section: Mapping[str, Any], source: str) -> tuple[WriterConfig, tuple[str, ...]]:
    """The ``writer:`` section parsed, and the settings it gives (``TopicMapping.writer_given``)."""
    try:
        writer = WriterConfig.from_mapping(section, source)
    except OrtfError as exc:
        raise ConversionError(str(exc)) from None
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
    writer, writer_given = _writer(top)
    return TopicMapping(
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
        max_latency_ms=top.number("max_latency_ms", bounds.MAX_LATENCY_MS, TopicMapping.max_latency_ms),
        episodes=_episodes(top.sub("episodes", _EPISODE_KEYS)),
        labels=_labels(top.sub("labels", _LABEL_KEYS)),
        writer=writer,
        writer_given=writer_given,
        laser_scans=scans,
        point_clouds=clouds,
    )


def mapping_from_parameters(parameters: Mapping[str, Any], source: str = "parameters") -> TopicMapping:
    """The mapping from flat ROS parameter names (``cameras.wrist_camera.topic``)."""
    return mapping_from_dict(Fields(parameters, source, Wording(ConversionError)).nested(), source)


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
        raise ConversionError(f"{path}: cannot read the topic mapping ({reason})") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        raise ConversionError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    return mapping_from_dict(data, str(path), relative_to=Path(path).absolute().parent)
