"""``ortf``: inspect, validate, recover, export and demo ORTF datasets from the shell.

Every subcommand returns an exit code; anticipated failures (``OrtfError``) become
one line on stderr and exit 1, usage errors exit 2, and only real bugs show a
traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from ortf_ros.bag2ortf import main as bag2ortf
from ortf_ros.cli_support import EXIT_FAILED, EXIT_OK, EXIT_USAGE, progress_bar, run_guarded
from ortf_ros.demo import demo_mapping, show_validated
from ortf_ros.info import dataset_info
from ortf_ros.pipeline.config import write_config
from ortf_ros.playback.export import export_mcap
from ortf_ros.playback.replay import replay_mapping
from ortf_ros.playback.settings import IMAGE_FORMATS, default_settings, read_parameter_file, settings_from_parameters
from ortf_ros.reader import load_dataset
from ortf_ros.recover import recover
from ortf_ros.synthetic_bag import write_teleop_bag
from ortf_ros.validation import validate

EXIT_INVALID = EXIT_FAILED  # validate: the dataset is not valid


def _cmd_validate(args: argparse.Namespace) -> int:
    root = Path(args.path)
    if not root.is_dir():
        print(f"ortf validate: {root}: not a directory", file=sys.stderr)
        return EXIT_USAGE
    report = validate(root, strict=args.strict, episode=args.episode)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for finding in report.findings:
            print(finding.line())
        print(report.summary())
    return EXIT_OK if report.ok else EXIT_INVALID


def _cmd_info(args: argparse.Namespace) -> int:
    info = dataset_info(load_dataset(args.path))
    if args.json:
        print(json.dumps(info.to_dict(), indent=2))
    else:
        print("\n".join(info.lines()))
    return EXIT_OK


def _cmd_recover(args: argparse.Namespace) -> int:
    results = recover(Path(args.path), discard=args.discard)
    for result in results:
        print(result.line())
    if not results:
        print(f"{args.path}: nothing to recover")
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    """The main job on a built-in example: generated teleop bags -> ortf-bag2ortf -> validate -> info;
    then (unless ``--no-live``) the same scene published over loopback DDS and recorded live."""
    out = Path(args.output)
    if out.exists():
        if not args.force:
            print(f"ortf demo: {out} exists; pass --force to replace it", file=sys.stderr)
            return EXIT_USAGE
        shutil.rmtree(out)
    out.mkdir(parents=True)
    bags = [
        write_teleop_bag(out / f"teleop_{n}", "mcap", duration_s=args.seconds, width=args.width, height=args.height)
        for n in range(args.episodes)
    ]
    print(f"generated {len(bags)} teleop recording(s) of {args.seconds:g} s in {out} (MCAP: 2 cameras, depth,")
    print("  joint states, commands, 1 kHz force-torque, TF, URDF)\n")
    mapping_file = out / "mapping.yaml"
    write_config(demo_mapping(bags[0].path), mapping_file)
    dataset = out / "dataset"
    writer_args = ["--config", str(mapping_file), "--task", "Pick up the peg", "--success"]
    code = bag2ortf([str(b.path) for b in bags] + ["-o", str(dataset), *writer_args])
    if code != EXIT_OK:
        return code
    if not show_validated(dataset, print):
        return EXIT_INVALID
    return EXIT_OK if args.no_live else _live_demo(out)


def _live_demo(out: Path) -> int:
    """``python -m ortf_ros.ros.live_demo OUT``: a child process, so that this ROS-free
    command imports no ROS (without ROS 2 the child says so in one line and exits 0)."""
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


def _cmd_export_mcap(args: argparse.Namespace) -> int:
    settings = default_settings()
    if args.config:
        settings = settings_from_parameters(read_parameter_file(args.config), args.config)
    messages = settings.messages
    if args.image_format:
        messages = replace(messages, image_format=args.image_format)

    def warn(line: str) -> None:
        print(f"ortf export mcap: warning: {line}", file=sys.stderr)

    result = export_mcap(args.dataset, args.output, messages, episodes=args.episode, force=args.force, warn=warn)
    total = sum(result.counts.values())
    print(
        f"{result.path}: {total} messages on {len(result.counts)} topics, {result.seconds:.3f} s, "
        f"episode(s) {', '.join(result.episodes)}"
    )
    for topic, count in sorted(result.counts.items()):
        print(f"  {topic:<40} {count:>8}")
    if args.write_config:
        mapping = replay_mapping(result.manifest, messages, split_episodes=True)
        write_config(mapping, Path(args.write_config))
        print(f"wrote {args.write_config}: ortf-bag2ortf {result.path} -o DATASET --config {args.write_config}")
    return EXIT_OK


def _cmd_export_lerobot(args: argparse.Namespace) -> int:
    from ortf_ros.convert.lerobot_export import to_lerobot

    with progress_bar(sys.stderr.isatty(), "frames") as progress:
        result = to_lerobot(args.dataset, args.output, args.flavor, progress=progress)
    print(
        f"{result.path}: {result.flavor} dataset, {result.episodes} episode(s), {result.frames} frames; "
        f"videos reused {result.videos_reused}, re-encoded {result.videos_reencoded}"
    )
    return EXIT_OK


def _cmd_export_mixtrain(args: argparse.Namespace) -> int:
    from ortf_ros.convert.mixtrain_export import MIXTRAIN_VERSION, to_mixtrain

    result = to_mixtrain(args.dataset, args.output)
    print(
        f"{result.path}: Mixtrain {MIXTRAIN_VERSION} dataset, {result.episodes} episode(s) as rows, "
        f"{result.steps} steps, in {', '.join(result.data_files) or 'no data file'} + mixtrain.json"
    )
    return EXIT_OK


def _cmd_export_rlds(args: argparse.Namespace) -> int:
    from ortf_ros.convert.rlds_export import SPLIT, to_rlds

    result = to_rlds(args.dataset, args.output)
    print(
        f"{result.path}: RLDS dataset {result.name!r} (TFDS, split {SPLIT!r}), {result.episodes} episode(s), "
        f"{result.steps} steps; read it with tfds.builder_from_directory({str(result.path)!r})"
    )
    return EXIT_OK


def _add_export(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``ortf export FORMAT``: one subcommand per target format."""
    export = sub.add_parser("export", help="write a dataset in another format")
    formats = export.add_subparsers(dest="format", required=True, metavar="FORMAT")
    p = formats.add_parser(
        "mcap",
        help="the messages ortf_player publishes, as a ROS 2 MCAP file (Foxglove, ros2 bag play)",
        description="Write the messages ortf_player would publish as one ROS 2 MCAP file; no ROS needed.",
    )
    p.add_argument("dataset", metavar="DATASET")
    p.add_argument("output", metavar="OUT.mcap")
    p.add_argument("--episode", action="append", default=[], metavar="ID", help="episode id or position (repeatable)")
    p.add_argument("--force", action="store_true", help="replace OUT.mcap if it exists")
    p.add_argument("--image-format", choices=IMAGE_FORMATS, help="colour cameras as raw rgb8 or JPEG (default raw)")
    p.add_argument("--config", metavar="PLAYBACK_YAML", help="topic names and streams, as config/playback.yaml")
    p.add_argument(
        "--write-config", metavar="MAPPING_YAML", help="save the ortf-bag2ortf mapping that converts OUT.mcap back"
    )
    p.set_defaults(run=_cmd_export_mcap, prog="ortf export mcap")
    p = _add_conversion(
        formats,
        "export lerobot",
        _cmd_export_lerobot,
        summary="a LeRobotDataset v3.0 that lerobot loads as is (--flavor gr00t: LeRobot v2.0 + meta/modality.json)",
        description="Write the dataset as a LeRobotDataset v3.0, or GR00T's LeRobot v2.0 flavour, in a new directory.",
    )
    p.add_argument("--flavor", choices=("lerobot", "gr00t"), default="lerobot")
    _add_conversion(
        formats,
        "export mixtrain",
        _cmd_export_mixtrain,
        summary="Mixtrain v1.0: one Parquet row per episode (trajectory arrays, metadata, video references)",
        description="Write the dataset as a standalone Mixtrain v1.0 dataset in a new (or empty) directory.",
    )
    _add_conversion(
        formats,
        "export rlds",
        _cmd_export_rlds,
        summary="RLDS in TFDS's on-disk layout (needs pip install 'ortf_ros[rlds]')",
        description="Write the dataset as an RLDS dataset that tfds.builder_from_directory reads, "
        "in a new (or empty) directory; needs tensorflow-datasets (pip install 'ortf_ros[rlds]').",
    )


def _add_conversion(
    formats: argparse._SubParsersAction[argparse.ArgumentParser],
    command: str,
    run: Callable[[argparse.Namespace], int],
    *,
    summary: str,
    description: str,
    source: tuple[str, str] = ("dataset", "DATASET"),
) -> argparse.ArgumentParser:
    """One ``ortf export|import FORMAT`` subcommand: a source, a new output directory."""
    p = formats.add_parser(command.split()[-1], help=summary, description=description)
    p.add_argument(source[0], metavar=source[1])
    p.add_argument("output", metavar="OUT_DIR")
    p.set_defaults(run=run, prog=f"ortf {command}")
    return p


def _cmd_import_lerobot(args: argparse.Namespace) -> int:
    from ortf_ros.convert.lerobot_import import from_lerobot

    def warn(line: str) -> None:
        print(f"ortf import lerobot: warning: {line}", file=sys.stderr)

    with progress_bar(sys.stderr.isatty(), "steps") as progress:
        result = from_lerobot(args.source, args.output, warn=warn, progress=progress)
    cameras = ", ".join(result.cameras) or "none"
    print(
        f"{result.path}: {result.episodes} episode(s), {result.steps} steps, cameras: {cameras}; "
        f"videos reused {result.videos_reused}, re-encoded {result.videos_reencoded}"
    )
    return EXIT_OK


def _add_import(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``ortf import FORMAT``: one subcommand per source format."""
    imports = sub.add_parser("import", help="make an ORTF dataset from another format")
    formats = imports.add_subparsers(dest="format", required=True, metavar="FORMAT")
    _add_conversion(
        formats,
        "import lerobot",
        _cmd_import_lerobot,
        summary="a LeRobotDataset v3.0 (video or image cameras, GR00T's modality.json) as a new ORTF dataset",
        description="Import a LeRobotDataset v3.0 into a new ORTF dataset at OUT_DIR (which must not exist or be "
        "empty).",
        source=("source", "SRC"),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ortf", description="Work with ORTF v0.2 robot training datasets.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check a dataset against the ORTF v0.2 spec and RLDS invariants")
    p.add_argument("path")
    p.add_argument("--strict", action="store_true", help="treat warnings (optional checks) as errors")
    p.add_argument("--episode", metavar="ID", help="check only this episode (and the manifest)")
    p.add_argument("--json", action="store_true", help="print findings as JSON")
    p.set_defaults(run=_cmd_validate)

    p = sub.add_parser("info", help="summarise a dataset: episodes, steps, cameras, tasks, success rate")
    p.add_argument("path")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_cmd_info)

    p = sub.add_parser("recover", help="finish (or --discard) episodes a crashed writer left staged")
    p.add_argument("path")
    p.add_argument("--discard", action="store_true", help="drop unfinished recordings instead of keeping them")
    p.set_defaults(run=_cmd_recover)

    p = sub.add_parser(
        "demo",
        help="convert generated teleop bags with ortf-bag2ortf, validate, show info; then record the same scene "
        "live with ortf_recorder over loopback DDS (needs ROS 2)",
    )
    p.add_argument("output", nargs="?", default="demo-output")
    p.add_argument("--episodes", type=int, default=2, help="recordings to generate and convert")
    p.add_argument("--seconds", type=float, default=3.0, help="length of each recording")
    p.add_argument("--width", type=int, default=320)
    p.add_argument("--height", type=int, default=240)
    p.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    p.add_argument("--no-live", action="store_true", help="skip the live recording over DDS")
    p.set_defaults(run=_cmd_demo)

    _add_export(sub)
    _add_import(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_guarded(getattr(args, "prog", f"ortf {args.command}"), lambda: int(args.run(args)))


if __name__ == "__main__":
    sys.exit(main())
