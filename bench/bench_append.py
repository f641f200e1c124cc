"""Appending episodes to one dataset: does a commit cost the same at the 1000th episode of a
chunk as at the 2nd (issue 20)? And do the readers stay quick on such a dataset?

Prints one table:

1. Commit, per episode, at episodes 1-5, 96-100, 496-500 and 996-1000 of one chunk (the median
   of the five): the time of
   ``end_episode`` (videos remuxed into place, the native streams written, the steps appended to
   ``steps.parquet``, the index replaced) and the bytes it wrote (``wchar``: what went through
   ``write``), for a 30 s episode with two small cameras, joints at 500 Hz and force-torque at
   1 kHz. The floor, measured on the same episode in the same run: writing that episode's own
   rows (its steps and its stream samples) to fresh Parquet files. Ratio commit/floor per row,
   and each against the first five (the target: within 1.5x at the 1000th). Between the measured
   episodes the dataset is filled by ``import_episode`` of a recorded one (the same commit, with
   the videos copied instead of encoded, so the run takes minutes, not hours).
2. What grows with the chunk: the step table's footer (its size at each point) and the process's
   RSS after each measured commit; peak RSS of the whole run.
3. Readers on the 1000-episode dataset: ``ortf info``, ``ortf validate``, ``load_dataset`` with
   every episode's steps and streams read, the player's messages for the last episode (``ortf
   export mcap --episode``, the player's code without DDS), the Mixtrain and LeRobot exports of
   every episode, each as its own process (seconds and peak RSS);
   ``ortf info`` again on a 10,000-episode dataset (ten chunks, short episodes without cameras),
   and the commits that made it, the first hundred against the last (the episode index and the
   statistics are replaced at every commit: do they stay small?).

Run from the repository root::

    PYTHONPATH=. python bench/bench_append.py            # 1000 episodes, info at 10,000
    PYTHONPATH=. python bench/bench_append.py --quick    # 200 episodes, info at 2,000

Nothing here asserts on timings; the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import psutil
from measure import MB, Row, print_table

from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.importing import import_episode
from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.native_streams import NativeStream
from ortf_ros.format.spaces import StateComponent
from ortf_ros.io import parquet_append
from ortf_ros.synthetic.demo_arm import RGB_CAMERAS, demo_action, demo_manifest, demo_rgb, demo_state

WIDTH, HEIGHT, FPS = 96, 72, 30
EPISODE_S = 30.0
JOINT_HZ, FT_HZ = 500, 1000
TASK = "Insert the peg"
REPO = Path(__file__).resolve().parents[1]


def manifest(cameras: bool = True) -> Manifest:
    base = demo_manifest(WIDTH, HEIGHT, FPS, depth=False)
    if not cameras:
        base = replace(
            base,
            sensors=tuple(s for s in base.sensors if not s.is_camera),
            observation_space=replace(base.observation_space, images={}),
        )
    return replace(
        base,
        native_streams={
            "joint_states": NativeStream(
                columns={"position": StateComponent(7, "radians"), "velocity": StateComponent(7, "radians_per_second")},
                rate_hz=JOINT_HZ,
            ),
            "wrist_ft": NativeStream(
                columns={"force": StateComponent(3, "newtons"), "torque": StateComponent(3, "newton_meters")},
                rate_hz=FT_HZ,
            ),
        },
    )


def record_episode(writer: DatasetWriter, seconds: float, cameras: bool, seed: int) -> None:
    """One teleoperation episode: steps at the camera rate, the streams at theirs, in 1 s batches."""
    writer.begin_episode(TASK)
    random = np.random.default_rng(seed)
    steps = int(seconds * FPS)
    for second in range(int(np.ceil(seconds))):
        for name, hz, columns in (
            ("joint_states", JOINT_HZ, {"position": 7, "velocity": 7}),
            ("wrist_ft", FT_HZ, {"force": 3, "torque": 3}),
        ):
            count = min(hz, int((seconds - second) * hz))
            times = second + np.arange(count) / hz
            values = {c: random.normal(size=(count, d)).astype(np.float32) for c, d in columns.items()}
            writer.add_samples(name, times, values)
        for step in range(second * FPS, min(steps, (second + 1) * FPS)):
            t = step / FPS
            images = {cam: demo_rgb(n, step, WIDTH, HEIGHT) for n, cam in enumerate(RGB_CAMERAS)} if cameras else None
            samples = {"joint_states": int(t * JOINT_HZ), "wrist_ft": int(t * FT_HZ)}
            writer.add_step(t, demo_state(seed, step), demo_action(seed, step), images, samples=samples)


def written_bytes() -> int:
    """Bytes this process has passed to ``write`` so far (``/proc/self/io`` wchar)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no wchar (not Linux?)")


@dataclass(frozen=True)
class Commit:
    episode: int
    seconds: float
    bytes: int
    floor_seconds: float
    floor_bytes: int
    footer_bytes: int
    row_groups: int
    rss: int


FLOOR = """
import json, os, sys, time
from pathlib import Path
import pyarrow.parquet as pq
from ortf_ros.dataset.reader import load_dataset

def written():
    return int(next(l for l in Path("/proc/self/io").read_text().splitlines() if l.startswith("wchar:")).split()[1])

root, episode_id, scratch = sys.argv[1], sys.argv[2], Path(sys.argv[3])
episode = load_dataset(root).episode(episode_id)
tables = [episode.steps()] + [episode.stream(s) for s in episode.dataset.manifest.native_streams]
scratch.mkdir(exist_ok=True)
before, start = written(), time.perf_counter()
for number, table in enumerate(tables):
    path = scratch / f"{number}.parquet"
    pq.write_table(table, path, compression="zstd", use_dictionary=["episode_id"])
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())  # the commit syncs what it writes, so the floor does too
seconds, count = time.perf_counter() - start, written() - before
groups = pq.read_metadata(Path(root) / episode.steps_file).num_row_groups
print(json.dumps({"seconds": seconds, "bytes": count, "row_groups": groups}))
"""
"""The floor, in a process of its own: writing the episode's own steps and stream samples to fresh
Parquet files, what any commit must at least do with its rows (read beforehand, so only the write
is timed); and the number of row groups in the step table. Its own process so that reading the
episode, which parses the chunk's footer, does not count in the writer's RSS."""


def own_rows_floor(root: Path, episode_id: str, scratch: Path) -> tuple[float, int, int]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", FLOOR, str(root), episode_id, str(scratch)], env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"the floor failed: {out.stderr[-500:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return float(result["seconds"]), int(result["bytes"]), int(result["row_groups"])


def measured_commit(writer: DatasetWriter, root: Path, number: int, scratch: Path) -> Commit:
    record_episode(writer, EPISODE_S, True, seed=number)
    before, start = written_bytes(), time.perf_counter()
    record = writer.end_episode(success=True)
    seconds, written = time.perf_counter() - start, written_bytes() - before
    floor_seconds, floor_bytes, row_groups = own_rows_floor(root, record.episode_id, scratch)
    tail = parquet_append.read_tail(root / layout.steps_path(0))
    return Commit(
        episode=number,
        seconds=seconds,
        bytes=written,
        floor_seconds=floor_seconds,
        floor_bytes=floor_bytes,
        footer_bytes=len(tail.footer),
        row_groups=row_groups,
        rss=psutil.Process().memory_info().rss,
    )


def fill(writer: DatasetWriter, template: Episode, count: int) -> float:
    """``count`` episodes imported from ``template``; seconds per episode."""
    start = time.perf_counter()
    for _ in range(count):
        import_episode(writer, template)
    return (time.perf_counter() - start) / max(count, 1)


WINDOW = 5  # commits measured at each point; their median is shown


def median_commit(commits: list[Commit]) -> Commit:
    """The commit of median time, with the medians of the other figures."""

    def mid(values: list[float]) -> float:
        return float(np.median(values))

    last = commits[-1]
    return Commit(
        episode=last.episode,
        seconds=mid([c.seconds for c in commits]),
        bytes=int(mid([c.bytes for c in commits])),
        floor_seconds=mid([c.floor_seconds for c in commits]),
        floor_bytes=int(mid([c.floor_bytes for c in commits])),
        footer_bytes=last.footer_bytes,
        row_groups=last.row_groups,
        rss=last.rss,
    )


def bench_commits(tmp: Path, points: list[int]) -> tuple[list[Row], Path]:
    """Recorded episodes committed at the ``WINDOW`` episodes up to each point; imports between."""
    template_root, root = tmp / "template", tmp / "append"
    with DatasetWriter(template_root, manifest()) as writer:
        record_episode(writer, EPISODE_S, True, seed=0)
        writer.end_episode(success=True)
    template = load_dataset(template_root).episode(0)
    windows: list[Commit] = []
    import_seconds: list[float] = []
    with DatasetWriter(root, manifest()) as writer:
        done = 0
        for point in points:
            first = max(1, point - WINDOW + 1)
            if first - 1 > done:
                import_seconds.append(fill(writer, template, first - 1 - done))
            window = [measured_commit(writer, root, number, tmp / "floor") for number in range(first, point + 1)]
            windows.append(median_commit(window))
            done = point
            print(
                f"  episodes {first}-{point}: commit {windows[-1].seconds * 1000:.0f} ms", file=sys.stderr, flush=True
            )
    base = windows[0]
    rows = []
    for c in windows:
        label = f"episodes {max(1, c.episode - WINDOW + 1)}-{c.episode}"
        rows.append(
            Row(
                "1. commit of one 30 s episode (2 cameras 96x72, joints 500 Hz, force-torque 1 kHz), median of 5",
                f"{label:<18}",
                f"{c.seconds * 1000:5.0f} ms {c.bytes / MB:5.2f} MB",
                f"floor {c.floor_seconds * 1000:.0f} ms {c.floor_bytes / MB:.2f} MB, "
                f"ratio {c.seconds / c.floor_seconds:.1f}x time {c.bytes / c.floor_bytes:.2f}x bytes; "
                f"vs the first: {c.seconds / base.seconds:.2f}x time {c.bytes / base.bytes:.2f}x bytes",
            )
        )
    for c in windows:
        rows.append(
            Row(
                "2. what grows with the chunk",
                f"episode {c.episode:>4}",
                f"footer {c.footer_bytes / 1024:6.0f} kB",
                f"{c.row_groups} row groups in steps.parquet, "
                f"{c.footer_bytes / c.row_groups / 1024:.1f} kB each; RSS {c.rss / MB:.0f} MB",
            )
        )
    rows.append(
        Row(
            "2. what grows with the chunk",
            "peak RSS",
            f"{_vm_hwm() / MB:.0f} MB",
            "VmHWM of the whole run (the recording and the imports included); imports between: "
            + ", ".join(f"{s * 1000:.0f} ms" for s in import_seconds)
            + " per episode",
        )
    )
    return rows, root


def _vm_hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def sampled(command: list[str]) -> tuple[float, int]:
    """Seconds and peak RSS (sampled every 20 ms) of a command run as its own process."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    process = psutil.Process(child.pid)
    peak = 0
    while child.poll() is None:
        try:
            peak = max(peak, process.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.02)
    _, err = child.communicate()
    seconds = time.perf_counter() - start
    if child.returncode not in (0,):
        raise SystemExit(f"{' '.join(command)} failed ({child.returncode}): {err.decode()[-500:]}")
    return seconds, peak


READ_ALL = """
import sys
from ortf_ros.dataset.reader import load_dataset
dataset = load_dataset(sys.argv[1])
rows = samples = 0
for episode in dataset:
    rows += sum(b.num_rows for b in episode.step_batches())
    for stream in dataset.manifest.native_streams:
        samples += sum(b.num_rows for b in episode.stream_batches(stream))
print(rows, samples)
"""


def bench_readers(root: Path, label: str, episodes: int) -> list[Row]:
    ortf = [sys.executable, "-m", "ortf_ros.cli.ortf"]
    out = root.parent / "exports"
    last = layout.episode_id_for(episodes - 1)
    commands = {
        "ortf info": [*ortf, "info", str(root)],
        "ortf validate": [*ortf, "validate", str(root)],
        "load_dataset, every step and sample": [sys.executable, "-c", READ_ALL, str(root)],
        f"ortf export mcap --episode {last} (the player's messages)": [
            *ortf, "export", "mcap", "--episode", last, str(root), str(out / "last.mcap"),
        ],
        "ortf export mixtrain (every episode)": [*ortf, "export", "mixtrain", str(root), str(out / "mixtrain")],
        "ortf export lerobot (every episode)": [*ortf, "export", "lerobot", str(root), str(out / "lerobot")],
    }  # fmt: skip
    out.mkdir(exist_ok=True)
    rows = []
    for what, command in commands.items():
        seconds, peak = sampled(command)
        rows.append(Row(f"3. readers on {label}", what, f"{seconds:6.2f} s", f"peak RSS {peak / MB:.0f} MB"))
    return rows


def many_episodes(tmp: Path, count: int) -> tuple[Path, list[float]]:
    """``count`` 2 s episodes without cameras in chunks of 1000: ``ortf info`` at scale; and the
    time of each commit (the index and the statistics are written at every one)."""
    root, template_root = tmp / "many", tmp / "many-template"
    with DatasetWriter(template_root, manifest(cameras=False)) as writer:
        record_episode(writer, 2.0, False, seed=0)
        writer.end_episode(success=True)
    template = load_dataset(template_root).episode(0)  # not the dataset written: its footer changes
    seconds = []
    with DatasetWriter(root, manifest(cameras=False), config=WriterConfig()) as writer:
        for _ in range(count):
            seconds.append(fill(writer, template, 1))
    return root, seconds


def bench_many(tmp: Path, many: int) -> list[Row]:
    start = time.perf_counter()
    big, commits = many_episodes(tmp, many)
    build = time.perf_counter() - start
    section = f"3. {many} episodes of 2 s without cameras ({many // 1000} chunks)"
    first, last = float(np.median(commits[1:101])), float(np.median(commits[-100:]))
    index = (big / layout.EPISODES).stat().st_size
    rows = [
        Row(
            section,
            "commit (import_episode)",
            f"{last * 1000:5.0f} ms",
            f"episodes {many - 99}-{many}, median; episodes 2-101: {first * 1000:.0f} ms, ratio {last / first:.2f}x; "
            f"meta/episodes.parquet {index / 1024:.0f} kB, rewritten at each; all {many} took {build:.0f} s",
        )
    ]
    seconds, peak = sampled([sys.executable, "-m", "ortf_ros.cli.ortf", "info", str(big)])
    rows.append(Row(section, "ortf info", f"{seconds:6.2f} s", f"peak RSS {peak / MB:.0f} MB"))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200 episodes (info at 2,000)")
    parser.add_argument("--only-many", action="store_true", help="only the 10,000 (--quick: 2,000) episode section")
    args = parser.parse_args(argv)
    episodes = 200 if args.quick else 1000
    points = [WINDOW, 100, episodes] if args.quick else [WINDOW, 100, 500, 1000]
    with tempfile.TemporaryDirectory(prefix="ortf-bench-append-") as scratch:
        tmp = Path(scratch)
        rows = []
        if not args.only_many:
            commits, root = bench_commits(tmp, points)
            rows += commits + bench_readers(root, f"{episodes} episodes of 30 s", episodes)
        rows += bench_many(tmp, 2000 if args.quick else 10_000)
    print_table(rows)


if __name__ == "__main__":
    main()
