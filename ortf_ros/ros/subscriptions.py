"""The recorder's data subscriptions: found in the graph, QoS adapted, bytes into the source.

A mapped topic is subscribed once a publisher of a type the pipeline can read appears
(checked again every second, as ``ros2 bag record`` does), with the QoS adapted to what
the publishers offer (``qos.subscription_qos``). The callback takes the serialized
message (``raw=True``: no deserialization in rclpy) and only hands it to
``LiveSource.put``: decoding, alignment and encoding happen on the pipeline thread.

A mapped topic published with another type is not subscribed; it is reported (the log
and the status) and the recorder waits for a publisher of the right type.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from rclpy.node import Node
from rclpy.subscription import Subscription

from ortf_ros.pipeline.decode import canonical_msgtype
from ortf_ros.pipeline.sources.live import LiveSource
from ortf_ros.ros.message_types import message_class
from ortf_ros.ros.qos import AUTO, subscription_qos

MAX_DEPTH = 1000  # the subscription's history: a reliable publisher resends what a lagging reader has not taken


class Subscriptions:
    """Subscribes ``node`` to each of ``wanted`` (topic, accepted types) as its publishers appear.

    ``latched``: topics published once for late joiners (transient-local when offered);
    ``frames``: camera topics (``LiveSource``'s frame queues). ``sim_time``: receive times
    from the node's clock (/clock) instead of the middleware's reception stamps.
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
        sim_time: bool,
        warn: Callable[[str], None],
    ) -> None:
        self.node = node
        self.source = source
        self.wanted = dict(wanted)
        self.latched = set(latched)
        self.frames = set(frames)
        self.qos_overrides = qos_overrides
        self.sim_time = sim_time
        self.warn = warn
        self.subscribed: dict[str, Subscription] = {}
        self.problems: dict[str, str] = {}  # topic -> why it is not subscribed

    def discover(self) -> None:
        """Subscribe to every wanted topic that has a publisher of an accepted type now."""
        published = dict(self.node.get_topic_names_and_types())
        for topic, accepted in self.wanted.items():
            if topic in self.subscribed or topic not in published:
                continue
            types = [canonical_msgtype(t) for t in published[topic]]
            usable = [t for t in types if t in accepted]
            if not usable:
                problem = f"{topic}: published as {', '.join(types)}, expected {' or '.join(accepted)}: not recorded"
                if self.problems.get(topic) != problem:
                    self.warn(problem)
                self.problems[topic] = problem
                continue
            self._subscribe(topic, usable[0])

    def _subscribe(self, topic: str, msgtype: str) -> None:
        try:
            kind = message_class(msgtype)
        except (ImportError, AttributeError) as exc:
            problem = f"{topic}: {msgtype} is not importable here ({exc}): not recorded"
            if self.problems.get(topic) != problem:
                self.warn(problem)
            self.problems[topic] = problem
            return
        live = self.source.add_topic(topic, msgtype, frames=topic in self.frames)
        override = self.qos_overrides.get(topic, {})
        profile = subscription_qos(
            self.node,
            topic,
            latched=topic in self.latched,
            depth=min(MAX_DEPTH, live.capacity),
            reliability=override.get("reliability", AUTO),
            durability=override.get("durability", AUTO),
        )
        self.problems.pop(topic, None)
        callback = self._sim_time_callback(topic) if self.sim_time else self._callback(topic)
        # rclpy passes the message info to a callback that takes two arguments (its types say one).
        self.subscribed[topic] = self.node.create_subscription(kind, topic, callback, profile, raw=True)  # type: ignore[arg-type]

    def _callback(self, topic: str) -> Callable[[bytes, Mapping[str, Any]], None]:
        put = self.source.put

        def received(data: bytes, info: Mapping[str, Any]) -> None:
            put(topic, data, info["received_timestamp"], info["source_timestamp"])

        return received

    def _sim_time_callback(self, topic: str) -> Callable[[bytes, Mapping[str, Any]], None]:
        """Under use_sim_time a message is received at the node's (/clock) time, as
        rosbag2's recorder does: the middleware's stamps are wall time."""
        put, clock = self.source.put, self.node.get_clock()

        def received(data: bytes, info: Mapping[str, Any]) -> None:
            put(topic, data, clock.now().nanoseconds, info["source_timestamp"])  # (latency stays on wall time)

        return received

    def missing(self) -> list[str]:
        """Wanted topics not subscribed yet."""
        return [topic for topic in self.wanted if topic not in self.subscribed]
