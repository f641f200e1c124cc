"""Speed and memory of ``ortf-bag2ortf`` (``convert_recording``) against the floor under it.

Prints one table:

0. The generated bags (MCAP, rosbag2 directories) and how long they took to generate.
   They are cached under ``.cache/bench/`` keyed by their parameters and by a hash of
   the generator's modules (``ortf_ros/synthetic/*.py``), so a second run skips generation.
1. Conversion speed, per x264 preset (ultrafast, veryfast), of a 60 s bag with two
   640x480 @ 30 fps rgb8 cameras, JointState @ 500 Hz, WrenchStamped @ 1 kHz,
   TF @ 100 Hz, a 50 Hz joint command and camera_info (no depth camera), as a multiple
   of real time:
   - the converter: ``convert_recording`` with the automatic mapping, as
     ``ortf-bag2ortf BAG -o DATASET`` runs it, ``writer.video.preset`` set;
   - the floor, measured in the same run: the bag's raw bytes read with
     ``BagSource.messages`` (every topic, once) and the same frames encoded by bare PyAV
     with the same ``VideoSettings`` (the encoder threads the writer gives each camera
     included), one process per camera so both cores work (each
     reads its camera's raw ``Image`` bytes, and a share of the other topics);
   - the ratio converter / floor (target <= 1.15).
   The floor converts RGB to yuv420p as PyAV's encode does (swscale); the converter's
   encoders use ``io.colour`` (OpenCV), which costs about half as much. The section
   ends with both on one of the bag's frames, one thread, so that difference is seen.
2. Peak RSS of a child process converting a 1-minute and a 10-minute bag (target
   < 500 MB, and within 10 % between the two). These bags publish the cameras as JPEG
   ``CompressedImage`` (raw rgb8 640x480 is ~35 MB/s of bag: 10 minutes would be ~40 GB).

``--profile`` instead runs one conversion at ultrafast under cProfile and prints where
its time goes beyond the floor (read, decode, extract, assemble, writer, commit).

Run from the repository root::

    .venv/bin/python bench/bench_bag2ortf.py            # full: 60 s bag; 1 and 10 minute RSS bags
    .venv/bin/python bench/bench_bag2ortf.py --quick    # 10 s bag; 1 and 2 minute RSS bags
    .venv/bin/python bench/bench_bag2ortf.py --profile  # where the converter's time goes

Nothing here asserts on timings; the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import hashlib
import importlib
import json
import multiprocessing
import os
import pstats
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import av
import numpy as np
import psutil
from measure import MB, Row, bare_video_stream, peak_rss_with_encoders, print_table, run_measured_child

import ortf_ros.synthetic as synthetic
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.io.video import VideoSettings
from ortf_ros.pipeline.mapping import StepClock, TopicMapping, detect_mapping, with_writer
from ortf_ros.pipeline.offline import ConversionResult, convert_recording, converter_writer_config
from ortf_ros.pipeline.samples import Payload
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.scene import START_NS
from ortf_ros.synthetic.topics import CAMERAS

WIDTH, HEIGHT, FPS = 640, 480, 30
JOINT_HZ, WRENCH_HZ, TF_HZ, COMMAND_HZ = 500, 1000, 100, 50
PRESETS = ("ultrafast", "veryfast")
RATIO_TARGET = 1.15
RSS_TARGET_MB = 500.0
RSS_GROWTH_TARGET = 0.10
REPO = Path(__file__).resolve().parents[1]
DEFAULT_CACHE = REPO / ".cache" / "bench"


# -- bags ----------------------------------------------------------------------------


def generator_hash() -> str:
    """Short hash of the generator's source (every module of ``ortf_ros.synthetic``): a
    changed generator makes new bags."""
    digest = hashlib.sha256()
    for module in sorted(Path(synthetic.__file__).parent.glob("*.py")):
        digest.update(module.read_bytes())
    return digest.hexdigest()[:10]


@dataclass(frozen=True)
class BagSpec:
    duration_s: float
    compressed: bool  # cameras as JPEG CompressedImage instead of raw rgb8 Image
    start_s: float = 0.0  # stamps this much later: recordings of the same scene that differ in content

    @property
    def key(self) -> str:
        cameras = "jpeg" if self.compressed else "rgb8"
        start = f"-at{self.start_s:g}s" if self.start_s else ""
        return (
            f"teleop-mcap-{self.duration_s:g}s-2x{WIDTH}x{HEIGHT}@{FPS}-{cameras}-nodepth"
            f"-js{JOINT_HZ}-ft{WRENCH_HZ}-tf{TF_HZ}-cmd{COMMAND_HZ}{start}-g{generator_hash()}"
        )

    @property
    def length(self) -> str:
        return f"{self.duration_s / 60:g} min" if self.duration_s > 60 else f"{self.duration_s:g} s"

    @property
    def cameras(self) -> str:
        return "JPEG CompressedImage" if self.compressed else "raw rgb8 Image"

    def write(self, path: Path) -> None:
        write_teleop_bag(
            path,
            "mcap",
            duration_s=self.duration_s,
            width=WIDTH,
            height=HEIGHT,
            fps=FPS,
            joint_rate_hz=JOINT_HZ,
            command_rate_hz=COMMAND_HZ,
            wrench_rate_hz=WRENCH_HZ,
            tf_rate_hz=TF_HZ,
            with_depth=False,
            compressed=self.compressed,
            start_ns=START_NS + round(self.start_s * 1e9),
        )


@dataclass(frozen=True)
class CachedBag:
    spec: BagSpec
    path: Path  # the rosbag2 directory
    generated_now: bool
    generation_s: float
    size_bytes: int
    messages: int
    duration_s: float  # first to last receive time


def _bag_facts(path: Path) -> tuple[int, int, float]:
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    with BagSource(path) as source:
        return size, source.message_count, source.duration


def prune_cache(cache: Path) -> list[str]:
    """Remove bags made by another version of the generator, and leftovers of killed runs."""
    removed = []
    current = f"-g{generator_hash()}"
    for entry in sorted(cache.glob("teleop-*")) if cache.is_dir() else []:
        if not entry.name.endswith(current):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
    for entry in sorted(cache.glob(".tmp-*")) if cache.is_dir() else []:
        pid = entry.name.split("-")[1]
        if not (pid.isdigit() and psutil.pid_exists(int(pid))):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
    return removed


def ensure_bag(cache: Path, spec: BagSpec) -> CachedBag:
    """The cached bag for ``spec``, generated (into a temporary directory, then renamed) if missing."""
    entry = cache / spec.key
    info_file = entry / "info.json"
    generated_now = False
    if not info_file.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-", dir=cache))
        try:
            start = time.perf_counter()
            spec.write(tmp / "bag")
            generation_s = time.perf_counter() - start
            size, messages, duration = _bag_facts(tmp / "bag")
            facts = {"generation_s": generation_s, "size_bytes": size, "messages": messages, "duration_s": duration}
            (tmp / "info.json").write_text(json.dumps(facts))
            try:
                tmp.rename(entry)
                generated_now = True
            except OSError:  # another run cached it meanwhile
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    facts = json.loads(info_file.read_text())
    return CachedBag(
        spec=spec,
        path=entry / "bag",
        generated_now=generated_now,
        generation_s=facts["generation_s"],
        size_bytes=facts["size_bytes"],
        messages=facts["messages"],
        duration_s=facts["duration_s"],
    )


BAG_CONTENT = (
    f"{len(CAMERAS)} cameras {WIDTH}x{HEIGHT} @ {FPS} fps, JointState {JOINT_HZ} Hz, WrenchStamped "
    f"{WRENCH_HZ / 1000:g} kHz, TF {TF_HZ} Hz, JointState command {COMMAND_HZ} Hz, camera_info, URDF; no depth camera"
)


def bag_rows(bags: Iterable[CachedBag], cache: Path, removed: list[str]) -> list[Row]:
    section = f"0. generated bags (MCAP, uncompressed, cached in {_shown(cache)}): {BAG_CONTENT}"
    rows = []
    for bag in bags:
        how = "generated in this run" if bag.generated_now else "cached: not generated in this run"
        rows.append(
            Row(
                section,
                f"{bag.spec.length}, cameras as {bag.spec.cameras}",
                f"{bag.generation_s:8.1f} s",
                f"generation time, {how}; {bag.size_bytes / MB:,.0f} MB, {bag.messages:,} messages",
            )
        )
    if removed:
        rows.append(Row(section, "stale cache entries removed", f"{len(removed):8d}", ", ".join(removed)))
    return rows


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def video_settings(preset: str) -> VideoSettings:
    """What the converter encodes with: the writer's defaults with ``preset``."""
    return WriterConfig.from_mapping({"video": {"preset": preset}}, "bench").video


# -- 1. the converter -------------------------------------------------------------------


def converter_writer(preset: str) -> WriterConfig:
    """A conversion's writer settings, as a mapping whose ``writer:`` gives ``video.preset`` has them."""
    return converter_writer_config(with_writer(TopicMapping(), {"video": {"preset": preset}}, "bench"))


def convert(bag: Path, output: Path, preset: str | None) -> ConversionResult:
    """What ``ortf-bag2ortf BAG -o OUTPUT`` does: the automatic mapping, then one conversion."""
    writer = None if preset is None else converter_writer(preset)
    with BagSource(bag) as source:
        return convert_recording(source, output, detect_mapping(source.topics()), writer_config=writer)


@dataclass(frozen=True, order=True)
class ConverterRun:
    seconds: float
    own_cpu: float  # this process (reading, the pipeline, the writer)
    encoder_cpu: tuple[float, ...]  # each encoder process (they are reused from run to run)


def timed_convert(bag: Path, output: Path, preset: str) -> ConverterRun:
    """One conversion's wall time, and where its CPU went: what the converter costs beyond
    the floor's encoding is this process's CPU and what the encoder processes use beyond
    the floor's processes (the ratio follows their sum, on two cores)."""
    this = psutil.Process()
    before = {child.pid: sum(child.cpu_times()[:2]) for child in this.children()}
    own = time.process_time()
    start = time.perf_counter()
    convert(bag, output, preset)
    elapsed = time.perf_counter() - start
    own = time.process_time() - own
    encoders = tuple(sum(child.cpu_times()[:2]) - before.get(child.pid, 0.0) for child in this.children())
    shutil.rmtree(output)
    return ConverterRun(elapsed, own, encoders)


# -- 1. the floor -------------------------------------------------------------------------


@dataclass(frozen=True)
class FloorTask:
    bag: str
    camera_topic: str
    other_topics: tuple[str, ...]  # read (bytes touched) but not used
    output: str
    settings: VideoSettings


@dataclass(frozen=True)
class FloorResult:
    frames: int
    messages: int
    seconds: float  # this process, from the barrier to the closed MP4
    encode_seconds: float  # of which from_ndarray + encode + mux


_BARRIER: Barrier | None = None


def _floor_init(barrier: Barrier) -> None:
    global _BARRIER
    _BARRIER = barrier


def _floor_ready(_: int) -> int:
    """Returns once every worker is up (each holds one of these until all have arrived)."""
    assert _BARRIER is not None
    _BARRIER.wait()
    return os.getpid()


def image_pixels(data: Payload, width: int, height: int) -> np.ndarray:
    """The rgb8 pixels of a CDR ``sensor_msgs/Image`` without deserializing it.

    ``data`` is the message's last field: a uint32 length, then the bytes, at the end of
    the buffer. The length is checked, so a message laid out otherwise is an error.
    """
    size = width * height * 3
    offset = len(data) - size
    if offset < 4 or struct.unpack_from("<I", data, offset - 4)[0] != size:
        raise RuntimeError(f"not a {width}x{height} rgb8 CDR Image with the pixels last ({len(data)} bytes)")
    return np.frombuffer(data, dtype=np.uint8, count=size, offset=offset).reshape(height, width, 3)


def floor_camera(task: FloorTask) -> FloorResult:
    """One floor process: read this camera's raw Image bytes (and some other topics), encode them."""
    assert _BARRIER is not None
    _BARRIER.wait()  # both processes start together, one task each
    start = time.perf_counter()
    settings = task.settings
    encode = 0.0
    frames = messages = 0
    with (
        BagSource(Path(task.bag)) as source,
        av.open(task.output, "w", format="mp4") as container,
    ):
        stream, time_base = bare_video_stream(container, settings, WIDTH, HEIGHT, FPS)
        touched = 0
        for raw in source.messages({task.camera_topic, *task.other_topics}):
            messages += 1
            if raw.topic != task.camera_topic:
                touched += len(raw.data)
                continue
            pixels = image_pixels(raw.data, WIDTH, HEIGHT)
            began = time.perf_counter()
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts = frames
            frame.time_base = time_base
            container.mux(stream.encode(frame))
            encode += time.perf_counter() - began
            frames += 1
        began = time.perf_counter()
        container.mux(stream.encode(None))
    encode += time.perf_counter() - began
    return FloorResult(frames, messages, time.perf_counter() - start, encode)


class Floor:
    """A pool of one spawned process per camera, up and importing before anything is timed."""

    def __init__(self, cameras: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.cameras = cameras
        barrier = context.Barrier(cameras)
        self.pool = context.Pool(cameras, initializer=_floor_init, initargs=(barrier,))
        pids = self.pool.map(_floor_ready, range(cameras), chunksize=1)
        assert len(set(pids)) == cameras

    def close(self) -> None:
        self.pool.close()
        self.pool.join()

    def run(self, bag: Path, out: Path, settings: VideoSettings) -> tuple[float, list[FloorResult]]:
        """(wall seconds for all cameras, each process's result)."""
        with BagSource(bag) as source:
            topics = [t.topic for t in source.topics() if t.count]
        cameras = [t for t in topics if t in CAMERAS]
        assert len(cameras) == self.cameras, f"{bag}: expected {self.cameras} raw cameras, found {cameras}"
        others = [t for t in topics if t not in CAMERAS]
        threaded = settings.with_threads(len(cameras))  # the encoder threads the writer gives each camera
        tasks = [
            FloorTask(str(bag), cam, tuple(others[i :: len(cameras)]), str(out / f"floor_{i}.mp4"), threaded)
            for i, cam in enumerate(cameras)
        ]
        start = time.perf_counter()
        results = self.pool.map(floor_camera, tasks, chunksize=1)
        wall = time.perf_counter() - start
        for task in tasks:
            Path(task.output).unlink()
        return wall, results


def colour_rows(bag: Path, section: str) -> list[Row]:
    """RGB to yuv420p per frame, on the bag's first frame, one thread: swscale as PyAV's
    encode calls it (the floor's), and ``io.colour`` (the converter's encoders')."""
    # Imported here: section 2's measured child imports this script, and OpenCV is in no
    # process of the converter's but the encoders'.
    import cv2

    from ortf_ros.io.colour import I420Converter

    with BagSource(bag) as source:
        first = next(source.messages({next(iter(CAMERAS))}))
        pixels = image_pixels(first.data, WIDTH, HEIGHT).copy()
    rgb = av.VideoFrame.from_numpy_buffer(pixels, format="rgb24")
    converter = I420Converter(WIDTH, HEIGHT)
    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)  # as in the encoder processes
    try:
        swscale = _per_call(lambda: rgb.reformat(format="yuv420p", threads=1))
        ours = _per_call(lambda: converter.convert(pixels))
    finally:
        cv2.setNumThreads(threads)
    size = f"{WIDTH}x{HEIGHT}, best of 5"
    return [
        Row(section, "swscale (PyAV's encode; the floor)", f"{1e3 * swscale:8.2f} ms", size),
        Row(section, "io.colour (OpenCV; the converter)", f"{1e3 * ours:8.2f} ms", f"{ours / swscale:.2f} x swscale"),
    ]


def _per_call(call: Callable[[], object], calls: int = 200) -> float:
    """Best of 5 rounds: CPU seconds per call (in this thread)."""
    rounds = []
    for _ in range(5):
        began = time.thread_time()
        for _ in range(calls):
            call()
        rounds.append((time.thread_time() - began) / calls)
    return min(rounds)


def read_all(bag: Path) -> tuple[float, int, int]:
    """One process reading every message's raw bytes: (seconds, messages, bytes)."""
    start = time.perf_counter()
    count = size = 0
    with BagSource(bag) as source:
        for raw in source.messages():
            count += 1
            size += len(raw.data)
    return time.perf_counter() - start, count, size


def salvage_rows(bag: CachedBag, tmp: Path) -> list[Row]:
    """Reading a recording cut short (a copy of the speed bag cut at 90 %: no summary, no
    footer, the last chunk cut off) against the floor under it: the intact file's indexed
    read of every message, per message."""
    section = f"1. reading a copy of the {bag.spec.length} bag cut short"
    (storage,) = bag.path.glob("*.mcap")
    size = storage.stat().st_size
    cut = tmp / "cut.mcap"
    with storage.open("rb") as src, cut.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 24)
        dst.truncate(size * 9 // 10)
    read_all(cut)  # page cache
    salvaged_s, salvaged, _ = read_all(cut)
    intact_s, intact, _ = read_all(storage)
    cut.unlink()
    per_salvaged, per_intact = salvaged_s / salvaged, intact_s / intact
    return [
        Row(section, "cut at 90 %: walk (mcap StreamReader) + read", f"{salvaged_s:8.2f} s", f"{salvaged:,} messages"),
        Row(section, "intact file, from its summary (the floor)", f"{intact_s:8.2f} s", f"{intact:,} messages"),
        Row(section, "per message, cut / intact", f"{per_salvaged / per_intact:8.2f} x", ""),
    ]


@dataclass
class SpeedRuns:
    converter: dict[str, list[ConverterRun]] = field(default_factory=dict)
    floor: dict[str, list[tuple[float, list[FloorResult]]]] = field(default_factory=dict)
    read: list[tuple[float, int, int]] = field(default_factory=list)


def measure_speed(bag: CachedBag, tmp: Path, repeat: int, presets: tuple[str, ...]) -> SpeedRuns:
    runs = SpeedRuns()
    floor = Floor(len(CAMERAS))
    try:
        read_all(bag.path)  # warm up: page cache
        # Interleaved, best of `repeat`: other load on the machine only ever slows a run down.
        for _ in range(repeat):
            runs.read.append(read_all(bag.path))
            for preset in presets:
                runs.floor.setdefault(preset, []).append(floor.run(bag.path, tmp, video_settings(preset)))
                runs.converter.setdefault(preset, []).append(timed_convert(bag.path, tmp / "dataset", preset))
    finally:
        floor.close()
    return runs


def speed_rows(bag: CachedBag, runs: SpeedRuns, repeat: int) -> list[Row]:
    length = bag.spec.length
    real = bag.duration_s
    frames = round(bag.spec.duration_s * FPS) * len(CAMERAS)
    read_s, messages, size = min(runs.read)
    rows = []
    for preset, times in runs.converter.items():
        section = f"1. convert the {length} bag (cameras as {bag.spec.cameras}), x264 {preset}, best of {repeat}"
        best = min(times)
        converter = best.seconds
        floor_wall, results = min(runs.floor[preset], key=lambda r: r[0])
        encoded = sum(r.frames for r in results)
        if encoded != frames:
            raise SystemExit(f"the floor encoded {encoded} frames, the bag has {frames}")
        per_process = ", ".join(f"{r.seconds:.1f} s ({r.encode_seconds:.1f} s encoding)" for r in results)
        ratio = converter / floor_wall
        verdict = "OK" if ratio <= RATIO_TARGET else "OVER"
        rows += [
            Row(
                section,
                "converter (convert_recording, auto mapping)",
                f"{real / converter:8.2f}x real time",
                f"{converter:.1f} s for {real:.1f} s of recording; CPU {best.own_cpu:.1f} s in its own process, "
                + ", ".join(f"{cpu:.1f} s" for cpu in best.encoder_cpu if cpu > 0.05)
                + " in the encoder processes",
            ),
            Row(
                section,
                f"floor: read + bare PyAV, {len(results)} processes",
                f"{real / floor_wall:8.2f}x real time",
                f"{floor_wall:.1f} s; per process {per_process}",
            ),
            Row(section, "ratio converter / floor (time)", f"{ratio:8.2f}", f"target <= {RATIO_TARGET}: {verdict}"),
        ]
    section = f"1. reading the {length} bag alone, best of {repeat}"
    rows.append(
        Row(
            section,
            "BagSource.messages(), every topic, 1 process",
            f"{real / read_s:8.0f}x real time",
            f"{read_s:.2f} s; {messages:,} messages, {size / MB:,.0f} MB ({size / MB / read_s:,.0f} MB/s, page cache)",
        )
    )
    return rows + colour_rows(bag.path, "1. colour conversion, RGB to yuv420p, CPU per frame (one thread)")


# -- 2. peak RSS -------------------------------------------------------------------------


def child_convert(bag: Path, root: Path) -> None:
    """Runs in the measured child: convert one bag with the writer's defaults, print a JSON summary."""
    # The high-water mark when end_episode starts: the streaming pass's peak, before the commit's.
    streaming_hwm: list[int] = []
    end_episode = DatasetWriter.end_episode

    def recording_end_episode(self: DatasetWriter, *args: Any, **kwargs: Any) -> Any:
        streaming_hwm.append(peak_rss_with_encoders())
        return end_episode(self, *args, **kwargs)

    DatasetWriter.end_episode = recording_end_episode  # type: ignore[method-assign]
    baseline = psutil.Process().memory_info().rss
    start = time.perf_counter()
    result = convert(bag, root, None)
    wall = time.perf_counter() - start
    summary = {
        "wall": wall,
        "baseline_rss": baseline,
        "streaming_hwm": streaming_hwm[0] if streaming_hwm else 0,
        "hwm": peak_rss_with_encoders(),
        "steps": sum(e.length for e in result.episodes),
        "recording_seconds": result.recording_seconds,
        "bytes": sum(p.stat().st_size for p in root.rglob("*") if p.is_file()),
    }
    print(json.dumps(summary), flush=True)


@dataclass(frozen=True)
class RssResult:
    bag: CachedBag
    wall: float
    steps: int
    recording_seconds: float
    baseline_mb: float
    streaming_hwm_mb: float
    sampled_peak_mb: float
    sampled_pss_mb: float
    hwm_mb: float
    dataset_mb: float


def measure_child(bag: CachedBag, tmp: Path) -> RssResult:
    root = tmp / f"rss_{bag.spec.duration_s:g}s"
    script = str(Path(__file__).resolve())
    command = [sys.executable, script, "--child-convert", str(bag.path), "--child-root", str(root)]
    summary, peak, pss = run_measured_child(command, f"converting {bag.path}")
    shutil.rmtree(root)
    return RssResult(
        bag=bag,
        wall=summary["wall"],
        steps=summary["steps"],
        recording_seconds=summary["recording_seconds"],
        baseline_mb=summary["baseline_rss"] / MB,
        streaming_hwm_mb=summary["streaming_hwm"] / MB,
        sampled_peak_mb=peak / MB,
        sampled_pss_mb=pss / MB,
        hwm_mb=summary["hwm"] / MB,
        dataset_mb=summary["bytes"] / MB,
    )


def rss_rows(results: list[RssResult]) -> list[Row]:
    preset = VideoSettings().preset
    rows = []
    for r in results:
        section = (
            f"2. peak RSS converting the {r.bag.spec.length} bag (cameras as {r.bag.spec.cameras}: "
            f"raw would be ~35 MB/s of bag), writer defaults (x264 {preset})"
        )
        verdict = "OK" if r.hwm_mb < RSS_TARGET_MB else "OVER"
        rows += [
            Row(
                section,
                "peak RSS (VmHWM, child + encoders)",
                f"{r.hwm_mb:8.1f} MB",
                f"target < {RSS_TARGET_MB:.0f} MB: {verdict}; "
                f"sampled 50 ms: RSS {r.sampled_peak_mb:.1f} MB, PSS {r.sampled_pss_mb:.1f} MB; "
                f"after imports {r.baseline_mb:.1f} MB, before end_episode {r.streaming_hwm_mb:.1f} MB",
            ),
            Row(
                section,
                "wall time",
                f"{r.wall:8.1f} s",
                f"{r.recording_seconds / r.wall:.2f}x real time; {r.steps} steps; dataset {r.dataset_mb:.1f} MB",
            ),
        ]
    if len(results) == 2:
        short, long = results
        growth = long.hwm_mb / short.hwm_mb - 1
        verdict = "OK" if abs(growth) <= RSS_GROWTH_TARGET else "OVER"
        section = "2. peak RSS, long bag vs short bag"
        rows.append(
            Row(
                section,
                f"change {short.bag.spec.length} -> {long.bag.spec.length}",
                f"{100 * growth:+8.1f} %",
                f"target within {100 * RSS_GROWTH_TARGET:.0f} %: {verdict}",
            )
        )
    return rows


# -- profile ------------------------------------------------------------------------------

_Key = tuple[str, int, str]  # pstats: (file, first line, function); file "~" for C functions
# The functions each stage is timed by; they do not call each other, so their times add up.
READ = ["ortf_ros.pipeline.sources.bag:BagSource._messages"]
SAMPLES = ["ortf_ros.pipeline.fastpath:SampleDecoder.samples", "ortf_ros.pipeline.fastpath:SampleDecoder.block"]
ASSEMBLE = [
    "ortf_ros.pipeline.assembly.assembler:Assembler.feed",
    "ortf_ros.pipeline.assembly.assembler:Assembler.emit_ready",
    "ortf_ros.pipeline.assembly.assembler:Assembler.finish",
]
ADD_FRAME = ["ortf_ros.dataset.writer:DatasetWriter.add_frame"]
ADD_SAMPLES = ["ortf_ros.dataset.writer:DatasetWriter.add_samples"]
ADD_STEP = ["ortf_ros.dataset.writer:DatasetWriter.add_step"]
END_EPISODE = ["ortf_ros.dataset.writer:DatasetWriter.end_episode"]
TOTAL = ["ortf_ros.pipeline.offline:convert_recording"]


def _profile_key(spec: str) -> _Key | None:
    """The pstats key of ``module:qualified.name``, from its code object (None if it is gone)."""
    module, _, qualname = spec.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    code = getattr(obj, "__code__", None)
    return None if code is None else (code.co_filename, code.co_firstlineno, code.co_name)


def _cumulative(stats: dict[_Key, Any], wanted: list[str]) -> tuple[float, int]:
    """Cumulative time and calls of the ``wanted`` functions, counting only calls from outside them."""
    keys = {key for spec in wanted if (key := _profile_key(spec)) is not None}
    if len(keys) < len(wanted):
        print(f"  (not found, timed as 0: {[spec for spec in wanted if _profile_key(spec) is None]})")
    total, calls = 0.0, 0
    for key in keys & stats.keys():
        for caller, (_, ncalls, _, cumtime) in stats[key][4].items():
            if caller not in keys:
                total += cumtime
                calls += ncalls
    return total, calls


def profile(bag: CachedBag, tmp: Path, top: int) -> None:
    """One conversion at ultrafast under cProfile, its stages set against the floor."""
    preset = "ultrafast"
    settings = video_settings(preset)
    print(f"profile: one conversion of the {bag.spec.length} bag ({bag.spec.cameras}) at x264 {preset}")
    floor = Floor(len(CAMERAS))
    try:
        read_all(bag.path)  # page cache
        floor_wall, results = floor.run(bag.path, tmp, settings)
    finally:
        floor.close()
    read_s, _, _ = read_all(bag.path)
    main_thread = time.thread_time()
    plain = timed_convert(bag.path, tmp / "plain", preset).seconds
    main_thread = time.thread_time() - main_thread
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    convert(bag.path, tmp / "profiled", preset)
    profiler.disable()
    profiled = time.perf_counter() - start
    shutil.rmtree(tmp / "profiled")
    out = REPO / ".cache" / "bench" / f"bag2ortf-{preset}.prof"
    out.parent.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(str(out))
    stats: dict[_Key, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]

    real = bag.duration_s
    print(
        f"\n  converter, no profiler        {plain:7.2f} s  {real / plain:6.2f}x real time; its main thread (the "
        f"Python pipeline) used {main_thread:.2f} s of CPU, the encoder processes the rest"
    )
    print(f"  converter under cProfile      {profiled:7.2f} s  (the profiler inflates the many small Python calls)")
    print(
        f"  floor ({len(results)} processes)           {floor_wall:7.2f} s  {real / floor_wall:6.2f}x real time "
        f"(encoding {' + '.join(f'{r.encode_seconds:.2f}' for r in results)} s)"
    )

    total, _ = _cumulative(stats, TOTAL)
    frame, frames = _cumulative(stats, ADD_FRAME)
    samples, batches = _cumulative(stats, ADD_SAMPLES)
    step, steps = _cumulative(stats, ADD_STEP)
    assemble, feeds = _cumulative(stats, ASSEMBLE)
    rows: list[tuple[str, float, int, float]] = [
        ("read: BagSource.messages (rosbags, merge)", *_cumulative(stats, READ), read_s),
        ("samples: decode -> extract, fast path, blocks", *_cumulative(stats, SAMPLES), 0.0),
        ("assemble: Assembler feed/emit/finish, own", assemble - frame - samples - step, feeds, 0.0),
        ("writer.add_frame (copy, queue to an encoder)", frame, frames, 0.0),
        ("writer.add_samples (native-rate rows)", samples, batches, 0.0),
        ("writer.add_step (step rows)", step, steps, 0.0),
        ("writer.end_episode (close, remux, commit)", *_cumulative(stats, END_EPISODE), 0.0),
    ]
    rows.append(("other (open, mapping, manifest, glue)", total - sum(r[1] for r in rows), 1, 0.0))
    print(
        f"\n  {'main thread, by stage (cumulative s, cProfile)':<46} {'seconds':>8} {'share':>6} {'calls':>8}"
        f"  {'floor':>6} {'beyond':>7}"
    )
    for label, seconds, calls, floor_s in rows:
        share = 100 * seconds / total
        print(f"  {label:<46} {seconds:8.2f} {share:5.1f}% {calls:8,}  {floor_s:6.2f} {seconds - floor_s:7.2f}")
    print(f"  {'total: convert_recording':<46} {total:8.2f} {100:5.1f}%")
    print(
        "  (cProfile sees the main thread only: the encoding runs in one process per camera, as the floor's runs in\n"
        "  one process per camera. Floor column: the floor's read, in one process.)"
    )
    print_cpu_by_mapping(bag.path, tmp, preset)
    print(f"\n  top {top} functions by self time")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(top)
    print(f"  full profile: {_shown(out)}  (python -m pstats, or snakeviz)")


def print_cpu_by_mapping(bag: Path, tmp: Path, preset: str) -> None:
    """The main thread's CPU without a profiler, with parts of the mapping left out: what
    each part costs, undistorted by cProfile (best of 2 each)."""
    with BagSource(bag) as source:
        full = detect_mapping(source.topics())
    variants = {
        "the automatic mapping": full,
        "without the cameras (steps at 30 Hz)": replace(full, cameras=(), step=StepClock(rate_hz=30.0)),
        "without TF (no end-effector pose)": replace(full, tf_topics=()),
    }
    writer = converter_writer(preset)
    print(f"\n  {'main thread CPU, parts of the mapping left out':<46} {'seconds':>8}  (no profiler, best of 2)")
    for label, config in variants.items():
        spent = []
        for _ in range(2):
            output = tmp / "by-mapping"
            began = time.thread_time()
            convert_recording([bag], output, config, writer_config=writer)
            spent.append(time.thread_time() - began)
            shutil.rmtree(output)
        print(f"  {label:<46} {min(spent):8.2f}")


# -- table -------------------------------------------------------------------------------


class ForeignLoad:
    """CPU used by processes other than this one and its children while the benchmark runs.

    Other work on the machine slows runs down; best of N hides some of it, this says how much there was.
    """

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.system = self._busy()
        self.own = self._own()

    @staticmethod
    def _busy() -> float:
        t = psutil.cpu_times()
        return float(t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0))

    @staticmethod
    def _own() -> float:
        """This process's CPU, its reaped children's, and that of its descendants still alive (encoder processes)."""
        this = psutil.Process()
        t = this.cpu_times()
        alive = 0.0
        for child in this.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                c = child.cpu_times()
                alive += c.user + c.system
        return float(t.user + t.system + t.children_user + t.children_system + alive)

    def line(self) -> str:
        wall = time.perf_counter() - self.start
        foreign = (self._busy() - self.system) - (self._own() - self.own)
        return (
            f"other processes used {max(0.0, foreign) / wall:.2f} CPUs on average during this {wall / 60:.1f} min run "
            f"(of {os.cpu_count()}); load average now {os.getloadavg()[0]:.2f}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help="a 10 s bag, and RSS bags of 1 and 2 min (not 60 s; 1, 10)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of section 1, best kept (default 3)")
    parser.add_argument("--skip-rss", action="store_true", help="skip section 2 (the slow one)")
    parser.add_argument("--profile", action="store_true", help="profile one conversion at ultrafast instead")
    parser.add_argument("--top", type=int, default=25, help="functions listed by --profile (default 25)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="where generated bags are kept")
    parser.add_argument("--child-convert", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child_convert is not None:
        if args.child_root is None:
            parser.error("--child-convert needs --child-root")
        child_convert(args.child_convert, args.child_root)
        return

    cache: Path = args.cache_dir.resolve()
    removed = prune_cache(cache)
    speed_spec = BagSpec(10.0 if args.quick else 60.0, compressed=False)
    rss_specs = [BagSpec(60.0, compressed=True), BagSpec(120.0 if args.quick else 600.0, compressed=True)]
    print(
        f"ortf_ros bag2ortf benchmark: {os.cpu_count()} CPUs, PyAV {av.__version__}, rosbags {version('rosbags')}, "
        f"Python {sys.version.split()[0]}"
    )
    load = ForeignLoad()
    with tempfile.TemporaryDirectory(prefix="ortf_bench_") as tmp_name:
        tmp = Path(tmp_name)
        if args.profile:
            profile(ensure_bag(cache, speed_spec), tmp, args.top)
            print(load.line())
            return
        bags = [ensure_bag(cache, speed_spec)]
        if not args.skip_rss:
            bags += [ensure_bag(cache, spec) for spec in rss_specs]
        rows = bag_rows(bags, cache, removed)
        runs = measure_speed(bags[0], tmp, args.repeat, PRESETS)
        rows += speed_rows(bags[0], runs, args.repeat)
        rows += salvage_rows(bags[0], tmp)
        if not args.skip_rss:
            rows += rss_rows([measure_child(bag, tmp) for bag in bags[1:]])
    print_table(rows)
    print(f"\n{load.line()}")


if __name__ == "__main__":
    main()
