"""Speed of ``ortf doctor`` against decoding the episode's videos once, its floor.

The doctor decodes every video once (frozen frames, video timestamps) and reads the step
table and the native-rate streams a row group at a time; decoding is most of its work, so
its floor is PyAV decoding the same videos, frame by frame, with the same decoder settings
(``thread_type = "AUTO"``). Both run on the dataset converted from the benchmark's 60 s
two-camera bag (``bench_bag2ortf.py``: 2 cameras 640x480 @ 30 fps, JointState 500 Hz,
wrench 1 kHz; here the bag with JPEG cameras, cached in ``.cache/bench/``), interleaved,
best of ``--repeat``. Target (issue 25): doctor / floor <= 2. Run from the repository root::

    .venv/bin/python bench/bench_doctor.py            # the 60 s episode
    .venv/bin/python bench/bench_doctor.py --quick    # a 10 s episode

Nothing here asserts on timings; the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import av
from bench_bag2ortf import DEFAULT_CACHE, BagSpec, convert, ensure_bag, prune_cache
from measure import Row, print_table

from ortf_ros.cli.ortf import main as ortf_main
from ortf_ros.dataset.reader import load_dataset

RATIO_TARGET = 2.0


def decode_floor(dataset: Path) -> int:
    """Every frame of every video of the dataset decoded once; returns the frame count."""
    frames = 0
    for episode in load_dataset(dataset):
        for camera in episode.dataset.manifest.cameras:
            with av.open(str(episode.video_path(camera))) as container:
                stream = container.streams.video[0]
                stream.thread_type = "AUTO"
                for _ in container.decode(stream):
                    frames += 1
    return frames


def run_doctor(dataset: Path) -> dict[str, object]:
    """``ortf doctor DATASET --json`` in this process (no interpreter start-up); its document."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):  # (its note: no labels)
        code = ortf_main(["doctor", str(dataset), "--json"])
    if code != 0:
        raise SystemExit(f"ortf doctor exited {code}: {out.getvalue()[-2000:]}")
    document: dict[str, object] = json.loads(out.getvalue())
    return document


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 10 s episode instead of 60 s")
    parser.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="where generated bags are kept")
    args = parser.parse_args()
    print(f"ortf_ros doctor benchmark: {os.cpu_count()} CPUs, PyAV {av.__version__}, Python {sys.version.split()[0]}")
    cache: Path = args.cache_dir.resolve()
    prune_cache(cache)
    bag = ensure_bag(cache, BagSpec(10.0 if args.quick else 60.0, compressed=True))
    with tempfile.TemporaryDirectory(prefix="ortf_bench_doctor_") as tmp:
        dataset = Path(tmp) / "dataset"
        start = time.perf_counter()
        convert(bag.path, dataset, None)
        converted = time.perf_counter() - start
        frames = decode_floor(dataset)  # warm-up: imports, page cache
        document = run_doctor(dataset)
        doctor_times, floor_times = [], []
        for _ in range(args.repeat):
            floor_times.append(timed(lambda: decode_floor(dataset)))
            doctor_times.append(timed(lambda: run_doctor(dataset)))
    doctor, floor = min(doctor_times), min(floor_times)
    totals = document["totals"]
    section = (
        f"1. ortf doctor of one {bag.spec.length} episode (2 cameras 640x480 @ 30 fps, JointState 500 Hz, "
        f"wrench 1 kHz; converted in {converted:.1f} s), best of {args.repeat}"
    )
    rows = [
        Row(section, "ortf doctor --json", f"{doctor:7.2f} s", f"{frames / doctor:,.0f} frames/s; findings: {totals}"),
        Row(section, "floor: PyAV decodes every video once", f"{floor:7.2f} s", f"{frames:,} frames"),
        Row(section, "ratio doctor / floor", f"{doctor / floor:7.2f}", f"target <= {RATIO_TARGET:g}"),
    ]
    print_table(rows)


if __name__ == "__main__":
    main()
