"""`ortf` as a user runs it: exit codes 0/1/2, one line and no traceback on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeRecord


def ortf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ortf_ros.cli.ortf", *args], capture_output=True, text=True, env=dict(os.environ)
    )


def test_validate_exit_codes_and_json(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    assert ortf("validate", str(root), "--strict").returncode == 0
    path = root / layout.steps_path(0)
    table = pq.read_table(path)
    flags = table.column("is_first").to_pylist()
    flags[13] = True
    index = table.schema.get_field_index("is_first")
    pq.write_table(table.set_column(index, table.schema.field(index), [flags]), path)
    result = ortf("validate", str(root))
    assert result.returncode == 1
    line = next(x for x in result.stdout.splitlines() if "[steps.is_first]" in x)
    assert line.startswith("ERROR data/chunk-000/steps.parquet episode=000001 field=is_first")
    report = json.loads(ortf("validate", str(root), "--json", "--episode", "000001").stdout)
    assert any(f["rule"] == "steps.is_first" and f["episode"] == "000001" for f in report["findings"])
    assert ortf("validate", str(root), "--episode", "000000").returncode == 0
    assert ortf("validate", str(root / "nope")).returncode == 2
    assert ortf("validate").returncode == 2


def test_info_reports_what_the_dataset_holds(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    result = ortf("info", str(root))
    assert result.returncode == 0
    assert "episodes  3" in result.stdout and "steps     36" in result.stdout
    assert "66.7% (2 succeeded, 1 failed, 0 not evaluated)" in result.stdout
    assert "depth            depth_camera  64x48 @ 30 fps  ffv1 gray16le" in result.stdout
    info = json.loads(ortf("info", str(root), "--json").stdout)
    assert info["success_rate"] == 2 / 3
    assert [c["codec"] for c in info["cameras"]] == ["h264", "h264", "ffv1"]
    assert [t["episodes"] for t in info["tasks"]] == [2, 1]


def test_bad_input_is_one_line_without_traceback(tmp_path: Path) -> None:
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta/manifest.json").write_text('{"ortf_version": "0.2"}')
    missing = tmp_path / "missing"
    for args, code in (
        (("info", str(tmp_path)), 1),  # a dataset that cannot be read: failed
        (("recover", str(tmp_path)), 1),
        (("info", str(missing)), 2),  # a path that is not there: usage
        (("recover", str(missing)), 2),
    ):
        result = ortf(*args)
        assert result.returncode == code, args
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not missing.exists()
    assert not (tmp_path / layout.STAGING_DIR).exists()
    assert "meta/manifest.json: robot: required field is missing" in ortf("info", str(tmp_path)).stderr


def test_recover_with_nothing_staged(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    result = ortf("recover", str(root))
    assert (result.returncode, result.stdout.strip()) == (0, f"{root}: nothing to recover")
    assert not (root / layout.STAGING_DIR).exists()
