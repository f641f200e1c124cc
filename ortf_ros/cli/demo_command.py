"""``ortf demo``: the main job on a built-in example.

Generated teleop bags -> ``ortf-bag2ortf`` -> validate -> info; then (unless
``--no-live``) the same scene published over loopback DDS and recorded live, which
needs ROS 2: without rclpy (``pip install ortf_ros`` alone) one line says so, and the
demo still exits 0 with its offline dataset made. Its
numbers are checked before anything is written, and a demo that fails before its
dataset is finished removes what it made. ``--force`` replaces only an earlier demo's
output (or an empty directory): ``ortf demo ~ --force`` must never empty a home.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from ortf_ros import bounds
from ortf_ros.cli import arguments
from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.boundary import EXIT_FAILED, EXIT_OK, OneLineParser
from ortf_ros.cli.demo_shared import demo_mapping, live_skipped, show_validated
from ortf_ros.cli.outputs import removed_on_failure
from ortf_ros.errors import UsageError, naming
from ortf_ros.io import paths
from ortf_ros.pipeline.mapping import write_mapping
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.images import check_size

MARKER = ".ortf-demo"
"""The file (with ``MARKER_TEXT``) that says a directory is a demo's output, which
``--force`` may replace."""


def add_demo(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="convert generated teleop bags with ortf-bag2ortf, validate, show info; then record the same scene "
        "live with ortf_recorder over loopback DDS (needs ROS 2)",
    )
    p.add_argument("output", nargs="?", default="demo-output")
    count = arguments.bounded(bounds.DEMO_EPISODES)
    p.add_argument("--episodes", type=count, default=2, help="recordings to generate and convert (1-100)")
    seconds = arguments.bounded(bounds.DEMO_SECONDS)
    p.add_argument("--seconds", type=seconds, default=3.0, help="length of each recording (0.5-3600)")
    side = arguments.bounded(bounds.DEMO_SIDE)
    p.add_argument("--width", type=side, default=320, help="camera image width (even)")
    p.add_argument("--height", type=side, default=240, help="camera image height (even)")
    p.add_argument("--force", action="store_true", help="replace OUTPUT if it is an earlier demo's output")
    p.add_argument("--no-live", action="store_true", help="skip the live recording over DDS")
    p.set_defaults(run=run_demo, prog="ortf demo")


MARKER_TEXT = "made by `ortf demo`; `ortf demo --force` may replace this directory\n"
DEMO_ENTRIES = frozenset({MARKER, "mapping.yaml", "dataset", "live", "live-logs", "live-mapping.yaml"})
"""Everything a demo writes into its output; ``teleop_N`` besides."""


def _is_demo_output(path: Path) -> bool:
    """Empty, or made by ``ortf demo`` (its marker, or an earlier version's mapping.yaml and
    dataset) and holding nothing a demo does not write: a file of the user's in it, and
    ``--force`` refuses."""
    entries = [entry.name for entry in path.iterdir()]
    if not entries:
        return True
    ours = all(name in DEMO_ENTRIES or re.fullmatch(r"teleop_\d+", name) for name in entries)
    marker = path / MARKER
    marked = marker.is_file() and not marker.is_symlink() and marker.read_bytes() == MARKER_TEXT.encode()
    earlier = MARKER not in entries and (path / "mapping.yaml").is_file() and (path / "dataset").is_dir()
    return ours and (marked or earlier)


def _prepare(args: argparse.Namespace) -> Path:
    """The output directory, checked (with the image size) before anything is written."""
    try:
        check_size(args.width, args.height)
    except ValueError as exc:
        raise UsageError(f"--width/--height: {exc}") from None
    out = Path(args.output)
    if not (paths.exists(out) or out.is_symlink()):
        return paths.output_dir(args.output, "the demo", existing=None)
    if not args.force:
        raise UsageError(f"{out}: exists; pass --force to replace it")
    if out.is_symlink() or not out.is_dir():
        raise UsageError(f"{out}: not a directory; --force replaces only an earlier demo's output")
    if not _is_demo_output(out):
        raise UsageError(
            f"{out}: not only an ortf demo's output; --force replaces only those "
            "(give a new path, or remove it yourself)"
        )
    paths.creatable(out, "the demo")
    return out


def run_demo(args: argparse.Namespace) -> int:
    out = _prepare(args)
    with _replacing(out) as discard, naming(out):
        out.mkdir(parents=True)
        (out / MARKER).write_text(MARKER_TEXT)
        code = _offline(args, out)
        if code != EXIT_OK:
            discard()  # the conversion said why, in its one line
            return code
    return EXIT_OK if args.no_live else _live_demo(out)


@contextlib.contextmanager
def _replacing(out: Path) -> Iterator[Callable[[], None]]:
    """An earlier demo at ``out`` moved aside while the new one is made: removed when the
    block ends, put back when the new one was removed (it failed, was interrupted, or the
    block called the ``discard`` it is given), so a failed ``--force`` run leaves the
    earlier demo as it was."""
    aside = out.with_name(f".{out.name}.replaced-by-ortf-demo") if out.exists() else None
    if aside is not None:
        if aside.exists():
            shutil.rmtree(aside)  # an earlier run's, killed outright
        os.replace(out, aside)
    try:
        with removed_on_failure(out) as discard:
            yield discard
    finally:
        if aside is not None:
            if out.exists():
                shutil.rmtree(aside, ignore_errors=True)
            else:
                os.replace(aside, out)


def _offline(args: argparse.Namespace, out: Path) -> int:
    bags = [
        write_teleop_bag(
            out / f"teleop_{n}",
            "mcap",
            duration_s=args.seconds,
            width=args.width,
            height=args.height,
            audio="ros2",
            lidar=True,
            detections=True,
        )
        for n in range(args.episodes)
    ]
    print(f"generated {len(bags)} teleop recording(s) of {args.seconds:g} s in {out} (MCAP: 2 cameras, depth,")
    print("  joint states, commands, 1 kHz force-torque, TF, URDF, a microphone, a 2D lidar, a point cloud,")
    print("  detections on the wrist camera)\n")
    mapping_file = out / "mapping.yaml"
    write_mapping(demo_mapping(bags[0].path), mapping_file)
    dataset = out / "dataset"
    writer_args = ["--config", str(mapping_file), "--task", "Pick up the peg", "--success"]
    code = bag2ortf([str(b.path) for b in bags] + ["-o", str(dataset), *writer_args])
    if code != EXIT_OK:
        return code
    return EXIT_OK if show_validated(dataset, print) else EXIT_FAILED


def _live_demo(out: Path) -> int:
    """``python -m ortf_ros.ros.live_demo OUT``: a child process, so that this ROS-free
    command imports no ROS; without rclpy, one line instead and 0 (the live part is
    optional). A ROS 2 install that is there but incomplete the child tells the same way."""
    skipped = live_skipped()
    if skipped is not None:
        print(f"\n{skipped}", flush=True)
        return EXIT_OK
    sys.stdout.flush()
    child = subprocess.Popen([sys.executable, "-m", "ortf_ros.ros.live_demo", str(out)], env=dict(os.environ))
    try:
        return child.wait()
    except BaseException:
        # Interrupted: a Ctrl-C reached the child too, and it stops its own children and
        # exits; if it does not, SIGTERM (which it takes as the same), then SIGKILL.
        for stop in (None, child.terminate, child.kill):
            if child.poll() is None:
                if stop is not None:
                    stop()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=10)
        raise
