"""ortf-bag2ortf on generated recordings with analytically known content, in all three
formats, and on the real third-party bags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa
import pytest
from rosbags.rosbag2 import Writer as Rosbag2Writer
from rosbags.typesys import Stores, get_typestore

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.dataset.logs import StepRows
from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.errors import ConversionError
from ortf_ros.fleet.settings import ConversionSettings
from ortf_ros.format import layout
from ortf_ros.io import staged_video
from ortf_ros.io import video as video_io
from ortf_ros.io.mapped_file import MappedFile, locate
from ortf_ros.pipeline.mapping import (
    ActionMapping,
    EpisodeSplit,
    StepClock,
    TopicMapping,
    detect_mapping,
    load_mapping,
    with_writer,
    write_mapping,
)
from ortf_ros.pipeline.offline import CONVERTER_STEP_BATCH, convert_recording
from ortf_ros.pipeline.prologue import Prologue, camera_fps
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.pipeline.tf import Pose, interpolate_pose, xyzw_to_wxyz
from ortf_ros.synthetic.bag import TeleopBagInfo, write_teleop_bag
from ortf_ros.synthetic.images import decode_frame_number, depth_frame
from ortf_ros.synthetic.motion import FINGERS_ONLY_EVERY, joint_positions, wrench
from ortf_ros.synthetic.robot import ARM_JOINTS, FINGER_JOINTS, JOINTS
from ortf_ros.synthetic.scene import START_NS, BagFormat
from ortf_ros.synthetic.schedule import seconds, stamp_ns
from ortf_ros.synthetic.tf import dynamic_transforms
from ortf_ros.synthetic.topics import TOPIC_DEPTH_IMAGE

RESOURCES = Path(__file__).resolve().parents[1] / "support" / "resources"
TOLERANCE_MS = 25.0  # the 50 Hz command is up to 20 ms old under "latest"


def mapping_for(bag: Path) -> TopicMapping:
    with BagSource(bag) as source:
        config = detect_mapping(source.topics())
    assert config.joint_states is not None
    return replace(
        config,
        joint_states=replace(config.joint_states, policy="latest"),
        sync_tolerance_ms=TOLERANCE_MS,
        labels=replace(config.labels, task="Pick up the peg", success=True),
    )


def convert(bag: TeleopBagInfo, out: Path, tmp: Path) -> Episode:
    config_path = tmp / "mapping.yaml"
    config = mapping_for(bag.path)
    rated = tuple(replace(w, range_force=580.0, range_torque=20.0) for w in config.wrenches)  # from a data sheet
    write_mapping(replace(config, wrenches=rated), config_path)
    assert bag2ortf([str(bag.path), "-o", str(out), "--config", str(config_path)]) == 0
    return load_dataset(out).episode(0)


@pytest.fixture(scope="module", params=["mcap", "sqlite3", "ros1"])
def converted(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[TeleopBagInfo, Episode]:
    tmp = tmp_path_factory.mktemp(request.param)
    bag = write_teleop_bag(tmp / f"bag-{request.param}", request.param, duration_s=1.5)
    return bag, convert(bag, tmp / "ds", tmp)


def origin_ns(episode: Episode) -> float:
    """Absolute time of the episode's relative time 0, from a native table's raw stamps."""
    samples = episode.stream("ft_sensor", ["timestamp", "stamp_ns"])
    return float(samples["stamp_ns"][0].as_py()) - float(samples["timestamp"][0].as_py()) * 1e9


def vectors(table: pa.Table, column: str) -> np.ndarray:
    values = table[column].combine_chunks()
    array: np.ndarray = values.flatten().to_numpy().reshape(len(values), -1)
    return array


def test_output_validates_strictly(converted: tuple[TeleopBagInfo, Episode]) -> None:
    _, episode = converted
    report = validate(episode.dataset.root, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    assert episode.record.length >= 40
    assert episode.task.instruction == "Pick up the peg"
    assert episode.record.success is True


def test_joint_values_exact_after_name_reordering(converted: tuple[TeleopBagInfo, Episode]) -> None:
    _, episode = converted
    native = episode.stream("joint_states")
    positions = vectors(native, "position")
    stamps = native["stamp_ns"].to_numpy()
    names = episode.dataset.manifest.native_streams["joint_states"].columns["position"].names
    assert names == ARM_JOINTS + FINGER_JOINTS
    order = [JOINTS.index(n) for n in names]
    for seq, (stamp, row) in enumerate(zip(stamps, positions, strict=True)):
        expected = joint_positions(seconds(int(stamp)))[order]
        assert stamp == stamp_ns(seq, 100)
        if seq % FINGERS_ONLY_EVERY == FINGERS_ONLY_EVERY - 1:  # fingers only: the arm keeps its last values
            np.testing.assert_array_equal(row[7:], expected[7:].astype(np.float32))
        else:
            np.testing.assert_array_equal(row, expected.astype(np.float32))
    # each step's state is the joint sample it names ("latest" in the test mapping)
    steps = episode.steps()
    used = steps[layout.stream_index_column("joint_states")].to_numpy()
    np.testing.assert_array_equal(vectors(steps, "observation.state.joint_positions"), positions[used, :7])
    np.testing.assert_array_equal(vectors(steps, "observation.state.gripper_position"), positions[used, 7:])


def test_relative_times_are_exact(converted: tuple[TeleopBagInfo, Episode]) -> None:
    """Times from the episode's start are made from integer nanoseconds, so they are exact
    to float64's precision: seconds since the epoch, subtracted, would be off by up to
    0.2 us. The 1 kHz stream's times differ by its stamps' differences; the steps lie on
    the control rate's grid."""
    _, episode = converted
    native = episode.stream("ft_sensor", ["timestamp", "stamp_ns"])
    times, stamps = native["timestamp"].to_numpy(), native["stamp_ns"].to_numpy()
    np.testing.assert_allclose(times - times[0], (stamps - stamps[0]) / 1e9, rtol=0, atol=1e-12)
    rate = episode.dataset.manifest.action_space.control_frequency_hz
    assert rate is not None
    steps = episode.array("timestamp")
    np.testing.assert_allclose(steps - steps[0], np.arange(len(steps)) * round(1e9 / rate) / 1e9, rtol=0, atol=1e-12)


def test_end_effector_pose_from_tf_is_interpolated_and_wxyz(converted: tuple[TeleopBagInfo, Episode]) -> None:
    _, episode = converted
    assert episode.dataset.manifest.observation_space.state["ee_orientation"].order == "wxyz"
    steps = episode.steps(["timestamp", "observation.state.ee_position", "observation.state.ee_orientation"])
    start = origin_ns(episode)
    for t_rel, position, rotation in zip(
        steps["timestamp"].to_numpy(),
        vectors(steps, "observation.state.ee_position"),
        vectors(steps, "observation.state.ee_orientation"),
        strict=True,
    ):
        t_ns = start + t_rel * 1e9
        seq = int((t_ns - START_NS) // 1e7)  # /tf at 100 Hz
        s0, s1 = stamp_ns(seq, 100), stamp_ns(seq + 1, 100)
        u = (t_ns - s0) / (s1 - s0)
        pose = Pose.identity()
        for before, after in zip(dynamic_transforms(seconds(s0)), dynamic_transforms(seconds(s1)), strict=True):
            p0 = Pose(np.array(before.translation), xyzw_to_wxyz(before.rotation_xyzw))
            p1 = Pose(np.array(after.translation), xyzw_to_wxyz(after.rotation_xyzw))
            pose = pose.compose(interpolate_pose(p0, p1, u))
        np.testing.assert_allclose(position, pose.translation, atol=1e-6)
        sign = np.sign(np.dot(rotation, pose.rotation))
        np.testing.assert_allclose(rotation, sign * pose.rotation, atol=1e-6)


def test_each_step_uses_the_frame_published_nearest_its_time(converted: tuple[TeleopBagInfo, Episode]) -> None:
    _, episode = converted
    start = origin_ns(episode)
    period = 1e9 / 30
    steps = episode.steps(["timestamp", layout.image_column("wrist_camera")])
    for t_rel, index in zip(steps["timestamp"].to_numpy(), steps[1].to_numpy(), strict=True):
        seq = decode_frame_number(episode.frame("wrist_camera", int(index)))
        t_ns = start + t_rel * 1e9
        assert abs(stamp_ns(seq, 30) - t_ns) <= period / 2 + 1e3
    episode.close()


def test_native_rate_wrench_samples_all_present_and_exact(converted: tuple[TeleopBagInfo, Episode]) -> None:
    bag, episode = converted
    native = episode.stream("ft_sensor")
    assert native.num_rows == bag.counts["/ft_sensor/wrench"]
    for stamp, force, torque in zip(
        native["stamp_ns"].to_numpy(), vectors(native, "force"), vectors(native, "torque"), strict=True
    ):
        expected_force, expected_torque = wrench(seconds(int(stamp)))
        np.testing.assert_array_equal(force, expected_force.astype(np.float32))
        np.testing.assert_array_equal(torque, expected_torque.astype(np.float32))


def test_depth_is_bit_exact(converted: tuple[TeleopBagInfo, Episode]) -> None:
    bag, episode = converted
    width, height = bag.config.width, bag.config.height
    for frame_index in (0, 7, bag.counts["/depth_camera/image_raw"] - 1):
        np.testing.assert_array_equal(
            episode.frame("depth_camera", frame_index), depth_frame(frame_index, width, height)
        )
    episode.close()


def test_urdf_frames_and_camera_calibration_are_in_the_dataset(converted: tuple[TeleopBagInfo, Episode]) -> None:
    bag, episode = converted
    root = episode.dataset.root
    manifest = episode.dataset.manifest
    assert (root / layout.URDF).read_text() == bag.urdf
    assert manifest.frames["hand"].type == "dynamic" and manifest.frames["hand"].parent == "arm_link4"
    wrist_frame = manifest.frames["wrist_camera_optical_frame"]
    assert wrist_frame.type == "fixed" and wrist_frame.parent == "hand" and wrist_frame.transform is not None
    wrist = manifest.sensor("wrist_camera")
    assert wrist is not None and wrist.intrinsics is not None and wrist.extrinsics is not None
    assert wrist.extrinsics.parent_frame == "hand"
    force_torque = manifest.sensor("ft_sensor")
    assert force_torque is not None and force_torque.type == "force_torque"
    assert (force_torque.extra["range_force"], force_torque.extra["range_torque"]) == (580.0, 20.0)
    assert manifest.alignment is not None and "end_effector" in manifest.alignment.summary


def test_list_and_write_config_round_trip(tmp_path: Path) -> None:
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=0.5)
    listing = subprocess.run(
        [sys.executable, "-m", "ortf_ros.cli.bag2ortf", str(bag.path), "--list"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert listing.returncode == 0, listing.stderr
    assert "/ft_sensor/wrench" in listing.stdout and "force-torque ft_sensor" in listing.stdout
    assert bag2ortf([str(bag.path), "--write-config", str(tmp_path / "m.yaml")]) == 0
    with BagSource(bag.path) as source:
        assert load_mapping(tmp_path / "m.yaml") == detect_mapping(source.topics())


def test_json_summary_and_append(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bags = [write_teleop_bag(tmp_path / f"bag{i}", "mcap", duration_s=0.5) for i in range(2)]
    config = tmp_path / "m.yaml"
    write_mapping(mapping_for(bags[0].path), config)
    args = [str(b.path) for b in bags] + ["-o", str(tmp_path / "ds"), "--config", str(config), "--json"]
    assert bag2ortf(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [r["episodes"] for r in summary["recordings"]] == [["000000"], ["000001"]]
    assert summary["recordings"][0]["topics"]["/ft_sensor/wrench"]["used"] == bags[0].counts["/ft_sensor/wrench"]
    assert len(load_dataset(tmp_path / "ds")) == 2


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ortf_ros.cli.bag2ortf", *args], capture_output=True, text=True, env=dict(os.environ)
    )


@pytest.mark.parametrize(
    ("bag", "message"),
    [
        ("geocamxyz__rosbags-rs/tests/test_bags/test_bag_mcap", "has no decodable frame"),
        ("cruise-automation__rosbag.js/fixtures/example-lz4.bag", "no sensor_msgs/JointState topic"),
        ("UbiquityRobotics__fiducials/fiducial_slam/test/aruco_images.bag", "no sensor_msgs/JointState topic"),
    ],
)
def test_third_party_bags_are_rejected_with_one_clean_line(bag: str, message: str, tmp_path: Path) -> None:
    result = run_cli(str(RESOURCES / bag), "-o", str(tmp_path / "ds"))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr
    assert not (tmp_path / "ds").exists()


def test_missing_input_and_usage_errors(tmp_path: Path) -> None:
    result = run_cli(str(tmp_path / "nope.mcap"), "-o", str(tmp_path / "ds"))
    # A missing input is a usage error, found before anything is written.
    assert result.returncode == 2 and "nope.mcap" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "ds").exists()
    assert run_cli(str(tmp_path / "nope.mcap")).returncode == 2


def convert_with(bag: TeleopBagInfo, out: Path, change: dict[str, object]) -> Episode:
    config = replace(mapping_for(bag.path), **change)  # type: ignore[arg-type]
    write_mapping(config, out.parent / "m.yaml")
    assert bag2ortf([str(bag.path), "-o", str(out), "--config", str(out.parent / "m.yaml")]) == 0
    return load_dataset(out).episode(0)


@pytest.fixture(scope="module")
def short_bag(tmp_path_factory: pytest.TempPathFactory) -> TeleopBagInfo:
    return write_teleop_bag(tmp_path_factory.mktemp("short") / "bag", "mcap", duration_s=0.6)


def test_without_an_action_topic_the_action_is_the_next_steps_joints(short_bag: TeleopBagInfo, tmp_path: Path) -> None:
    episode = convert_with(short_bag, tmp_path / "ds", {"action": ActionMapping(topic=None)})
    steps = episode.steps()
    joints = np.concatenate(
        [vectors(steps, "observation.state.joint_positions"), vectors(steps, "observation.state.gripper_position")],
        axis=1,
    )
    actions = vectors(steps, "action")
    np.testing.assert_array_equal(actions[:-1], joints[1:])
    np.testing.assert_array_equal(actions[-1], joints[-1])  # the last step holds its own position
    assert "fallback" in str(episode.dataset.manifest.action_space.extra["source"])
    force_torque = episode.dataset.manifest.sensor("ft_sensor")
    assert force_torque is not None and force_torque.extra["range_force"] == "unknown"  # the bag does not say


def test_steps_can_follow_a_cameras_frames(short_bag: TeleopBagInfo, tmp_path: Path) -> None:
    episode = convert_with(short_bag, tmp_path / "ds", {"step": StepClock(rate_hz=None, camera="wrist_camera")})
    alignment = episode.array(layout.alignment_column("wrist_camera"))
    assert (alignment == 0).all()  # every step is a wrist frame's time
    frames = episode.array(layout.image_column("wrist_camera"))
    np.testing.assert_array_equal(np.diff(frames), 1)


def convert_parts(parts: list[Path], out: Path, change: dict[str, object]) -> list[Episode]:
    config = replace(mapping_for(parts[0]), **change)  # type: ignore[arg-type]
    result = convert_recording(parts, out, config)
    dataset = load_dataset(out)
    assert [e.episode_id for e in result.episodes] == [e.episode_id for e in dataset.episodes]
    report = validate(out, strict=True)
    assert report.ok, [f.line() for f in report.findings]
    return list(dataset)


def episode_span_s(episode: Episode) -> tuple[float, float]:
    """First and last step, in seconds from the recording's start."""
    start = (origin_ns(episode) - START_NS) / 1e9
    times = episode.array("timestamp")
    return start + float(times[0]), start + float(times[-1])


def test_episodes_split_by_time_ranges(short_bag: TeleopBagInfo, tmp_path: Path) -> None:
    split = EpisodeSplit(mode="ranges", ranges=((0.05, 0.25), (0.3, 0.55)))
    first, second = convert_parts([short_bag.path], tmp_path / "ds", {"episodes": split})
    a0, a1 = episode_span_s(first)
    b0, b1 = episode_span_s(second)
    assert 0.05 <= a0 < a1 < 0.25 < 0.3 <= b0 < b1 < 0.55


def frame_times_s(video: Path) -> list[float]:
    with av.open(str(video)) as container:
        return [float(frame.time or 0.0) for frame in container.decode(video=0)]


def test_episodes_split_at_gaps_and_a_pause_leaves_the_cameras_frame_rate(tmp_path: Path) -> None:
    later = START_NS + 10 * 10**9  # the cameras (and the rest) stop for 9.6 s: 24 frames in 10.4 s
    parts = [
        write_teleop_bag(tmp_path / "a", "mcap", duration_s=0.4).path,
        write_teleop_bag(tmp_path / "b", "mcap", duration_s=0.4, start_ns=later).path,
    ]
    first, second = convert_parts(parts, tmp_path / "ds", {"episodes": EpisodeSplit(mode="gap", gap_s=1.0)})
    assert episode_span_s(first)[1] < 0.4 and 10.0 <= episode_span_s(second)[0] < 10.4
    manifest = first.dataset.manifest
    assert {name: sensor.fps for name, sensor in manifest.cameras.items()} == dict.fromkeys(manifest.cameras, 30.0)
    for episode in (first, second):
        times = frame_times_s(episode.video_path("wrist_camera"))
        np.testing.assert_allclose(np.diff(times), 1 / 30, atol=1e-4)  # plays at 30 fps
        assert len(times) == 12


def test_a_cameras_fps_is_its_median_frame_interval_or_else_its_topic_rate() -> None:
    paused = [n * 10**8 for n in range(6)] + [10**10 + n * 10**8 for n in range(3)]  # 10 Hz, a 9.5 s pause
    assert camera_fps(Prologue(rates={"/cam": 0.9}, frame_times={"cam": paused}), "cam", "/cam") == 10.0
    few = [0, 10**8, 3 * 10**8]  # too few intervals to tell
    assert camera_fps(Prologue(rates={"/cam": 14.6}, frame_times={"cam": few}), "cam", "/cam") == 15.0


def write_boundaries(path: Path, events: list[tuple[float, bool]]) -> Path:
    """A second bag of the same recording holding /episode_active (std_msgs/Bool)."""
    store = get_typestore(Stores.ROS2_JAZZY)
    with Rosbag2Writer(path, version=9) as bag:
        connection = bag.add_connection("/episode_active", "std_msgs/msg/Bool", typestore=store)
        for seconds_in, active in events:
            message = store.types["std_msgs/msg/Bool"](data=active)
            bag.write(connection, START_NS + round(seconds_in * 1e9), store.serialize_cdr(message, "std_msgs/msg/Bool"))
    return path


def test_episodes_split_by_a_boundary_topic(short_bag: TeleopBagInfo, tmp_path: Path) -> None:
    markers = write_boundaries(tmp_path / "markers", [(0.1, True), (0.3, False), (0.35, True), (0.5, False)])
    split = EpisodeSplit(mode="topic", topic="/episode_active")
    first, second = convert_parts([short_bag.path, markers], tmp_path / "ds", {"episodes": split})
    a0, a1 = episode_span_s(first)
    b0, b1 = episode_span_s(second)
    assert 0.1 <= a0 < a1 < 0.3 < 0.35 <= b0 < b1 < 0.5


def test_parallel_conversion_equals_sequential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    formats: tuple[BagFormat, ...] = ("mcap", "ros1")
    bags = [write_teleop_bag(tmp_path / f"bag{i}", fmt, duration_s=0.5) for i, fmt in enumerate(formats)]
    config = tmp_path / "m.yaml"
    write_mapping(mapping_for(bags[0].path), config)
    inputs = [*(str(b.path) for b in bags), "--config", str(config)]
    assert bag2ortf([*inputs, "-o", str(tmp_path / "ds1"), "--jobs", "1"]) == 0
    (tmp_path / "ds2").mkdir()
    monkeypatch.chdir(tmp_path / "ds2")  # -o .: the scratch datasets go beside the output, not into it
    assert bag2ortf([*inputs, "-o", ".", "--jobs", "2"]) == 0
    sequential, parallel = load_dataset(tmp_path / "ds1"), load_dataset(tmp_path / "ds2")
    assert [e.length for e in sequential.episodes] == [e.length for e in parallel.episodes]
    for i in range(2):
        for column in ("action", "observation.state.ee_position", layout.image_column("wrist_camera")):
            np.testing.assert_array_equal(sequential.episode(i).array(column), parallel.episode(i).array(column))
    assert validate(tmp_path / "ds2", strict=True).ok
    assert not list(tmp_path.glob(".ortf-bag2ortf-*"))  # the workers' scratch datasets are gone


def test_a_conversion_logs_its_steps_in_the_converters_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``CONVERTER_STEP_BATCH`` steps per append to the staging log, unless the mapping's
    writer settings give ``step_batch``."""
    appended: list[int] = []
    make_batch = StepRows.batch

    def counted(rows: StepRows) -> pa.RecordBatch | None:
        batch = make_batch(rows)
        if batch is not None:
            appended.append(batch.num_rows)
        return batch

    monkeypatch.setattr(StepRows, "batch", counted)
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=2.5)  # (75 steps at 30 Hz)
    config = mapping_for(bag.path)
    for settings, size in (({}, CONVERTER_STEP_BATCH), ({"step_batch": 5}, 5)):
        appended.clear()
        convert_recording([bag.path], tmp_path / f"batch{size}", with_writer(config, settings))
        steps = load_dataset(tmp_path / f"batch{size}").episode(0).record.length
        assert CONVERTER_STEP_BATCH < steps < 2 * CONVERTER_STEP_BATCH
        assert appended == [size] * (steps // size) + ([steps % size] if steps % size else [])


def test_parallel_workers_share_the_cores_among_all_their_cameras(
    short_bag: TeleopBagInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = mapping_for(short_bag.path)
    assert sorted(c.kind for c in config.cameras) == ["depth", "rgb", "rgb"]
    monkeypatch.setattr(video_io, "usable_cpus", lambda: 8)
    shared = ConversionSettings().writer_config(config, conversions_at_once=2)  # 2 jobs x 2 colour cameras on 8 cores
    assert shared.video.threads == 2
    explicit = ConversionSettings().writer_config(with_writer(config, {"video": {"threads": 5}}), 2)
    assert explicit.video.threads == 5
    assert ConversionSettings().writer_config(config).video.threads == 0  # alone: the writer decides


def test_meshes_found_on_the_mesh_path_are_copied_and_missing_ones_reported(
    short_bag: TeleopBagInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    meshes = '<visual><geometry><mesh filename="package://demo_arm/meshes/hand.stl"/></geometry></visual>'
    meshes += '<visual><geometry><mesh filename="package://demo_arm/meshes/lost.dae"/></geometry></visual>'
    urdf = short_bag.urdf.replace('<link name="hand"/>', f'<link name="hand">{meshes}</link>', 1)
    assert urdf != short_bag.urdf
    (tmp_path / "robot.urdf").write_text(urdf)
    package = tmp_path / "src" / "demo_arm"
    (package / "meshes").mkdir(parents=True)
    (package / "meshes" / "hand.stl").write_bytes(b"solid hand")
    args = [str(short_bag.path), "-o", str(tmp_path / "ds"), "--urdf", str(tmp_path / "robot.urdf")]
    assert bag2ortf([*args, "--mesh-path", str(tmp_path / "src"), "--json"]) == 0
    assert (tmp_path / "ds" / "robot" / "meshes" / "demo_arm" / "meshes" / "hand.stl").read_bytes() == b"solid hand"
    (recording,) = json.loads(capsys.readouterr().out)["recordings"]
    assert "mesh not found on --mesh-path: package://demo_arm/meshes/lost.dae" in recording["warnings"]
    assert (tmp_path / "ds" / "robot" / "robot.urdf").read_text() == urdf
    # Through workers' scratch datasets and the import, the same (and nothing left half-copied).
    later = write_teleop_bag(tmp_path / "later", "mcap", duration_s=0.6, start_ns=START_NS + 60 * 10**9)
    args = [str(short_bag.path), str(later.path), "-o", str(tmp_path / "ds2"), "--urdf", str(tmp_path / "robot.urdf")]
    assert bag2ortf([*args, "--mesh-path", str(tmp_path / "src"), "--jobs", "2"]) == 0
    robot = tmp_path / "ds2" / "robot"
    assert (robot / "meshes" / "demo_arm" / "meshes" / "hand.stl").read_bytes() == b"solid hand"
    assert sorted(p.name for p in robot.iterdir()) == ["meshes", "robot.urdf"]


def test_without_a_urdf_joints_are_named_from_the_joint_states_with_a_warning(
    short_bag: TeleopBagInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = replace(mapping_for(short_bag.path), robot_description_topic="/no_urdf_here")
    write_mapping(config, tmp_path / "m.yaml")
    assert (
        bag2ortf([str(short_bag.path), "-o", str(tmp_path / "ds"), "--config", str(tmp_path / "m.yaml"), "--json"]) == 0
    )
    (recording,) = json.loads(capsys.readouterr().out)["recordings"]
    assert "no URDF on /no_urdf_here and none given: joints named from /joint_states" in recording["warnings"]
    manifest = load_dataset(tmp_path / "ds").manifest
    assert manifest.robot.name == "unknown" and not (tmp_path / "ds" / layout.URDF).exists()
    assert sorted(j.name for j in manifest.robot.joints) == sorted(JOINTS)
    assert validate(tmp_path / "ds").ok


def test_messages_later_than_max_latency_are_counted_and_warned_about(
    short_bag: TeleopBagInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The depth camera comes 12-12.4 ms after its stamps, the others sooner: within the
    default 200 ms all are in time; with 10 ms every depth frame is late, and said so.
    With 0.1 ms the joint states and wrenches (read as blocks) are late too, every one."""
    late: dict[float, dict[str, int]] = {}
    used: dict[str, int] = {}
    for latency_ms in (200.0, 10.0, 0.1):
        write_mapping(replace(mapping_for(short_bag.path), max_latency_ms=latency_ms), tmp_path / "m.yaml")
        out = tmp_path / f"ds{latency_ms:g}"
        assert bag2ortf([str(short_bag.path), "-o", str(out), "--config", str(tmp_path / "m.yaml"), "--json"]) == 0
        (recording,) = json.loads(capsys.readouterr().out)["recordings"]
        topics = recording["topics"]
        late[latency_ms] = {topic: c["late"] for topic, c in topics.items() if c["late"]}
        used = {topic: c["used"] for topic, c in topics.items()}
        warned = [w for w in recording["warnings"] if "max_latency_ms" in w]
        assert warned == [
            f"{topic}: {count} message(s) recorded more than max_latency_ms ({latency_ms:g} ms) after their stamp: "
            "steps may have been decided without them; raise max_latency_ms to wait for them"
            for topic, count in late[latency_ms].items()
        ]
    assert late[200.0] == {}
    frames = round(0.6 * 30)
    assert late[10.0] == {TOPIC_DEPTH_IMAGE: frames}
    for topic in ("/joint_states", "/ft_sensor/wrench"):
        assert late[0.1][topic] == used[topic] > 0, topic


def test_a_mapped_topic_the_recording_lacks_is_one_clean_line(short_bag: TeleopBagInfo, tmp_path: Path) -> None:
    config = mapping_for(short_bag.path)
    missing = replace(config.cameras[0], topic="/gone/image_raw")
    write_mapping(replace(config, cameras=(missing, *config.cameras[1:])), tmp_path / "m.yaml")
    result = run_cli(str(short_bag.path), "-o", str(tmp_path / "ds"), "--config", str(tmp_path / "m.yaml"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    line = f"ortf-bag2ortf: {short_bag.path}: the mapping names topic(s) the recording does not have: /gone/image_raw"
    assert result.stderr.strip() == line
    assert not (tmp_path / "ds").exists()


def write_strings(path: Path, topic: str, events: list[tuple[float, str]]) -> Path:
    store = get_typestore(Stores.ROS2_JAZZY)
    with Rosbag2Writer(path, version=9) as bag:
        connection = bag.add_connection(topic, "std_msgs/msg/String", typestore=store)
        for seconds_in, text in events:
            message = store.types["std_msgs/msg/String"](data=text)
            bag.write(
                connection, START_NS + round(seconds_in * 1e9), store.serialize_cdr(message, "std_msgs/msg/String")
            )
    return path


def test_task_instructions_from_a_topic(short_bag: TeleopBagInfo, tmp_path: Path) -> None:
    tasks = write_strings(tmp_path / "tasks", "/task", [(0.05, "Pick up the peg"), (0.32, "Insert the peg")])
    split = EpisodeSplit(mode="ranges", ranges=((0.0, 0.3), (0.3, 0.6)))
    labels = replace(mapping_for(short_bag.path).labels, task_topic="/task")
    first, second = convert_parts([short_bag.path, tasks], tmp_path / "ds", {"episodes": split, "labels": labels})
    assert (first.task.instruction, second.task.instruction) == ("Pick up the peg", "Insert the peg")


def test_a_camera_changing_resolution_fails_and_leaves_the_dataset_untouched(
    short_bag: TeleopBagInfo, tmp_path: Path
) -> None:
    out = tmp_path / "ds"
    convert_parts([short_bag.path], out, {})
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    store = get_typestore(Stores.ROS2_JAZZY)
    with Rosbag2Writer(tmp_path / "odd", version=9) as bag:
        connection = bag.add_connection("/wrist_camera/image_raw", "sensor_msgs/msg/Image", typestore=store)
        header = store.types["std_msgs/msg/Header"](
            stamp=store.types["builtin_interfaces/msg/Time"](sec=START_NS // 10**9, nanosec=300_000_000),
            frame_id="wrist_camera_optical_frame",
        )
        image = store.types["sensor_msgs/msg/Image"](
            header=header, height=24, width=32, encoding="rgb8", is_bigendian=0, step=96, data=np.zeros(2304, np.uint8)
        )
        bag.write(connection, START_NS + 300_000_000, store.serialize_cdr(image, "sensor_msgs/msg/Image"))
    parts = [short_bag.path, tmp_path / "odd"]  # one recording whose wrist camera changes resolution
    expected = r"/wrist_camera/image_raw at 1700000000\.3\d+ s: the camera's resolution changed from 64x48 to 32x24"
    with pytest.raises(ConversionError, match=expected):
        convert_recording(parts, out, mapping_for(short_bag.path))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    ("fmt", "options"),
    [("mcap", {"compressed": True}), ("ros1", {"legacy_tf": True, "bag_compression": "lz4"})],
    ids=["jpeg-cameras", "ros1-legacy-tf-lz4"],
)
def test_compressed_cameras_and_legacy_ros1_tf(fmt: BagFormat, options: dict[str, Any], tmp_path: Path) -> None:
    bag = write_teleop_bag(tmp_path / "bag", fmt, duration_s=0.5, **options)
    episode = convert(bag, tmp_path / "ds", tmp_path)
    assert validate(tmp_path / "ds", strict=True).ok
    start = origin_ns(episode)
    steps = episode.steps(["timestamp", layout.image_column("overhead_camera")])
    for t_rel, index in zip(steps["timestamp"].to_numpy(), steps[1].to_numpy(), strict=True):
        seq = decode_frame_number(episode.frame("overhead_camera", int(index)))
        assert abs(stamp_ns(seq, 30) - (start + t_rel * 1e9)) <= 1e9 / 60 + 1e3
    assert episode.dataset.manifest.frames["hand"].type == "dynamic"
    episode.close()


def test_appending_a_differently_equipped_recording_is_refused(tmp_path: Path) -> None:
    with_depth = write_teleop_bag(tmp_path / "a", "mcap", duration_s=0.4)
    without_depth = write_teleop_bag(tmp_path / "b", "mcap", duration_s=0.4, with_depth=False)
    convert(with_depth, tmp_path / "ds", tmp_path)
    result = run_cli(str(without_depth.path), "-o", str(tmp_path / "ds"))
    assert result.returncode == 1
    assert "cannot append: cameras differ" in result.stderr and "depth_camera" in result.stderr
    assert len(load_dataset(tmp_path / "ds")) == 1


def test_raw_frames_of_a_split_mcap_recording_are_encoded_where_they_lie(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Frames of 64 KiB and more in uncompressed MCAP chunks reach the encoders as places in
    the files (``io.mapped_file``), every one of them and from each file of a split
    recording; each step still points at the frame nearest its time, depth bit-exactly."""
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=1.5, width=192, height=176, max_bagfile_duration_s=0.5)
    assert len(list(bag.path.glob("*.mcap"))) >= 3
    located: list[int | None] = []

    def counted(image: np.ndarray) -> tuple[MappedFile, int] | None:
        found = locate(image)
        located.append(None if found is None else found[0].serial)
        return found

    monkeypatch.setattr(staged_video, "locate", counted)
    config = mapping_for(bag.path)
    convert_recording([bag.path], tmp_path / "ds", config)
    frames = sum(bag.counts[c.topic] for c in config.cameras)
    assert len(located) == frames and None not in located and len(set(located)) == len(list(bag.path.glob("*.mcap")))
    episode = load_dataset(tmp_path / "ds").episode(0)
    start, period = origin_ns(episode), 1e9 / 30
    steps = episode.steps(["timestamp", layout.image_column("wrist_camera")])
    for t_rel, index in zip(steps["timestamp"].to_numpy(), steps[1].to_numpy(), strict=True):
        seq = decode_frame_number(episode.frame("wrist_camera", int(index)))
        assert abs(stamp_ns(seq, 30) - (start + t_rel * 1e9)) <= period / 2 + 1e3
    for frame_index in range(bag.counts["/depth_camera/image_raw"]):
        np.testing.assert_array_equal(episode.frame("depth_camera", frame_index), depth_frame(frame_index, 192, 176))
    episode.close()


@pytest.mark.parametrize(("fps", "tolerance_ms", "set_by"), [(30, 25.0, "action"), (15, 41.7, "camera")])
def test_the_detected_mapping_gives_a_dataset_that_passes_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fps: int, tolerance_ms: float, set_by: str
) -> None:
    """The README's command, no mapping file, on the demo's scene (a 50 Hz command sampled
    ``latest``: up to 20 ms from a 30 Hz step) and on one whose cameras run at 15 Hz (up
    to 33 ms from a step by nature): the tolerance is derived from what each stream can
    keep, the summary says which one set it, and ``ortf validate --strict`` passes."""
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=2.0, fps=fps)
    out = tmp_path / "ds"
    assert bag2ortf([str(bag.path), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"sync tolerance {tolerance_ms:g} ms (set by {set_by}" in printed
    assert "outside the sync tolerance" not in printed
    assert load_dataset(out).manifest.sync_tolerance_ms == tolerance_ms
    report = validate(out, strict=True)
    assert report.ok, [f.line() for f in report.findings]
