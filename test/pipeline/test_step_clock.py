"""The step clock (``StepSchedule``): steps only where every stream has data within its own
tolerance, gaps filled once data on their far side exists, a stream that stops for good
neither holding the steps back nor making the others' samples pile up.

First over real samplers, the samples coming as a recording's would, in time order, with
input time (the watermark) following them, ``due`` asked after each batch as the
assembler does; then through the converter, of recordings written by ``ortf_ros.synthetic``."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout
from ortf_ros.format.units import NS
from ortf_ros.pipeline.assembly.step_clock import GAP_WAIT_NS, StepSchedule
from ortf_ros.pipeline.mapping import StepClock, TopicMapping, detect_mapping
from ortf_ros.pipeline.offline import ConversionResult, convert_recording
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.pipeline.sync import StreamSampler, lerp_array
from ortf_ros.pipeline.tf import TfBuffer
from ortf_ros.quality.doctor import examine
from ortf_ros.synthetic.bag import write_scene_bag
from ortf_ros.synthetic.scene import TeleopConfig
from ortf_ros.synthetic.topics import CAMERAS, TOPIC_WRIST_IMAGE

MS = 1_000_000
STEP_NS = round(NS / 30)
JOINT_TOLERANCE_NS, CAMERA_TOLERANCE_NS = 17 * MS, 21 * MS


@dataclass
class Clocked:
    """A schedule over a 100 Hz joint stream (linear) and a 30 Hz camera (nearest)."""

    latency_ms: float = 200.0
    joints: StreamSampler[Any] = field(init=False)
    camera: StreamSampler[int] = field(init=False)
    schedule: StepSchedule = field(init=False)
    skipped: Counter[str] = field(default_factory=Counter)
    steps: list[int] = field(default_factory=list)
    held: int = 0  # the most samples the two samplers held at once
    fed_ns: int = 0  # how far ``feed`` has come

    def __post_init__(self) -> None:
        self.joints = StreamSampler("joint_states", "linear", interpolate=lerp_array)
        self.camera = StreamSampler("wrist", "nearest")
        config = TopicMapping(step=StepClock(rate_hz=30.0), max_latency_ms=self.latency_ms)
        self.schedule = StepSchedule(
            config,
            [("joint_states", self.joints), ("wrist", self.camera)],
            {"wrist": self.camera},
            TfBuffer(),
            ee_frames=None,
            tolerances_ns={"joint_states": JOINT_TOLERANCE_NS, "wrist": CAMERA_TOLERANCE_NS},
            skipped=self.skipped,
        )

    def feed(
        self,
        until_s: float,
        *,
        camera_from_s: float = 0.0,
        camera_until_s: float = 1e9,
        joints_from_s: float = 0.0,
        every_s: float = 0.1,
    ) -> None:
        """Both streams' samples from where the last call ended up to ``until_s`` (each only
        within its window), received 5 ms after their stamps, steps looked for every ``every_s``."""
        start, self.fed_ns = self.fed_ns, round(until_s * NS)
        for chunk in range(start, self.fed_ns, round(every_s * NS)):
            end = min(chunk + round(every_s * NS), self.fed_ns)
            for t in range(chunk, end, 10 * MS):
                if t >= joints_from_s * NS:
                    self.joints.add(t, np.array([t / NS]))
                frame = round(t * 30 / NS)
                if abs(frame * NS / 30 - t) < 5 * MS and camera_from_s * NS <= t < camera_until_s * NS:
                    self.camera.add(round(frame * NS / 30), frame)
                self.schedule.advance(t + 5 * MS)
            self.decide(final=False)

    def decide(self, final: bool) -> None:
        self.steps += list(self.schedule.due(final))
        self.schedule.prune()
        self.held = max(self.held, len(self.joints) + len(self.camera))


def test_steps_end_where_every_stream_has_data_not_where_input_time_is() -> None:
    clock = Clocked()
    clock.feed(2.0, camera_until_s=1.5)  # the cameras 0.5 s behind the joints at the end
    clock.schedule.advance(10**6 * NS)  # and input time far past both (receive times on another clock)
    clock.decide(final=False)
    clock.decide(final=True)
    last_frame = clock.camera.newest_ns
    assert last_frame is not None and clock.steps
    assert last_frame - STEP_NS < clock.steps[-1] <= last_frame + CAMERA_TOLERANCE_NS
    assert clock.steps == list(range(0, clock.steps[-1] + 1, STEP_NS))  # every step up to there, none after


def test_a_gap_is_stepped_through_once_data_on_its_far_side_exists() -> None:
    clock = Clocked()
    clock.feed(1.0)
    clock.feed(1.6, camera_until_s=0)  # the camera silent for 0.6 s (< GAP_WAIT_NS): the steps wait
    waiting = clock.steps[-1]
    assert waiting <= 1.0 * NS + CAMERA_TOLERANCE_NS
    clock.feed(3.0, camera_from_s=1.6)
    clock.decide(final=True)
    assert clock.steps == list(range(0, clock.steps[-1] + 1, STEP_NS))  # the gap's steps made, in order
    assert clock.steps[-1] > 2.9 * NS and not clock.skipped


def test_a_stream_that_stops_for_good_holds_neither_the_steps_nor_memory() -> None:
    clock = Clocked()
    clock.feed(1.0)
    clock.feed(30.0, camera_until_s=1.0)  # the camera never comes back
    # The steps go on GAP_WAIT_NS behind the joints (the camera held, which the steps count).
    assert 30 * NS - GAP_WAIT_NS - 0.2 * NS < clock.steps[-1] <= 30 * NS - GAP_WAIT_NS
    # The samplers hold the last GAP_WAIT_NS (and a second and a batch) of joints, not 29 s of them.
    assert clock.held < (GAP_WAIT_NS + 1.5 * NS) / (10 * MS)
    steps = len(clock.steps)
    clock.decide(final=True)  # the end: nothing past the camera's last frame is added
    assert len(clock.steps) == steps


def test_before_the_first_step_a_stream_without_data_nearby_is_skipped_not_held() -> None:
    clock = Clocked()
    # A first frame, then nothing for 5 s while the joints start: the episode begins where the camera does.
    clock.feed(0.5, camera_until_s=0.05, joints_from_s=0.5)
    clock.feed(5.0, camera_until_s=0)
    clock.feed(8.0, camera_from_s=5.0)
    clock.decide(final=True)
    assert clock.steps[0] > 5.0 * NS - GAP_WAIT_NS - STEP_NS
    assert clock.steps == list(range(clock.steps[0], clock.steps[-1] + 1, STEP_NS))
    assert sum(clock.skipped.values()) == len(range(500 * MS, clock.steps[0], STEP_NS))
    assert set(clock.skipped) == {"before wrist had a sample within its sync tolerance"}


def test_a_stream_that_never_delivers_leaves_the_others_a_bounded_history() -> None:
    clock = Clocked()
    clock.feed(30.0, camera_until_s=0)
    assert not clock.steps and clock.held < (GAP_WAIT_NS + 1.5 * NS) / (10 * MS)


# -- through the converter: a recording written by ortf_ros.synthetic ---------------------------


def convert(tmp_path: Path, config: TeleopConfig) -> tuple[ConversionResult, Path]:
    bag = write_scene_bag(tmp_path / "bag", config)
    with BagSource([bag.path]) as source:
        result = convert_recording(source, tmp_path / "ds", detect_mapping(source.topics()))
    return result, tmp_path / "ds"


def test_a_recording_whose_cameras_end_behind_the_joints_ends_with_the_cameras(tmp_path: Path) -> None:
    """A 10 Hz lidar sets the dataset's tolerance (62.5 ms); the cameras keep their own
    (20.9 ms): the wrist camera's gap of three frames is counted and warned, and the steps
    end where the cameras do, 0.5 s before the joints and the lidar."""
    cameras_end_s = 2.5
    silences = [(TOPIC_WRIST_IMAGE, 1.0, 1.1)] + [(t, cameras_end_s, math.inf) for t in CAMERAS]
    scene = TeleopConfig(fmt="mcap", duration_s=3.0, with_depth=False, lidar=True, silences_s=tuple(silences))
    result, root = convert(tmp_path, scene)
    dataset = load_dataset(root)
    manifest = dataset.manifest
    assert manifest.sync_tolerance_ms == 62.5
    tolerance = {name: manifest.stream_tolerance_ms(name) for name in ("wrist_camera", "joint_states", "lidar")}
    assert tolerance == {"wrist_camera": 20.9, "joint_states": 16.7, "lidar": 62.5}
    assert "per stream: joint_states 16.7 ms" in result.sync_tolerance.line()
    episode = dataset.episode(0)
    steps = episode.steps(
        ["timestamp", layout.alignment_column("wrist_camera"), layout.alignment_column("overhead_camera")]
    )
    times = steps.column("timestamp").to_numpy()
    # (The episode's time 0 is t = 0 of the scene: its first joint state and wrench sample.)
    last_frame_s = (cameras_end_s * scene.fps - 1) / scene.fps
    assert last_frame_s - 1 / scene.fps < times[-1] <= last_frame_s + 0.0209
    joints = episode.stream("joint_states", ["timestamp"]).column("timestamp").to_numpy()
    assert joints[-1] > times[-1] + 0.4  # the joints went on; no step holds a camera frame for them
    assert episode.record.duration_seconds == pytest.approx(times[-1] - times[0])
    assert episode.record.length == len(times) == round(times[-1] * 30) + 1
    # The three steps in the wrist camera's gap: 33, 67 and 33 ms from a frame, each counted.
    wrist = steps.column(layout.alignment_column("wrist_camera")).to_numpy()
    assert sorted(np.round(wrist[wrist > 20.9])) == [33, 33, 67]
    assert max(steps.column(layout.alignment_column("overhead_camera")).to_numpy()) <= 20.9
    assert dict(result.counts.outside_tolerance) == {"wrist_camera": 3}
    account = {a.stream: a for a in episode.record.accounting or ()}
    assert account["wrist_camera"].steps_outside_tolerance == 3
    assert not account["overhead_camera"].steps_outside_tolerance
    findings = validate(root).findings
    assert [(f.rule, f.field) for f in findings] == [("alignment.tolerance", layout.alignment_column("wrist_camera"))]
    assert "3 step(s) used a sample of 'wrist_camera' further than its 20.9 ms" in findings[0].message
    found = [(f.rule, f.stream) for f in examine(dataset)]
    assert found == [("steps.alignment", "wrist_camera")]


def test_receive_times_a_day_after_the_stamps_give_no_steps_past_the_data(tmp_path: Path) -> None:
    """Every receive time 119,000 s after its header stamp, no offset corrected: the steps
    are the data's, not the 33 hours up to where input time (receive time) stands."""
    topics = TeleopConfig(fmt="mcap", with_depth=False).rates()
    scene = TeleopConfig(fmt="mcap", with_depth=False, receive_offsets_s=tuple((t, 119_000.0) for t in topics))
    result, root = convert(tmp_path, scene)
    assert result.seconds < 120  # (seconds; before, hours)
    (record,) = load_dataset(root).episodes
    assert record.length == 60 and record.duration_seconds == pytest.approx(59 / 30)
    assert not result.counts.outside_tolerance
