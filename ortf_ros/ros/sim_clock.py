"""Receive times on the simulated clock: what /clock read when each message arrived.

Under ``use_sim_time`` a message's receive time is on the simulation's clock. A node's
clock follows /clock only when its executor takes the next /clock message, so reading it
when a message is drained gives the time of whichever /clock the executor last got: on a
loaded machine, hundreds of milliseconds old, or newer than the message when a backlog
is drained. Either moves every receive time by the recorder's own load, which the clock
watch (``pipeline.clock_offsets``) then sees as the stamps' clock jumping.

``SimClock`` takes /clock itself, on the receiving thread, with the middleware's
reception stamp of each /clock message (wall time, as the data's own). A data message's
receive time is the simulated time of the last /clock that arrived before it: the value
a node's clock had at that instant, had its executor taken /clock at once. The pairs are
kept for ``KEPT`` /clock messages (four seconds at a simulator's 1 kHz), far more than a
drain pass lags.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import deque

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock

from ortf_ros.format.units import NS
from ortf_ros.ros.taking import waiting

KEPT = 4096
"""/clock messages remembered with their arrival (memory: two deques of ints)."""


def _ignore(_: object) -> None:
    """The callback rclpy requires: never called, since no executor serves this subscription."""


class SimClock:
    """/clock as it arrived at ``node``'s process, taken when asked (no executor). Read by
    the receiving thread (receive times) and the recorder's (when a command came): one
    clock for both, so an episode's bounds and its messages' times agree."""

    def __init__(self, node: Node) -> None:
        # Best effort, as rclpy's own time source subscribes, with a history deep enough to
        # keep every /clock between two drain passes (a second of a 1 kHz /clock).
        profile = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)  # type: ignore[no-untyped-call]
        self._subscription = node.create_subscription(Clock, "/clock", _ignore, profile)
        self._arrived: deque[int] = deque(maxlen=KEPT)  # reception stamps (wall ns), rising
        self._simulated: deque[int] = deque(maxlen=KEPT)  # the /clock each carried
        self._lock = threading.Lock()

    def now(self) -> int:
        """The latest /clock, every waiting one taken (0: none has come yet)."""
        with self._lock:
            self._take()
            return self._simulated[-1] if self._simulated else 0

    def _take(self) -> None:
        for message, info in waiting(self._subscription, raw=False):
            arrived = int(info["received_timestamp"]) or (self._arrived[-1] if self._arrived else 0)
            if self._arrived and arrived < self._arrived[-1]:  # (never out of order for bisect)
                arrived = self._arrived[-1]
            self._arrived.append(arrived)
            self._simulated.append(message.clock.sec * NS + message.clock.nanosec)

    def at(self, arrived_ns: int) -> int:
        """The simulated time when a message arrived at ``arrived_ns`` (wall, the middleware's
        reception stamp): the last /clock that arrived before it (0: none has come yet)."""
        with self._lock:
            if not self._arrived or arrived_ns > self._arrived[-1]:
                self._take()  # (a /clock may have come since the last was taken, before the message)
            if not self._simulated:
                return 0
            index = bisect_right(self._arrived, arrived_ns) - 1
            return self._simulated[max(index, 0)]  # (older than every one kept: the oldest)
