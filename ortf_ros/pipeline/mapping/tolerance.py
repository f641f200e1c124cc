"""The sync tolerances a dataset declares: how far from its step each stream's sample may be.

Each stream a step samples gets its own: the ``sync_tolerance_ms`` its mapping entry
gives, else the mapping's global ``sync_tolerance_ms``, else what the stream can keep by
its own rate and policy, at least half the step period. The dataset's ``sync_tolerance_ms``
(the spec's: one number for every modality) is the loosest of them; each stream's own is
what its steps are counted, validated and bounded by (``format.native_streams.Alignment``).
One number for all would let the loosest stream set the bar for every other: a 10 Hz lidar
allows 62.5 ms, and a 30 Hz camera two frames off its step would pass unseen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ortf_ros.pipeline.mapping.model import TopicMapping
from ortf_ros.pipeline.sync import Policy

JITTER_MARGIN = 1.25
"""Room over a stream's nominal reach for the jitter of its stamps."""


@dataclass(frozen=True)
class SyncTolerance:
    """The sync tolerance a dataset declares (``ms``: the loosest stream's) and in words
    what set it; ``streams``: each sampled stream's own, by stream name."""

    ms: float
    set_by: str
    streams: Mapping[str, float] = field(default_factory=dict)

    def tighter(self) -> dict[str, float]:
        """The streams whose own tolerance is tighter than the dataset's."""
        return {name: ms for name, ms in self.streams.items() if ms < self.ms}

    def line(self) -> str:
        """In words, for a summary: the dataset's, and each stream's where it differs."""
        text = f"sync tolerance {self.ms:g} ms ({self.set_by})"
        tighter = self.tighter()
        if tighter:
            text += "; per stream: " + ", ".join(f"{name} {ms:g} ms" for name, ms in tighter.items())
        return text


@dataclass(frozen=True)
class _Sampled:
    """A stream a step samples, as the tolerance rule sees it."""

    name: str  # the dataset's stream name (alignment column, sampler)
    what: str  # in words: "camera wrist_camera"
    topic: str
    policy: Policy
    own_ms: float | None  # its mapping entry's sync_tolerance_ms


def _sampled_streams(mapping: TopicMapping) -> list[_Sampled]:
    """Every stream a step samples, in the order steps ask them (``Routes.samplers``)."""
    streams: list[_Sampled] = []
    if mapping.joint_states is not None:
        j = mapping.joint_states
        streams.append(_Sampled("joint_states", "joint states", j.topic, j.policy, j.sync_tolerance_ms))
    streams += [
        _Sampled(w.name, f"force-torque {w.name}", w.topic, w.policy, w.sync_tolerance_ms) for w in mapping.wrenches
    ]
    streams += [
        _Sampled(s.name, f"laser scan {s.name}", s.topic, s.policy, s.sync_tolerance_ms) for s in mapping.laser_scans
    ]
    streams += [_Sampled(c.name, f"camera {c.name}", c.topic, c.policy, c.sync_tolerance_ms) for c in mapping.cameras]
    a = mapping.action
    if a.topic is not None:
        streams.append(_Sampled("action", "action", a.topic, a.policy, a.sync_tolerance_ms))
    return streams


def stream_tolerances_given(mapping: TopicMapping) -> dict[str, float]:
    """The sampled streams whose mapping entry gives their own ``sync_tolerance_ms``."""
    return {s.name: s.own_ms for s in _sampled_streams(mapping) if s.own_ms is not None}


def _round_up(ms: float) -> float:
    return math.ceil(ms * 10) / 10


def sync_tolerance(mapping: TopicMapping, rates: Mapping[str, float]) -> SyncTolerance:
    """Each sampled stream's tolerance (``rates``: topic -> Hz) and the loosest of them.

    A stream's own: its mapping entry's ``sync_tolerance_ms``, else the mapping's, else
    the distance it can keep from its step by its own rate and policy: ``latest`` up to
    one period of the stream, ``nearest`` and ``linear`` half of one, with
    ``JITTER_MARGIN``; at least half the step period. A 50 Hz command sampled ``latest``
    is up to 20 ms from a 30 Hz step by nature, a 15 Hz camera up to 33 ms: half the step
    period (16.7 ms) would declare every such dataset out of sync. The camera that drives
    the steps is at 0 from them, and gets half the step period. The dataset's tolerance
    (and the end effector's, looked up in TF) is the loosest of these and of the mapping's
    ``sync_tolerance_ms`` (without one, half the step period)."""
    step_camera = mapping.camera(mapping.step.camera) if mapping.step.camera else None
    step_hz = mapping.step.rate_hz or (rates.get(step_camera.topic, 0.0) if step_camera else 0.0) or 30.0
    half = f"half the {step_hz:g} Hz step period"
    if mapping.sync_tolerance_ms is not None:
        default = (mapping.sync_tolerance_ms, "the mapping's sync_tolerance_ms")
    else:
        default = (_round_up(500.0 / step_hz), half)
    loosest = default
    own: dict[str, float] = {}
    for stream in _sampled_streams(mapping):
        if stream.own_ms is not None:
            ms, set_by = stream.own_ms, f"the mapping's sync_tolerance_ms of {stream.what}"
        elif mapping.sync_tolerance_ms is not None or (step_camera is not None and stream.name == step_camera.name):
            ms, set_by = default
        else:
            ms, set_by = _by_rate(stream, rates.get(stream.topic), step_hz) or default
        own[stream.name] = ms
        if ms > loosest[0]:
            loosest = (ms, set_by)
    return SyncTolerance(loosest[0], loosest[1], own)


def _by_rate(stream: _Sampled, rate_hz: float | None, step_hz: float) -> tuple[float, str] | None:
    """What ``stream`` can keep by its rate and policy, when that is more than half the
    step period (None: not, or its rate is not known)."""
    if not rate_hz:
        return None
    hz = max(1, round(rate_hz))  # a nominal rate: the same for every recording of a setup
    reach = (1000.0 / hz) * (1.0 if stream.policy == "latest" else 0.5) * JITTER_MARGIN
    if reach <= 500.0 / step_hz:
        return None
    return _round_up(reach), f"set by {stream.what}: {stream.topic} at {hz} Hz, {stream.policy}"
