"""The sync tolerance a dataset declares: how far from its step a sample may be.

The mapping's ``sync_tolerance_ms`` when it gives one; otherwise what the mapped streams
can keep by their own rates and policies, at least half the step period, with what set it
in words for the summary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ortf_ros.pipeline.mapping.model import TopicMapping
from ortf_ros.pipeline.sync import Policy

JITTER_MARGIN = 1.25
"""Room over a stream's nominal reach for the jitter of its stamps."""


@dataclass(frozen=True)
class SyncTolerance:
    """The sync tolerance a dataset declares, and in words what set it."""

    ms: float
    set_by: str

    def line(self) -> str:
        return f"sync tolerance {self.ms:g} ms ({self.set_by})"


def sync_tolerance(mapping: TopicMapping, rates: Mapping[str, float]) -> SyncTolerance:
    """The mapping's ``sync_tolerance_ms``, or the distance every mapped stream can keep
    from its step by its own rate (``rates``: topic -> Hz) and policy: ``latest`` up to
    one period of the stream, ``nearest`` and ``linear`` half of one, with
    ``JITTER_MARGIN``; at least half the step period. A 50 Hz command sampled ``latest``
    is up to 20 ms from a 30 Hz step by nature, a 15 Hz camera up to 33 ms: half the step
    period (16.7 ms) would declare every such dataset out of sync."""
    if mapping.sync_tolerance_ms is not None:
        return SyncTolerance(mapping.sync_tolerance_ms, "the mapping's sync_tolerance_ms")
    step_camera = mapping.camera(mapping.step.camera) if mapping.step.camera else None
    step_hz = mapping.step.rate_hz or (rates.get(step_camera.topic, 0.0) if step_camera else 0.0) or 30.0
    best = SyncTolerance(500.0 / step_hz, f"half the {step_hz:g} Hz step period")
    streams: list[tuple[str, str, Policy]] = []
    if mapping.joint_states is not None:
        streams.append(("joint states", mapping.joint_states.topic, mapping.joint_states.policy))
    streams += [(f"force-torque {w.name}", w.topic, w.policy) for w in mapping.wrenches]
    streams += [(f"laser scan {s.name}", s.topic, s.policy) for s in mapping.laser_scans]
    streams += [(f"camera {c.name}", c.topic, c.policy) for c in mapping.cameras if c is not step_camera]
    if mapping.action.topic is not None:
        streams.append(("action", mapping.action.topic, mapping.action.policy))
    for what, topic, policy in streams:
        if not rates.get(topic):
            continue
        hz = max(1, round(rates[topic]))  # a nominal rate: the same for every recording of a setup
        reach = (1000.0 / hz) * (1.0 if policy == "latest" else 0.5) * JITTER_MARGIN
        if reach > best.ms:
            best = SyncTolerance(reach, f"set by {what}: {topic} at {hz} Hz, {policy}")
    return SyncTolerance(math.ceil(best.ms * 10) / 10, best.set_by)
