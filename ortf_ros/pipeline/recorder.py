"""The live driver: subscriptions' messages into episodes, driven by commands.

The same pieces as a bag conversion (``PrologueBuilder``, ``describe``,
``EpisodeSession``), fed from a ``LiveSource`` instead of a file, by one pipeline thread
(``run``). What differs from a bag is only what a live source forces:

- the prologue comes from a warm-up: messages go to the ``PrologueBuilder`` until it has
  every camera's first frame, the joint state, the action, the URDF and the camera_info
  (these two it stops waiting for after ``warmup_s``, with a warning); then the dataset
  is opened. Its TF tree, static transforms included, seeds the session's, since those
  arrive only once (``recording.warmup``);
- episodes begin and end on commands (``start``, ``stop``, ``discard``), which other
  threads (a node's service handlers) post and wait for, so the session stays
  single-threaded. A command takes effect at the time it was asked: messages received
  before a start are outside the episode, those received before a stop are in it
  (``recording.commands``);
- steps are decided by the clock every ``Flow.flush_every_ms``, not only when messages
  come, so they keep coming while every topic pauses;
- health (``status``) is a snapshot other threads read at any time (``recording.health``);
- an episode whose clocks disagree (``pipeline.clock_offsets``) is refused, not the
  recorder: it is discarded with its reason, and the next episode can begin.

``LiveRecorder`` here is the pipeline thread: it takes the input, feeds it, and hands
each job to its module in ``pipeline.recording``.

No ROS here: ``ortf_ros.ros.recorder_node`` subscribes, forwards callbacks to the
source, and turns services, topics and parameters into these commands.
"""

from __future__ import annotations

import heapq
import queue
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout  # (not the builtin before Python 3.11)
from pathlib import Path
from typing import Any

from ortf_ros.dataset.catalog import load_manifest
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.staging import lock_dataset, staged_episode_dirs, unlock_dataset
from ortf_ros.errors import ClockOffsetError, DatasetBusyError, OrtfError, WriterError
from ortf_ros.errors import describe as describe_error
from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.io.video import VideoSettings
from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.fastpath import SampleDecoder
from ortf_ros.pipeline.flow import LIVE
from ortf_ros.pipeline.mapping import TopicMapping
from ortf_ros.pipeline.offline import mapped_topics
from ortf_ros.pipeline.recording.commands import Command, EpisodeCommands
from ortf_ros.pipeline.recording.health import Health
from ortf_ros.pipeline.recording.state import Counters, Labels, RecorderSettings, RecorderState, Reply, State
from ortf_ros.pipeline.recording.warmup import TF_HISTORY_NS, Warmup
from ortf_ros.pipeline.sources.live import LiveSource, Queued

LIVE_WRITER_DEFAULTS = WriterConfig(step_batch=LIVE.step_batch, video=VideoSettings(preset="ultrafast"))
"""A live recorder's writer settings unless the mapping's ``writer:`` sets them: x264's
``ultrafast`` leaves headroom on two cores for three cameras at 30 fps, and 8 steps per
staging append is what a kill can lose."""
SHUTDOWN_TIMEOUT_S = 600.0  # the last commit of a long episode may take a while
INPUT_WAIT_S = 0.1  # a command waits at most this for the subscriptions to be drained past it


def _receive_ns(item: Queued) -> int:
    return item.raw.receive_ns


def live_writer_config(mapping: TopicMapping) -> WriterConfig:
    """The recorder's writer settings: the mapping's ``writer:`` over the live defaults."""
    return mapping.writer_over(LIVE_WRITER_DEFAULTS)


class LiveRecorder:
    """One dataset recorded from ``source``; ``run`` is the pipeline thread's body. It
    takes the input and feeds it to the warm-up or the session, and hands commands to
    ``recording.commands`` and the status to ``recording.health``."""

    def __init__(
        self,
        settings: RecorderSettings,
        source: LiveSource,
        *,
        log: Callable[[str, str], None] | None = None,
        published: Callable[[str], bool] | None = None,
    ) -> None:
        self.source = source
        self.log = log or (lambda level, text: None)
        self.shared = RecorderState(settings, settings.mapping, self.log)
        self.decoder = SampleDecoder(Decoder())
        self._topics_seen = 0  # (``_learn_types``)
        self.topics = mapped_topics(settings.mapping)
        # (``published``: whether a topic has a publisher in the graph; None: assume so.)
        self.warmup = Warmup(self.shared, source, self.decoder, published or (lambda topic: True))
        self.commands = EpisodeCommands(self.shared, self.warmup, self.topics)
        self.health = Health(self.shared, source, self.warmup.missing)
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._running = True
        self._held: list[Queued] = []  # taken, but received after the command being executed
        self.health.publish()

    @property
    def settings(self) -> RecorderSettings:
        return self.shared.settings

    @settings.setter
    def settings(self, settings: RecorderSettings) -> None:
        self.shared.settings = settings

    @property
    def published(self) -> Callable[[str], bool]:
        return self.warmup.published

    @published.setter
    def published(self, published: Callable[[str], bool]) -> None:
        self.warmup.published = published

    @property
    def state(self) -> State:
        return self.shared.state

    @property
    def error(self) -> str | None:
        return self.shared.error

    @property
    def warnings(self) -> list[str]:
        return self.shared.warnings

    @property
    def records(self) -> list[EpisodeRecord]:
        return self.shared.records

    @property
    def labels(self) -> Labels:
        """What the operator said of the episode being recorded (or of the next one)."""
        return self.shared.labels

    @labels.setter
    def labels(self, labels: Labels) -> None:
        self.shared.labels = labels

    @property
    def default_labels(self) -> Labels:
        """What each episode's labels start as."""
        return self.shared.default_labels

    @default_labels.setter
    def default_labels(self, labels: Labels) -> None:
        self.shared.default_labels = labels

    # -- commands (any thread) --------------------------------------------------

    def call(self, name: str, argument: object = None, timeout_s: float = 120.0) -> Reply:
        """Post a command to the pipeline thread and wait for its reply."""
        if not self._running:
            return Reply(False, "the recorder is shutting down")
        command = Command(name, argument, self.source.clock(), Counters.of(self.source))
        self._commands.put(command)
        self._wake.set()
        try:
            return command.done.result(timeout=timeout_s)
        except (TimeoutError, FutureTimeout):
            return Reply(False, f"{name}: no answer from the pipeline within {timeout_s:g} s")

    def start(self, task: str | None = None) -> Reply:
        return self.call("start", task)

    def stop(self) -> Reply:
        return self.call("stop")

    def discard(self) -> Reply:
        return self.call("discard")

    def set_success(self, success: bool) -> Reply:
        return self.call("success", success)

    def set_failure_reason(self, reason: str) -> Reply:
        return self.call("failure_reason", reason)

    def set_operator_notes(self, notes: str) -> Reply:
        return self.call("operator_notes", notes)

    def set_task(self, task: str) -> Reply:
        return self.call("task", task)

    def shutdown(self, *, commit: bool) -> Reply:
        """End the open episode (committed, or discarded), close the dataset, stop ``run``."""
        reply = self.call("shutdown", commit, timeout_s=SHUTDOWN_TIMEOUT_S)
        self._running = False
        self._wake.set()
        return reply

    def status(self) -> dict[str, Any]:
        """The latest health snapshot (a copy), updated by the pipeline thread every tick."""
        return self.health.status()

    # -- the pipeline thread ----------------------------------------------------

    def run(self) -> None:
        """Take, decide steps, answer commands, until ``shutdown``; an error stops the
        pipeline (state failed, the open episode left staged for ``ortf recover``)."""
        period_s = (self.settings.flow.flush_every_ms or 10.0) / 1000
        while self._running:
            tick = time.monotonic()
            try:
                self._tick()
            except ClockOffsetError as exc:  # the episode's, not the recorder's: it goes on
                self.commands.refuse(str(exc))
            except OrtfError as exc:
                self._fail(str(exc))
            except Exception as exc:  # a bug: say so with its traceback, keep what was committed
                self._fail(f"internal error: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            self.health.refresh(tick)
            if self.state == "failed":
                self._answer_all(Reply(False, f"the recorder failed: {self.error}"))
            self._wake.wait(max(0.0, period_s - (time.monotonic() - tick)))
            self._wake.clear()
        self._answer_all(Reply(False, "the recorder is shut down"))

    def _tick(self) -> None:
        shared = self.shared
        if shared.state == "failed":
            self.source.take()  # (queues stay empty: nothing more is recorded)
            return
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                break
            shared.status_stale = True  # (a reply and the status after it agree)
            self._wait_for_input(command.asked_ns)
            self._feed_until(command.asked_ns)
            try:
                reply = self.commands.execute(command)
            except Exception as exc:  # (answered, then the pipeline stops: see run)
                command.done.set_result(Reply(False, str(exc) if isinstance(exc, OrtfError) else describe_error(exc)))
                raise
            command.done.set_result(reply)
        self._feed_until(None)
        if shared.session is not None:
            shared.session.flush(self.source.input_time_ns())
            self.warmup.encoders_ready()
        elif shared.state == "waiting":
            self.warmup.open_when_ready()

    def _learn_types(self) -> None:
        """Types of newly subscribed topics the decoder lacks (vision_msgs, a lab's own), from
        the definitions their packages installed: what a bag of the topics would carry."""
        topics = self.source.topics()
        if len(topics) == self._topics_seen:
            return
        self._topics_seen = len(topics)
        decoder = self.decoder.decoder
        for topic in topics:
            if topic.definition is not None and decoder.resolve(topic.msgtype) is None:
                decoder.register(topic.msgtype, topic.definition, "ros2msg")

    def _wait_for_input(self, asked_ns: int) -> None:
        """Wait (briefly) until the subscriptions are drained past ``asked_ns``: a message
        received before a start or a stop but still in DDS belongs on its side of it."""
        deadline = time.monotonic() + INPUT_WAIT_S
        while not self.source.caught_up_past(asked_ns) and time.monotonic() < deadline:
            time.sleep(0.001)

    def _feed_until(self, until_ns: int | None) -> None:
        """Accept what is queued (received before ``until_ns``; the rest waits for the next call)."""
        new = self.source.take()
        self._learn_types()  # (after the take: every topic a message was taken from is known, before any is decoded)
        taken = list(heapq.merge(self._held, new, key=_receive_ns))
        self._held = []
        if until_ns is not None:
            cut = next((i for i, item in enumerate(taken) if item.raw.receive_ns > until_ns), len(taken))
            taken, self._held = taken[:cut], taken[cut:]
        for item in taken:
            self._accept(item)
        self.health.took(taken)

    def _accept(self, item: Queued) -> None:
        raw = item.raw
        session = self.shared.session
        if session is None:
            self.warmup.accept(raw)
            return
        if raw.topic not in self.topics:
            return
        session.accept(raw)
        if self.shared.episode is None and raw.topic in self.shared.config.tf_topics:
            session.tf.prune_history(TF_HISTORY_NS)

    def _fail(self, error: str) -> None:
        shared = self.shared
        shared.error = error
        shared.state = "failed"
        shared.status_stale = True
        self.log("error", error)
        shared.episode = None
        try:
            shared.close()  # (an open episode stays staged for `ortf recover`)
        except OrtfError as exc:
            self.log("error", f"closing the dataset: {exc}")

    def _answer_all(self, reply: Reply) -> None:
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            command.done.set_result(reply)


def check_output(output: Path) -> None:
    """Refuse at start-up a dataset the recorder could not add to (one clear line), rather
    than after the warm-up: not a dataset, a manifest that does not read, a dataset
    another process is writing, or one with an unfinished episode. (The path itself, a
    directory or a new path where one can be made, is checked with the parameters.)"""
    if output.is_dir():
        if not (output / layout.MANIFEST).exists():
            if any(output.iterdir()):
                raise WriterError(f"{output}: the output is a non-empty directory that is not an ORTF dataset")
            return
        load_manifest(output)
        staged = staged_episode_dirs(output)
        if staged:
            raise WriterError(
                f"{output}: has an unfinished episode ({staged[0].name}); run `ortf recover {output}` "
                "(or `--discard`) first"
            )
        try:
            unlock_dataset(output, lock_dataset(output, wait_s=0))
        except OSError as exc:
            raise WriterError(f"{output}: cannot lock the dataset ({exc.strerror or exc})") from None
        except WriterError:
            raise DatasetBusyError(f"{output}: another process is writing this dataset") from None
