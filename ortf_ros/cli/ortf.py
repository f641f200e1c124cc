"""``ortf``: inspect, validate, recover, edit, export and demo ORTF datasets from the shell.

Every subcommand returns an exit code through one error boundary (``boundary``): 0 ok,
1 failed (or, for validate, invalid), 2 usage error (a bad flag, a path missing or of
the wrong kind, an unknown episode), 130 interrupted; each error is one line on stderr,
and only real bugs show a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ortf_ros.cli.annotate_command import add_annotate
from ortf_ros.cli.boundary import EXIT_FAILED, EXIT_OK, OneLineParser, run_guarded
from ortf_ros.cli.conversions import DATASET, add_export, add_import
from ortf_ros.cli.demo_command import add_demo
from ortf_ros.cli.doctor_command import add_doctor
from ortf_ros.cli.episodes_command import add_episodes
from ortf_ros.cli.review_command import add_review
from ortf_ros.dataset.episode_info import episode_info
from ortf_ros.dataset.info import dataset_info
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.recover import recover
from ortf_ros.dataset.validation import validate
from ortf_ros.errors import UsageError, naming
from ortf_ros.io import paths

EXIT_INVALID = EXIT_FAILED  # validate: the dataset is not valid


def _cmd_validate(args: argparse.Namespace) -> int:
    root = paths.input_dir(args.path, DATASET)
    report = validate(root, strict=args.strict, episode=args.episode)
    missing = next((f for f in report.findings if f.rule == "episode.not_found"), None)
    if missing is not None:  # the dataset may well be valid: the command line named no episode of it
        raise UsageError(f"{root}: {missing.message}; `ortf info {root}` lists its episodes")
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for finding in report.findings:
            print(finding.line())
        print(report.summary())
    return EXIT_OK if report.ok else EXIT_INVALID


def _cmd_info(args: argparse.Namespace) -> int:
    dataset = load_dataset(paths.input_dir(args.path, DATASET))
    info = dataset_info(dataset) if args.episode is None else episode_info(dataset, args.episode)
    if args.json:
        print(json.dumps(info.to_dict(), indent=2))
    else:
        print("\n".join(info.lines()))
    return EXIT_OK


def _cmd_recover(args: argparse.Namespace) -> int:
    root = paths.input_dir(args.path, DATASET)
    with naming(root):
        results = recover(root, discard=args.discard)
    for result in results:
        print(result.line())
    if not results:
        print(f"{root}: nothing to recover")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="ortf", description="Work with ORTF v0.2 robot training datasets.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check a dataset against the ORTF v0.2 spec and RLDS invariants")
    p.add_argument("path")
    p.add_argument("--strict", action="store_true", help="treat warnings (optional checks) as errors")
    p.add_argument("--episode", metavar="ID", help="check only this episode (and the manifest)")
    p.add_argument("--json", action="store_true", help="print findings as JSON")
    p.set_defaults(run=_cmd_validate)

    p = sub.add_parser("info", help="summarise a dataset: episodes, steps, cameras, tasks, success rate")
    p.add_argument("path")
    p.add_argument(
        "--episode", metavar="ID", help="one episode: its labels and what each stream delivered at every stage"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_cmd_info)

    p = sub.add_parser("recover", help="finish (or --discard) episodes a crashed writer left staged")
    p.add_argument("path")
    p.add_argument("--discard", action="store_true", help="drop unfinished recordings instead of keeping them")
    p.set_defaults(run=_cmd_recover)

    add_doctor(sub)
    add_episodes(sub)
    add_annotate(sub)
    add_demo(sub)
    add_export(sub)
    add_import(sub)
    add_review(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    prog = ["ortf"]  # the subcommand's name in error lines, once the command line is parsed

    def run() -> int:
        args = build_parser().parse_args(argv)  # its errors are one line and exit 2 (OneLineParser)
        prog[0] = getattr(args, "prog", f"ortf {args.command}")
        return int(args.run(args))

    return run_guarded(lambda: prog[0], run)


if __name__ == "__main__":
    sys.exit(main())
