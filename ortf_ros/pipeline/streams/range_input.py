"""The assembler's side of laser scans and point clouds: which scans and clouds are taken,
and which are counted as undecodable because their layout is not the one the manifest
declares (``pipeline.streams.range_manifest``, from each topic's first message).

A scan's ranges and intensities are fixed-size columns of its native-rate table, so a scan
with another number of ranges, or with intensities where the first had none (or the other
way round), cannot be stored in it: it is counted, with the reason, and not written (a
scanner does not change its resolution mid-recording unless reconfigured, which deserves
a new dataset). Likewise a cloud whose fields are not the first one's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.units import NS
from ortf_ros.pipeline.mapping import TopicMapping
from ortf_ros.pipeline.samples import LaserScanSample, PointCloudSample, stream_time
from ortf_ros.pipeline.streams.range_manifest import CloudLayout, cloud_layout, scan_columns
from ortf_ros.pipeline.sync import StreamSampler

CLOUDS_HELD_MAX = 8
"""Clouds held while the episode's clock has not started (the first step or native-rate
sample starts it, and a cloud written before would be timed from another origin); with
more, the clock is started by the clouds."""


class TopicCounts(Protocol):
    """The counters of ``assembly.counts.TopicCounts`` this module adds to."""

    undecodable: Counter[str]
    out_of_order: Counter[str]
    reasons: dict[str, str]


@dataclass(frozen=True)
class HeldCloud:
    name: str
    time_ns: int
    sample: PointCloudSample


class RangeInput:
    """Scans and clouds on their way in: ``scan_rows`` for the native-rate table, ``cloud``
    for the episode's cloud file; each one's sampler (``scans``) for the steps."""

    def __init__(self, config: TopicMapping, manifest: Manifest, writer: DatasetWriter, counts: TopicCounts) -> None:
        self.writer = writer
        self.counts = counts
        self.scan_names = {s.topic: s.name for s in config.laser_scans}
        self._scan_time = {s.topic: s.time for s in config.laser_scans}
        self.scans: dict[str, StreamSampler[int]] = {
            s.name: StreamSampler(s.name, s.policy) for s in config.laser_scans
        }
        self._columns = {s.name: scan_columns(manifest, s.name) for s in config.laser_scans}
        self._clouds = {p.topic: p for p in config.point_clouds}
        self._layouts: dict[str, CloudLayout | None] = {
            p.name: cloud_layout(manifest, p.name) for p in config.point_clouds
        }
        self._newest_cloud: dict[str, int] = {}
        self.held: list[HeldCloud] = []

    def _refuse(self, topic: str, reason: str) -> None:
        counts = self.counts
        counts.undecodable[topic] += 1
        counts.reasons.setdefault(topic, f"{topic}: {reason}")

    def scan_rows(self, sample: LaserScanSample, topic: str) -> tuple[int, np.ndarray] | None:
        """The scan's time and native-rate row (ranges, then intensities where declared),
        added to its sampler; None when not taken (counted here)."""
        name = self.scan_names.get(topic)
        if name is None:
            return None
        samples, with_intensities = self._columns[name]
        if sample.ranges.size != samples or (sample.intensities.size > 0) != with_intensities:
            had = "intensities" if with_intensities else "no intensities"
            has = f"{sample.intensities.size} intensities" if sample.intensities.size else "no intensities"
            self._refuse(
                topic,
                f"a scan of {sample.ranges.size} ranges and {has}, where the first had {samples} ranges and {had} "
                "(the scan table's columns are of fixed size)",
            )
            return None
        time_ns = stream_time(sample.stamps, self._scan_time[topic])
        sampler = self.scans[name]
        if not sampler.add(time_ns, sampler.total):
            self.counts.out_of_order[topic] += 1
            return None
        parts = [sample.ranges, sample.intensities] if with_intensities else [sample.ranges]
        return time_ns, np.concatenate(parts).astype(np.float64)

    def cloud(self, sample: PointCloudSample, topic: str) -> HeldCloud | None:
        """The cloud, checked against the declared layout and in time order; None when not
        taken (counted here)."""
        mapping = self._clouds.get(topic)
        if mapping is None:
            return None
        layout = self._layouts[mapping.name]
        if layout is None or (sample.fields, sample.point_step) != (layout.fields, layout.point_step):
            declared = "none" if layout is None else f"{layout.describe()}"
            given = CloudLayout(sample.fields, sample.point_step).describe()
            self._refuse(topic, f"a cloud of fields {given}, where the first had {declared}")
            return None
        time_ns = stream_time(sample.stamps, mapping.time)
        if time_ns < self._newest_cloud.get(mapping.name, -(2**62)):
            self.counts.out_of_order[topic] += 1
            return None
        self._newest_cloud[mapping.name] = time_ns
        return HeldCloud(mapping.name, time_ns, sample)

    def write_cloud(self, cloud: HeldCloud, clock_ns: Callable[[int], int]) -> None:
        """To the writer, timed in seconds since ``clock_ns`` (the episode's clock origin)."""
        sample = cloud.sample
        self.writer.add_point_cloud(
            cloud.name,
            (cloud.time_ns - clock_ns(cloud.time_ns)) / NS,
            sample.values,
            height=sample.height,
            width=sample.width,
            is_dense=sample.is_dense,
            frame_id=sample.stamps.frame_id,
            stamp_ns=sample.stamps.header_ns,
            receive_ns=sample.stamps.receive_ns,
        )
