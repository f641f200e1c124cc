"""Throughput and memory of ``DatasetWriter`` against the bare libraries it sits on.

Prints one table:

1. RGB encode rate at 640x480: the writer (one camera, ``begin_episode`` ..
   ``end_episode``, final remux and commit included) vs bare PyAV encoding the same
   frames with the same codec settings into a plain MP4.
2. Step rate without cameras: the writer vs appending the same rows to an Arrow IPC
   stream one row at a time (what the staging step log does), and vs one bulk Parquet
   write of the whole table.
3. Peak memory of a child process (and its encoder processes) writing one two-camera
   640x480, 30 fps episode, for a short and a long episode (flat in episode length is
   the point; target < 300 MB, judged on the tree's PSS, which counts the libraries and
   frame rings the processes share once; the sum of their VmHWM is shown as the upper
   bound).

Run from the repository root::

    PYTHONPATH=. python bench/bench_writer.py            # full: 1 and 10 minute episodes
    PYTHONPATH=. python bench/bench_writer.py --quick    # 1 and 2 minute episodes

Nothing here asserts on timings; the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import av
import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
from measure import MB, Row, bare_video_stream, peak_rss_with_encoders, print_table, run_measured_child

from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.schema import step_schema
from ortf_ros.io.video import VideoSettings
from ortf_ros.synthetic.demo_arm import RGB_CAMERAS, demo_action, demo_manifest, demo_rgb, demo_state

WIDTH, HEIGHT, FPS = 640, 480, 30
CYCLE = 60  # distinct pre-generated frames / states, reused cyclically
T0 = 1_700_000_000.0
TASK = "Pick up the red box and place it in the bowl"
RSS_TARGET_MB = 300.0


# -- inputs -------------------------------------------------------------------


def one_camera_manifest() -> Manifest:
    """The demo manifest with only its wrist RGB camera."""
    base = demo_manifest(WIDTH, HEIGHT, FPS, depth=False)
    key, sensor_name = next(iter(RGB_CAMERAS.items()))
    return replace(
        base,
        sensors=tuple(s for s in base.sensors if s.name == sensor_name),
        observation_space=replace(base.observation_space, images={key: sensor_name}),
    )


def no_camera_manifest() -> Manifest:
    base = demo_manifest(WIDTH, HEIGHT, FPS, depth=False)
    return replace(
        base,
        sensors=tuple(s for s in base.sensors if not s.is_camera),
        observation_space=replace(base.observation_space, images={}),
    )


def state_cycle() -> tuple[list[dict[str, np.ndarray]], list[np.ndarray]]:
    return [demo_state(0, i, FPS) for i in range(CYCLE)], [demo_action(0, i, FPS) for i in range(CYCLE)]


def dataset_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


# -- 1. encode rate -------------------------------------------------------------


def writer_encode(root: Path, frames: list[np.ndarray], n: int) -> tuple[float, float]:
    """(seconds for begin_episode..end_episode, of which end_episode)."""
    states, actions = state_cycle()
    camera = next(iter(RGB_CAMERAS))
    with DatasetWriter(root, one_camera_manifest()) as writer:
        start = time.perf_counter()
        writer.begin_episode(TASK)
        for i in range(n):
            k = i % CYCLE
            writer.add_step(T0 + i / FPS, states[k], actions[k], {camera: frames[k]})
        ending = time.perf_counter()
        writer.end_episode(success=True)
        end = time.perf_counter()
    return end - start, end - ending


def bare_encode(path: Path, frames: list[np.ndarray], n: int) -> float:
    """PyAV alone: the same codec settings, straight into a plain MP4."""
    settings = VideoSettings().with_threads(1)  # the writer's, for its one camera
    start = time.perf_counter()
    with av.open(str(path), "w", format="mp4") as container:
        stream, time_base = bare_video_stream(container, settings, WIDTH, HEIGHT, FPS)
        for i in range(n):
            frame = av.VideoFrame.from_ndarray(frames[i % CYCLE], format="rgb24")
            frame.pts = i
            frame.time_base = time_base
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return time.perf_counter() - start


def bench_encode(tmp: Path, n: int, repeat: int) -> list[Row]:
    frames = [demo_rgb(0, i, WIDTH, HEIGHT) for i in range(CYCLE)]
    # Warm up: first libx264 open, imports, page cache.
    bare_encode(tmp / "warmup.mp4", frames, CYCLE)
    # Interleaved, best of `repeat`: other load on the machine only ever slows a run down.
    bare_times, writer_times = [], []
    for r in range(repeat):
        bare_times.append(bare_encode(tmp / f"bare{r}.mp4", frames, n))
        writer_times.append(writer_encode(tmp / f"encode_ds{r}", frames, n))
    bare = n / min(bare_times)
    total, ending = min(writer_times)
    rate = n / total
    section = f"1. RGB encode {WIDTH}x{HEIGHT}, {n} frames, best of {repeat}"
    return [
        Row(
            section,
            "writer (begin..end_episode)",
            f"{rate:8.1f} frames/s",
            f"end_episode {ending:.2f} s of {total:.2f} s",
        ),
        Row(section, "bare PyAV -> plain MP4", f"{bare:8.1f} frames/s"),
        Row(section, "ratio writer / bare", f"{rate / bare:8.2f}"),
    ]


# -- 2. step rate without cameras --------------------------------------------------


def writer_steps(root: Path, n: int) -> float:
    states, actions = state_cycle()
    with DatasetWriter(root, no_camera_manifest()) as writer:
        start = time.perf_counter()
        writer.begin_episode(TASK)
        for i in range(n):
            k = i % CYCLE
            writer.add_step(T0 + i / FPS, states[k], actions[k])
        writer.end_episode(success=True)
        return time.perf_counter() - start


def step_rows(manifest: Manifest) -> list[dict[str, list[float]]]:
    """The vector columns of a cycle of steps, as the writer stores them."""
    states, actions = state_cycle()
    rows = []
    for state, action in zip(states, actions, strict=True):
        row = {"action": action.astype(np.float32).tolist()}
        for name in manifest.observation_space.state:
            row[layout.state_column(name)] = state[name].astype(np.float32).tolist()
        rows.append(row)
    return rows


def ipc_append_steps(path: Path, n: int) -> float:
    """One RecordBatch per step appended (and flushed) to an Arrow IPC stream."""
    schema = step_schema(no_camera_manifest())
    rows = step_rows(no_camera_manifest())
    start = time.perf_counter()
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as stream:
        for i in range(n):
            columns: dict[str, list[object]] = {name: [value] for name, value in rows[i % CYCLE].items()}
            columns.update(
                episode_id=["episode_000000"],
                step_index=[i],
                timestamp=[i / FPS],
                is_first=[i == 0],
                is_last=[i == n - 1],
                is_terminal=[i == n - 1],
            )
            stream.write_batch(pa.RecordBatch.from_pydict(columns, schema=schema))
            sink.flush()
    return time.perf_counter() - start


def bulk_parquet_steps(path: Path, n: int) -> float:
    """The whole table built from numpy columns and written once (zstd, as the commit does)."""
    manifest = no_camera_manifest()
    schema = step_schema(manifest)
    rows = step_rows(manifest)
    start = time.perf_counter()
    picks = np.arange(n) % CYCLE
    arrays: dict[str, pa.Array] = {}
    for name in rows[0]:
        cycle = np.asarray([r[name] for r in rows], dtype=np.float32)
        values = cycle[picks]
        arrays[name] = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])
    last = np.arange(n) == n - 1
    arrays.update(
        episode_id=pa.array(["episode_000000"] * n, pa.string()),
        step_index=pa.array(np.arange(n, dtype=np.int64)),
        timestamp=pa.array(np.arange(n) / FPS),
        is_first=pa.array(np.arange(n) == 0),
        is_last=pa.array(last),
        is_terminal=pa.array(last),
    )
    table = pa.Table.from_pydict({name: arrays[name] for name in schema.names}, schema=schema)
    pq.write_table(table, path, compression="zstd")
    return time.perf_counter() - start


def bench_steps(tmp: Path, n: int, repeat: int) -> list[Row]:
    ipc_append_steps(tmp / "warmup.arrows", min(n, 1000))
    ipc_times, bulk_times, writer_times = [], [], []
    for r in range(repeat):
        ipc_times.append(ipc_append_steps(tmp / f"steps{r}.arrows", n))
        bulk_times.append(bulk_parquet_steps(tmp / f"steps{r}.parquet", n))
        writer_times.append(writer_steps(tmp / f"steps_ds{r}", n))
    ipc, bulk, rate = n / min(ipc_times), n / min(bulk_times), n / min(writer_times)
    section = f"2. steps, no cameras, {n} steps, best of {repeat}"
    return [
        Row(section, "writer (begin..end_episode)", f"{rate:8.0f} steps/s"),
        Row(section, "per-step Arrow IPC append+flush", f"{ipc:8.0f} steps/s"),
        Row(section, "ratio writer / IPC append", f"{rate / ipc:8.2f}"),
        Row(section, "bulk Parquet write (zstd)", f"{bulk:8.0f} steps/s", "lower bound, not streaming"),
    ]


# -- 3. peak RSS -------------------------------------------------------------------


class Panning:
    """A camera panning back and forth over a wider synthetic image.

    Each frame is a fresh contiguous copy of a window, so the frames cost no memory
    beyond one base image per camera (a pre-generated 640x480 cycle would add ~1 MB
    a frame to the RSS being measured).
    """

    def __init__(self, camera_number: int, pan: int = 2 * CYCLE) -> None:
        self.pan = pan
        self.base = demo_rgb(camera_number, 0, WIDTH + pan, HEIGHT)

    def frame(self, step: int) -> np.ndarray:
        phase = (2 * step) % (2 * self.pan)
        offset = phase if phase <= self.pan else 2 * self.pan - phase
        return np.ascontiguousarray(self.base[:, offset : offset + WIDTH])


def child_episode(root: Path, steps: int) -> None:
    """Runs in the measured child: write one two-camera episode, print a JSON summary."""
    manifest = demo_manifest(WIDTH, HEIGHT, FPS, depth=False)
    cameras = {key: Panning(n) for n, key in enumerate(manifest.cameras)}
    states, actions = state_cycle()
    baseline = psutil.Process().memory_info().rss
    with DatasetWriter(root, manifest) as writer:
        start = time.perf_counter()
        writer.begin_episode(TASK)
        for i in range(steps):
            k = i % CYCLE
            images = {key: cam.frame(i) for key, cam in cameras.items()}
            writer.add_step(T0 + i / FPS, states[k], actions[k], images)
        recorded = time.perf_counter()
        recording_hwm = peak_rss_with_encoders()
        writer.end_episode(success=True)
        end = time.perf_counter()
    summary = {
        "wall": end - start,
        "ending": end - recorded,
        "recording_hwm": recording_hwm,
        "baseline_rss": baseline,
        "hwm": peak_rss_with_encoders(),
        "bytes": dataset_bytes(root),
    }
    print(json.dumps(summary), flush=True)


@dataclass(frozen=True)
class RssResult:
    minutes: float
    steps: int
    wall: float
    ending: float
    recording_hwm_mb: float
    baseline_mb: float
    sampled_peak_mb: float
    sampled_pss_mb: float
    hwm_mb: float
    dataset_mb: float


def measure_child(tmp: Path, minutes: float) -> RssResult:
    steps = round(minutes * 60 * FPS)
    root = tmp / f"rss_{minutes:g}min"
    command = [sys.executable, str(Path(__file__).resolve()), "--child-episode", str(steps), "--child-root", str(root)]
    summary, peak, pss = run_measured_child(command, f"writing a {minutes:g} min episode")
    return RssResult(
        minutes=minutes,
        steps=steps,
        wall=summary["wall"],
        ending=summary["ending"],
        recording_hwm_mb=summary["recording_hwm"] / MB,
        baseline_mb=summary["baseline_rss"] / MB,
        sampled_peak_mb=peak / MB,
        sampled_pss_mb=pss / MB,
        hwm_mb=summary["hwm"] / MB,
        dataset_mb=summary["bytes"] / MB,
    )


def bench_rss(tmp: Path, minutes: list[float]) -> list[Row]:
    rows = []
    for m in minutes:
        r = measure_child(tmp, m)
        section = f"3. 2x RGB {WIDTH}x{HEIGHT} @ {FPS} fps, {m:g} min ({r.steps} steps, {2 * r.steps} frames)"
        # Judged on PSS: the child and its encoder processes map the same libraries and
        # frame rings, which a sum of their RSS counts once per process.
        verdict = "OK" if r.sampled_pss_mb < RSS_TARGET_MB else "OVER"
        rows += [
            Row(
                section,
                "peak PSS (child + encoders, sampled 50 ms)",
                f"{r.sampled_pss_mb:8.1f} MB",
                f"target < {RSS_TARGET_MB:.0f} MB: {verdict}; shared pages counted once",
            ),
            Row(
                section,
                "peak RSS (VmHWM, child + encoders)",
                f"{r.hwm_mb:8.1f} MB",
                f"upper bound: shared pages counted per process; sampled 50 ms: {r.sampled_peak_mb:.1f} MB; "
                f"before episode {r.baseline_mb:.1f} MB, before end_episode {r.recording_hwm_mb:.1f} MB",
            ),
            Row(
                section,
                "wall time (begin..end_episode)",
                f"{r.wall:8.1f} s",
                f"{r.steps / r.wall / FPS:.2f}x real time; end_episode {r.ending:.1f} s",
            ),
            Row(section, "dataset size", f"{r.dataset_mb:8.1f} MB"),
        ]
    return rows


# -- table -------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="RSS episodes of 1 and 2 minutes instead of 1 and 10")
    parser.add_argument("--frames", type=int, default=900, help="frames encoded in section 1 (default 900)")
    parser.add_argument("--steps", type=int, default=20_000, help="steps written in section 2 (default 20000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of sections 1 and 2, best kept (default 3)")
    parser.add_argument("--skip-rss", action="store_true", help="skip section 3 (the slow one)")
    parser.add_argument("--child-episode", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child_episode is not None:
        if args.child_root is None:
            parser.error("--child-episode needs --child-root")
        child_episode(args.child_root, args.child_episode)
        return

    print(f"ortf_ros writer benchmark: {os.cpu_count()} CPUs, PyAV {av.__version__}, pyarrow {pa.__version__}")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="ortf_bench_") as tmp_name:
        tmp = Path(tmp_name)
        rows += bench_encode(tmp, args.frames, args.repeat)
        rows += bench_steps(tmp, args.steps, args.repeat)
        if not args.skip_rss:
            rows += bench_rss(tmp, [1.0, 2.0] if args.quick else [1.0, 10.0])
    print_table(rows)


if __name__ == "__main__":
    main()
