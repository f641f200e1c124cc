"""The live recorder's commands: start, stop (commit), discard, shutdown, and the labels
and task of the episode being recorded (or of the next one).

Other threads (a node's service handlers) post a ``Command`` and wait for its reply; the
pipeline thread executes it (``EpisodeCommands.execute``) once the input received before
it was asked is taken, so the session stays single-threaded and a command takes effect
at the time it was asked: messages received before a start are outside the episode, those
received before a stop are in it.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

from ortf_ros.dataset.writer import Annotations
from ortf_ros.pipeline.recording.state import Counters, EpisodeHealth, RecorderState, Reply
from ortf_ros.pipeline.recording.warmup import Warmup


@dataclass
class Command:
    name: str
    argument: object
    asked_ns: int
    # The source's counters when it was asked: an episode's numbers run from its start's
    # ask to its stop's, whatever the pipeline was doing meanwhile (a queue overflowing
    # while it was busy drops messages that belong to the episode).
    counters: Counters
    done: Future[Reply] = field(default_factory=Future)


class EpisodeCommands:
    """Executes commands on the pipeline thread: episodes of ``shared.session`` begun and
    ended, labels kept; ``topics``: the mapped topics, whose numbers an episode keeps."""

    def __init__(self, shared: RecorderState, warmup: Warmup, topics: set[str]) -> None:
        self.shared = shared
        self.warmup = warmup
        self.topics = topics
        self._late_before: Counter[str] = Counter()
        self._refused: str | None = None  # why the last episode was refused, for the stop that ends it

    def execute(self, command: Command) -> Reply:
        shared = self.shared
        name, argument = command.name, command.argument
        if shared.state == "closed":
            return Reply(False, "the recorder is shut down")
        if name == "start":
            return self._start(argument if isinstance(argument, str) else None, command)
        if name == "stop":
            return self._stop(command.counters)
        if name == "discard":
            return self._discard()
        if name == "shutdown":
            return self._shutdown(bool(argument), command.counters)
        labels = shared.labels
        if name == "success":
            labels.success = bool(argument)
            return Reply(True, f"success: {labels.success}" + self._for_which())
        if name == "failure_reason":
            labels.failure_reason = str(argument).strip() or None
            return Reply(True, f"failure reason: {labels.failure_reason!r}" + self._for_which())
        if name == "operator_notes":
            labels.operator_notes = str(argument).strip() or None
            return Reply(True, f"operator notes: {labels.operator_notes!r}" + self._for_which())
        if name == "task":
            task = str(argument).strip()
            if not task:
                return Reply(False, "the task instruction must not be empty")
            if shared.session is None:
                shared.config = replace(shared.config, labels=replace(shared.config.labels, task=task))
            else:
                shared.session.set_task(task)
            return Reply(True, f"task: {task!r}" + self._for_which())
        return Reply(False, f"unknown command {name!r}")

    def _for_which(self) -> str:
        episode = self.shared.episode
        return f" (episode {episode.episode_id})" if episode is not None else " (the next episode)"

    def _start(self, task: str | None, command: Command) -> Reply:
        shared = self.shared
        if shared.episode is not None:
            return Reply(False, f"episode {shared.episode.episode_id} is being recorded: stop or discard it first")
        if shared.session is None:
            self.warmup.open_when_ready()
        if shared.session is None:
            missing = self.warmup.missing() or ["the first second of TF (warming up)"]
            return Reply(False, "not ready: " + "; ".join(missing))
        if not self.warmup.encoders_ready():
            return Reply(False, "not ready: starting the video encoders")
        episode_id = shared.session.begin(task)
        self._refused = None
        shared.episode = EpisodeHealth(episode_id, command.asked_ns, time.time(), command.counters)
        self._late_before = Counter(shared.counts.late)
        shared.state = "recording"
        shared.log("info", f"episode {episode_id} started: {shared.session.task!r}")
        return Reply(True, f"recording episode {episode_id}: {shared.session.task!r}")

    def _episode_numbers(self, at_stop: Counters) -> dict[str, dict[str, int]]:
        """Per topic, from the episode's start to its stop (as asked): received, dropped by
        the recorder (its queue full), lost by the middleware before it reached the
        recorder; late is filled at the end."""
        assert self.shared.episode is not None
        before = self.shared.episode.counters
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

    def refuse(self, reason: str) -> None:
        """The open episode cannot be recorded as mapped (its streams' clocks disagree, or
        one jumped: ``ClockOffsetError``): discarded, nothing of it written, and said in the
        status's warnings and in the reply to the stop that would have ended it."""
        shared = self.shared
        episode_id = shared.episode.episode_id if shared.episode is not None else None
        shared.episode, shared.labels = None, replace(shared.default_labels)
        if shared.state == "recording":
            shared.state = "ready"
        if shared.session is not None:
            shared.session.discard()
        refused = f"episode {episode_id or 'being stopped'} refused, nothing of it written: {reason}"
        if episode_id is not None:  # (a stop that failed so has said it already)
            self._refused = refused
        shared.warn(refused)

    def _stop(self, at_stop: Counters) -> Reply:
        shared = self.shared
        refused, self._refused = self._refused, None
        if shared.episode is None and refused is not None:
            return Reply(False, refused)
        if shared.episode is None or shared.session is None:
            return Reply(False, "no episode is being recorded")
        numbers = self._episode_numbers(at_stop)
        episode_id = shared.episode.episode_id
        labels, shared.labels = shared.labels, replace(shared.default_labels)
        shared.episode, shared.state = None, "ready"
        started = time.monotonic()

        def kept() -> Annotations:
            """Drops per stream, kept with the episode (``recording.json`` beside its annotations)."""
            for topic, late in shared.counts.late.items():
                if topic in numbers:
                    numbers[topic]["late"] = late - late_before.get(topic, 0)
            return Annotations(recording={"source": "ortf_recorder", "streams": numbers})

        late_before = self._late_before
        record = shared.session.end(
            labels.success,
            labels.failure_reason,
            labels.operator_notes,
            annotations=kept,
            queue_full={topic: n["dropped"] for topic, n in numbers.items()},
            lost_in_transport={topic: n["lost_in_transport"] for topic, n in numbers.items()},
        )
        if record is None:
            shared.warn(f"episode {episode_id}: no complete step (every mapped stream must deliver): discarded")
            return Reply(False, f"episode {episode_id} had no complete step and was discarded")
        shared.records.append(record)
        if shared.session.clock_note is not None:
            shared.log("info", f"episode {record.episode_id}: {shared.session.clock_note}")
        drops = sum(n["dropped"] for n in numbers.values())
        lost = sum(n["lost_in_transport"] for n in numbers.values())
        losses = f"{drops} message(s) dropped" + (f", {lost} lost in transport" if lost else "")
        shared.log(
            "info",
            f"episode {record.episode_id} committed: {record.length} steps, {record.duration_seconds:.1f} s, "
            f"{losses}, commit {time.monotonic() - started:.2f} s",
        )
        return Reply(True, f"committed episode {record.episode_id}: {record.length} steps, {losses}")

    def _discard(self) -> Reply:
        shared = self.shared
        if shared.episode is None or shared.session is None:
            return Reply(False, "no episode is being recorded")
        episode_id = shared.episode.episode_id
        shared.episode, shared.state, shared.labels = None, "ready", replace(shared.default_labels)
        shared.session.discard()
        shared.log("info", f"episode {episode_id} discarded")
        return Reply(True, f"discarded episode {episode_id}")

    def _shutdown(self, commit: bool, at_stop: Counters) -> Reply:
        reply = Reply(True, "no episode was open")
        if self.shared.episode is not None:
            reply = self._stop(at_stop) if commit else self._discard()
        self.shared.close()
        self.shared.state = "closed"
        return reply
