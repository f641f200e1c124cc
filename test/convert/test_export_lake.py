"""`ortf export mixtrain --table delta|iceberg|ducklake`: the tables read back with deltalake's,
pyiceberg's and DuckDB's own readers, row for row equal to the standalone export's Parquet rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import av
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.convert.mixtrain_ducklake import attached
from ortf_ros.convert.mixtrain_tables import to_mixtrain_table
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.dataset import write_demo_dataset
from support.cli_errors import one_line_error

NEEDS = ("duckdb_extension_ducklake",)  # loaded from its file by the DuckLake export
LAKE_FILES = "_files"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(a demo dataset of three episodes, its standalone Mixtrain export, a dataset converted from an MCAP bag)."""
    tmp = tmp_path_factory.mktemp("lake")
    demo = tmp / "demo"
    write_demo_dataset(demo, episodes=3, steps=10, width=64, height=48)
    standalone = tmp / "standalone"
    assert ortf(["export", "mixtrain", str(demo), str(standalone)]) == 0
    bag = write_teleop_bag(tmp / "teleop", "mcap", duration_s=1.0)
    converted = tmp / "converted"
    assert bag2ortf([str(bag.path), "-o", str(converted)]) == 0
    return demo, standalone, converted


@pytest.fixture(scope="module")
def second_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another demo dataset of three episodes (the same columns, another dataset id)."""
    root = tmp_path_factory.mktemp("lake2") / "demo2"
    write_demo_dataset(root, episodes=3, steps=10, width=64, height=48)
    return root


def lake_property(standalone: Path, dataset: Path) -> dict[str, Any]:
    """The lake's property for one dataset: its standalone ``mixtrain.json`` with the robot
    and the columns its rows have (``ortf.robots``)."""
    expected: dict[str, Any] = json.loads((standalone / "mixtrain.json").read_text())
    robot = json.loads((dataset / "meta" / "manifest.json").read_text())["robot"]["name"]
    expected["ortf"]["robots"] = {robot: sorted(expected["column_types"])}
    return expected


def standalone_rows(standalone: Path, dataset_id: str) -> list[dict[str, Any]]:
    """The standalone export's rows as the lake holds them: videos, scans, clouds under _files/<dataset id>."""
    rows: list[dict[str, Any]] = pq.read_table(standalone / "data").to_pylist()
    for row in rows:
        for name, value in row.items():
            if name != "mcap" and isinstance(value, str) and value.startswith("files/"):
                row[name] = f"{LAKE_FILES}/{dataset_id}/{value.removeprefix('files/')}"
    return rows


def by_id(rows: list[Any]) -> list[Any]:
    return sorted(rows, key=lambda row: row["sequence_id"])


def dataset_id(root: Path) -> str:
    return str(json.loads((root / "meta" / "manifest.json").read_text())["dataset_id"])


def test_delta_table_holds_the_rows_the_property_and_appends(
    datasets: tuple[Path, Path, Path], second_demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo, standalone, _ = datasets
    out = tmp_path / "delta"
    assert ortf(["export", "mixtrain", str(demo), str(out), "--table", "delta"]) == 0
    table = DeltaTable(str(out))
    first_version = table.version()
    assert first_version == 1  # version 0 the rows, version 1 the property (before the rename: never seen)
    assert table.metadata().partition_columns == ["task"]
    assert json.loads(table.metadata().configuration["mixtrain"]) == lake_property(standalone, demo)
    rows = by_id(table.to_pyarrow_table().to_pylist())
    assert rows == by_id(standalone_rows(standalone, dataset_id(demo)))
    files = pa.table(table.get_add_actions(flatten=True)).to_pylist()  # a file per task, the task in the log
    assert sorted(f["partition.task"] for f in files) == sorted({row["task"] for row in rows})
    assert sum(f["num_records"] for f in files) == 3
    for f in files:  # the task in the log only; a row group per episode, as the standalone export
        footer = pq.read_metadata(out / f["path"])
        assert "task" not in footer.schema.names and footer.num_row_groups == footer.num_rows == f["num_records"]
    for f in files:  # statistics for skipping files: exact bounds of the scalar columns
        ids = [row["sequence_id"] for row in rows if row["task"] == f["partition.task"]]
        assert (f["min.sequence_id"], f["max.sequence_id"], f["null_count.mcap"]) == (min(ids), max(ids), len(ids))
    assert table.to_pyarrow_table(filters=[("sequence_id", "=", rows[1]["sequence_id"])]).to_pylist() == [rows[1]]
    for row in rows:
        with av.open(str(out / row["video_cam_wrist"])) as video:
            assert video.streams.video[0].codec_context.name == "h264"
    assert all(row["mcap"] is None for row in rows)  # synthetic episodes: no source recording
    # Delta's full vacuum deletes files its log does not name, except under _ and . directories.
    assert table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True) == []

    other_units = tmp_path / "other_units"  # the same arm's columns, one meaning another thing
    write_demo_dataset(other_units, episodes=1, steps=4, width=64, height=48)
    manifest_file = other_units / "meta" / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["action_space"]["dimensions"][0]["units"] = "furlong"
    manifest_file.write_text(json.dumps(manifest))
    err = one_line_error(capsys, "export mixtrain", other_units, out, "--table", "delta")
    assert "column action: units is ['radians'," in err and "for robot ortf_demo_arm" in err and "['furlong'," in err
    err = one_line_error(capsys, "export mixtrain", demo, out, "--table", "delta", code=2)
    assert f"dataset {dataset_id(demo)} is already in this table" in err
    assert DeltaTable(str(out)).version() == first_version
    assert ortf(["export", "mixtrain", str(second_demo), str(out), "--table", "delta"]) == 0
    appended = DeltaTable(str(out))
    assert appended.version() == first_version + 1
    assert appended.history(1)[0]["operation"] == "WRITE"
    appended_rows = appended.to_pyarrow_table().to_pylist()
    assert len(appended_rows) == 6
    assert {row["video_cam_wrist"].split("/")[1] for row in appended_rows} == {
        dataset_id(demo),
        dataset_id(second_demo),
    }
    assert DeltaTable(str(out), version=first_version).to_pyarrow_table().num_rows == 3  # time travel


def test_iceberg_table_in_its_sqlite_catalog(
    datasets: tuple[Path, Path, Path], second_demo: Path, tmp_path: Path
) -> None:
    demo, standalone, _ = datasets
    out = tmp_path / "iceberg"
    for dataset in (demo, second_demo):
        assert ortf(["export", "mixtrain", str(dataset), str(out), "--table", "iceberg"]) == 0
    table = iceberg_table(out)
    assert len(table.snapshots()) == 2
    [partition] = table.spec().fields
    assert (table.schema().find_field(partition.source_id).name, str(partition.transform)) == ("task", "identity")
    assert json.loads(table.properties["mixtrain"]) == lake_property(standalone, demo)
    expected = by_id(standalone_rows(standalone, dataset_id(demo)))
    first = table.scan(snapshot_id=table.snapshots()[0].snapshot_id).to_arrow().to_pylist()
    assert by_id(first) == expected
    every = table.scan().to_arrow().to_pylist()  # the second snapshot: both datasets' rows
    assert by_id([row for row in every if dataset_id(demo) in row["video_cam_wrist"]]) == by_id(first)
    assert sorted(row["video_cam_wrist"].split("/")[1] for row in every) == sorted(
        [dataset_id(demo)] * 3 + [dataset_id(second_demo)] * 3
    )
    failed = table.scan(row_filter="success = false").to_arrow()
    assert failed.column("failure_reason").to_pylist() == ["gripper slipped"] * 2
    for row in first:
        assert (out / row["video_depth"]).is_file()


def iceberg_table(out: Path, uri: str | None = None) -> Any:
    """The export's table, through a catalog named ``ortf`` (the SQL catalog keys its tables by catalog name)."""
    catalog = SqlCatalog("ortf", uri=uri or f"sqlite:///{out / 'catalog.db'}")  # as the command's last line says
    return catalog.load_table("ortf.mixtrain")


def test_iceberg_with_a_catalog_of_its_own(datasets: tuple[Path, Path, Path], tmp_path: Path) -> None:
    demo, _, _ = datasets
    uri = f"sqlite:///{tmp_path / 'shared-catalog.db'}"
    out = tmp_path / "warehouse-root"
    assert ortf(["export", "mixtrain", str(demo), str(out), "--table", "iceberg", "--catalog", uri]) == 0
    assert not (out / "catalog.db").exists() and (out / "warehouse").is_dir()
    table = iceberg_table(out, uri)
    assert table.scan().to_arrow().num_rows == 3 and "mixtrain" in table.properties


def test_without_the_lake_extra_the_pip_command_and_exit_2(datasets: tuple[Path, Path, Path], tmp_path: Path) -> None:
    demo, _, _ = datasets
    for kind, module in (("delta", "deltalake"), ("iceberg", "pyiceberg"), ("ducklake", "duckdb_extension_ducklake")):
        code = (
            f"import sys; sys.modules[{module!r}] = None\n"  # as if not installed: importing it raises ImportError
            "from ortf_ros.cli.entry import ortf\n"
            f"sys.argv = ['ortf', 'export', 'mixtrain', {str(demo)!r}, {str(tmp_path / kind)!r}, '--table', {kind!r}]\n"
            "sys.exit(ortf())\n"
        )
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
        assert "pip install 'ortf_ros[lake]'" in run.stderr and not (tmp_path / kind).exists()


def test_iceberg_data_files_hold_one_episode_per_row_group(datasets: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """What bounds the export's memory by one episode: each file is written a row at a time."""
    demo, standalone, _ = datasets
    out = tmp_path / "files"
    result = to_mixtrain_table(demo, out, "iceberg")
    assert (result.created, result.version, result.episodes, result.steps) == (True, 1, 3, 30)
    table = iceberg_table(out)
    files = table.inspect.files().to_pylist()
    assert len(table.snapshots()) == 1 and sorted(f["partition"]["task"] for f in files) == sorted(
        {row["task"] for row in standalone_rows(standalone, dataset_id(demo))}
    )
    for file in files:
        footer = pq.read_metadata(file["file_path"].removeprefix("file://"))
        assert footer.num_row_groups == footer.num_rows == file["record_count"]
        assert Path(file["file_path"].removeprefix("file://")).is_relative_to(out / "warehouse")


def test_ducklake_data_files_hold_one_episode_per_row_group(datasets: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """What bounds DuckDB's memory by one episode: it flushes each row of each partition."""
    demo, standalone, _ = datasets
    out = tmp_path / "ducklake"
    result = to_mixtrain_table(demo, out, "ducklake")
    assert (result.created, result.version, result.episodes, result.steps) == (True, 1, 3, 30)
    files = sorted((out / "data").rglob("*.parquet"))
    tasks = {row["task"] for row in standalone_rows(standalone, dataset_id(demo))}
    assert sorted(unquote(path.parent.name) for path in files) == sorted(f"task={task}" for task in tasks)
    for path in files:
        footer = pq.read_metadata(path)
        assert footer.num_row_groups == footer.num_rows > 0
    with attached(out, read_only=True) as connection:
        rows = connection.sql("FROM lake.mixtrain").to_arrow_table().to_pylist()
        held = connection.sql("SELECT comment FROM duckdb_tables() WHERE table_name = 'mixtrain'").fetchone()[0]
    assert by_id(rows) == by_id(standalone_rows(standalone, dataset_id(demo)))
    assert json.loads(held) == lake_property(standalone, demo)


def test_a_failed_first_export_leaves_no_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken"
    write_demo_dataset(broken, episodes=2, steps=4, width=32, height=24)
    load_dataset(broken).episode(1).video_path("cam_wrist").unlink()
    delta, iceberg = tmp_path / "delta", tmp_path / "iceberg"
    assert "missing" in one_line_error(capsys, "export mixtrain", broken, delta, "--table", "delta")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken"]  # built aside, never renamed in
    assert "missing" in one_line_error(capsys, "export mixtrain", broken, iceberg, "--table", "iceberg")
    with pytest.raises(NoSuchTableError):
        iceberg_table(iceberg)  # the catalog registers the table at its only commit
    assert not (iceberg / "_files" / dataset_id(broken)).exists()  # its copies removed: it can be run again
    ducklake = tmp_path / "ducklake"  # one transaction, rolled back: no table, no data file
    err = one_line_error(capsys, "export mixtrain", broken, ducklake, "--table", "ducklake")
    assert err.endswith(": missing (episode 000001, camera cam_wrist)")  # itself, not inside DuckDB's error
    assert not any((ducklake / "_files").iterdir()) and not any(p.is_file() for p in (ducklake / "data").rglob("*"))
    good = tmp_path / "good"
    write_demo_dataset(good, episodes=1, steps=4, width=32, height=24)
    assert ortf(["export", "mixtrain", str(good), str(iceberg), "--table", "iceberg"]) == 0
    assert iceberg_table(iceberg).scan().to_arrow().num_rows == 1
    assert ortf(["export", "mixtrain", str(good), str(ducklake), "--table", "ducklake"]) == 0
    with attached(ducklake, read_only=True) as connection:
        assert connection.sql("SELECT count(*) FROM lake.mixtrain").fetchone() == (1,)


def test_mcap_column_names_the_source_recording(datasets: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, _, converted = datasets
    standalone, lake = tmp_path / "standalone", tmp_path / "lake"
    assert ortf(["export", "mixtrain", str(converted), str(standalone)]) == 0
    assert ortf(["export", "mixtrain", str(converted), str(lake), "--table", "delta"]) == 0
    bag = next(converted.parent.glob("teleop*"))
    sources = pq.read_table(converted / "meta" / "episodes.parquet").column("source").to_pylist()
    assert all(Path(source["path"]) == bag.absolute() for source in sources) and sources
    expected = [str(bag.absolute())] * len(sources)
    assert pq.read_table(standalone / "data").column("mcap").to_pylist() == expected
    assert DeltaTable(str(lake)).to_pyarrow_table().column("mcap").to_pylist() == expected
    assert json.loads((standalone / "mixtrain.json").read_text())["column_types"]["mcap"] == {"type": "mcap"}


def test_bad_table_arguments_are_one_line(
    datasets: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo, _, _ = datasets
    a_file = tmp_path / "file"
    a_file.write_bytes(b"keep")
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("keep me")
    err = one_line_error(capsys, "export mixtrain", demo, a_file, "--table", "delta", code=2)
    assert "is a file; expected a new or empty directory or a delta table" in err and a_file.read_bytes() == b"keep"
    err = one_line_error(capsys, "export mixtrain", demo, other, "--catalog", "sqlite:///x.db", code=2)
    assert "--catalog sqlite:///x.db: only with --table iceberg" in err  # refused before OUT is looked at
    err = one_line_error(capsys, "export mixtrain", demo, tmp_path / "d", "--table", "delta", "--catalog", "x", code=2)
    assert "--catalog x: a catalog is only for --table iceberg" in err
    err = one_line_error(
        capsys, "export mixtrain", demo, tmp_path / "i", "--table", "iceberg", "--catalog", "nodb://x", code=2
    )
    assert "--catalog nodb://x: cannot open this SQL catalog" in err
    assert "--table parquet: unknown table kind" in one_line_error(
        capsys, "export mixtrain", demo, tmp_path / "d", "--table", "parquet", code=2
    )
    err = one_line_error(capsys, "export mixtrain", demo, other, "--table", "iceberg", code=2)
    assert "neither empty nor an Iceberg warehouse" in err
    err = one_line_error(capsys, "export mixtrain", demo, other, "--table", "ducklake", code=2)
    assert "neither empty nor a DuckLake (catalog.ducklake)" in err
    assert [p.name for p in other.iterdir()] == ["keep.txt"]
    broken_log = tmp_path / "broken_log" / "_delta_log"  # a table delta-rs cannot read
    broken_log.mkdir(parents=True)
    (broken_log / "00000000000000000000.json").write_text("not a commit\n")
    err = one_line_error(capsys, "export mixtrain", demo, broken_log.parent, "--table", "delta")
    assert "broken_log: the Delta write failed: " in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken_log", "file", "other"]  # nothing half-made
    assert [p.name for p in broken_log.parent.iterdir()] == ["_delta_log"]
