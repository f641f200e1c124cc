"""Publishing rate, jitter and top speed of ``ortf_player`` over loopback DDS.

Prints one table:

0. The dataset: the 60 s teleop bag that ``bench_bag2ortf.py`` caches for its RSS
   section (two 640x480 @ 30 fps cameras, JointState 500 Hz, WrenchStamped 1 kHz, TF,
   a 50 Hz command), converted once by ``ortf-bag2ortf`` and cached in ``.cache/bench/``.
   The player publishes per step (30 Hz) JointState, TF, the action, and both cameras
   as raw rgb8 ``Image`` (2 x 0.9 MB) with ``CameraInfo``, and every 1 kHz wrench sample.
1. At 1x, for ``--seconds`` of playback (default 20), measured by a subscriber in a
   separate process (raw CDR, header stamps read from the bytes):
   - achieved rate: the stamps' span over the arrivals' span, against the requested 1.0;
   - inter-message jitter: for consecutive messages of a topic, |arrival interval -
     stamp interval|; p50, p99 and max per stream and over all (target p99 < 5 ms).
2. As fast as possible (``rate: 0.0``), the whole episode: camera frames/s and
   messages/s the subscriber received, against the floor measured in the same run:
   decoding the same frames, in step order, through the reader in one thread (what the
   player's decode-ahead thread does before it builds and publishes anything).

Run from the repository root::

    .venv/bin/python bench/bench_playback.py             # ~3 min once the dataset is cached
    .venv/bin/python bench/bench_playback.py --seconds 5 # a shorter 1x run

Every process that starts rclpy here has ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``
and a domain of its own. Nothing asserts on timings; the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np
from bench_bag2ortf import DEFAULT_CACHE, BagSpec, ForeignLoad, convert, ensure_bag, generator_hash
from measure import Row, print_table

from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.format import layout
from ortf_ros.playback.frames import StepFrames

REPO = Path(__file__).resolve().parents[1]
PLAYER_PARAMS = REPO / "config" / "playback.yaml"
BAG = BagSpec(60.0, compressed=True)
JITTER_TARGET_MS = 5.0
MAX_RUN_S = 600
STREAMS = {  # topic -> (stream, message type)
    "/joint_states": ("joint states", "sensor_msgs/msg/JointState"),
    "/ft_sensor/wrench": ("wrench", "geometry_msgs/msg/WrenchStamped"),
    "/wrist_camera/image_raw": ("images", "sensor_msgs/msg/Image"),
    "/overhead_camera/image_raw": ("images", "sensor_msgs/msg/Image"),
}
CAMERA_TOPICS = [topic for topic, (stream, _) in STREAMS.items() if stream == "images"]


# -- the dataset ------------------------------------------------------------------------


def ensure_dataset(cache: Path) -> tuple[Path, float]:
    """The converted dataset (converted into a temporary directory, then renamed), and how
    long the conversion took when it was done."""
    bag = ensure_bag(cache, BAG)
    for stale in cache.glob("playback-*"):
        if not stale.name.endswith(f"-g{generator_hash()}"):
            shutil.rmtree(stale, ignore_errors=True)
    entry = cache / f"playback-{BAG.key}"
    if not (entry / "info.json").is_file():
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-", dir=cache))
        try:
            start = time.perf_counter()
            convert(bag.path, tmp / "dataset", "veryfast")
            (tmp / "info.json").write_text(json.dumps({"conversion_s": time.perf_counter() - start}))
            tmp.rename(entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return entry / "dataset", float(json.loads((entry / "info.json").read_text())["conversion_s"])


# -- the subscriber (a child process) ------------------------------------------------------


def child_subscribe(out: Path, seconds: float) -> None:
    """Subscribe (raw) to STREAMS, resume the paused player once every topic is matched, and
    record arrivals and header stamps for ``seconds`` (0: until the player says it finished).

    Each message comes with the times the middleware gives: when the player wrote it
    (source timestamp) and when it arrived here (reception), not when the callback ran,
    which depends on this process's executor. The subscriptions are best effort: on a
    reliable one, a datagram lost on a busy machine holds the stream back until Fast DDS
    repairs it (its heartbeat period is 3 s), which measures DDS, not the player. Losses
    are counted instead.
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.utilities import ok
    from std_msgs.msg import String
    from std_srvs.srv import Trigger

    from ortf_ros.ros.message_types import message_class

    rclpy.init()
    node = rclpy.create_node("ortf_bench_subscriber")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    recorded: dict[str, dict[str, list[int]]] = {
        topic: {"published": [], "arrived": [], "stamps": []} for topic in STREAMS
    }
    finished: list[bool] = []

    def keep(topic: str) -> Any:
        published, arrived, stamps = (recorded[topic][key] for key in ("published", "arrived", "stamps"))

        def callback(data: bytes, info: dict[str, int]) -> None:
            published.append(info["source_timestamp"])
            arrived.append(info["received_timestamp"])
            sec, nanosec = struct.unpack_from("<iI", data, 4)  # the header comes first, after the CDR header
            stamps.append(sec * 1_000_000_000 + nanosec)

        return callback

    def status(message: Any) -> None:
        finished.append(json.loads(message.data)["state"] == "finished")

    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)  # type: ignore[no-untyped-call]
    for topic, (_, msgtype) in STREAMS.items():
        node.create_subscription(message_class(msgtype), topic, keep(topic), qos, raw=True)
    node.create_subscription(String, "/ortf_player/status", status, 10)

    def spin_until(done: Any, what: str) -> None:
        deadline = time.monotonic() + 60
        while ok() and not done():
            if time.monotonic() > deadline:
                raise SystemExit(f"subscriber: no {what} in 60 s")
            executor.spin_once(timeout_sec=0.05)

    spin_until(lambda: all(node.count_publishers(topic) for topic in STREAMS), "publishers")
    client = node.create_client(Trigger, "/ortf_player/resume")
    spin_until(client.service_is_ready, "resume service")
    future = client.call_async(Trigger.Request())
    spin_until(future.done, "answer from the resume service")
    started = time.monotonic()
    while ok() and not (seconds and time.monotonic() - started > seconds) and not (not seconds and any(finished)):
        executor.spin_once(timeout_sec=0.05)
        if time.monotonic() - started > MAX_RUN_S:
            raise SystemExit(f"subscriber: the player did not finish in {MAX_RUN_S} s")
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.01)
    executor.shutdown()
    node.destroy_node()  # type: ignore[no-untyped-call]
    rclpy.shutdown()
    out.write_text(json.dumps(recorded))


# -- one run: player and subscriber ------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    published: dict[str, np.ndarray]  # topic -> when the player wrote each message (DDS source timestamp), ns
    arrivals: dict[str, np.ndarray]  # topic -> DDS reception time, ns
    stamps: dict[str, np.ndarray]  # topic -> header stamp, ns


def ros_environment(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
        ROS_DOMAIN_ID=str(100 + os.getpid() % 2),
        ROS_LOG_DIR=str(tmp / "ros-log"),
    )
    env.pop("ROS_LOCALHOST_ONLY", None)
    return env


def play(dataset: Path, tmp: Path, rate: float, seconds: float) -> Run:
    env = ros_environment(tmp)
    out = tmp / f"run-{rate:g}.json"
    subscriber = subprocess.Popen(
        [sys.executable, __file__, "--child-subscribe", str(out), "--seconds", str(seconds)], env=env
    )
    command = [sys.executable, "-m", "ortf_ros.ros.player_node", "--ros-args", "--params-file", str(PLAYER_PARAMS)]
    command += ["-p", f"dataset:={dataset}", "-p", "start_paused:=true", "-p", f"rate:={rate:.6f}"]
    log = tmp / f"player-{rate:g}.log"
    with log.open("w") as log_file:
        player = subprocess.Popen(command, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        if subscriber.wait() != 0:
            raise SystemExit(f"the subscriber failed; player log:\n{log.read_text()}")
    finally:
        for child in (subscriber, player):
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
        for child in (subscriber, player):
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    data = json.loads(out.read_text())

    def arrays(key: str) -> dict[str, np.ndarray]:
        return {topic: np.array(got[key], dtype=np.int64) for topic, got in data.items()}

    return Run(arrays("published"), arrays("arrived"), arrays("stamps"))


# -- 1. rate and jitter at 1x -------------------------------------------------------------------


def jitter_ms(times: dict[str, np.ndarray], run: Run, topics: list[str]) -> np.ndarray:
    """|interval between consecutive messages of a topic - interval of their stamps|, in ms."""
    return np.concatenate([np.abs(np.diff(times[t]) - np.diff(run.stamps[t])) / 1e6 for t in topics])


def lost(run: Run, topics: list[str]) -> int:
    """Messages missing between the first and last received, from gaps in the stamps."""
    missing = 0
    for topic in topics:
        gaps = np.diff(run.stamps[topic])
        missing += int(np.sum(np.round(gaps / np.median(gaps)) - 1))
    return missing


def realtime_rows(run: Run, seconds: float) -> list[Row]:
    section = f"1. 1x for {seconds:g} s, measured by a subscriber in a separate process"
    joints = "/joint_states"
    span_stamps = run.stamps[joints][-1] - run.stamps[joints][0]
    span_arrivals = run.arrivals[joints][-1] - run.arrivals[joints][0]
    achieved = span_stamps / span_arrivals
    rows = [
        Row(section, "achieved rate (stamp span / arrival span)", f"{achieved:8.4f}x", "joint states"),
        Row(section, "floor: the requested rate", f"{1.0:8.4f}x"),
        Row(section, "ratio achieved / requested", f"{achieved:8.4f}"),
    ]
    by_stream: dict[str, list[str]] = {}
    for topic, (stream, _) in STREAMS.items():
        by_stream.setdefault(stream, []).append(topic)
    for stream, topics in [*by_stream.items(), ("all streams", list(STREAMS))]:
        arrived = jitter_ms(run.arrivals, run, topics)
        published = jitter_ms(run.published, run, topics)
        p50, p99, worst = np.percentile(arrived, [50, 99, 100])
        count = sum(len(run.arrivals[t]) for t in topics)
        note = f"p50 {p50:.3f} ms, max {worst:.1f} ms; {count:,} messages, {lost(run, topics)} lost"
        if stream == "all streams":
            note += f"; target p99 < {JITTER_TARGET_MS:g} ms: {'OK' if p99 < JITTER_TARGET_MS else 'OVER'}"
        rows.append(Row(section, f"inter-message jitter p99 on arrival, {stream}", f"{p99:8.2f} ms", note))
        rows.append(
            Row(
                section,
                f"  of which the player's (when written), {stream}",
                f"{np.percentile(published, 99):8.2f} ms",
                f"p50 {np.percentile(published, 50):.3f} ms, max {published.max():.1f} ms",
            )
        )
    return rows


# -- 2. as fast as possible, and the decode floor -------------------------------------------------


def decode_only(dataset: Dataset) -> tuple[int, float]:
    """(frames, seconds) to decode every camera's step frames in step order, one thread."""
    start = time.perf_counter()
    frames = 0
    for episode in dataset:
        decoder = StepFrames(episode, print)
        columns = {camera: episode.array(layout.image_column(camera)) for camera in dataset.manifest.cameras}
        for step in range(episode.record.length):
            for camera, indices in columns.items():
                if decoder.frame(camera, int(indices[step]), step) is not None:
                    frames += 1
        decoder.close()
    return frames, time.perf_counter() - start


def fastest_rows(run: Run, dataset: Dataset, floor: tuple[int, float]) -> list[Row]:
    section = "2. as fast as possible (rate 0.0), the whole episode"
    frames = dataset.total_steps * len(CAMERA_TOPICS)
    episode_s = float(dataset.episode(0).array("timestamp")[-1])
    written = max(run.published[t][-1] for t in STREAMS) - min(run.published[t][0] for t in STREAMS)
    arrived = max(run.arrivals[t][-1] for t in STREAMS) - min(run.arrivals[t][0] for t in STREAMS)
    got = sum(len(run.arrivals[t]) for t in CAMERA_TOPICS)
    floor_frames, floor_s = floor
    player_fps, floor_fps = frames / (written / 1e9), floor_frames / floor_s
    return [
        Row(
            section,
            "player: camera frames/s published",
            f"{player_fps:8.1f}",
            f"{frames:,} frames in {written / 1e9:.1f} s (DDS source timestamps), {episode_s / (written / 1e9):.2f}x "
            "real time",
        ),
        Row(
            section,
            "  the subscriber received",
            f"{got / (arrived / 1e9):8.1f}",
            f"{got:,} frames ({lost(run, CAMERA_TOPICS):,} lost on the way, best effort)",
        ),
        Row(
            section,
            "floor: decode-only frames/s (reader, step order, 1 thread)",
            f"{floor_fps:8.1f}",
            f"{floor_frames:,} frames in {floor_s:.1f} s",
        ),
        Row(section, "ratio player / floor", f"{player_fps / floor_fps:8.2f}"),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the 1x run (default 20)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="where the bag and dataset are kept")
    parser.add_argument("--child-subscribe", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_subscribe is not None:
        child_subscribe(args.child_subscribe, args.seconds)
        return

    print(f"ortf_ros playback benchmark: {os.cpu_count()} CPUs, PyAV {av.__version__}, Python {sys.version.split()[0]}")
    load = ForeignLoad()
    cache: Path = args.cache_dir.resolve()
    root, conversion_s = ensure_dataset(cache)
    dataset = load_dataset(root)
    resolution = dataset.manifest.cameras["wrist_camera"].resolution
    assert resolution is not None
    rows = [
        Row(
            "0. dataset (cached in .cache/bench)",
            f"{BAG.length} teleop bag (cameras as {BAG.cameras}) -> ortf-bag2ortf",
            f"{dataset.total_steps:8,} steps",
            f"2 cameras {resolution.width}x{resolution.height}, "
            f"{dataset.episode(0).stream('ft_sensor').num_rows:,} wrench samples; conversion took {conversion_s:.0f} s",
        )
    ]
    with tempfile.TemporaryDirectory(prefix="ortf_bench_playback_") as tmp_name:
        tmp = Path(tmp_name)
        rows += realtime_rows(play(root, tmp, 1.0, args.seconds), args.seconds)
        floor = decode_only(dataset)
        rows += fastest_rows(play(root, tmp, 0.0, 0.0), dataset, floor)
    print_table(rows)
    print(f"\n{load.line()}")


if __name__ == "__main__":
    main()
