"""ortf_recorder over real DDS with the publisher and the recorder on different clocks: a
simulation's stamps (seconds after 0) while the recorder is on wall time, and a recorder
on use_sim_time following a real /clock publisher while the publisher stamps wall time.
Either way the episode is made on the stamps' clock, as long as its data, and its
accounting says the offset (``pipeline.clock_offsets``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import pytest
import rclpy
from rosgraph_msgs.msg import Clock

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.synthetic.images import decode_frame_number
from ortf_ros.synthetic.schedule import stamp_ns
from support.recorder_ros import Scene, record_one_episode

S = 1_000_000_000
EPISODE_S = 2.0
SIM_START_NS = 5 * S  # a simulation's stamps: seconds after 0
SIM_CLOCK_NS = 1000 * S  # the /clock the recorder follows under use_sim_time


@pytest.fixture(scope="module")
def ros() -> Iterator[None]:
    rclpy.init()
    yield
    rclpy.shutdown()


class ClockPublisher:
    """A simulator's /clock at 100 Hz: ``SIM_CLOCK_NS`` when it starts, then as the wall clock goes."""

    def __init__(self) -> None:
        self.node = rclpy.create_node("ortf_test_clock")
        self.publisher = self.node.create_publisher(Clock, "/clock", 10)
        self.started_wall_ns = time.time_ns()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            now = SIM_CLOCK_NS + time.time_ns() - self.started_wall_ns
            message = Clock()
            message.clock.sec, message.clock.nanosec = divmod(now, S)
            self.publisher.publish(message)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.node.destroy_node()  # type: ignore[no-untyped-call]


def record(tmp: Path, scene_args: tuple[str, ...], recorder_args: tuple[str, ...]) -> tuple[Path, dict[str, int], str]:
    """One episode of the scene recorded over DDS: the dataset, the publisher's report, the recorder's log."""
    scene = Scene()
    bag = scene.bag(tmp / "mapping_bag", 1.0, time.time_ns())
    mapping = tmp / "mapping.yaml"
    assert bag2ortf([str(bag.path), "--write-config", str(mapping)]) == 0
    root = tmp / "dataset"
    log = record_one_episode(scene, tmp, mapping, root, EPISODE_S, *scene_args, recorder_args=recorder_args)
    return root, json.loads((tmp / "scene.json").read_text()), log


def check_on_the_stamps_clock(root: Path, start_ns: int, lag_ms: float) -> None:
    """One episode as long as its data, its steps among the stamps, each frame the one
    published nearest its step, and the offset said in the accounting."""
    # Strict, but for a few steps a camera missed: a loaded machine stalls the publisher (every
    # camera frames late), which is counted and warned; a clock error would move every step.
    report = validate(root, strict=True)
    assert report.ok or all(f.rule == "alignment.tolerance" for f in report.findings), [
        f.line() for f in report.findings
    ]
    episode: Episode = load_dataset(root).episode(0)
    assert 0.5 * EPISODE_S * 30 <= episode.record.length <= (EPISODE_S + 1.5) * 30, episode.record.length
    accounting = {a.stream: a for a in episode.record.accounting or ()}
    measured = accounting["joint_states"].clock_offset_ms
    assert measured is not None and abs(measured - lag_ms) < 500, (measured, lag_ms)
    native = episode.stream("joint_states", ["timestamp", "stamp_ns"])
    origin = int(native["stamp_ns"][0].as_py()) - round(native["timestamp"][0].as_py() * S)
    steps = episode.steps(["timestamp", "observation.images.wrist_camera.frame_index", "alignment.wrist_camera_ms"])
    times = origin + np.round(steps["timestamp"].to_numpy() * S).astype(np.int64)
    stamps = native["stamp_ns"].to_numpy()
    assert stamps[0] - S // 50 <= times[0] and times[-1] <= stamps[-1] + S // 50
    with av.open(str(episode.video_path("wrist_camera"))) as video:  # every frame recorded, by its number
        recorded = np.array(
            [stamp_ns(decode_frame_number(f.to_ndarray(format="rgb24")), 30, start_ns) for f in video.decode(video=0)]
        )
    off = []
    for t_ns, index, said_ms in zip(times.tolist(), *(steps[k].to_numpy().tolist() for k in (1, 2)), strict=True):
        seq = decode_frame_number(episode.frame("wrist_camera", int(index)))
        error_ns = abs(stamp_ns(seq, 30, start_ns) - t_ns)
        # Each step's alignment error is the truth about the frame it names ...
        assert abs(error_ns / 1e6 - said_ms) < 2.0, (t_ns, seq, error_ns / 1e6, said_ms)
        if error_ns > int(np.abs(recorded - t_ns).min()) + 2_000_000:
            off.append((t_ns, seq))
    # ... and nearly every one is the recorded frame nearest its step. (A stall of the loaded
    # machine's publisher leaves a gap, and the frame before it is then the nearest; a frame
    # that came later than max_latency_ms was not there when its step was made.) A clock
    # error would move every step.
    assert len(off) <= len(times) // 3, off[:5]
    episode.close()


def test_a_publisher_on_simulated_time_while_the_recorder_is_on_wall_time(ros: None, tmp_path: Path) -> None:
    root, scene, log = record(tmp_path, ("--start-ns", str(SIM_START_NS)), ())
    assert scene["start_ns"] == SIM_START_NS
    check_on_the_stamps_clock(root, SIM_START_NS, (scene["t0_wall_ns"] - SIM_START_NS) / 1e6)
    assert "clock: the stamps are" in log and "behind the receive times" in log, log


def test_a_recorder_on_use_sim_time_following_a_clock_publisher_while_the_publisher_stamps_wall_time(
    ros: None, tmp_path: Path
) -> None:
    clock = ClockPublisher()
    try:
        root, scene, log = record(tmp_path, (), ("use_sim_time:=true",))
    finally:
        clock.close()
    check_on_the_stamps_clock(root, scene["start_ns"], (SIM_CLOCK_NS - clock.started_wall_ns) / 1e6)
    assert "clock: the stamps are" in log and "ahead of the receive times" in log, log
    native = load_dataset(root).episode(0).stream("joint_states", ["receive_ns"])
    received = native["receive_ns"].to_numpy()
    assert SIM_CLOCK_NS < received[0] < SIM_CLOCK_NS + 120 * S  # (received on the /clock)
