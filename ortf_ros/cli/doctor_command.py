"""``ortf doctor DATASET``: quality findings of a dataset's episodes (``ortf_ros.quality``),
one line each and a summary, or ``--json``; exit 1 when one is at or above ``--fail-on``."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections import Counter
from typing import Any

from ortf_ros.cli.arguments import bounded
from ortf_ros.cli.boundary import EXIT_FAILED, EXIT_OK, say
from ortf_ros.cli.conversions import DATASET
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.errors import OrtfError, UsageError
from ortf_ros.io import paths
from ortf_ros.quality import settings as bounds
from ortf_ros.quality.doctor import DoctorSettings, examine
from ortf_ros.quality.episode import unlabelled_note
from ortf_ros.quality.findings import SEVERITY_RANK

SEVERITIES = ("error", "warning", "info")


def add_doctor(sub: Any) -> None:
    defaults = DoctorSettings()
    p = sub.add_parser("doctor", help="look for quality problems: gaps, frozen cameras, bad time, joints beyond limits")
    p.add_argument("path", metavar="DATASET")
    p.add_argument("--episode", metavar="ID", action="append", help="examine only this episode (repeatable)")
    p.add_argument("--json", action="store_true", help="print the findings and totals as JSON")
    p.add_argument(
        "--fail-on",
        choices=("error", "warning"),
        default="error",
        help="exit 1 on findings this severe (default error)",
    )
    tunables = (
        ("--gap-periods", "K", bounds.GAP_PERIODS, defaults.gap_periods, "a silence of more than K periods is a gap"),
        ("--min-gap", "SECONDS", bounds.MIN_GAP_S, defaults.min_gap_s, "and a gap lasts more than this"),
        ("--min-duration", "SECONDS", bounds.MIN_DURATION_S, defaults.min_duration_s, "shorter episodes are flagged"),
        ("--frozen-frames", "N", bounds.FROZEN_FRAMES, defaults.frozen_frames, "N equal frames in a row are frozen"),
        ("--rate-tolerance", "FRACTION", bounds.RATE_TOLERANCE, defaults.rate_tolerance, "measured vs declared rate"),
        ("--velocity-margin", "FRACTION", bounds.VELOCITY_MARGIN, defaults.velocity_margin,
         "speed allowed above a URDF velocity limit"),
        ("--position-tolerance", "UNITS", bounds.POSITION_TOLERANCE, defaults.position_tolerance,
         "position allowed beyond a URDF limit (radians or metres)"),
        ("--max-per-rule", "N", bounds.MAX_PER_RULE, defaults.max_per_rule,
         "findings listed per rule, stream and episode; the rest are counted"),
    )  # fmt: skip
    for flag, metavar, bound, default, meaning in tunables:
        p.add_argument(
            flag, metavar=metavar, type=bounded(bound), default=default, help=f"{meaning} (default {default:g})"
        )
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
    # Findings are written as they are found and only counted here: memory does not grow
    # with the dataset (``--json`` streams its document, the findings array first).
    counts: Counter[str] = Counter()
    by_rule: Counter[str] = Counter()
    failing = 0
    if args.json:
        print(f'{{\n  "dataset": {json.dumps(str(root))},\n  "findings": [', end="")
    try:
        for item in examine(dataset, ids, settings):
            if args.json:
                text = json.dumps(item.to_dict())
                print(("\n    " if not counts.total() else ",\n    ") + text, end="", flush=True)
            else:
                print(item.line(), flush=True)
            counts[item.severity] += 1
            by_rule[item.rule] += 1
            failing += SEVERITY_RANK[item.severity] >= SEVERITY_RANK[args.fail_on]
    except OrtfError:
        if args.json:  # the document closed, valid, saying it stopped (the error line says why)
            with contextlib.suppress(OSError):
                print('\n  ],\n  "stopped": true\n}', flush=True)
        raise
    note = unlabelled_note(dataset.episodes)
    if note is not None:
        say("ortf doctor", f"{root}: {note}")  # (not a finding: one line on standard error)
    if args.json:
        rest = {
            "episodes": episodes,
            "fail_on": args.fail_on,
            "ok": failing == 0,
            "totals": {
                "findings": counts.total(),
                **{s: counts[s] for s in SEVERITIES},
                "by_rule": dict(sorted(by_rule.items())),
            },
            "notes": [] if note is None else [note],
        }
        tail = json.dumps(rest, indent=2)[1:]  # (the object's members, after the findings)
        print(f"\n  ],{tail}")
    else:
        found = counts.total()
        verdict = "clean" if not found else ("FAILED" if failing else "passed")
        totals = ", ".join(f"{counts[s]} {s}(s)" for s in SEVERITIES)
        print(f"{verdict}: {episodes} episode(s), {found} finding(s): {totals} (--fail-on {args.fail_on})")
    return EXIT_FAILED if failing else EXIT_OK
