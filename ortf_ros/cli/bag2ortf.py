"""``ortf-bag2ortf``: MCAP / rosbag2 / ROS 1 recordings -> an ORTF dataset, no ROS needed.

Exit codes: 0 converted, 1 a recording could not be converted (one line naming the
file and the problem; episodes already in the dataset are untouched), 2 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import shutil
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from ortf_ros import bounds
from ortf_ros.cli import arguments
from ortf_ros.cli.boundary import EXIT_FAILED, EXIT_OK, OneLineParser, run_guarded
from ortf_ros.cli.outputs import removed_on_failure, write_text
from ortf_ros.cli.progress import progress_bar
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.staging import lock_dataset
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ConversionError, UsageError, WriterError, describe, naming
from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.io import paths
from ortf_ros.io.cpus import usable_cpus
from ortf_ros.io.scratch import remove_stale, scratch_directory
from ortf_ros.io.text import read_text
from ortf_ros.pipeline.config import (
    ConversionConfig,
    StepClock,
    auto_config,
    describe_mapping,
    dump_config,
    load_config,
)
from ortf_ros.pipeline.offline import ConversionResult, convert_recording, converter_writer_config
from ortf_ros.pipeline.robot import read_urdf
from ortf_ros.pipeline.sources.bag import BagSource

SCRATCH_PREFIX = ".ortf-bag2ortf-"  # the parallel workers' datasets, beside the output


def _config_for(args: argparse.Namespace, source: BagSource) -> ConversionConfig:
    """The mapping file's (or the one detected from ``source``), with the flags over it."""
    config = load_config(args.config) if args.config is not None else auto_config(source.topics())
    if args.rate is not None:
        config = replace(config, step=StepClock(rate_hz=args.rate))
    labels = config.labels
    labels = replace(
        labels,
        task=args.task or labels.task,
        success=labels.success if args.success is None else args.success,
        failure_reason=args.failure_reason or labels.failure_reason,
        operator_notes=args.notes or labels.operator_notes,
    )
    return replace(config, labels=labels)


def _list(args: argparse.Namespace) -> int:
    for path in args.inputs:
        with BagSource([Path(path)]) as source:
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
            for line in describe_mapping(_config_for(args, source), rates, types):
                print(f"  {line}")
    return EXIT_OK


def _write_config(args: argparse.Namespace) -> int:
    """The mapping as YAML, to a file or (``-``) to standard output."""
    inputs = [Path(word) for word in args.inputs]
    target = paths.output_file(args.write_config, "the topic mapping", replace=True, stream_ok=True, inputs=inputs)
    with BagSource([Path(args.inputs[0])]) as source:
        text = dump_config(_config_for(args, source))
    write_text(target, text)
    if target is not None and target.is_file():
        print(f"wrote {target}: edit it, then pass it with --config")
    return EXIT_OK


def _summary(result: ConversionResult) -> dict[str, Any]:
    counts = result.counts
    topics = sorted(
        set(counts.used)
        | set(counts.undecodable)
        | set(counts.out_of_order)
        | set(counts.outside_episodes)
        | set(counts.late)
    )
    return {
        "inputs": list(result.inputs),
        "episodes": [e.episode_id for e in result.episodes],
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
        "sync_tolerance": {"ms": result.sync_tolerance.ms, "set_by": result.sync_tolerance.set_by},
        "steps_outside_tolerance": dict(counts.outside_tolerance),
        "steps_skipped": dict(counts.skipped_steps),
        "warnings": list(result.warnings),
        "salvaged": [
            {"file": s.name, "problem": s.problem, "bytes": s.size, "messages": s.messages, "last_ns": s.last_ns}
            for s in result.salvaged
        ],
    }


@dataclass(frozen=True)
class _Job:
    """One recording to convert, with everything a worker process needs."""

    input: Path
    output: Path
    config: ConversionConfig
    urdf: str | None
    writer_config: WriterConfig
    mesh_path: tuple[Path, ...]


def _job(args: argparse.Namespace, source: BagSource, output: Path) -> _Job:
    config = _config_for(args, source)
    writer_config = converter_writer_config(config.writer, args.config or "mapping")
    urdf = read_urdf(Path(args.urdf)) if args.urdf is not None else None
    return _Job(source.paths[0], output, config, urdf, writer_config, tuple(Path(p) for p in args.mesh_path))


def _run(
    job: _Job, progress: Callable[[int, int], None] | None = None, source: BagSource | None = None
) -> ConversionResult:
    """``source``: ``job.input`` already open, as the mapping was chosen from it."""
    return convert_recording(
        source or [job.input],
        job.output,
        job.config,
        urdf=job.urdf,
        writer_config=job.writer_config,
        mesh_path=job.mesh_path,
        progress=progress,
    )


def _has_episodes(dataset: Path) -> bool:
    """Whether ``dataset`` holds a committed episode (kept when a later recording fails)."""
    try:
        return len(load_dataset(dataset).episodes) > 0
    except Exception:  # anything unreadable holds nothing worth keeping
        return False


def _convert(args: argparse.Namespace) -> int:
    inputs = [Path(word) for word in args.inputs]
    output = paths.output_dir(args.output, "the dataset", existing="an ORTF dataset directory", inputs=inputs)
    with removed_on_failure(output, finished=_has_episodes), naming(output):
        return _convert_into(args, output)


def _convert_into(args: argparse.Namespace, output: Path) -> int:
    remove_stale(_beside(output), SCRATCH_PREFIX, settle=_wait_for_encoders)  # what runs killed earlier left
    jobs = min(args.jobs or usable_cpus(), len(args.inputs))
    show_progress = sys.stderr.isatty() and not args.json
    summaries = []
    if jobs == 1:
        for path in args.inputs:
            with BagSource([Path(path)]) as source:
                job = _job(args, source, output)
                with progress_bar(show_progress, job.input.name) as report:
                    result = _run(job, report, source)
            summaries.append(_summary(result))
            if not args.json:
                _print_summary(summaries[-1], args.output)
    else:
        summaries = _convert_in_parallel(args, output, jobs, show_progress)
    if args.json:
        print(json.dumps({"output": args.output, "recordings": summaries}, indent=2))
    return EXIT_OK


def _wait_for_encoders(scratch: Path) -> None:
    """A killed run's workers, or a killed worker, leave encoder processes that finish their
    videos in its scratch datasets, holding each dataset's writer lock until then: wait for
    them (up to the lock's wait), so the directory is not removed under them."""
    for part in sorted(scratch.glob("part-*")):
        if (part / layout.STAGING_DIR).is_dir():
            with contextlib.suppress(WriterError):
                lock_dataset(part).close()


def _beside(output: Path) -> Path:
    """The directory that holds ``output`` (for ``-o .`` too: never inside the dataset)."""
    return output.resolve().parent


def _convert_in_parallel(
    args: argparse.Namespace, output: Path, jobs: int, show_progress: bool
) -> list[dict[str, Any]]:
    """Each recording into a dataset of its own in a worker, then imported in input order:
    a dataset has one writer, and an episode's videos are copied, not encoded again.

    Workers are spawned, not forked: a fork copies FFmpeg objects of earlier conversions
    whose threads it does not copy, and freeing one in the worker then waits forever."""
    summaries = []
    with scratch_directory(_beside(output), SCRATCH_PREFIX, settle=_wait_for_encoders) as scratch:
        parts = []
        for n, path in enumerate(args.inputs):
            with BagSource([Path(path)]) as source:
                parts.append(_sharing_cores(_job(args, source, scratch / f"part-{n:04d}"), jobs))
        with (
            ProcessPoolExecutor(
                max_workers=jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_exit_with_parent
            ) as pool,
            progress_bar(show_progress, "recordings") as report,
        ):
            futures = [pool.submit(_run, part) for part in parts]
            try:
                for done, (part, future) in enumerate(zip(parts, futures, strict=True), start=1):
                    result = _result(future, parts[done - 1 :])  # an error stops here: the episodes before it are kept
                    records = _import(part.output, output)
                    summary = _summary(result) | {"episodes": [r.episode_id for r in records]}
                    summaries.append(summary)
                    if report is not None:
                        report(done, len(parts))
                    if not args.json:
                        _print_summary(summary, args.output)
            except BaseException:
                _stop_workers(pool)
                raise
    return summaries


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """After an error or a stop signal (which reaches this process alone, unlike Ctrl-C in
    a terminal), end the conversions still running: leaving the pool would wait for them
    all. Their encoder processes finish their videos, and the scratch directory is removed
    once they have (``_wait_for_encoders``)."""
    pool.shutdown(wait=False, cancel_futures=True)
    processes = getattr(pool, "_processes", None) or {}  # (the pool has no public way to end its workers)
    for process in list(processes.values()):
        process.terminate()


def _result(future: Future[ConversionResult], unfinished: list[_Job]) -> ConversionResult:
    """The worker's result; a worker that died (killed, say for lack of memory) is a
    ConversionError naming the recordings it may have been converting."""
    try:
        return future.result()
    except BrokenProcessPool as exc:
        names = ", ".join(str(job.input) for job in unfinished)
        raise ConversionError(
            f"a worker process ended abruptly (killed, perhaps for lack of memory: {describe(exc)}) while "
            f"converting one of {names}: none of these is in the dataset; the recordings before them are"
        ) from None


def _sharing_cores(job: _Job, jobs: int) -> _Job:
    """The job with its video encoder threads decided for ``jobs`` conversions at once: each
    worker's writer would otherwise share every core among its own cameras alone."""
    writer = job.writer_config
    colour = sum(camera.kind != "depth" for camera in job.config.cameras)  # (depth is FFV1, as it comes)
    video = writer.video.with_threads(jobs * max(1, colour))
    return replace(job, writer_config=replace(writer, video=video))


def _exit_with_parent() -> None:
    """Worker initializer: a worker whose parent was killed would go on converting into a
    scratch directory nobody will import."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_when_gone, args=(parent,), daemon=True).start()


def _exit_when_gone(parent: BaseProcess) -> None:
    parent.join()
    os._exit(EXIT_FAILED)


def _import(part: Path, output: Path) -> list[EpisodeRecord]:
    converted = load_dataset(part)
    urdf = part / layout.URDF
    manifest = replace(converted.manifest, dataset_id="", created_at=None)
    with DatasetWriter(output, manifest, urdf=read_text(urdf) if urdf.exists() else None) as writer:
        if (part / layout.MESHES_DIR).is_dir() and not (output / layout.MESHES_DIR).exists():
            shutil.copytree(part / layout.MESHES_DIR, output / layout.MESHES_DIR)
        return [writer.import_episode(episode) for episode in converted]


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
    tolerance = summary["sync_tolerance"]
    print(f"  sync tolerance {tolerance['ms']:g} ms ({tolerance['set_by']})")
    for stream, steps in summary["steps_outside_tolerance"].items():
        print(f"  {steps} step(s) used a sample of {stream} outside the sync tolerance")
    for reason, steps in summary["steps_skipped"].items():
        print(f"  {steps} step(s) not written: {reason}")
    for warning in summary["warnings"]:
        print(f"  warning: {warning}")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="ortf-bag2ortf", description="Convert MCAP, rosbag2 and ROS 1 recordings into an ORTF dataset."
    )
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="bag files or rosbag2 directories, one episode each")
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
        "--jobs",
        type=arguments.bounded(bounds.JOBS),
        metavar="N",
        help="recordings converted in parallel (default: the CPUs this process can use, cgroup quota included)",
    )
    parser.add_argument(
        "--mesh-path", action="append", default=[], metavar="DIR", help="where package:// meshes are found (repeatable)"
    )
    return parser


def _check_paths(args: argparse.Namespace) -> None:
    """Every input path exists and is of the kind wanted, before anything is read or written."""
    for word in args.inputs:
        paths.input_path(word, "a bag file or a rosbag2 directory")
    if args.config is not None:
        paths.input_file(args.config, "a topic mapping YAML file")
    if args.urdf is not None:
        paths.input_file(args.urdf, "a URDF file")
    for word in args.mesh_path:
        paths.input_dir(word, "a directory of package:// meshes")


def main(argv: Sequence[str] | None = None) -> int:
    return run_guarded("ortf-bag2ortf", lambda: _main(build_parser().parse_args(argv)))


def _main(args: argparse.Namespace) -> int:
    jobs = [flag for flag, given in (("--list", args.list), ("--write-config", args.write_config is not None),
                                     ("-o", args.output is not None)) if given]  # fmt: skip
    if not jobs:
        raise UsageError("-o/--output is required to convert (or --list, --write-config)")
    if len(jobs) > 1:
        raise UsageError(f"{' and '.join(jobs)}: give one of them (list the mapping, save it, or convert)")
    _check_paths(args)
    if args.list:
        return _list(args)
    if args.write_config is not None:
        return _write_config(args)
    return _convert(args)


if __name__ == "__main__":
    sys.exit(main())
