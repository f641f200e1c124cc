"""Fleet conversion (issue 22): many recordings into one dataset, one after the other, on a
process pool and on Ray; and whether importing an episode into the output costs the same
as the dataset grows.

Prints one table:

0. The recordings: 12 of 30 s (``--quick``: 4 of 10 s), each as ``bench_bag2ortf.py``'s
   speed bag (two 640x480 @ 30 fps rgb8 cameras, JointState 500 Hz, WrenchStamped 1 kHz,
   TF, a joint command; no depth camera), each starting a minute after the one before:
   the converter fingerprints recordings and converts identical ones once, so they must
   differ. Cached under ``.cache/bench/`` as ``bench_bag2ortf.py`` caches its bags; one
   read of them all (the page cache warmed for every mode alike).
1. The recordings converted into a fresh dataset by ``ortf-bag2ortf R1 .. R12 -o DS`` as a
   user runs it, one process each: ``--jobs 1`` (in place, one after the other: the
   floor), ``--jobs 2`` (a process pool, each recording into a scratch dataset that the
   driver imports) and ``--ray`` (a Ray instance of this machine, started by the
   command). Wall seconds, recordings per second and real time, and each mode's
   recordings per second over the sequential run's. Ray's start-up (``ray.init`` and
   ``ray.shutdown`` in a process of their own) is shown beside it: a fixed cost per run.
2. ``DatasetWriter.import_episode``, what the driver does with every recording a worker
   converted: one 2 s episode (two 640x480 cameras) converted once, then imported 1000
   times (``--quick``: 100) into one dataset through one open writer, as the driver
   opens it. The median import of the first ten, around the 100th and 500th, and of the
   last ten, each against the floor: the same episode's files copied (its videos with
   ``shutil.copyfile``, its step and stream rows read and written to fresh Parquet files,
   all synced, as a commit syncs), measured every tenth import in the same run.

Run from the repository root::

    PYTHONPATH=. python bench/bench_fleet.py            # 12 x 30 s; 1000 imports
    PYTHONPATH=. python bench/bench_fleet.py --quick    # 4 x 10 s; 100 imports

Nothing here asserts on timings; the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from importlib.metadata import version
from pathlib import Path

import pyarrow.parquet as pq
from bench_append import sampled
from bench_bag2ortf import DEFAULT_CACHE, BagSpec, CachedBag, ForeignLoad, convert, ensure_bag, prune_cache
from measure import MB, Row, print_table

from ortf_ros.dataset.commit import PARQUET_COMPRESSION
from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format import layout
from ortf_ros.format.text import read_text
from ortf_ros.io import atomic
from ortf_ros.io.cpus import usable_cpus

RECORDING_GAP_S = 60.0  # each recording starts this long after the one before
IMPORTED_S = 2.0  # the episode imported again and again
WINDOW = 10  # imports whose median is shown at each point
FLOOR_EVERY = 10  # one floor copy after this many imports
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}  # no report; loopback only
RAY_START = """
import logging, ray
ray.init(num_cpus={cpus}, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
ray.shutdown()
"""
"""What ``--ray`` does before its first task and after its last, with the same options
(``fleet/ray_runner.py``): timed on its own, since it is paid once a run."""


# -- 0. recordings ------------------------------------------------------------------------


def fleet_bags(cache: Path, count: int, seconds: float) -> list[CachedBag]:
    """``count`` recordings of the same scene, distinct in content (their stamps differ)."""
    return [ensure_bag(cache, BagSpec(seconds, compressed=False, start_s=i * RECORDING_GAP_S)) for i in range(count)]


def read_bytes(paths: list[Path]) -> tuple[float, int]:
    """Every file of the recordings read once (seconds, bytes): the page cache warm for
    each mode alike, the first mode otherwise paying for the disk."""
    start, size = time.perf_counter(), 0
    for path in paths:
        for file in sorted(path.rglob("*")):
            if file.is_file():
                with file.open("rb") as handle:
                    while chunk := handle.read(1 << 24):
                        size += len(chunk)
    return time.perf_counter() - start, size


def bags_rows(bags: list[CachedBag], removed: list[str], read: tuple[float, int]) -> list[Row]:
    section = "0. recordings (MCAP, uncompressed, cached in .cache/bench), as bench_bag2ortf.py's speed bag"
    fleet, short = bags[:-1], bags[-1]
    generated = sum(b.generated_now for b in bags)
    read_s, size = read
    rows = [
        Row(
            section,
            f"{len(fleet)} x {fleet[0].spec.length}, starting {RECORDING_GAP_S:g} s apart",
            f"{sum(b.generation_s for b in fleet):7.1f} s",
            f"generation time, {generated} of {len(bags)} bags generated in this run; "
            f"{sum(b.size_bytes for b in fleet) / MB:,.0f} MB, {sum(b.messages for b in fleet):,} messages",
        ),
        Row(
            section,
            f"section 2's episode, {short.spec.length}",
            f"{short.generation_s:7.1f} s",
            f"generation time; {short.size_bytes / MB:,.0f} MB",
        ),
        Row(section, "every file read once (page cache)", f"{read_s:7.1f} s", f"{size / MB / read_s:,.0f} MB/s"),
    ]
    if removed:
        rows.append(Row(section, "stale cache entries removed", f"{len(removed):7d}", ", ".join(removed)))
    return rows


# -- 1. fleet conversion ------------------------------------------------------------------


@dataclass(frozen=True)
class FleetRun:
    label: str
    seconds: float
    peak_rss: int  # the command's own process (the driver), not its workers


def run_fleet(label: str, flags: list[str], bags: list[CachedBag], output: Path) -> FleetRun:
    """One ``ortf-bag2ortf`` run, as a user types it, into a fresh dataset; every recording
    must have become an episode (a skipped or failed one would make the rate a lie)."""
    command = [sys.executable, "-m", "ortf_ros.cli.bag2ortf", *(str(b.path) for b in bags), "-o", str(output), *flags]
    seconds, peak = sampled(command)
    episodes = len(load_dataset(output).episodes)
    if episodes != len(bags):
        raise SystemExit(f"{label}: {episodes} episodes in the dataset from {len(bags)} recordings")
    shutil.rmtree(output)
    return FleetRun(label, seconds, peak)


def fleet_rows(bags: list[CachedBag], tmp: Path) -> list[Row]:
    real = sum(b.duration_s for b in bags)
    section = (
        f"1. {len(bags)} recordings of {bags[0].spec.length} ({real:.0f} s in all) into a fresh dataset, "
        f"ortf-bag2ortf, one run each, {usable_cpus()} CPUs"
    )
    modes = {"--jobs 1: in place, sequential (the floor)": ["--jobs", "1"], "--jobs 2: process pool": ["--jobs", "2"]}
    has_ray = importlib.util.find_spec("ray") is not None
    if has_ray:
        modes["--ray: a local Ray instance"] = ["--ray"]
    runs = [run_fleet(label, flags, bags, tmp / "fleet") for label, flags in modes.items()]
    floor = runs[0]
    rows = []
    for run in runs:
        rows.append(
            Row(
                section,
                run.label,
                f"{len(bags) / run.seconds:6.2f} rec/s",
                f"{run.seconds:.1f} s, {real / run.seconds:.2f}x real time; "
                f"the command's own process peaked at {run.peak_rss / MB:.0f} MB RSS",
            )
        )
    for run in runs[1:]:
        rows.append(
            Row(section, f"ratio {run.label.split(':')[0]} / sequential (rec/s)", f"{floor.seconds / run.seconds:6.2f}")
        )
    if not has_ray:
        rows.append(Row(section, "--ray", "skipped", "Ray is not installed: pip install 'ortf_ros[ray]'"))
        return rows
    start = [sys.executable, "-c", RAY_START.format(cpus=usable_cpus())]
    started, _ = sampled(start)
    imported, _ = sampled([sys.executable, "-c", "import ray"])
    rows.append(
        Row(
            section,
            "Ray start-up: ray.init + shutdown (informative)",
            f"{started:6.2f} s",
            f"a process of its own, as --ray starts it; of which {imported:.2f} s starting Python and importing ray",
        )
    )
    return rows


# -- 2. import as the dataset grows --------------------------------------------------------


def copy_floor(episode: Episode, target: Path) -> float:
    """What an import cannot do without: the episode's videos copied, its step and stream
    rows read and written to fresh Parquet files, every file synced (a commit syncs what it
    writes). Seconds."""
    manifest = episode.dataset.manifest
    start = time.perf_counter()
    target.mkdir()
    files = []
    for number, camera in enumerate(manifest.cameras):
        files.append(target / f"video-{number}.mp4")
        shutil.copyfile(episode.video_path(camera), files[-1])
    tables = [episode.steps()] + [episode.stream(stream) for stream in manifest.native_streams]
    for number, table in enumerate(tables):
        files.append(target / f"rows-{number}.parquet")
        pq.write_table(table, files[-1], compression=PARQUET_COMPRESSION, use_dictionary=["episode_id"])
    for file in files:
        atomic.fsync_file(file)
    atomic.fsync_dir(target)
    seconds = time.perf_counter() - start
    shutil.rmtree(target)
    return seconds


def import_rows(bag: CachedBag, tmp: Path, count: int) -> list[Row]:
    """One converted episode imported ``count`` times through one writer opened as the
    driver opens it (``FleetConversion._writer_for``), each import timed."""
    convert(bag.path, tmp / "converted", None)
    converted = load_dataset(tmp / "converted")
    episode = converted.episode(0)
    urdf = converted.root / layout.URDF
    manifest = replace(converted.manifest, dataset_id="", created_at=None)
    output = tmp / "imported"
    seconds: list[float] = []
    floors: list[float] = []
    with DatasetWriter(output, manifest, urdf=read_text(urdf) if urdf.exists() else None) as writer:
        for number in range(1, count + 1):
            start = time.perf_counter()
            writer.import_episode(episode)
            seconds.append(time.perf_counter() - start)
            if number % FLOOR_EVERY == 0:
                floors.append(copy_floor(episode, tmp / "floor"))
    floor = statistics.median(floors)
    videos = sum(episode.video_path(camera).stat().st_size for camera in converted.manifest.cameras)
    section = (
        f"2. import_episode of one {bag.spec.length} episode ({episode.record.length} steps, "
        f"{len(converted.manifest.cameras)} cameras 640x480, videos {videos / 1024:,.0f} kB), "
        f"{count} times into one dataset, one open writer; median of {WINDOW}"
    )
    points = sorted({WINDOW, count // 2, count} | {p for p in (100, 500) if p < count})
    first = statistics.median(seconds[:WINDOW])
    rows = []
    for point in points:
        median = statistics.median(seconds[point - WINDOW : point])
        rows.append(
            Row(
                section,
                f"episodes {point - WINDOW + 1}-{point}",
                f"{median * 1000:6.1f} ms",
                f"ratio to the floor {median / floor:.2f}x; vs the first {WINDOW}: {median / first:.2f}x",
            )
        )
    index = (output / layout.EPISODES).stat().st_size
    rows += [
        Row(
            section,
            "floor: the episode's files copied",
            f"{floor * 1000:6.1f} ms",
            f"median of {len(floors)}, one every {FLOOR_EVERY} imports: videos copied, steps and "
            f"{len(converted.manifest.native_streams)} streams read and written to Parquet "
            f"({PARQUET_COMPRESSION}), synced",
        ),
        Row(
            section,
            f"all {count} imports",
            f"{sum(seconds):6.1f} s",
            f"meta/episodes.parquet {index / 1024:,.0f} kB at the end (rewritten at each commit)",
        ),
    ]
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="4 recordings of 10 s, 100 imports")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="where generated bags are kept")
    args = parser.parse_args(argv)
    count, seconds, imports = (4, 10.0, 100) if args.quick else (12, 30.0, 1000)
    os.environ.update(RAY_ENV)  # (passed on to every command run)
    ray = f", Ray {version('ray')}" if importlib.util.find_spec("ray") is not None else ", no Ray"
    print(f"ortf_ros fleet benchmark: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}{ray}")
    load = ForeignLoad()
    cache: Path = args.cache_dir.resolve()
    removed = prune_cache(cache)
    bags = fleet_bags(cache, count, seconds)
    short = ensure_bag(cache, BagSpec(IMPORTED_S, compressed=False))
    with tempfile.TemporaryDirectory(prefix="ortf-bench-fleet-") as scratch:
        tmp = Path(scratch)
        rows = bags_rows([*bags, short], removed, read_bytes([b.path for b in bags]))
        rows += fleet_rows(bags, tmp)
        rows += import_rows(short, tmp, imports)
    print_table(rows)
    print(f"\n{load.line()}")


if __name__ == "__main__":
    main()
