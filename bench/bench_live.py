"""Live recording by ``ortf_recorder`` over loopback DDS, against a bare subscriber, in one table.

The scene publisher (``ortf_ros.ros.scene_publisher``, a process of its own) publishes
the teleop scene of issue 19 in real time: three cameras 640x480 @ 30 fps as raw rgb8
``Image`` (wrist, overhead, side; no depth), JointState 500 Hz, WrenchStamped 1 kHz, TF
100 Hz, the command (a JointState) 100 Hz, camera_info, ``/tf_static`` and the URDF;
reliable, keep-last 10. ``ortf_recorder`` (``python -m ortf_ros.ros.recorder_node`` with
config/record.yaml and the mapping ``ortf-bag2ortf --write-config`` writes for the same
scene, another process) records it as ONE episode: started as soon as
``~/start_episode`` succeeds (after the warm-up), stopped after ``--seconds`` (default
60) by ``~/stop_episode``, which commits. The floor, in the same run: the same publisher
for ``--seconds``, and a bare rclpy subscriber process that only counts (raw, reliable,
the recorder's depths, taking messages the way the recorder's ``Receiver`` does). Printed:

1. Delivery per stream over the whole run: messages received / published, recorder and
   floor, and their ratio (target 1.0); beside it what the middleware lost on the way
   (gaps in the publication sequence numbers), and the recorder's drops (a full queue
   between subscription and pipeline; target 0) and late messages in the episode (its
   ``recording.json``).
2. The recorder: CPU during the episode (the recorder process and its encoder
   processes) against the floor subscriber's; peak RSS of the recorder and its encoders,
   summed (sampled every 0.2 s; target < 500 MB; PSS beside it) against the floor's;
   latency publish -> staged p50/p99 from its status (origin: the publisher's DDS source
   timestamp; end: the pipeline thread handing the message to the assembler/writer;
   target p99 < 100 ms) against publish -> taken in the floor; how long
   ``~/stop_episode`` took (stop to committed).
3. Frames per camera in the committed videos (decoded: the frame numbers the scene paints
   into each picture) against the frames published while the episode was open (between
   the start's reply and the stop request), and their ratio (target 1.0).

Run from the repository root::

    .venv/bin/python bench/bench_live.py               # ~2.5 min: 60 s floor, 60 s episode, decoding
    .venv/bin/python bench/bench_live.py --seconds 10  # a shorter try

Every process that starts rclpy here has ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and
``ROS_DOMAIN_ID`` 110-139 (from this process's pid); a run that sees another publisher of
the scene's topics on its domain stops. Nothing asserts on figures: they depend on the
machine (two cores here, shared by publisher, recorder and encoders).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import av
import numpy as np
import psutil
from bench_bag2ortf import ForeignLoad
from measure import MB, Row, print_table

from ortf_ros.pipeline.flow import LIVE
from ortf_ros.synthetic.bag import write_scene_bag
from ortf_ros.synthetic.images import decode_frame_number
from ortf_ros.synthetic.scene import TeleopConfig
from ortf_ros.synthetic.schedule import receive_latency_ns, stamp_ns
from ortf_ros.synthetic.topics import CAMERA_FRAMES, TOPIC_ROBOT_DESCRIPTION, TOPIC_TF_STATIC

REPO = Path(__file__).resolve().parents[1]
RECORDER_PARAMS = REPO / "config" / "record.yaml"
WIDTH, HEIGHT, FPS = 640, 480, 30
RATES = {"joint": 500, "command": 100, "wrench": 1000, "tf": 100}
SCENE_ARGS = [
    *("--width", str(WIDTH), "--height", str(HEIGHT), "--fps", str(FPS)),
    *("--joint-rate", str(RATES["joint"]), "--command-rate", str(RATES["command"])),
    *("--wrench-rate", str(RATES["wrench"]), "--tf-rate", str(RATES["tf"])),
    "--side-camera",
    "--no-depth",
]
LATCHED = (TOPIC_ROBOT_DESCRIPTION, TOPIC_TF_STATIC)
CAMERA_TOPICS = tuple(CAMERA_FRAMES)  # wrist, overhead, side: <camera>/image_raw
MAX_DEPTH = 1000  # ortf_ros.ros.subscriptions.MAX_DEPTH (that module imports rclpy): depth min(this, queue)
SAMPLE_S = 0.2
RSS_TARGET_MB = 500
LATENCY_TARGET_MS = 100.0
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 600.0
EDGE_MS = 500  # a frame missing from a video that was published this close to the stop is told apart
DOMAIN = 110 + os.getpid() % 30  # (not the tests' 20-99, nor bench_playback's 100-101; children: unused)


# -- children: the floor subscriber and the recorder's client (both start rclpy) ---------------


def _stdin_event() -> threading.Event:
    """Set when the parent writes a line (or closes stdin): "the publisher is done"."""
    done = threading.Event()

    def wait() -> None:
        sys.stdin.readline()
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    return done


def _count_publishers(node: Any, topics: dict[str, str], most: dict[str, int]) -> None:
    """Keep the most publishers seen per topic: more than one means another process
    publishes on this domain, and the counts would not be this scene's."""
    for topic in topics:
        most[topic] = max(most.get(topic, 0), node.count_publishers(topic))


def child_floor(out: Path, topics: dict[str, str], executor_kind: str) -> None:
    """Subscribe (raw, reliable, the recorder's depths) to ``topics`` and count until the
    parent says the publisher is done. Messages are taken as the recorder's ``Receiver``
    takes them: every subscription drained in turn, a millisecond's pause after a pass
    that found nothing (``executor_kind`` "single": a SingleThreadedExecutor running a
    callback per message instead). Keeps publish -> reception and publish -> taken times
    (DDS source timestamp to ``received_timestamp`` / the wall clock when taken), and
    the gaps in each topic's publication sequence numbers (lost in transport)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from ortf_ros.ros.message_types import message_class

    rclpy.init()
    node = rclpy.create_node("ortf_bench_floor")
    counts = dict.fromkeys(topics, 0)
    lost = dict.fromkeys(topics, 0)
    last_sequence: dict[str, int] = {}
    to_taken: dict[str, array[int]] = {topic: array("q") for topic in topics}
    to_reception: dict[str, array[int]] = {topic: array("q") for topic in topics}

    def counter(topic: str) -> Callable[[bytes, dict[str, int]], None]:
        taken_times, reception_times = to_taken[topic], to_reception[topic]

        def count(data: bytes, info: dict[str, int]) -> None:
            now = time.time_ns()
            counts[topic] += 1
            taken_times.append(now - info["source_timestamp"])
            reception_times.append(info["received_timestamp"] - info["source_timestamp"])
            sequence = info.get("publication_sequence_number")
            if sequence:
                before = last_sequence.get(topic)
                if before is not None and sequence > before + 1:
                    lost[topic] += sequence - before - 1
                last_sequence[topic] = sequence

        return count

    subscriptions = []
    for topic, msgtype in topics.items():
        latched = topic in LATCHED
        depth = 1 if latched else min(MAX_DEPTH, LIVE.queue_frames if topic in CAMERA_TOPICS else LIVE.queue_messages)
        qos = QoSProfile(  # type: ignore[no-untyped-call]
            depth=depth,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
        )
        callback = counter(topic)
        subscription = node.create_subscription(message_class(msgtype), topic, callback, qos, raw=True)  # type: ignore[arg-type]
        subscriptions.append((subscription, callback))

    def drain() -> int:
        taken = 0
        for subscription, callback in subscriptions:
            handle, kind = subscription.handle, subscription.msg_type
            while True:
                with handle:
                    got = handle.take_message(kind, True)
                if got is None:
                    break
                callback(*got)
                taken += 1
        return taken

    def serve(until: Callable[[], bool]) -> None:
        if executor_kind == "single":
            while not until():
                executor.spin_once(timeout_sec=0.01)
            return
        while not until():
            if not drain():
                time.sleep(0.001)

    executor = SingleThreadedExecutor()
    executor.add_node(node)
    done = _stdin_event()
    serve(done.is_set)
    publishers: dict[str, int] = {}
    _count_publishers(node, topics, publishers)
    quiet_until = time.monotonic() + 1.0  # what is still in the middleware's queues
    serve(lambda: time.monotonic() > quiet_until)
    executor.shutdown()
    node.destroy_node()  # type: ignore[no-untyped-call]
    rclpy.shutdown()
    summary = {
        "publishers": publishers,
        "received": counts,
        "lost": lost,
        "taken_ms": _quantiles(to_taken),
        "reception_ms": _quantiles(to_reception),
    }
    out.write_text(json.dumps(summary))


def _quantiles(times: dict[str, array[int]]) -> dict[str, dict[str, float]]:
    """p50/p99/max in ms per topic and over all (``"all"``)."""
    result = {}
    per_topic = {topic: np.frombuffer(t, dtype=np.int64) for topic, t in times.items()}
    every = np.concatenate([np.zeros(0, dtype=np.int64), *per_topic.values()])
    for name, values in [*per_topic.items(), ("all", every)]:
        if len(values):
            p50, p99, worst = np.percentile(values / 1e6, [50, 99, 100])
            result[name] = {"p50": float(p50), "p99": float(p99), "max": float(worst)}
    return result


def child_client(out: Path, seconds: float, topics: dict[str, str]) -> None:
    """Drive the recorder: ``~/start_episode`` until it succeeds, ``seconds`` of episode,
    ``~/stop_episode``; print "stopped", and once the parent says the publisher is done,
    wait for the recorder's counts to settle. Keeps the statuses heard on ``~/status``."""
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    from std_srvs.srv import Trigger

    rclpy.init()
    node = rclpy.create_node("ortf_bench_client")
    statuses: list[tuple[int, dict[str, Any]]] = []
    latched = QoSProfile(  # type: ignore[no-untyped-call]
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )

    def heard(message: Any) -> None:
        statuses.append((time.time_ns(), json.loads(message.data)))

    node.create_subscription(String, "/ortf_recorder/status", heard, latched)

    def spin_until(done: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline:
                raise SystemExit(f"client: timed out waiting for {what}")
            rclpy.spin_once(node, timeout_sec=0.02)

    def spin_for(seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            rclpy.spin_once(node, timeout_sec=0.02)

    def status_count_above(count: int) -> Callable[[], bool]:
        return lambda: len(statuses) > count

    def call(name: str, timeout_s: float) -> tuple[Any, int, int]:
        client = node.create_client(Trigger, f"/ortf_recorder/{name}")
        spin_until(client.service_is_ready, 60, f"the service {name}")
        spin_for(0.5)  # (for the recorder's response writer to see this client: see RecorderClient._client)
        asked = time.time_ns()
        future = client.call_async(Trigger.Request())
        spin_until(future.done, timeout_s, f"the answer of {name}")
        answered = time.time_ns()
        node.destroy_client(client)
        return future.result(), asked, answered  # type: ignore[no-untyped-call]

    result: dict[str, Any] = {}
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        reply, asked, answered = call("start_episode", 60)
        if reply.success:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"client: the recorder was never ready: {reply.message}")
        spin_for(0.2)
    result["start"] = {"asked_ns": asked, "answered_ns": answered, "message": reply.message}
    end = time.monotonic() + seconds
    publishers: dict[str, int] = {}
    while time.monotonic() < end:
        _count_publishers(node, topics, publishers)
        spin_for(min(1.0, end - time.monotonic()))
    result["publishers"] = publishers
    during = [s for _, s in statuses if s.get("episode")]
    reply, asked, answered = call("stop_episode", STOP_TIMEOUT_S)
    result["stop"] = {"asked_ns": asked, "answered_ns": answered, "message": reply.message, "success": reply.success}
    result["episode_status"] = during[-1] if during else None
    print("stopped", flush=True)
    done = _stdin_event()
    spin_until(done.is_set, STOP_TIMEOUT_S, "the publisher to finish")
    # The recorder's counts over the whole run, once they stop changing (its subscriptions
    # may still be working through what the middleware holds).
    settled = time.monotonic() + 30

    def received() -> dict[str, int]:
        return {topic: s["received"] for topic, s in statuses[-1][1]["streams"].items()}

    spin_until(status_count_above(len(statuses)), 10, "a status")
    last = received()
    while time.monotonic() < settled:
        spin_until(status_count_above(len(statuses)), 10, "a status")
        now = received()
        if now == last:
            break
        last = now
    result["final_status"] = statuses[-1][1]
    node.destroy_node()  # type: ignore[no-untyped-call]
    rclpy.shutdown()
    out.write_text(json.dumps(result))


# -- processes and their sampling ------------------------------------------------------------------


def ros_environment(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
        ROS_DOMAIN_ID=str(DOMAIN),
        ROS_LOG_DIR=str(tmp / "ros-log"),
    )
    env.pop("ROS_LOCALHOST_ONLY", None)
    return env


class Child:
    """A child process in a session of its own (a Ctrl-C at the terminal reaches only this
    script, which then sends SIGINT to each child's own pid, once), output in a log file."""

    def __init__(self, name: str, command: list[str], tmp: Path, env: dict[str, str], pipes: bool = False) -> None:
        self.name = name
        self.log = tmp / f"{name}.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
                stdout=subprocess.PIPE if pipes else log,
                stderr=log,
                text=True,
                start_new_session=True,
            )

    @property
    def stdin(self) -> IO[str]:
        assert self.process.stdin is not None
        return self.process.stdin

    def tell(self) -> None:
        """A line on its stdin."""
        with contextlib.suppress(BrokenPipeError, OSError):
            self.stdin.write("go\n")
            self.stdin.flush()

    def read_line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline()

    def interrupt(self, timeout_s: float) -> int:
        """SIGINT to its own pid, and its exit code (killed after ``timeout_s``)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def wait(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"{self.name} did not finish in {timeout_s:g} s; its log:\n{self.text()}") from None

    def text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


@dataclass
class Sample:
    at_ns: int
    cpu_s: dict[int, float]  # pid -> user + system CPU seconds so far
    rss: int  # bytes, summed over the tree
    pss: int  # the same in PSS: a page shared by n of them counts 1/n in each


def _pss(pid: int) -> int:
    """Proportional set size from /proc/PID/smaps_rollup (0 when unreadable)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Sampler:
    """CPU and RSS of a process and its descendants (the recorder's encoder processes),
    sampled every ``SAMPLE_S`` in a thread."""

    root: int
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        try:
            root = psutil.Process(self.root)
        except psutil.Error:
            return
        while not self._stop.is_set():
            cpu: dict[int, float] = {}
            rss = pss = 0
            try:
                members = [root, *root.children(recursive=True)]
            except psutil.Error:
                return
            for member in members:
                with contextlib.suppress(psutil.Error):
                    times = member.cpu_times()
                    rss += member.memory_info().rss
                    pss += _pss(member.pid)
                    cpu[member.pid] = times.user + times.system
            self.samples.append(Sample(time.time_ns(), cpu, rss, pss))
            self._stop.wait(SAMPLE_S)

    def peak_rss(self) -> int:
        return max((s.rss for s in self.samples), default=0)

    def peak_pss(self) -> int:
        return max((s.pss for s in self.samples), default=0)

    def cpu_s(self, start_ns: int, end_ns: int) -> float:
        """CPU seconds of the tree between two wall times (a process first seen after
        ``start_ns`` counts from its birth; one gone before ``end_ns``, up to its last sample)."""
        before = [s for s in self.samples if s.at_ns <= start_ns]
        within = [s for s in self.samples if s.at_ns <= end_ns]
        if not within:
            return 0.0
        base = before[-1].cpu_s if before else {}
        last: dict[int, float] = {}
        for sample in within:
            last.update(sample.cpu_s)
        return sum(cpu - base.get(pid, 0.0) for pid, cpu in last.items())


def write_mapping(tmp: Path) -> Path:
    """What ``ortf-bag2ortf --write-config`` writes for a 1 s bag of the same scene (small
    frames: the mapping holds no resolution)."""
    from ortf_ros.cli.bag2ortf import main as bag2ortf

    bag = write_scene_bag(tmp / "mapping_bag", scene_config(duration_s=1.0))
    mapping = tmp / "mapping.yaml"
    if bag2ortf([str(bag.path), "--write-config", str(mapping)]) != 0:
        raise SystemExit("ortf-bag2ortf --write-config failed")
    shutil.rmtree(bag.path)
    return mapping


@contextlib.contextmanager
def children() -> Iterator[list[Child]]:
    """Children started into the list are interrupted (SIGINT to their own pid) on the way out."""
    started: list[Child] = []
    try:
        yield started
    finally:
        for child in reversed(started):
            if child.process.poll() is None:
                child.interrupt(timeout_s=STOP_TIMEOUT_S if child.name == "recorder" else 30)
            if child.process.stdin is not None:
                with contextlib.suppress(OSError):
                    child.process.stdin.close()
            if child.process.stdout is not None:
                child.process.stdout.close()


def wait_for_line(child: Child, line: str, watched: Child) -> bool:
    """Whether ``child`` printed ``line`` (False when it ended first, or ``watched`` did)."""
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.append(child.read_line()), daemon=True)
    reader.start()
    while reader.is_alive() and watched.process.poll() is None:
        reader.join(0.2)
    reader.join(1.0)
    return bool(said) and said[0].strip() == line


def check_alone(publishers: dict[str, int]) -> None:
    crowded = sorted(topic for topic, count in publishers.items() if count > 1)
    if crowded:
        raise SystemExit(
            f"another process publishes {', '.join(crowded)} on ROS_DOMAIN_ID {DOMAIN}: run again (another domain)"
        )


def publisher_command(tmp: Path, run: str, seconds: float | None, extra: list[str]) -> list[str]:
    command = [sys.executable, "-m", "ortf_ros.ros.scene_publisher", *SCENE_ARGS, *extra, "--wait-topic", "all"]
    command += ["--duration", f"{seconds:g}" if seconds else "0", "--report", str(tmp / f"{run}-scene.json")]
    return command


# -- the floor run --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FloorRun:
    published: dict[str, int]
    received: dict[str, int]
    lost: dict[str, int]  # gaps in the publication sequence numbers
    taken_ms: dict[str, dict[str, float]]
    reception_ms: dict[str, dict[str, float]]
    cpu_s: float
    seconds: float
    peak_rss: int
    peak_pss: int
    scene: dict[str, Any]


def scene_config(duration_s: float = 2.0) -> TeleopConfig:
    """The scene the publisher publishes with ``SCENE_ARGS``, as ``ortf_ros.synthetic`` describes it."""
    return TeleopConfig(
        fmt="mcap",
        duration_s=duration_s,
        width=WIDTH,
        height=HEIGHT,
        fps=FPS,
        joint_rate_hz=RATES["joint"],
        command_rate_hz=RATES["command"],
        wrench_rate_hz=RATES["wrench"],
        tf_rate_hz=RATES["tf"],
        with_depth=False,
        side_camera=True,
    )


def scene_topics() -> dict[str, str]:
    """Topic -> type of what the publisher publishes with ``SCENE_ARGS``."""
    return scene_config().msgtypes()


def run_floor(tmp: Path, seconds: float, executor_kind: str, publisher_args: list[str]) -> FloorRun:
    tmp.mkdir(parents=True)
    env = ros_environment(tmp)
    out = tmp / "floor.json"
    topics = scene_topics()
    command = [sys.executable, __file__, "--child-floor", str(out), "--topics", json.dumps(topics)]
    with children() as started:
        subscriber = Child("floor-subscriber", [*command, "--floor-executor", executor_kind], tmp, env, pipes=True)
        started.append(subscriber)
        sampler = Sampler(subscriber.process.pid).start()
        publisher = Child("floor-publisher", publisher_command(tmp, "floor", seconds, publisher_args), tmp, env)
        started.append(publisher)
        if publisher.wait(seconds + 120) != 0:
            raise SystemExit(f"the scene publisher failed:\n{publisher.text()}")
        subscriber.tell()
        if subscriber.wait(60) != 0:
            raise SystemExit(f"the floor subscriber failed:\n{subscriber.text()}")
        sampler.stop()
    scene = json.loads((tmp / "floor-scene.json").read_text())
    summary = json.loads(out.read_text())
    check_alone(summary["publishers"])
    t0, end = scene["t0_wall_ns"], scene["end_wall_ns"]
    return FloorRun(
        published={topic: data["published"] for topic, data in scene["topics"].items()},
        received=summary["received"],
        lost=summary["lost"],
        taken_ms=summary["taken_ms"],
        reception_ms=summary["reception_ms"],
        cpu_s=sampler.cpu_s(t0, end),
        seconds=(end - t0) / 1e9,
        peak_rss=sampler.peak_rss(),
        peak_pss=sampler.peak_pss(),
        scene=scene,
    )


# -- the recorder run -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RecorderRun:
    published: dict[str, int]
    received: dict[str, int]
    lost: dict[str, int]  # lost in transport (gaps in the publication sequence numbers), whole run
    client: dict[str, Any]
    episode_streams: dict[str, dict[str, int]]  # recording.json: received, dropped, late in the episode
    cpu_s: float  # recorder + encoders, between the start's reply and the stop request
    commit_cpu_s: float
    publisher_cpu_s: float
    peak_rss: int
    peak_pss: int
    scene: dict[str, Any]
    dataset: Path
    recorder_log: str


def run_recorder(
    tmp: Path, seconds: float, parameters: list[str], module: str, publisher_args: list[str]
) -> RecorderRun:
    tmp.mkdir(parents=True)
    env = ros_environment(tmp)
    mapping = write_mapping(tmp)
    dataset = tmp / "dataset"
    out = tmp / "client.json"
    topics = json.dumps(scene_topics())
    command = [sys.executable, "-m", module, "--ros-args"]
    command += ["--params-file", str(RECORDER_PARAMS), "-p", f"output:={dataset}", "-p", f"mapping:={mapping}"]
    for parameter in parameters:
        command += ["-p", parameter]
    with children() as started:
        recorder = Child("recorder", command, tmp, env)
        started.append(recorder)
        sampler = Sampler(recorder.process.pid).start()
        publisher = Child("recorder-publisher", publisher_command(tmp, "recorder", None, publisher_args), tmp, env)
        started.append(publisher)
        publisher_sampler = Sampler(publisher.process.pid).start()
        client = Child(
            "client",
            [sys.executable, __file__, "--child-client", str(out), "--seconds", str(seconds), "--topics", topics],
            tmp,
            env,
            pipes=True,
        )
        started.append(client)
        if not wait_for_line(client, "stopped", recorder):
            raise SystemExit(f"the client failed:\n{client.text()}\nrecorder log:\n{recorder.text()}")
        if publisher.interrupt(60) != 0:
            raise SystemExit(f"the scene publisher failed:\n{publisher.text()}")
        publisher_sampler.stop()
        client.tell()
        if client.wait(120) != 0:
            raise SystemExit(f"the client failed:\n{client.text()}\nrecorder log:\n{recorder.text()}")
        code = recorder.interrupt(STOP_TIMEOUT_S)
        sampler.stop()
        if code != 0:
            raise SystemExit(f"the recorder exited with {code}:\n{recorder.text()}")
    result = json.loads(out.read_text())
    check_alone(result["publishers"])
    if not result["stop"]["success"]:
        raise SystemExit(f"stop_episode failed: {result['stop']['message']}\n{recorder.text()}")
    scene = json.loads((tmp / "recorder-scene.json").read_text())
    from ortf_ros.dataset.reader import load_dataset

    episode = load_dataset(dataset).episode(0)
    streams = json.loads((episode.annotations_dir / "recording.json").read_text())["streams"]
    start, stop = result["start"], result["stop"]
    return RecorderRun(
        published={topic: data["published"] for topic, data in scene["topics"].items()},
        received={topic: s["received"] for topic, s in result["final_status"]["streams"].items()},
        lost={topic: s.get("lost_in_transport", 0) for topic, s in result["final_status"]["streams"].items()},
        client=result,
        episode_streams=streams,
        cpu_s=sampler.cpu_s(start["answered_ns"], stop["asked_ns"]),
        commit_cpu_s=sampler.cpu_s(stop["asked_ns"], stop["answered_ns"]),
        publisher_cpu_s=publisher_sampler.cpu_s(start["answered_ns"], stop["asked_ns"]),
        peak_rss=sampler.peak_rss(),
        peak_pss=sampler.peak_pss(),
        scene=scene,
        dataset=dataset,
        recorder_log=recorder.text(),
    )


# -- the videos -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class VideoCheck:
    frames: int
    published: dict[int, int]  # seq -> when published (wall ns), between the start's reply and the stop request
    recorded: list[int]  # seqs decoded from the video, in order
    stop_ns: int  # the stop request


def published_seqs(scene: dict[str, Any], topic: str, start_ns: int, end_ns: int) -> dict[int, int]:
    """Frames of ``topic`` whose scheduled publication (wall clock) falls in [start_ns, end_ns],
    with that time (the publisher is late by its lateness, a few ms at p99)."""
    t0, origin = scene["t0_wall_ns"], scene["start_ns"]
    seqs = {}
    for seq in range(scene["topics"][topic]["published"]):
        at = t0 + stamp_ns(seq, FPS, origin) - origin + receive_latency_ns(topic, seq)
        if start_ns <= at <= end_ns:
            seqs[seq] = at
    return seqs


def check_videos(run: RecorderRun) -> dict[str, VideoCheck]:
    from ortf_ros.dataset.reader import load_dataset

    episode = load_dataset(run.dataset).episode(0)
    start, stop = run.client["start"]["answered_ns"], run.client["stop"]["asked_ns"]
    checks = {}
    for topic in CAMERA_TOPICS:
        camera = topic.split("/")[1]  # (the mapping names a camera after its namespace)
        with av.open(str(episode.video_path(camera))) as container:
            seqs = [decode_frame_number(f.to_ndarray(format="rgb24")) for f in container.decode(video=0)]
        checks[topic] = VideoCheck(len(seqs), published_seqs(run.scene, topic, start, stop), seqs, stop)
    return checks


# -- the table ------------------------------------------------------------------------------------


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f} %" if whole else "-"


def delivery_rows(run: RecorderRun, floor: FloorRun | None) -> list[Row]:
    section = "1. Delivery per stream, whole run: received by the subscriptions / published"
    rows = []
    for topic in sorted(run.published, key=lambda t: (t in LATCHED, t)):
        published, received = run.published[topic], run.received.get(topic, 0)
        episode = run.episode_streams.get(topic, {})
        mine = received / published if published else 0.0
        note = f"recorder {percent(received, published)} ({received:,} of {published:,}"
        note += f", {run.lost.get(topic, 0):,} lost in transport)"
        ratio = "       -"
        if floor is not None:
            f_pub, f_recv = floor.published.get(topic, 0), floor.received.get(topic, 0)
            note += f"; floor {percent(f_recv, f_pub)} ({f_recv:,}, {floor.lost.get(topic, 0):,} lost in transport)"
            if f_pub and f_recv:
                ratio = f"{mine / (f_recv / f_pub):8.4f}"
        if episode:
            note += f"; episode: {episode['dropped']} dropped, {episode['late']} late"
        rows.append(Row(section, topic, ratio, note))
    dropped = sum(s["dropped"] for s in run.episode_streams.values())
    late = sum(s["late"] for s in run.episode_streams.values())
    rows.append(
        Row(
            section,
            "dropped in the episode, all streams",
            f"{dropped:8,}",
            f"target 0: {'OK' if dropped == 0 else 'OVER'}; late {late:,} (later than max_latency_ms)",
        )
    )
    return rows


def recorder_rows(run: RecorderRun, floor: FloorRun | None, seconds: float) -> list[Row]:
    section = "2. The recorder (process + encoder processes)"
    start, stop = run.client["start"], run.client["stop"]
    episode_s = (stop["asked_ns"] - start["answered_ns"]) / 1e9
    cpu = run.cpu_s / episode_s
    rows = [
        Row(section, "CPU during the episode", f"{cpu:8.2f} CPUs", f"{run.cpu_s:.1f} s of CPU in {episode_s:.1f} s")
    ]
    if floor is not None:
        floor_cpu = floor.cpu_s / floor.seconds
        rows.append(Row(section, "floor: the bare subscriber", f"{floor_cpu:8.2f} CPUs", f"over {floor.seconds:.1f} s"))
        rows.append(Row(section, "ratio recorder / floor", f"{cpu / floor_cpu:8.1f}"))
    lateness = run.scene["timing"]["lateness_ms"]
    rows.append(
        Row(
            section,
            "  the publisher meanwhile",
            f"{run.publisher_cpu_s / episode_s:8.2f} CPUs",
            f"publish lateness p99 {lateness['p99']:.2f} ms, max {lateness['max']:.1f} ms",
        )
    )
    rss = run.peak_rss / MB
    rows.append(
        Row(
            section,
            "peak RSS, recorder + encoders",
            f"{rss:8.0f} MB",
            f"sum of the tree's RSS sampled every {SAMPLE_S:g} s; target < {RSS_TARGET_MB} MB: "
            f"{'OK' if rss < RSS_TARGET_MB else 'OVER'}; peak PSS {run.peak_pss / MB:.0f} MB",
        )
    )
    if floor is not None:
        floor_rss, floor_pss = floor.peak_rss / MB, floor.peak_pss / MB
        rows.append(Row(section, "floor: the bare subscriber", f"{floor_rss:8.0f} MB", f"PSS {floor_pss:.0f} MB"))
        rows.append(Row(section, "ratio recorder / floor", f"{run.peak_rss / floor.peak_rss:8.1f}"))
    status = run.client.get("episode_status") or {}
    latency = (status.get("episode") or {}).get("latency_ms") or {}
    p50, p99 = latency.get("p50"), latency.get("p99")
    if p50 is not None and p99 is not None:
        elapsed = status["episode"]["elapsed_s"]
        rows.append(
            Row(
                section,
                "latency publish -> staged, p99",
                f"{p99:8.2f} ms",
                f"p50 {p50:.2f} ms; the status {elapsed:.0f} s into the episode; target p99 < "
                f"{LATENCY_TARGET_MS:g} ms: {'OK' if p99 < LATENCY_TARGET_MS else 'OVER'}",
            )
        )
        if floor is not None:
            every, reception = floor.taken_ms["all"], floor.reception_ms["all"]
            worst = max((t for t in floor.taken_ms if t != "all"), key=lambda t: floor.taken_ms[t]["p99"])
            rows.append(
                Row(
                    section,
                    "floor: publish -> taken, p99",
                    f"{every['p99']:8.2f} ms",
                    f"p50 {every['p50']:.2f} ms, max {every['max']:.1f} ms; of which publish -> DDS reception p99 "
                    f"{reception['p99']:.2f} ms; worst stream {worst} p99 {floor.taken_ms[worst]['p99']:.2f} ms",
                )
            )
            rows.append(Row(section, "ratio recorder / floor (p99)", f"{p99 / every['p99']:8.1f}"))
    else:
        rows.append(Row(section, "latency publish -> staged", "       -", "no status was heard during the episode"))
    commit_s = (stop["answered_ns"] - stop["asked_ns"]) / 1e9
    rows.append(
        Row(
            section,
            "stop_episode: stop to committed",
            f"{commit_s:8.2f} s",
            f"{run.commit_cpu_s:.1f} s of CPU; {seconds:g} s episode: {stop['message']}",
        )
    )
    return rows


def video_rows(checks: dict[str, VideoCheck], run: RecorderRun) -> list[Row]:
    section = "3. Frames in the committed videos vs published while the episode was open"
    rows = []
    for topic, check in checks.items():
        episode = run.episode_streams.get(topic, {})
        published, recorded = set(check.published), set(check.recorded)
        missing = sorted(published - recorded)
        extra = len(recorded - published)
        seqs = check.recorded
        gaps = sum(1 for a, b in itertools.pairwise(seqs) if b != a + 1)
        note = (
            f"{check.frames:,} frames in the video, {len(check.published):,} published between the start's reply "
            f"and the stop request; missing {len(missing)}"
        )
        if missing:
            # The recorder ends an episode at the stop's receive time: a frame published just
            # before the stop request but delivered after it belongs to no episode.
            near = {seq: (check.stop_ns - check.published[seq]) / 1e6 for seq in missing}
            near = {seq: ms for seq, ms in near.items() if ms < EDGE_MS}
            note += f" (seqs {missing[:3]}{'...' if len(missing) > 3 else ''}"
            if near:
                note += "; published just before the stop: " + ", ".join(f"{s} {ms:.0f} ms" for s, ms in near.items())
            note += ")"
        note += f", {extra} more at the edges (published during the start or stop call), {gaps} gap(s) in order"
        note += (
            f"; the episode's recording.json: {episode.get('dropped', 0)} dropped, "
            f"{episode.get('lost_in_transport', 0)} lost in transport"
        )
        found = len(published & recorded)
        value = f"{found / len(published):8.4f}" if published else "       -"
        rows.append(Row(section, f"{topic}: in the video / published", value, note))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=60.0, help="episode (and floor run) length (default 60)")
    parser.add_argument(
        "-p",
        "--recorder-param",
        action="append",
        default=[],
        metavar="NAME:=VALUE",
        help="a ROS parameter for the recorder, over config/record.yaml (e.g. queue_frames:=32); repeatable",
    )
    parser.add_argument(
        "--publisher-depth",
        type=int,
        default=10,
        metavar="N",
        help="the scene publisher's keep-last depth (default 10, its own and ROS's usual)",
    )
    parser.add_argument("--no-floor", action="store_true", help="skip the floor run (trying things)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (dataset, logs)")
    # (a module that runs the recorder node: a wrapper with probes, for experiments)
    parser.add_argument("--recorder-module", default="ortf_ros.ros.recorder_node", help=argparse.SUPPRESS)
    parser.add_argument(
        "--floor-executor",
        choices=["drain", "single"],
        default="drain",
        help="how the floor takes its messages: drained as the recorder's Receiver does (default), or by a "
        "SingleThreadedExecutor running a callback per message",
    )
    parser.add_argument("--child-floor", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-client", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--topics", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_floor is not None:
        child_floor(args.child_floor, json.loads(args.topics), args.floor_executor)
        return
    if args.child_client is not None:
        child_client(args.child_client, args.seconds, json.loads(args.topics))
        return

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM too: the children are stopped
    print(
        f"ortf_ros live recording benchmark: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
        f"PyAV {av.__version__}, Python {sys.version.split()[0]}"
    )
    load = ForeignLoad()
    tmp = Path(tempfile.mkdtemp(prefix="ortf_bench_live_"))
    try:
        publisher_args = ["--depth", str(args.publisher_depth)]
        floor = None if args.no_floor else run_floor(tmp / "floor", args.seconds, args.floor_executor, publisher_args)
        run = run_recorder(tmp / "recorder", args.seconds, args.recorder_param, args.recorder_module, publisher_args)
        line = f"\n{load.line()}"
        checks = check_videos(run)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    scene = (
        f"3 cameras {WIDTH}x{HEIGHT} @ {FPS} fps raw rgb8, joints {RATES['joint']} Hz, wrench {RATES['wrench']} Hz, "
        f"TF {RATES['tf']} Hz, command {RATES['command']} Hz"
    )
    rows = [
        Row(
            "0. Scene and episode",
            "episode",
            f"{(run.client['stop']['asked_ns'] - run.client['start']['answered_ns']) / 1e9:8.1f} s",
            f"{scene}; recorder parameters: {' '.join(args.recorder_param) or 'config/record.yaml'}",
        )
    ]
    rows += delivery_rows(run, floor)
    rows += recorder_rows(run, floor, args.seconds)
    rows += video_rows(checks, run)
    print_table(rows)
    print(line)


if __name__ == "__main__":
    main()
