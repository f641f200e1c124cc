"""``ortf_scene_publisher``: the synthetic teleoperation scene (``ortf_ros.synthetic``), live over DDS.

    ortf_scene_publisher --duration 10 --side-camera --report scene.json
    ros2 run ortf_ros ortf_scene_publisher --lidar    # the same, from a ROS 2 workspace

A stand-in robot, to try ``ortf_recorder`` without one, and for the recorder's tests,
``make demo`` and the benchmark. It publishes every event of ``synthetic.schedule`` in
real time (``synthetic.live``: the event received at ``receive_ns`` in a bag is published
at wall time ``t0 + (receive_ns - start_ns)``, where ``t0`` is when the clock starts), as
the very CDR bytes ``write_teleop_bag`` writes for it (``Messages.serialize``). Header
stamps are ``start_ns`` plus the stream's offset (``--start-ns``, default the wall clock
at ``t0``), so they are wall-clock times a few milliseconds (the schedule's simulated
latency) before their publication, and a bag written by ``write_teleop_bag`` with the
same options and ``start_ns`` holds every message that was published, byte for byte
(but for the zero bytes DDS pads a serialized message with, to a multiple of 4 bytes),
at the same sequence numbers.

``--duration S`` publishes the schedule of a bag of ``S`` seconds and exits 0.
``--duration 0`` (the default) publishes until SIGINT/SIGTERM: ``schedule(endless=True)``,
every stream going on with the same formulas (``seq`` 0, 1, 2, ..., stamps
``start_ns + seq / rate``; frame numbers wrap after 4**12 frames, 6.5 days at 30 fps),
so its first ``S`` seconds are the ``--duration S`` scene.

QoS: reliable, keep-last ``--depth`` (default 10) and volatile for the streams (a
subscriber that falls more than ``--depth`` messages behind loses the oldest, as with any
ROS driver); ``/robot_description`` and ``/tf_static`` are published once, at the start,
reliable, transient-local, depth 1 (latched).

Timing: ``synthetic.live`` builds messages in a thread of its own, ahead of their time,
and the main thread publishes each at its time (no executor: the node has no callbacks).
At the benchmark's rates (three 640x480 rgb8 cameras at 30 fps, joints 500 Hz, wrench
1 kHz, TF 100 Hz) this takes about a third of a core.

``--wait-topic TOPIC...`` (``all``: every stream but the latched topics) holds the clock
until each of these topics has a matched subscriber, so a subscriber sees the scene from
``seq`` 0; ``--ready-file`` is created once the publishers exist. SIGINT or SIGTERM stops
the publishing (between two messages), waits up to 2 s for reliable subscribers to
acknowledge what was published, writes ``--report`` and exits 0. The report (JSON,
written atomically, also when stopped early; ``synthetic.live_report``) holds, per topic,
what was published and when, and the publish timing, also printed as one line at exit.
The command line is ``scene_arguments``'s; errors go through the CLI boundary
(``cli.boundary.run_guarded``): a bad option is one line on stderr and exit code 2.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

import rclpy
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import remove_ros_args, try_shutdown

from ortf_ros.cli.boundary import EXIT_OK, run_guarded
from ortf_ros.errors import UsageError
from ortf_ros.io import atomic
from ortf_ros.ros.message_types import message_class
from ortf_ros.ros.scene_arguments import LATCHED, NODE_NAME, Options, parse_options
from ortf_ros.synthetic import live
from ortf_ros.synthetic.live import SWITCH_INTERVAL_S, Stop
from ortf_ros.synthetic.live_report import LiveReport
from ortf_ros.synthetic.messages import Messages

DELIVERY_TIMEOUT_S = 2.0  # at the end, how long reliable subscribers get to acknowledge, in all


class ScenePublisher(Node):
    """A publisher per topic of the scene; ``run`` publishes the scene through them."""

    def __init__(self, options: Options) -> None:
        bag_only = options.config.bag_only_topics()
        if bag_only:  # (before the node exists: nothing to clean up)
            raise UsageError(
                f"{', '.join(bag_only)}: written to bags only (write_teleop_bag): its type has no Python "
                "package here to publish it with"
            )
        super().__init__(NODE_NAME)
        self.log = self.get_logger()  # type: ignore[no-untyped-call]
        self.options = options
        self.config = options.config
        self.messages = Messages(self.config)
        for topic in self.config.rates():  # the one-time costs (types, JPEG encoder, backgrounds) now
            self.messages.serialize(topic, 0, self.config.start_ns)
        msgtypes = self.config.msgtypes()
        self.publishers_by_topic: dict[str, Publisher] = {
            topic: self.create_publisher(message_class(msgtype), topic, self._qos(topic in LATCHED))
            for topic, msgtype in msgtypes.items()
        }
        self.published = LiveReport(msgtypes)

    def _qos(self, latched: bool) -> QoSProfile:
        return QoSProfile(  # type: ignore[no-untyped-call]
            history=HistoryPolicy.KEEP_LAST,
            depth=1 if latched else self.options.depth,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
        )

    def wait_for_subscribers(self, stop: Stop) -> bool:
        """Until every ``--wait-topic`` has a subscriber; False when stopped first."""
        waiting = list(self.options.wait_topics)
        if waiting:
            self.log.info(f"waiting for subscribers on {', '.join(waiting)}")
        while waiting and not stop.requested:
            waiting = [t for t in waiting if self.publishers_by_topic[t].get_subscription_count() == 0]
            if waiting:
                time.sleep(0.01)
        return not stop.requested

    def run(self, stop: Stop) -> None:
        """Publish the schedule in real time until it ends or ``stop`` is requested."""
        how_long = "until stopped" if self.options.endless else f"for {self.config.duration_s:g} s"
        self.log.info(f"publishing {len(self.publishers_by_topic)} topics {how_long}")  # before t0: 20 ms, once
        self.config = live.play(
            self.messages,
            self.publishers_by_topic,
            self.published,
            stop,
            endless=self.options.endless,
            start_ns=self.options.start_ns,
            name=NODE_NAME,
        )

    def wait_for_delivery(self) -> bool:
        """Up to ``DELIVERY_TIMEOUT_S`` in all for reliable subscribers to acknowledge."""
        deadline = time.monotonic() + DELIVERY_TIMEOUT_S
        acked = True
        for publisher in self.publishers_by_topic.values():
            remaining = max(deadline - time.monotonic(), 0.0)
            acked = publisher.wait_for_all_acked(Duration(nanoseconds=int(remaining * 1e9))) and acked
        return acked

    def report(self) -> dict[str, Any]:
        return self.published.to_dict(NODE_NAME, self.config, endless=self.options.endless, depth=self.options.depth)

    def summary_line(self) -> str:
        return self.published.summary_line(NODE_NAME)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    return run_guarded(NODE_NAME, lambda: _publish(arguments))


def _publish(arguments: list[str]) -> int:
    options = parse_options(remove_ros_args([NODE_NAME, *arguments])[1:])
    # rclpy without its signal handlers: those would shut the context down under a
    # publish; SIGINT/SIGTERM set a flag the publishing loop looks at instead.
    rclpy.init(args=[NODE_NAME, *arguments], signal_handler_options=SignalHandlerOptions.NO)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    stop = Stop()
    for signum in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a shell starts background jobs ignoring it
        signal.signal(signum, stop)
    try:
        node = ScenePublisher(options)
    except BaseException:
        try_shutdown()
        raise
    try:
        if options.ready_file is not None:
            options.ready_file.touch()
        if node.wait_for_subscribers(stop):
            node.run(stop)
        else:
            node.published.interrupted = True
        if not node.wait_for_delivery():
            node.log.warning(f"not every subscriber acknowledged every message within {DELIVERY_TIMEOUT_S:g} s")
        if options.report is not None:
            atomic.write_json(options.report, node.report())
        print(node.summary_line(), flush=True)
    finally:
        node.destroy_node()  # type: ignore[no-untyped-call]
        try_shutdown()
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
