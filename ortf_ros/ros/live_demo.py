"""The live part of ``ortf demo``: a scene published over loopback DDS, recorded into
episodes through ``ortf_recorder``'s services, then validated and shown.

    python -m ortf_ros.ros.live_demo OUT [--seconds 3]

``ortf demo`` runs this module as a child process after its offline part (the ROS-free
``ortf`` imports nothing of ``ortf_ros.ros``). It starts the scene publisher and the
recorder as children of its own, writing ``OUT/live`` with their logs in
``OUT/live-logs/``; an rclpy client node of this process waits until
``~/start_episode`` succeeds, records two episodes (the first labelled a success with
operator notes, the second a failure with a reason), printing each reply, then stops the
recorder with SIGINT (exit 0 expected) and the publisher, and prints ``ortf validate
--strict`` and ``ortf info`` of the dataset.

DDS stays on this machine: this process and its children run with
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a domain of their own (``domain_id``).
Without ROS 2 (``entry.ROS_PACKAGES`` not importable) it says so in one line and exits 0:
the live part is optional in the demo. The module imports ROS only in the functions that
talk to DDS, so that the check can run.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortf_ros.cli.demo_shared import demo_mapping, show_validated
from ortf_ros.errors import GET_ROS_2, DemoError, RecorderError
from ortf_ros.pipeline.mapping import write_mapping
from ortf_ros.ros.entry import ROS_PACKAGES
from ortf_ros.synthetic.bag import write_teleop_bag

if TYPE_CHECKING:
    from ortf_ros.ros.recorder_client import RecorderClient

RECORDER = "/ortf_recorder"
WIDTH, HEIGHT = 128, 96  # small frames: the demo shows the plumbing, and the machine may be busy
EPISODE_S = 3.0


def scene_streams() -> dict[str, bool]:
    """The scene's optional streams the live demo records: a 2D lidar and a point cloud
    (sensor_msgs), a microphone and detections when their message packages are installed
    (``audio_common_msgs``, ``vision_msgs``: a ROS install may lack them; the demo then
    records without, rather than fail)."""
    installed = {
        package: importlib.util.find_spec(package) is not None for package in ("audio_common_msgs", "vision_msgs")
    }
    return {"lidar": True, "audio": installed["audio_common_msgs"], "detections": installed["vision_msgs"]}


TASK = "Pick up the peg"
NOTES = "clean grasp, placed on the first try"
FAILURE = "dropped the peg while lifting"
READY_TIMEOUT_S = 30.0  # the recorder's start-up and warm-up (every mapped stream delivering)
CALL_TIMEOUT_S = 30.0  # a service answer (stop_episode commits the episode first)
EXIT_TIMEOUT_S = 30.0  # a child's exit after SIGINT (the recorder commits an open episode)
LOG_TAIL_LINES = 20


def domain_id() -> int:
    """This run's ``ROS_DOMAIN_ID``: 101..200, from the pid.

    Not 0, the domain every ROS 2 install uses by default (a robot or a user's nodes on
    this machine), and not 20..99, where the tests put their processes
    (``test/conftest.py``), so a demo and a test run side by side never hear each other;
    from the pid so that two demos at once most likely differ. (Fast DDS allows domains
    up to 232; above 101 its ports fall in Linux's ephemeral range, where a port taken by
    another socket makes a participant pick the next one, which is harmless on loopback.)
    """
    return 101 + os.getpid() % 100


def params_file() -> Path | None:
    """config/record.yaml of the code that runs: the source tree's when this module runs
    from one (a checkout, an editable or ``--symlink-install`` build), else the installed
    package's share directory (ament_index, or ``pip install .``'s data files); None: the
    parameters given on the command line and the node's defaults are enough."""
    source_tree = Path(__file__).resolve().parents[2] / "config" / "record.yaml"
    if source_tree.is_file():
        return source_tree
    shares = []
    # (no ament_index_python, or ortf_ros not in the index: PackageNotFoundError is a KeyError)
    with suppress(ModuleNotFoundError, LookupError):
        from ament_index_python.packages import get_package_share_directory

        shares.append(Path(get_package_share_directory("ortf_ros")))
    shares.append(Path(sys.prefix) / "share" / "ortf_ros")
    return next((path for share in shares if (path := share / "config" / "record.yaml").is_file()), None)


def ros_missing() -> str | None:
    """The ROS 2 package that cannot be imported (None: ROS 2 is there), told the way
    ``entry`` tells it: any other missing module is a bug and raised."""
    try:
        for module in ("rclpy", "std_msgs.msg", "std_srvs.srv"):
            importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in ROS_PACKAGES and not missing.endswith("_msgs"):
            raise
        return missing
    return None


def say(line: str = "") -> None:
    print(line, flush=True)  # (``ortf demo`` may be piped: the user watches it happen)


@contextmanager
def ros_environment(domain: int, log_dir: Path) -> Iterator[None]:
    """Loopback discovery, ``domain`` and ROS logs in ``log_dir``, for this process (rcl
    reads them when rclpy is initialised) and the children built from ``os.environ``;
    the previous values are put back after."""
    values = {
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "ROS_DOMAIN_ID": str(domain),
        "ROS_LOG_DIR": str(log_dir),
        "PYTHONUNBUFFERED": "1",  # (the children's logs are complete when a tail is printed)
    }
    saved = {name: os.environ.get(name) for name in [*values, "ROS_LOCALHOST_ONLY"]}
    os.environ.update(values)
    os.environ.pop("ROS_LOCALHOST_ONLY", None)  # (the older spelling; Jazzy warns when both are set)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class Child:
    """A child process, its output in a log file."""

    def __init__(self, name: str, command: Sequence[str], log: Path) -> None:
        self.name, self.log = name, log
        with log.open("w") as out:
            self.process = subprocess.Popen(
                list(command), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=dict(os.environ)
            )

    def running(self) -> bool:
        return self.process.poll() is None

    def interrupt(self) -> int:
        """SIGINT to its own pid (its process group would get it twice), and its exit code."""
        if self.running():
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise DemoError(f"{self.name} did not exit within {EXIT_TIMEOUT_S:g} s of SIGINT") from None

    def kill(self) -> None:
        if self.running():
            self.process.kill()
        self.process.wait()

    def tail(self) -> list[str]:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.is_file() else []
        return lines[-LOG_TAIL_LINES:]


def write_scene_mapping(path: Path) -> None:
    """The mapping ``ortf-bag2ortf --write-config`` writes for a short bag of the scene (as
    the offline part's): the recorder is given it instead of detecting one from the graph,
    so that it starts without waiting for the graph to settle."""
    with tempfile.TemporaryDirectory(prefix="ortf_live_demo_") as tmp:
        streams = scene_streams()
        bag = write_teleop_bag(
            Path(tmp) / "scene",
            "mcap",
            duration_s=0.5,
            width=WIDTH,
            height=HEIGHT,
            lidar=streams["lidar"],
            detections=streams["detections"],
            audio="ros2" if streams["audio"] else None,
        )
        mapping = demo_mapping(bag.path)
    write_mapping(mapping, path)


def run_live_demo(out: Path, *, episode_s: float = EPISODE_S) -> int:
    """Record two episodes of the live scene into ``out/live``; 0 when they are recorded
    and the dataset is valid (strict), 1 otherwise (with the tails of the children's logs)."""
    root, logs = out / "live", out / "live-logs"
    logs.mkdir(parents=True, exist_ok=True)
    mapping = out / "live-mapping.yaml"
    write_scene_mapping(mapping)
    domain = domain_id()
    children: list[Child] = []
    try:
        with ros_environment(domain, logs / "ros"):
            record(root, logs, mapping, domain, episode_s, children)
    except DemoError as exc:
        print(f"\nlive demo failed: {exc}", file=sys.stderr, flush=True)
        for child in children:
            print(f"--- {child.log} (last lines) ---", file=sys.stderr)
            print("\n".join(child.tail()) or "(empty)", file=sys.stderr, flush=True)
        return 1
    finally:
        for child in children:
            child.kill()
    return 0 if show_validated(root, say) else 1


def record(root: Path, logs: Path, mapping: Path, domain: int, episode_s: float, children: list[Child]) -> None:
    """Start the children (into ``children``, which the caller kills), record, stop them."""
    say(f"\nlive recording over loopback DDS (ROS_DOMAIN_ID={domain}, discovery LOCALHOST); logs in {logs}/")
    publisher = Child(
        "the scene publisher",
        [
            sys.executable,
            "-m",
            "ortf_ros.ros.scene_publisher",
            *("--width", str(WIDTH), "--height", str(HEIGHT)),
            *(f"--{stream}" for stream, on in scene_streams().items() if on),
            *("--report", str(logs / "scene.json")),
        ],
        logs / "scene_publisher.log",
    )
    children.append(publisher)
    extras = ", ".join(stream for stream, on in scene_streams().items() if on)
    say(
        f"  scene publisher (pid {publisher.process.pid}): the same teleop scene, {WIDTH}x{HEIGHT}, in real time "
        f"(with {extras})"
    )
    params = params_file()
    command = [sys.executable, "-m", "ortf_ros.ros.recorder_node", "--ros-args"]
    if params is not None:
        command += ["--params-file", str(params)]
    for parameter in (f"output:={root}", f"mapping:={mapping}", "warmup_s:=5.0"):
        command += ["-p", parameter]
    recorder = Child("the recorder", command, logs / "recorder.log")
    children.append(recorder)
    say(f"  ortf_recorder (pid {recorder.process.pid}) -> {root}")
    say(f"    parameters: {params or 'the defaults'}, mapping {mapping}")
    from ortf_ros.ros.recorder_client import RecorderClient

    client = RecorderClient.create("ortf_live_demo", domain_id=domain, alive=recorder.running)
    try:
        publish(client, "task", TASK)
        # (the label topics and the services are served side by side: the task must be in
        # before the first start, or that episode starts with the default and is renamed)
        client.spin_until(lambda: bool(client.statuses) and client.statuses[-1].get("task") == TASK, 30.0, "the task")
        start_when_ready(client)
        episode(client, episode_s, True, "operator_notes", NOTES)
        show("start_episode", client.call("start_episode", timeout_s=CALL_TIMEOUT_S))
        episode(client, episode_s, False, "failure_reason", FAILURE)
    except RecorderError as exc:
        raise DemoError(str(exc)) from None
    finally:
        client.close()
    code = recorder.interrupt()
    say(f"  SIGINT -> ortf_recorder exited {code} (nothing open to commit)")
    if code != 0:
        raise DemoError(f"the recorder exited {code} after SIGINT")
    publisher.interrupt()
    scene = json.loads((logs / "scene.json").read_text())
    timing = scene["timing"]
    say(
        f"  SIGINT -> scene publisher exited {publisher.process.returncode}: {timing['published']} messages on "
        f"{len(scene['topics'])} topics in {scene['elapsed_s']:.1f} s"
    )


def show(service: str, reply: Any) -> None:
    say(f"  {service}: {reply.message}")
    if not reply.success:
        raise DemoError(f"{service} refused: {reply.message}")


def publish(client: RecorderClient, label: str, text: str) -> None:
    client.say(label, text, timeout_s=READY_TIMEOUT_S)
    say(f"  {RECORDER}/{label} <- {text!r}")


def start_when_ready(client: RecorderClient) -> None:
    """``~/start_episode`` until the warm-up has every stream (it refuses, naming what is missing)."""
    say(f"  waiting for the recorder's warm-up ({RECORDER}/start_episode refuses until every stream delivered)")
    refusals: list[str] = []

    def refused(message: str) -> None:
        if not refusals or refusals[-1] != message:
            say(f"  start_episode: {message}")
            refusals.append(message)

    show("start_episode", client.start_when_ready(READY_TIMEOUT_S, on_refusal=refused))


def episode(client: RecorderClient, episode_s: float, success: bool, label: str, text: str) -> None:
    """Label the episode just started, let it record ``episode_s``, check the labels in
    ``~/status`` and stop it."""
    started = time.monotonic()
    reply = client.call("set_success", success, timeout_s=CALL_TIMEOUT_S)
    show(f"set_success({str(success).lower()})", reply)
    publish(client, label, text)
    client.spin_for(episode_s - (time.monotonic() - started))

    def labelled() -> bool:
        current = client.episode_status()
        return current.get(label) == text and current.get("task") == TASK and current.get("success") is success

    client.spin_until(labelled, 10.0, f"waiting for {RECORDER}/status to show the labels")
    status = client.statuses[-1]
    current, streams = status["episode"], status["streams"]
    dropped = sum(stream["dropped"] + stream["lost_in_transport"] for stream in streams.values())
    say(
        f"  {RECORDER}/status: episode {current['id']} recording ({current['elapsed_s']:.1f} s), "
        f"success {str(success).lower()}, {label} {text!r}; {len(streams)} streams, {dropped} message(s) lost"
    )
    show("stop_episode", client.call("stop_episode", timeout_s=CALL_TIMEOUT_S))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ortf_ros.ros.live_demo",
        description="Record a scene published over loopback DDS with ortf_recorder (ortf demo's live part).",
    )
    parser.add_argument("output", type=Path, help="the demo's directory: writes live/, live-logs/, live-mapping.yaml")
    parser.add_argument("--seconds", type=float, default=EPISODE_S, help="length of each episode")
    args = parser.parse_args(argv)
    missing = ros_missing()
    if missing is not None:
        say(f"\nlive recording skipped: it needs ROS 2 ({missing} is not importable): {GET_ROS_2}")
        return 0
    signal.signal(signal.SIGTERM, _interrupted)  # (the children are killed on the way out)
    try:
        return run_live_demo(args.output, episode_s=args.seconds)
    except KeyboardInterrupt:
        print("live demo interrupted", file=sys.stderr)
        return 130


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
