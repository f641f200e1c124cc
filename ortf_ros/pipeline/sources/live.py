"""The live source: subscriptions' raw messages, queued per topic for the pipeline thread.

The thread that takes messages from the subscriptions (``ros.subscriptions.Receiver``)
must keep up with DDS, so it only hands bytes and receive times to ``put``: an append to
the topic's bounded queue, or, when the queue is full because the pipeline fell behind,
a counted drop. Memory is thus bounded by the queue sizes (``Flow``), never
by how far behind the pipeline is, and what is lost is known per topic.

The pipeline thread ``take``s everything queued, merged across topics by receive time,
and asks ``input_time_ns`` how far input time has come: nothing received before it is
still to come, so steps up to it (less the latency budget) can be decided even while
every topic pauses.

No ROS here: the node's receiver puts what it takes, and the queues, drops and merge are
tested without rclpy.
"""

from __future__ import annotations

import heapq
import threading
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

from ortf_ros.pipeline.flow import Flow
from ortf_ros.pipeline.samples import Payload, RawMessage


class Queued(NamedTuple):
    """A message waiting for the pipeline, with the wall time it was published where the
    middleware says (``origin_ns``; else its receive time): latency is measured from it,
    also under simulated time, where receive times are on the /clock."""

    raw: RawMessage
    origin_ns: int


_RECEIVE = attrgetter("raw.receive_ns")


@dataclass(frozen=True)
class LiveTopic:
    """A subscribed topic: its type, and how many messages may wait for the pipeline."""

    topic: str
    msgtype: str
    capacity: int
    definition: str | None = None  # the type's ros2msg text, installed with its package (``ros.definitions``)


@dataclass(frozen=True)
class TopicHealth:
    """One topic's numbers since the source was made, for status and diagnostics."""

    received: int
    dropped: int
    lost: int  # by the middleware before they reached the recorder (publication sequence gaps)
    queued: int
    capacity: int
    last_receive_ns: int | None


class LiveSource:
    """Bounded per-topic queues between the thread that takes from the subscriptions and one
    pipeline thread. ``clock`` gives now in the receive times' clock (the node's: wall
    time, or /clock under use_sim_time)."""

    def __init__(self, name: str, flow: Flow, clock: Callable[[], int]) -> None:
        self.name = name
        self.flow = flow
        self.clock = clock
        self._topics: dict[str, LiveTopic] = {}
        self._queues: dict[str, deque[Queued]] = {}
        self._received: Counter[str] = Counter()
        self._dropped: Counter[str] = Counter()
        self._lost: Counter[str] = Counter()
        self._last: dict[str, int] = {}
        self._caught_up_ns: int | None = None
        self._lock = threading.Lock()

    def add_topic(self, topic: str, msgtype: str, *, frames: bool = False, definition: str | None = None) -> LiveTopic:
        """Queue ``topic``'s messages; a camera's (``frames``) queue holds ``Flow.queue_frames``.
        ``definition``: the type's, for a decoder that does not know it."""
        capacity = self.flow.queue_frames if frames else self.flow.queue_messages
        live = LiveTopic(topic, msgtype, capacity, definition)
        with self._lock:
            self._topics[topic] = live
            self._queues.setdefault(topic, deque())
        return live

    def topics(self) -> list[LiveTopic]:
        with self._lock:
            return list(self._topics.values())

    def put(self, topic: str, data: Payload, receive_ns: int, sent_ns: int | None = None) -> bool:
        """One message taken from a subscription: queued (True), or dropped and counted (False).
        ``sent_ns``: when it was published (the middleware's source timestamp), if known."""
        live = self._topics[topic]
        with self._lock:
            self._received[topic] += 1
            self._last[topic] = receive_ns
            queue = self._queues[topic]
            if len(queue) >= live.capacity:
                self._dropped[topic] += 1
                return False
            queue.append(Queued(RawMessage(topic, live.msgtype, receive_ns, data), sent_ns or receive_ns))
            return True

    def take(self) -> list[Queued]:
        """Everything queued, in receive-time order across topics (each topic's own order kept)."""
        with self._lock:
            runs = [list(queue) for queue in self._queues.values() if queue]
            for queue in self._queues.values():
                queue.clear()
        if len(runs) == 1:
            return runs[0]
        return list(heapq.merge(*runs, key=_RECEIVE))

    def caught_up(self, receive_ns: int) -> None:
        """Every message received before ``receive_ns`` has been ``put``: the subscriptions
        were drained after it (``ros.subscriptions.Receiver``)."""
        with self._lock:
            self._caught_up_ns = receive_ns

    def caught_up_past(self, receive_ns: int) -> bool:
        """Whether everything received before ``receive_ns`` has been put (always, when
        nobody says how far: a source fed directly)."""
        with self._lock:
            return self._caught_up_ns is None or self._caught_up_ns >= receive_ns

    def lost(self, topic: str, count: int) -> None:
        """``count`` messages of ``topic`` never reached the subscription (the middleware lost them)."""
        with self._lock:
            self._lost[topic] += count

    def input_time_ns(self) -> int:
        """Nothing received before this is still to come: the oldest message still queued,
        or the time up to which the subscriptions are known to be drained (``caught_up``),
        or now when nobody says (a source fed directly)."""
        with self._lock:
            oldest = [queue[0].raw.receive_ns for queue in self._queues.values() if queue]
            caught_up = self._caught_up_ns
        return min([self.clock() if caught_up is None else caught_up, *oldest])

    def dropped(self) -> Mapping[str, int]:
        with self._lock:
            return dict(self._dropped)

    def lost_counts(self) -> Mapping[str, int]:
        with self._lock:
            return dict(self._lost)

    def received(self) -> Mapping[str, int]:
        with self._lock:
            return dict(self._received)

    def health(self) -> dict[str, TopicHealth]:
        with self._lock:
            return {
                topic: TopicHealth(
                    received=self._received[topic],
                    dropped=self._dropped[topic],
                    lost=self._lost[topic],
                    queued=len(self._queues[topic]),
                    capacity=live.capacity,
                    last_receive_ns=self._last.get(topic),
                )
                for topic, live in self._topics.items()
            }

    def close(self) -> None:
        """Forget what is queued (what a stopped recorder did not take)."""
        with self._lock:
            for queue in self._queues.values():
                queue.clear()
