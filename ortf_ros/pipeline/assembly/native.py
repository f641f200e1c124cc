"""Native-rate samples on their way to the writer, in batches, and the episode's clock.

Joint states, wrenches and scans kept at their own rate go to the writer one
``add_samples`` call per stream and batch: a call per sample would cost more, at 1 kHz,
than the rest of a sample's way through the pipeline. The writer's clock (the episode's
time 0) starts at the first sample, step or cloud it is given, so until it has started
the batches wait and go earliest first; which is why the clock's origin is kept here.
"""

from __future__ import annotations

import math

import numpy as np

from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.units import NS
from ortf_ros.pipeline.samples import Stamps
from ortf_ros.pipeline.streams.range_input import CLOUDS_HELD_MAX, HeldCloud, RangeInput

# Native-rate samples held for the writer per stream (plus up to a block); before the
# episode's clock starts, up to ``max_latency_ms`` of input more (``start_clock_when_due``).
# The default of ``Flow.native_batch``.
NATIVE_BATCH_MAX = 256


class NativeBatch:
    """A native-rate stream's samples on their way to the writer, in one ``add_samples`` call:
    before the next step is written (it may point at them), when ``NATIVE_BATCH_MAX`` wait,
    and at the end."""

    def __init__(self, stream: str, dims: dict[str, int]) -> None:
        self.stream = stream
        self.columns: dict[str, slice] = {}
        start = 0
        for name, dim in dims.items():
            self.columns[name] = slice(start, start + dim)
            start += dim
        self.count = 0
        self.times: list[np.ndarray] = []  # stream times (ns), a chunk per add
        self.rows: list[np.ndarray] = []  # the columns side by side
        self.stamp_ns: list[int | None] = []
        self.receive_ns: list[int | None] = []

    @property
    def first_ns(self) -> int | None:
        """The stream time of the first sample waiting, if any."""
        return int(self.times[0][0]) if self.count else None

    def add(self, times_ns: np.ndarray, rows: np.ndarray, stamp_ns: list[int | None], receive_ns: list[int]) -> None:
        if not len(rows):
            return
        self.count += len(rows)
        self.times.append(times_ns)
        self.rows.append(rows)
        self.stamp_ns += stamp_ns
        self.receive_ns += receive_ns

    def send(self, writer: DatasetWriter, clock_ns: int) -> None:
        """To ``writer``, with times in seconds since ``clock_ns`` (``NativeBatching.clock_ns``)."""
        if not self.count:
            return
        rows = np.concatenate(self.rows)
        values = {name: rows[:, part] for name, part in self.columns.items()}
        # (Python ints: exact differences, and int / int rounds once; int64 / NS would round twice.)
        times = [(t - clock_ns) / NS for t in np.concatenate(self.times).tolist()]
        writer.add_samples(self.stream, times, values, stamp_ns=self.stamp_ns, receive_ns=self.receive_ns)
        self.count, self.times, self.rows, self.stamp_ns, self.receive_ns = 0, [], [], [], []


class NativeBatching:
    """Every native-rate stream's batch, the point clouds held before the clock starts
    (``RangeInput.held``), and the episode's clock origin (``clock_ns``)."""

    def __init__(self, manifest: Manifest, writer: DatasetWriter, ranges: RangeInput, batch_max: int) -> None:
        self.writer = writer
        self.ranges = ranges
        self.batch_max = batch_max
        self.batches = {
            name: NativeBatch(name, {column: c.dim for column, c in stream.columns.items()})
            for name, stream in manifest.native_streams.items()
        }
        self.started = False  # whether the writer has had a sample (its first starts the clock)
        self.origin_ns: int | None = None  # (``clock_ns``)

    def hold(self, stream: str, time_ns: int, row: np.ndarray, stamps: Stamps) -> None:
        """One sample's row, queued as ``queue`` does."""
        self.queue(stream, np.array([time_ns]), row[np.newaxis], [stamps.header_ns], [stamps.receive_ns])

    def queue(
        self, stream: str, times_ns: np.ndarray, rows: np.ndarray, stamp_ns: list[int | None], receive_ns: list[int]
    ) -> None:
        """Queue native-rate samples for the writer, sent once ``NATIVE_BATCH_MAX`` wait (a
        block may add that many more) and before every step; until the episode's clock has
        started, as ``start_clock_when_due`` decides (after ``max_latency_ms`` of input)."""
        batch = self.batches[stream]
        batch.add(times_ns, rows, stamp_ns, receive_ns)
        if batch.count >= self.batch_max and self.started:
            self._send(batch)

    def write_cloud(self, cloud: HeldCloud) -> None:
        """A cloud to the writer; held while the episode's clock has not started (the first
        step or native sample starts it, and the cloud's time must count from the same origin)."""
        if self.started:
            self.ranges.write_cloud(cloud, self.clock_ns)
            return
        self.ranges.held.append(cloud)
        if len(self.ranges.held) >= CLOUDS_HELD_MAX:
            self.send_all()

    def start_clock_when_due(self, watermark_ns: int) -> None:
        """Start the episode's clock (``send_all``) once a stream has ``NATIVE_BATCH_MAX``
        samples waiting and no stream can deliver a sample before the earliest waiting one
        any more (the watermark is past it). Not while blocks are fed: samples of several
        streams arrive in blocks of a topic each, and the first block in may be a stream
        that started later than another (whose time 0 it would then take)."""
        firsts = [batch.first_ns for batch in self.batches.values() if batch.first_ns is not None]
        if firsts and min(firsts) <= watermark_ns and max(b.count for b in self.batches.values()) >= self.batch_max:
            self.send_all()

    def send_all(self) -> None:
        """Every waiting native-rate sample to the writer. Until the episode's clock has
        started, the streams go earliest first: the writer's clock starts at the first
        sample it gets, which must be the earliest."""
        batches = list(self.batches.values())
        if not self.started:
            batches.sort(key=lambda batch: batch.first_ns if batch.first_ns is not None else math.inf)
            self._send_clouds(before_ns=batches[0].first_ns if batches and batches[0].first_ns is not None else None)
        for batch in batches:
            if batch.count:
                self._send(batch)
                self.started = True
        self._send_clouds(before_ns=None)

    def _send_clouds(self, before_ns: int | None) -> None:
        """The held point clouds (all, or those before ``before_ns``) to the writer; the
        first starts the episode's clock when nothing has."""
        held = self.ranges.held
        while held and (before_ns is None or held[0].time_ns < before_ns):
            self.ranges.write_cloud(held.pop(0), self.clock_ns)
            self.started = True

    def _send(self, batch: NativeBatch) -> None:
        first_ns = batch.first_ns
        if first_ns is not None:
            batch.send(self.writer, self.clock_ns(first_ns))

    def clock_ns(self, first_ns: int) -> int:
        """The time the writer's timestamps count from: the first it is given (a native
        sample's or a step's). Seconds since the epoch in float64 are only good to about
        0.2 us, so the writer is given small ones, which it subtracts exactly."""
        if self.origin_ns is None:
            self.origin_ns = first_ns
        return self.origin_ns
