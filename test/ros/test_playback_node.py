"""ortf_player over real DDS on loopback: a subscriber in this process takes every message
as raw CDR and compares it with the dataset; the recording converts back to the dataset;
services, status, /clock; bad input."""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import rclpy

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout
from ortf_ros.pipeline.mapping import write_mapping
from ortf_ros.playback.publication import Publication
from ortf_ros.playback.replay import replay_mapping
from ortf_ros.playback.settings import default_settings
from support.child_process import kill_if_running
from support.playback_data import equal_columns, on, play, stamp_ns, teleop_dataset, vectors
from support.playback_ros import Recorder, play_through, start_player

LATCHED_KINDS = ("tf_static", "robot_description", "task")


@pytest.fixture(scope="module")
def ros() -> Iterator[None]:
    rclpy.init()
    yield
    rclpy.shutdown()


def recorder_for(dataset: Dataset, *extra: tuple[str, str]) -> Recorder:
    """Subscriptions to every topic the player publishes for ``dataset`` (and ``extra``)."""
    topics = Publication.of(dataset.manifest, default_settings().messages).topics()
    latched = {topic for topic, (kind, _) in topics.items() if kind in LATCHED_KINDS}
    return Recorder({topic: msgtype for topic, (_, msgtype) in topics.items()} | dict(extra), latched)


@dataclass
class Played:
    root: Path
    recorder: Recorder


@pytest.fixture(scope="module")
def played(ros: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Played]:
    """A converted 1.5 s teleop recording played once at 1x with config/playback.yaml."""
    tmp = tmp_path_factory.mktemp("played")
    root, _ = teleop_dataset(tmp, seconds=1.5)
    recorder = recorder_for(load_dataset(root))
    play_through(recorder, root, tmp / "player.log")
    yield Played(root, recorder)
    recorder.close()


def test_every_message_arrives_and_equals_the_dataset(played: Played) -> None:
    dataset = load_dataset(played.root)
    episode = dataset.episode(0)
    expected = Counter(item.topic for item in play(dataset))
    assert {topic: len(got) for topic, got in played.recorder.received.items()} == expected
    rec = played.recorder
    steps = episode.steps()
    joints = np.concatenate(
        [vectors(steps, "observation.state.joint_positions"), vectors(steps, "observation.state.gripper_position")],
        axis=1,
    )
    np.testing.assert_array_equal([m.position for m in rec.messages("/joint_states")], joints)
    native = episode.stream("ft_sensor")
    forces = [m.wrench.force for m in rec.messages("/ft_sensor/wrench")]
    wrenches = np.array([[f.x, f.y, f.z] for f in forces])
    np.testing.assert_array_equal(wrenches, vectors(native, "force"))
    for camera in ("wrist_camera", "depth_camera"):
        frames = episode.array(layout.image_column(camera))
        for message, index in zip(rec.messages(f"/{camera}/image_raw"), frames, strict=True):
            pixels = episode.frame(camera, int(index))
            assert bytes(message.data) == (pixels.astype("<u2") if camera == "depth_camera" else pixels).tobytes()
    ee = np.concatenate(
        [vectors(steps, "observation.state.ee_position"), vectors(steps, "observation.state.ee_orientation")], axis=1
    )
    for message, (x, y, z, qw, qx, qy, qz) in zip(rec.messages("/tf"), ee, strict=True):
        (transform,) = message.transforms
        t, q = transform.transform.translation, transform.transform.rotation
        assert (transform.header.frame_id, transform.child_frame_id) == ("base_link", "hand")
        assert (t.x, t.y, t.z, q.x, q.y, q.z, q.w) == (x, y, z, qx, qy, qz, qw)
    (static,) = rec.messages("/tf_static")
    for transform in static.transforms:
        frame = dataset.manifest.frames[transform.child_frame_id]
        q = transform.transform.rotation
        assert frame.transform is not None and transform.header.frame_id == frame.parent
        assert (q.w, q.x, q.y, q.z) == frame.transform.rotation
    (urdf,) = rec.messages("/robot_description")
    assert urdf.data == (played.root / layout.URDF).read_text()
    episode.close()


def test_stamps_are_the_recorded_times_shifted_to_now(played: Played) -> None:
    items = play(load_dataset(played.root))
    shifts = set()
    for topic in ("/joint_states", "/ft_sensor/wrench", "/wrist_camera/image_raw"):
        received = played.recorder.received[topic]
        for item, message, got in zip(on(items, topic), played.recorder.messages(topic), received, strict=True):
            shifts.add(stamp_ns(message) - item.time_ns)
            assert abs(got.receive_ns - stamp_ns(message)) < 5e9  # now, not 2023
    assert len(shifts) == 1  # one offset for the whole stretch of playback


def test_messages_arrive_on_schedule_at_1x(played: Played) -> None:
    """A correctness check of the schedule with generous bounds, not a benchmark (bench/)."""
    received = played.recorder.received["/joint_states"]
    stamps = np.array([stamp_ns(m) for m in played.recorder.messages("/joint_states")], dtype=np.int64)
    arrivals = np.array([r.receive_ns for r in received], dtype=np.int64)
    span = (arrivals[-1] - arrivals[0]) / (stamps[-1] - stamps[0])
    assert 0.9 < span < 1.5, span  # 1x: neither as fast as possible nor stalling
    lateness = (arrivals - stamps) - np.min(arrivals - stamps)
    assert np.median(lateness) < 50e6 and np.max(lateness) < 1e9


def test_recording_the_player_converts_back_to_the_same_dataset(played: Played, tmp_path: Path) -> None:
    first = load_dataset(played.root)
    played.recorder.write_bag(tmp_path / "recording")
    mapping = tmp_path / "mapping.yaml"
    # One episode per recording: over DDS the episode topic and the data travel separately,
    # so the boundary messages cannot be trusted to arrive before and after the data.
    write_mapping(replay_mapping(first.manifest, default_settings().messages, split_episodes=False), mapping)
    again = tmp_path / "again"
    assert bag2ortf([str(tmp_path / "recording"), "-o", str(again), "--config", str(mapping)]) == 0
    report = validate(again, strict=True)
    assert report.ok, [f.line() for f in report.findings]
    second = load_dataset(again)
    # State and action bit for bit. Timestamps are seconds since the episode's start, the
    # difference of two float64 epoch times (~240 ns apart at 1.7e9 s); "now" stamps move
    # both by the same offset, so the rounding, not the interval, differs: 2 ulp at most.
    equal_columns(first.episode(0), second.episode(0), timestamp_atol=2 * np.spacing(1.7e9))
    assert second.manifest.robot == first.manifest.robot
    assert second.manifest.observation_space == first.manifest.observation_space
    assert second.manifest.action_space.dimensions == first.manifest.action_space.dimensions
    fixed = {k: f for k, f in first.manifest.frames.items() if f.type == "fixed"}
    assert {k: f for k, f in second.manifest.frames.items() if f.type == "fixed"} == fixed
    assert (again / layout.URDF).read_bytes() == (played.root / layout.URDF).read_bytes()
    assert second.episode(0).task.instruction == first.episode(0).task.instruction


def statuses(recorder: Recorder) -> list[dict[str, object]]:
    return [json.loads(m.data) for m in recorder.messages("/ortf_player/status")]


def test_pause_resume_step_and_next_episode(ros: None, tmp_path: Path) -> None:
    root, _ = teleop_dataset(tmp_path, seconds=1.0, episodes=2, with_depth=False)
    dataset = load_dataset(root)
    recorder = recorder_for(dataset, ("/ortf_player/status", "std_msgs/msg/String"))
    log = tmp_path / "player.log"
    player = start_player(root, log, "start_paused:=true")
    try:
        recorder.wait_for_publishers(player, log)
        joint_states = recorder.received["/joint_states"]
        assert not recorder.call("pause").success  # already paused
        for step in (0, 1):
            answer = recorder.call("step")
            assert answer.success and answer.message == f"episode 000000 step {step}"
        recorder.spin_until(lambda: len(joint_states) >= 2, 10)
        assert len(recorder.received["/ft_sensor/wrench"]) > 0  # the samples up to the step came along
        recorder.spin_until(lambda: any(s["step"] == 1 and s["state"] == "paused" for s in statuses(recorder)), 10)
        assert len(joint_states) == 2
        assert recorder.call("next_episode").success
        assert recorder.call("step").message == "episode 000001 step 0"
        recorder.spin_until(lambda: len(joint_states) >= 3, 10)
        second = vectors(dataset.episode(1).steps(), "observation.state.joint_positions")
        np.testing.assert_array_equal(recorder.messages("/joint_states")[2].position[:7], second[0])
        assert recorder.call("resume").success
        recorder.spin_until(lambda: len(joint_states) >= 8, 10)
        assert recorder.call("pause").success
        recorder.spin_until(lambda: statuses(recorder)[-1]["state"] == "paused", 10)
        paused_at = len(joint_states)
        end = time.monotonic() + 0.3
        recorder.spin_until(lambda: time.monotonic() > end, 5)
        assert len(joint_states) <= paused_at + 1  # at most the message that was being published
        assert recorder.call("resume").success
        recorder.drain(player, log)
    finally:
        kill_if_running(player)
        recorder.close()
    # The first episode was left after two steps, the second played to its end.
    assert len(joint_states) == 2 + dataset.episodes[1].length
    assert [m.data for m in recorder.messages("/ortf/episode")] == [True, False, True, False]
    last = statuses(recorder)[-1]
    assert last["state"] == "finished" and last["episode_id"] == "000001" and last["rate"] == 1.0
    assert {"step", "time", "achieved_rate"} <= set(last)


def test_sim_stamps_and_clock_as_fast_as_possible(ros: None, tmp_path: Path) -> None:
    root, _ = teleop_dataset(tmp_path, seconds=0.5, with_depth=False)
    dataset = load_dataset(root)
    recorder = recorder_for(dataset, ("/clock", "rosgraph_msgs/msg/Clock"))
    play_through(recorder, root, tmp_path / "player.log", "stamps:=sim", "publish_clock:=true", "rate:=0.0")
    recorder.close()
    items = on(play(dataset), "/joint_states")
    assert [stamp_ns(m) for m in recorder.messages("/joint_states")] == [item.time_ns for item in items]
    clock = [m.clock.sec * 1_000_000_000 + m.clock.nanosec for m in recorder.messages("/clock")]
    assert clock and clock == sorted(clock)
    assert clock[0] <= items[0].time_ns and clock[-1] >= items[-1].time_ns - 10_000_000


def player_error(tmp_path: Path, dataset: Path | None, *parameters: str, code: int = 1) -> str:
    """The one error line of a player that does not start; exit ``code`` (2: a parameter,
    the node's command line, is wrong)."""
    log = tmp_path / "player.log"
    player = start_player(dataset, log, *parameters)
    assert player.wait(timeout=60) == code
    text = log.read_text()
    errors = [line for line in text.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1 and "Traceback" not in text, text
    return errors[0]


def test_bad_input_is_one_error_line_and_an_exit_code(played: Played, tmp_path: Path) -> None:
    assert "parameter dataset: required" in player_error(tmp_path, None, code=2)
    assert "not an ORTF dataset" in player_error(tmp_path, tmp_path)
    assert "parameter rate: expected a double" in player_error(tmp_path, played.root, "rate:=2", code=2)
    assert "no episode '3'" in player_error(tmp_path, played.root, "episodes:=['3']", code=2)
    broken = tmp_path / "broken"
    shutil.copytree(played.root, broken)
    load_dataset(broken).episode(0).video_path("depth_camera").unlink()
    error = player_error(tmp_path, broken)
    assert "fails validation" in error and "videos.missing" in error
