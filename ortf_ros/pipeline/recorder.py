"""The live driver: subscriptions' messages into episodes, driven by commands.

The same pieces as a bag conversion (``PrologueBuilder``, ``describe``,
``EpisodeSession``), fed from a ``LiveSource`` instead of a file, by one pipeline thread
(``run``). What differs from a bag is only what a live source forces:

- the prologue comes from a warm-up: messages go to the ``PrologueBuilder`` until it has
  every camera's first frame, the joint state, the action, the URDF and the camera_info
  (these two it stops waiting for after ``warmup_s``, with a warning); then the dataset
  is opened. Its TF tree, static transforms included, seeds the session's, since those
  arrive only once;
- episodes begin and end on commands (``start``, ``stop``, ``discard``), which other
  threads (a node's service handlers) post and wait for, so the session stays
  single-threaded. A command takes effect at the time it was asked: messages received
  before a start are outside the episode, those received before a stop are in it;
- steps are decided by the clock every ``Flow.flush_every_ms``, not only when messages
  come, so they keep coming while every topic pauses;
- health (``status``) is a snapshot other threads read at any time.

No ROS here: ``ortf_ros.ros.recorder_node`` subscribes, forwards callbacks to the
source, and turns services, topics and parameters into these commands.
"""

from __future__ import annotations

import heapq
import math
import queue
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout  # (not the builtin before Python 3.11)
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from datasketches import kll_floats_sketch

from ortf_ros.dataset.catalog import load_manifest
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.staging import lock_dataset, staged_episode_dirs, unlock_dataset
from ortf_ros.dataset.writer import Annotations, DatasetWriter
from ortf_ros.errors import ConversionError, OrtfError, WriterError
from ortf_ros.errors import describe as describe_error
from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.format.units import NS
from ortf_ros.io.encoder_process import Prestart
from ortf_ros.pipeline.assemble import TopicCounts
from ortf_ros.pipeline.config import ConversionConfig
from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.describe import Description, describe
from ortf_ros.pipeline.fastpath import SampleDecoder
from ortf_ros.pipeline.flow import LIVE, Flow
from ortf_ros.pipeline.offline import mapped_topics
from ortf_ros.pipeline.prologue import PrologueBuilder
from ortf_ros.pipeline.session import EpisodeSession
from ortf_ros.pipeline.sources.live import LiveSource, Queued

State = Literal["waiting", "ready", "recording", "failed", "closed"]
"""waiting: for the warm-up's messages; ready: the dataset is open, no episode; recording:
an episode is open; failed: the pipeline stopped on an error (``error`` says which);
closed: shut down."""

COLLECTION = {"operator": "human_teleop", "source": "ortf_recorder"}
LIVE_WRITER_DEFAULTS: dict[str, Any] = {"step_batch": LIVE.step_batch, "video": {"preset": "ultrafast"}}
"""A live recorder's writer settings unless the mapping's ``writer:`` sets them: x264's
``ultrafast`` leaves headroom on two cores for three cameras at 30 fps, and 8 steps per
staging append is what a kill can lose."""
WARNINGS_KEPT = 20  # the latest warnings, in the status (all of them go to the log)
SHUTDOWN_TIMEOUT_S = 600.0  # the last commit of a long episode may take a while
INPUT_WAIT_S = 0.1  # a command waits at most this for the subscriptions to be drained past it
DISCOVERY_GRACE_NS = 2 * NS  # from the first message: time for the graph to show every publisher
TF_HISTORY_NS = 2 * NS  # between episodes, dynamic TF older than this is forgotten (memory stays flat)
LATENCY_K = 200  # KLL sketch size: quantiles within about 1.3 %, a few kB
STATUS_REFRESH_S = 0.1
"""The status snapshot is rebuilt this often (and after every command), not every tick:
readers take it at about 1 Hz, and at a 10 ms tick it was most of an idle tick's work."""
SILENT_PERIODS = 5  # a stream silent this many of its periods (at least 1 s) is reported stale


def _receive_ns(item: Queued) -> int:
    return item.raw.receive_ns


def live_writer_config(settings: Mapping[str, Any], source: str) -> WriterConfig:
    """The recorder's writer settings: the mapping's ``writer:`` over the live defaults."""
    video = {**LIVE_WRITER_DEFAULTS["video"], **settings.get("video", {})}
    return WriterConfig.from_mapping({**LIVE_WRITER_DEFAULTS, **settings, "video": video}, source)


@dataclass(frozen=True)
class RecorderSettings:
    output: Path
    mapping: ConversionConfig
    writer: WriterConfig
    flow: Flow = LIVE
    # Start waits at most this long (from the first message) for a URDF on the mapped
    # topic and for the cameras' camera_info; then the dataset is opened without them
    # (warnings; the intrinsics from the camera_info_url file, else unknown). Other missing
    # topics keep start refusing: a dataset without its cameras or joint state is no dataset.
    warmup_s: float = 10.0
    name: str = "ortf_recorder dataset"
    urdf: str | None = None  # a URDF given by the user (over /robot_description)
    urdf_source: str = "the urdf parameter"


@dataclass
class Labels:
    """What the operator said of the episode being recorded (or of the next one)."""

    success: bool | None = None
    failure_reason: str | None = None
    operator_notes: str | None = None


@dataclass(frozen=True)
class Reply:
    success: bool
    message: str


@dataclass
class _Command:
    name: str
    argument: object
    asked_ns: int
    # The source's counters when it was asked: an episode's numbers run from its start's
    # ask to its stop's, whatever the pipeline was doing meanwhile (a queue overflowing
    # while it was busy drops messages that belong to the episode).
    counters: _Counters
    done: Future[Reply] = field(default_factory=Future)


@dataclass(frozen=True)
class _Counters:
    received: Counter[str]
    dropped: Counter[str]
    lost: Counter[str]

    @classmethod
    def of(cls, source: LiveSource) -> _Counters:
        return cls(Counter(source.received()), Counter(source.dropped()), Counter(source.lost_counts()))


@dataclass
class _EpisodeHealth:
    """Numbers of the episode being recorded, from its start."""

    episode_id: str
    started_ns: int
    started_wall: float
    counters: _Counters
    latency: kll_floats_sketch = field(default_factory=lambda: kll_floats_sketch(LATENCY_K))


class LiveRecorder:
    """One dataset recorded from ``source``; ``run`` is the pipeline thread's body."""

    def __init__(
        self,
        settings: RecorderSettings,
        source: LiveSource,
        *,
        log: Callable[[str, str], None] | None = None,
        published: Callable[[str], bool] | None = None,
    ) -> None:
        self.settings = settings
        self.source = source
        # Whether a topic has a publisher in the graph (None: assume so). A URDF topic that
        # nothing publishes is not waited for beyond DISCOVERY_GRACE_NS.
        self.published = published or (lambda topic: True)
        self.log = log or (lambda level, text: None)
        self.config = settings.mapping
        self.decoder = SampleDecoder(Decoder())
        self._topics_seen = 0  # (``_learn_types``)
        self.topics = mapped_topics(self.config)
        self.builder = PrologueBuilder(
            self.config,
            self.decoder,
            self.config.topics(),
            urdf_given=settings.urdf is not None,
        )
        self.state: State = "waiting"
        self.error: str | None = None
        self.warnings: list[str] = []
        self.default_labels = Labels()  # what each episode's labels start as
        self.labels = Labels()
        self.counts = TopicCounts()
        self.records: list[EpisodeRecord] = []
        self.writer: DatasetWriter | None = None
        self.session: EpisodeSession | None = None
        self.description: Description | None = None
        self._commands: queue.SimpleQueue[_Command] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._running = True
        self._first_ns: int | None = None
        self._episode: _EpisodeHealth | None = None
        self._status: dict[str, Any] = {}
        self._status_lock = threading.Lock()
        self._rates: dict[str, tuple[int, int]] = {}  # topic -> (received, at ns) when the rate was last measured
        self._rate_hz: dict[str, float] = {}
        self._held: list[Queued] = []  # taken, but received after the command being executed
        self._late_before: Counter[str] = Counter()
        self._silent: set[str] = set()  # streams said to have stopped
        self._encoders: Prestart | None = None  # encoder processes starting before the first episode
        self._status_stale = False  # a command ran: the status is rebuilt at the end of this tick
        self._status_due = 0.0  # (monotonic) when the status is rebuilt anyway
        self._publish_status()

    # -- commands (any thread) --------------------------------------------------

    def call(self, name: str, argument: object = None, timeout_s: float = 120.0) -> Reply:
        """Post a command to the pipeline thread and wait for its reply."""
        if not self._running:
            return Reply(False, "the recorder is shutting down")
        command = _Command(name, argument, self.source.clock(), _Counters.of(self.source))
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
        with self._status_lock:
            return dict(self._status)

    # -- the pipeline thread ----------------------------------------------------

    def run(self) -> None:
        """Take, decide steps, answer commands, until ``shutdown``; an error stops the
        pipeline (state failed, the open episode left staged for ``ortf recover``)."""
        period_s = (self.settings.flow.flush_every_ms or 10.0) / 1000
        while self._running:
            tick = time.monotonic()
            try:
                self._tick()
            except OrtfError as exc:
                self._fail(str(exc))
            except Exception as exc:  # a bug: say so with its traceback, keep what was committed
                self._fail(f"internal error: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            if self._status_stale or tick >= self._status_due:
                self._status_stale, self._status_due = False, tick + STATUS_REFRESH_S
                try:
                    self._publish_status()
                except Exception as exc:  # (health is no reason to stop recording)
                    self.log("error", f"status: {type(exc).__name__}: {exc}")
            if self.state == "failed":
                self._answer_all(Reply(False, f"the recorder failed: {self.error}"))
            self._wake.wait(max(0.0, period_s - (time.monotonic() - tick)))
            self._wake.clear()
        self._answer_all(Reply(False, "the recorder is shut down"))

    def _tick(self) -> None:
        if self.state == "failed":
            self.source.take()  # (queues stay empty: nothing more is recorded)
            return
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                break
            self._status_stale = True  # (a reply and the status after it agree)
            self._wait_for_input(command.asked_ns)
            self._feed_until(command.asked_ns)
            try:
                reply = self._execute(command)
            except Exception as exc:  # (answered, then the pipeline stops: see run)
                command.done.set_result(Reply(False, str(exc) if isinstance(exc, OrtfError) else describe_error(exc)))
                raise
            command.done.set_result(reply)
        self._feed_until(None)
        if self.session is not None:
            self.session.flush(self.source.input_time_ns())
            self._encoders_ready()
        elif self.state == "waiting":
            self._open_when_ready()

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
        if self._episode is not None and taken:
            now = time.time_ns()
            for item in taken:
                self._episode.latency.update((now - item.origin_ns) / 1e6)

    def _accept(self, item: Queued) -> None:
        raw = item.raw
        if self._first_ns is None:
            self._first_ns = raw.receive_ns
        if self.session is None:
            self.builder.accept(raw)
            if raw.topic in self.config.tf_topics:
                self.builder.prologue.tf.prune_before(raw.receive_ns - TF_HISTORY_NS)
            return
        if raw.topic not in self.topics:
            return
        self.session.accept(raw)
        if self._episode is None and raw.topic in self.config.tf_topics:
            self.session.tf.prune_before(raw.receive_ns - TF_HISTORY_NS)

    def _open_when_ready(self) -> None:
        """Open the dataset once the warm-up has what the manifest needs. What it can go
        without (the URDF, a camera's camera_info) is waited for ``warmup_s`` at most, and
        not at all once the graph has had time to show that nothing publishes it (a
        recording made without one is common); ``describe`` then says what stands in."""
        if self.builder.missing(optional=False):
            return
        waited_ns = 0 if self._first_ns is None else self.source.clock() - self._first_ns
        lacking = self.builder.optional_topics_lacking()
        unpublished = {t for t in lacking if waited_ns > DISCOVERY_GRACE_NS and not self.published(t)}
        if lacking and len(unpublished) < len(lacking) and waited_ns <= self.settings.warmup_s * NS:
            return
        if self.builder.seen_ns() <= self.builder.window_ns:
            return
        topic = self.config.robot_description_topic
        if topic in lacking:
            why = "nothing publishes it" if topic in unpublished else f"none came within {self.settings.warmup_s:g} s"
            self._warn(
                f"no URDF on {topic} ({why}): the dataset has no robot description, "
                "joints are named from the joint states"
            )
        self._open()

    def _open(self) -> None:
        prologue = self.builder.result()
        s = self.settings
        self.description = describe(
            self.config, prologue, name=s.name, collection=COLLECTION, urdf=s.urdf, urdf_source=s.urdf_source
        )
        for warning in self.description.warnings:
            self._warn(warning)
        self.writer = DatasetWriter(s.output, self.description.manifest, config=s.writer, urdf=self.description.urdf)
        self.writer.open()
        self._encoders = self.writer.start_encoders()  # (their start-up would hold up the first episode's frames)
        self.session = EpisodeSession(
            self.writer,
            self.config,
            self.description.steps,
            self.decoder,
            s.flow,
            tf=prologue.tf,
            counts=self.counts,
            parameter_sets=prologue.parameter_sets,
        )
        manifest = self.description.manifest
        self.log(
            "info",
            f"dataset {s.output} open ({self.writer.episode_count} episode(s) before), starting the video encoders: "
            f"{len(manifest.cameras)} camera(s), {len(self.description.steps.joints)} joints, "
            f"robot {manifest.robot.name}; {self.description.tolerance.line()}",
        )

    def _encoders_ready(self) -> bool:
        """Whether the encoder processes started when the dataset opened serve yet (the
        dataset is ready for a first episode only then; meanwhile input is taken as ever)."""
        if self._encoders is not None and self._encoders.ready():
            self._encoders = None
            self.state = "ready" if self._episode is None else self.state
            self.log("info", "video encoders ready")
        return self._encoders is None

    def _execute(self, command: _Command) -> Reply:
        name, argument = command.name, command.argument
        if self.state == "closed":
            return Reply(False, "the recorder is shut down")
        if name == "start":
            return self._start(argument if isinstance(argument, str) else None, command)
        if name == "stop":
            return self._stop(command.counters)
        if name == "discard":
            return self._discard()
        if name == "shutdown":
            return self._shutdown(bool(argument), command.counters)
        if name == "success":
            self.labels.success = bool(argument)
            return Reply(True, f"success: {self.labels.success}" + self._for_which())
        if name == "failure_reason":
            self.labels.failure_reason = str(argument).strip() or None
            return Reply(True, f"failure reason: {self.labels.failure_reason!r}" + self._for_which())
        if name == "operator_notes":
            self.labels.operator_notes = str(argument).strip() or None
            return Reply(True, f"operator notes: {self.labels.operator_notes!r}" + self._for_which())
        if name == "task":
            task = str(argument).strip()
            if not task:
                return Reply(False, "the task instruction must not be empty")
            if self.session is None:
                self.config = replace(self.config, labels=replace(self.config.labels, task=task))
            else:
                self.session.set_task(task)
            return Reply(True, f"task: {task!r}" + self._for_which())
        return Reply(False, f"unknown command {name!r}")

    def _for_which(self) -> str:
        return f" (episode {self._episode.episode_id})" if self._episode is not None else " (the next episode)"

    def _start(self, task: str | None, command: _Command) -> Reply:
        if self._episode is not None:
            return Reply(False, f"episode {self._episode.episode_id} is being recorded: stop or discard it first")
        if self.session is None:
            self._open_when_ready()
        if self.session is None:
            missing = self.builder.missing() or ["the first second of TF (warming up)"]
            return Reply(False, "not ready: " + "; ".join(missing))
        if not self._encoders_ready():
            return Reply(False, "not ready: starting the video encoders")
        episode_id = self.session.begin(task)
        self._episode = _EpisodeHealth(episode_id, command.asked_ns, time.time(), command.counters)
        self._late_before = Counter(self.counts.late)
        self.state = "recording"
        self.log("info", f"episode {episode_id} started: {self.session.task!r}")
        return Reply(True, f"recording episode {episode_id}: {self.session.task!r}")

    def _episode_numbers(self, at_stop: _Counters) -> dict[str, dict[str, int]]:
        """Per topic, from the episode's start to its stop (as asked): received, dropped by
        the recorder (its queue full), lost by the middleware before it reached the
        recorder; late is filled at the end."""
        assert self._episode is not None
        before = self._episode.counters
        received, dropped, lost = Counter(at_stop.received), Counter(at_stop.dropped), Counter(at_stop.lost)
        received.subtract(before.received)
        dropped.subtract(before.dropped)
        lost.subtract(before.lost)
        return {
            topic: {
                "received": received[topic],
                "dropped": dropped[topic],
                "lost_in_transport": lost[topic],
                "late": 0,
            }
            for topic in sorted(self.topics & set(received))
        }

    def _stop(self, at_stop: _Counters) -> Reply:
        if self._episode is None or self.session is None:
            return Reply(False, "no episode is being recorded")
        numbers = self._episode_numbers(at_stop)
        episode_id = self._episode.episode_id
        labels, self.labels = self.labels, replace(self.default_labels)
        self._episode, self.state = None, "ready"
        started = time.monotonic()

        def kept() -> Annotations:
            """Drops per stream, kept with the episode (``recording.json`` beside its annotations)."""
            for topic, late in self.counts.late.items():
                if topic in numbers:
                    numbers[topic]["late"] = late - late_before.get(topic, 0)
            return Annotations(recording={"source": "ortf_recorder", "streams": numbers})

        late_before = self._late_before
        record = self.session.end(
            labels.success,
            labels.failure_reason,
            labels.operator_notes,
            annotations=kept,
            queue_full={topic: n["dropped"] for topic, n in numbers.items()},
            lost_in_transport={topic: n["lost_in_transport"] for topic, n in numbers.items()},
        )
        if record is None:
            self._warn(f"episode {episode_id}: no complete step (every mapped stream must deliver): discarded")
            return Reply(False, f"episode {episode_id} had no complete step and was discarded")
        self.records.append(record)
        drops = sum(n["dropped"] for n in numbers.values())
        lost = sum(n["lost_in_transport"] for n in numbers.values())
        losses = f"{drops} message(s) dropped" + (f", {lost} lost in transport" if lost else "")
        self.log(
            "info",
            f"episode {record.episode_id} committed: {record.length} steps, {record.duration_seconds:.1f} s, "
            f"{losses}, commit {time.monotonic() - started:.2f} s",
        )
        return Reply(True, f"committed episode {record.episode_id}: {record.length} steps, {losses}")

    def _discard(self) -> Reply:
        if self._episode is None or self.session is None:
            return Reply(False, "no episode is being recorded")
        episode_id = self._episode.episode_id
        self._episode, self.state, self.labels = None, "ready", replace(self.default_labels)
        self.session.discard()
        self.log("info", f"episode {episode_id} discarded")
        return Reply(True, f"discarded episode {episode_id}")

    def _shutdown(self, commit: bool, at_stop: _Counters) -> Reply:
        reply = Reply(True, "no episode was open")
        if self._episode is not None:
            reply = self._stop(at_stop) if commit else self._discard()
        self._close()
        self.state = "closed"
        return reply

    def _close(self) -> None:
        writer, self.writer, self.session = self.writer, None, None
        if writer is not None:
            writer.close()

    def _fail(self, error: str) -> None:
        self.error = error
        self.state = "failed"
        self._status_stale = True
        self.log("error", error)
        self._episode = None
        try:
            self._close()  # (an open episode stays staged for `ortf recover`)
        except OrtfError as exc:
            self.log("error", f"closing the dataset: {exc}")

    def _answer_all(self, reply: Reply) -> None:
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            command.done.set_result(reply)

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)
            del self.warnings[:-WARNINGS_KEPT]
            self.log("warn", text)

    # -- health -----------------------------------------------------------------

    def _publish_status(self) -> None:
        now = self.source.clock()
        health = self.source.health()
        streams = {}
        latched = {*self.config.tf_static_topics, self.config.robot_description_topic}
        for topic, numbers in sorted(health.items()):
            rate = self._measure_rate(topic, numbers.received, now)
            silent_s = None if numbers.last_receive_ns is None else (now - numbers.last_receive_ns) / NS
            stale = topic not in latched and (
                silent_s is None or silent_s > max(1.0, SILENT_PERIODS / rate if rate else 1.0)
            )
            self._report_silence(topic, stale, silent_s)
            streams[topic] = {
                "received": numbers.received,
                "rate_hz": round(rate, 2),
                "dropped": numbers.dropped,
                "lost_in_transport": numbers.lost,
                "late": self.counts.late[topic],
                "undecodable": self.counts.undecodable[topic],
                "queued": numbers.queued,
                "queue_capacity": numbers.capacity,
                "used": self.counts.used[topic],
                "stale": stale,
            }
        status: dict[str, Any] = {
            "state": self.state,
            "output": str(self.settings.output),
            "episodes_committed": len(self.records),
            "task": self.session.task if self.session is not None else self.config.labels.task,
            "streams": streams,
            "warnings": list(self.warnings),
        }
        if self.error is not None:
            status["error"] = self.error
        if self.state == "waiting":
            status["missing"] = self.builder.missing() if self.session is None else ["the video encoders are starting"]
        episode = self._episode
        if episode is not None and self.session is not None:
            latency = episode.latency
            status["episode"] = {
                "id": episode.episode_id,
                "task": self.session.task,
                "elapsed_s": round(time.time() - episode.started_wall, 3),
                "steps": self.session.steps_written,
                "success": self.labels.success,
                "failure_reason": self.labels.failure_reason,
                "operator_notes": self.labels.operator_notes,
                "latency_ms": {
                    "p50": round(latency.get_quantile(0.5), 3) if not latency.is_empty() else None,
                    "p99": round(latency.get_quantile(0.99), 3) if not latency.is_empty() else None,
                },
            }
        with self._status_lock:
            self._status = status

    def _report_silence(self, topic: str, stale: bool, silent_s: float | None) -> None:
        """A stream that stops while an episode is recorded is said once in the log (steps
        go on with its last sample, their alignment error growing), and again when it resumes."""
        if stale and self._episode is not None and topic not in self._silent:
            self._silent.add(topic)
            since = "never delivered" if silent_s is None else f"silent for {silent_s:.1f} s"
            self.log("warn", f"{topic}: {since} while recording episode {self._episode.episode_id}")
        elif not stale and topic in self._silent:
            self._silent.discard(topic)
            self.log("info", f"{topic}: delivering again")

    def _measure_rate(self, topic: str, received: int, now_ns: int) -> float:
        """Messages/s over the last second or so (updated once a second per topic)."""
        before = self._rates.get(topic)
        if before is None:
            self._rates[topic] = (received, now_ns)
            return 0.0
        count, at = before
        if now_ns - at >= NS:
            self._rate_hz[topic] = (received - count) * NS / (now_ns - at)
            self._rates[topic] = (received, now_ns)
        rate = self._rate_hz.get(topic, 0.0)
        return rate if math.isfinite(rate) else 0.0


def check_output(output: Path) -> None:
    """Refuse at start-up a dataset the recorder could not add to (one clear line), rather
    than after the warm-up: not a dataset, a manifest that does not read, a dataset
    another process is writing, or one with an unfinished episode. (The path itself, a
    directory or a new path where one can be made, is checked with the parameters.)"""
    if output.is_dir():
        if not (output / layout.MANIFEST).exists():
            if any(output.iterdir()):
                raise ConversionError(f"{output}: the output is a non-empty directory that is not an ORTF dataset")
            return
        load_manifest(output)
        staged = staged_episode_dirs(output)
        if staged:
            raise ConversionError(
                f"{output}: has an unfinished episode ({staged[0].name}); run `ortf recover {output}` "
                "(or `--discard`) first"
            )
        try:
            unlock_dataset(output, lock_dataset(output, wait_s=0))
        except OSError as exc:
            raise ConversionError(f"{output}: cannot lock the dataset ({exc.strerror or exc})") from None
        except WriterError:
            raise ConversionError(f"{output}: another process is writing this dataset") from None
