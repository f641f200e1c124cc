"""The player's settings: one table of parameters for the node, ``config/playback.yaml``
and ``ortf export mcap --config``.

Every setting has a dotted name (``topics.joint_states``, ``qos.wrench.depth``) and a
default whose Python type is its ROS parameter type (str, float, bool, int, or a tuple
of strings for a string array). ``settings_from_parameters`` checks a mapping of such
names to values, however it was obtained (rclpy parameters, or a YAML parameter file
read by ``read_parameter_file``), and names the file and parameter in every error.

Topic names of per-sensor streams are patterns: ``{name}`` is replaced by the camera's
observation key or the force-torque sensor's name. The default names are the ones
``ortf-bag2ortf`` detects by itself, so a recording of the player converts back
without a mapping (``ortf_ros.playback.replay`` writes one that leaves nothing to
guessing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar, cast, get_args

import yaml

from ortf_ros import bounds
from ortf_ros.bounds import Bound
from ortf_ros.errors import OrtfError
from ortf_ros.io.text import read_text

StreamKind = Literal[
    "joint_states",
    "wrench",
    "image",
    "depth",
    "camera_info",
    "tf",
    "tf_static",
    "robot_description",
    "action",
    "task",
    "episode",
    "audio",
    "laser_scan",
    "point_cloud",
]
STREAM_KINDS: tuple[StreamKind, ...] = get_args(StreamKind)
PER_SENSOR_KINDS: frozenset[StreamKind] = frozenset(
    {"wrench", "image", "depth", "camera_info", "audio", "laser_scan", "point_cloud"}
)
"""Kinds with one topic per camera or sensor: their topic names hold ``{name}``."""

ImageFormat = Literal["raw", "jpeg"]
IMAGE_FORMATS: tuple[ImageFormat, ...] = get_args(ImageFormat)
StampMode = Literal["now", "sim"]
STAMP_MODES: tuple[StampMode, ...] = get_args(StampMode)
Reliability = Literal["reliable", "best_effort"]
RELIABILITIES: tuple[Reliability, ...] = get_args(Reliability)
Durability = Literal["volatile", "transient_local"]
DURABILITIES: tuple[Durability, ...] = get_args(Durability)

NODE_NAME = "ortf_player"
COMPRESSED_SUFFIX = "/compressed"
"""image_transport's name for a camera's JPEG stream: ``<image topic>/compressed``."""
DEFAULT_ACTION_TOPIC = "/action"
"""The action's topic when ``topics.action`` is empty and the manifest names no topic."""


class SettingsError(OrtfError):
    """A player setting has the wrong type or value (names the file or node and the parameter)."""


@dataclass(frozen=True)
class QosSettings:
    depth: int
    reliability: Reliability
    durability: Durability


@dataclass(frozen=True)
class MessageSettings:
    """What is published, on which topics, with which QoS: shared by the node and the MCAP export."""

    topics: Mapping[StreamKind, str]
    streams: frozenset[StreamKind]
    image_format: ImageFormat
    qos: Mapping[StreamKind, QosSettings]

    def topic(self, kind: StreamKind, name: str = "") -> str:
        """The topic of a stream kind; ``name`` fills the ``{name}`` of per-sensor kinds."""
        return self.topics[kind].replace("{name}", name)


@dataclass(frozen=True)
class PlayerSettings:
    dataset: str
    episodes: tuple[str, ...]
    rate: float
    loop: bool
    start_offset: float
    stamps: StampMode
    publish_clock: bool
    lookahead_frames: int
    start_paused: bool
    messages: MessageSettings


ParameterValue = str | float | bool | int | tuple[str, ...]
_C = TypeVar("_C", bound=str)

_TOPICS: dict[StreamKind, str] = {
    "joint_states": "/joint_states",
    "wrench": "/{name}/wrench",
    "image": "/{name}/image_raw",
    "depth": "/{name}/image_raw",
    "camera_info": "/{name}/camera_info",
    "tf": "/tf",
    "tf_static": "/tf_static",
    "robot_description": "/robot_description",
    "action": "",
    "task": "/ortf/task",
    "episode": "/ortf/episode",
    "audio": "/{name}/audio",
    "laser_scan": "/{name}/scan",
    "point_cloud": "/{name}/points",
}
# Reliable everywhere, so a recorder gets every message (a best-effort subscriber still
# matches a reliable publisher); latched state is transient-local, as ROS publishes it.
_QOS: dict[StreamKind, tuple[int, Reliability, Durability]] = {
    "joint_states": (100, "reliable", "volatile"),
    "wrench": (1000, "reliable", "volatile"),
    "image": (10, "reliable", "volatile"),
    "depth": (10, "reliable", "volatile"),
    "camera_info": (10, "reliable", "volatile"),
    "tf": (100, "reliable", "volatile"),
    "tf_static": (1, "reliable", "transient_local"),
    "robot_description": (1, "reliable", "transient_local"),
    "action": (100, "reliable", "volatile"),
    "task": (1, "reliable", "transient_local"),
    "episode": (10, "reliable", "volatile"),
    "audio": (100, "reliable", "volatile"),
    "laser_scan": (10, "reliable", "volatile"),
    "point_cloud": (10, "reliable", "volatile"),
}

PARAMETERS: dict[str, ParameterValue] = {
    "dataset": "",
    "episodes": (),
    "rate": 1.0,
    "loop": False,
    "start_offset": 0.0,
    "stamps": "now",
    "publish_clock": False,
    "lookahead_frames": 30,
    "start_paused": False,
    "image_format": "raw",
    "streams": STREAM_KINDS,
    **{f"topics.{kind}": topic for kind, topic in _TOPICS.items()},
    **{
        f"qos.{kind}.{key}": value
        for kind, (depth, reliability, durability) in _QOS.items()
        for key, value in (("depth", depth), ("reliability", reliability), ("durability", durability))
    },
}
"""Every parameter and its default; the default's type is the parameter's type."""


def type_name(value: ParameterValue) -> str:
    """The ROS name of a parameter's type, for messages and the node's declarations."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    return "string array"


class _Values:
    """Parameter values checked against their defaults' types; errors name ``source`` and the parameter."""

    def __init__(self, values: Mapping[str, object], source: str) -> None:
        for name in values:
            if name not in PARAMETERS:
                raise SettingsError(f"{source}: unknown parameter {name!r}")
        self.values = values
        self.source = source

    def fail(self, name: str, expected: str, value: object) -> SettingsError:
        return SettingsError(f"{self.source}: parameter {name}: expected {expected}, got {value!r}")

    def _get(self, name: str) -> ParameterValue:
        default = PARAMETERS[name]
        value = self.values.get(name, default)
        if isinstance(default, tuple):
            if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                return tuple(value)
        elif type(value) is type(default):
            return cast("ParameterValue", value)
        if isinstance(default, float) and type(value) is int:
            raise self.fail(name, "a double (write it with a decimal point)", value)
        raise self.fail(name, f"a {type_name(default)}", value)

    def string(self, name: str) -> str:
        return cast("str", self._get(name))

    def number(self, name: str, bound: Bound) -> float:
        value = cast("float", self._get(name))
        problem = bound.problem(value)
        if problem is not None:
            raise SettingsError(f"{self.source}: parameter {name}: {problem}")
        return value

    def integer(self, name: str, bound: Bound) -> int:
        return int(self.number(name, bound))

    def flag(self, name: str) -> bool:
        return cast("bool", self._get(name))

    def strings(self, name: str) -> tuple[str, ...]:
        return cast("tuple[str, ...]", self._get(name))

    def choice(self, name: str, choices: tuple[_C, ...], value: str | None = None) -> _C:
        value = self.string(name) if value is None else value
        if value not in choices:
            raise self.fail(name, f"one of {', '.join(choices)}", value)
        return value

    def topic(self, kind: StreamKind) -> str:
        name = f"topics.{kind}"
        value = self.string(name)
        if kind == "action" and value == "":
            return value  # derived from the manifest
        if not value.startswith("/") or value == "/" or any(c.isspace() for c in value):
            raise self.fail(name, "a topic name starting with '/'", value)
        if kind in PER_SENSOR_KINDS and "{name}" not in value:
            raise self.fail(name, "a pattern with {name} (one topic per sensor)", value)
        rest = value.replace("{name}", "")
        if "{" in rest or "}" in rest:
            raise self.fail(name, "no braces but {name}", value)
        return value


def settings_from_parameters(values: Mapping[str, object], source: str) -> PlayerSettings:
    """Settings from parameter values (missing ones take their defaults); ``source`` names
    where they came from in errors. Unknown names are errors: a typo would otherwise be
    silently ignored."""
    v = _Values(values, source)
    streams = tuple(v.choice("streams", STREAM_KINDS, kind) for kind in v.strings("streams"))
    rate = v.number("rate", bounds.PLAYBACK_RATE)
    start_offset = v.number("start_offset", bounds.START_OFFSET_S)
    qos = {
        kind: QosSettings(
            v.integer(f"qos.{kind}.depth", bounds.QOS_DEPTH),
            v.choice(f"qos.{kind}.reliability", RELIABILITIES),
            v.choice(f"qos.{kind}.durability", DURABILITIES),
        )
        for kind in STREAM_KINDS
    }
    messages = MessageSettings(
        topics={kind: v.topic(kind) for kind in STREAM_KINDS},
        streams=frozenset(streams),
        image_format=v.choice("image_format", IMAGE_FORMATS),
        qos=qos,
    )
    return PlayerSettings(
        dataset=v.string("dataset"),
        episodes=v.strings("episodes"),
        rate=rate,
        loop=v.flag("loop"),
        start_offset=start_offset,
        stamps=v.choice("stamps", STAMP_MODES),
        publish_clock=v.flag("publish_clock"),
        lookahead_frames=v.integer("lookahead_frames", bounds.LOOKAHEAD_FRAMES),
        start_paused=v.flag("start_paused"),
        messages=messages,
    )


def default_settings() -> PlayerSettings:
    return settings_from_parameters({}, "defaults")


def _flatten(data: Mapping[str, object], prefix: str, out: dict[str, object]) -> None:
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            _flatten(value, f"{name}.", out)
        else:
            out[name] = value


def read_parameter_file(path: str | Path) -> dict[str, object]:
    """The player's parameters in a ROS 2 parameter file, dotted: the ``ros__parameters`` of
    ``/**`` and then of ``ortf_player`` (any namespace), the node's own winning, as ROS merges them."""
    try:
        data = yaml.safe_load(read_text(path))
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise SettingsError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, Mapping):
        raise SettingsError(f"{path}: expected a mapping of node names to ros__parameters")
    values: dict[str, object] = {}
    found = False
    for node in sorted(data, key=lambda key: key != "/**"):
        if node == "/**" or str(node).rstrip("/").rsplit("/", 1)[-1] == NODE_NAME:
            params = data[node].get("ros__parameters") if isinstance(data[node], Mapping) else None
            if not isinstance(params, Mapping):
                raise SettingsError(f"{path}: {node}: expected a ros__parameters mapping")
            _flatten(params, "", values)
            found = True
    if not found:
        raise SettingsError(f"{path}: no parameters for {NODE_NAME} (expected '{NODE_NAME}:' or '/**:')")
    return values
