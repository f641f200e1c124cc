"""Drive a running ``ortf_recorder`` from Python: its services, label topics and status.

    client = RecorderClient(node)          # any rclpy node of yours, or RecorderClient.create()
    client.start_when_ready()              # ~/start_episode until the warm-up has every stream
    client.say("operator_notes", "clean grasp")
    client.call("set_success", True)
    reply = client.call("stop_episode")    # std_srvs response: success, message

What a teleoperation UI, a script or a test does to record episodes, in one place: the
demo (``live_demo``), the tests and the benchmark drive the recorder through it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import String
from std_srvs.srv import SetBool, Trigger

from ortf_ros.errors import RecorderError

RECORDER = "/ortf_recorder"
LABELS = ("task", "failure_reason", "operator_notes")
DISCOVERY_SETTLE_S = 0.5  # after a service is first seen, for its response writer to see us too


class RecorderClient:
    """Calls ``recorder``'s services and hears its ``~/status`` through ``node``.

    ``alive`` is asked while waiting: False (the recorder's process ended, say) stops
    the wait with a ``RecorderError`` instead of a timeout."""

    def __init__(self, node: Node, *, recorder: str = RECORDER, alive: Callable[[], bool] = lambda: True) -> None:
        self.node = node
        self.recorder = recorder
        self.alive = alive
        self.executor = SingleThreadedExecutor(context=node.context)
        self.executor.add_node(node)
        latched = QoSProfile(  # type: ignore[no-untyped-call]
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.statuses: list[dict[str, Any]] = []
        node.create_subscription(String, f"{recorder}/status", self._hear, latched)
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)  # type: ignore[no-untyped-call]
        self.labels = {name: node.create_publisher(String, f"{recorder}/{name}", reliable) for name in LABELS}
        self._clients: dict[str, Any] = {}
        self._context: Context | None = None

    @classmethod
    def create(cls, name: str, *, domain_id: int | None = None, **kwargs: Any) -> RecorderClient:
        """A client with a node in an rclpy context of its own (``close`` shuts it down)."""
        context = Context()
        rclpy.init(context=context, domain_id=domain_id, signal_handler_options=SignalHandlerOptions.NO)
        client = cls(rclpy.create_node(name, context=context), **kwargs)
        client._context = context
        return client

    def _hear(self, message: String) -> None:
        self.statuses.append(json.loads(message.data))
        del self.statuses[:-100]  # (the latest are what matter)

    def spin_until(self, done: Callable[[], bool], timeout_s: float, what: str = "waiting") -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            if not self.alive():
                raise RecorderError(f"the recorder is gone while {what}")
            if time.monotonic() > deadline:
                raise RecorderError(f"timed out after {timeout_s:g} s {what}")
            self.executor.spin_once(timeout_sec=0.02)

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.02)

    def call(self, service: str, data: bool | None = None, timeout_s: float = 60.0) -> Any:
        """``~/service`` (std_srvs/Trigger; SetBool with ``data``): its response."""
        kind: Any = Trigger if data is None else SetBool
        client = self._client(kind, service, timeout_s)
        request = kind.Request()
        if data is not None:
            request.data = data
        future = client.call_async(request)
        self.spin_until(future.done, timeout_s, f"waiting for the answer of {service}")
        return future.result()

    def _client(self, kind: Any, service: str, timeout_s: float) -> Any:
        """The service's client, made once and kept, ready to be called.

        ``service_is_ready`` means the recorder's request reader knows this client; its
        response writer may not know this client's response reader yet, and Fast DDS
        drops a response it cannot deliver within 100 ms (under load, discovery takes
        longer): the call would then wait forever for an answer the recorder gave. So a
        client is kept for every later call, and a new one first lets discovery settle."""
        key = f"{service}:{kind.__name__}"
        client = self._clients.get(key)
        if client is None:
            client = self.node.create_client(kind, f"{self.recorder}/{service}")
            self.spin_until(client.service_is_ready, timeout_s, f"waiting for {self.recorder}/{service}")
            self.spin_for(DISCOVERY_SETTLE_S)
            self._clients[key] = client
        return client

    def start_when_ready(self, timeout_s: float = 60.0, *, on_refusal: Callable[[str], None] | None = None) -> Any:
        """``~/start_episode`` until it succeeds: it refuses while the warm-up lacks a stream."""
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self.call("start_episode", timeout_s=timeout_s)
            if reply.success:
                return reply
            if on_refusal is not None:
                on_refusal(reply.message)
            if time.monotonic() > deadline:
                raise RecorderError(f"never ready within {timeout_s:g} s: {reply.message}")
            self.spin_for(0.3)

    def say(self, label: str, text: str, timeout_s: float = 30.0) -> None:
        """``text`` on ``~/<label>`` (task, failure_reason, operator_notes), once the recorder hears it."""
        publisher = self.labels[label]
        self.spin_until(lambda: publisher.get_subscription_count() > 0, timeout_s, f"waiting for ~/{label}")
        publisher.publish(String(data=text))

    def status(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """The next ``~/status`` the recorder publishes."""
        count = len(self.statuses)
        self.spin_until(lambda: len(self.statuses) > count, timeout_s, "waiting for a status")
        return self.statuses[-1]

    def episode_status(self) -> dict[str, Any]:
        """The episode part of the latest status heard ({} between episodes)."""
        episode: dict[str, Any] = (self.statuses[-1].get("episode") or {}) if self.statuses else {}
        return episode

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()  # type: ignore[no-untyped-call]
        if self._context is not None:
            self._context.try_shutdown()
