"""The live recorder's pipeline without ROS: ``LiveSource`` queues and ``LiveRecorder``
driven by hand, messages of the synthetic scene put as subscription callbacks would,
on a clock the test moves."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout
from ortf_ros.pipeline.flow import LIVE
from ortf_ros.pipeline.mapping import TopicMapping, detect_mapping
from ortf_ros.pipeline.recorder import LiveRecorder, check_output, live_writer_config
from ortf_ros.pipeline.recording.state import RecorderSettings, Reply
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.pipeline.sources.live import LiveSource
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.messages import Messages
from ortf_ros.synthetic.scene import START_NS, TeleopConfig
from ortf_ros.synthetic.schedule import Event, schedule
from ortf_ros.synthetic.topics import (
    TOPIC_JOINT_STATES,
    TOPIC_ROBOT_DESCRIPTION,
    TOPIC_WRIST_CAMERA_INFO,
    TOPIC_WRIST_IMAGE,
)

NS = 1_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now_ns = START_NS

    def __call__(self) -> int:
        return self.now_ns


def test_a_full_queue_drops_and_counts_and_take_merges_by_receive_time() -> None:
    clock = Clock()
    source = LiveSource("test", replace(LIVE, queue_frames=2, queue_messages=3), clock)
    source.add_topic("/cam", "sensor_msgs/msg/Image", frames=True)
    source.add_topic("/joints", "sensor_msgs/msg/JointState")
    assert [source.put("/cam", b"frame", START_NS + i * 10) for i in range(4)] == [True, True, False, False]
    assert [source.put("/joints", b"j", START_NS + i * 7) for i in range(3)] == [True] * 3
    assert source.dropped() == {"/cam": 2} and source.received() == {"/cam": 4, "/joints": 3}
    assert source.input_time_ns() == START_NS  # the oldest message still queued
    taken = source.take()
    assert [item.raw.receive_ns - START_NS for item in taken] == [0, 0, 7, 10, 14]
    assert [item.raw.topic for item in taken][2:] == ["/joints", "/cam", "/joints"]
    assert source.health()["/cam"].queued == 0 and source.input_time_ns() == clock.now_ns
    assert source.put("/cam", b"again", START_NS + 100)  # room again once taken


@dataclass
class Live:
    source: LiveSource
    recorder: LiveRecorder
    clock: Clock
    events: Iterator[Event]
    messages: Messages
    thread: threading.Thread

    def feed(self, seconds: float, *, without: str = "", first_only: str = "") -> None:
        """Put the scene's next ``seconds`` of messages, the clock following their receive
        times, a tenth of a second at a time, each taken by the pipeline before the next
        (faster than real time, but never faster than the pipeline: nothing is dropped)."""
        until = self.clock.now_ns + round(seconds * NS)
        slice_end = self.clock.now_ns
        for event in self.events:
            if event.receive_ns > slice_end:
                self.drained()
                slice_end += NS // 10
            self.clock.now_ns = max(self.clock.now_ns, event.receive_ns)
            if event.topic == without or (event.topic == first_only and event.seq > 0):
                continue
            data = self.messages.serialize(event.topic, event.seq, event.stamp_ns, event.clock_ns)
            assert self.source.put(event.topic, data, event.receive_ns)
            if event.receive_ns >= until:
                break
        self.drained()

    def start(self, task: str | None = None) -> Reply:
        """``start`` as a client does: again while the video encoders are still starting
        (they are started when the dataset opens, and take a moment)."""
        deadline = time.monotonic() + 60
        while True:
            reply = self.recorder.start(task)
            if reply.success or "starting the video encoders" not in reply.message:
                return reply
            assert time.monotonic() < deadline, reply.message
            time.sleep(0.05)

    def drained(self) -> None:
        deadline = time.monotonic() + 10
        while any(h.queued for h in self.source.health().values()):
            assert time.monotonic() < deadline
            time.sleep(0.002)


@contextmanager
def live_recorder(
    tmp_path: Path, scene: TeleopConfig | None = None, change: Callable[[TopicMapping], TopicMapping] = lambda m: m
) -> Iterator[Live]:
    """A recorder fed by hand with ``scene`` (by default an endless-enough synthetic one), with
    the mapping detected from a bag of the synthetic scene (``change``d)."""
    if scene is None:
        scene = TeleopConfig(fmt="mcap", duration_s=60.0, with_depth=False, command_rate_hz=100)
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=0.5, with_depth=False)
    with BagSource([bag.path]) as opened:
        mapping: TopicMapping = change(detect_mapping(opened.topics()))
    clock = Clock()
    source = LiveSource("test", LIVE, clock)
    messages = Messages(scene)
    for topic, msgtype in scene.msgtypes().items():
        source.add_topic(topic, msgtype, frames="image" in topic)
    settings = RecorderSettings(
        output=tmp_path / "dataset", mapping=mapping, writer=live_writer_config(TopicMapping()), warmup_s=2.0
    )
    recorder = LiveRecorder(settings, source)
    thread = threading.Thread(target=recorder.run, daemon=True)
    thread.start()
    try:
        yield Live(source, recorder, clock, iter(schedule(scene)), messages, thread)
    finally:
        recorder.shutdown(commit=False)
        thread.join(timeout=30)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    with live_recorder(tmp_path) as state:
        yield state


def test_start_refuses_until_every_stream_delivered_then_records_an_episode(live: Live, tmp_path: Path) -> None:
    reply = live.recorder.start()
    assert not reply.success and f"no frame yet on {TOPIC_WRIST_IMAGE}" in reply.message
    assert f"no joint state yet on {TOPIC_JOINT_STATES}" in reply.message
    assert not (tmp_path / "dataset").exists()
    live.feed(1.5)
    reply = live.start("Stack the cups")
    assert reply.success, reply.message
    assert not live.recorder.start().success  # one at a time
    live.feed(2.0)
    assert live.recorder.set_success(True).success
    assert live.recorder.set_operator_notes("steady").success
    reply = live.recorder.stop()
    assert reply.success and "committed episode 000000" in reply.message
    assert not live.recorder.stop().success and not live.recorder.discard().success
    report = validate(tmp_path / "dataset", strict=True)
    assert report.ok, [f.line() for f in report.findings]
    episode = load_dataset(tmp_path / "dataset").episode(0)
    assert episode.task.instruction == "Stack the cups"
    assert (episode.record.success, episode.record.operator_notes) == (True, "steady")
    assert 1.8 < episode.record.duration_seconds < 2.1


def test_steps_are_decided_by_the_clock_while_every_topic_pauses(live: Live) -> None:
    live.feed(1.5)
    assert live.start().success
    live.feed(1.0)
    deadline = time.monotonic() + 10
    while live.recorder.status().get("episode", {}).get("steps", 0) < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    before = live.recorder.status()["episode"]["steps"]
    assert before < 30  # steps wait max_latency_ms for samples that may still come
    live.clock.now_ns += NS  # a second with no message at all: input time moves on by the clock alone
    deadline = time.monotonic() + 10
    while live.recorder.status()["episode"]["steps"] == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live.recorder.status()["episode"]["steps"] >= 29  # a second of 30 Hz steps, no longer held back


def test_a_message_put_before_the_start_is_outside_the_episode(live: Live, tmp_path: Path) -> None:
    live.feed(1.5)
    asked = live.clock.now_ns
    assert live.start().success
    live.feed(1.0)
    assert live.recorder.stop().success
    episode = load_dataset(tmp_path / "dataset").episode(0)
    native = episode.stream("joint_states", ["receive_ns"])
    assert min(native["receive_ns"].to_pylist()) > asked


def test_discard_and_shutdown_without_commit_leave_no_episode(live: Live, tmp_path: Path) -> None:
    live.feed(1.5)
    assert live.start().success
    live.feed(0.5)
    assert live.recorder.discard().success
    assert live.start().success
    live.feed(0.5)
    reply = live.recorder.shutdown(commit=False)
    assert reply.success and "discarded" in reply.message
    assert live.recorder.state == "closed"
    assert len(load_dataset(tmp_path / "dataset").episodes) == 0


def test_check_output_refuses_what_the_recorder_could_not_write(tmp_path: Path, small_dataset: object) -> None:
    # (a path that is no directory, or where none can be made: io.paths, with the parameters)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("x")
    garbled = tmp_path / "garbled"
    (garbled / "meta").mkdir(parents=True)
    (garbled / "meta" / "manifest.json").write_bytes(b"\x89PNG\xff")
    for output, expected in (
        (tmp_path / "full", "non-empty directory that is not an ORTF dataset"),
        (garbled, "manifest.json: not UTF-8 text"),
    ):
        with pytest.raises(Exception, match=expected):
            check_output(output)
    check_output(tmp_path / "new" / "dataset")  # made when the warm-up is done
    check_output(tmp_path / "ds")  # an existing dataset (small_dataset), appended to


def test_a_urdf_that_never_arrives_is_waited_for_warmup_s_then_recorded_without(live: Live, tmp_path: Path) -> None:
    live.feed(1.5, without=TOPIC_ROBOT_DESCRIPTION)
    reply = live.recorder.start()
    assert not reply.success and reply.message == f"not ready: no URDF yet on {TOPIC_ROBOT_DESCRIPTION}"
    live.feed(1.0, without=TOPIC_ROBOT_DESCRIPTION)  # past warmup_s (2 s) since the first message
    assert live.start().success
    assert any("no URDF on /robot_description (none came within 2 s)" in w for w in live.recorder.warnings)
    live.feed(1.0, without=TOPIC_ROBOT_DESCRIPTION)
    assert live.recorder.stop().success
    dataset = load_dataset(tmp_path / "dataset")
    assert dataset.manifest.robot.name == "unknown" and not (tmp_path / "dataset" / layout.URDF).exists()
    assert validate(tmp_path / "dataset", strict=True).ok


def test_a_urdf_topic_nothing_publishes_is_not_waited_for(live: Live, tmp_path: Path) -> None:
    live.recorder.settings = replace(live.recorder.settings, warmup_s=60.0)
    live.recorder.published = lambda topic: topic != TOPIC_ROBOT_DESCRIPTION
    live.feed(1.5, without=TOPIC_ROBOT_DESCRIPTION)
    assert not live.recorder.start().success  # the graph may not have shown every publisher yet
    live.feed(1.0, without=TOPIC_ROBOT_DESCRIPTION)
    assert live.start().success  # long before warmup_s: nothing publishes the URDF
    assert any("(nothing publishes it)" in w for w in live.recorder.warnings)


def test_a_camera_info_that_never_arrives_is_waited_for_warmup_s_then_the_intrinsics_are_unknown(
    live: Live, tmp_path: Path
) -> None:
    live.feed(1.5, without=TOPIC_WRIST_CAMERA_INFO)
    reply = live.recorder.start()
    assert not reply.success and reply.message == f"not ready: no camera_info yet on {TOPIC_WRIST_CAMERA_INFO}"
    live.feed(1.0, without=TOPIC_WRIST_CAMERA_INFO)  # past warmup_s (2 s) since the first message
    assert live.start().success
    warning = f"camera wrist_camera: no CameraInfo came on {TOPIC_WRIST_CAMERA_INFO}: intrinsics declared unknown"
    assert any(w.startswith(warning) for w in live.recorder.warnings), live.recorder.warnings
    live.feed(1.0, without=TOPIC_WRIST_CAMERA_INFO)
    assert live.recorder.stop().success
    manifest = load_dataset(tmp_path / "dataset").manifest
    wrist, overhead = manifest.cameras["wrist_camera"], manifest.cameras["overhead_camera"]
    assert wrist.intrinsics == {"unknown": True} and overhead.intrinsics is not None and "fx" in overhead.intrinsics
    assert [f.rule for f in validate(tmp_path / "dataset").findings] == ["manifest.intrinsics_unknown"]


def test_a_camera_whose_frames_come_late_is_waited_for_until_its_rate_can_be_told(live: Live, tmp_path: Path) -> None:
    """A camera's fps is its first frames' median interval: the dataset is not opened on
    one frame of it (a loaded publisher's first frames come late), so its rate is not
    guessed from the few messages the warm-up saw."""
    live.feed(1.5, first_only=TOPIC_WRIST_IMAGE)
    reply = live.recorder.start()
    assert not reply.success
    assert reply.message == f"not ready: too few frames yet on {TOPIC_WRIST_IMAGE} to tell its rate"
    live.feed(0.5)
    assert live.start().success
    live.feed(0.5)
    assert live.recorder.stop().success
    assert load_dataset(tmp_path / "dataset").manifest.cameras["wrist_camera"].fps == 30


def test_a_camera_info_topic_nothing_publishes_is_not_waited_for(live: Live) -> None:
    live.recorder.settings = replace(live.recorder.settings, warmup_s=60.0)
    live.recorder.published = lambda topic: topic != TOPIC_WRIST_CAMERA_INFO
    live.feed(1.5, without=TOPIC_WRIST_CAMERA_INFO)
    assert not live.recorder.start().success  # the graph may not have shown every publisher yet
    live.feed(1.0, without=TOPIC_WRIST_CAMERA_INFO)
    assert live.start().success  # long before warmup_s: nothing publishes it


def steps_settled(live: Live) -> int:
    """The episode's step count once the recorder has stopped adding steps (it decides them
    every ``Flow.flush_every_ms``)."""
    deadline = time.monotonic() + 10
    steps = -1
    while time.monotonic() < deadline:
        now = live.recorder.status()["episode"]["steps"]
        if now == steps:
            return steps
        steps = now
        time.sleep(0.3)
    raise AssertionError(f"steps still changing: {steps}")


def test_a_stop_a_while_after_the_last_message_ends_the_episode_where_its_data_does(live: Live, tmp_path: Path) -> None:
    live.feed(1.5)
    assert live.start().success
    live.feed(2.0)
    # The stop comes 3 s after the last message (longer than TF is waited for): input time moves on alone.
    live.clock.now_ns += 3 * NS
    steps = steps_settled(live)
    assert live.recorder.stop().success
    dataset = load_dataset(tmp_path / "dataset")
    episode, manifest = dataset.episode(0), dataset.manifest
    assert episode.record.length == steps
    cameras = list(manifest.cameras)
    table = episode.steps(["timestamp", *(layout.alignment_column(c) for c in cameras)])
    last_step = table.column("timestamp")[-1].as_py()
    last_joint = episode.stream("joint_states", ["timestamp"]).column("timestamp")[-1].as_py()
    joint_tolerance = manifest.stream_tolerance_ms("joint_states")
    assert joint_tolerance is not None and last_step <= last_joint + joint_tolerance / 1000
    for camera in cameras:  # the last step's frame is within the camera's tolerance, not held for it
        tolerance = manifest.stream_tolerance_ms(camera)
        assert tolerance is not None and table.column(layout.alignment_column(camera))[-1].as_py() <= tolerance
    assert not any(a.steps_outside_tolerance for a in episode.record.accounting or ())
    assert episode.record.duration_seconds == pytest.approx(last_step - table.column("timestamp")[0].as_py())
    report = validate(tmp_path / "dataset", strict=True)
    assert report.ok, [f.line() for f in report.findings]


@pytest.fixture
def live_wrist_tolerance(tmp_path: Path) -> Iterator[Live]:
    """The recorder with a loose mapping tolerance (70 ms) and the wrist camera's own 20 ms."""

    def change(mapping: TopicMapping) -> TopicMapping:
        cameras = tuple(
            replace(c, sync_tolerance_ms=20.0) if c.topic == TOPIC_WRIST_IMAGE else c for c in mapping.cameras
        )
        return replace(mapping, cameras=cameras, sync_tolerance_ms=70.0)

    with live_recorder(tmp_path, change=change) as state:
        yield state


def test_a_camera_two_frames_off_its_steps_is_counted_by_its_own_tolerance(
    live_wrist_tolerance: Live, tmp_path: Path
) -> None:
    live = live_wrist_tolerance
    live.feed(1.5)
    assert live.start().success
    live.feed(1.0)
    live.feed(0.1, without=TOPIC_WRIST_IMAGE)  # three frames missing: steps 33 and 67 ms from one
    live.feed(1.0)
    assert live.recorder.stop().success
    dataset = load_dataset(tmp_path / "dataset")
    manifest = dataset.manifest
    assert manifest.sync_tolerance_ms == 70.0
    assert (manifest.stream_tolerance_ms("wrist_camera"), manifest.stream_tolerance_ms("overhead_camera")) == (
        20.0,
        70.0,
    )
    episode = dataset.episode(0)
    wrist = episode.array(layout.alignment_column("wrist_camera"))
    late = int((wrist > 20.0).sum())
    assert late >= 2 and max(wrist) < 70.0  # within the dataset's tolerance: counted only by the camera's own
    account = {a.stream: a for a in episode.record.accounting or ()}
    assert account["wrist_camera"].steps_outside_tolerance == late
    assert not account["overhead_camera"].steps_outside_tolerance
    findings = validate(tmp_path / "dataset").findings
    assert [(f.rule, f.field) for f in findings] == [("alignment.tolerance", layout.alignment_column("wrist_camera"))]
