"""``ortf_scene_publisher``'s command line: the scene's options (``TeleopConfig``) and the
publisher's own (``Options``).

ROS-free: the ROS arguments (``--ros-args ...``) are taken off before these are parsed.
A bad option raises ``UsageError`` (``UsageErrorParser``), which the CLI boundary says in
one line on stderr, with exit code 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortf_ros.cli.boundary import UsageErrorParser
from ortf_ros.errors import UsageError
from ortf_ros.synthetic.images import check_size
from ortf_ros.synthetic.scene import TeleopConfig
from ortf_ros.synthetic.topics import (
    CAMERA_FRAMES,
    CAMERAS,
    COMPRESSED_SUFFIX,
    H264_SUFFIX,
    TOPIC_ROBOT_DESCRIPTION,
    TOPIC_TF_STATIC,
)

NODE_NAME = "ortf_scene_publisher"
LATCHED = (TOPIC_ROBOT_DESCRIPTION, TOPIC_TF_STATIC)
DEFAULT_DEPTH = 10
WAIT_ALL = "all"


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
    p = UsageErrorParser(
        prog=NODE_NAME,
        description="Publish the synthetic teleoperation scene of ortf_ros.synthetic over DDS, in real time.",
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
    """What to publish (``config``), for how long, and how: the parsed command line."""

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
