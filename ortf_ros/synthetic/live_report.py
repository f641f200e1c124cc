"""What the live scene published, and when: the report ``ortf_scene_publisher --report``
writes and the line it prints at exit.

Per topic: the type, the number of messages published, the first/last seq and header
stamp and the wall time (ns) of the first/last publication; and the publish timing:
lateness (publication minus scheduled time) p50/p99/max, overall and per topic. The
tests and the live benchmark (``bench/bench_live.py``) read the lateness from the report,
so it is measured here, in the publishing process, in histograms of constant memory
(the scene may run for days).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ortf_ros.synthetic.scene import TeleopConfig
from ortf_ros.synthetic.schedule import Event

HISTOGRAM_BIN_NS = 10_000  # lateness histograms: 10 us bins ...
HISTOGRAM_BINS = 10_000  # ... up to 100 ms (later ones count in the last bin; the max is exact)


class Histogram:
    """Durations in 10 us bins up to 100 ms, for percentiles in constant memory."""

    def __init__(self) -> None:
        self.bins = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
        self.count = 0
        self.max_ns = 0

    def add(self, ns: int) -> None:
        ns = max(ns, 0)
        self.bins[min(ns // HISTOGRAM_BIN_NS, HISTOGRAM_BINS - 1)] += 1
        self.count += 1
        self.max_ns = max(self.max_ns, ns)

    def percentile_ms(self, q: float) -> float | None:
        """The upper edge of the bin holding the ``q`` quantile (at most the max), in ms."""
        if not self.count:
            return None
        index = int(np.searchsorted(np.cumsum(self.bins), q * self.count))
        return min((index + 1) * HISTOGRAM_BIN_NS, self.max_ns) / 1e6

    def summary(self) -> dict[str, float | None]:
        return {
            "p50": self.percentile_ms(0.5),
            "p99": self.percentile_ms(0.99),
            "max": self.max_ns / 1e6 if self.count else None,
        }

    def over(self, ns: int) -> int:
        """How many took ``ns`` or more (to the bin)."""
        return int(self.bins[ns // HISTOGRAM_BIN_NS :].sum())


@dataclass
class TopicTally:
    """One topic's messages published: how many, the first and the last, their lateness."""

    msgtype: str
    published: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    first_stamp_ns: int | None = None
    last_stamp_ns: int | None = None
    first_wall_ns: int | None = None
    last_wall_ns: int | None = None
    lateness: Histogram = field(default_factory=Histogram)

    def add(self, event: Event, wall_ns: int, lateness_ns: int) -> None:
        if not self.published:
            self.first_seq, self.first_stamp_ns, self.first_wall_ns = event.seq, event.stamp_ns, wall_ns
        self.published += 1
        self.last_seq, self.last_stamp_ns, self.last_wall_ns = event.seq, event.stamp_ns, wall_ns
        self.lateness.add(lateness_ns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "msgtype": self.msgtype,
            "published": self.published,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "first_stamp_ns": self.first_stamp_ns,
            "last_stamp_ns": self.last_stamp_ns,
            "first_wall_ns": self.first_wall_ns,
            "last_wall_ns": self.last_wall_ns,
            "lateness_ms": self.lateness.summary(),
        }


class LiveReport:
    """One run of the live scene: the tallies per topic, the lateness overall and how long
    each publish call took, and the run's clock (set by ``live.play``)."""

    def __init__(self, msgtypes: Mapping[str, str]) -> None:
        self.tallies = {topic: TopicTally(msgtype) for topic, msgtype in msgtypes.items()}
        self.lateness = Histogram()
        self.publish_call = Histogram()
        self.start_ns: int | None = None  # the header stamp of t = 0
        self.t0_wall_ns: int | None = None  # the wall time of t = 0
        self.end_wall_ns: int | None = None
        self.elapsed_ns = 0
        self.interrupted = False

    def add(self, event: Event, wall_ns: int, lateness_ns: int, call_ns: int) -> None:
        """Message ``event``, published at ``wall_ns``, ``lateness_ns`` after its time, the
        publish call taking ``call_ns``."""
        self.tallies[event.topic].add(event, wall_ns, lateness_ns)
        self.lateness.add(lateness_ns)
        self.publish_call.add(call_ns)

    def to_dict(self, node: str, config: TeleopConfig, *, endless: bool, depth: int) -> dict[str, Any]:
        """The JSON report of ``node``, which played ``config`` with QoS depth ``depth``."""
        c = config
        return {
            "node": node,
            "start_ns": self.start_ns,
            "t0_wall_ns": self.t0_wall_ns,
            "end_wall_ns": self.end_wall_ns,
            "duration_s": None if endless else c.duration_s,
            "elapsed_s": self.elapsed_ns / 1e9,
            "interrupted": self.interrupted,
            "config": {
                "width": c.width,
                "height": c.height,
                "fps": c.fps,
                "joint_rate_hz": c.joint_rate_hz,
                "command_rate_hz": c.command_rate_hz,
                "wrench_rate_hz": c.wrench_rate_hz,
                "tf_rate_hz": c.tf_rate_hz,
                "with_depth": c.with_depth,
                "side_camera": c.side_camera,
                "lidar": c.lidar,
                "compressed_cameras": list(c.compressed_cameras),
                "h264_cameras": list(c.h264_cameras),
                "depth": depth,
            },
            "topics": {topic: tally.to_dict() for topic, tally in self.tallies.items()},
            "timing": {
                "published": self.lateness.count,
                "lateness_ms": self.lateness.summary(),
                "late_over_1ms": self.lateness.over(1_000_000),
                "late_over_10ms": self.lateness.over(10_000_000),
                "publish_call_ms": self.publish_call.summary(),
            },
        }

    def summary_line(self, node: str) -> str:
        lateness = self.lateness.summary()
        timing = (
            f"lateness p50 {lateness['p50']:.3f} ms, p99 {lateness['p99']:.3f} ms, max {lateness['max']:.3f} ms"
            if self.lateness.count
            else "nothing published"
        )
        topics = sum(1 for t in self.tallies.values() if t.published)
        return (
            f"{node}: published {self.lateness.count} messages on {topics} topics "
            f"in {self.elapsed_ns / 1e9:.1f} s; {timing}"
        )
