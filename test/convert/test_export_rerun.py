"""`ortf export rerun`: the .rrd read back with Rerun's own dataframe API (RrdReader, a
chunk store, DataFusion), entity by entity against the dataset read with pyarrow and
the videos read with PyAV: rows per entity, values, pinholes, the video bytes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rerun.chunk import RrdReader

from ortf_ros.cli.ortf import main as ortf
from ortf_ros.convert.rerun_export import export_rerun
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format.manifest import Manifest
from ortf_ros.synthetic.demo_arm import JOINTS, demo_action, demo_depth, demo_manifest, demo_rgb, demo_state, demo_urdf
from ortf_ros.synthetic.topics import TOPIC_SIDE_IMAGE
from support.cli_errors import one_line_error
from support.playback_data import teleop_dataset

COLOUR, DEPTH, UNCALIBRATED = ("wrist_camera", "overhead_camera"), "depth_camera", "side_camera"
FT = "ft_sensor"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two converted teleop episodes: three colour cameras (one without calibration), depth,
    native-rate joint states and force-torque, a JointState action, TF and a URDF."""
    root, _ = teleop_dataset(
        tmp_path_factory.mktemp("rerun"),
        seconds=0.5,
        episodes=2,
        side_camera=True,
        without_camera_info=(TOPIC_SIDE_IMAGE,),
    )
    return root


@pytest.fixture(scope="module")
def exported(dataset: Path) -> Path:
    out = dataset.parent / "out.rrd"
    assert ortf(["export", "rerun", str(dataset), str(out)]) == 0
    return out


class Recording:
    """The .rrd's one recording as Rerun reads it: a table per timeline and entity."""

    def __init__(self, path: Path) -> None:
        reader = RrdReader(path)
        assert len(reader.recordings()) == 1
        assert len(reader.blueprints()) == 1  # the layout the viewer opens it in
        self.store = reader.stream().collect()

    def table(self, timeline: str | None, entity: str) -> pa.Table:
        return self.store.reader(index=timeline, contents=entity).to_arrow_table()

    def column(self, timeline: str | None, entity: str, component: str) -> list[Any]:
        """The component's values, one per row that holds it (nulls dropped)."""
        table = self.table(timeline, entity)
        name = f"{entity}:{component}"
        if name not in table.column_names:
            return []
        return [cell[0] for cell in table[name].to_pylist() if cell is not None]

    def timelines(self) -> set[str]:
        return {f.name for f in self.store.schema().index_columns()}


def stream(root: Path, name: str, episode: int) -> pa.Table:
    return pq.read_table(root / f"data/chunk-000/streams/{name}/episode_{episode:06d}.parquet")


def steps(root: Path, episode_id: str) -> pa.Table:
    table = pq.read_table(root / "data/chunk-000/steps.parquet")
    return table.filter(pa.compute.equal(table["episode_id"], episode_id))


def changes(frames: np.ndarray) -> int:
    """Steps where the frame a camera shows differs from the step before."""
    return int(1 + np.count_nonzero(frames[1:] != frames[:-1]))


def video_pts_ns(path: Path) -> list[int]:
    with av.open(str(path)) as container:
        video = container.streams.video[0]
        base = video.time_base
        assert base is not None
        return sorted(
            round(float(frame.pts * base) * 1e9) for frame in container.decode(video) if frame.pts is not None
        )


def test_every_entity_holds_as_many_rows_as_the_dataset_has_values(dataset: Path, exported: Path) -> None:
    rec = Recording(exported)
    manifest = Manifest.from_json((dataset / "meta/manifest.json").read_text())
    assert {"episode_000000", "episode_000001"} <= rec.timelines()
    for number, episode_id in enumerate(("000000", "000001")):
        timeline = f"episode_{episode_id}"
        table = steps(dataset, episode_id)
        joints, ft = stream(dataset, "joint_states", number), stream(dataset, FT, number)
        # Joint positions, velocities and efforts at their native rate, one series per joint.
        names = manifest.native_streams["joint_states"].columns["position"].names
        assert names is not None
        for component, column in (("joint_positions", "position"), ("joint_velocities", "velocity")):
            expected = np.array(joints[column].to_pylist(), dtype=np.float64)
            for element, joint in enumerate(names):
                got = rec.column(timeline, f"/state/{component}/{joint}", "Scalars:scalars")
                assert len(got) == joints.num_rows, (component, joint)
                np.testing.assert_allclose(got, expected[:, element], rtol=1e-6)
        assert len(rec.column(timeline, f"/state/joint_torques/{names[0]}", "Scalars:scalars")) == joints.num_rows
        # Force-torque at 1 kHz, not the step rate.
        forces = np.array(ft["force"].to_pylist())
        for axis, values in zip(("fx", "fy", "fz"), forces.T, strict=True):
            got = rec.column(timeline, f"/ft/{FT}/{axis}", "Scalars:scalars")
            assert len(got) == ft.num_rows > 10 * table.num_rows
            np.testing.assert_allclose(got, values, rtol=1e-6)
        assert len(rec.column(timeline, f"/ft/{FT}/tz", "Scalars:scalars")) == ft.num_rows
        # One series per action dimension, a row per step.
        action = np.array(table["action"].to_pylist())
        for dim in manifest.action_space.dimensions:
            got = rec.column(timeline, f"/action/{dim.name}", "Scalars:scalars")
            assert len(got) == table.num_rows
            np.testing.assert_allclose(got, action[:, dim.index], rtol=1e-6)
        # Components without a native table come from the steps.
        assert len(rec.column(timeline, "/state/ee_position/0", "Scalars:scalars")) == table.num_rows
        # The URDF's joints move with the recorded positions.
        assert len(rec.column(timeline, "/tf/arm_link1", "Transform3D:quaternion")) == joints.num_rows
        # Colour: one frame reference per frame shown, at the frame's time in the MP4.
        for camera in (*COLOUR, UNCALIBRATED):
            frames = table[f"observation.images.{camera}.frame_index"].to_numpy()
            refs = rec.column(timeline, f"/cameras/{camera}", "VideoFrameReference:timestamp")
            assert len(refs) == changes(frames) == table.num_rows
            assert refs == [
                video_pts_ns(dataset / f"videos/{camera}/chunk-000/episode_{episode_id}.mp4")[i] for i in frames
            ]
        # Depth: one depth image per frame shown, the frame's 16 bits, millimetres.
        frames = table[f"observation.images.{DEPTH}.frame_index"].to_numpy()
        buffers = rec.column(timeline, f"/cameras/{DEPTH}", "DepthImage:buffer")
        assert len(buffers) == changes(frames)
        assert rec.column(timeline, f"/cameras/{DEPTH}", "DepthImage:meter") == [1000.0] * len(buffers)
        with av.open(str(dataset / f"videos/{DEPTH}/chunk-000/episode_{episode_id}.mp4")) as container:
            last = [f.to_ndarray(format="gray16le") for f in container.decode(video=0)][int(frames[-1])]
        assert bytes(buffers[-1]) == last.tobytes()


def test_videos_are_the_mp4_files_bytes_per_episode(dataset: Path, exported: Path) -> None:
    rec = Recording(exported)
    for episode_id in ("000000", "000001"):
        for camera in (*COLOUR, UNCALIBRATED):
            blobs = rec.column(f"episode_{episode_id}", f"/cameras/{camera}", "AssetVideo:blob")
            assert len(blobs) == 1, camera  # this episode's video alone on its timeline
            mp4 = (dataset / f"videos/{camera}/chunk-000/episode_{episode_id}.mp4").read_bytes()
            assert bytes(blobs[0]) == mp4
        assert rec.column(f"episode_{episode_id}", f"/cameras/{DEPTH}", "AssetVideo:blob") == []


def test_cameras_are_pinholes_from_their_intrinsics_placed_by_their_extrinsics(dataset: Path, exported: Path) -> None:
    rec = Recording(exported)
    manifest = Manifest.from_json((dataset / "meta/manifest.json").read_text())
    for camera in (*COLOUR, DEPTH):
        sensor = manifest.cameras[camera]
        assert sensor.intrinsics is not None and sensor.extrinsics is not None
        k = sensor.intrinsics
        [projection] = rec.column(None, f"/cameras/{camera}", "Pinhole:image_from_camera")
        matrix = np.array(projection, dtype=np.float64).reshape(3, 3).T  # stored column-major
        np.testing.assert_allclose(matrix, [[k["fx"], 0, k["cx"]], [0, k["fy"], k["cy"]], [0, 0, 1]], rtol=1e-6)
        assert rec.column(None, f"/cameras/{camera}", "Transform3D:parent_frame") == [sensor.extrinsics.parent_frame]
        [translation] = rec.column(None, f"/cameras/{camera}", "Transform3D:translation")
        np.testing.assert_allclose(translation, sensor.extrinsics.transform.translation, rtol=1e-6)
    assert manifest.cameras[UNCALIBRATED].intrinsics_unknown
    assert rec.column(None, f"/cameras/{UNCALIBRATED}", "Pinhole:image_from_camera") == []
    # TF: the manifest's fixed frames, in their parents.
    base = manifest.frames["base_link"]
    assert base.transform is not None
    assert rec.column(None, "/tf/base_link", "Transform3D:parent_frame") == [base.parent]


def demo_with_held_frames(root: Path, episodes: int, steps: int) -> None:
    """Demo episodes whose wrist camera has a new frame every 2nd step and depth every 3rd:
    the steps between show the frame before again (as a slower camera does)."""
    width, height = 32, 24
    with DatasetWriter(root, demo_manifest(width, height), urdf=demo_urdf()) as writer:
        for episode in range(episodes):
            writer.begin_episode("Pick up the red box")
            for step in range(steps):
                images = {"cam_overhead": demo_rgb(1, step, width, height)}
                if step % 2 == 0:
                    images["cam_wrist"] = demo_rgb(0, step, width, height)
                if step % 3 == 0:
                    images["depth"] = demo_depth(step, width, height)
                writer.add_step(step / 30, demo_state(episode, step), demo_action(episode, step), images)
            writer.end_episode(success=True)


def test_held_frames_episode_selection_and_steps_when_there_is_no_native_table(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    demo_with_held_frames(root, episodes=3, steps=12)
    out = tmp_path / "one.rrd"
    export_rerun(root, out, ["-1"])
    rec = Recording(out)
    timelines = rec.timelines()
    assert "episode_000002" in timelines and not {"episode_000000", "episode_000001"} & timelines
    timeline, table = "episode_000002", steps(root, "000002")
    for joint in JOINTS:  # no native table: the steps' joint positions, and the URDF moved by them
        assert len(rec.column(timeline, f"/state/joint_positions/{joint}", "Scalars:scalars")) == 12
        assert len(rec.column(timeline, f"/tf/{joint.replace('joint', 'link')}", "Transform3D:quaternion")) == 12
    ee = rec.column(timeline, "/tf/end_effector", "Transform3D:translation")
    np.testing.assert_allclose(ee, table["observation.state.ee_position"].to_pylist(), rtol=1e-6)
    wxyz = np.array(table["observation.state.ee_orientation"].to_pylist())
    xyzw = rec.column(timeline, "/tf/end_effector", "Transform3D:quaternion")
    np.testing.assert_allclose(xyzw, wxyz[:, [1, 2, 3, 0]], rtol=1e-6)  # Rerun's order: x, y, z, w
    for camera, shown in (("cam_wrist", 6), ("cam_overhead", 12)):
        frames = table[f"observation.images.{camera}.frame_index"].to_numpy()
        refs = rec.column(timeline, f"/cameras/{camera}", "VideoFrameReference:timestamp")
        assert len(refs) == changes(frames) == shown
        pts = video_pts_ns(root / f"videos/{camera}/chunk-000/episode_000002.mp4")
        assert refs == [pts[i] for i in sorted(set(frames))]
        times = rec.table(timeline, f"/cameras/{camera}")
        held = times.filter(pa.compute.is_valid(times[f"/cameras/{camera}:VideoFrameReference:timestamp"]))
        assert held[timeline].cast(pa.int64()).to_pylist() == [
            round(t * 1e9)
            for t, n in zip(table["timestamp"].to_pylist(), range(12), strict=True)
            if n % (12 // shown) == 0
        ]
    assert len(rec.column(timeline, "/cameras/depth", "DepthImage:buffer")) == 4


def test_bad_input_is_one_line_and_exit_2_leaving_the_output_as_it_was(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "kept.rrd"
    out.write_bytes(b"earlier")
    assert "no episode '42'" in one_line_error(
        capsys, "export rerun", dataset, tmp_path / "x.rrd", "--episode", "42", code=2
    )
    assert "is a directory" in one_line_error(capsys, "export rerun", dataset, tmp_path, code=2)
    assert "exists; pass --force" in one_line_error(capsys, "export rerun", dataset, out, code=2)
    assert "not an ORTF dataset" in one_line_error(capsys, "export rerun", tmp_path, tmp_path / "y.rrd")
    assert out.read_bytes() == b"earlier" and not (tmp_path / "x.rrd").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.rrd"]  # no temporary left


def test_without_the_rerun_sdk_the_pip_command_and_exit_2(dataset: Path, tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['rerun'] = None\n"  # as if not installed: import rerun raises ImportError
        "from ortf_ros.cli.entry import ortf\n"
        f"sys.argv = ['ortf', 'export', 'rerun', {str(dataset)!r}, {str(tmp_path / 'x.rrd')!r}]\n"
        "sys.exit(ortf())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and "pip install 'ortf_ros[rerun]'" in run.stderr
    assert not (tmp_path / "x.rrd").exists()


def test_a_file_that_cannot_grow_fails_in_one_line_and_keeps_the_earlier_file(dataset: Path, tmp_path: Path) -> None:
    """The SDK writes from a thread of its own; a write refused there (here a file size limit,
    as a full disk refuses it) still ends the export with the reason, the old file kept."""
    out = tmp_path / "kept.rrd"
    out.write_bytes(b"earlier")
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"  # a write past the limit fails with EFBIG
        "resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))\n"
        "from ortf_ros.cli.entry import ortf\n"
        f"sys.argv = ['ortf', 'export', 'rerun', {str(dataset)!r}, {str(out)!r}, '--force']\n"
        "sys.exit(ortf())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stderr
    assert run.stderr == f"ortf export rerun: {out}: File too large\n"
    assert out.read_bytes() == b"earlier" and sorted(p.name for p in tmp_path.iterdir()) == ["kept.rrd"]
