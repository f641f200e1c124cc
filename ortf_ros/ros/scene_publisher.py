"""``ortf_scene_publisher``: the synthetic teleoperation scene of ``synthetic_bag``, live over DDS.

    python -m ortf_ros.ros.scene_publisher --duration 10 --side-camera --report scene.json

A stand-in robot for the recorder's tests, ``make demo`` and the benchmark. It publishes
every event of ``synthetic_bag.schedule`` in real time: the event received at
``receive_ns`` in a bag is published at wall time ``t0 + (receive_ns - start_ns)``, where
``t0`` is when the clock starts, as the very CDR bytes ``write_teleop_bag`` writes for it
(``Messages.serialize``). Header stamps are ``start_ns`` plus the stream's offset
(``--start-ns``, default the wall clock at ``t0``), so they are wall-clock times a few
milliseconds (the schedule's simulated latency) before their publication, and a bag
written by ``write_teleop_bag`` with the same options and ``start_ns`` holds every
message that was published, byte for byte (but for the zero bytes DDS pads a serialized
message with, to a multiple of 4 bytes), at the same sequence numbers.

``--duration S`` publishes the schedule of a bag of ``S`` seconds and exits 0.
``--duration 0`` (the default) publishes until SIGINT/SIGTERM: ``schedule(endless=True)``,
every stream going on with the same formulas (``seq`` 0, 1, 2, ..., stamps
``start_ns + seq / rate``; frame numbers wrap after 4**12 frames, 6.5 days at 30 fps),
so its first ``S`` seconds are the ``--duration S`` scene.

QoS: reliable, keep-last ``--depth`` (default 10) and volatile for the streams (a
subscriber that falls more than ``--depth`` messages behind loses the oldest, as with any
ROS driver); ``/robot_description`` and ``/tf_static`` are published once, at the start,
reliable, transient-local, depth 1 (latched).

Timing: a generator thread builds and serializes messages up to 64 ahead (a 640x480
JPEG takes 3 ms, a raw frame 0.15 ms), and the main thread sleeps until each one's time
and publishes it (no executor: the node has no callbacks). The clock starts 100 ms after
the generator, so the first messages are ready in time. At the benchmark's rates (three
640x480 rgb8 cameras at 30 fps, joints 500 Hz, wrench 1 kHz, TF 100 Hz) this takes about
a third of a core.

``--wait-topic TOPIC...`` (``all``: every stream but the latched topics) holds the clock
until each of these topics has a matched subscriber, so a subscriber sees the scene from
``seq`` 0; ``--ready-file`` is created once the publishers exist. SIGINT or SIGTERM stops
the publishing (between two messages), waits up to 2 s for reliable subscribers to
acknowledge what was published, writes ``--report`` and exits 0. The report (JSON,
written atomically, also when stopped early) holds, per topic, the type, the number of
messages published, the first/last seq and header stamp and the wall time (ns) of the
first/last publication, and the publish timing: lateness (publication minus scheduled
time) p50/p99/max, overall and per topic, also printed as one line at exit. A bad option
is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import queue
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import remove_ros_args, try_shutdown

from ortf_ros.io import atomic
from ortf_ros.ros.message_types import message_class
from ortf_ros.synthetic_bag import (
    CAMERA_FRAMES,
    CAMERAS,
    COMPRESSED_SUFFIX,
    H264_SUFFIX,
    TOPIC_ROBOT_DESCRIPTION,
    TOPIC_TF_STATIC,
    Event,
    Messages,
    TeleopConfig,
    check_size,
    schedule,
)

NODE_NAME = "ortf_scene_publisher"
LATCHED = (TOPIC_ROBOT_DESCRIPTION, TOPIC_TF_STATIC)
DEFAULT_DEPTH = 10
DELIVERY_TIMEOUT_S = 2.0  # at the end, how long reliable subscribers get to acknowledge, in all
MAX_SLEEP_NS = 50_000_000  # a stop request is seen within this while waiting
POLL_S = 0.05  # the same, for the threads' queue waits
START_LEAD_NS = 100_000_000  # the clock starts this long after the generator
GENERATE_AHEAD = 64  # serialized messages ready at most (a few camera frames among them)
SWITCH_INTERVAL_S = 0.0005  # GIL hand-over: the publishing loop must not wait 5 ms for the generator
HISTOGRAM_BIN_NS = 10_000  # lateness histograms: 10 us bins ...
HISTOGRAM_BINS = 10_000  # ... up to 100 ms (later ones count in the last bin; the max is exact)
WAIT_ALL = "all"


class UsageError(Exception):
    """A bad command line: one line on stderr, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise UsageError(message)


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        value = kind(text)
        if value <= 0:
            raise ValueError(text)
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise ValueError(text)
    return value


_non_negative.__name__ = "non-negative float"  # argparse names the type in its message


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=NODE_NAME,
        description="Publish the synthetic teleoperation scene of ortf_ros.synthetic_bag over DDS, in real time.",
    )
    p.add_argument(
        "--duration", type=_non_negative, default=0.0, metavar="S", help="seconds; 0 (default): until SIGINT/SIGTERM"
    )
    p.add_argument("--width", type=_positive(int), default=640, help="of every camera (default 640)")
    p.add_argument("--height", type=_positive(int), default=480, help="(default 480)")
    p.add_argument("--fps", type=_positive(int), default=30, help="cameras and camera_info (default 30)")
    p.add_argument("--joint-rate", type=_positive(int), default=100, metavar="HZ", help="/joint_states (default 100)")
    p.add_argument("--command-rate", type=_positive(int), default=50, metavar="HZ", help="/joint_command (default 50)")
    p.add_argument(
        "--wrench-rate", type=_positive(int), default=1000, metavar="HZ", help="/ft_sensor/wrench (default 1000)"
    )
    p.add_argument("--tf-rate", type=_positive(int), default=100, metavar="HZ", help="/tf (default 100)")
    p.add_argument("--side-camera", action="store_true", help="a third RGB camera, /side_camera/image_raw")
    p.add_argument("--no-depth", action="store_true", help="no /depth_camera topics")
    p.add_argument("--lidar", action="store_true", help="a LaserScan on /lidar/scan and a PointCloud2 on /lidar/points")
    p.add_argument(
        "--detections", action="store_true", help="vision_msgs/Detection2DArray per wrist frame (needs vision_msgs)"
    )
    p.add_argument(
        "--compressed-cameras",
        nargs="+",
        default=[],
        metavar="TOPIC",
        help="image topics published as JPEG CompressedImage on <topic>/compressed ('all': every camera)",
    )
    p.add_argument(
        "--audio", action="store_true", help="a microphone: audio_common_msgs/AudioStamped on /microphone/audio"
    )
    p.add_argument(
        "--audio-drop", type=int, nargs="+", default=[], metavar="SEQ", help="audio messages not published (dropped)"
    )
    p.add_argument(
        "--h264-cameras",
        nargs="+",
        default=[],
        metavar="TOPIC",
        help="image topics published as H.264 on <topic>/h264 (libx264, no B-frames, keyframe every 10 frames)",
    )
    p.add_argument(
        "--h264-message",
        choices=("CompressedVideo", "CompressedImage"),
        default="CompressedVideo",
        help="what carries the H.264 packets: foxglove_msgs CompressedVideo (default) or CompressedImage 'h264'",
    )
    p.add_argument("--start-ns", type=int, default=None, metavar="N", help="header stamp of t = 0 (default: now)")
    p.add_argument(
        "--wait-topic",
        nargs="+",
        default=[],
        metavar="TOPIC",
        help=f"start the clock once each of these topics has a subscriber ('{WAIT_ALL}': every non-latched topic)",
    )
    p.add_argument(
        "--depth", type=_positive(int), default=DEFAULT_DEPTH, help="keep-last depth of the streams (default 10)"
    )
    p.add_argument("--report", type=Path, default=None, metavar="PATH", help="JSON report, written at exit")
    p.add_argument("--ready-file", type=Path, default=None, metavar="PATH", help="created once the publishers exist")
    return p


@dataclass(frozen=True)
class Options:
    config: TeleopConfig
    endless: bool
    start_ns: int | None  # None: the wall clock when the schedule starts
    wait_topics: tuple[str, ...]
    depth: int
    report: Path | None
    ready_file: Path | None


def parse_options(argv: Sequence[str]) -> Options:
    """The options of a command line (without ROS arguments); UsageError when one is bad."""
    args = parser().parse_args(list(argv))
    try:
        check_size(args.width, args.height)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for option, path in (("--report", args.report), ("--ready-file", args.ready_file)):
        if path is not None and not path.parent.is_dir():
            raise UsageError(f"{option} {path}: no such directory {path.parent}")
    cameras = CAMERA_FRAMES if args.side_camera else CAMERAS
    compressed: list[str] = []
    for name in args.compressed_cameras:
        chosen = list(cameras) if name == "all" else [name.removesuffix(COMPRESSED_SUFFIX)]
        compressed += [c for c in chosen if c not in compressed]
    try:
        config = TeleopConfig(
            fmt="mcap",
            duration_s=args.duration,
            width=args.width,
            height=args.height,
            fps=args.fps,
            joint_rate_hz=args.joint_rate,
            command_rate_hz=args.command_rate,
            wrench_rate_hz=args.wrench_rate,
            tf_rate_hz=args.tf_rate,
            with_depth=not args.no_depth,
            compressed_cameras=tuple(compressed),
            side_camera=args.side_camera,
            audio="ros2" if args.audio else None,
            audio_dropped=tuple(args.audio_drop),
            lidar=args.lidar,
            h264_cameras=tuple(name.removesuffix(H264_SUFFIX) for name in args.h264_cameras),
            h264_message=args.h264_message,
            detections=args.detections,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    streams = [t for t in config.rates() if t not in LATCHED]
    wait: list[str] = []
    for topic in args.wait_topic:
        if topic not in (WAIT_ALL, *config.rates()):
            raise UsageError(
                f"--wait-topic {topic}: not published; expected '{WAIT_ALL}' or one of {', '.join(streams)}"
            )
        wait += [t for t in (streams if topic == WAIT_ALL else [topic]) if t not in wait]
    return Options(
        config=config,
        endless=args.duration == 0,
        start_ns=args.start_ns,
        wait_topics=tuple(wait),
        depth=args.depth,
        report=args.report,
        ready_file=args.ready_file,
    )


# ---------------------------------------------------------------- statistics


class Histogram:
    """Durations in 10 us bins up to 100 ms, for percentiles in constant memory."""

    def __init__(self) -> None:
        self.bins = np.zeros(HISTOGRAM_BINS, dtype=np.int64)
        self.count = 0
        self.max_ns = 0

    def add(self, ns: int) -> None:
        ns = max(ns, 0)
        self.bins[min(ns // HISTOGRAM_BIN_NS, HISTOGRAM_BINS - 1)] += 1
        self.count += 1
        self.max_ns = max(self.max_ns, ns)

    def percentile_ms(self, q: float) -> float | None:
        """The upper edge of the bin holding the ``q`` quantile (at most the max), in ms."""
        if not self.count:
            return None
        index = int(np.searchsorted(np.cumsum(self.bins), q * self.count))
        return min((index + 1) * HISTOGRAM_BIN_NS, self.max_ns) / 1e6

    def summary(self) -> dict[str, float | None]:
        return {
            "p50": self.percentile_ms(0.5),
            "p99": self.percentile_ms(0.99),
            "max": self.max_ns / 1e6 if self.count else None,
        }


@dataclass
class TopicTally:
    msgtype: str
    published: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    first_stamp_ns: int | None = None
    last_stamp_ns: int | None = None
    first_wall_ns: int | None = None
    last_wall_ns: int | None = None
    lateness: Histogram = field(default_factory=Histogram)

    def add(self, event: Event, wall_ns: int, lateness_ns: int) -> None:
        if not self.published:
            self.first_seq, self.first_stamp_ns, self.first_wall_ns = event.seq, event.stamp_ns, wall_ns
        self.published += 1
        self.last_seq, self.last_stamp_ns, self.last_wall_ns = event.seq, event.stamp_ns, wall_ns
        self.lateness.add(lateness_ns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "msgtype": self.msgtype,
            "published": self.published,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "first_stamp_ns": self.first_stamp_ns,
            "last_stamp_ns": self.last_stamp_ns,
            "first_wall_ns": self.first_wall_ns,
            "last_wall_ns": self.last_wall_ns,
            "lateness_ms": self.lateness.summary(),
        }


# ---------------------------------------------------------------- the node


class _Stop:
    """Set by SIGINT/SIGTERM; the publishing loop looks at it between messages (a flag, not
    an exception: a KeyboardInterrupt between a publish and its count would make the
    report disagree with what subscribers received)."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: object) -> None:
        self.requested = True


class _Generator(threading.Thread):
    """Builds and serializes the scheduled messages ahead of their time, at most
    ``GENERATE_AHEAD`` of them, so that a slow one (a JPEG frame: 3 ms at 640x480) does not
    delay the messages due while it is made. Runs beside the publishing loop: numpy,
    PyAV and a waiting publisher release the GIL, and the loop takes it back within the
    switch interval ``main`` sets."""

    def __init__(self, messages: Messages, events: Iterator[Event]) -> None:
        super().__init__(name=f"{NODE_NAME} generator", daemon=True)
        self.messages, self.events = messages, events
        self.queue: queue.Queue[tuple[Event, bytes] | BaseException | None] = queue.Queue(GENERATE_AHEAD)
        self.halted = threading.Event()

    def run(self) -> None:
        try:
            for event in self.events:
                if not self._put((event, self.messages.serialize(event.topic, event.seq, event.stamp_ns))):
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

    def next(self, stop: _Stop) -> tuple[Event, bytes] | None:
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


class ScenePublisher(Node):
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
        self.tallies = {topic: TopicTally(msgtype) for topic, msgtype in msgtypes.items()}
        self.lateness = Histogram()
        self.publish_call = Histogram()
        self.start_ns: int | None = None
        self.t0_wall_ns: int | None = None
        self.end_wall_ns: int | None = None
        self.elapsed_ns = 0
        self.interrupted = False

    def _qos(self, latched: bool) -> QoSProfile:
        return QoSProfile(  # type: ignore[no-untyped-call]
            history=HistoryPolicy.KEEP_LAST,
            depth=1 if latched else self.options.depth,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
        )

    def wait_for_subscribers(self, stop: _Stop) -> bool:
        """Until every ``--wait-topic`` has a subscriber; False when stopped first."""
        waiting = list(self.options.wait_topics)
        if waiting:
            self.log.info(f"waiting for subscribers on {', '.join(waiting)}")
        while waiting and not stop.requested:
            waiting = [t for t in waiting if self.publishers_by_topic[t].get_subscription_count() == 0]
            if waiting:
                time.sleep(0.01)
        return not stop.requested

    def run(self, stop: _Stop) -> None:
        """Publish the schedule in real time until it ends or ``stop`` is requested."""
        config = self.config
        how_long = "until stopped" if self.options.endless else f"for {config.duration_s:g} s"
        self.log.info(f"publishing {len(self.publishers_by_topic)} topics {how_long}")  # before t0: 20 ms, once
        # The clock starts START_LEAD_NS from now, so the generator is ahead from the first message.
        t0 = time.monotonic_ns() + START_LEAD_NS
        self.t0_wall_ns = time.time_ns() + START_LEAD_NS
        start_ns = self.options.start_ns if self.options.start_ns is not None else self.t0_wall_ns
        self.start_ns = start_ns
        if start_ns != config.start_ns:
            self.config = config = dataclasses.replace(config, start_ns=start_ns)
            self.messages.config = config  # read as each message is built: the warm caches stay
        generator = _Generator(self.messages, schedule(config, endless=self.options.endless))
        generator.start()
        publishers, tallies = self.publishers_by_topic, self.tallies
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
                publishers[event.topic].publish(data)
                done = time.monotonic_ns()
                tallies[event.topic].add(event, wall, now - due)
                self.lateness.add(now - due)
                self.publish_call.add(done - now)
        finally:
            self.interrupted = stop.requested
            self.elapsed_ns = max(time.monotonic_ns() - t0, 0)
            self.end_wall_ns = time.time_ns()
            generator.halt()

    def wait_for_delivery(self) -> bool:
        """Up to ``DELIVERY_TIMEOUT_S`` in all for reliable subscribers to acknowledge."""
        deadline = time.monotonic() + DELIVERY_TIMEOUT_S
        acked = True
        for publisher in self.publishers_by_topic.values():
            remaining = max(deadline - time.monotonic(), 0.0)
            acked = publisher.wait_for_all_acked(Duration(nanoseconds=int(remaining * 1e9))) and acked
        return acked

    def report(self) -> dict[str, Any]:
        c = self.config
        return {
            "node": NODE_NAME,
            "start_ns": self.start_ns,
            "t0_wall_ns": self.t0_wall_ns,
            "end_wall_ns": self.end_wall_ns,
            "duration_s": None if self.options.endless else c.duration_s,
            "elapsed_s": self.elapsed_ns / 1e9,
            "interrupted": self.interrupted,
            "config": {
                "width": c.width,
                "height": c.height,
                "fps": c.fps,
                "joint_rate_hz": c.joint_rate_hz,
                "command_rate_hz": c.command_rate_hz,
                "wrench_rate_hz": c.wrench_rate_hz,
                "tf_rate_hz": c.tf_rate_hz,
                "with_depth": c.with_depth,
                "side_camera": c.side_camera,
                "lidar": c.lidar,
                "compressed_cameras": list(c.compressed_cameras),
                "h264_cameras": list(c.h264_cameras),
                "depth": self.options.depth,
            },
            "topics": {topic: tally.to_dict() for topic, tally in self.tallies.items()},
            "timing": {
                "published": self.lateness.count,
                "lateness_ms": self.lateness.summary(),
                "late_over_1ms": int(self.lateness.bins[1_000_000 // HISTOGRAM_BIN_NS :].sum()),
                "late_over_10ms": int(self.lateness.bins[10_000_000 // HISTOGRAM_BIN_NS :].sum()),
                "publish_call_ms": self.publish_call.summary(),
            },
        }

    def summary_line(self) -> str:
        lateness = self.lateness.summary()
        timing = (
            f"lateness p50 {lateness['p50']:.3f} ms, p99 {lateness['p99']:.3f} ms, max {lateness['max']:.3f} ms"
            if self.lateness.count
            else "nothing published"
        )
        topics = sum(1 for t in self.tallies.values() if t.published)
        return (
            f"{NODE_NAME}: published {self.lateness.count} messages on {topics} topics "
            f"in {self.elapsed_ns / 1e9:.1f} s; {timing}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        options = parse_options(remove_ros_args([NODE_NAME, *arguments])[1:])
    except UsageError as exc:
        print(f"{NODE_NAME}: {exc}", file=sys.stderr)
        return 2
    # rclpy without its signal handlers: those would shut the context down under a
    # publish; SIGINT/SIGTERM set a flag the publishing loop looks at instead.
    rclpy.init(args=[NODE_NAME, *arguments], signal_handler_options=SignalHandlerOptions.NO)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    stop = _Stop()
    for signum in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a shell starts background jobs ignoring it
        signal.signal(signum, stop)
    node = ScenePublisher(options)
    try:
        if options.ready_file is not None:
            options.ready_file.touch()
        if node.wait_for_subscribers(stop):
            node.run(stop)
        else:
            node.interrupted = True
        if not node.wait_for_delivery():
            node.log.warning(f"not every subscriber acknowledged every message within {DELIVERY_TIMEOUT_S:g} s")
        if options.report is not None:
            atomic.write_json(options.report, node.report())
        print(node.summary_line(), flush=True)
    finally:
        node.destroy_node()  # type: ignore[no-untyped-call]
        try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
