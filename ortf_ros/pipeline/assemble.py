"""Samples -> steps: the stage shared by bag conversion and live recording.

Samples arrive in receive-time order, one by one or (high-rate streams) as blocks of
consecutive samples of a topic. Every camera frame, joint state and wrench is written
(frames to the episode's video as they arrive, fast streams to their native-rate tables
in batches before each step), so nothing recorded is thrown away and memory holds only
recent samples.
Steps are laid on a control-rate grid (or on a driving camera's frames). When the
caller asks (``emit_ready``), every step is emitted for which no stream can deliver a
sample closer to its time any more; each records for each stream the sample it used and
how far that sample was from the step time (the alignment columns).

Times are nanoseconds on each stream's chosen clock (header stamp or receive time).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ortf_ros.dataset.annotate import Rendered
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ConversionError
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.units import NS
from ortf_ros.io.still import decode_alone
from ortf_ros.pipeline.audio import AudioError, AudioRouter
from ortf_ros.pipeline.config import ConversionConfig, TimeSource
from ortf_ros.pipeline.detections import FirstFrameDetections
from ortf_ros.pipeline.h264_camera import EncodedCameraGate, ParameterSets
from ortf_ros.pipeline.range_input import CLOUDS_HELD_MAX, RangeInput
from ortf_ros.pipeline.samples import (
    AudioChunkSample,
    AudioInfoSample,
    BadMessage,
    ControllerStateSample,
    DetectionsSample,
    EncodedFrameSample,
    ImageSample,
    JointStateSample,
    LaserScanSample,
    PointCloudSample,
    Sample,
    SampleBlock,
    Stamps,
    TransformBlock,
    TransformSample,
    VectorSample,
    WrenchSample,
    stream_time,
)
from ortf_ros.pipeline.sync import Sampled, StreamSampler, lerp_array
from ortf_ros.pipeline.tf import TfBuffer

# A step waits for the TF after its time this much input time longer than for other
# streams: TF often comes at a few Hz, and a pose interpolated between the transforms
# around the step, rather than the last one held, should not depend on when steps are
# looked for. A TF that stops is held after that.
TF_WAIT_NS = 1_000_000_000
# Native-rate samples held for the writer per stream (plus up to a block); before the
# episode's clock starts, up to ``max_latency_ms`` of input more (``_start_clock_when_due``).
# The default of ``Flow.native_batch``.
NATIVE_BATCH_MAX = 256


def _native_joint_rows(full: np.ndarray) -> np.ndarray:
    """(N, 3, joints) vectors as native-rate rows: position, velocity, effort side by side,
    a velocity or effort a joint never had stored as 0."""
    rows = full.reshape(len(full), -1)
    joints = full.shape[2]
    if not np.isfinite(rows[:, joints:]).all():
        rows = np.concatenate([rows[:, :joints], np.nan_to_num(rows[:, joints:])], axis=1)
    return rows


def _zero_missing(values: np.ndarray) -> np.ndarray:
    """A step's velocities or efforts, 0 for a joint whose messages never gave one
    (``np.nan_to_num``, called only when needed: it costs more than a step's other vectors)."""
    return values if np.isfinite(values).all() else np.nan_to_num(values)


def block_times(block: SampleBlock, source: TimeSource) -> np.ndarray:
    """``stream_time`` of each row of a block."""
    if source == "header":
        return np.where(block.header_ns != 0, block.header_ns, block.receive_ns)
    return block.receive_ns


@dataclass(frozen=True)
class StepLayout:
    """What each step holds, decided from the prologue and reflected in the manifest."""

    arm_joints: tuple[str, ...]
    gripper_joints: tuple[str, ...]
    with_torques: bool
    ee_frames: tuple[str, str] | None  # (base, end effector) for ee_position/ee_orientation
    action_names: tuple[str, ...]  # the action vector's elements
    action_by_joint_name: bool  # the action topic carries joints by name (JointState/JointTrajectory)
    # The names, in order, of the values of a joint state (or command) that lists no names;
    # () when the joint states name their joints (``describe.unnamed_joint_names``).
    unnamed_joints: tuple[str, ...] = ()

    @property
    def joints(self) -> tuple[str, ...]:
        return self.arm_joints + self.gripper_joints


@dataclass
class TopicCounts:
    """Per topic: what became data, and what did not and why (the conversion summary)."""

    read: Counter[str] = field(default_factory=Counter)  # messages of an episode handed to the assembler
    used: Counter[str] = field(default_factory=Counter)
    undecodable: Counter[str] = field(default_factory=Counter)
    out_of_order: Counter[str] = field(default_factory=Counter)
    # a command that names none of the action's joints, or gives no positions (a velocity command)
    not_for_action: Counter[str] = field(default_factory=Counter)
    outside_tolerance: Counter[str] = field(default_factory=Counter)
    skipped_steps: Counter[str] = field(default_factory=Counter)  # reason -> steps not written
    outside_episodes: Counter[str] = field(default_factory=Counter)  # messages between episodes
    late: Counter[str] = field(default_factory=Counter)  # stamped more than max_latency_ms before recorded
    before_first_keyframe: Counter[str] = field(default_factory=Counter)  # H.264: before the episode's video starts
    after_lost_packet: Counter[str] = field(default_factory=Counter)  # H.264: after a lost one, until a keyframe
    no_picture: Counter[str] = field(default_factory=Counter)  # H.264: parameter sets (or SEI) alone: no frame
    reasons: dict[str, str] = field(default_factory=dict)  # topic -> first undecodable reason


@dataclass(frozen=True)
class _Step:
    """A step ready for the writer but for its action (which may be the next step's joints)."""

    timestamp: float
    state: dict[str, np.ndarray]
    frames: dict[str, int]
    samples: dict[str, int]
    alignment_ms: dict[str, float]


class _JointMerger:
    """Full joint vectors from messages that may list any subset of joints in any order.

    ``merge`` takes one message and works on Python lists: the vectors are short, and a
    numpy call per message costs more than the merge. ``merge_block`` takes a block of
    them with a few numpy calls for the lot.
    """

    _PLACEMENTS_MAX = 64  # name lists remembered; a publisher uses one or two

    def __init__(self, joints: tuple[str, ...], unnamed: tuple[str, ...] = ()) -> None:
        self.index = {name: i for i, name in enumerate(joints)}
        self.unnamed = unnamed  # what a message that lists no names lists (``StepLayout.unnamed_joints``)
        self.current = [[math.nan] * len(joints) for _ in range(3)]
        self._placements: dict[tuple[str, ...], list[tuple[int, int]]] = {}

    def merge_block(self, block: SampleBlock) -> np.ndarray:
        """(N, 3, joints): the full vectors after each message of a joint state block, as
        ``merge`` would make them one by one (a joint a message does not give keeps its value
        from before); NaN where a joint was not seen yet. Nothing changes until ``settle``."""
        count, joints = len(block), len(self.index)
        full = np.empty((count + 1, 3, joints))
        given = np.zeros((count + 1, 3, joints), bool)
        full[0], given[0] = self.current, True
        for part in block.parts:
            names = part.names or self.unnamed
            pairs = self._placement(names)
            sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
            rows = part.rows[:, np.newaxis] + 1
            for kind, values in enumerate(part.runs):
                if values.shape[1] == len(names):
                    full[rows, kind, targets] = values[:, sources]
                    given[rows, kind, targets] = True
        latest = np.where(given, np.arange(count + 1)[:, np.newaxis, np.newaxis], 0)
        np.maximum.accumulate(latest, axis=0, out=latest)
        return np.take_along_axis(full, latest, axis=0)[1:]

    def settle(self, full: np.ndarray) -> None:
        """Keep the last vectors of a merged block as the current ones."""
        self.current = full[-1].tolist()

    def merge(self, sample: JointStateSample) -> np.ndarray | None:
        """The full (position, velocity, effort) after this message; None until every joint was seen."""
        names = sample.names or self.unnamed
        pairs = self._placement(names)
        for row, values in zip(self.current, (sample.position, sample.velocity, sample.effort), strict=True):
            if len(values) == len(names):
                given = values.tolist()
                for source, target in pairs:
                    row[target] = given[source]
        if any(position != position for position in self.current[0]):  # NaN: a joint not seen yet
            return None
        return np.array(self.current)

    def fits(self, names: tuple[str, ...], positions: int) -> bool:
        """Whether a message listing ``names`` (none: ``unnamed``) with this many positions can be merged."""
        return bool(names) or positions == len(self.unnamed)

    def _placement(self, names: tuple[str, ...]) -> list[tuple[int, int]]:
        """(place in the message, place in the full vectors) of each joint the message names that we know."""
        pairs = self._placements.get(names)
        if pairs is None:
            pairs = [(i, self.index[name]) for i, name in enumerate(names) if name in self.index]
            if len(self._placements) >= self._PLACEMENTS_MAX:
                self._placements.clear()
            self._placements[names] = pairs
        return pairs


class _NativeBatch:
    """A native-rate stream's samples on their way to the writer, in one ``add_samples`` call:
    before the next step is written (it may point at them), when ``NATIVE_BATCH_MAX`` wait,
    and at the end. A call per sample would cost more, at 1 kHz, than the rest of a sample's
    way through the pipeline."""

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
        """To ``writer``, with times in seconds since ``clock_ns`` (see ``Assembler._clock_ns``)."""
        if not self.count:
            return
        rows = np.concatenate(self.rows)
        values = {name: rows[:, part] for name, part in self.columns.items()}
        # (Python ints: exact differences, and int / int rounds once; int64 / NS would round twice.)
        times = [(t - clock_ns) / NS for t in np.concatenate(self.times).tolist()]
        writer.add_samples(self.stream, times, values, stamp_ns=self.stamp_ns, receive_ns=self.receive_ns)
        self.count, self.times, self.rows, self.stamp_ns, self.receive_ns = 0, [], [], [], []


class Assembler:
    """Feeds one episode's samples into a DatasetWriter whose episode is already begun."""

    def __init__(
        self,
        config: ConversionConfig,
        manifest: Manifest,
        steps: StepLayout,
        writer: DatasetWriter,
        counts: TopicCounts,
        *,
        tf: TfBuffer | None = None,
        native_batch: int = NATIVE_BATCH_MAX,
        parameter_sets: dict[str, ParameterSets] | None = None,
    ) -> None:
        self.config = config
        self.native_batch = native_batch
        self.manifest = manifest
        self.layout = steps
        self.writer = writer
        self.counts = counts
        self.tolerance_ns = round((manifest.sync_tolerance_ms or 0.0) * 1e6)
        # Header stamps precede reception: a stream is taken to deliver nothing stamped
        # more than this before the newest receive time seen (what lets a step be emitted).
        # A message that breaks this may come after a step it precedes was decided, which
        # then depends on when steps were looked for: such messages are counted as late.
        self.latency_ns = round(config.max_latency_ms * 1e6)
        self._header_timed = {c.topic for c in config.cameras if c.time == "header"}
        self._header_timed |= {w.topic for w in config.wrenches if w.time == "header"}
        self._header_timed |= {s.topic for s in config.laser_scans if s.time == "header"}
        self._header_timed |= {p.topic for p in config.point_clouds if p.time == "header"}
        if config.joint_states is not None and config.joint_states.time == "header":
            self._header_timed.add(config.joint_states.topic)
        if config.action.topic is not None and config.action.time == "header":
            self._header_timed.add(config.action.topic)
        self.tf = tf if tf is not None else TfBuffer()
        joint_config = config.joint_states
        self.joints = _JointMerger(steps.joints, steps.unnamed_joints)
        self.joint_stream: StreamSampler[np.ndarray] = StreamSampler(
            "joint_states", joint_config.policy if joint_config else "latest", interpolate=lerp_array
        )
        self.wrenches: dict[str, StreamSampler[np.ndarray]] = {
            w.name: StreamSampler(w.name, w.policy, interpolate=lerp_array) for w in config.wrenches
        }
        self.cameras: dict[str, StreamSampler[int]] = {c.name: StreamSampler(c.name, c.policy) for c in config.cameras}
        self.action: StreamSampler[np.ndarray] = StreamSampler("action", config.action.policy, interpolate=lerp_array)
        self.range = RangeInput(config, manifest, writer, counts)
        self.watermark_ns = -(2**62)
        self.next_step_ns: int | None = None
        self.pending_fallback: _Step | None = None  # a step waiting for the next one's joints
        self.steps_written = 0
        self._camera_by_topic = {c.topic: c for c in config.cameras}
        resolutions = {name: sensor.resolution for name, sensor in manifest.cameras.items()}
        self._encoded = EncodedCameraGate(resolutions, parameter_sets if parameter_sets is not None else {})
        self._wrench_by_topic = {w.topic: w for w in config.wrenches}
        self._joint_topic = joint_config.topic if joint_config else None
        self._driving = config.step.camera
        self.period_ns = round(NS / config.step.rate_hz) if config.step.rate_hz else 0
        self._sampler_list = [sampler for _, sampler in self._samplers()]
        self._blocking = self._sampler_list[0]  # the stream that held the last step back: asked first
        self._native = {
            name: _NativeBatch(name, {column: c.dim for column, c in stream.columns.items()})
            for name, stream in manifest.native_streams.items()
        }
        self.audio = AudioRouter(config, manifest, writer, self._clock_ns, stream_time)
        self._clock_started = False  # whether the writer has had a sample (its first starts the clock)
        self._clock_origin_ns: int | None = None  # (``_clock_ns``)
        detections = config.detections
        self.detections = (
            None if detections is None else FirstFrameDetections(detections, manifest.cameras[detections.camera])
        )

    # -- input ------------------------------------------------------------------

    def feed(self, sample: Sample | SampleBlock | TransformBlock, topic: str) -> None:
        """Take a sample, or a block of one topic's consecutive samples. Steps wait for
        ``emit_ready``, which the caller must call regularly (``BlockFeed.end_batch`` does,
        once per block of messages): memory is freed only as steps are emitted."""
        if isinstance(sample, BadMessage):
            self.counts.undecodable[topic] += 1
            self.counts.reasons.setdefault(topic, sample.reason)
            if topic in self._camera_by_topic:
                self._encoded.lost(self._camera_by_topic[topic].name)  # (an H.264 camera's next packets refer to it)
            return
        if isinstance(sample, TransformBlock):
            self._advance_watermark(int(sample.receive_ns.max()))
            self.counts.used[topic] += sum(self.tf.add_run(run) for run in sample.edges)
            return
        if isinstance(sample, SampleBlock):
            self._advance_watermark(int(sample.receive_ns.max()))
            if topic in self._header_timed:
                stamped = sample.header_ns != 0  # (0: no stamp, as for a single message)
                late = int(np.count_nonzero(stamped & (sample.receive_ns - sample.header_ns > self.latency_ns)))
                if late:
                    self.counts.late[topic] += late
            if self._route_block(sample, topic):
                self.counts.used[topic] += len(sample)
                return
            for one in sample.samples():
                if self._route(one, topic):
                    self.counts.used[topic] += 1
            return
        stamps = sample.stamps
        self._advance_watermark(stamps.receive_ns)
        if topic in self._header_timed and stamps.header_ns and stamps.receive_ns - stamps.header_ns > self.latency_ns:
            self.counts.late[topic] += 1
        if self._route(sample, topic):
            self.counts.used[topic] += 1

    def emit_ready(self) -> None:
        """Emit the steps no stream can change any more."""
        if not self._clock_started:
            self._start_clock_when_due()
        self._emit_ready_steps(final=False)

    def advance_input_time(self, input_ns: int) -> None:
        """Nothing received before ``input_ns`` is still to come: a live source's clock
        (the oldest message still queued, or now), so that steps are decided while every
        stream pauses. A bag's input time is its messages' receive times, and moves the
        same way as they are fed."""
        self._advance_watermark(input_ns)

    def _advance_watermark(self, receive_ns: int) -> None:
        watermark = receive_ns - self.latency_ns
        if watermark > self.watermark_ns:
            self.watermark_ns = watermark

    def _route_block(self, block: SampleBlock, topic: str) -> bool:
        """A block of the joint state or a wrench topic taken whole; False (nothing taken) for
        any other, which the caller then routes sample by sample."""
        if block.kind == "wrench":
            return topic in self._wrench_by_topic and self._wrench_block(block, topic)
        return topic == self._joint_topic and self._joint_state_block(block)

    def _route(self, sample: Sample, topic: str) -> bool:
        if isinstance(sample, WrenchSample):  # (the most frequent first; the types exclude each other)
            return topic in self._wrench_by_topic and self._wrench(sample, topic)
        if isinstance(sample, (AudioChunkSample, AudioInfoSample)):
            try:
                return self.audio.route(sample, topic)
            except AudioError as exc:  # (a chunk the microphone's file cannot take)
                self.counts.undecodable[topic] += 1
                self.counts.reasons.setdefault(topic, f"{topic}: {exc}")
                return False
        if isinstance(sample, TransformSample):
            return self.tf.add(sample)
        if isinstance(sample, ImageSample):
            return self._image(sample, topic)
        if isinstance(sample, LaserScanSample):
            return self._laser_scan(sample, topic)
        if isinstance(sample, PointCloudSample):
            return self._point_cloud(sample, topic)
        if isinstance(sample, EncodedFrameSample):
            return self._encoded_frame(sample, topic)
        if isinstance(sample, JointStateSample) and topic == self._joint_topic:
            return self._joint_state(sample)
        if isinstance(sample, ControllerStateSample):
            return self._controller_state(sample, topic)
        if topic == self.config.action.topic and isinstance(sample, (JointStateSample, VectorSample)):
            return self._action(sample)
        if isinstance(sample, DetectionsSample) and self.detections is not None:
            return self.detections.offer(topic, stream_time(sample.stamps, self.detections.mapping.time), sample)
        return False  # latched state (camera info, URDF) went into the manifest

    def _laser_scan(self, sample: LaserScanSample, topic: str) -> bool:
        """A scan into its sampler (steps point at it) and its native-rate table (``range_input``)."""
        rows = self.range.scan_rows(sample, topic)
        if rows is None:
            return False
        time_ns, row = rows
        self._hold(self.range.scan_names[topic], time_ns, row, sample.stamps)
        return True

    def _point_cloud(self, sample: PointCloudSample, topic: str) -> bool:
        """A cloud to the writer; held while the episode's clock has not started (the first
        step or native sample starts it, and the cloud's time must count from the same origin)."""
        cloud = self.range.cloud(sample, topic)
        if cloud is None:
            return False
        if self._clock_started:
            self.range.write_cloud(cloud, self._clock_ns)
            return True
        self.range.held.append(cloud)
        if len(self.range.held) >= CLOUDS_HELD_MAX:
            self._send_samples()
        return True

    def _controller_state(self, sample: ControllerStateSample, topic: str) -> bool:
        """The joint state a controller's feedback is (its topic the joint state's), and the
        action its reference is (its topic the action's): one message may be both, and is
        counted once: used if either role took it, else not used for the first reason found."""
        counters = (self.counts.undecodable, self.counts.out_of_order, self.counts.not_for_action)
        before = [counter[topic] for counter in counters]
        used = topic == self._joint_topic and self._joint_state(sample.state)
        if topic == self.config.action.topic and sample.reference is not None:
            used = self._action(sample.reference) or used
        counted = False
        for counter, then in zip(counters, before, strict=True):
            if counter[topic] > then:
                counter[topic] = then if used or counted else then + 1
                counted = True
        return used

    def _image(self, sample: ImageSample, topic: str) -> bool:
        camera = self._camera_by_topic.get(topic)
        if camera is None:
            return False
        time_ns = stream_time(sample.stamps, camera.time)
        resolution = self.manifest.cameras[camera.name].resolution
        height, width = sample.pixels.shape[:2]
        if resolution is not None and (width, height) != (resolution.width, resolution.height):
            raise ConversionError(
                f"{topic} at {sample.stamps.receive_ns / NS:.6f} s: the camera's resolution changed from "
                f"{resolution.width}x{resolution.height} to {width}x{height} mid-recording"
            )
        sampler = self.cameras[camera.name]
        if not self._in_order(sampler, time_ns, topic):
            return False
        index = self.writer.add_frame(camera.name, sample.pixels)
        sampler.add(time_ns, index)
        if index == 0 and self.detections is not None and camera.name == self.detections.mapping.camera:
            self.detections.first_frame(time_ns, sample.pixels)
        return True

    def _in_order(self, sampler: StreamSampler[int], time_ns: int, topic: str) -> bool:
        """Whether a camera frame comes after the camera's newest (else it is counted out of order)."""
        if sampler.newest_ns is not None and time_ns < sampler.newest_ns:
            self.counts.out_of_order[topic] += 1
            return False
        return True

    def _encoded_frame(self, sample: EncodedFrameSample, topic: str) -> bool:
        """A published H.264 packet, muxed into the camera's video as it is (``h264_camera``)."""
        camera = self._camera_by_topic.get(topic)
        if camera is None:
            return False
        time_ns = stream_time(sample.stamps, camera.time)
        sampler = self.cameras[camera.name]
        if not self._in_order(sampler, time_ns, topic):
            self._encoded.lost(camera.name)
            return False
        admitted = self._encoded.admit(camera.name, sample)
        if not isinstance(admitted, bytes):
            counters = {
                "before_first_keyframe": self.counts.before_first_keyframe,
                "after_lost_packet": self.counts.after_lost_packet,
                "no_picture": self.counts.no_picture,
            }
            counters[admitted][topic] += 1
            return False
        index = self.writer.add_packet(camera.name, admitted, sample.facts.idr)  # (every IDR frame a sync sample)
        sampler.add(time_ns, index)
        if index == 0 and self.detections is not None and camera.name == self.detections.mapping.camera:
            # (an episode's first packet is a keyframe: it decodes alone, once an episode)
            pixels = decode_alone("h264", admitted, "an H.264 keyframe").to_ndarray(format="rgb24")
            self.detections.first_frame(time_ns, pixels)
        return True

    def _joint_state(self, sample: JointStateSample) -> bool:
        assert self.config.joint_states is not None
        if not self.joints.fits(sample.names, len(sample.position)):
            self._unnamed_misfit(sample.topic, len(sample.position))
            return False
        full = self.joints.merge(sample)
        if full is None:
            return True  # folded in; the vector is not complete yet
        time_ns = stream_time(sample.stamps, self.config.joint_states.time)
        if not self.joint_stream.add(time_ns, full):
            self.counts.out_of_order[self.config.joint_states.topic] += 1
            return False
        if self.config.joint_states.native:
            self._hold("joint_states", time_ns, _native_joint_rows(full[np.newaxis])[0], sample.stamps)
        return True

    def _unnamed_misfit(self, topic: str, positions: int) -> None:
        """A joint state that lists no names and is not like the first one: counted, with why."""
        unnamed = self.layout.unnamed_joints
        if unnamed:
            reason = (
                f"lists no joint names and has {positions} positions, where the first joint state had {len(unnamed)}"
            )
        else:
            reason = f"lists no joint names ({positions} positions), where the first joint state named its joints"
        self.counts.undecodable[topic] += 1
        self.counts.reasons.setdefault(topic, f"{topic}: a joint state {reason}")

    def _joint_state_block(self, block: SampleBlock) -> bool:
        mapping = self.config.joint_states
        assert mapping is not None
        if not all(self.joints.fits(part.names, part.runs[0].shape[1]) for part in block.parts):
            return False  # (one by one, which counts the misfits)
        full = self.joints.merge_block(block)
        complete = ~np.isnan(full[:, 0]).any(axis=1)  # as ``merge``: a vector only once every joint was seen
        times = block_times(block, mapping.time)[complete]
        if not self.joint_stream.accepts(times):
            return False
        self.joints.settle(full)
        if not complete.any():
            return True  # folded in; no vector is complete yet
        full = full[complete]
        self.joint_stream.extend(times, full)
        if mapping.native:
            stamps = block.header_ns[complete].tolist(), block.receive_ns[complete].tolist()
            self._queue_native("joint_states", times, _native_joint_rows(full), *stamps)
        return True

    def _wrench_block(self, block: SampleBlock, topic: str) -> bool:
        mapping = self._wrench_by_topic[topic]
        times = block_times(block, mapping.time)
        sampler = self.wrenches[mapping.name]
        if not sampler.accepts(times):
            return False
        values = block.stacked(0)
        sampler.extend(times, values)
        if mapping.native:
            self._queue_native(mapping.name, times, values, block.header_ns.tolist(), block.receive_ns.tolist())
        return True

    def _wrench(self, sample: WrenchSample, topic: str) -> bool:
        mapping = self._wrench_by_topic[topic]
        time_ns = stream_time(sample.stamps, mapping.time)
        values = np.concatenate([sample.force, sample.torque])
        if not self.wrenches[mapping.name].add(time_ns, values):
            self.counts.out_of_order[topic] += 1
            return False
        if mapping.native:
            self._hold(mapping.name, time_ns, values, sample.stamps)
        return True

    def _hold(self, stream: str, time_ns: int, row: np.ndarray, stamps: Stamps) -> None:
        self._queue_native(stream, np.array([time_ns]), row[np.newaxis], [stamps.header_ns], [stamps.receive_ns])

    def _queue_native(
        self, stream: str, times_ns: np.ndarray, rows: np.ndarray, stamp_ns: list[int | None], receive_ns: list[int]
    ) -> None:
        """Queue native-rate samples for the writer, sent once ``NATIVE_BATCH_MAX`` wait (a
        block may add that many more) and before every step; until the episode's clock has
        started, as ``_start_clock_when_due`` decides (after ``max_latency_ms`` of input)."""
        batch = self._native[stream]
        batch.add(times_ns, rows, stamp_ns, receive_ns)
        if batch.count >= self.native_batch and self._clock_started:
            self._send(batch)

    def _start_clock_when_due(self) -> None:
        """Start the episode's clock (``_send_samples``) once a stream has ``NATIVE_BATCH_MAX``
        samples waiting and no stream can deliver a sample before the earliest waiting one
        any more (the watermark is past it). Not while blocks are fed: samples of several
        streams arrive in blocks of a topic each, and the first block in may be a stream
        that started later than another (whose time 0 it would then take)."""
        firsts = [batch.first_ns for batch in self._native.values() if batch.first_ns is not None]
        if (
            firsts
            and min(firsts) <= self.watermark_ns
            and max(b.count for b in self._native.values()) >= self.native_batch
        ):
            self._send_samples()

    def _send_samples(self) -> None:
        """Every waiting native-rate sample to the writer. Until the episode's clock has
        started, the streams go earliest first: the writer's clock starts at the first
        sample it gets, which must be the earliest."""
        batches = list(self._native.values())
        if not self._clock_started:
            batches.sort(key=lambda batch: batch.first_ns if batch.first_ns is not None else math.inf)
            self._send_clouds(before_ns=batches[0].first_ns if batches and batches[0].first_ns is not None else None)
        for batch in batches:
            if batch.count:
                self._send(batch)
                self._clock_started = True
        self._send_clouds(before_ns=None)

    def _send_clouds(self, before_ns: int | None) -> None:
        """The held point clouds (all, or those before ``before_ns``) to the writer; the
        first starts the episode's clock when nothing has."""
        held = self.range.held
        while held and (before_ns is None or held[0].time_ns < before_ns):
            self.range.write_cloud(held.pop(0), self._clock_ns)
            self._clock_started = True

    def _send(self, batch: _NativeBatch) -> None:
        first_ns = batch.first_ns
        if first_ns is not None:
            batch.send(self.writer, self._clock_ns(first_ns))

    def _clock_ns(self, first_ns: int) -> int:
        """The time the writer's timestamps count from: the first it is given (a native
        sample's or a step's). Seconds since the epoch in float64 are only good to about
        0.2 us, so the writer is given small ones, which it subtracts exactly."""
        if self._clock_origin_ns is None:
            self._clock_origin_ns = first_ns
        return self._clock_origin_ns

    def _action(self, sample: JointStateSample | VectorSample) -> bool:
        time_ns = stream_time(sample.stamps, self.config.action.time)
        if isinstance(sample, JointStateSample):
            unnamed = self.layout.unnamed_joints
            names = sample.names or (unnamed if len(sample.position) == len(unnamed) else ())
            if len(sample.position) != len(names):
                # no positions (a velocity command, say), or unnamed ones of another count
                self.counts.not_for_action[self.config.action.topic or "action"] += 1
                return False
            by_name = dict(zip(names, sample.position, strict=True))
        else:
            by_name = dict(zip(sample.names, sample.values, strict=True))
        values = np.array([by_name.get(name, np.nan) for name in self.layout.action_names])
        if np.isnan(values).any():
            self.counts.not_for_action[self.config.action.topic or "action"] += 1
            return False  # a command for other joints
        if not self.action.add(time_ns, values):
            self.counts.out_of_order[self.config.action.topic or "action"] += 1
            return False
        return True

    # -- steps ------------------------------------------------------------------

    def _samplers(self) -> Iterator[tuple[str, StreamSampler[Any]]]:
        yield "joint_states", self.joint_stream
        yield from self.wrenches.items()
        yield from self.range.scans.items()
        yield from self.cameras.items()
        if self.config.action.topic is not None:
            yield "action", self.action

    def _start_ns(self) -> int | None:
        """The first step time: once every stream has delivered its first sample."""
        firsts = []
        for _, sampler in self._samplers():
            if sampler.oldest_ns is None:
                return None
            firsts.append(sampler.oldest_ns)
        return max(firsts)

    def _next_step_time(self, after_ns: int) -> int | None:
        """The next step time at or after ``after_ns``: on the rate grid, or the driving camera's next frame."""
        if self._driving is None:
            return after_ns
        return self.cameras[self._driving].next_time(after_ns)

    def _emit_ready_steps(self, final: bool) -> None:
        if self.next_step_ns is None:
            self.next_step_ns = self._start_ns()
        emitted = False
        while self.next_step_ns is not None:
            t_ns = self._next_step_time(self.next_step_ns)
            if t_ns is None:
                break
            if final:
                # At the end of input, steps continue while every stream still reaches them.
                reach = t_ns - self.tolerance_ns
                if any(s.newest_ns is None or s.newest_ns < reach for s in self._sampler_list):
                    break
            elif not self._ready(t_ns):
                break
            self._send_samples()
            self._emit(t_ns)
            self.next_step_ns = t_ns + (self.period_ns if self._driving is None else 1)
            emitted = True
        if emitted:  # only a step moves the point before which samples are no longer needed
            self._prune()

    def _ready(self, t_ns: int) -> bool:
        """Whether every stream, and the TF between base and end effector, is ready for a
        step at t. The stream that was not ready last time is asked first."""
        if not self._blocking.ready(t_ns, self.watermark_ns):
            return False
        for sampler in self._sampler_list:
            if not sampler.ready(t_ns, self.watermark_ns):
                self._blocking = sampler
                return False
        ee_frames = self.layout.ee_frames
        return ee_frames is None or self.tf.settled(*ee_frames, t_ns, self.watermark_ns - TF_WAIT_NS)

    def _emit(self, t_ns: int) -> None:
        sampled: dict[str, Sampled[Any]] = {}
        for name, sampler in self._samplers():
            got = sampler.sample(t_ns)
            if got is None:
                self.counts.skipped_steps[f"no {name} sample"] += 1
                return
            sampled[name] = got
        state, alignment = self._state(t_ns, sampled)
        if state is None:
            self.counts.skipped_steps["no end-effector pose in TF"] += 1
            return
        outside = [name for name, error in alignment.items() if error > self.tolerance_ns]
        for name in outside:
            self.counts.outside_tolerance[name] += 1
        if outside and self.config.drop_outside_tolerance:
            self.counts.skipped_steps["outside sync tolerance (dropped)"] += 1
            return
        step = _Step(
            timestamp=(t_ns - self._clock_ns(t_ns)) / NS,
            state=state,
            frames={name: int(sampled[name].value) for name in self.cameras},
            samples=self._sample_indices(sampled),
            alignment_ms={name: error / 1e6 for name, error in alignment.items()},
        )
        if self.config.action.topic is not None:
            self._write_step(step, np.asarray(sampled["action"].value))
            return
        # Fallback action: the next step's joint positions, so hold this step one step.
        if self.pending_fallback is not None:
            self._write_step(self.pending_fallback, self._fallback_action(state))
        self.pending_fallback = step

    def _fallback_action(self, next_state: dict[str, np.ndarray]) -> np.ndarray:
        parts = [next_state["joint_positions"]]
        if "gripper_position" in next_state:
            parts.append(next_state["gripper_position"])
        return np.concatenate(parts)

    def _write_step(self, step: _Step, action: np.ndarray) -> None:
        self.writer.add_step(
            step.timestamp,
            step.state,
            action,
            frames=step.frames,
            samples=step.samples,
            alignment_ms=step.alignment_ms,
        )
        self.steps_written += 1

    def _sample_indices(self, sampled: dict[str, Sampled[Any]]) -> dict[str, int]:
        indices = {}
        if self.config.joint_states and self.config.joint_states.native:
            indices["joint_states"] = sampled["joint_states"].index
        for mapping in self.config.wrenches:
            if mapping.native:
                indices[mapping.name] = sampled[mapping.name].index
        for name in self.range.scans:
            indices[name] = sampled[name].index
        return indices

    def _state(
        self, t_ns: int, sampled: dict[str, Sampled[Any]]
    ) -> tuple[dict[str, np.ndarray] | None, dict[str, int]]:
        joints = np.asarray(sampled["joint_states"].value)
        arm = len(self.layout.arm_joints)
        state: dict[str, np.ndarray] = {
            "joint_positions": joints[0, :arm],
            "joint_velocities": _zero_missing(joints[1, :arm]),
        }
        if self.layout.with_torques:
            state["joint_torques"] = _zero_missing(joints[2, :arm])
        if self.layout.gripper_joints:
            state["gripper_position"] = joints[0, arm:]
        alignment = {name: got.error_ns for name, got in sampled.items()}
        if self.layout.ee_frames is not None:
            found = self.tf.lookup(*self.layout.ee_frames, t_ns)
            if found is None:
                return None, alignment
            state["ee_position"] = found.pose.translation
            state["ee_orientation"] = found.pose.rotation
            alignment["end_effector"] = found.gap_ns
        for mapping in self.config.wrenches:
            state[mapping.name] = np.asarray(sampled[mapping.name].value)
        return state, alignment

    def _prune(self) -> None:
        if self.next_step_ns is None:
            return
        keep_from = self.next_step_ns - self.tolerance_ns - NS
        for _, sampler in self._samplers():
            sampler.prune_before(keep_from)
        self.tf.prune_before(keep_from)

    def scene_annotations(self) -> Rendered | None:
        """The detections' annotations of the episode (``pipeline.detections``), once finished."""
        if self.detections is None:
            return None
        # The episode's zero: the writer's origin (its first step's or sample's time), on the
        # clock the writer is given (``_clock_ns``), which an audio chunk may have started earlier.
        origin = self.writer.episode_origin
        if self._clock_origin_ns is None or origin is None:
            return self.detections.rendered(None)
        return self.detections.rendered(self._clock_origin_ns + round(origin * NS))

    def finish(self) -> None:
        """Emit the steps the end of input made ready; a held fallback step gets the last state.
        Native-rate samples after the last step are written too."""
        self._emit_ready_steps(final=True)
        self._send_samples()
        if self.pending_fallback is not None:
            step = self.pending_fallback
            self._write_step(step, self._fallback_action(step.state))
            self.pending_fallback = None
