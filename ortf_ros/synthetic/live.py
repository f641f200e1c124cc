"""The scene in real time: every event of ``schedule``, serialized, handed to its topic's
outlet at its time. ROS-free: ``ortf_scene_publisher`` (``ortf_ros.ros.scene_publisher``)
gives it rclpy publishers as the outlets.

The event received at ``receive_ns`` in a bag is handed over at ``t0 + (receive_ns -
start_ns)``, where ``t0`` is when the clock starts, as the very bytes ``Messages.serialize``
gives a bag. Header stamps are ``start_ns`` plus the stream's offset (by default the wall
clock at ``t0``), so they are wall-clock times a few milliseconds (the schedule's
simulated latency) before their publication.

Timing: a generator thread builds and serializes messages up to ``GENERATE_AHEAD`` ahead
(a 640x480 JPEG takes 3 ms, a raw frame 0.15 ms), and the calling thread sleeps until
each one's time and publishes it. The clock starts ``START_LEAD_NS`` after the generator,
so the first messages are ready in time. A stop request (``Stop``, set from a signal
handler) is seen between two messages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Protocol

from ortf_ros.synthetic.live_report import LiveReport
from ortf_ros.synthetic.messages import Messages
from ortf_ros.synthetic.scene import TeleopConfig
from ortf_ros.synthetic.schedule import Event, schedule

MAX_SLEEP_NS = 50_000_000  # a stop request is seen within this while waiting
POLL_S = 0.05  # the same, for the threads' queue waits
START_LEAD_NS = 100_000_000  # the clock starts this long after the generator
GENERATE_AHEAD = 64  # serialized messages ready at most (a few camera frames among them)
SWITCH_INTERVAL_S = 0.0005  # GIL hand-over: the publishing loop must not wait 5 ms for the generator


class Outlet(Protocol):
    """Where a topic's serialized messages go (an rclpy ``Publisher``)."""

    def publish(self, msg: bytes, /) -> None: ...


class Stop:
    """Set by SIGINT/SIGTERM; the publishing loop looks at it between messages (a flag, not
    an exception: a KeyboardInterrupt between a publish and its count would make the
    report disagree with what subscribers received)."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: object) -> None:
        self.requested = True


class Generator(threading.Thread):
    """Builds and serializes the scheduled messages ahead of their time, at most
    ``GENERATE_AHEAD`` of them, so that a slow one (a JPEG frame: 3 ms at 640x480) does not
    delay the messages due while it is made. Runs beside the publishing loop: numpy,
    PyAV and a waiting publisher release the GIL, and the loop takes it back within the
    switch interval ``SWITCH_INTERVAL_S`` (which the process sets)."""

    def __init__(self, messages: Messages, events: Iterator[Event], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.messages, self.events = messages, events
        self.queue: queue.Queue[tuple[Event, bytes] | BaseException | None] = queue.Queue(GENERATE_AHEAD)
        self.halted = threading.Event()

    def run(self) -> None:
        try:
            for event in self.events:
                if not self._put(
                    (event, self.messages.serialize(event.topic, event.seq, event.stamp_ns, event.clock_ns))
                ):
                    return
            self._put(None)
        except BaseException as exc:  # to the publishing loop, which raises it
            self._put(exc)

    def _put(self, item: tuple[Event, bytes] | BaseException | None) -> bool:
        while not self.halted.is_set():
            with contextlib.suppress(queue.Full):
                self.queue.put(item, timeout=POLL_S)
                return True
        return False

    def next(self, stop: Stop) -> tuple[Event, bytes] | None:
        """The next message, serialized; None at the end of the schedule or once ``stop`` is requested."""
        while not stop.requested:
            try:
                item = self.queue.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if isinstance(item, BaseException):
                raise item
            return item
        return None

    def halt(self) -> None:
        self.halted.set()
        self.join()


def play(
    messages: Messages,
    outlets: Mapping[str, Outlet],
    report: LiveReport,
    stop: Stop,
    *,
    endless: bool,
    start_ns: int | None,
    name: str,
) -> TeleopConfig:
    """Publish ``messages.config``'s schedule in real time until it ends (never, if
    ``endless``) or ``stop`` is requested, counting each message in ``report``. Header
    stamps start at ``start_ns`` (None: the wall clock at ``t0``); the config played, with
    that ``start_ns``, is returned. ``name`` names the generator thread."""
    config = messages.config
    # The clock starts START_LEAD_NS from now, so the generator is ahead from the first message.
    t0 = time.monotonic_ns() + START_LEAD_NS
    report.t0_wall_ns = time.time_ns() + START_LEAD_NS
    start_ns = start_ns if start_ns is not None else report.t0_wall_ns
    report.start_ns = start_ns
    if start_ns != config.start_ns:
        config = dataclasses.replace(config, start_ns=start_ns)
        messages.config = config  # read as each message is built: the warm caches stay
    generator = Generator(messages, schedule(config, endless=endless), f"{name} generator")
    generator.start()
    try:
        while (item := generator.next(stop)) is not None:
            event, data = item
            due = t0 + event.receive_ns - start_ns
            now = time.monotonic_ns()
            while now < due and not stop.requested:
                time.sleep(min(due - now, MAX_SLEEP_NS) / 1e9)
                now = time.monotonic_ns()
            if stop.requested:
                break
            wall = time.time_ns()
            outlets[event.topic].publish(data)
            done = time.monotonic_ns()
            report.add(event, wall, now - due, done - now)
    finally:
        report.interrupted = stop.requested
        report.elapsed_ns = max(time.monotonic_ns() - t0, 0)
        report.end_wall_ns = time.time_ns()
        generator.halt()
    return config
