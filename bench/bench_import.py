"""Speed and memory of ``ortf import rlds`` and of the Mixtrain lake tables, against the
bare operations under them.

Prints one table:

1. ``ortf import rlds`` (``from_rlds``) of an Open X-Embodiment-shaped source: fractal's
   (RT-1's) features with a second camera, JPEG at fractal's 320x256, written by TFDS
   itself in the TFDS venv (``test/support/rlds_sources_child.py oxe``; the venv is
   ``bash scripts/tfds-env.sh``'s: without it the section says so and is skipped). Steps/s
   and frames/s, against (a) every record read and checked with ``convert/tfrecord.py``
   and every JPEG decoded with OpenCV (what an import cannot avoid) and (b) bare PyAV
   encoding those frames with the writer's ``VideoSettings`` into plain MP4s, one per
   episode and camera; the import's time against a+b.
2. Peak memory of a child process importing 5 and 40 episodes (its VmHWM plus its
   encoder processes', as bench_writer.py measures it): flat in the dataset's length.
3. ``ortf export mixtrain --table ducklake|delta|iceberg``: three datasets (the second
   without the depth camera: its rows append by schema evolution) appended to one new
   table, against the plain ``ortf export mixtrain`` files export of the same three.

Run from the repository root::

    .venv/bin/python bench/bench_import.py            # 20 episodes of 100 steps: ~2.5 min on 2 cores
    .venv/bin/python bench/bench_import.py --quick    # 6 episodes of 50 steps, RSS 2 vs 12 episodes: ~30 s

Nothing here asserts on timings; the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import av
import cv2
import numpy as np
from measure import MB, Row, bare_video_stream, peak_rss_with_encoders, print_table, run_measured_child

from ortf_ros.convert.mixtrain_export import to_mixtrain
from ortf_ros.convert.mixtrain_tables import to_mixtrain_table
from ortf_ros.convert.rlds_import import from_rlds
from ortf_ros.convert.tfds_layout import read_tfds
from ortf_ros.convert.tfrecord import parse_example, read_records
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.synthetic.dataset import write_demo_dataset

REPO = Path(__file__).resolve().parents[1]
SOURCES = REPO / "test" / "support" / "rlds_sources_child.py"
TFDS_PYTHON = REPO / ".cache" / "tfds-venv" / "bin" / "python"
WIDTH, HEIGHT, CAMERAS = 320, 256, 2  # fractal20220817_data's image is 256x320
IMAGES = ("steps/observation/image", "steps/observation/wrist_image")
FPS = 10  # the source states no rate (as fractal): --fps
LAKES = ("ducklake", "delta", "iceberg")


def best_of(repeat: int, runs: dict[str, Callable[[Path], object]], scratch: Path) -> dict[str, float]:
    """The fastest of ``repeat`` rounds of each run, interleaved (other load only slows a run),
    each into a fresh directory."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for attempt in range(repeat):
        for name, run in runs.items():
            out = scratch / f"{name}-{attempt}"
            start = time.perf_counter()
            run(out)
            times[name].append(time.perf_counter() - start)
            shutil.rmtree(out, ignore_errors=True)
    return {name: min(t) for name, t in times.items()}


# -- 1. ortf import rlds ------------------------------------------------------------------


def write_source(tfds_python: Path, out: Path, episodes: int, steps: int) -> float:
    """The OXE-shaped source written by TFDS in its venv; seconds it took."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    command = [str(tfds_python), str(SOURCES), "oxe", str(out), str(episodes), str(steps)]
    start = time.perf_counter()
    done = subprocess.run(
        [*command, str(WIDTH), str(HEIGHT), str(CAMERAS)],
        capture_output=True,
        text=True,
        env=env | {"TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    if done.returncode != 0:
        raise SystemExit(f"writing the RLDS source failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return time.perf_counter() - start


def import_rlds(source: Path, out: Path) -> None:
    from_rlds(source, out, fps=FPS)


def decoded(item: memoryview) -> np.ndarray:
    image = cv2.imdecode(np.frombuffer(item, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise SystemExit("a source JPEG does not decode")
    return np.asarray(image, np.uint8)


class Floor:
    """Floors (a) and (b) in one pass over the source, timed apart: each record read (both
    CRCs checked) and parsed, its JPEGs decoded by OpenCV (BGR, no channel swap); then that
    episode's frames encoded by bare PyAV, one plain MP4 per camera, one after the other."""

    def __init__(self) -> None:
        self.read_decode: list[float] = []
        self.encode: list[float] = []

    def run(self, source: Path, out: Path) -> None:
        settings = WriterConfig().video.with_threads(CAMERAS)  # the threads the writer gives each camera
        out.mkdir()
        read = encode = 0.0
        for split in read_tfds(source).splits:
            for shard in split.shards:
                records = read_records(shard)
                while True:
                    start = time.perf_counter()
                    record = next(records, None)
                    if record is None:
                        break
                    example = parse_example(record)
                    frames = [[decoded(item) for item in example[key].bytes_items()] for key in IMAGES]
                    read += time.perf_counter() - start
                    start = time.perf_counter()
                    for camera in frames:
                        with av.open(str(out / "x.mp4"), "w") as container:
                            stream, time_base = bare_video_stream(container, settings, WIDTH, HEIGHT, FPS)
                            for index, image in enumerate(camera):
                                frame = av.VideoFrame.from_ndarray(image, format="bgr24")
                                frame.pts, frame.time_base = index, time_base
                                container.mux(stream.encode(frame))
                            container.mux(stream.encode(None))
                    encode += time.perf_counter() - start
        self.read_decode.append(read)
        self.encode.append(encode)


def import_rows(tfds_python: Path, scratch: Path, episodes: int, steps: int, repeat: int) -> list[Row]:
    section = (
        f"1. ortf import rlds (OXE fractal-shaped, {episodes} episodes x {steps} steps, "
        f"{CAMERAS} cameras {WIDTH}x{HEIGHT} JPEG)"
    )
    source = scratch / "fractal"
    made = write_source(tfds_python, source, episodes, steps)
    frames = episodes * steps * CAMERAS
    size = sum(f.stat().st_size for f in source.iterdir())
    floor = Floor()
    best = best_of(
        repeat, {"import": lambda out: import_rlds(source, out), "floor": lambda out: floor.run(source, out)}, scratch
    )
    read, encode = min(floor.read_decode), min(floor.encode)
    both = min(a + b for a, b in zip(floor.read_decode, floor.encode, strict=True))

    def rates(what: str, seconds: float, note: str = "") -> list[Row]:
        return [
            Row(section, f"{what}: steps/s", f"{episodes * steps / seconds:,.0f}"),
            Row(section, f"{what}: frames/s", f"{frames / seconds:,.0f}", f"{seconds:.2f} s" + note),
        ]

    return [
        Row(section, "source written by TFDS", f"{size / MB:.1f} MB", f"{made:.1f} s, not timed"),
        *rates("from_rlds", best["import"]),
        *rates("floor a: records read + JPEGs decoded", read),
        *rates("floor b: bare PyAV encode", encode, f"; {WriterConfig().video.preset}, one thread, cameras in turn"),
        *rates("floor a+b", both),
        Row(section, "import time / floor a+b time", f"{best['import'] / both:.2f}x"),
    ]


def child_import(source: Path, out: Path) -> None:
    """Runs in the measured child: import ``source``, print a JSON summary."""
    start = time.perf_counter()
    result = from_rlds(source, out, fps=FPS)
    wall = time.perf_counter() - start
    # (the encoder processes wait, idle, for the next video until this process exits)
    print(json.dumps({"wall": wall, "steps": result.steps, "hwm": peak_rss_with_encoders()}), flush=True)


def rss_rows(tfds_python: Path, scratch: Path, lengths: list[int], steps: int) -> list[Row]:
    section = f"2. Peak memory of a child importing (episodes of {steps} steps, as section 1)"
    rows = []
    peaks = []
    for episodes in lengths:
        source = scratch / f"rss-{episodes}"
        write_source(tfds_python, source, episodes, steps)
        out = scratch / f"rss-{episodes}-out"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child-import",
            str(source),
            "--child-out",
            str(out),
        ]
        summary, peak, pss = run_measured_child(command, f"importing {episodes} episodes")
        peaks.append(summary["hwm"])
        rows += [
            Row(
                section,
                f"{episodes} episodes: peak RSS (VmHWM, child + encoders)",
                f"{summary['hwm'] / MB:.0f} MB",
                f"sampled 50 ms: RSS {peak / MB:.0f} MB, PSS {pss / MB:.0f} MB; import {summary['wall']:.1f} s",
            ),
        ]
        shutil.rmtree(source)
        shutil.rmtree(out)
    rows.append(
        Row(section, f"{lengths[-1]} episodes - {lengths[0]} episodes", f"{(peaks[-1] - peaks[0]) / MB:+.0f} MB")
    )
    return rows


# -- 3. the Mixtrain lakes ------------------------------------------------------------------


def lake_rows(scratch: Path, episodes: int, steps: int, repeat: int) -> list[Row]:
    depths = (True, False, True)
    datasets = []
    for number, depth in enumerate(depths):
        root = scratch / f"dataset-{number}"
        write_demo_dataset(root, episodes=episodes, steps=steps, width=160, height=120, depth=depth)
        datasets.append(root)
    total = episodes * len(datasets)
    section = (
        f"3. ortf export mixtrain --table (3 datasets x {episodes} episodes x {steps} steps appended to one new "
        "table; 2 cameras 160x120, depth in the 1st and 3rd)"
    )

    def files(out: Path) -> None:
        for number, root in enumerate(datasets):
            to_mixtrain(root, out / str(number))

    def lake(kind: str) -> Callable[[Path], None]:
        def run(out: Path) -> None:
            for root in datasets:
                to_mixtrain_table(root, out, kind)

        return run

    runs: dict[str, Callable[[Path], object]] = {"files": files}
    missing = []
    for kind in LAKES:
        try:  # a first table outside the timing: each lake library imported, DuckLake's extension loaded
            to_mixtrain_table(datasets[1], scratch / f"warm-{kind}", kind)
            runs[kind] = lake(kind)
        except Exception as exc:  # (a lake whose extra is missing is reported)
            missing.append(Row(section, f"--table {kind}", "skipped", f"{type(exc).__name__}: {exc}"))
    best = best_of(repeat, runs, scratch)
    rows = [
        Row(section, "floor, plain files export: episodes/s", f"{total / best['files']:.1f}", f"{best['files']:.2f} s")
    ]
    for kind in LAKES:
        if kind in best:
            rows += [
                Row(section, f"--table {kind}: episodes/s", f"{total / best[kind]:.1f}", f"{best[kind]:.2f} s"),
                Row(section, f"--table {kind} time / files export time", f"{best[kind] / best['files']:.2f}x"),
            ]
    return rows + missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 episodes of 50 steps; RSS 2 vs 12 episodes")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rss-episodes", default="5,40", help="two source lengths for section 2")
    parser.add_argument("--repeat", type=int, default=3, help="best of N")
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--tfds-python", type=Path, default=TFDS_PYTHON, help="the TFDS venv's python")
    parser.add_argument("--child-import", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_import is not None:
        child_import(args.child_import, args.child_out)
        return
    episodes, steps = (6, 50) if args.quick else (args.episodes, args.steps)
    lengths = [2, 12] if args.quick else [int(n) for n in args.rss_episodes.split(",")]
    print(f"ortf_ros import benchmark: {os.cpu_count()} CPUs, PyAV {av.__version__}, Python {sys.version.split()[0]}")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="ortf_bench_") as tmp:
        scratch = Path(tmp)
        if args.tfds_python.exists():
            rows += import_rows(args.tfds_python, scratch, episodes, steps, args.repeat)
            if not args.skip_rss:
                rows += rss_rows(args.tfds_python, scratch, lengths, steps)
        else:
            note = f"no TFDS venv at {args.tfds_python}: bash scripts/tfds-env.sh builds it"
            rows.append(Row("1-2. ortf import rlds", "skipped", "-", note))
        rows += lake_rows(scratch, 4 if args.quick else 8, 30 if args.quick else 60, args.repeat)
    print_table(rows)


if __name__ == "__main__":
    main()
