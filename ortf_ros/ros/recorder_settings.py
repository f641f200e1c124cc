"""The recorder's parameters: its own typed settings, and the topic mapping.

The mapping is the one ``ortf-bag2ortf --write-config`` writes, so one file serves a
conversion and a recording. It comes from the ``mapping`` parameter (a file), and any
of its keys may also be given as parameters (``cameras.wrist.topic``,
``writer.video.crf``...), which override the file's. With neither, the mapping is
detected from the live graph, by types and names, as ``ortf-bag2ortf`` does from a bag.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortf_ros import bounds
from ortf_ros.bounds import Bound
from ortf_ros.errors import OrtfError, SettingsError, UsageError, os_error_line
from ortf_ros.format import fields
from ortf_ros.format.fields import Fields, Wording
from ortf_ros.io import paths
from ortf_ros.pipeline import robot
from ortf_ros.pipeline.decode import canonical_msgtype
from ortf_ros.pipeline.mapping import (
    TopicMapping,
    detect_mapping,
    load_mapping,
    mapping_from_dict,
    mapping_to_dict,
)
from ortf_ros.pipeline.samples import CONTROLLER_STATE_TYPE
from ortf_ros.pipeline.sources.bag import TopicInfo
from ortf_ros.pipeline.streams.h264_camera import COMPRESSED_VIDEO_TYPE
from ortf_ros.qos import adapt_to_offers

NODE_NAME = "ortf_recorder"

PARAMETERS: dict[str, object] = {
    "output": "",
    "mapping": "",
    "task": "",
    "urdf": "",
    "warmup_s": 10.0,
    "discovery_s": 3.0,
    "step_rate_hz": 30.0,
    "on_shutdown": "commit",
    "flush_every_ms": 10.0,
    "queue_messages": 1024,
    "queue_frames": 16,
    "status_period_s": 1.0,
    "failure_reason": "",
    "operator_notes": "",
}
"""The recorder's own parameters and their defaults (their types are the parameters'
types); config/record.yaml documents them."""

QOS_NAMESPACE = "qos"
"""``qos.<topic without its leading slash, / as .>.reliability|durability``: per-stream
overrides of the QoS adapted to the publishers (``auto``, or the policy)."""

ON_SHUTDOWN = ("commit", "discard")


@dataclass(frozen=True)
class RecorderParameters:
    output: Path
    mapping_file: Path | None
    task: str | None
    urdf_file: Path | None
    warmup_s: float
    discovery_s: float
    step_rate_hz: float
    commit_on_shutdown: bool
    flush_every_ms: float
    queue_messages: int
    queue_frames: int
    status_period_s: float
    failure_reason: str | None
    operator_notes: str | None


WORDING = Wording(SettingsError, show=repr, label="parameter ")
"""How the recorder's parameter errors are worded: ``parameter NAME: ...``."""


def recorder_parameters(values: Mapping[str, object]) -> RecorderParameters:
    """The recorder's own settings from declared parameter values (every one given, of its
    declared type), checked."""
    given = Fields(values, "", WORDING)

    def text(name: str) -> str:
        return str(values[name]).strip()

    def number(name: str, bound: Bound) -> float:
        return fields.bounded(bound)(given, name, values[name])

    def count(name: str, bound: Bound) -> int:
        return fields.bounded_int(bound)(given, name, values[name])

    if not text("output"):
        raise given.error("output", "required: the dataset directory to record into")

    def path(name: str, check: Callable[[str], Path]) -> Path | None:
        """A path parameter checked now, not when the warm-up ends (or never, without publishers)."""
        if not text(name):
            return None
        try:
            return check(str(Path(text(name)).expanduser()))
        except UsageError as exc:
            raise given.error(name, str(exc)) from None

    output = path("output", lambda word: paths.output_dir(word, "the dataset", existing="an ORTF dataset directory"))
    mapping_file = path("mapping", lambda word: paths.input_file(word, "a topic mapping YAML file"))
    urdf_file = path("urdf", lambda word: paths.input_file(word, "a URDF file"))
    assert output is not None
    on_shutdown = fields.one_of(ON_SHUTDOWN)(given, "on_shutdown", text("on_shutdown"))
    return RecorderParameters(
        output=output,
        mapping_file=mapping_file,
        task=text("task") or None,
        urdf_file=urdf_file,
        warmup_s=number("warmup_s", bounds.WARMUP_S),
        discovery_s=number("discovery_s", bounds.WARMUP_S),
        step_rate_hz=number("step_rate_hz", bounds.STEP_RATE_HZ),
        commit_on_shutdown=on_shutdown == "commit",
        flush_every_ms=number("flush_every_ms", bounds.FLUSH_EVERY_MS),
        queue_messages=count("queue_messages", bounds.QUEUE_MESSAGES),
        queue_frames=count("queue_frames", bounds.QUEUE_FRAMES),
        status_period_s=number("status_period_s", bounds.STATUS_PERIOD_S),
        failure_reason=text("failure_reason") or None,
        operator_notes=text("operator_notes") or None,
    )


def mapping_from(file: Path | None, overrides: Mapping[str, object]) -> TopicMapping | None:
    """The mapping file (if any) with ``overrides`` (flat dotted parameter names) over it;
    None when neither is given (detect the mapping from the graph)."""
    if file is None and not overrides:
        return None
    base = mapping_to_dict(load_mapping(file)) if file is not None else {}
    source = f"{file} with parameters" if file is not None and overrides else str(file or "parameters")
    return mapping_from_dict(_merged(base, Fields(overrides, "", WORDING).nested()), source)


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def qos_overrides(values: Mapping[str, object]) -> dict[str, dict[str, str]]:
    """``qos.camera.image_raw.reliability: best_effort`` -> {"/camera/image_raw": {"reliability": ...}}."""
    given = Fields(values, "", WORDING)
    found: dict[str, dict[str, str]] = {}
    for name, value in values.items():
        parts = name.split(".")
        if len(parts) < 3 or parts[0] != QOS_NAMESPACE or parts[-1] not in ("reliability", "durability"):
            raise given.error(
                name,
                "expected qos.<topic, its / as .>.reliability or .durability, e.g. "
                "qos.wrist_camera.image_raw.reliability",
            )
        topic = "/" + "/".join(parts[1:-1])
        try:  # (checked here, at start-up, not when the topic is subscribed)
            adapt_to_offers([], latched=False, **{parts[-1]: str(value)})
        except ValueError as exc:
            raise given.error(name, str(exc)) from None
        found.setdefault(topic, {})[parts[-1]] = str(value)
    return found


def read_urdf(path: Path) -> str:
    try:
        return robot.read_urdf(path)
    except OSError as exc:
        raise SettingsError(f"parameter urdf: {os_error_line(exc)}") from None
    except OrtfError as exc:
        raise SettingsError(f"parameter urdf: {exc}") from None


OFFLINE_ONLY_TYPES = (CONTROLLER_STATE_TYPE,)
"""Types ``ortf-bag2ortf`` converts that the recorder cannot subscribe to (no
``control_msgs`` Python package beside it): a live mapping never picks them."""


def detected_mapping(topics: Sequence[TopicInfo], step_rate_hz: float, discovery_s: float) -> TopicMapping:
    """The mapping ``ortf-bag2ortf`` would detect from the live graph's ``topics`` (one per
    type a topic has), but for the types only a conversion reads (``OFFLINE_ONLY_TYPES``):
    without a JointState or a camera, one line that says what the graph has instead."""
    live = [t for t in topics if canonical_msgtype(t.msgtype) not in OFFLINE_ONLY_TYPES]
    mapping = detect_mapping(live, step_rate_hz=step_rate_hz)
    if mapping.joint_states is None and not mapping.cameras:
        offline = sorted({t.topic for t in topics} - {t.topic for t in live})
        hint = (
            f" ({', '.join(offline)}: control_msgs/JointTrajectoryControllerState, which only ortf-bag2ortf "
            "converts: record a bag and convert it)"
            if offline
            else ""
        )
        raise SettingsError(
            "no mapping given (parameter mapping) and none detected: no JointState or camera topic in the graph "
            f"after {discovery_s:g} s{hint}"
        )
    return mapping


LIVE_AUDIO_TYPES = ("audio_common_msgs/msg/AudioStamped", "audio_common_msgs/msg/Audio")
"""What a live microphone may publish: the ROS 2 layout, the one installed (``ros/audio_common_msgs``)."""


def mapped_types(config: TopicMapping) -> Sequence[tuple[str, tuple[str, ...]]]:
    """Each mapped topic with the message types it may carry (the pipeline's extractors')."""
    images = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage", COMPRESSED_VIDEO_TYPE)
    actions = (
        "sensor_msgs/msg/JointState",
        "trajectory_msgs/msg/JointTrajectory",
        "std_msgs/msg/Float64MultiArray",
        "geometry_msgs/msg/Twist",
        "geometry_msgs/msg/TwistStamped",
        "geometry_msgs/msg/PoseStamped",
        "std_msgs/msg/Float64",
        "std_msgs/msg/Bool",
    )
    found: list[tuple[str, tuple[str, ...]]] = []
    for camera in config.cameras:
        found.append((camera.topic, images))
        if camera.camera_info_topic:
            found.append((camera.camera_info_topic, ("sensor_msgs/msg/CameraInfo",)))
    if config.joint_states is not None:
        found.append((config.joint_states.topic, ("sensor_msgs/msg/JointState",)))
    found += [(w.topic, ("geometry_msgs/msg/WrenchStamped",)) for w in config.wrenches]
    found += [(a.topic, LIVE_AUDIO_TYPES) for a in config.audio]  # (the older layout is read from bags only)
    found += [(s.topic, ("sensor_msgs/msg/LaserScan",)) for s in config.laser_scans]
    found += [(p.topic, ("sensor_msgs/msg/PointCloud2",)) for p in config.point_clouds]
    if config.action.topic is not None:
        found.append((config.action.topic, actions))
    if config.detections is not None:
        found.append((config.detections.topic, ("vision_msgs/msg/Detection2DArray",)))
    found += [(t, ("tf2_msgs/msg/TFMessage",)) for t in (*config.tf_topics, *config.tf_static_topics)]
    found.append((config.robot_description_topic, ("std_msgs/msg/String",)))
    return found
