"""A mapping in words, one line per item (``ortf-bag2ortf --list``, the live recorder's log):
what each stream is read from, with which time and policy, and what is derived.
"""

from __future__ import annotations

from collections.abc import Mapping

from ortf_ros.pipeline.decode import canonical_msgtype
from ortf_ros.pipeline.mapping.model import CameraMapping, ClockOffset, TimeSource, TopicMapping
from ortf_ros.pipeline.mapping.tolerance import stream_tolerances_given, sync_tolerance
from ortf_ros.pipeline.samples import CONTROLLER_STATE_TYPE
from ortf_ros.pipeline.sync import Policy


def _clock(time: TimeSource, offset: ClockOffset) -> str:
    """The stream's time, and how it is put on the other streams' clock if it is."""
    if offset == "auto":
        return f"{time} time, its clock offset measured and taken out"
    if offset is not None:
        return f"{time} time {offset:+g} ms"
    return f"{time} time"


def _timing(time: TimeSource, policy: Policy, offset: ClockOffset = None) -> str:
    return f"{_clock(time, offset)}, {policy}"


def _intrinsics(camera: CameraMapping) -> str:
    """Where a camera's intrinsics will come from, in the order they are tried."""
    fallback = f"intrinsics from {camera.camera_info_url}" if camera.camera_info_url else "intrinsics unknown"
    if camera.camera_info_topic:
        return f"camera_info {camera.camera_info_topic}, without it {fallback}"
    return f"no camera_info: {fallback}"


def describe_mapping(
    mapping: TopicMapping, rates: Mapping[str, float] | None, types: Mapping[str, str] | None = None
) -> list[str]:
    """What the mapping does, one line per item, for ``ortf-bag2ortf --list``; ``rates``
    (topic -> Hz) decide the sync tolerance when the mapping does not (None: not known
    yet, as for a live recorder before its warm-up); ``types`` (topic -> message type, any
    spelling) say what a controller state topic gives."""
    controllers = {t for t, msgtype in (types or {}).items() if canonical_msgtype(msgtype) == CONTROLLER_STATE_TYPE}
    lines = []
    if mapping.step.camera is not None:
        lines.append(f"steps: at each frame of camera {mapping.step.camera}")
    else:
        lines.append(f"steps: {mapping.step.rate_hz:g} Hz control rate")
    beyond = "dropped" if mapping.drop_outside_tolerance else "kept and counted"
    if rates is None and mapping.sync_tolerance_ms is None:
        tolerance = "sync tolerance from the streams' rates, once measured (at least half the step period)"
        given = stream_tolerances_given(mapping)
        if given:
            tolerance += "; the mapping's per stream: " + ", ".join(f"{n} {ms:g} ms" for n, ms in given.items())
    else:
        tolerance = sync_tolerance(mapping, rates or {}).line()
    lines.append(f"{tolerance}; steps beyond it are {beyond}")
    lines.append(f"max latency: {mapping.max_latency_ms:g} ms from a stamp to its recording")
    for c in mapping.cameras:
        lines.append(
            f"camera {c.name} ({c.kind}): {c.topic} ({_timing(c.time, c.policy, c.clock_offset_ms)}, {_intrinsics(c)})"
        )
    if not mapping.cameras:
        lines.append("cameras: none")
    if mapping.joint_states is not None:
        j = mapping.joint_states
        native = ", every message kept at its native rate" if j.native else ""
        fields = ", the controller state's feedback (else actual)" if j.topic in controllers else ""
        lines.append(f"joint state: {j.topic} ({_timing(j.time, j.policy, j.clock_offset_ms)}{fields}{native})")
    else:
        lines.append("joint state: none")
    for mic in mapping.audio:
        info = f", format from {mic.info_topic}" if mic.info_topic else ""
        lines.append(
            f"audio {mic.name}: {mic.topic} ({_clock(mic.time, mic.clock_offset_ms)}, every sample kept, "
            f"{mic.codec} file{info})"
        )
    for w in mapping.wrenches:
        frame = f"frame {w.frame}" if w.frame else "frame from the header"
        native = ", every message kept at its native rate" if w.native else ""
        lines.append(
            f"force-torque {w.name}: {w.topic} ({_timing(w.time, w.policy, w.clock_offset_ms)}, {frame}{native})"
        )
    for s in mapping.laser_scans:
        lines.append(
            f"laser scan {s.name}: {s.topic} ({_timing(s.time, s.policy, s.clock_offset_ms)}, "
            "every scan kept at its native rate)"
        )
    for p in mapping.point_clouds:
        lines.append(
            f"point cloud {p.name}: {p.topic} ({_clock(p.time, p.clock_offset_ms)}, "
            "every cloud kept in the episode's cloud file)"
        )
    a = mapping.action
    if a.topic in controllers:
        lines.append(
            f"action: {a.topic} ({_timing(a.time, a.policy, a.clock_offset_ms)}, "
            "the controller's reference (else desired): "
            "declared so in the manifest)"
        )
    elif a.topic is not None:
        lines.append(f"action: {a.topic} ({_timing(a.time, a.policy, a.clock_offset_ms)})")
    else:
        lines.append("action: none recorded; the next step's joint positions (declared so in the manifest)")
    if mapping.detections is not None:
        d = mapping.detections
        lines.append(f"detections: {d.topic} (boxes in camera {d.camera}'s first frame -> scene_objects.json)")
    lines.append(
        f"tf: {', '.join(mapping.tf_topics) or 'none'}; static: {', '.join(mapping.tf_static_topics) or 'none'}"
    )
    lines.append(f"robot description: {mapping.robot_description_topic}")
    frames = [
        f"{what} {value or 'auto'}"
        for what, value in (
            ("base", mapping.base_frame),
            ("end effector", mapping.end_effector_frame),
            ("world", mapping.world_frame),
        )
    ]
    lines.append(f"frames: {', '.join(frames)}")
    grippers = (
        ", ".join(mapping.gripper_joints) if mapping.gripper_joints else "auto (URDF joints named finger/gripper)"
    )
    lines.append(f"gripper joints: {grippers}")
    e = mapping.episodes
    if e.mode == "input":
        lines.append("episodes: one per input")
    elif e.mode == "topic":
        lines.append(f"episodes: split at messages on {e.topic}")
    elif e.mode == "gap":
        lines.append(f"episodes: split at gaps of {e.gap_s:g} s or more")
    else:
        lines.append("episodes: " + ", ".join(f"{s:g}-{t:g} s" for s, t in e.ranges))
    labels = mapping.labels
    task = f"from {labels.task_topic} (default {labels.task!r})" if labels.task_topic else repr(labels.task)
    outcome = "unknown" if labels.success is None else "success" if labels.success else "failure"
    if labels.failure_reason:
        outcome += f" ({labels.failure_reason})"
    lines.append(f"task: {task}; outcome: {outcome}")
    writer = mapping.writer_settings()
    if writer:
        lines.append(f"writer: {writer}")
    return lines
