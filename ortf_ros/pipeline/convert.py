"""One recording -> one ORTF episode: prologue, manifest, then the streaming pass.

The prologue reads just enough of the recording to describe the dataset before a
single step is written: the URDF, static transforms, camera calibration, the first
frame of each camera (its geometry), the joint names and the action's shape. The
manifest is built from that, and the main pass streams every mapped topic through
decode -> extract -> assemble -> DatasetWriter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ortf_ros.errors import ConversionError
from ortf_ros.format import layout
from ortf_ros.format.manifest import (
    ActionDimension,
    ActionSpace,
    Alignment,
    Extrinsics,
    Frame,
    Joint,
    Manifest,
    NativeStream,
    ObservationSpace,
    Resolution,
    Robot,
    Sensor,
    StateComponent,
    Transform,
)
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.pipeline.assemble import NS, Assembler, StepLayout, TopicCounts, stream_time
from ortf_ros.pipeline.batching import BlockFeed
from ortf_ros.pipeline.config import CameraMapping, ConversionConfig
from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.episodes import Segmenter
from ortf_ros.pipeline.fastpath import SampleDecoder, has_blocks
from ortf_ros.pipeline.robot import UrdfRobot, copy_meshes, robot_from_urdf
from ortf_ros.pipeline.samples import (
    CameraInfoSample,
    ImageSample,
    JointStateSample,
    RawMessage,
    RawRun,
    RobotDescriptionSample,
    Sample,
    TransformSample,
    VectorSample,
)
from ortf_ros.pipeline.source import BagSource
from ortf_ros.pipeline.tf import Pose, TfBuffer
from ortf_ros.writer import DatasetWriter, WriterConfig

PROGRESS_EVERY = 500  # messages between progress reports
PROLOGUE_TF_NS = 1_000_000_000  # dynamic TF read by the prologue, to name the moving frames
FALLBACK_ACTION = "fallback: the next step's joint positions (the recording has no action topic)"
FPS_MIN_INTERVALS = 5  # frame intervals the prologue must see before their median gives a camera's fps
FPS_MAX_FRAMES = 64  # frame times kept per camera: plenty for a median, and the prologue's memory stays flat
CONVERTER_STEP_BATCH = 64
"""``WriterConfig.step_batch`` of a conversion unless its mapping sets one (a live
recorder's is 8). A conversion runs many times faster than real time, so 8 steps would
mean an append to each staging log every few milliseconds; and a recording stays on
disk, so what a killed conversion did not log is had again by converting it again."""


def converter_writer_config(settings: Mapping[str, Any], source: str) -> WriterConfig:
    """A conversion's writer settings: the mapping's ``writer:`` section (``settings``)
    over the converter's defaults."""
    return WriterConfig.from_mapping({"step_batch": CONVERTER_STEP_BATCH, **settings}, source)


@dataclass
class Prologue:
    urdf: str | None = None
    tf: TfBuffer = field(default_factory=TfBuffer)
    dynamic_sources: dict[str, str] = field(default_factory=dict)  # child frame -> topic
    images: dict[str, ImageSample] = field(default_factory=dict)  # camera name -> first frame
    camera_info: dict[str, CameraInfoSample] = field(default_factory=dict)
    joint_state: JointStateSample | None = None
    action: JointStateSample | VectorSample | None = None
    rates: dict[str, float] = field(default_factory=dict)  # topic -> messages/s in the recording
    frame_times: dict[str, list[int]] = field(default_factory=dict)  # camera name -> its first frames' times (ns)


def samples_of(
    source: BagSource, decoder: SampleDecoder, topics: set[str]
) -> Iterator[tuple[RawMessage, list[Sample]]]:
    for raw in source.messages(topics):
        yield raw, decoder.samples(raw)


def register_types(source: BagSource, decoder: Decoder) -> None:
    for topic in source.topics():
        if topic.definition and topic.definition_format:
            decoder.register(topic.original_msgtype, topic.definition, topic.definition_format)


def read_prologue(source: BagSource, decoder: SampleDecoder, config: ConversionConfig) -> Prologue:
    prologue = Prologue(rates={t.topic: t.rate_hz or 0.0 for t in source.topics()})
    cameras = {c.topic: c for c in config.cameras}
    infos = {c.camera_info_topic: c for c in config.cameras if c.camera_info_topic is not None}
    wanted = {config.robot_description_topic, *config.tf_topics, *config.tf_static_topics, *cameras, *infos}
    if config.joint_states is not None:
        wanted.add(config.joint_states.topic)
    if config.action.topic is not None:
        wanted.add(config.action.topic)
    wanted &= {t.topic for t in source.topics()}
    first_ns: int | None = None
    for raw, samples in samples_of(source, decoder, wanted):
        first_ns = raw.receive_ns if first_ns is None else first_ns
        for sample in samples:
            _learn(prologue, config, cameras, infos, raw.topic, sample)
        if _complete(prologue, config, cameras, infos) and raw.receive_ns - first_ns > PROLOGUE_TF_NS:
            break
    return prologue


def _learn(
    prologue: Prologue,
    config: ConversionConfig,
    cameras: Mapping[str, CameraMapping],
    infos: Mapping[str, CameraMapping],
    topic: str,
    sample: Sample,
) -> None:
    if isinstance(sample, RobotDescriptionSample) and topic == config.robot_description_topic:
        prologue.urdf = prologue.urdf or sample.urdf
    elif isinstance(sample, TransformSample):
        if prologue.tf.add(sample) and not sample.static:
            prologue.dynamic_sources.setdefault(sample.child, topic)
    elif isinstance(sample, ImageSample) and topic in cameras:
        camera = cameras[topic]
        prologue.images.setdefault(camera.name, sample)
        times = prologue.frame_times.setdefault(camera.name, [])
        if len(times) < FPS_MAX_FRAMES:
            times.append(stream_time(sample.stamps, camera.time))
    elif isinstance(sample, CameraInfoSample) and topic in infos:
        prologue.camera_info.setdefault(infos[topic].name, sample)
    elif isinstance(sample, JointStateSample) and config.joint_states and topic == config.joint_states.topic:
        prologue.joint_state = prologue.joint_state or sample
    elif isinstance(sample, (JointStateSample, VectorSample)) and topic == config.action.topic:
        prologue.action = prologue.action or sample


def _complete(
    prologue: Prologue,
    config: ConversionConfig,
    cameras: Mapping[str, CameraMapping],
    infos: Mapping[str, CameraMapping],
) -> bool:
    return (
        prologue.urdf is not None
        and len(prologue.images) == len(cameras)
        and len(prologue.camera_info) == len(infos)
        and (config.joint_states is None or prologue.joint_state is not None)
        and (config.action.topic is None or prologue.action is not None)
    )


# -- manifest ---------------------------------------------------------------------------


def step_layout(config: ConversionConfig, prologue: Prologue, robot: UrdfRobot | None) -> StepLayout:
    if prologue.joint_state is None:
        raise ConversionError("no JointState message on the joint_states topic: nothing to build steps from")
    if robot is not None:
        gripper = robot.gripper_joints
        arm = tuple(j.name for j in robot.arm_joints)
    else:
        names = tuple(prologue.joint_state.names)
        gripper = tuple(n for n in names if n in config.gripper_joints)
        arm = tuple(n for n in names if n not in gripper)
    ee_frames = None
    base = config.base_frame or (robot.base_link if robot is not None else None)
    ee = config.end_effector_frame or (robot.end_effector_link if robot is not None else None)
    if base and ee and ee in prologue.tf.frames():
        ee_frames = (base, ee)
    action = prologue.action
    if config.action.topic is None:
        action_names = arm + gripper
    elif action is None:
        raise ConversionError(f"{config.action.topic}: the action topic has no usable message")
    elif isinstance(action, JointStateSample):
        action_names = tuple(n for n in arm + gripper if n in action.names)
    else:
        action_names = action.names
    return StepLayout(
        arm_joints=arm,
        gripper_joints=gripper,
        with_torques=len(prologue.joint_state.effort) > 0,
        ee_frames=ee_frames,
        action_names=action_names,
        action_by_joint_name=isinstance(action, JointStateSample) or config.action.topic is None,
    )


def build_manifest(
    config: ConversionConfig, prologue: Prologue, robot: UrdfRobot | None, steps: StepLayout, name: str
) -> Manifest:
    joints = steps.joints
    state = {
        "joint_positions": StateComponent(len(steps.arm_joints), "radians", names=steps.arm_joints),
        "joint_velocities": StateComponent(len(steps.arm_joints), "rad_per_s", names=steps.arm_joints),
    }
    if steps.with_torques:
        state["joint_torques"] = StateComponent(len(steps.arm_joints), "newton_meters", names=steps.arm_joints)
    if steps.ee_frames is not None:
        state["ee_position"] = StateComponent(3, "meters", frame=steps.ee_frames[0])
        state["ee_orientation"] = StateComponent(4, "quaternion", frame=steps.ee_frames[0], order="wxyz")
    if steps.gripper_joints:
        state["gripper_position"] = StateComponent(len(steps.gripper_joints), "meters", names=steps.gripper_joints)
    sensors: list[Sensor] = []
    native: dict[str, NativeStream] = {}
    for wrench in config.wrenches:
        state[wrench.name] = StateComponent(6, "newtons_newton_meters", names=("fx", "fy", "fz", "tx", "ty", "tz"))
        rate = prologue.rates.get(wrench.topic, 0.0)
        sensors.append(
            Sensor(
                name=wrench.name,
                type="force_torque",
                # A bag does not say the sensor's range; "unknown" says so instead of inventing one.
                extra={
                    "rate_hz": rate,
                    "range_force": "unknown" if wrench.range_force is None else wrench.range_force,
                    "range_torque": "unknown" if wrench.range_torque is None else wrench.range_torque,
                    "source": wrench.topic,
                },
            )
        )
        if wrench.native:
            native[wrench.name] = NativeStream(
                columns={"force": StateComponent(3, "newtons"), "torque": StateComponent(3, "newton_meters")},
                sensor=wrench.name,
                rate_hz=rate,
                source=wrench.topic,
            )
    if config.joint_states is not None and config.joint_states.native:
        native["joint_states"] = NativeStream(
            columns={
                "position": StateComponent(len(joints), names=joints),
                "velocity": StateComponent(len(joints), names=joints),
                "effort": StateComponent(len(joints), names=joints),
            },
            rate_hz=prologue.rates.get(config.joint_states.topic, 0.0),
            source=config.joint_states.topic,
        )
    images = {}
    for camera in config.cameras:
        images[camera.name] = camera.name
        sensors.append(_camera_sensor(config, prologue, camera.name, camera.topic, camera.kind))
    return Manifest(
        dataset_id="",
        name=name,
        robot=_robot(robot, steps),
        action_space=_action_space(config, steps),
        observation_space=ObservationSpace(state=state, images=images),
        sensors=tuple(sensors),
        frames=_frames(config, prologue, steps),
        collection={"operator": "human_teleop", "source": "ortf-bag2ortf"},
        sync_tolerance_ms=_tolerance_ms(config),
        native_streams=native,
        alignment=Alignment(streams=_aligned_streams(config, steps)),
    )


def _robot(robot: UrdfRobot | None, steps: StepLayout) -> Robot:
    ee = steps.ee_frames[1] if steps.ee_frames else None
    if robot is not None:
        return robot.manifest_robot(end_effector_link=ee or robot.end_effector_link)
    # No URDF: joints as the joint states name them; their types and limits are unknown.
    joints = tuple(Joint(name, "revolute", i) for i, name in enumerate(steps.arm_joints))
    gripper = {"joints": list(steps.gripper_joints)} if steps.gripper_joints else None
    return Robot(name="unknown", dof=len(joints), joints=joints, gripper=gripper, end_effector_link=ee)


def _tolerance_ms(config: ConversionConfig) -> float:
    if config.sync_tolerance_ms is not None:
        return config.sync_tolerance_ms
    rate = config.step.rate_hz or 30.0
    return 1000.0 / rate / 2


def _aligned_streams(config: ConversionConfig, steps: StepLayout) -> tuple[str, ...]:
    names = ["joint_states", *(w.name for w in config.wrenches), *(c.name for c in config.cameras)]
    if config.action.topic is not None:
        names.append("action")
    if steps.ee_frames is not None:
        names.append("end_effector")
    return tuple(names)


def _action_space(config: ConversionConfig, steps: StepLayout) -> ActionSpace:
    if steps.action_by_joint_name:
        dims = tuple(
            ActionDimension(n, i, "position", "radians" if n in steps.arm_joints else "meters")
            for i, n in enumerate(steps.action_names)
        )
        kind = "joint_position"
    else:
        dims = tuple(ActionDimension(n, i, "continuous", "normalized") for i, n in enumerate(steps.action_names))
        kind = "command"
    extra = {"source": config.action.topic} if config.action.topic else {"source": FALLBACK_ACTION}
    return ActionSpace(type=kind, dimensions=dims, control_frequency_hz=config.step.rate_hz, extra=extra)


def _camera_sensor(config: ConversionConfig, prologue: Prologue, name: str, topic: str, kind: str) -> Sensor:
    first = prologue.images.get(name)
    if first is None:
        raise ConversionError(f"{topic}: camera {name!r} has no decodable frame")
    height, width = first.pixels.shape[:2]
    info = prologue.camera_info.get(name)
    intrinsics = None
    distortion = None
    if info is not None:
        intrinsics = {"fx": info.k[0], "fy": info.k[4], "cx": info.k[2], "cy": info.k[5]}
        distortion = {"model": info.distortion_model, "coefficients": list(info.d)}
    extrinsics = None
    frame_id = first.stamps.frame_id
    parent = prologue.tf.frames().get(frame_id)
    if parent is not None:
        found = prologue.tf.lookup(parent.parent, frame_id, first.stamps.header_ns or first.stamps.receive_ns)
        if found is not None:
            extrinsics = Extrinsics(
                parent.parent,
                _transform(found.pose),
            )
    extra: dict[str, object] = {"source": topic, "frame_id": frame_id}
    if kind == "depth":
        extra.update(bit_depth=16, depth_units="millimeters", depth_range=[0.0, 65.535])
    return Sensor(
        name=name,
        type="depth_camera" if kind == "depth" else "camera",
        mount_link=frame_id or None,
        resolution=Resolution(width, height),
        fps=camera_fps(prologue, name, topic),
        intrinsics=intrinsics,
        distortion=distortion,
        extrinsics=extrinsics,
        extra=extra,
    )


def camera_fps(prologue: Prologue, name: str, topic: str) -> float:
    """The camera's frame rate, from the median interval between its first frames (on
    the camera's clock): a camera that paused during the recording published fewer
    messages per second of it than frames per second. The topic's rate over the whole
    recording only when the prologue saw too few frames to tell."""
    intervals = np.diff(np.asarray(prologue.frame_times.get(name, []), dtype=np.int64))
    intervals = intervals[intervals > 0]
    rate = NS / float(np.median(intervals)) if len(intervals) >= FPS_MIN_INTERVALS else prologue.rates.get(topic, 0.0)
    return float(max(1, round(rate)))


def _transform(pose: Pose) -> Transform:
    t, r = pose.translation, pose.rotation
    return Transform((float(t[0]), float(t[1]), float(t[2])), (float(r[0]), float(r[1]), float(r[2]), float(r[3])))


def _frames(config: ConversionConfig, prologue: Prologue, steps: StepLayout) -> dict[str, Frame]:
    """Every TF frame: static ones fixed with their transform, moving ones dynamic with their topic."""
    frames: dict[str, Frame] = {}
    tree = prologue.tf.frames()
    for root in prologue.tf.roots():
        frames[root] = Frame("fixed", description="root of the TF tree")
    for child, edge in tree.items():
        if edge.static and edge.pose is not None:
            frames[child] = Frame("fixed", parent=edge.parent, transform=_transform(edge.pose))
        else:
            frames[child] = Frame("dynamic", parent=edge.parent, source=prologue.dynamic_sources.get(child, "/tf"))
    world = config.world_frame or (prologue.tf.roots()[0] if prologue.tf.roots() else None)
    if world is not None and "world" not in frames:
        frames["world"] = Frame("fixed", description=f"the TF frame {world!r}", extra={"tf_frame": world})
    if steps.ee_frames is not None:
        base, ee = steps.ee_frames
        if "robot_base" not in frames:
            frames["robot_base"] = Frame("fixed", description=f"the TF frame {base!r}", extra={"tf_frame": base})
        if "end_effector" not in frames:
            frames["end_effector"] = Frame(
                "dynamic", parent=base, source="tf", description=f"the TF frame {ee!r}", extra={"tf_frame": ee}
            )
    return frames


# -- the conversion --------------------------------------------------------------------------


@dataclass(frozen=True)
class ConversionResult:
    inputs: tuple[str, ...]
    episodes: tuple[EpisodeRecord, ...]
    counts: TopicCounts
    seconds: float
    recording_seconds: float
    warnings: tuple[str, ...]


def convert_recording(
    recording: list[Path] | BagSource,
    output: Path,
    config: ConversionConfig,
    *,
    urdf: str | None = None,
    name: str = "ortf-bag2ortf dataset",
    writer_config: WriterConfig | None = None,
    mesh_path: Sequence[Path] = (),
    progress: Callable[[int, int], None] | None = None,
) -> ConversionResult:
    """Convert one recording (a bag, or the parts of one) into episodes of ``output``
    (one, unless the mapping's ``episodes`` splits it).

    ``recording`` is its files, or a ``BagSource`` of them already open (as to choose the
    mapping): opening a rosbag2 again costs tens of milliseconds, mostly its QoS YAML.
    ``writer_config`` defaults to ``converter_writer_config`` of the mapping's ``writer:``;
    ``mesh_path`` resolves the URDF's ``package://`` meshes into robot/meshes;
    ``progress(done, total)`` is told how many messages were read.
    """
    started = time.monotonic()
    decoder = Decoder()
    warnings: list[str] = []
    with nullcontext(recording) if isinstance(recording, BagSource) else BagSource(recording) as source:
        inputs = source.paths
        check_topics(config, source, inputs[0])
        register_types(source, decoder)
        samples = SampleDecoder(decoder)
        prologue = read_prologue(source, samples, config)
        urdf_text = urdf or prologue.urdf
        robot = None
        if urdf_text:
            source_name = "--urdf" if urdf else config.robot_description_topic
            robot = robot_from_urdf(urdf_text, gripper_joints=config.gripper_joints, source=source_name)
        if robot is None:
            state_topic = config.joint_states.topic if config.joint_states else "the joint states"
            warnings.append(
                f"no URDF on {config.robot_description_topic} and none given: joints named from {state_topic}"
            )
        steps = step_layout(config, prologue, robot)
        manifest = build_manifest(config, prologue, robot, steps, name)
        counts = TopicCounts()
        topics = _mapped_topics(config) & {t.topic for t in source.topics()}
        if writer_config is None:
            writer_config = converter_writer_config(config.writer, "the mapping's writer settings")
        writer = DatasetWriter(output, manifest, config=writer_config, urdf=urdf_text)
        with writer:
            if robot is not None and mesh_path:
                report = copy_meshes(robot.mesh_uris, mesh_path, output / layout.MESHES_DIR)
                warnings += [f"mesh not found on --mesh-path: {uri}" for uri in report.missing]
                warnings += [f"mesh URI not a package:// path inside its package: {uri}" for uri in report.invalid]
            episodes = _Episodes(config, steps, writer, counts, BlockFeed(samples))
            try:
                _stream(source, samples, config, topics, episodes, progress)
            except BaseException:
                episodes.abort()
                raise
        if not episodes.records:
            raise ConversionError(f"{inputs[0]}: no episode could be assembled ({dict(counts.skipped_steps)})")
        warnings += [f"TF: {line}" for line in episodes.tf.problems()]
        warnings += [
            f"{topic}: {late} message(s) recorded more than max_latency_ms ({config.max_latency_ms:g} ms) after "
            "their stamp: steps may have been decided without them; raise max_latency_ms to wait for them"
            for topic, late in sorted(counts.late.items())
        ]
        return ConversionResult(
            inputs=tuple(str(p) for p in inputs),
            episodes=tuple(episodes.records),
            counts=counts,
            seconds=time.monotonic() - started,
            recording_seconds=source.duration,
            warnings=tuple(warnings),
        )


class _Episodes:
    """The episode being assembled, if any; latched state (the TF tree) is shared by all."""

    def __init__(
        self, config: ConversionConfig, steps: StepLayout, writer: DatasetWriter, counts: TopicCounts, feed: BlockFeed
    ) -> None:
        self.config = config
        self.steps = steps
        self.writer = writer
        self.counts = counts
        self.feed = feed
        self.tf = TfBuffer()
        self.current: Assembler | None = None
        self.records: list[EpisodeRecord] = []
        self.task = config.labels.task  # the latest instruction on the task topic, if there is one

    def set_task(self, task: str) -> None:
        self.task = task
        if self.current is not None:
            self.writer.set_task(task)

    def begin(self) -> None:
        self.end()
        self.writer.begin_episode(self.task)
        self.current = Assembler(self.config, self.writer.manifest, self.steps, self.writer, self.counts, tf=self.tf)

    def add(self, raw: RawMessage) -> None:
        """A message of the open episode."""
        assert self.current is not None
        self.feed.feed(raw, self.current)

    def add_run(self, run: RawRun) -> None:
        """A run of messages of the open episode."""
        assert self.current is not None
        self.feed.feed_run(run, self.current)

    def end_batch(self) -> None:
        if self.current is not None:
            self.feed.end_batch(self.current)

    def end(self) -> None:
        if self.current is None:
            return
        self.feed.flush(self.current)
        self.current.finish()
        if self.current.steps_written == 0:
            self.writer.discard_episode()
            self.counts.skipped_steps["episode without a complete step (discarded)"] += 1
        else:
            labels = self.config.labels
            self.records.append(self.writer.end_episode(labels.success, labels.failure_reason, labels.operator_notes))
        self.current = None

    def abort(self) -> None:
        if self.current is not None:
            self.writer.discard_episode()
            self.current = None


def _stream(
    source: BagSource,
    decoder: SampleDecoder,
    config: ConversionConfig,
    topics: set[str],
    episodes: _Episodes,
    progress: Callable[[int, int], None] | None,
) -> None:
    """The main pass: every mapped message, split into episodes, through the assembler.
    The fast path's topics come as runs (``BagSource.batches``) when the recording is one
    episode; a split needs every message's time, so then they come one by one."""
    boundary = config.episodes.topic if config.episodes.mode == "topic" else None
    task_topic = config.labels.task_topic
    segmenter = Segmenter(config.episodes, source.start_ns)
    if segmenter.inside:
        episodes.begin()
    wanted = topics | {t for t in (boundary, task_topic) if t is not None}
    runs = {t.topic for t in source.topics() if t.topic in topics and has_blocks(t.msgtype)}
    tf_topics = {*config.tf_topics, *config.tf_static_topics}
    if len(tf_topics & runs) > 1:
        runs -= tf_topics  # (runs of two topics are not in order with each other, and TF must be: ``BlockFeed``)
    total = sum(t.count for t in source.topics() if t.topic in wanted)
    done = reported = 0
    for batch in source.batches(wanted, runs if config.episodes.mode == "input" else ()):
        for raw in batch.messages:
            if raw.topic == task_topic:
                task = getattr(decoder.decoder.decode(raw), "data", None)
                if isinstance(task, str) and task.strip():
                    episodes.set_task(task.strip())
                continue
            if raw.topic == boundary:
                decision = segmenter.boundary(raw, decoder.decoder.decode(raw))
            else:
                decision = segmenter.data(raw)
            if decision == "begin":
                episodes.begin()
            elif decision == "end":
                episodes.end()
            if raw.topic == boundary:
                continue
            if decision in ("begin", "keep") and episodes.current is not None:
                episodes.add(raw)
                continue
            episodes.counts.outside_episodes[raw.topic] += 1
            if raw.topic in tf_topics:  # the TF tree stays current between episodes; nothing else is decoded there
                for sample in decoder.samples(raw):
                    if isinstance(sample, TransformSample):
                        episodes.tf.add(sample)
        for run in batch.runs:  # (only for a single episode, which is open throughout)
            episodes.add_run(run)
        episodes.end_batch()
        done += len(batch.messages) + sum(len(run) for run in batch.runs)
        if progress is not None and done - reported >= PROGRESS_EVERY:
            progress(done, total)
            reported = done
    episodes.end()


def check_topics(config: ConversionConfig, source: BagSource, where: Path) -> None:
    """A mapping that names a topic the recording does not have is a mistake worth one clear line."""
    recorded = {t.topic for t in source.topics() if t.count}
    optional = {config.robot_description_topic, *config.tf_topics, *config.tf_static_topics}
    missing = [t for t in config.topics() if t not in recorded and t not in optional]
    if missing:
        raise ConversionError(f"{where}: the mapping names topic(s) the recording does not have: {', '.join(missing)}")


def _mapped_topics(config: ConversionConfig) -> set[str]:
    topics = {*config.tf_topics, *config.tf_static_topics, *(c.topic for c in config.cameras)}
    topics |= {w.topic for w in config.wrenches}
    if config.joint_states is not None:
        topics.add(config.joint_states.topic)
    if config.action.topic is not None:
        topics.add(config.action.topic)
    return topics
