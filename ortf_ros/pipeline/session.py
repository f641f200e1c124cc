"""The episode being recorded: the one object a bag loop and a recorder node both drive.

Begin with a task, accept messages (each goes through the fast path's blocks to the
assembler and the writer), flush (steps are decided: by count offline, by the clock
live), end with an outcome (committed) or discard. Between episodes nothing is
written, but the TF tree stays current (a static transform arrives once, before
anything else, and belongs to every episode), so every message is still accepted.

Single-threaded: a recorder's service handlers post their commands to the thread that
feeds the session rather than calling it themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ortf_ros.dataset.catalog import iso_utc
from ortf_ros.dataset.writer import Annotations, DatasetWriter
from ortf_ros.errors import WriterError
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.pipeline.accounting import EpisodeTally
from ortf_ros.pipeline.assembly.assembler import Assembler
from ortf_ros.pipeline.assembly.counts import TopicCounts
from ortf_ros.pipeline.assembly.steps import StepLayout
from ortf_ros.pipeline.batching import BlockFeed
from ortf_ros.pipeline.fastpath import SampleDecoder
from ortf_ros.pipeline.flow import Flow
from ortf_ros.pipeline.mapping import TopicMapping
from ortf_ros.pipeline.samples import RawMessage, RawRun, TransformSample
from ortf_ros.pipeline.sources.identity import RecordingIdentity
from ortf_ros.pipeline.streams.detections import with_detections
from ortf_ros.pipeline.streams.h264_camera import ParameterSets
from ortf_ros.pipeline.tf import TfBuffer

DISCARDED_EMPTY = "episode without a complete step (discarded)"


class EpisodeSession:
    """Episodes of one ``DatasetWriter`` (already open), one at a time.

    ``tf`` is the TF tree the prologue gathered: static transforms seen before the first
    episode are in every episode's tree. ``source``: the recording converted, whose
    identity each episode records (``EpisodeSource``); None live.
    """

    def __init__(
        self,
        writer: DatasetWriter,
        config: TopicMapping,
        steps: StepLayout,
        decoder: SampleDecoder,
        flow: Flow,
        *,
        tf: TfBuffer | None = None,
        counts: TopicCounts | None = None,
        source: RecordingIdentity | None = None,
        parameter_sets: dict[str, ParameterSets] | None = None,
    ) -> None:
        self.writer = writer
        self.config = config
        self.steps = steps
        self.decoder = decoder
        self.flow = flow
        self.tf = tf if tf is not None else TfBuffer()
        self.counts = counts if counts is not None else TopicCounts()
        self.source = source  # the recording converted (offline), written on each episode
        self.feed = BlockFeed(decoder, flow.block_messages)
        self.records: list[EpisodeRecord] = []
        self.clock_notes: list[str] = []  # what the episodes' clock offsets said (``ClockOffsets.note``), each once
        self.clock_note: str | None = None  # what the last episode's said
        self.task = config.labels.task
        self._assembler: Assembler | None = None
        self._episode_id: str | None = None
        self._tally = EpisodeTally(self.counts)  # (made anew as each episode begins)
        self._tf_topics = {*config.tf_topics, *config.tf_static_topics}
        # H.264 cameras' latest SPS and PPS, from the prologue on and across episodes (``h264_camera``)
        self.parameter_sets = parameter_sets if parameter_sets is not None else {}

    @property
    def episode_id(self) -> str | None:
        """The open episode's id; None between episodes."""
        return self._episode_id

    @property
    def steps_written(self) -> int:
        return 0 if self._assembler is None else self._assembler.steps_written

    def set_task(self, task: str) -> None:
        """The task of the open episode (announced after it began) and of the next ones."""
        self.task = task
        if self._assembler is not None:
            self.writer.set_task(task)

    def begin(self, task: str | None = None, *, recorded_ns: int | None = None) -> str:
        """Open an episode (for ``task``, else the current one); its id. ``recorded_ns``:
        when it was recorded (a recording's time, offline); None: now."""
        if self._episode_id is not None:
            raise WriterError(f"episode {self._episode_id} is being recorded; end or discard it first")
        if task is not None:
            self.task = task
        source = None if self.source is None else self.source.episode(len(self.records))
        recorded_at = None if recorded_ns is None else iso_utc(recorded_ns)
        self._episode_id = self.writer.begin_episode(self.task, source=source, recorded_at=recorded_at)
        self._assembler = Assembler(
            self.config,
            self.writer.manifest,
            self.steps,
            self.writer,
            self.counts,
            tf=self.tf,
            native_batch=self.flow.native_batch,
            parameter_sets=self.parameter_sets,
            clock_origin_ns=recorded_ns,
        )
        self._tally = EpisodeTally(self.counts)
        return self._episode_id

    def accept(self, raw: RawMessage) -> None:
        """A message: the open episode's data, or between episodes only TF (counted as outside)."""
        if self._assembler is not None:
            self.counts.read[raw.topic] += 1
            self.feed.feed(raw, self._assembler)
            return
        if raw.topic not in self._tf_topics:
            self.counts.outside_episodes[raw.topic] += 1
            return
        # TF between episodes is kept: the tree (a /tf_static sent once before the first
        # episode holds the extrinsics) is the next episode's, so the message is used.
        self.counts.used[raw.topic] += 1
        for sample in self.decoder.samples(raw):
            if isinstance(sample, TransformSample):
                self.tf.add(sample)

    def accept_run(self, run: RawRun) -> None:
        """A run of one topic's messages of the open episode (a bag's chunk)."""
        if self._assembler is None:
            raise WriterError(f"{run.topic}: a run of messages outside an episode")
        self.counts.read[run.topic] += len(run)
        self.feed.feed_run(run, self._assembler)

    def end_batch(self) -> None:
        """The end of a batch of input: steps are decided once a block's worth came; while
        the episode's clock offsets are measured, at every batch (its streams' first
        messages must reach them, not wait for a block's worth)."""
        if self._assembler is None:
            return
        if self._assembler.clock_offsets.decided:
            self.feed.end_batch(self._assembler)
        else:
            self.feed.flush(self._assembler)

    def flush(self, input_ns: int | None = None) -> None:
        """Feed what waits and decide the steps that are ready; ``input_ns``: nothing
        received before it is still to come (a live source's clock)."""
        if self._assembler is None:
            return
        if input_ns is not None:
            self._assembler.advance_input_time(input_ns)
        self.feed.flush(self._assembler)

    def end(
        self,
        success: bool | None = None,
        failure_reason: str | None = None,
        operator_notes: str | None = None,
        *,
        annotations: Callable[[], Annotations] | None = None,
        queue_full: Mapping[str, int] | None = None,
        lost_in_transport: Mapping[str, int] | None = None,
    ) -> EpisodeRecord | None:
        """Commit the open episode with its outcome; None (discarded, counted) when no step
        could be assembled, or when no episode is open. ``annotations`` are made once the
        last steps are in (a recorder's numbers are final only then). ``queue_full`` and
        ``lost_in_transport``: a live recorder's losses of the episode, per topic, which
        its accounting adds to what the session counted (``EpisodeTally``)."""
        assembler = self._assembler
        if assembler is None:
            return None
        try:
            self.feed.flush(assembler)
            assembler.finish()
        except BaseException:
            self.discard()
            raise
        self._assembler, self._episode_id = None, None
        if assembler.steps_written == 0:
            self.writer.discard_episode()
            self.counts.skipped_steps[DISCARDED_EMPTY] += 1
            return None
        extra = with_detections(annotations() if annotations is not None else None, assembler.scene_annotations())
        clocks = assembler.clock_offsets
        self.clock_note = clocks.note
        if clocks.note is not None and clocks.note not in self.clock_notes:
            self.clock_notes.append(clocks.note)
        accounts = self._tally.accounts(
            self.config, queue_full=queue_full, lost_in_transport=lost_in_transport, clocks=clocks.streams()
        )
        record = self.writer.end_episode(
            success, failure_reason, operator_notes, annotations=extra, accounting=accounts
        )
        self.records.append(record)
        return record

    def discard(self) -> None:
        """Drop the open episode, if any (also after a failure)."""
        if self._assembler is None:
            return
        self._assembler, self._episode_id = None, None
        self.feed = BlockFeed(self.decoder, self.flow.block_messages)  # (what waited belonged to it)
        self.writer.discard_episode()
