"""``Assembler``: one episode's samples into steps, coordinating the jobs of this package.

A sample goes through the episode's clock offsets (``pipeline.clock_offsets``: measured at
its start, its time moved onto the step clock) to its stream by kind (``routes``), native-rate samples to the writer in
batches (``native``); as input time moves on (``step_clock``), each step now due is made
from the streams' samples and written (``steps``), after the native samples it may point at.
"""

from __future__ import annotations

import numpy as np

from ortf_ros.dataset.annotate import Rendered
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.units import NS
from ortf_ros.pipeline.assembly.counts import TopicCounts
from ortf_ros.pipeline.assembly.native import NATIVE_BATCH_MAX, NativeBatching
from ortf_ros.pipeline.assembly.routes import Routes
from ortf_ros.pipeline.assembly.step_clock import StepSchedule
from ortf_ros.pipeline.assembly.steps import END_EFFECTOR, StepBuilder, StepLayout
from ortf_ros.pipeline.clock_offsets import ClockOffsets, newest_receive_ns
from ortf_ros.pipeline.mapping import TopicMapping
from ortf_ros.pipeline.samples import BadMessage, Sample, SampleBlock, TransformBlock
from ortf_ros.pipeline.streams.h264_camera import ParameterSets
from ortf_ros.pipeline.streams.range_input import RangeInput
from ortf_ros.pipeline.tf import TfBuffer


def stream_tolerances_ns(config: TopicMapping, manifest: Manifest, streams: list[str]) -> dict[str, int]:
    """The sync tolerance of each stream a step samples, and of the end effector, in ns:
    the dataset's (``Manifest.stream_tolerance_ms``: a dataset appended to keeps its own).
    A dataset that declares none (written by another tool) gets half the step period."""
    fallback = 500.0 / (config.step.rate_hz or 30.0)
    tolerances = {}
    for stream in [*streams, END_EFFECTOR]:
        ms = manifest.stream_tolerance_ms(stream)
        tolerances[stream] = round((fallback if ms is None else ms) * 1e6)
    return tolerances


class Assembler:
    """Feeds one episode's samples into a DatasetWriter whose episode is already begun."""

    def __init__(
        self,
        config: TopicMapping,
        manifest: Manifest,
        steps: StepLayout,
        writer: DatasetWriter,
        counts: TopicCounts,
        *,
        tf: TfBuffer | None = None,
        native_batch: int = NATIVE_BATCH_MAX,
        parameter_sets: dict[str, ParameterSets] | None = None,
        clock_origin_ns: int | None = None,
    ) -> None:
        self.writer = writer
        # The episode's clocks (``clock_offsets``): what each stream's times are moved by,
        # and what the watermark takes off the receive times. ``clock_origin_ns``: the
        # episode's start, which a clock jump's time is told from.
        self.clock_offsets = ClockOffsets(config, origin_ns=clock_origin_ns)
        self._input_ns: int | None = None  # the newest receive time (or live input time) seen
        self.counts = counts
        self.tf = tf if tf is not None else TfBuffer()
        ranges = RangeInput(config, manifest, writer, counts)
        self.native = NativeBatching(manifest, writer, ranges, native_batch)
        self.routes = Routes(
            config,
            manifest,
            steps,
            writer,
            counts,
            tf=self.tf,
            native=self.native,
            parameter_sets=parameter_sets if parameter_sets is not None else {},
        )
        samplers = self.routes.samplers()
        tolerances_ns = stream_tolerances_ns(config, manifest, [name for name, _ in samplers])
        self.clock = StepSchedule(
            config,
            samplers,
            self.routes.cameras,
            self.tf,
            ee_frames=steps.ee_frames,
            tolerances_ns=tolerances_ns,
            skipped=counts.skipped_steps,
        )
        self.steps = StepBuilder(
            config,
            steps,
            writer,
            counts,
            samplers,
            cameras=list(self.routes.cameras),
            scans=list(ranges.scans),
            tf=self.tf,
            tolerances_ns=tolerances_ns,
            clock_ns=self.native.clock_ns,
        )
        # The streams timed by their header stamps: what may come late (``StepSchedule.latency_ns``).
        self._header_timed = {c.topic for c in config.cameras if c.time == "header"}
        self._header_timed |= {w.topic for w in config.wrenches if w.time == "header"}
        self._header_timed |= {s.topic for s in config.laser_scans if s.time == "header"}
        self._header_timed |= {p.topic for p in config.point_clouds if p.time == "header"}
        if config.joint_states is not None and config.joint_states.time == "header":
            self._header_timed.add(config.joint_states.topic)
        if config.action.topic is not None and config.action.time == "header":
            self._header_timed.add(config.action.topic)

    @property
    def steps_written(self) -> int:
        return self.steps.steps_written

    def feed(self, sample: Sample | SampleBlock | TransformBlock, topic: str) -> None:
        """Take a sample, or a block of one topic's consecutive samples. Steps wait for
        ``emit_ready``, which the caller must call regularly (``BlockFeed.end_batch`` does,
        once per block of messages): memory is freed only as steps are emitted. Samples
        reach their streams through the episode's ``ClockOffsets``, on the step clock."""
        if isinstance(sample, BadMessage):
            self.counts.undecodable[topic] += 1
            self.counts.reasons.setdefault(topic, sample.reason)
            self.routes.lost(topic)
            return
        newest = newest_receive_ns(sample)
        if newest is not None:
            self._input_ns = newest if self._input_ns is None else max(self._input_ns, newest)
        for ready, ready_topic in self.clock_offsets.take(sample, topic):
            self._route(ready, ready_topic)

    def _route(self, sample: Sample | SampleBlock | TransformBlock, topic: str) -> None:
        assert not isinstance(sample, BadMessage)  # (counted by ``feed``)
        """A sample on the step clock to its stream; a message recorded more than
        ``max_latency_ms`` after its stamp (on the step clock) is counted as late."""
        if isinstance(sample, TransformBlock):
            self.counts.used[topic] += sum(self.tf.add_run(run) for run in sample.edges)
            return
        latency_ns = self.clock.latency_ns + self.clock_offsets.reference_ns
        if isinstance(sample, SampleBlock):
            if topic in self._header_timed:
                stamped = sample.header_ns != 0  # (0: no stamp, as for a single message)
                late = int(np.count_nonzero(stamped & (sample.receive_ns - sample.header_ns > latency_ns)))
                if late:
                    self.counts.late[topic] += late
            if self.routes.route_block(sample, topic):
                self.counts.used[topic] += len(sample)
                return
            for one in sample.samples():
                if self.routes.route(one, topic):
                    self.counts.used[topic] += 1
            return
        stamps = sample.stamps
        if topic in self._header_timed and stamps.header_ns and stamps.receive_ns - stamps.header_ns > latency_ns:
            self.counts.late[topic] += 1
        if self.routes.route(sample, topic):
            self.counts.used[topic] += 1

    def emit_ready(self) -> None:
        """Emit the steps no stream can change any more."""
        if self._input_ns is not None:
            for ready, topic in self.clock_offsets.settle(self._input_ns):
                self._route(ready, topic)
            step_input_ns = self.clock_offsets.step_input_ns(self._input_ns)
            if step_input_ns is not None:  # (the watermark, on the step clock)
                self.clock.advance(step_input_ns)
        if not self.native.started:
            self.native.start_clock_when_due(self.clock.watermark_ns)
        self._emit_due_steps(final=False)

    def advance_input_time(self, input_ns: int) -> None:
        """Nothing received before ``input_ns`` is still to come: a live source's clock
        (the oldest message still queued, or now), so that steps are decided while every
        stream pauses (at the next ``emit_ready``). A bag's input time is its messages'
        receive times, and moves the same way as they are fed."""
        self._input_ns = input_ns if self._input_ns is None else max(self._input_ns, input_ns)

    def finish(self) -> None:
        """Emit the steps the end of input made ready; a held fallback step gets the last state.
        Native-rate samples after the last step are written too."""
        for ready, topic in self.clock_offsets.finish():
            self._route(ready, topic)
        self._emit_due_steps(final=True)
        self.native.send_all()
        self.steps.finish()

    def scene_annotations(self) -> Rendered | None:
        """The detections' annotations of the episode (``pipeline.detections``), once finished."""
        detections = self.routes.detections
        if detections is None:
            return None
        # The episode's zero: the writer's origin (its first step's or sample's time), on the
        # clock the writer is given (``NativeBatching.clock_ns``), which an audio chunk may have started earlier.
        origin = self.writer.episode_origin
        if self.native.origin_ns is None or origin is None:
            return detections.rendered(None)
        return detections.rendered(self.native.origin_ns + round(origin * NS))

    def _emit_due_steps(self, final: bool) -> None:
        """Each step now due, after the native-rate samples it may point at."""
        for t_ns in self.clock.due(final):
            self.native.send_all()
            self.steps.emit(t_ns)
        self.clock.prune()
