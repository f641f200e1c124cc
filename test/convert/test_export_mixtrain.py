"""`ortf export mixtrain`: one row per episode, read back with plain pyarrow, DuckDB and
PyAV (no ortf_ros code on the reading side) and compared with the ORTF source."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import av
import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ortf_ros.cli.ortf import main as ortf
from ortf_ros.convert import to_mixtrain
from ortf_ros.convert.mixtrain_export import sidecar
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.format import layout
from ortf_ros.synthetic.dataset import write_demo_dataset
from support.cli_errors import one_line_error

STATE = ("joint_positions", "joint_velocities", "ee_position", "ee_orientation", "gripper_position")
CAMERAS = ("cam_wrist", "cam_overhead", "depth")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(ORTF dataset of three episodes, the third failed; its Mixtrain export)."""
    tmp = tmp_path_factory.mktemp("mixtrain")
    root = tmp / "ortf"
    write_demo_dataset(root, episodes=3, steps=10, width=64, height=48)
    out = tmp / "mixtrain"
    assert ortf(["export", "mixtrain", str(root), str(out)]) == 0
    return root, out


def trajectory(cell: pa.Scalar) -> np.ndarray:
    """A list<list<float32>> cell as a T x dim array, with pyarrow alone."""
    return np.array(cell.as_py(), dtype=np.float32)


def test_one_row_per_episode_with_the_steps_as_arrays(exported: tuple[Path, Path]) -> None:
    root, out = exported
    table = pq.read_table(out / "data")
    source = load_dataset(root)
    assert table.num_rows == len(source.episodes) == 3
    parquet_schema = pq.ParquetFile(out / "data" / "part-00000.parquet").schema
    leaves = {parquet_schema.column(i).path.split(".")[0]: parquet_schema.column(i) for i in range(len(parquet_schema))}
    for name in ("action", *(f"obs_{c}" for c in STATE)):  # list<list<float>> in Parquet terms
        assert leaves[name].physical_type == "FLOAT" and leaves[name].max_repetition_level == 2, name
    for name in ("action", *(f"obs_{c}" for c in STATE)):
        column_type = table.schema.field(name).type
        assert pa.types.is_list(column_type) and pa.types.is_fixed_size_list(column_type.value_type), name
        assert column_type.value_type.value_type == pa.float32()
    rows = table.to_pylist()
    for row_number, episode in enumerate(source):
        row, record, cells = rows[row_number], episode.record, table.slice(row_number, 1)
        assert row["sequence_id"] == record.episode_id
        assert row["task"] == episode.task.instruction
        assert row["success"] is record.success and row["failure_reason"] == record.failure_reason
        assert row["operator_notes"] == record.operator_notes == f"synthetic episode {row_number}"
        assert row["length"] == record.length == 10
        assert row["duration_seconds"] == record.duration_seconds
        assert row["robot"] == source.manifest.robot.name
        assert np.array_equal(trajectory(cells["action"][0]), episode.array("action"))
        for component in STATE:
            expected = episode.array(layout.state_column(component))
            assert np.array_equal(trajectory(cells[f"obs_{component}"][0]), expected), component
        assert row["timestamp"] == episode.array("timestamp").tolist()
        for camera in CAMERAS:
            assert row[f"video_{camera}_frame_index"] == episode.array(layout.image_column(camera)).tolist()
    assert [r["success"] for r in rows] == [True, True, False]
    assert rows[2]["failure_reason"] == "gripper slipped"


def test_duckdb_reads_the_arrays_and_filters_on_metadata(exported: tuple[Path, Path]) -> None:
    root, out = exported
    source = load_dataset(root)
    query = f"""
        SELECT sequence_id, length, len(action) AS steps, action, obs_joint_positions, obs_ee_orientation
        FROM read_parquet('{out}/data/*.parquet') ORDER BY sequence_id
    """
    rows = duckdb.execute(query).fetchall()
    assert len(rows) == 3
    for (sequence_id, length, steps, action, joints, orientation), episode in zip(rows, source, strict=True):
        assert sequence_id == episode.episode_id and length == steps == episode.record.length
        assert np.array_equal(np.array(action, dtype=np.float32), episode.array("action"))
        assert np.array_equal(np.array(joints, dtype=np.float32), episode.array("observation.state.joint_positions"))
        expected = episode.array("observation.state.ee_orientation")
        assert np.array_equal(np.array(orientation, dtype=np.float32), expected)
    data = f"read_parquet('{out}/data/*.parquet')"
    failed = duckdb.execute(f"SELECT sequence_id FROM {data} WHERE NOT success").fetchall()
    assert failed == [(source.episodes[2].episode_id,)]
    # An element of the arrays, without reading them into Python: the last step's gripper command.
    ((last,),) = duckdb.execute(f"SELECT action[length][8] FROM {data} WHERE sequence_id = '000001'").fetchall()
    assert last == pytest.approx(float(source.episode("000001").array("action")[-1, 7]))


def test_video_references_resolve_to_the_episode_videos(exported: tuple[Path, Path]) -> None:
    root, out = exported
    source = load_dataset(root)
    rows = pq.read_table(out / "data").to_pylist()
    for row, episode in zip(rows, source, strict=True):
        for camera in CAMERAS:
            relative = row[f"video_{camera}"]
            assert not Path(relative).is_absolute() and relative.startswith(f"files/{camera}/")
            video = out / relative
            assert video.read_bytes() == episode.video_path(camera).read_bytes()
            depth = camera == "depth"
            with av.open(str(video)) as container:
                frames = [f.to_ndarray(format="gray16le" if depth else "rgb24") for f in container.decode(video=0)]
            for step, frame_index in enumerate(row[f"video_{camera}_frame_index"]):
                expected = episode.frame(camera, frame_index)
                assert np.array_equal(frames[frame_index], expected), (camera, step)
            if depth:
                assert frames[0].dtype == np.uint16
        episode.close()


def test_sidecar_declares_every_column_with_semantics(exported: tuple[Path, Path]) -> None:
    root, out = exported
    manifest = load_dataset(root).manifest
    written = json.loads((out / "mixtrain.json").read_text())
    assert written["mixtrain"] == "1.0"
    types = written["column_types"]
    schema = pq.read_schema(next((out / "data").glob("*.parquet")))
    trajectories = {f.name for f in schema if pa.types.is_list(f.type) and pa.types.is_list(f.type.value_type)}
    trajectories |= {
        f.name for f in schema if pa.types.is_list(f.type) and pa.types.is_fixed_size_list(f.type.value_type)
    }
    assert trajectories == {"action", *(f"obs_{c}" for c in STATE)}
    for name in trajectories:
        assert types[name]["type"] == "trajectory"
        assert types[name]["dim"] == schema.field(name).type.value_type.list_size
    assert types["action"]["names"] == [d.name for d in manifest.action_space.dimensions]
    assert types["obs_joint_positions"]["names"] == list(
        manifest.observation_space.state["joint_positions"].names or ()
    )
    assert types["obs_joint_positions"]["units"] == "radians"
    for camera in CAMERAS:
        video = types[f"video_{camera}"]
        assert video["type"] == "video" and video["fps"] == 30 and video["resolution"] == [64, 48]
        assert types[f"video_{camera}_frame_index"] == {"type": "frame_index", "video": f"video_{camera}"}
    assert types["video_cam_wrist"]["codec"] == "h264"
    assert types["video_depth"]["codec"] == "ffv1" and types["video_depth"]["units"] == "mm"
    assert "task" not in types and "success" not in types  # plain scalars need no declaration
    npz = replace(manifest, sensors=tuple(replace(s, encoding="npz") if s.is_depth else s for s in manifest.sensors))
    assert sidecar(npz)["column_types"]["video_depth"] == {
        "type": "3d",
        "format": "npz",
        "fps": 30,
        "resolution": [64, 48],
        "units": "mm",
    }


def test_the_python_api_takes_a_loaded_dataset(exported: tuple[Path, Path], tmp_path: Path) -> None:
    root, out = exported
    target = tmp_path / "empty"
    target.mkdir()  # an empty directory is a valid destination
    result = to_mixtrain(load_dataset(root), target, episodes_per_file=2)
    assert result.data_files == ("data/part-00000.parquet", "data/part-00001.parquet")
    assert [pq.read_metadata(target / f).num_rows for f in result.data_files] == [2, 1]
    assert pq.read_table(target / "data").equals(pq.read_table(out / "data"))
    assert result.steps == 30 and result.episodes == 3


def test_bad_input_is_one_line_and_leaves_the_destination_untouched(
    exported: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = exported
    out = tmp_path / "out"
    assert "is " + str(tmp_path) + " an ORTF dataset" in one_line_error(capsys, "export mixtrain", tmp_path, out)
    assert "no such file or directory" in one_line_error(capsys, "export mixtrain", tmp_path / "missing", out, code=2)
    assert not out.exists()
    out.mkdir()
    (out / "keep.txt").write_text("keep me")
    assert "exists and is not empty" in one_line_error(capsys, "export mixtrain", root, out, code=2)
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_text() == "keep me"
    a_file = tmp_path / "file.parquet"
    a_file.write_bytes(b"keep")
    assert "is a file; expected a new directory" in one_line_error(capsys, "export mixtrain", root, a_file, code=2)
    assert a_file.read_bytes() == b"keep"
    broken = tmp_path / "broken"
    write_demo_dataset(broken, episodes=2, steps=4, width=32, height=24)
    load_dataset(broken).episode(1).video_path("cam_wrist").unlink()
    assert "missing" in one_line_error(capsys, "export mixtrain", broken, tmp_path / "from_broken")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken", "file.parquet", "out"]  # no scratch left
