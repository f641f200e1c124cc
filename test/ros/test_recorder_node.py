"""ortf_recorder over real DDS on loopback, as a user runs it.

A scene publisher process (two RGB cameras, one raw and one JPEG-compressed, 16-bit
depth, joints, wrench, TF and static TF, robot_description, an action topic) and the
colcon-installed ``ortf_recorder``, started with the installed config/record.yaml and
the mapping ``ortf-bag2ortf --write-config`` wrote for a bag of the same scene. Three
episodes are recorded through the services (the third one ended by SIGINT), then the
dataset is checked against what was published, and against the bag of the same scene
converted offline.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa
import pytest
import rclpy
import yaml
from std_msgs.msg import String

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.dataset.reader import Dataset, Episode, load_dataset
from ortf_ros.dataset.recover import recover
from ortf_ros.dataset.staging import lock_dataset, unlock_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.synthetic.images import decode_frame_number, depth_frame
from ortf_ros.synthetic.motion import FINGERS_ONLY_EVERY, joint_positions
from ortf_ros.synthetic.robot import JOINTS
from ortf_ros.synthetic.schedule import seconds
from support.colcon_workspace import RECORDER_PARAMS, Workspace, build_workspace
from support.recorder_ros import REPO, Child, Scene, client_for, recorder_command, start_scene

EPISODE_S = 1.5
CAMERAS = ("wrist_camera", "overhead_camera")


@pytest.fixture(scope="module")
def ros() -> Iterator[None]:
    rclpy.init()
    yield
    rclpy.shutdown()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return build_workspace(tmp_path_factory.mktemp("colcon_ws"))


@dataclass
class Recorded:
    scene: Scene
    root: Path
    mapping: Path
    replies: dict[str, Any]
    exit_code: int
    log: str
    scene_report: dict[str, Any]
    tmp: Path


def write_mapping(scene: Scene, tmp: Path) -> Path:
    """What ``ortf-bag2ortf --write-config`` writes for a bag of the scene, steps at the
    wrist camera's frames (so that live and offline steps fall at the same instants)."""
    bag = scene.bag(tmp / "mapping_bag", duration_s=1.0, start_ns=time.time_ns())
    mapping = tmp / "mapping.yaml"
    assert bag2ortf([str(bag.path), "--write-config", str(mapping)]) == 0
    data = yaml.safe_load(mapping.read_text())
    assert data["joint_states"]["topic"] == "/joint_states" and data["action"]["topic"] == "/joint_command"
    assert data["cameras"]["overhead_camera"]["topic"] == "/overhead_camera/image_raw/compressed"
    data["step"] = {"rate_hz": None, "camera": "wrist_camera"}
    mapping.write_text(yaml.safe_dump(data, sort_keys=False))
    return mapping


@pytest.fixture(scope="module")
def recorded(ros: None, workspace: Workspace, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    tmp = tmp_path_factory.mktemp("recorded")
    scene = Scene()
    mapping = write_mapping(scene, tmp)
    root = tmp / "dataset"
    executable = workspace.executables / "ortf_recorder"  # where `ros2 run ortf_ros ortf_recorder` finds it
    params = workspace.share / RECORDER_PARAMS
    publisher = start_scene(scene, tmp)
    recorder = Child(
        recorder_command(executable, params, f"output:={root}", f"mapping:={mapping}", "warmup_s:=5.0"),
        tmp / "recorder.log",
        env=workspace.sourced_environment(),
    )
    client = client_for(recorder)
    replies: dict[str, Any] = {}
    try:
        client.say("task", "Pick up the red box")
        client.spin_until(
            lambda: bool(client.statuses) and client.statuses[-1].get("task") == "Pick up the red box", 30
        )
        replies["start0"] = client.start_when_ready()
        replies["start_again"] = client.call("start_episode")
        client.spin_for(EPISODE_S)
        replies["success0"] = client.call("set_success", True)
        client.say("operator_notes", "clean grasp")
        client.spin_until(lambda: client.episode_status().get("operator_notes") == "clean grasp", 10)
        replies["stop0"] = client.call("stop_episode")
        replies["stop_idle"] = client.call("stop_episode")
        replies["discard_idle"] = client.call("discard_episode")
        replies["start1"] = client.call("start_episode")
        client.spin_for(EPISODE_S)
        replies["success1"] = client.call("set_success", False)
        client.say("failure_reason", "dropped the box")
        client.spin_until(lambda: client.episode_status().get("failure_reason") == "dropped the box", 10)
        replies["stop1"] = client.call("stop_episode")
        replies["start2"] = client.call("start_episode")
        client.say("task", "Put the box on the shelf")
        client.spin_for(EPISODE_S)
        replies["status"] = client.status()
        exit_code = recorder.interrupt(twice=True)  # a terminal's Ctrl-C; the open episode is committed
        publisher.interrupt()
    finally:
        client.close()
        recorder.kill()
        publisher.kill()
    report = json.loads((tmp / "scene.json").read_text())
    return Recorded(scene, root, mapping, replies, exit_code, recorder.text(), report, tmp)


def test_services_record_three_episodes_and_sigint_commits_the_open_one(recorded: Recorded) -> None:
    r = recorded.replies
    assert recorded.exit_code == 0, recorded.log
    assert "Traceback" not in recorded.log
    assert r["start0"].success and r["stop0"].success and r["start1"].success and r["stop1"].success
    assert not r["start_again"].success and "is being recorded" in r["start_again"].message
    assert not r["stop_idle"].success and "no episode" in r["stop_idle"].message
    assert not r["discard_idle"].success
    assert r["success0"].success and "000000" in r["success0"].message
    status = r["status"]
    assert status["state"] == "recording" and status["episode"]["id"] == "000002"
    assert status["streams"]["/joint_states"]["dropped"] == 0 and status["streams"]["/joint_states"]["rate_hz"] > 50
    report = validate(recorded.root, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    dataset = load_dataset(recorded.root)
    records = [dataset.episode(i).record for i in range(len(dataset.episodes))]
    assert [rec.success for rec in records] == [True, False, None]
    assert [rec.failure_reason for rec in records] == [None, "dropped the box", None]
    assert [rec.operator_notes for rec in records] == ["clean grasp", None, None]
    tasks = [dataset.episode(i).task.instruction for i in range(3)]
    assert tasks == ["Pick up the red box", "Pick up the red box", "Put the box on the shelf"]
    assert all(rec.duration_seconds > EPISODE_S * 0.8 for rec in records)
    assert dataset.manifest.collection["source"] == "ortf_recorder"


def frame_count(episode: Episode, camera: str) -> int:
    with av.open(str(episode.video_path(camera))) as container:
        return sum(1 for _ in container.demux(video=0) if _.size)


def drops(root: Path, episode: Episode) -> dict[str, dict[str, int]]:
    path = episode.annotations_dir / "recording.json"
    streams: dict[str, dict[str, int]] = json.loads(path.read_text())["streams"]
    return streams


def test_every_frame_published_during_an_episode_is_in_its_video(recorded: Recorded) -> None:
    """Frames per camera = published in the episode's span minus reported drops (0): the
    frame numbers painted into the pictures run without a gap, depth bit-exact."""
    dataset = load_dataset(recorded.root)
    width, height = recorded.scene.width, recorded.scene.height
    for index in range(3):
        episode = dataset.episode(index)
        numbers = drops(recorded.root, episode)
        assert numbers and all(n["dropped"] == 0 for n in numbers.values()), numbers
        # The episode's accounting, over real DDS: received = read (nothing dropped), every frame kept in its video.
        accounts = {a.stream: a for a in episode.record.accounting or ()}
        for camera in CAMERAS:
            seqs = [decode_frame_number(episode.frame(camera, i)) for i in range(frame_count(episode, camera))]
            assert len(seqs) > EPISODE_S * 25, (camera, len(seqs))
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), (camera, seqs)
            counted = accounts[camera]
            assert counted.received == counted.read == counted.kept == counted.frames_in_video == len(seqs), counted
            assert counted.undecodable == 0 and not counted.dropped and counted.lost_in_transport is not None
        depth = [episode.frame("depth_camera", i) for i in range(frame_count(episode, "depth_camera"))]
        first = next(seq for seq in range(9500) if np.array_equal(depth[0], depth_frame(seq, width, height)))
        for offset, frame in enumerate(depth):
            assert frame.dtype == np.uint16 and np.array_equal(frame, depth_frame(first + offset, width, height))
        episode.close()


def vectors(table: pa.Table, column: str) -> np.ndarray:
    values = table[column].combine_chunks()
    array: np.ndarray = values.flatten().to_numpy().reshape(len(values), -1)
    return array


def test_joint_values_are_exact(recorded: Recorded) -> None:
    dataset = load_dataset(recorded.root)
    start_ns, rate = recorded.scene_report["start_ns"], recorded.scene.joint_rate
    names = dataset.manifest.native_streams["joint_states"].columns["position"].names or ()
    order = [JOINTS.index(n) for n in names]
    for index in range(3):
        native = dataset.episode(index).stream("joint_states")
        for stamp, row in zip(native["stamp_ns"].to_numpy(), vectors(native, "position"), strict=True):
            seq = round((int(stamp) - start_ns) * rate / 1e9)
            expected = joint_positions(seconds(int(stamp), start_ns))[order].astype(np.float32)
            if seq % FINGERS_ONLY_EVERY == FINGERS_ONLY_EVERY - 1:  # fingers only: the arm keeps its last values
                np.testing.assert_array_equal(row[7:], expected[7:])
            else:
                np.testing.assert_array_equal(row, expected)


def absolute_step_ns(episode: Episode) -> np.ndarray:
    """Each step's time on the header clock: the episode's clock origin is where a native
    sample's relative timestamp meets its stamp."""
    native = episode.stream("joint_states", ["timestamp", "stamp_ns"])
    origin = int(native["stamp_ns"][0].as_py()) - round(native["timestamp"][0].as_py() * 1e9)
    steps: np.ndarray = np.round(episode.steps(["timestamp"])["timestamp"].to_numpy() * 1e9).astype(np.int64)
    times: np.ndarray = steps + origin
    return times


COMPARED = (
    "action",
    "observation.state.joint_positions",
    "observation.state.joint_velocities",
    "observation.state.joint_torques",
    "observation.state.gripper_position",
    "observation.state.ee_position",
    "observation.state.ee_orientation",
    "observation.state.ft_sensor",
)


def test_a_bag_of_the_same_scene_converts_to_the_same_dataset(recorded: Recorded) -> None:
    """The same manifest, and at the same instants the same state, action and end-effector pose."""
    live = load_dataset(recorded.root)
    last_ns = max(int(absolute_step_ns(live.episode(i))[-1]) for i in range(3))
    start_ns = recorded.scene_report["start_ns"]
    bag = recorded.scene.bag(recorded.tmp / "scene_bag", duration_s=(last_ns - start_ns) / 1e9 + 1, start_ns=start_ns)
    offline_root = recorded.tmp / "offline"
    assert bag2ortf([str(bag.path), "-o", str(offline_root), "--config", str(recorded.mapping)]) == 0
    offline = load_dataset(offline_root)
    assert live.manifest.robot == offline.manifest.robot
    assert live.manifest.frames == offline.manifest.frames
    assert live.manifest.observation_space == offline.manifest.observation_space
    assert live.manifest.action_space == offline.manifest.action_space
    assert [sensor_key(s) for s in live.manifest.sensors] == [sensor_key(s) for s in offline.manifest.sensors]
    whole = offline.episode(0)
    offline_times = absolute_step_ns(whole)
    offline_steps = whole.steps(list(COMPARED))
    for index in range(3):
        episode = live.episode(index)
        times = absolute_step_ns(episode)
        inner = times < times[-1] - 200_000_000  # (the last steps of a live episode see no sample after them)
        where = np.searchsorted(offline_times, times[inner])
        assert np.array_equal(offline_times[where], times[inner]), "a live step at an instant the bag has no step at"
        steps = episode.steps(list(COMPARED))
        for column in COMPARED:
            np.testing.assert_array_equal(vectors(steps, column)[inner], vectors(offline_steps, column)[where], column)


def sensor_key(sensor: Any) -> tuple[Any, ...]:
    """What a sensor is, without the rate a live warm-up measures and a bag's index counts."""
    return (
        sensor.name,
        sensor.type,
        sensor.resolution,
        sensor.fps,
        sensor.intrinsics,
        sensor.distortion,
        sensor.extrinsics,
        sensor.mount_link,
    )


def test_sigkill_mid_episode_leaves_a_recoverable_partial_episode(ros: None, tmp_path: Path) -> None:
    scene = Scene()
    mapping = write_mapping(scene, tmp_path)
    root = tmp_path / "dataset"
    publisher = start_scene(scene, tmp_path)
    params = REPO / RECORDER_PARAMS
    recorder = Child(recorder_command(None, params, f"output:={root}", f"mapping:={mapping}"), tmp_path / "rec.log")
    client = client_for(recorder)
    try:
        assert client.start_when_ready().success
        client.spin_for(1.0)
        assert client.call("stop_episode").success
        assert client.call("start_episode").success
        client.spin_for(1.5)
        recorder.process.send_signal(signal.SIGKILL)
        assert recorder.process.wait(timeout=30) == -signal.SIGKILL
    finally:
        client.close()
        recorder.kill()
        publisher.kill()
    assert len(load_dataset(root).episodes) == 1  # the committed one, intact
    recover(root)
    report = validate(root)
    # (A frame a loaded machine delivered late is reported, not hidden: a warning, which is fine here.)
    assert report.ok and {f.rule for f in report.findings} <= {"alignment.tolerance"}, "\n".join(
        f.line() for f in report.findings
    )
    dataset: Dataset = load_dataset(root)
    assert len(dataset.episodes) == 2
    partial = dataset.episode(1)
    assert partial.record.length > 10  # (what the staging log had: all but the last steps)
    assert frame_count(partial, "wrist_camera") > 10


def test_start_refuses_naming_what_has_not_arrived_and_bad_setups_exit_with_one_line(
    ros: None, tmp_path: Path, small_dataset: tuple[Path, object]
) -> None:
    scene = Scene()
    mapping = write_mapping(scene, tmp_path)
    params = REPO / RECORDER_PARAMS
    recorder = Child(
        recorder_command(None, params, f"output:={tmp_path / 'never_made'}", f"mapping:={mapping}"),
        tmp_path / "rec.log",
    )
    client = client_for(recorder)
    try:
        reply = client.call("start_episode")  # no publisher at all
        assert not reply.success and "no frame yet on /wrist_camera/image_raw" in reply.message
        assert "no joint state yet on /joint_states" in reply.message
        status = client.status()
        assert status["state"] == "waiting" and "/joint_states" in status["unsubscribed"]
        assert recorder.interrupt() == 0
    finally:
        client.close()
        recorder.kill()
    assert not (tmp_path / "never_made").exists()  # nothing was recorded, nothing made
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    held = small_dataset[0]
    lock = lock_dataset(held)  # another writer holds the dataset
    for parameters, expected, exit_code in (  # 2: a parameter (the node's command line) is wrong
        ((f"output:={held}", f"mapping:={mapping}"), "another process is writing this dataset", 1),
        ((f"output:={blocker}", f"mapping:={mapping}"), "is a file; expected an ORTF dataset directory", 2),
        ((f"output:={tmp_path / 'x'}", f"mapping:={tmp_path / 'missing.yaml'}"), "missing.yaml", 2),
        ((f"output:={tmp_path / 'x'}", "cameras.wrist.topic:=/w"), "cameras.wrist.kind", 1),
        ((f"output:={tmp_path / 'x'}", "mapping:="), "Couldn't parse parameter override rule", 2),
        ((), "parameter output: required", 2),
        ((f"output:={tmp_path / 'x'}", "warmup_s:=5"), "parameter warmup_s: expected a double", 2),
    ):
        child = Child(recorder_command(None, params, *parameters), tmp_path / "bad.log")
        try:
            code = child.process.wait(timeout=60)
        finally:
            child.kill()
        text = child.text()
        assert code == exit_code and expected in text and "Traceback" not in text, (parameters, text)
        ours = [line for line in text.splitlines() if line.strip() and "[rcl]" not in line]  # (rcl logs its own too)
        assert len(ours) == 1, text
    unlock_dataset(held, lock)


def test_a_mapped_topic_of_another_type_is_reported_not_recorded(ros: None, tmp_path: Path) -> None:
    scene = Scene()
    mapping = write_mapping(scene, tmp_path)
    data = yaml.safe_load(mapping.read_text())
    data["joint_states"]["topic"] = "/arm/joint_states"
    mapping.write_text(yaml.safe_dump(data))
    publisher = start_scene(scene, tmp_path)
    recorder = Child(
        recorder_command(None, REPO / RECORDER_PARAMS, f"output:={tmp_path / 'ds'}", f"mapping:={mapping}"),
        tmp_path / "rec.log",
    )
    client = client_for(recorder)
    wrong = client.node.create_publisher(String, "/arm/joint_states", 10)  # a String where a JointState is mapped
    try:
        deadline = time.monotonic() + 30
        while not any(
            "/arm/joint_states: published as std_msgs/msg/String" in p for p in client.status().get("problems", [])
        ):
            assert time.monotonic() < deadline, recorder.text()
            wrong.publish(String(data="not a joint state"))
        reply = client.call("start_episode")
        assert not reply.success and "no joint state yet on /arm/joint_states" in reply.message
        assert recorder.interrupt() == 0
    finally:
        client.close()
        recorder.kill()
        publisher.kill()
    assert "expected sensor_msgs/msg/JointState" in recorder.text()
