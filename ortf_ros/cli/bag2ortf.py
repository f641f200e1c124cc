"""``ortf-bag2ortf``: MCAP / rosbag2 / ROS 1 recordings -> an ORTF dataset, no ROS needed.

One recording, a fleet's thousands (directories searched, ``--inputs-from``), in place,
on this machine's cores (``--jobs``) or on a Ray cluster (``--ray``): ``fleet/``. Run
again, it converts only what the dataset does not hold yet (held, or converted and its
episodes deleted: ``ortf info`` lists them); ``--again`` converts them anew, beside.

Exit codes: 0 converted (or in the dataset already), 1 a recording could not be
converted (one line on standard error naming the file and the problem; the others are
converted, and episodes already in the dataset are untouched), 2 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ortf_ros import bounds
from ortf_ros.cli import arguments
from ortf_ros.cli.boundary import EXIT_FAILED, EXIT_OK, OneLineParser, run_guarded, say
from ortf_ros.cli.outputs import removed_on_failure, write_text
from ortf_ros.cli.progress import fleet_progress, progress_bar
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.errors import UsageError, naming
from ortf_ros.fleet.driver import SCRATCH_PREFIX, FleetConversion, Outcome, Runner, Totals
from ortf_ros.fleet.inputs import recordings
from ortf_ros.fleet.pool import ProcessRunner
from ortf_ros.fleet.ray_runner import LOCAL, RayRunner
from ortf_ros.fleet.settings import ConversionSettings
from ortf_ros.format.accounting import StreamAccount, accounted
from ortf_ros.io import paths
from ortf_ros.io.cpus import usable_cpus
from ortf_ros.pipeline.mapping import EpisodeLabels, SyncTolerance, describe_mapping, dump_mapping, load_mapping
from ortf_ros.pipeline.robot import read_urdf
from ortf_ros.pipeline.sources.bag import BagSource

__all__ = ["SCRATCH_PREFIX", "build_parser", "main"]
PROG = "ortf-bag2ortf"


def _settings(args: argparse.Namespace) -> ConversionSettings:
    """What every recording is converted with: the mapping file's mapping (or the detected
    one), the flags over it, the URDF."""
    labels = EpisodeLabels(
        task=args.task or "", success=args.success, failure_reason=args.failure_reason, operator_notes=args.notes
    )
    return ConversionSettings(
        mapping=load_mapping(args.config) if args.config is not None else None,
        rate_hz=args.rate,
        labels=labels,
        urdf=read_urdf(Path(args.urdf)) if args.urdf is not None else None,
        mesh_path=tuple(Path(os.path.abspath(p)) for p in args.mesh_path),  # (a worker's directory is not ours)
    )


def _list(args: argparse.Namespace, inputs: list[Path]) -> int:
    settings = _settings(args)
    for path in inputs:
        with BagSource([path]) as source:
            print(f"{path}: {source.message_count} messages, {source.duration:.3f} s")
            for line in source.salvage_warnings():
                print(f"  warning: {line}")
            for topic in source.topics():
                rate = f"{topic.rate_hz:.1f} Hz" if topic.rate_hz else "-"
                span = f"{topic.duration_ns / 1e9:.3f} s"
                print(f"  {topic.topic:<40} {topic.msgtype:<36} {topic.count:>8}  {rate:>10}  {span}")
            print("mapping:")
            rates = {t.topic: t.rate_hz or 0.0 for t in source.topics()}
            types = {t.topic: t.msgtype for t in source.topics()}
            for line in describe_mapping(settings.mapping_for(source), rates, types):
                print(f"  {line}")
    return EXIT_OK


def _write_config(args: argparse.Namespace, inputs: list[Path]) -> int:
    """The mapping as YAML, to a file or (``-``) to standard output."""
    target = paths.output_file(args.write_config, "the topic mapping", replace=True, stream_ok=True, inputs=inputs)
    with BagSource([inputs[0]]) as source:
        text = dump_mapping(_settings(args).mapping_for(source))
    write_text(target, text)
    if target is not None and target.is_file():
        print(f"wrote {target}: edit it, then pass it with --config")
    return EXIT_OK


def _convert(args: argparse.Namespace, inputs: list[Path]) -> int:
    output = paths.output_dir(args.output, "the dataset", existing="an ORTF dataset directory", inputs=inputs)
    settings = _settings(args)
    runner = _runner(args, len(inputs))  # (a missing Ray or a malformed address: before anything is written)
    show_progress = sys.stderr.isatty() and not args.json
    report = _JsonReport(args.output) if args.json else _TextReport(args.output, len(inputs), args.again)
    with contextlib.ExitStack() as stack:
        if runner is not None:
            stack.callback(runner.close)
        discard = stack.enter_context(removed_on_failure(output, finished=_has_episodes))
        stack.enter_context(naming(output))
        bar = stack.enter_context(fleet_progress(show_progress and len(inputs) > 1))
        single = stack.enter_context(progress_bar(show_progress and len(inputs) == 1, inputs[0].name))
        fleet = FleetConversion(
            output,
            settings,
            runner,
            again=args.again,
            report=report.recording,
            progress=bar,
            message_progress=single,
            say=report.note,
        )
        try:
            totals = fleet.run(inputs)
        except BaseException:
            report.stopped()
            raise
        report.end(totals)
        if not totals.converted and not totals.skipped:
            discard()  # nothing converted into a dataset this run made: no empty dataset left
    return EXIT_FAILED if totals.failed else EXIT_OK


def _runner(args: argparse.Namespace, recordings: int) -> Runner | None:
    """Ray's (``--ray``), a process pool's (``--jobs N``, N > 1; by default one a CPU), or
    None: converted in place, one after the other."""
    if args.ray is not None:
        return RayRunner(args.ray or LOCAL)
    jobs = min(args.jobs or usable_cpus(), recordings)
    return ProcessRunner(jobs) if jobs > 1 else None


def _has_episodes(dataset: Path) -> bool:
    """Whether ``dataset`` holds a committed episode (kept when a later recording fails)."""
    try:
        return len(load_dataset(dataset).episodes) > 0
    except Exception:  # anything unreadable holds nothing worth keeping
        return False


class _TextReport:
    """Each recording's summary as it is reported; failures on standard error, one line each."""

    def __init__(self, output: str, recordings: int, again: bool) -> None:
        self.output = output
        self.recordings = recordings
        self.again = again

    def recording(self, outcome: Outcome) -> None:
        if outcome.error is not None:  # (among several, which one failed matters)
            say(PROG, _naming_input(outcome.error, outcome.input) if self.recordings > 1 else outcome.error)
        elif outcome.skipped is not None:
            print(f"{outcome.input}: skipped: {outcome.skipped}")
        elif outcome.result is not None:
            _print_summary(_summary(outcome), self.output)

    def note(self, line: str) -> None:
        print(line)

    def stopped(self) -> None:
        """The run stopped (its line on standard error says why)."""

    def end(self, totals: Totals) -> None:
        if self.recordings > 1:
            print(
                f"{totals.recordings} recordings: {totals.converted} converted, {totals.skipped} skipped "
                f"(in the dataset already), {totals.failed} failed"
            )
        if totals.skipped and not self.again:
            print(f"(`ortf info {self.output}` lists the recordings it holds; --again converts them again)")


class _JsonReport:
    """One JSON document, ``{"output": ..., "recordings": [...]}``, written as the
    recordings are reported (ten thousand summaries are not held until the end)."""

    def __init__(self, output: str) -> None:
        print(f'{{\n  "output": {json.dumps(output)},\n  "recordings": [', end="")
        self.first = True

    def note(self, line: str) -> None:
        say(PROG, line)  # (standard output holds the JSON document alone)

    def stopped(self) -> None:
        """The document closed, valid, when the run stops (its line on standard error
        says why): what was converted before is said."""
        with contextlib.suppress(OSError):
            print('\n  ],\n  "stopped": true\n}', flush=True)

    def recording(self, outcome: Outcome) -> None:
        text = json.dumps(_summary(outcome), indent=2).replace("\n", "\n    ")
        print(("\n    " if self.first else ",\n    ") + text, end="", flush=True)
        self.first = False

    def end(self, totals: Totals) -> None:
        counts = {"converted": totals.converted, "skipped": totals.skipped, "failed": totals.failed}
        print(f'\n  ],\n  "totals": {json.dumps(counts)}\n}}')


def _naming_input(line: str, path: Path) -> str:
    """A recording's error line naming the recording (most do already)."""
    return line if str(path) in line or path.name in line else f"{path}: {line}"


def _summary(outcome: Outcome) -> dict[str, Any]:
    base: dict[str, Any] = {"inputs": [str(outcome.input)], "episodes": list(outcome.episodes)}
    if outcome.error is not None:
        return base | {"error": outcome.error}
    if outcome.skipped is not None:
        return base | {"skipped": outcome.skipped}
    if outcome.again_of is not None:  # (converted again: what was there of it stays, for the user)
        held = outcome.again_of
        deleted = [d.episode_id for d in held.deleted]
        base |= {"converted_again": {"older_episodes": held.ids(), "deleted_episodes": deleted}}
    result = outcome.result
    assert result is not None
    counts = result.counts
    topics = sorted(
        set(counts.used)
        | set(counts.undecodable)
        | set(counts.out_of_order)
        | set(counts.outside_episodes)
        | set(counts.late)
    )
    return base | {
        "steps": sum(e.length for e in result.episodes),
        "seconds": round(result.seconds, 3),
        "startup_seconds": round(result.startup_seconds, 3),
        "speed_x_realtime": round(result.speed_x_realtime, 2) if result.speed_x_realtime else None,
        "topics": {
            t: {
                "used": counts.used[t],
                "undecodable": counts.undecodable[t],
                "out_of_order": counts.out_of_order[t],
                "late": counts.late[t],
                "outside_episodes": counts.outside_episodes[t],
                **({"first_problem": counts.reasons[t]} if t in counts.reasons else {}),
            }
            for t in topics
        },
        "accounting": {
            episode_id: [account.to_dict() for account in record.accounting or ()]
            for episode_id, record in zip(_dataset_ids(outcome), result.episodes, strict=True)
        },
        "sync_tolerance": {
            "ms": result.sync_tolerance.ms,
            "set_by": result.sync_tolerance.set_by,
            "streams": dict(result.sync_tolerance.streams),
        },
        "clock": list(result.clock),
        "steps_outside_tolerance": dict(counts.outside_tolerance),
        "steps_skipped": dict(counts.skipped_steps),
        "warnings": [*result.warnings, *outcome.notes],
        "salvaged": [
            {"file": s.name, "problem": s.problem, "bytes": s.size, "messages": s.messages, "last_ns": s.last_ns}
            for s in result.salvaged
        ],
    }


def _dataset_ids(outcome: Outcome) -> list[str]:
    """The ids in the output dataset of the episodes the conversion gave, in order. A parallel
    conversion's result holds its scratch dataset's records (numbered from 000000 for each
    recording); its episodes in the output are the outcome's, unless a place whose episode
    was deleted from the output was not imported again: then they are named by place."""
    assert outcome.result is not None
    records = outcome.result.episodes
    if len(outcome.episodes) == len(records):
        return list(outcome.episodes)
    return [f"{outcome.input.name}#{r.source.episode if r.source else n}" for n, r in enumerate(records)]


def _print_summary(summary: dict[str, Any], output: str) -> None:
    episodes = ", ".join(summary["episodes"])
    print(
        f"{', '.join(summary['inputs'])} -> {output} episode(s) {episodes}: {summary['steps']} steps "
        f"in {summary['seconds']} s ({summary['speed_x_realtime']}x real time"
        + (
            f", after {summary['startup_seconds']} s starting the video encoders)"
            if summary["startup_seconds"]
            else ")"
        )
    )
    for topic, c in summary["topics"].items():
        extra = f"  ({c['first_problem']})" if "first_problem" in c else ""
        counts = f"used {c['used']:>7}  undecodable {c['undecodable']:>4}  out of order {c['out_of_order']:>4}"
        if c["outside_episodes"]:
            counts += f"  outside episodes {c['outside_episodes']}"
        if c["late"]:
            counts += f"  late {c['late']}"
        print(f"  {topic:<40} {counts}{extra}")
    for episode_id, rows in summary["accounting"].items():
        print(f"  episode {episode_id}: {accounted(StreamAccount.from_dict(row) for row in rows)}")
    print(f"  {SyncTolerance(**summary['sync_tolerance']).line()}")
    for line in summary["clock"]:
        print(f"  {line}")
    for stream, steps in summary["steps_outside_tolerance"].items():
        print(f"  {steps} step(s) used a sample of {stream} outside its sync tolerance")
    for reason, steps in summary["steps_skipped"].items():
        print(f"  {steps} step(s) not written: {reason}")
    for warning in summary["warnings"]:
        print(f"  warning: {warning}")
    if "converted_again" in summary:
        print(f"  {_again_line(summary['converted_again'], output)}")


def _again_line(again: dict[str, list[str | None]], output: str) -> str:
    """What the dataset held of a recording converted again: its older episodes, kept for the
    user to delete (or keep both), and those deleted before."""
    older = [str(i) for i in again["older_episodes"]]
    deleted = again["deleted_episodes"]
    said = []
    if older:
        said.append(
            f"older episode(s) {', '.join(older)} came from the same recording and are kept "
            f"(`ortf episodes delete {output} {' '.join(older)}` deletes them)"
        )
    if deleted:
        known = [str(i) for i in deleted if i is not None]
        said.append(
            f"{len(deleted)} episode(s) of it were deleted before" + (f" ({', '.join(known)})" if known else "")
        )
    return "converted again (--again): " + "; ".join(said)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Convert MCAP, rosbag2 and ROS 1 recordings into an ORTF dataset.",
        epilog="A recording the dataset already holds is skipped, so the same command run again resumes: "
        "it converts only what is missing. A recording is known by its content (a copy elsewhere or under "
        "another name is the same one), and also one whose episodes were deleted (ortf episodes delete) "
        "is skipped. `ortf info DATASET` lists the recordings a dataset holds, with their episodes, and "
        "those deleted. --again converts the named recordings anew.",
    )
    parser.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="recordings (bag files, rosbag2 directories: one episode each, unless the mapping splits them) "
        "and directories to search for recordings",
    )
    parser.add_argument(
        "--inputs-from", metavar="FILE", help="a file of recording paths, one a line (- : standard input)"
    )
    parser.add_argument("-o", "--output", help="the ORTF dataset (created, or appended to)")
    parser.add_argument("--config", help="topic mapping YAML (default: detected from the recording)")
    parser.add_argument("--urdf", help="robot URDF file (default: the recording's /robot_description)")
    parser.add_argument(
        "--rate",
        type=arguments.bounded(bounds.STEP_RATE_HZ),
        metavar="HZ",
        help="step rate in Hz, over the mapping's (default: the mapping's; 30 for a detected one)",
    )
    parser.add_argument("--list", action="store_true", help="print the topics and the mapping that would be used")
    parser.add_argument(
        "--write-config", metavar="FILE", help="save the mapping that would be used as YAML (- : standard output)"
    )
    parser.add_argument("--task", type=arguments.text, help="task instruction of the episodes")
    outcome = parser.add_mutually_exclusive_group()
    outcome.add_argument("--success", dest="success", action="store_true", default=None)
    outcome.add_argument("--failure", dest="success", action="store_false")
    parser.add_argument("--failure-reason", type=arguments.text)
    parser.add_argument("--notes", type=arguments.text, help="operator notes")
    parser.add_argument("--json", action="store_true", help="print the conversion summary as JSON")
    parser.add_argument(
        "--again",
        action="store_true",
        help="convert the recordings even when the dataset holds them or their episodes were deleted (to convert "
        "them with a better mapping): their new episodes are added beside the older ones, which the summary "
        "names (delete them with `ortf episodes delete`, or keep both)",
    )
    parser.add_argument(
        "--jobs",
        type=arguments.bounded(bounds.JOBS),
        metavar="N",
        help="recordings converted in parallel (default: the CPUs this process can use, cgroup quota included)",
    )
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="convert the recordings as Ray tasks: on the cluster at ADDRESS (auto, HOST:PORT, ray://HOST:PORT), "
        "or on a Ray instance of this machine without one (needs the ray extra)",
    )
    parser.add_argument(
        "--mesh-path", action="append", default=[], metavar="DIR", help="where package:// meshes are found (repeatable)"
    )
    return parser


def _check_paths(args: argparse.Namespace) -> list[Path]:
    """Every path exists and is of the kind wanted, before anything is read or written;
    the recordings to convert."""
    if args.ray and os.path.lexists(args.ray):
        raise UsageError(
            f"--ray {args.ray}: a path, not a Ray address; put --ray after the inputs, or write --ray=ADDRESS"
        )
    if args.ray is not None and args.jobs is not None:
        raise UsageError("--ray and --jobs: give one of them (Ray decides how many conversions run at once)")
    if not args.inputs and args.inputs_from is None:
        raise UsageError("no input: give recordings, directories of recordings, or --inputs-from FILE")
    inputs = recordings(args.inputs, args.inputs_from)
    if args.config is not None:
        paths.input_file(args.config, "a topic mapping YAML file")
    if args.urdf is not None:
        paths.input_file(args.urdf, "a URDF file")
    for word in args.mesh_path:
        paths.input_dir(word, "a directory of package:// meshes")
    return inputs


def main(argv: Sequence[str] | None = None) -> int:
    return run_guarded(PROG, lambda: _main(build_parser().parse_args(argv)))


def _main(args: argparse.Namespace) -> int:
    jobs = [flag for flag, given in (("--list", args.list), ("--write-config", args.write_config is not None),
                                     ("-o", args.output is not None)) if given]  # fmt: skip
    if not jobs:
        raise UsageError("-o/--output is required to convert (or --list, --write-config)")
    if len(jobs) > 1:
        raise UsageError(f"{' and '.join(jobs)}: give one of them (list the mapping, save it, or convert)")
    inputs = _check_paths(args)
    if args.list:
        return _list(args, inputs)
    if args.write_config is not None:
        return _write_config(args, inputs)
    return _convert(args, inputs)


if __name__ == "__main__":
    sys.exit(main())
