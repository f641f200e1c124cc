"""Live recording by ``ortf_recorder`` over loopback DDS, against its floor, in one table.

The scene publisher (``ortf_ros.ros.scene_publisher``, a process of its own) publishes
the teleop scene of issue 19 in real time: three cameras 640x480 @ 30 fps as raw rgb8
``Image`` (wrist, overhead, side; no depth), JointState 500 Hz, WrenchStamped 1 kHz, TF
100 Hz, the command (a JointState) 100 Hz, camera_info, ``/tf_static`` and the URDF;
reliable, keep-last 10. ``ortf_recorder`` (``python -m ortf_ros.ros.recorder_node`` with
config/record.yaml and the mapping ``ortf-bag2ortf --write-config`` writes for the same
scene, another process) records it as ONE episode: started as soon as
``~/start_episode`` succeeds (after the warm-up), stopped after ``--seconds`` (default
60) by ``~/stop_episode``, which commits. The floor, in the same run, is the recorder's
two jobs done bare, side by side: the same publisher for ``--seconds`` and a bare rclpy
subscriber process that only counts (``live_subscriber.py``: raw, reliable, the
recorder's depths, taking messages the way the recorder's ``Receiver`` does); and,
started when the publisher starts, one bare PyAV process per camera encoding the same
pictures at the same size and rate for as long, with the recorder's video settings
(``live_encode.py``). Printed:

1. Delivery per stream over the whole run: messages received / published, recorder and
   floor, and their ratio (target 1.0); beside it what the middleware lost on the way
   (gaps in the publication sequence numbers), and the recorder's drops (a full queue
   between subscription and pipeline; target 0) and late messages in the episode (its
   ``recording.json``).
2. The recorder: CPU during the episode (the recorder process and its encoder
   processes) against the floor's (bare encoding + counting subscriber; target ratio
   <= 1.2); peak PSS of the recorder and its encoders, summed (sampled every 0.2 s from
   /proc/PID/smaps_rollup, so the frame rings both sides map count once; target
   < 400 MB; RSS beside it) against the floor's processes'; latency publish -> staged
   p50/p99 from its status (origin: the publisher's DDS source timestamp; end: the
   pipeline thread handing the message to the assembler/writer; target p99 < 100 ms)
   against publish -> taken in the floor; how long ``~/stop_episode`` took (stop to
   committed).
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
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import av
import psutil
import yaml
from bench_bag2ortf import ForeignLoad
from live_encode import EncodeReport
from live_subscriber import Subscribed, count_publishers, stdin_event
from measure import MB, Row, print_table

from ortf_ros.io.video import VideoSettings
from ortf_ros.pipeline.flow import LIVE
from ortf_ros.pipeline.recorder import live_writer_config
from ortf_ros.ros.recorder_settings import mapping_from
from ortf_ros.synthetic.bag import write_scene_bag
from ortf_ros.synthetic.images import decode_frame_number
from ortf_ros.synthetic.scene import TeleopConfig
from ortf_ros.synthetic.schedule import receive_latency_ns, stamp_ns
from ortf_ros.synthetic.topics import CAMERA_FRAMES, TOPIC_ROBOT_DESCRIPTION, TOPIC_TF_STATIC

REPO = Path(__file__).resolve().parents[1]
RECORDER_PARAMS = REPO / "config" / "record.yaml"
SUBSCRIBER_SCRIPT = Path(__file__).with_name("live_subscriber.py")
ENCODE_SCRIPT = Path(__file__).with_name("live_encode.py")
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
PSS_TARGET_MB = 400  # summed over the recorder and its encoder processes
CPU_TARGET = 1.2  # recorder / (bare encoding + counting subscriber)
LATENCY_TARGET_MS = 100.0
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 600.0
EDGE_MS = 500  # a frame missing from a video that was published this close to the stop is told apart
DOMAIN = 110 + os.getpid() % 30  # (not the tests' 20-99, nor bench_playback's 100-101; children: unused)


# -- a child: the recorder's client (it starts rclpy) -------------------------------------------


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
        count_publishers(node, topics, publishers)
        spin_for(min(1.0, end - time.monotonic()))
    result["publishers"] = publishers
    during = [s for _, s in statuses if s.get("episode")]
    reply, asked, answered = call("stop_episode", STOP_TIMEOUT_S)
    result["stop"] = {"asked_ns": asked, "answered_ns": answered, "message": reply.message, "success": reply.success}
    result["episode_status"] = during[-1] if during else None
    print("stopped", flush=True)
    done = stdin_event()
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
    memory: dict[int, tuple[int, int]]  # pid -> (RSS, PSS) in bytes; PSS counts a page shared by n of them 1/n in each


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
    """CPU and memory of processes and their descendants (the recorder's encoder
    processes), sampled every ``SAMPLE_S`` in a thread."""

    roots: list[int]
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
        roots = []
        for pid in self.roots:
            with contextlib.suppress(psutil.Error):
                roots.append(psutil.Process(pid))
        while not self._stop.is_set():
            cpu: dict[int, float] = {}
            memory: dict[int, tuple[int, int]] = {}
            members = []
            for root in roots:
                with contextlib.suppress(psutil.Error):
                    members += [root, *root.children(recursive=True)]
            for member in members:
                with contextlib.suppress(psutil.Error):
                    times = member.cpu_times()
                    memory[member.pid] = (member.memory_info().rss, _pss(member.pid))
                    cpu[member.pid] = times.user + times.system
            self.samples.append(Sample(time.time_ns(), cpu, memory))
            self._stop.wait(SAMPLE_S)

    def peak(
        self, pids: Callable[[int], bool] = lambda pid: True, start_ns: int = 0, end_ns: int | None = None
    ) -> tuple[int, int]:
        """(peak RSS, peak PSS) of the processes ``pids`` selects, summed in each sample
        (those taken between two wall times, if given)."""
        rss = pss = 0
        for sample in self.samples:
            if sample.at_ns < start_ns or (end_ns is not None and sample.at_ns > end_ns):
                continue
            chosen = [memory for pid, memory in sample.memory.items() if pids(pid)]
            rss = max(rss, sum(r for r, _ in chosen))
            pss = max(pss, sum(p for _, p in chosen))
        return rss, pss

    def cpu_s(self, start_ns: int, end_ns: int, pids: Callable[[int], bool] = lambda pid: True) -> float:
        """CPU seconds of the processes ``pids`` selects between two wall times (a process
        first seen after ``start_ns`` counts from its birth; one gone before ``end_ns``, up
        to its last sample)."""
        before = [s for s in self.samples if s.at_ns <= start_ns]
        within = [s for s in self.samples if s.at_ns <= end_ns]
        if not within:
            return 0.0
        base = before[-1].cpu_s if before else {}
        last: dict[int, float] = {}
        for sample in within:
            last.update(sample.cpu_s)
        return sum(cpu - base.get(pid, 0.0) for pid, cpu in last.items() if pids(pid))


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
    cpu_s: float  # the counting subscriber, over the publisher's run
    seconds: float
    encode_cpus: float  # the bare encoders, summed, each over its own window, painting the frames taken off
    paint_cpus: float  # what was taken off
    settings: VideoSettings  # the encoders'
    encoders: list[EncodeReport]
    memory: dict[str, tuple[int, int]]  # "subscriber", "encoders", "all": peak (RSS, PSS) in bytes
    scene: dict[str, Any]

    @property
    def cpus(self) -> float:
        """The floor under the recorder's CPU: counting what it receives plus encoding its frames."""
        return self.cpu_s / self.seconds + self.encode_cpus


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


def floor_subscriptions() -> dict[str, Subscribed]:
    """The scene's topics as the recorder subscribes to them: (type, depth, latched)."""
    subscriptions = {}
    for topic, msgtype in scene_topics().items():
        latched = topic in LATCHED
        depth = 1 if latched else min(MAX_DEPTH, LIVE.queue_frames if topic in CAMERA_TOPICS else LIVE.queue_messages)
        subscriptions[topic] = (msgtype, depth, latched)
    return subscriptions


def recorder_video_settings(mapping: Path, parameters: list[str]) -> VideoSettings:
    """What the recorder's writer encodes each camera with: the mapping's ``writer:`` (and
    any ``-p writer.*`` given) over the live defaults, the encoder threads shared among the
    cameras (``live_writer_config``, ``VideoSettings.with_threads``)."""
    overrides = {}
    for parameter in parameters:
        name, _, value = parameter.partition(":=")
        if name.startswith("writer."):
            overrides[name] = yaml.safe_load(value)
    resolved = mapping_from(mapping, overrides)
    assert resolved is not None
    return live_writer_config(resolved).video.with_threads(len(CAMERA_TOPICS))


def start_encoders(tmp: Path, seconds: float, settings: VideoSettings, env: dict[str, str]) -> list[Child]:
    """The floor's bare PyAV encoders (``live_encode.py``), one per camera, each once it is ready."""
    encoders = []
    for topic in CAMERA_TOPICS:
        name = f"floor-encode-{topic.split('/')[1]}"
        command = [sys.executable, str(ENCODE_SCRIPT), topic, str(tmp / f"{name}.mp4"), f"{seconds:g}"]
        encoders.append(Child(name, [*command, json.dumps(asdict(settings))], tmp, env, pipes=True))
    for encoder in encoders:
        if not wait_for_line(encoder, "ready", encoder):
            raise SystemExit(f"{encoder.name} failed:\n{encoder.text()}")
    return encoders


def wait_for_publishing(publisher: Child) -> None:
    """Until the publisher logs that it starts publishing (its clock starts 20 ms later)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while "publishing " not in publisher.text():
        if publisher.process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the scene publisher never started publishing:\n{publisher.text()}")
        time.sleep(0.005)


def run_floor(
    tmp: Path, seconds: float, executor_kind: str, publisher_args: list[str], settings: VideoSettings
) -> FloorRun:
    """The counting subscriber fed by the publisher, and beside it the bare encoders fed
    the same cameras' frames for as long (started when the publisher starts publishing):
    the two halves of what the recorder does, loading the machine together as the
    recorder and its encoders do."""
    tmp.mkdir(parents=True)
    env = ros_environment(tmp)
    out = tmp / "floor.json"
    command = [sys.executable, str(SUBSCRIBER_SCRIPT), str(out), json.dumps(floor_subscriptions()), executor_kind]
    with children() as started:
        subscriber = Child("floor-subscriber", command, tmp, env, pipes=True)
        started.append(subscriber)
        encoders = start_encoders(tmp, seconds, settings, env)
        started += encoders
        encoder_pids = {encoder.process.pid for encoder in encoders}
        sampler = Sampler([subscriber.process.pid, *encoder_pids]).start()
        publisher = Child("floor-publisher", publisher_command(tmp, "floor", seconds, publisher_args), tmp, env)
        started.append(publisher)
        wait_for_publishing(publisher)
        for encoder in encoders:
            encoder.tell()
        if publisher.wait(seconds + 120) != 0:
            raise SystemExit(f"the scene publisher failed:\n{publisher.text()}")
        subscriber.tell()
        if subscriber.wait(60) != 0:
            raise SystemExit(f"the floor subscriber failed:\n{subscriber.text()}")
        reports = []
        for encoder in encoders:
            line = encoder.read_line()
            if encoder.wait(60) != 0 or not line:
                raise SystemExit(f"{encoder.name} failed:\n{encoder.text()}")
            reports.append((encoder.process.pid, EncodeReport(**json.loads(line))))
        sampler.stop()
    scene = json.loads((tmp / "floor-scene.json").read_text())
    summary = json.loads(out.read_text())
    check_alone(summary["publishers"])
    t0, end = scene["t0_wall_ns"], scene["end_wall_ns"]
    encode_cpus = paint_cpus = 0.0
    for pid, report in reports:
        window_s = (report.end_ns - report.start_ns) / 1e9
        encode_cpus += (sampler.cpu_s(report.start_ns, report.end_ns, {pid}.__contains__) - report.paint_s) / window_s
        paint_cpus += report.paint_s / window_s

    def is_encoder(pid: int) -> bool:
        return pid in encoder_pids

    return FloorRun(
        published={topic: data["published"] for topic, data in scene["topics"].items()},
        received=summary["received"],
        lost=summary["lost"],
        taken_ms=summary["taken_ms"],
        reception_ms=summary["reception_ms"],
        cpu_s=sampler.cpu_s(t0, end, lambda pid: not is_encoder(pid)),
        seconds=(end - t0) / 1e9,
        encode_cpus=encode_cpus,
        paint_cpus=paint_cpus,
        settings=settings,
        encoders=[report for _, report in reports],
        memory={
            "subscriber": sampler.peak(lambda pid: not is_encoder(pid)),
            "encoders": sampler.peak(is_encoder),
            "all": sampler.peak(),
        },
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
    encoders_cpu_s: float  # of which the encoder processes
    commit_cpu_s: float
    publisher_cpu_s: float
    # Peak (RSS, PSS) in bytes: "recorder" (its process), "encoders", "all" over the run, and
    # "all" while the episode was open ("episode"; the commit after it takes more)
    memory: dict[str, tuple[int, int]]
    scene: dict[str, Any]
    dataset: Path
    recorder_log: str


def run_recorder(
    tmp: Path, seconds: float, parameters: list[str], module: str, publisher_args: list[str], mapping: Path
) -> RecorderRun:
    tmp.mkdir(parents=True)
    env = ros_environment(tmp)
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
        sampler = Sampler([recorder.process.pid]).start()
        publisher = Child("recorder-publisher", publisher_command(tmp, "recorder", None, publisher_args), tmp, env)
        started.append(publisher)
        publisher_sampler = Sampler([publisher.process.pid]).start()
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
        encoders_cpu_s=sampler.cpu_s(start["answered_ns"], stop["asked_ns"], lambda pid: pid != recorder.process.pid),
        commit_cpu_s=sampler.cpu_s(stop["asked_ns"], stop["answered_ns"]),
        publisher_cpu_s=publisher_sampler.cpu_s(start["answered_ns"], stop["asked_ns"]),
        memory={
            "recorder": sampler.peak({recorder.process.pid}.__contains__),
            "encoders": sampler.peak(lambda pid: pid != recorder.process.pid),
            "all": sampler.peak(),
            "episode": sampler.peak(start_ns=start["answered_ns"], end_ns=stop["asked_ns"]),
        },
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


def cpu_rows(section: str, run: RecorderRun, floor: FloorRun | None, episode_s: float) -> list[Row]:
    """The recorder's CPU against its floor: encoding the same frames, plus counting what it receives."""
    cpu = run.cpu_s / episode_s
    rows = [
        Row(
            section,
            "CPU during the episode, recorder + encoders",
            f"{cpu:8.2f} CPUs",
            f"{run.cpu_s:.1f} s of CPU in {episode_s:.1f} s: recorder process "
            f"{(run.cpu_s - run.encoders_cpu_s) / episode_s:.2f} CPUs, encoders {run.encoders_cpu_s / episode_s:.2f}",
        )
    ]
    if floor is None:
        return rows
    video = floor.settings
    frames = ", ".join(str(e.frames) for e in floor.encoders)
    late = sum(e.late for e in floor.encoders)
    rows += [
        Row(
            section,
            f"floor: bare PyAV encoding, {len(floor.encoders)} processes",
            f"{floor.encode_cpus:8.2f} CPUs",
            f"{video.codec} {video.pix_fmt} crf {video.crf} {video.preset} gop {video.gop}, {video.threads} "
            f"thread(s) each; {frames} frames at {FPS} fps, {late} late; painting them "
            f"{floor.paint_cpus:.3f} CPUs, taken off",
        ),
        Row(
            section,
            "floor: the counting subscriber",
            f"{floor.cpu_s / floor.seconds:8.2f} CPUs",
            f"over {floor.seconds:.1f} s",
        ),
        Row(section, "floor: encoding + subscriber", f"{floor.cpus:8.2f} CPUs"),
        Row(
            section,
            "ratio recorder / floor",
            f"{cpu / floor.cpus:8.2f}",
            f"target <= {CPU_TARGET:g}: {'OK' if cpu / floor.cpus <= CPU_TARGET else 'OVER'}; "
            f"recorder - floor {cpu - floor.cpus:+.2f} CPUs",
        ),
    ]
    return rows


def memory_rows(section: str, run: RecorderRun, floor: FloorRun | None) -> list[Row]:
    """Peak PSS (and RSS) of the recorder and its encoders, against the floor's processes."""
    rss, pss = (m / MB for m in run.memory["all"])
    (recorder_rss, recorder_pss), (encoders_rss, encoders_pss) = run.memory["recorder"], run.memory["encoders"]
    parts = f"recorder process {recorder_pss / MB:.0f} MB, encoders {encoders_pss / MB:.0f} MB"
    rows = [
        Row(
            section,
            "peak PSS, recorder + encoders",
            f"{pss:8.0f} MB",
            f"target < {PSS_TARGET_MB} MB: {'OK' if pss < PSS_TARGET_MB else 'OVER'}; {parts}; while the episode "
            f"was open {run.memory['episode'][1] / MB:.0f} MB; summed, sampled every {SAMPLE_S:g} s",
        ),
        Row(
            section,
            "  peak RSS, the same",
            f"{rss:8.0f} MB",
            f"recorder process {recorder_rss / MB:.0f} MB, encoders {encoders_rss / MB:.0f} MB "
            "(the frame rings and the libraries counted in every process that maps them)",
        ),
    ]
    if floor is not None:
        floor_rss, floor_pss = (m / MB for m in floor.memory["all"])
        rows += [
            Row(
                section,
                "floor: subscriber + bare encoders, PSS",
                f"{floor_pss:8.0f} MB",
                f"subscriber {floor.memory['subscriber'][1] / MB:.0f} MB, encoders "
                f"{floor.memory['encoders'][1] / MB:.0f} MB; RSS {floor_rss:.0f} MB",
            ),
            Row(section, "ratio recorder / floor (PSS)", f"{pss / floor_pss:8.2f}"),
        ]
    return rows


def recorder_rows(run: RecorderRun, floor: FloorRun | None, seconds: float) -> list[Row]:
    section = "2. The recorder (process + encoder processes)"
    start, stop = run.client["start"], run.client["stop"]
    episode_s = (stop["asked_ns"] - start["answered_ns"]) / 1e9
    rows = cpu_rows(section, run, floor, episode_s)
    lateness = run.scene["timing"]["lateness_ms"]
    rows.append(
        Row(
            section,
            "  the publisher meanwhile",
            f"{run.publisher_cpu_s / episode_s:8.2f} CPUs",
            f"publish lateness p99 {lateness['p99']:.2f} ms, max {lateness['max']:.1f} ms",
        )
    )
    rows += memory_rows(section, run, floor)
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
    parser.add_argument("--child-client", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--topics", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
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
        mapping = write_mapping(tmp)
        settings = recorder_video_settings(mapping, args.recorder_param)
        floor = None
        if not args.no_floor:
            floor = run_floor(tmp / "floor", args.seconds, args.floor_executor, publisher_args, settings)
        run = run_recorder(
            tmp / "recorder", args.seconds, args.recorder_param, args.recorder_module, publisher_args, mapping
        )
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
