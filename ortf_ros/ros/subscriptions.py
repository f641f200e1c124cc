"""The recorder's data subscriptions: found in the graph, QoS adapted, drained into the source.

A mapped topic is subscribed once a publisher of a type the pipeline can read appears
(looked for again every second, as ``ros2 bag record`` does), with the QoS adapted to
what the publishers offer (``qos.subscription_qos``), as serialized messages
(``raw=True``: no deserialization in rclpy).

The subscriptions are not served by an executor. An executor takes one message per
subscription per wait, and runs a Python callback for each: at 1 kHz force-torque
beside three cameras it falls behind, and then nothing tells how far. ``Receiver.run``
drains every subscription instead, taking until each is empty, and hands the bytes to
``LiveSource.put``. A pass that began at time T leaves nothing in DDS that was received
before T, which it reports (``LiveSource.caught_up``): input time, from which steps are
decided while topics pause, never runs ahead of what was really taken.

Messages the middleware lost on the way (a publisher's keep-last history overwritten
before this reader took them) show as gaps in the publication sequence numbers; they
are counted per topic where the topic has one publisher.

A mapped topic published with another type is not subscribed; it is reported (the log
and the status) and the recorder waits for a publisher of the right type.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from rclpy.node import Node
from rclpy.subscription import Subscription

from ortf_ros.pipeline.decode import canonical_msgtype
from ortf_ros.pipeline.sources.live import LiveSource
from ortf_ros.qos import AUTO
from ortf_ros.ros.definitions import installed_definition
from ortf_ros.ros.message_types import message_class
from ortf_ros.ros.qos import subscription_qos
from ortf_ros.ros.sim_clock import SimClock
from ortf_ros.ros.taking import waiting

MAX_DEPTH = 1000  # the subscription's history: a reliable publisher resends what a lagging reader has not taken
DISCOVERY_PERIOD_S = 1.0  # mapped topics without a subscription are looked for again this often
IDLE_WAIT_S = (0.0005, 0.005)
"""After a pass that found nothing, the wait before the next one: from half a millisecond,
doubled while passes keep finding nothing, up to 5 ms (nothing to a step, and an idle
recorder then costs about 1 % of a core)."""


@dataclass
class _Subscribed:
    subscription: Subscription
    msgtype: str
    single_publisher: bool  # publication sequence numbers tell losses only for one publisher
    last_sequence: int | None = None


def _ignore(_: object) -> None:
    """The callback rclpy requires: never called, since no executor serves these subscriptions."""


class Receiver:
    """Subscribes ``node`` to each of ``wanted`` (topic, accepted types) as its publishers
    appear, and drains them into ``source`` (``run``, on a thread of its own).

    ``latched``: topics published once for late joiners (transient-local when offered);
    ``frames``: camera topics (``LiveSource``'s frame queues). ``sim_clock`` (under
    use_sim_time): receive times on /clock as it read when each message arrived, instead
    of the middleware's reception stamps. ``now``: the receive clock now (the recorder's,
    which its commands are timed by), where a middleware gives no reception stamp.
    """

    def __init__(
        self,
        node: Node,
        source: LiveSource,
        wanted: Sequence[tuple[str, tuple[str, ...]]],
        *,
        latched: Collection[str],
        frames: Collection[str],
        qos_overrides: Mapping[str, Mapping[str, str]],
        sim_clock: SimClock | None,
        now: Callable[[], int],
        warn: Callable[[str], None],
        resolve: Callable[[str], str] = lambda topic: topic,
    ) -> None:
        self.node = node
        self.source = source
        self.wanted = dict(wanted)
        self.latched = set(latched)
        self.frames = set(frames)
        self.qos_overrides = qos_overrides
        self.warn = warn
        self.subscribed: dict[str, _Subscribed] = {}
        self.problems: dict[str, str] = {}  # topic -> why it is not subscribed
        self.now_ns = now
        self._sim_clock = sim_clock
        # A mapped topic's name after the node's remapping rules (-r, launch's remappings):
        # subscribed under that name, its messages still go to the source under the mapped one.
        self._resolve = resolve
        self._lock = threading.Lock()  # (status reads ``subscribed`` and ``problems`` from another thread)
        self.failure: str | None = None

    def _receive_ns(self, info: Mapping[str, int]) -> int:
        """A message's receive time from its reception stamp, on the receive clock."""
        # (some middlewares, Cyclone DDS before 2.2.1, give no reception time: the clock's then)
        arrived = info["received_timestamp"]
        if not arrived:
            return self.now_ns()
        if self._sim_clock is None:
            return arrived
        return self._sim_clock.at(arrived) or self.now_ns()

    # -- the receiving thread ------------------------------------------------------

    def run(self, stopped: threading.Event) -> None:
        """Discover and drain until ``stopped``; an error ends the thread, said in ``failure``
        (the node then stops: a recorder that no longer receives must not go on as if)."""
        try:
            self._run(stopped)
        except Exception as exc:
            self.failure = f"receiving stopped: {type(exc).__name__}: {exc}"

    def _run(self, stopped: threading.Event) -> None:
        next_discovery = 0.0
        shortest, longest = IDLE_WAIT_S
        wait = shortest
        while not stopped.is_set():
            if time.monotonic() >= next_discovery:
                self.discover()
                next_discovery = time.monotonic() + DISCOVERY_PERIOD_S
            began = self.now_ns()
            if began == 0:  # (simulated time before the first /clock: nothing can be timed yet)
                stopped.wait(longest)
                continue
            taken = self.drain()
            self.source.caught_up(began)
            if taken:
                wait = shortest
            else:
                stopped.wait(wait)
                wait = min(longest, 2 * wait)

    def drain(self) -> int:
        """Take every message waiting on every subscription; how many."""
        put, taken = self.source.put, 0
        for topic, subscribed in list(self.subscribed.items()):
            for data, info in waiting(subscribed.subscription, raw=True):
                taken += 1
                put(topic, data, self._receive_ns(info), info["source_timestamp"])  # (latency stays on wall time)
                if subscribed.single_publisher:
                    self._count_losses(topic, subscribed, info.get("publication_sequence_number"))
        return taken

    def _count_losses(self, topic: str, subscribed: _Subscribed, sequence: int | None) -> None:
        if not sequence:
            return
        last, subscribed.last_sequence = subscribed.last_sequence, sequence
        if last is not None and sequence > last + 1:
            self.source.lost(topic, sequence - last - 1)

    # -- discovery -----------------------------------------------------------------

    def discover(self) -> None:
        """Subscribe to every wanted topic that has a publisher of an accepted type now."""
        published = dict(self.node.get_topic_names_and_types())
        for topic, accepted in self.wanted.items():
            name = self._resolve(topic)
            if name not in published:
                continue
            if topic in self.subscribed:
                subscribed = self.subscribed[topic]
                single = self.node.count_publishers(name) == 1
                if single != subscribed.single_publisher:  # (sequence numbers of another writer)
                    subscribed.single_publisher, subscribed.last_sequence = single, None
                continue
            types = [canonical_msgtype(t) for t in published[name]]
            usable = [t for t in types if t in accepted]
            if usable:
                self._subscribe(topic, name, usable[0])
            else:
                self._problem(topic, f"published as {', '.join(types)}, expected {' or '.join(accepted)}")

    def _problem(self, topic: str, problem: str) -> None:
        line = f"{topic}: {problem}: not recorded"
        with self._lock:
            if self.problems.get(topic) == line:
                return
            self.problems[topic] = line
        self.warn(line)

    def _subscribe(self, topic: str, name: str, msgtype: str) -> None:
        try:
            kind = message_class(msgtype)
        except (ImportError, AttributeError) as exc:
            self._problem(topic, f"{msgtype} is not importable here ({exc})")
            return
        definition = installed_definition(msgtype)
        live = self.source.add_topic(topic, msgtype, frames=topic in self.frames, definition=definition)
        override = self.qos_overrides.get(topic, {})
        profile = subscription_qos(
            self.node,
            name,
            latched=topic in self.latched,
            depth=min(MAX_DEPTH, live.capacity),
            reliability=override.get("reliability", AUTO),
            durability=override.get("durability", AUTO),
        )
        subscription = self.node.create_subscription(kind, name, _ignore, profile, raw=True)
        with self._lock:
            self.problems.pop(topic, None)
            self.subscribed[topic] = _Subscribed(subscription, msgtype, self.node.count_publishers(name) == 1)

    # -- status --------------------------------------------------------------------

    def missing(self) -> list[str]:
        """Wanted topics not subscribed yet."""
        with self._lock:
            return [topic for topic in self.wanted if topic not in self.subscribed]

    def problem_lines(self) -> list[str]:
        with self._lock:
            return sorted(self.problems.values())
