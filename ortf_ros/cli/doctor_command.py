"""``ortf doctor DATASET``: quality findings of a dataset's episodes (``ortf_ros.quality``),
one line each and a summary, or ``--json``; exit 1 when one is at or above ``--fail-on``."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from ortf_ros.cli.arguments import bounded
from ortf_ros.cli.boundary import EXIT_FAILED, EXIT_OK
from ortf_ros.cli.conversions import DATASET
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.errors import UsageError
from ortf_ros.io import paths
from ortf_ros.quality import settings as bounds
from ortf_ros.quality.doctor import DoctorSettings, examine
from ortf_ros.quality.findings import SEVERITY_RANK, QualityFinding

SEVERITIES = ("error", "warning", "info")


def add_doctor(sub: Any) -> None:
    defaults = DoctorSettings()
    p = sub.add_parser("doctor", help="look for quality problems: gaps, frozen cameras, bad time, joints beyond limits")
    p.add_argument("path", metavar="DATASET")
    p.add_argument("--episode", metavar="ID", action="append", help="examine only this episode (repeatable)")
    p.add_argument("--json", action="store_true", help="print the findings and totals as JSON")
    p.add_argument(
        "--fail-on", choices=("error", "warning"), default="error", help="exit 1 on findings this severe (default error)"
    )
    p.add_argument("--gap-periods", metavar="K", type=bounded(bounds.GAP_PERIODS), default=defaults.gap_periods,
                   help=f"a stream silent for more than K of its periods is a gap (default {defaults.gap_periods:g})")  # fmt: skip
    p.add_argument("--min-gap", metavar="SECONDS", type=bounded(bounds.MIN_GAP_S), default=defaults.min_gap_s,
                   help=f"and for more than this (default {defaults.min_gap_s:g})")  # fmt: skip
    p.add_argument("--min-duration", metavar="SECONDS", type=bounded(bounds.MIN_DURATION_S),
                   default=defaults.min_duration_s,
                   help=f"episodes shorter than this are flagged (default {defaults.min_duration_s:g})")  # fmt: skip
    p.add_argument("--frozen-frames", metavar="N", type=bounded(bounds.FROZEN_FRAMES), default=defaults.frozen_frames,
                   help=f"N identical frames in a row are a frozen camera (default {defaults.frozen_frames})")  # fmt: skip
    p.add_argument("--rate-tolerance", metavar="FRACTION", type=bounded(bounds.RATE_TOLERANCE),
                   default=defaults.rate_tolerance,
                   help=f"measured vs declared rate (default {defaults.rate_tolerance:g}: 10 %%)")  # fmt: skip
    p.add_argument("--velocity-margin", metavar="FRACTION", type=bounded(bounds.VELOCITY_MARGIN),
                   default=defaults.velocity_margin,
                   help=f"speed allowed above the URDF limit (default {defaults.velocity_margin:g})")  # fmt: skip
    p.add_argument("--position-tolerance", metavar="UNITS", type=bounded(bounds.POSITION_TOLERANCE),
                   default=defaults.position_tolerance,
                   help=f"position allowed beyond a URDF limit (default {defaults.position_tolerance:g})")  # fmt: skip
    p.add_argument("--max-per-rule", metavar="N", type=bounded(bounds.MAX_PER_RULE), default=defaults.max_per_rule,
                   help=f"findings listed per rule, stream and episode (default {defaults.max_per_rule})")  # fmt: skip
    p.set_defaults(run=_cmd_doctor)


def _cmd_doctor(args: argparse.Namespace) -> int:
    root = paths.input_dir(args.path, DATASET)
    settings = DoctorSettings(
        gap_periods=args.gap_periods,
        min_gap_s=args.min_gap,
        min_duration_s=args.min_duration,
        frozen_frames=int(args.frozen_frames),
        rate_tolerance=args.rate_tolerance,
        velocity_margin=args.velocity_margin,
        position_tolerance=args.position_tolerance,
        max_per_rule=int(args.max_per_rule),
    )
    dataset = load_dataset(root)
    ids = args.episode
    for episode_id in ids or ():
        if episode_id not in {e.episode_id for e in dataset.episodes}:
            raise UsageError(f"{root}: no episode with id {episode_id!r}; `ortf info {root}` lists its episodes")
    episodes = len(ids) if ids else len(dataset.episodes)
    findings: list[QualityFinding] = []
    for item in examine(dataset, ids, settings):
        findings.append(item)
        if not args.json:
            print(item.line(), flush=True)
    counts = Counter(f.severity for f in findings)
    failing = sum(1 for f in findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK[args.fail_on])
    if args.json:
        document = {
            "dataset": str(root),
            "episodes": episodes,
            "fail_on": args.fail_on,
            "ok": failing == 0,
            "totals": {
                "findings": len(findings),
                **{s: counts.get(s, 0) for s in SEVERITIES},
                "by_rule": dict(sorted(Counter(f.rule for f in findings).items())),
            },
            "findings": [f.to_dict() for f in findings],
        }
        print(json.dumps(document, indent=2))
    else:
        verdict = "clean" if not findings else ("FAILED" if failing else "passed")
        totals = ", ".join(f"{counts.get(s, 0)} {s}(s)" for s in SEVERITIES)
        print(f"{verdict}: {episodes} episode(s), {len(findings)} finding(s): {totals} (--fail-on {args.fail_on})")
    return EXIT_FAILED if failing else EXIT_OK
