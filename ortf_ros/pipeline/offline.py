"""The bag driver: one recording -> ORTF episodes, through the pieces a live recorder uses too.

A bag is seekable, so the prologue is read ahead from its start (``PrologueBuilder``),
the dataset described from it (``describe``), and then the whole recording streamed
from the start again into an ``EpisodeSession``, split into episodes by the mapping's
``Segmenter``. What is bag-specific lives here and only here: reading ahead, the rates
from the bag's index, the segmenter, the runs of a chunk, progress by message count.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ClockOffsetError, MappingError, SourceError
from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.pipeline.assembly.counts import TopicCounts
from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.describe import describe
from ortf_ros.pipeline.episodes import Segmenter
from ortf_ros.pipeline.fastpath import SampleDecoder, has_blocks
from ortf_ros.pipeline.flow import OFFLINE, Flow
from ortf_ros.pipeline.mapping import SyncTolerance, TopicMapping
from ortf_ros.pipeline.prologue import Prologue, PrologueBuilder
from ortf_ros.pipeline.robot import copy_meshes
from ortf_ros.pipeline.session import EpisodeSession
from ortf_ros.pipeline.sources.bag import BagSource, Salvage
from ortf_ros.pipeline.sources.identity import recording_identity

COLLECTION = {"operator": "human_teleop", "source": "ortf-bag2ortf"}
CONVERTER_STEP_BATCH = OFFLINE.step_batch
"""``WriterConfig.step_batch`` of a conversion unless its mapping sets one (a live
recorder's is 8). A conversion runs many times faster than real time, so 8 steps would
mean an append to each staging log every few milliseconds; and a recording stays on
disk, so what a killed conversion did not log is had again by converting it again."""


def converter_writer_config(mapping: TopicMapping) -> WriterConfig:
    """A conversion's writer settings: the mapping's ``writer:`` section over the converter's
    defaults."""
    return mapping.writer_over(WriterConfig(step_batch=CONVERTER_STEP_BATCH))


def register_types(source: BagSource, decoder: Decoder) -> None:
    """The recording's own message definitions (custom types, or older layouts of known ones)."""
    for topic in source.topics():
        if topic.definition and topic.definition_format:
            decoder.register(topic.original_msgtype, topic.definition, topic.definition_format)


def read_prologue(
    source: BagSource, decoder: SampleDecoder, config: TopicMapping, *, urdf_given: bool = False
) -> Prologue:
    """Read from the recording's start until the prologue is complete (or the end)."""
    present = {t.topic for t in source.topics() if t.count}
    rates = {t.topic: t.rate_hz or 0.0 for t in source.topics()}
    builder = PrologueBuilder(config, decoder, present, rates=rates, urdf_given=urdf_given)
    for raw in source.messages(builder.wanted):
        builder.accept(raw)
        if builder.complete():
            break
    return builder.result()


@dataclass(frozen=True)
class ConversionResult:
    inputs: tuple[str, ...]
    episodes: tuple[EpisodeRecord, ...]
    counts: TopicCounts
    seconds: float
    recording_seconds: float
    warnings: tuple[str, ...]
    sync_tolerance: SyncTolerance
    salvaged: tuple[Salvage, ...] = ()  # the recording's files read only in part (cut short)
    clock: tuple[str, ...] = ()
    """What the episodes' clock offsets said (``ClockOffsets.note``): one line each, once."""
    startup_seconds: float = 0.0
    """Of ``seconds``, the time the video encoder processes took to start (each imports
    PyAV and OpenCV: a few tenths of a second, more on a first run whose libraries are
    not yet in the page cache), said apart so that the speed is the conversion's."""

    @property
    def speed_x_realtime(self) -> float | None:
        """Recording seconds per second of conversion, encoder start-up left out."""
        working = self.seconds - self.startup_seconds
        return self.recording_seconds / working if working > 0 else None


def convert_recording(
    recording: list[Path] | BagSource,
    output: Path,
    config: TopicMapping,
    *,
    urdf: str | None = None,
    name: str = "ortf-bag2ortf dataset",
    writer_config: WriterConfig | None = None,
    mesh_path: Sequence[Path] = (),
    progress: Callable[[int, int], None] | None = None,
    flow: Flow = OFFLINE,
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
    with nullcontext(recording) if isinstance(recording, BagSource) else BagSource(recording) as source:
        inputs = source.paths
        identity = recording_identity(inputs)
        check_topics(config, source, inputs[0])
        register_types(source, decoder)
        samples = SampleDecoder(decoder)
        prologue = read_prologue(source, samples, config, urdf_given=urdf is not None)
        description = describe(config, prologue, name=name, collection=COLLECTION, urdf=urdf)
        warnings = [*source.salvage_warnings(), *description.warnings]
        if writer_config is None:
            writer_config = converter_writer_config(config)
        counts = TopicCounts()
        writer = DatasetWriter(output, description.manifest, config=writer_config, urdf=description.urdf)
        with writer:
            startup_seconds = _start_encoders(writer)
            robot = description.robot
            if robot is not None and mesh_path:
                report = copy_meshes(robot.mesh_uris, mesh_path, output / layout.MESHES_DIR)
                warnings += [f"mesh not found on --mesh-path: {uri}" for uri in report.missing]
                warnings += [f"mesh URI not a package:// path inside its package: {uri}" for uri in report.invalid]
            session = EpisodeSession(
                writer,
                config,
                description.steps,
                samples,
                flow,
                counts=counts,
                source=identity,
                parameter_sets=dict(prologue.parameter_sets),
            )
            try:
                _stream(source, samples, config, session, progress, flow.progress_every)
            except ClockOffsetError as exc:  # (said of the recording)
                session.discard()
                raise ClockOffsetError(f"{inputs[0]}: {exc}") from None
            except BaseException:
                session.discard()
                raise
            if session.records:
                writer.complete_source([r.episode_id for r in session.records], len(session.records))
        if not session.records:
            raise SourceError(f"{inputs[0]}: no episode could be assembled ({dict(counts.skipped_steps)})")
        warnings += [f"TF: {line}" for line in session.tf.problems()]
        warnings += [
            f"{msgtype}: the recording holds no definition of it; read as {label} layout, the one its bytes fit"
            for msgtype, label in decoder.guessed.items()
        ]
        warnings += [
            f"{topic}: {late} message(s) recorded more than max_latency_ms ({config.max_latency_ms:g} ms) after "
            "their stamp: steps may have been decided without them; raise max_latency_ms to wait for them"
            for topic, late in sorted(counts.late.items())
        ]
        return ConversionResult(
            inputs=tuple(str(p) for p in inputs),
            episodes=tuple(session.records),
            counts=counts,
            seconds=time.monotonic() - started,
            recording_seconds=source.duration,
            warnings=tuple(warnings),
            sync_tolerance=description.tolerance,
            salvaged=tuple(source.salvaged),
            clock=tuple(session.clock_notes),
            startup_seconds=startup_seconds,
        )


def _start_encoders(writer: DatasetWriter) -> float:
    """Start the cameras' encoder processes and wait until they serve; how long that took.
    (Started at their first frames instead, their start-up would be spread over the
    conversion's first second and hidden in its speed.)"""
    if not writer.manifest.cameras:
        return 0.0
    started = time.monotonic()
    writer.start_encoders().wait()
    return time.monotonic() - started


def _stream(
    source: BagSource,
    decoder: SampleDecoder,
    config: TopicMapping,
    session: EpisodeSession,
    progress: Callable[[int, int], None] | None,
    progress_every: int,
) -> None:
    """The main pass: every mapped message, split into episodes, into the session.
    The fast path's topics come as runs (``BagSource.batches``) when the recording is one
    episode; a split needs every message's time, so then they come one by one."""
    labels = config.labels
    boundary = config.episodes.topic if config.episodes.mode == "topic" else None
    task_topic = labels.task_topic
    segmenter = Segmenter(config.episodes, source.start_ns)
    if segmenter.inside:
        session.begin(recorded_ns=source.start_ns)  # (recorded then, not converted now)
    topics = mapped_topics(config) & {t.topic for t in source.topics()}
    wanted = topics | {t for t in (boundary, task_topic) if t is not None}
    runs = {t.topic for t in source.topics() if t.topic in topics and has_blocks(t.msgtype)}
    tf_topics = {*config.tf_topics, *config.tf_static_topics}
    if len(tf_topics & runs) > 1:
        runs -= tf_topics  # (runs of two topics are not in order with each other, and TF must be: ``BlockFeed``)
    total = sum(t.count for t in source.topics() if t.topic in wanted)
    done = reported = 0

    def end() -> None:
        session.end(labels.success, labels.failure_reason, labels.operator_notes)

    for batch in source.batches(wanted, runs if config.episodes.mode == "input" else ()):
        for raw in batch.messages:
            if raw.topic == task_topic:
                task = getattr(decoder.decoder.decode(raw), "data", None)
                if isinstance(task, str) and task.strip():
                    session.set_task(task.strip())
                continue
            if raw.topic == boundary:
                decision = segmenter.boundary(raw, decoder.decoder.decode(raw))
            else:
                decision = segmenter.data(raw)
            if decision == "begin":
                end()
                session.begin(recorded_ns=raw.receive_ns)
            elif decision == "end":
                end()
            if raw.topic != boundary:
                session.accept(raw)
        for run in batch.runs:  # (only for a single episode, which is open throughout)
            session.accept_run(run)
        session.end_batch()
        done += len(batch.messages) + sum(len(run) for run in batch.runs)
        if progress is not None and done - reported >= progress_every:
            progress(done, total)
            reported = done
    end()


def check_topics(config: TopicMapping, source: BagSource, where: Path) -> None:
    """A mapping that names a topic the recording does not have is a mistake worth one clear
    line; but not a camera_info topic: the conversion falls back to the calibration file
    or unknown intrinsics, and warns (many recordings have it for some cameras only)."""
    recorded = {t.topic for t in source.topics() if t.count}
    optional = {config.robot_description_topic, *config.tf_topics, *config.tf_static_topics}
    optional |= {c.camera_info_topic for c in config.cameras if c.camera_info_topic is not None}
    optional |= {t for a in config.audio if a.info_topic is None for t in a.info_topics}  # (guessed siblings)
    missing = [t for t in config.topics() if t not in recorded and t not in optional]
    if missing:
        raise MappingError(f"{where}: the mapping names topic(s) the recording does not have: {', '.join(missing)}")


def mapped_topics(config: TopicMapping) -> set[str]:
    """The topics whose messages become the episodes' data (TF included)."""
    topics = {*config.tf_topics, *config.tf_static_topics, *(c.topic for c in config.cameras)}
    topics |= {w.topic for w in config.wrenches}
    topics |= {t for a in config.audio for t in (a.topic, *a.info_topics)}
    topics |= {s.topic for s in config.laser_scans} | {p.topic for p in config.point_clouds}
    if config.joint_states is not None:
        topics.add(config.joint_states.topic)
    if config.action.topic is not None:
        topics.add(config.action.topic)
    if config.detections is not None:
        topics.add(config.detections.topic)
    return topics
