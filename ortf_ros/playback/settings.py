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
from ortf_ros.errors import SettingsError
from ortf_ros.format import fields
from ortf_ros.format.fields import Check, Fields, Wording
from ortf_ros.format.text import read_text
from ortf_ros.qos import DURABILITIES, RELIABILITIES, Durability, QosSettings, Reliability

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

NODE_NAME = "ortf_player"
COMPRESSED_SUFFIX = "/compressed"
"""image_transport's name for a camera's JPEG stream: ``<image topic>/compressed``."""
DEFAULT_ACTION_TOPIC = "/action"
"""The action's topic when ``topics.action`` is empty and the manifest names no topic."""


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
_V = TypeVar("_V")

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


WORDING = Wording(SettingsError, show=repr, label="parameter ", unknown="unknown parameter")
"""How the player's setting errors are worded: ``SOURCE: parameter NAME: ...``."""


def _typed(f: Fields, name: str, value: object) -> ParameterValue:
    """``value`` of the type of ``name``'s default (the parameter's type)."""
    default = PARAMETERS[name]
    if isinstance(default, tuple):
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(value)
    elif type(value) is type(default):
        return cast("ParameterValue", value)
    if isinstance(default, float) and type(value) is int:
        raise f.fail(name, "a double (write it with a decimal point)", value)
    raise f.fail(name, f"a {type_name(default)}", value)


def _as(kind: type[_V]) -> Check[_V]:
    """A value ``_typed`` has checked, as the type it is."""
    return lambda f, name, value: cast("_V", value)


def _topic(kind: StreamKind) -> Check[str]:
    """A topic name or, for per-sensor kinds, a pattern with ``{name}``; "" for the action
    (its topic is then the manifest's)."""

    def check(f: Fields, name: str, value: object) -> str:
        value = fields.string(f, name, value)
        if kind == "action" and value == "":
            return value  # derived from the manifest
        fields.topic_name(f, name, value)
        if kind in PER_SENSOR_KINDS and "{name}" not in value:
            raise f.fail(name, "a pattern with {name} (one topic per sensor)", value)
        rest = value.replace("{name}", "")
        if "{" in rest or "}" in rest:
            raise f.fail(name, "no braces but {name}", value)
        return value

    return check


def settings_from_parameters(values: Mapping[str, object], source: str) -> PlayerSettings:
    """Settings from parameter values (missing ones take their defaults); ``source`` names
    where they came from in errors. Unknown names are errors: a typo would otherwise be
    silently ignored."""
    v = Fields(values, source, WORDING, keys=PARAMETERS)

    def get(name: str, then: Check[_V]) -> _V:
        """Parameter ``name``, of its default's type, then checked by ``then``."""
        return v.get(name, fields.chain(_typed, then), cast("_V", PARAMETERS[name]))

    streams = tuple(fields.one_of(STREAM_KINDS)(v, "streams", kind) for kind in get("streams", _as(tuple)))
    rate = get("rate", fields.bounded(bounds.PLAYBACK_RATE))
    start_offset = get("start_offset", fields.bounded(bounds.START_OFFSET_S))
    qos = {
        kind: QosSettings(
            get(f"qos.{kind}.depth", fields.bounded_int(bounds.QOS_DEPTH)),
            get(f"qos.{kind}.reliability", fields.one_of(RELIABILITIES)),
            get(f"qos.{kind}.durability", fields.one_of(DURABILITIES)),
        )
        for kind in STREAM_KINDS
    }
    messages = MessageSettings(
        topics={kind: get(f"topics.{kind}", _topic(kind)) for kind in STREAM_KINDS},
        streams=frozenset(streams),
        image_format=get("image_format", fields.one_of(IMAGE_FORMATS)),
        qos=qos,
    )
    return PlayerSettings(
        dataset=get("dataset", _as(str)),
        episodes=get("episodes", _as(tuple)),
        rate=rate,
        loop=get("loop", _as(bool)),
        start_offset=start_offset,
        stamps=get("stamps", fields.one_of(STAMP_MODES)),
        publish_clock=get("publish_clock", _as(bool)),
        lookahead_frames=get("lookahead_frames", fields.bounded_int(bounds.LOOKAHEAD_FRAMES)),
        start_paused=get("start_paused", _as(bool)),
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
