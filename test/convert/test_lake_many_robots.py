"""One Mixtrain lake table, many robots: `ortf export mixtrain --table delta|iceberg|ducklake`
appends datasets whose sensors differ by schema evolution, each read back with its lake's
own reader (deltalake, pyiceberg, DuckDB); another arm's meaning of a column is kept
under its robot, and a column of another type, or one arm described two ways, refused
without writing anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.sql import SqlCatalog

from convert.test_export_lake import iceberg_table, standalone_rows
from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.convert.mixtrain_ducklake import attached
from ortf_ros.convert.mixtrain_lake import LakeRows
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.errors import ExportError
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.dataset import write_demo_dataset
from support.cli_errors import one_line_error

NEEDS = ("duckdb_extension_ducklake",)  # loaded from its file by the DuckLake export
LAKES = ("delta", "iceberg", "ducklake")
LIDAR_COLUMNS = {"lidar_lidar", "lidar_lidar_index", "point_cloud_lidar_points"}
DEPTH_COLUMNS = {"video_depth_camera", "video_depth_camera_frame_index"}


def converted(tmp: Path, robot: str, *, lidar: bool = False, depth: bool = True) -> Path:
    """A teleop bag converted to ORTF, its robot renamed (another robot of the same arm)."""
    name = robot
    bag = write_teleop_bag(tmp / f"{name}_bag", "mcap", duration_s=1.0, lidar=lidar, with_depth=depth)
    root = tmp / name
    assert bag2ortf([str(bag.path), "-o", str(root)]) == 0
    manifest_file = root / "meta" / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["robot"]["name"] = robot
    manifest_file.write_text(json.dumps(manifest))
    return root


@pytest.fixture(scope="module")
def robots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two robots' datasets: one with a lidar and a depth camera, one with neither, and
    the standalone Mixtrain export of each."""
    tmp = tmp_path_factory.mktemp("robots")
    found = {
        "lidar_arm": converted(tmp, "lidar_arm", lidar=True),
        "plain_arm": converted(tmp, "plain_arm", depth=False),
    }
    for name, root in list(found.items()):
        assert ortf(["export", "mixtrain", str(root), str(tmp / f"{name}_standalone")]) == 0
        found[f"{name}_standalone"] = tmp / f"{name}_standalone"
    return found


def read_rows(kind: str, out: Path) -> list[dict[str, Any]]:
    """The table's rows through its lake's own reader."""
    if kind == "delta":
        rows: list[dict[str, Any]] = DeltaTable(str(out)).to_pyarrow_table().to_pylist()
    elif kind == "iceberg":
        rows = iceberg_table(out).scan().to_arrow().to_pylist()
    else:
        with attached(out.absolute(), read_only=True) as connection:
            rows = connection.sql("FROM lake.mixtrain").to_arrow_table().to_pylist()
    return rows


def read_property(kind: str, out: Path) -> dict[str, Any]:
    if kind == "delta":
        text = DeltaTable(str(out)).metadata().configuration["mixtrain"]
    elif kind == "iceberg":
        text = iceberg_table(out).properties["mixtrain"]
    else:
        with attached(out.absolute(), read_only=True) as connection:
            text = connection.sql("SELECT comment FROM duckdb_tables() WHERE table_name = 'mixtrain'").fetchone()[0]
    found: dict[str, Any] = json.loads(text)
    return found


def of_robot(rows: list[dict[str, Any]], robot: str) -> list[dict[str, Any]]:
    return sorted((row for row in rows if row["robot"] == robot), key=lambda row: row["sequence_id"])


def export(dataset: Path, out: Path, kind: str) -> None:
    assert ortf(["export", "mixtrain", str(dataset), str(out), "--table", kind]) == 0


def dataset_id(root: Path) -> str:
    return str(json.loads((root / "meta" / "manifest.json").read_text())["dataset_id"])


@pytest.mark.parametrize("kind", LAKES)
def test_two_robots_in_one_table_each_row_as_its_own_export(kind: str, robots: dict[str, Path], tmp_path: Path) -> None:
    alone = {}
    for robot in ("lidar_arm", "plain_arm"):
        export(robots[robot], tmp_path / f"alone_{robot}", kind)
        alone[robot] = of_robot(read_rows(kind, tmp_path / f"alone_{robot}"), robot)
        expected = standalone_rows(robots[f"{robot}_standalone"], dataset_id(robots[robot]))
        assert alone[robot] == sorted(expected, key=lambda row: row["sequence_id"]) and alone[robot]
    assert set(alone["lidar_arm"][0]) >= LIDAR_COLUMNS | DEPTH_COLUMNS
    assert not (LIDAR_COLUMNS | DEPTH_COLUMNS) & set(alone["plain_arm"][0])
    columns = list(alone["lidar_arm"][0])

    # The robot without the sensors first: the lidar's columns are added by the second
    # export, and the first one's files, without them, read back null in them.
    grown, shrunk = tmp_path / "grown", tmp_path / "shrunk"
    for out, order in ((grown, ("plain_arm", "lidar_arm")), (shrunk, ("lidar_arm", "plain_arm"))):
        for robot in order:
            export(robots[robot], out, kind)
        rows = read_rows(kind, out)
        assert len(rows) == len(alone["lidar_arm"]) + len(alone["plain_arm"])
        assert all(sorted(row) == sorted(columns) for row in rows)
        assert of_robot(rows, "lidar_arm") == alone["lidar_arm"]
        padded = [{name: row.get(name) for name in columns} for row in alone["plain_arm"]]
        assert of_robot(rows, "plain_arm") == padded
        assert all(row[name] is None for row in of_robot(rows, "plain_arm") for name in LIDAR_COLUMNS | DEPTH_COLUMNS)
        held = read_property(kind, out)  # every column's semantics, from the dataset that brought it
        assert held["column_types"] == read_property(kind, tmp_path / "alone_lidar_arm")["column_types"]
        assert held["ortf"]["dataset_id"] == dataset_id(robots[order[0]])
        assert set(held["ortf"]["robots"]) == set(order)
        assert set(held["ortf"]["robots"]["lidar_arm"]) >= LIDAR_COLUMNS  # the columns its rows have
        assert not LIDAR_COLUMNS & set(held["ortf"]["robots"]["plain_arm"])
    data_files = [path for path in grown.rglob("*.parquet") if "_files" not in path.parts]
    schemas = [set(pq.read_schema(path).names) for path in data_files]
    assert any(names >= LIDAR_COLUMNS for names in schemas)  # the lidar robot's files
    assert any(not LIDAR_COLUMNS & names for names in schemas)  # the first files, never rewritten


def foreign_table(kind: str, out: Path) -> None:
    """A table another tool wrote, whose ``length`` column holds text."""
    rows = pa.table({"sequence_id": ["x"], "length": ["long"]})
    if kind == "delta":
        write_deltalake(str(out), rows)
    elif kind == "iceberg":
        out.mkdir()
        catalog = SqlCatalog("ortf", uri=f"sqlite:///{out / 'catalog.db'}", warehouse=(out / "warehouse").as_uri())
        catalog.create_namespace("ortf")
        catalog.create_table("ortf.mixtrain", schema=rows.schema).append(rows)
    else:
        out.mkdir()
        with attached(out.absolute()) as connection:
            connection.execute("CREATE TABLE lake.mixtrain (sequence_id VARCHAR, length VARCHAR)")
            connection.execute("INSERT INTO lake.mixtrain VALUES ('x', 'long')")


def files_of(out: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(out)): (p.stat().st_size, p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}


def demo_arm(root: Path, rename_action: str | None = None) -> tuple[Path, str]:
    """Another arm's dataset (an 8-D action where the teleop arm's is 9-D), its first
    action dimension renamed if asked (the same arm, described otherwise); its robot."""
    write_demo_dataset(root, episodes=1, steps=4, width=32, height=24)
    manifest_file = root / "meta" / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    if rename_action:
        manifest["action_space"]["dimensions"][0]["name"] = rename_action
        manifest_file.write_text(json.dumps(manifest))
    return root, str(manifest["robot"]["name"])


@pytest.mark.parametrize("kind", LAKES)
def test_another_arm_brings_its_own_meaning_of_a_column_and_one_arm_keeps_one(
    kind: str, robots: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "table"
    export(robots["plain_arm"], table, kind)
    demo, arm = demo_arm(tmp_path / "demo")
    assert ortf(["export", "mixtrain", str(demo), str(tmp_path / "demo_standalone")]) == 0
    export(demo, table, kind)
    rows = read_rows(kind, table)
    assert {len(row["action"][0]) for row in of_robot(rows, arm)} == {8}
    assert {len(row["action"][0]) for row in of_robot(rows, "plain_arm")} == {9}
    action = read_property(kind, table)["column_types"]["action"]
    alone = json.loads((tmp_path / "demo_standalone" / "mixtrain.json").read_text())["column_types"]["action"]
    plain = json.loads((robots["plain_arm_standalone"] / "mixtrain.json").read_text())["column_types"]["action"]
    assert action == plain | {"by_robot": {arm: {k: v for k, v in alone.items() if k != "type"}}}
    assert set(read_property(kind, table)["ortf"]["robots"]) == {"plain_arm", arm}

    # The same arm again, its action described otherwise: refused, nothing written.
    before, rows = files_of(table), read_rows(kind, table)
    again, _ = demo_arm(tmp_path / "again", rename_action="renamed")
    err = one_line_error(capsys, "export mixtrain", again, table, "--table", kind)
    assert f"column action: names is {alone['names']} for robot {arm} in the table's 'mixtrain' property" in err
    assert files_of(table) == before and read_rows(kind, table) == rows


@pytest.mark.parametrize("kind", LAKES)
def test_a_column_of_another_type_is_refused_and_nothing_written(
    kind: str, robots: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo, _ = demo_arm(tmp_path / "demo")
    foreign = tmp_path / "foreign"
    foreign_table(kind, foreign)
    before, rows = files_of(foreign), read_rows(kind, foreign)
    err = one_line_error(capsys, "export mixtrain", demo, foreign, "--table", kind)
    lake = {"delta": "Delta", "iceberg": "Iceberg", "ducklake": "DuckLake"}[kind]
    assert f"column length is string in the {lake} table, int64 in this dataset's rows" in err
    assert files_of(foreign) == before and read_rows(kind, foreign) == rows


def test_ducklake_fetches_nothing(robots: dict[str, Path], tmp_path: Path) -> None:
    """The extension comes from its wheel: with no network and a fresh home (where DuckDB
    installs extensions), the export works and installs nothing."""
    home = tmp_path / "home"
    home.mkdir()
    out = tmp_path / "lake"
    argv = ["ortf", "export", "mixtrain", str(robots["plain_arm"]), str(out), "--table", "ducklake"]
    code = f"import sys\nfrom ortf_ros.cli.entry import ortf\nsys.argv = {argv!r}\nsys.exit(ortf())\n"
    unreachable = "http://127.0.0.1:9"  # the discard port: nothing listens
    env = os.environ | {"HOME": str(home), "http_proxy": unreachable, "https_proxy": unreachable}
    env |= {"HTTP_PROXY": unreachable, "HTTPS_PROXY": unreachable}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert "ducklake table created" in run.stdout
    assert list(home.iterdir()) == []  # no ~/.duckdb/extensions
    assert sorted(p.name for p in out.iterdir()) == ["_files", "catalog.ducklake", "data"]
    with duckdb.connect() as plain:  # a reader's DuckDB: the catalog is a DuckDB database
        plain.execute(f"ATTACH '{out / 'catalog.ducklake'}' AS meta (READ_ONLY)")
        tables = plain.sql("SELECT table_name FROM meta.ducklake_table WHERE end_snapshot IS NULL").fetchall()
        assert tables == [("mixtrain",)]
        tags = plain.sql("SELECT key FROM meta.ducklake_tag WHERE end_snapshot IS NULL").fetchall()
        assert tags == [("comment",)]  # the property, as the table's comment


def test_whose_meaning_an_entry_is_follows_the_columns_each_robot_has(robots: dict[str, Path], tmp_path: Path) -> None:
    """The rule on the property alone (``LakeRows.evolve``), from tables other exports left:
    a robot whose rows lack a column another robot brought may bring its own meaning of it;
    one whose rows have it may not; a table that lists no robots takes no second meaning;
    a property that is not Mixtrain's is one line."""
    lidar = LakeRows(load_dataset(robots["lidar_arm"]))
    ours = json.loads(lidar.property)
    columns = sorted(ours["column_types"])
    table = json.loads(lidar.property)  # the lidar brought by another arm, which scans twice as finely
    table["column_types"]["lidar_lidar"]["samples"] *= 2
    table["ortf"]["robots"] = {"fine_arm": columns, "lidar_arm": [c for c in columns if c not in LIDAR_COLUMNS]}
    evolved = json.loads(lidar.evolve(tmp_path, "Delta", lidar.schema, json.dumps(table)).property)
    entry = evolved["column_types"]["lidar_lidar"]
    assert entry["samples"] == 2 * ours["column_types"]["lidar_lidar"]["samples"]  # still fine_arm's
    assert entry["by_robot"] == {
        "lidar_arm": {k: v for k, v in ours["column_types"]["lidar_lidar"].items() if k != "type"}
    }
    assert evolved["ortf"]["robots"] == {"fine_arm": columns, "lidar_arm": columns}

    near = json.loads(lidar.property)  # another arm whose measured scan rate differs by 0.03 %: one meaning
    near["column_types"]["lidar_lidar"]["scan_rate"] *= 1.0003
    near["ortf"]["robots"] = {"near_arm": columns}
    evolved = json.loads(lidar.evolve(tmp_path, "Delta", lidar.schema, json.dumps(near)).property)
    assert "by_robot" not in evolved["column_types"]["lidar_lidar"]
    # Its rows have the lidar: its files say their own scans (another recording appends) ...
    table["ortf"]["robots"]["lidar_arm"] = columns
    assert json.loads(lidar.evolve(tmp_path, "Delta", lidar.schema, json.dumps(table)).property) == table
    table["column_types"]["video_wrist_camera"]["resolution"] = [640, 480]  # another day's camera setting
    assert json.loads(lidar.evolve(tmp_path, "Delta", lidar.schema, json.dumps(table)).property) == table
    # ... but its values keep one meaning, numbers within what two measurements differ by.
    table["column_types"]["timestamp"] = ours["column_types"]["timestamp"] | {"reference": "unix_epoch"}
    with pytest.raises(ExportError, match="column timestamp: reference is unix_epoch for robot lidar_arm"):
        lidar.evolve(tmp_path, "Delta", lidar.schema, json.dumps(table))
    table["column_types"]["timestamp"] = ours["column_types"]["timestamp"]
    table["column_types"]["obs_ft_sensor"] = ours["column_types"]["obs_ft_sensor"] | {"units": "kilonewtons"}
    with pytest.raises(ExportError, match="column obs_ft_sensor: units is kilonewtons for robot lidar_arm"):
        lidar.evolve(tmp_path, "Delta", lidar.schema, json.dumps(table))
    table["column_types"]["obs_ft_sensor"] = ours["column_types"]["obs_ft_sensor"]
    del table["ortf"]["robots"]  # whose rows the entry describes is unknown
    with pytest.raises(ExportError, match="the property lists no robots"):
        lidar.evolve(tmp_path, "Delta", lidar.schema, json.dumps(table))
    for stored in ("made by hand", "[1, 2]", '{"column_types": 3}', '{"ortf": 3}', '{"ortf": {"robots": {"a": 3}}}'):
        with pytest.raises(ExportError, match="is not Mixtrain's JSON object"):
            lidar.evolve(tmp_path, "DuckLake", lidar.schema, stored)
