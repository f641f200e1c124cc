"""``ortf export FORMAT`` and ``ortf import FORMAT``: one subcommand per format.

Every source is checked to be a directory and every output to be a new (or empty)
directory, or for MCAP a new or regular file, before anything is read; the formats'
own modules (``ortf_ros.convert``, ``ortf_ros.playback.export``) build the output
beside its target and rename it into place when it is whole.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import replace

from ortf_ros.cli.boundary import EXIT_OK, OneLineParser
from ortf_ros.cli.outputs import write_text
from ortf_ros.cli.progress import progress_bar
from ortf_ros.errors import ExportError, SettingsError, UsageError, naming
from ortf_ros.io import paths
from ortf_ros.pipeline.mapping import dump_mapping
from ortf_ros.playback.export import export_mcap
from ortf_ros.playback.replay import replay_mapping
from ortf_ros.playback.settings import IMAGE_FORMATS, default_settings, read_parameter_file, settings_from_parameters

DATASET = "an ORTF dataset directory"


def _cmd_export_mcap(args: argparse.Namespace) -> int:
    dataset = paths.input_dir(args.dataset, DATASET)
    out = paths.output_file(args.output, "the MCAP file", replace=args.force, stream_ok=False, inputs=[dataset])
    assert out is not None
    mapping_out = None
    if args.write_config is not None:
        mapping_out = paths.output_file(
            args.write_config, "the topic mapping", replace=True, stream_ok=True, inputs=[dataset, out]
        )
    settings = default_settings()
    if args.config is not None:
        paths.input_file(args.config, "a playback parameter YAML file")
        try:
            settings = settings_from_parameters(read_parameter_file(args.config), args.config)
        except SettingsError as exc:  # (a file the export reads, not the command line: exit 1)
            raise ExportError(str(exc)) from None
    messages = settings.messages
    if args.image_format:
        messages = replace(messages, image_format=args.image_format)

    def warn(line: str) -> None:
        print(f"ortf export mcap: warning: {line}", file=sys.stderr)

    with naming(out):
        result = export_mcap(dataset, out, messages, episodes=args.episode, force=args.force, warn=warn)
    if args.write_config is not None:  # first: with the mapping on standard output, a closed pipe ends it quietly
        mapping = replay_mapping(result.manifest, messages, split_episodes=True)
        write_text(mapping_out, dump_mapping(mapping))
    # The mapping going to standard output, what is said goes to stderr.
    report = sys.stderr if args.write_config is not None and mapping_out is None else sys.stdout
    total = sum(result.counts.values())
    print(
        f"{result.path}: {total} messages on {len(result.counts)} topics, {result.seconds:.3f} s, "
        f"episode(s) {', '.join(result.episodes)}",
        file=report,
    )
    for topic, count in sorted(result.counts.items()):
        print(f"  {topic:<40} {count:>8}", file=report)
    for note in result.notes:
        print(f"  {note}", file=report)
    if mapping_out is not None and mapping_out.is_file():
        print(f"wrote {mapping_out}: ortf-bag2ortf {result.path} -o DATASET --config {mapping_out}")
    return EXIT_OK


def _cmd_export_rerun(args: argparse.Namespace) -> int:
    from ortf_ros.convert.rerun_export import rerun_sdk, write_rerun

    dataset = paths.input_dir(args.dataset, DATASET)
    out = paths.output_file(args.output, "the Rerun recording", replace=args.force, stream_ok=False, inputs=[dataset])
    assert out is not None
    # The SDK's own log lines (Rust's, on stderr) would come beside the one line an error is told in.
    os.environ.setdefault("RUST_LOG", "off")
    rerun_sdk()  # a missing extra is told before the dataset is read
    with naming(out):
        result = write_rerun(dataset, out, args.episode)
    first, last = result.episodes[0], result.episodes[-1]
    timelines = f"episode_{first}" if first == last else f"episode_{first} .. episode_{last}"
    print(
        f"{result.path}: Rerun recording, {len(result.episodes)} episode(s) each on its timeline ({timelines}), "
        f"{len(result.rows)} entities, {sum(result.rows.values())} rows; open it with: rerun {result.path}"
    )
    return EXIT_OK


def _cmd_export_lerobot(args: argparse.Namespace) -> int:
    from ortf_ros.convert.lerobot_export import to_lerobot

    with progress_bar(sys.stderr.isatty(), "frames") as progress:
        result = to_lerobot(args.dataset, args.output, args.flavor, progress=progress)
    audio = f"; {result.audio_files} audio file(s) kept beside it under audio/" if result.audio_files else ""
    print(
        f"{result.path}: {result.flavor} dataset, {result.episodes} episode(s), {result.frames} frames; "
        f"videos reused {result.videos_reused}, re-encoded {result.videos_reencoded}{audio}"
    )
    return EXIT_OK


def _cmd_export_mixtrain(args: argparse.Namespace) -> int:
    from ortf_ros.convert.mixtrain_export import MIXTRAIN_VERSION, to_mixtrain

    if args.table is not None or args.catalog is not None:
        return _export_mixtrain_table(args)
    result = to_mixtrain(args.dataset, args.output)
    print(
        f"{result.path}: Mixtrain {MIXTRAIN_VERSION} dataset, {result.episodes} episode(s) as rows, "
        f"{result.steps} steps, in {', '.join(result.data_files) or 'no data file'} + mixtrain.json"
    )
    return EXIT_OK


def _export_mixtrain_table(args: argparse.Namespace) -> int:
    from ortf_ros.convert.mixtrain_tables import to_mixtrain_table

    table = to_mixtrain_table(args.dataset, args.output, args.table, catalog=args.catalog)
    done = "created" if table.created else "appended to"
    version = {"delta": f"version {table.version}", "ducklake": f"snapshot {table.version}"}.get(
        table.kind, f"{table.version} snapshot(s)"
    )
    print(
        f"{table.path}: Mixtrain {table.kind} table {done} ({version}), {table.episodes} episode(s) as rows, "
        f"{table.steps} steps, metadata in its table property 'mixtrain'; read it with {table.read_with}"
    )
    return EXIT_OK


def _lake_target(args: argparse.Namespace) -> str | None:
    """What an existing OUT may be: with --table, a table to append to. (Checked before
    OUT, so --catalog without --table is refused first, for what it is.)"""
    if args.table is None and args.catalog is not None:
        raise UsageError(f"--catalog {args.catalog}: only with --table iceberg")
    return None if args.table is None else f"a new or empty directory or a {args.table} table"


def _cmd_export_rlds(args: argparse.Namespace) -> int:
    from ortf_ros.convert.rlds_export import SPLIT, to_rlds

    result = to_rlds(args.dataset, args.output)
    print(
        f"{result.path}: RLDS dataset {result.name!r} (TFDS, split {SPLIT!r}), {result.episodes} episode(s), "
        f"{result.steps} steps; read it with tfds.builder_from_directory({str(result.path)!r})"
    )
    return EXIT_OK


def add_export(sub: argparse._SubParsersAction[OneLineParser]) -> None:
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
    p = formats.add_parser(
        "rerun",
        help="episodes as a Rerun recording (.rrd): videos, depth, scalars, TF, URDF (needs 'ortf_ros[rerun]')",
        description="Write the episodes as one Rerun recording, each on its own timeline episode_<id>; "
        "needs the Rerun SDK (pip install 'ortf_ros[rerun]').",
    )
    p.add_argument("dataset", metavar="DATASET")
    p.add_argument("output", metavar="OUT.rrd")
    p.add_argument("--episode", action="append", default=[], metavar="ID", help="episode id or position (repeatable)")
    p.add_argument("--force", action="store_true", help="replace OUT.rrd if it exists")
    p.set_defaults(run=_cmd_export_rerun, prog="ortf export rerun")
    p = _add_conversion(
        formats,
        "export lerobot",
        _cmd_export_lerobot,
        summary="a LeRobotDataset v3.0 that lerobot loads as is (--flavor gr00t: LeRobot v2.0 + meta/modality.json)",
        description="Write the dataset as a LeRobotDataset v3.0, or GR00T's LeRobot v2.0 flavour, in a new directory.",
    )
    p.add_argument(
        "--flavor",
        choices=("lerobot", "gr00t"),
        default="lerobot",
        help="lerobot: LeRobotDataset v3.0 (default); gr00t: GR00T's LeRobot v2.0 flavour with meta/modality.json",
    )
    p = _add_conversion(
        formats,
        "export mixtrain",
        _cmd_export_mixtrain,
        summary="Mixtrain v1.0: one Parquet row per episode (trajectory arrays, metadata, video references)",
        description="Write the dataset as a standalone Mixtrain v1.0 dataset in a new (or empty) directory, "
        "or with --table as a DuckLake, Delta Lake or Iceberg table (created, or appended to: columns "
        "another dataset lacks are null in its rows, new ones are added); tables need pip install 'ortf_ros[lake]'.",
        existing=_lake_target,
    )
    p.add_argument(
        "--table", metavar="KIND", help="ducklake, delta or iceberg: OUT_DIR is a lake table, created or appended to"
    )
    p.add_argument(
        "--catalog", metavar="URI", help="--table iceberg: a SQL catalog URI (default: OUT_DIR/catalog.db, SQLite)"
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
    formats: argparse._SubParsersAction[OneLineParser],
    command: str,
    run: Callable[[argparse.Namespace], int],
    *,
    summary: str,
    description: str,
    source: tuple[str, str, str] = ("dataset", "DATASET", DATASET),
    existing: Callable[[argparse.Namespace], str | None] = lambda _: None,
) -> OneLineParser:
    """One ``ortf export|import FORMAT`` subcommand: a source directory (``source``: its
    argument, metavar and what it must be), a new (or empty) output directory (or, where
    ``existing`` says what for these arguments, an existing one of that kind)."""
    p = formats.add_parser(command.split()[-1], help=summary, description=description)
    name, metavar, expected = source
    p.add_argument(name, metavar=metavar)
    p.add_argument("output", metavar="OUT_DIR")

    def checked(args: argparse.Namespace) -> int:
        source = paths.input_dir(getattr(args, name), expected)
        what = f"the {command.split()[-1]} output"
        paths.output_dir(args.output, what, existing=existing(args), inputs=[source])
        with naming(args.output):
            return run(args)

    p.set_defaults(run=checked, prog=f"ortf {command}")
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


def _cmd_import_rlds(args: argparse.Namespace) -> int:
    from ortf_ros.convert.rlds_import import NO_INSTRUCTION, from_rlds
    from ortf_ros.convert.rlds_plan import ActionOptions

    def warn(line: str) -> None:
        print(f"ortf import rlds: warning: {line}", file=sys.stderr)

    action = ActionOptions(
        keys=_listed(args.action_keys),
        names=_listed(args.action_names),
        types=_listed(args.action_types),
        units=_listed(args.action_units),
        space_type=args.action_space,
    )
    with progress_bar(sys.stderr.isatty(), "episodes") as progress:
        result = from_rlds(
            args.source,
            args.output,
            fps=args.fps,
            splits=args.split,
            action=action,
            task=args.task,
            float_depth_units=args.float_depth_units,
            warn=warn,
            progress=progress,
        )
    cameras = ", ".join(result.cameras) or "none"
    skipped = f", {result.skipped} episode(s) without steps skipped" if result.skipped else ""
    if result.uninstructed:
        skipped += f", {result.uninstructed} with an empty instruction (task {NO_INSTRUCTION!r})"
    print(
        f"{result.path}: {result.episodes} episode(s), {result.steps} steps at {result.fps:g} Hz, "
        f"cameras: {cameras}{skipped}"
    )
    width = max(map(len, result.summary), default=0)
    for feature, where in result.summary.items():
        print(f"  {feature:<{width}}  -> {where}")
    return EXIT_OK


def _listed(value: str | None) -> tuple[str, ...] | None:
    """A comma-separated option as its items (None when not given)."""
    return tuple(item.strip() for item in value.split(",")) if value else None


def _positive_rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a rate in Hz, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive rate in Hz, got {text!r}")
    return value


def add_import(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """``ortf import FORMAT``: one subcommand per source format."""
    imports = sub.add_parser("import", help="make an ORTF dataset from another format")
    formats = imports.add_subparsers(dest="format", required=True, metavar="FORMAT")
    _add_conversion(
        formats,
        "import lerobot",
        _cmd_import_lerobot,
        summary="a LeRobotDataset v3.0 or v2.0/v2.1 (GR00T's flavour; video or image cameras, modality.json) as a "
        "new ORTF dataset",
        description="Import a LeRobotDataset (v3.0, or v2.0/v2.1 as GR00T writes it) into a new ORTF dataset at "
        "OUT_DIR (which must not exist or be "
        "empty).",
        source=("source", "SRC", "a LeRobot dataset directory"),
    )
    p = _add_conversion(
        formats,
        "import rlds",
        _cmd_import_rlds,
        summary="an RLDS dataset in TFDS's layout (Open X-Embodiment, ortf export rlds) as a new ORTF dataset",
        description="Import an RLDS dataset from a TFDS builder directory (dataset_info.json, features.json, "
        "TFRecord shards: what tfds.builder_from_directory reads and Open X-Embodiment publishes) into a new ORTF "
        "dataset at OUT_DIR (which must not exist or be empty); TensorFlow is not needed. Prints where each "
        "source feature went.",
        source=("source", "SRC", "a TFDS builder directory"),
    )
    p.add_argument("--fps", type=_positive_rate, metavar="HZ", help="the control rate, where the dataset states none")
    p.add_argument(
        "--split", action="append", default=[], metavar="NAME", help="a split to import (repeatable; default all)"
    )
    p.add_argument("--task", metavar="TEXT", help="the task of episodes whose source has no (or an empty) instruction")
    p.add_argument(
        "--action-keys", metavar="K1,K2,...", help="an action dict's parts that make the action, in order (default all)"
    )
    p.add_argument("--action-names", metavar="N1,N2,...", help="the action dimensions' names (one per dimension)")
    p.add_argument(
        "--action-types",
        metavar="T[,T...]",
        help="position|rotation|velocity|binary|continuous: one for all dimensions, or one per dimension",
    )
    p.add_argument(
        "--action-units",
        metavar="U[,U...]",
        help="meters|radians|rad_per_s|normalized|discrete: one for all dimensions, or one per dimension",
    )
    p.add_argument("--action-space", metavar="TYPE", help="action_space.type, e.g. end_effector_delta, joint_position")
    p.add_argument(
        "--float-depth-units",
        choices=("m", "mm"),
        help="the units of float depth images: they are converted to uint16 millimetres (else left out)",
    )
