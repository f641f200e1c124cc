"""`ortf export mcap`: the player's messages in one ROS 2 MCAP file, read back with the
converter's own reader, and converted back into the dataset they came from."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout
from ortf_ros.io.scratch import scratch_directory
from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.fastpath import SampleDecoder
from ortf_ros.pipeline.mapping import detect_mapping, load_mapping
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.playback.export import export_mcap
from ortf_ros.playback.replay import replay_mapping
from ortf_ros.playback.settings import default_settings
from support.child_process import BLOCK_ROS, kill_when
from support.cli_errors import one_line_error
from support.playback_data import equal_columns, stamp_ns, teleop_dataset, vectors

MCAP_MAGIC = b"\x89MCAP0\r\n"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(dataset of two teleop recordings, its MCAP export, the mapping written with it)."""
    tmp = tmp_path_factory.mktemp("export")
    root, _ = teleop_dataset(tmp, seconds=0.8, episodes=2)
    out, mapping = tmp / "teleop.mcap", tmp / "mapping.yaml"
    assert ortf(["export", "mcap", str(root), str(out), "--write-config", str(mapping)]) == 0
    return root, out, mapping


def test_one_ros2_mcap_file_with_every_message(exported: tuple[Path, Path, Path]) -> None:
    root, out, _ = exported
    data = out.read_bytes()
    assert data.startswith(MCAP_MAGIC) and data.endswith(MCAP_MAGIC) and b"ros2" in data[:64]
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []  # no scratch left behind
    dataset = load_dataset(root)
    steps = dataset.total_steps
    with BagSource(out) as source:
        topics = {t.topic: t for t in source.topics()}
        assert {t.definition_format for t in topics.values()} == {"ros2msg"}
        counts = {name: t.count for name, t in topics.items()}
        latched = {name for name, t in topics.items() if t.latched}
        decoder = Decoder()
        first_joint = next(source.messages({"/joint_states"}))
        message = decoder.decode(first_joint)
    per_step = ("/joint_states", "/tf", "/joint_command", "/wrist_camera/image_raw", "/depth_camera/camera_info")
    assert {topic: counts[topic] for topic in per_step} == dict.fromkeys(per_step, steps)
    native = sum(episode.stream("ft_sensor").num_rows for episode in dataset)
    assert counts["/ft_sensor/wrench"] == native
    assert counts["/robot_description"] == counts["/tf_static"] == 1 and counts["/ortf/episode"] == 4
    assert latched == {"/robot_description", "/tf_static", "/ortf/task"}
    assert first_joint.receive_ns == stamp_ns(message)  # log time = the message's time
    np.testing.assert_array_equal(
        message.position[:7],  # type: ignore[attr-defined]
        vectors(dataset.episode(0).steps(), "observation.state.joint_positions")[0],
    )


def test_the_export_returns_the_manifest_write_config_needs(exported: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """``--write-config`` builds its mapping from it instead of loading the dataset again."""
    root, _, _ = exported
    warnings: list[str] = []
    result = export_mcap(root, tmp_path / "one.mcap", default_settings().messages, episodes=["0"], warn=warnings.append)
    assert result.manifest == load_dataset(root).manifest and warnings == []


def test_images_in_the_file_are_the_decoded_frames(exported: tuple[Path, Path, Path]) -> None:
    root, out, _ = exported
    episode = load_dataset(root).episode(0)
    frames = episode.array(layout.image_column("depth_camera"))
    decoder = SampleDecoder(Decoder())
    with BagSource(out) as source:
        depth = [decoder.samples(raw)[0] for raw in source.messages({"/depth_camera/image_raw"})]
    for row, index in enumerate(frames):
        np.testing.assert_array_equal(depth[row].pixels, episode.frame("depth_camera", int(index)))  # type: ignore[union-attr]
    episode.close()


def test_export_converts_back_to_the_same_dataset(exported: tuple[Path, Path, Path], tmp_path: Path) -> None:
    root, out, mapping = exported
    again = tmp_path / "again"
    assert ortf(["validate", str(root), "--strict"]) == 0
    assert bag2ortf([str(out), "-o", str(again), "--config", str(mapping)]) == 0
    assert validate(again, strict=True).ok
    first, second = load_dataset(root), load_dataset(again)
    assert [e.length for e in first.episodes] == [e.length for e in second.episodes]
    assert [e.task.instruction for e in first] == [e.task.instruction for e in second]
    for a, b in zip(first, second, strict=True):
        # Bit for bit: the messages carry the float32 values, at the very step times (see timeline).
        equal_columns(a, b)
        assert (
            b.stream("ft_sensor")
            .select(["timestamp", "force", "torque"])
            .equals(a.stream("ft_sensor").select(["timestamp", "force", "torque"]))
        )
    m1, m2 = first.manifest, second.manifest
    assert m2.robot == m1.robot and m2.action_space.dimensions == m1.action_space.dimensions
    assert m1.alignment is not None and m2.alignment is not None
    assert (m2.sync_tolerance_ms, m2.alignment.tolerance_ms) == (m1.sync_tolerance_ms, m1.alignment.tolerance_ms)
    assert m2.observation_space == m1.observation_space
    assert (again / layout.URDF).read_bytes() == (root / layout.URDF).read_bytes()
    fixed = {k: f for k, f in m1.frames.items() if f.type == "fixed"}
    assert {k: f for k, f in m2.frames.items() if f.type == "fixed"} == fixed
    # The dataset holds the end-effector pose in the base frame, not the elbow's pose the
    # recording also had: the hand hangs from the base, the elbow is gone.
    assert m1.frames["hand"].parent == "arm_link4" and m2.frames["hand"].parent == "base_link"
    assert set(m1.frames) - set(m2.frames) == {"arm_link4"}
    assert m2.frames["end_effector"] == m1.frames["end_effector"]
    for sensor in m1.cameras.values():
        # bag2ortf takes a camera's fps from its mean rate over the whole recording, which
        # here includes the pause between the two episodes (30 Hz -> 23).
        assert replace(m2.sensor(sensor.name), fps=None) == replace(sensor, fps=None)  # type: ignore[type-var]


def test_the_written_mapping_gives_each_stream_its_own_tolerance_where_tighter(
    exported: tuple[Path, Path, Path],
) -> None:
    manifest = load_dataset(exported[0]).manifest
    assert manifest.alignment is not None and manifest.sync_tolerance_ms == 25.0
    tighter = {**manifest.alignment.tolerance_ms, "wrist_camera": 10.0, "joint_states": 5.0}
    mapping = replay_mapping(
        replace(manifest, alignment=replace(manifest.alignment, tolerance_ms=tighter)), default_settings().messages
    )
    assert mapping.sync_tolerance_ms == 25.0
    own = {c.name: c.sync_tolerance_ms for c in mapping.cameras}
    assert own == {"wrist_camera": 10.0, "overhead_camera": None, "depth_camera": None}
    assert mapping.joint_states is not None and mapping.joint_states.sync_tolerance_ms == 5.0
    assert mapping.action.sync_tolerance_ms is None and mapping.wrenches[0].sync_tolerance_ms is None


def test_without_a_mapping_detection_finds_the_same_streams(exported: tuple[Path, Path, Path]) -> None:
    _, out, mapping = exported
    written = load_mapping(mapping)
    with BagSource(out) as source:
        detected = detect_mapping(source.topics())
    assert detected.cameras == written.cameras
    assert detected.joint_states is not None and written.joint_states is not None
    assert detected.joint_states.topic == written.joint_states.topic
    assert detected.wrenches == written.wrenches
    assert (detected.action.topic, detected.action.time) == (written.action.topic, written.action.time)
    assert detected.step == written.step


def test_jpeg_cameras_and_selected_episodes(exported: tuple[Path, Path, Path], tmp_path: Path) -> None:
    root, _, _ = exported
    out = tmp_path / "one.mcap"
    assert ortf(["export", "mcap", str(root), str(out), "--episode", "1", "--image-format", "jpeg"]) == 0
    with BagSource(out) as source:
        types = {t.topic: t.msgtype for t in source.topics()}
        decoder = SampleDecoder(Decoder())
        raw = next(source.messages({"/wrist_camera/image_raw/compressed"}))
        (image,) = decoder.samples(raw)
        task = decoder.decoder.decode(next(source.messages({"/ortf/task"})))
    assert types["/wrist_camera/image_raw/compressed"] == "sensor_msgs/msg/CompressedImage"
    assert types["/depth_camera/image_raw"] == "sensor_msgs/msg/Image"  # depth stays lossless
    assert "/wrist_camera/image_raw" not in types
    episode = load_dataset(root).episode(1)
    expected = episode.frame("wrist_camera", int(episode.array(layout.image_column("wrist_camera"))[0]))
    difference = np.abs(image.pixels.astype(int) - expected.astype(int))  # type: ignore[union-attr]
    assert difference.mean() < 2.0  # near-lossless JPEG
    assert task.data == episode.task.instruction  # type: ignore[attr-defined]
    episode.close()


def test_bad_input_is_one_clean_line_and_nothing_is_lost(
    exported: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _, _ = exported
    out = tmp_path / "out.mcap"
    assert "not an ORTF dataset" in one_line_error(capsys, "export mcap", tmp_path, out)
    assert "no episode '7'" in one_line_error(capsys, "export mcap", root, out, "--episode", "7", code=2)
    out.write_bytes(b"keep me")
    assert "exists; pass --force" in one_line_error(capsys, "export mcap", root, out, code=2)
    broken = tmp_path / "broken"
    shutil.copytree(root, broken)
    (broken / load_dataset(broken).episode(1).video_path("wrist_camera").relative_to(broken)).unlink()
    error = one_line_error(capsys, "export mcap", broken, out, "--force")
    assert "fails validation" in error and "videos.missing" in error
    assert out.read_bytes() == b"keep me"  # the failed export left the file as it was
    config = tmp_path / "playback.yaml"
    config.write_text("ortf_player:\n  ros__parameters:\n    topics:\n      joint_states: joint_states\n")
    error = one_line_error(capsys, "export mcap", root, out, "--force", "--config", config)
    assert "topics.joint_states: expected a topic name starting with '/'" in error
    assert ortf(["export", "mcap", str(root), str(out), "--force", "--episode", "000000"]) == 0
    assert out.read_bytes().startswith(MCAP_MAGIC)


def test_export_imports_no_ros(exported: tuple[Path, Path, Path], tmp_path: Path) -> None:
    root, _, _ = exported
    out = tmp_path / "no_ros.mcap"
    script = BLOCK_ROS + (
        "from ortf_ros.cli.ortf import main\n"
        f"code = main(['export', 'mcap', {str(root)!r}, {str(out)!r}, '--episode', '0'])\n"
        "assert 'rclpy' not in sys.modules\n"
        "sys.exit(code)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert out.read_bytes().startswith(MCAP_MAGIC)


def test_what_a_killed_export_leaves_is_removed_by_the_next(exported: tuple[Path, Path, Path], tmp_path: Path) -> None:
    root, _, _ = exported
    out = tmp_path / "again.mcap"
    kill_when(
        ["-m", "ortf_ros.cli.ortf", "export", "mcap", str(root), str(out)],
        ready=lambda: bool(list(tmp_path.glob(".again.mcap.export-*/export/*.mcap"))),
    )
    [stale] = tmp_path.glob(".again.mcap.export-*")
    assert not out.exists()
    with scratch_directory(tmp_path, ".again.mcap.export-") as live:  # another export's, still at work
        assert ortf(["export", "mcap", str(root), str(out)]) == 0
        assert list(tmp_path.glob(".again.mcap.export-*")) == [live]
    assert not stale.exists()
    assert out.read_bytes().startswith(MCAP_MAGIC)
