"""``ortf``: inspect, validate, recover and demo ORTF datasets from the shell.

Every subcommand returns an exit code; anticipated failures (``OrtfError``) become
one line on stderr and exit 1, usage errors exit 2, and only real bugs show a
traceback.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from ortf_ros.errors import OrtfError
from ortf_ros.info import dataset_info
from ortf_ros.reader import load_dataset
from ortf_ros.recover import recover
from ortf_ros.synthetic import write_demo_dataset
from ortf_ros.validation import validate
from ortf_ros.writer import WriterConfig

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


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
    out = Path(args.output)
    if out.exists():
        if not args.force:
            print(f"ortf demo: {out} exists; pass --force to replace it", file=sys.stderr)
            return EXIT_USAGE
        shutil.rmtree(out)
    config = WriterConfig.from_yaml(args.config) if args.config else None
    records = write_demo_dataset(
        out, episodes=args.episodes, steps=args.steps, width=args.width, height=args.height, fps=args.fps, config=config
    )
    print(f"wrote {len(records)} synthetic episode(s) to {out}\n")
    report = validate(out, strict=True)
    for finding in report.findings:
        print(finding.line())
    print(f"ortf validate --strict: {report.summary()}\n")
    print("\n".join(dataset_info(load_dataset(out)).lines()))
    return EXIT_OK if report.ok else EXIT_INVALID


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

    p = sub.add_parser("demo", help="write a synthetic two-camera dataset, validate it and show its info")
    p.add_argument("output", nargs="?", default="demo-output")
    p.add_argument("--episodes", type=int, default=3)
    p.add_argument("--steps", type=int, default=90)
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--height", type=int, default=480)
    p.add_argument("--fps", type=int, default=30)
    p.add_argument("--config", metavar="YAML", help="writer settings (see config/writer.yaml)")
    p.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    p.set_defaults(run=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except OrtfError as exc:
        print(f"ortf {args.command}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
