"""The spec's own Python API: its two conversion snippets run as the spec prints them.

The snippets are read from the spec's text at test time (``../shared/spec/ortf-v0.2.txt``)
and executed unchanged, not even their paths: each runs in a directory of its own where
the dataset sits at the path the snippet loads (``path/to/ortf``), and its output is
looked for at the path it writes. The LeRobot one runs in this process and must write
what ``ortf export lerobot`` writes; the RLDS one runs in the cached TensorFlow Datasets
venv (``scripts/tfds-env.sh``, as ``test_export_rlds.py`` does) and is read back with
``tfds.builder_from_directory`` by ``rlds_child.py``, step by step against the source.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import ortf
import ortf.convert
import ortf_ros.convert.lerobot_common
import ortf_ros.dataset.reader
import ortf_ros.dataset.validation
from convert.test_export_rlds import CHILD as RLDS_CHILD
from convert.test_export_rlds import STEPS, child_env, tfds_python  # noqa: F401 (the fixture)
from convert.test_export_rlds import test_episode_metadata_and_dataset_info as check_rlds_metadata
from convert.test_export_rlds import test_tfds_reads_every_step_as_in_the_source as check_rlds_steps
from ortf_ros.cli.ortf import main as ortf_main
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.errors import FormatError, OrtfError, UsageError
from ortf_ros.format import layout
from ortf_ros.synthetic.dataset import write_demo_dataset

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO.parent / "shared" / "spec" / "ortf-v0.2.txt"
SNIPPET = re.compile(r"from ortf import load_dataset\n.*?\b(to_\w+)\(ds, \"[^\"\n]*\"\)", re.DOTALL)
"""A snippet of the spec: from its first import to the conversion's call (the spec's text
runs the next paragraph on after that call's closing parenthesis)."""


def spec_snippets() -> dict[str, str]:
    """The spec's conversion snippets by the function they call, as the spec writes them."""
    if not SPEC.is_file():
        pytest.skip(f"{SPEC} is missing: the spec's snippets cannot be read")
    snippets = {match[1]: match[0] for match in SNIPPET.finditer(SPEC.read_text())}
    assert set(snippets) == {"to_lerobot", "to_rlds"}, snippets
    return snippets


def quoted(snippet: str, call: str) -> Path:
    """The path literal the snippet passes to ``call`` (``load_dataset("X")``, ``to_rlds(ds, "X")``)."""
    (word,) = re.findall(rf"\b{call}\((?:ds, )?\"([^\"\n]+)\"\)", snippet)
    return Path(word)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three episodes (the third failed), two colour cameras and depth, as the RLDS tests' source."""
    root = tmp_path_factory.mktemp("ortf") / "ds"
    write_demo_dataset(root, episodes=3, steps=STEPS, width=64, height=48)
    return root


def staged(snippet: str, source: Path, workdir: Path) -> tuple[Path, Path]:
    """``workdir`` with the dataset copied where the snippet loads it; (dataset, where it writes)."""
    dataset = workdir / quoted(snippet, "load_dataset")
    shutil.copytree(source, dataset)
    return dataset, workdir / quoted(snippet, r"to_\w+")


def test_the_lerobot_snippet_writes_what_ortf_export_lerobot_writes(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snippet = spec_snippets()["to_lerobot"]
    dataset, out = staged(snippet, source, tmp_path / "snippet")
    monkeypatch.chdir(tmp_path / "snippet")
    exec(compile(snippet, f"{SPEC.name} (to_lerobot)", "exec"), {})
    monkeypatch.undo()
    command = tmp_path / "command"
    assert ortf_main(["export", "lerobot", str(dataset), str(command)]) == 0
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(command) for p in command.rglob("*") if p.is_file())
    assert {".json", ".parquet", ".mp4"} <= {p.suffix for p in files}, files
    for relative in files:
        ours, theirs = out / relative, command / relative
        if relative.suffix == ".parquet":
            assert pq.read_table(ours).equals(pq.read_table(theirs)), relative
        elif relative.suffix == ".json":
            assert json.loads(ours.read_text()) == json.loads(theirs.read_text()), relative
        else:  # videos remuxed, not re-encoded; the manifest, URDF and depth kept as bytes
            assert ours.read_bytes() == theirs.read_bytes(), relative
    # What both wrote is the dataset: every step's action, in order.
    frames = pq.read_table(out / "data/chunk-000/file-000.parquet")
    expected = np.concatenate([episode.array("action") for episode in load_dataset(dataset)])
    assert np.array_equal(np.stack(frames.column("action").to_numpy(zero_copy_only=False)), expected)
    assert len(frames) == 3 * STEPS
    # A path does as well as a loaded dataset (the spec's `ds`).
    by_path = ortf.convert.to_lerobot(str(dataset), tmp_path / "by-path")
    assert (by_path.episodes, by_path.frames, by_path.path) == (3, 3 * STEPS, tmp_path / "by-path")
    assert pq.read_table(tmp_path / "by-path/data/chunk-000/file-000.parquet").equals(frames)


@pytest.mark.timeout(900)  # run first on a fresh clone, the fixture builds the TFDS venv (1-3 minutes)
def test_the_rlds_snippet_writes_what_tfds_reads_back_as_the_source(
    tfds_python: Path,  # noqa: F811 (the fixture)
    source: Path,
    tmp_path: Path,
) -> None:
    snippet = spec_snippets()["to_rlds"]
    dataset, out = staged(snippet, source, tmp_path / "snippet")
    ran = subprocess.run(
        [str(tfds_python), "-c", snippet], cwd=tmp_path / "snippet", capture_output=True, text=True, env=child_env()
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    read = subprocess.run(
        [str(tfds_python), str(RLDS_CHILD), str(out), str(tmp_path / "dump.npz")],
        capture_output=True,
        text=True,
        env=child_env(),
    )
    assert read.returncode == 0, read.stderr[-3000:]
    dump: Any = np.load(tmp_path / "dump.npz")
    opened = load_dataset(dataset)
    check_rlds_steps(opened, dump)  # actions, state, flags, rewards, camera frames and depth, exact
    check_rlds_metadata(opened, dump)


def test_ortf_is_a_face_over_ortf_ros() -> None:
    """One reader and one validator: the names are ``ortf_ros``'s own objects, not copies."""
    assert ortf.load_dataset is ortf_ros.dataset.reader.load_dataset
    assert ortf.Dataset is ortf_ros.dataset.reader.Dataset
    assert ortf.OrtfError is OrtfError
    assert ortf.Report is ortf_ros.dataset.validation.Report
    assert ortf.convert.ExportSummary is ortf_ros.convert.lerobot_common.ExportSummary


def test_validate_programmatically_as_ortf_validate(source: Path, tmp_path: Path) -> None:
    """``ortf.validate`` is the reference validator: a path or a loaded dataset, a report back."""
    assert ortf.validate(source, strict=True).ok
    assert ortf.validate(ortf.load_dataset(source), strict=True).ok
    broken = tmp_path / "broken"
    shutil.copytree(source, broken)
    (broken / layout.TASKS).unlink()
    report = ortf.validate(broken)
    assert not report.ok and any(f.file == layout.TASKS for f in report.failures), report.failures
    assert ortf_main(["validate", str(broken)]) == 1  # the command says the same


def test_bad_arguments_raise_one_line_and_touch_nothing(source: Path, tmp_path: Path) -> None:
    """The project's exceptions, one line naming the argument and what was expected; nothing
    written, no scratch directory left beside the output."""
    dataset = ortf.load_dataset(source)
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "keep.txt").write_text("keep me")
    cases: list[tuple[Any, Any, dict[str, Any], type[OrtfError], str]] = [
        (tmp_path / "nope", tmp_path / "a", {}, UsageError, "nope: no such file or directory; expected an ORTF"),
        (tmp_path, tmp_path / "a", {}, FormatError, f"missing (is {tmp_path} an ORTF dataset?)"),
        (dataset, kept, {}, UsageError, "kept: exists and is not empty; expected a new or empty directory"),
        (dataset, source, {}, UsageError, f"{source}: is the input {source}; expected another path"),
        (dataset, tmp_path / "a", {"fps": 30}, UsageError, "to_lerobot: unknown option(s) fps; expected some of"),
        (42, tmp_path / "a", {}, UsageError, "dataset: got int; expected a dataset opened by ortf.load_dataset"),
        (dataset, None, {}, UsageError, "out: got NoneType; expected the path of a new or empty directory"),
    ]
    for given, out, options, error, message in cases:
        with pytest.raises(error) as raised:
            ortf.convert.to_lerobot(given, out, **options)
        assert message in str(raised.value) and "\n" not in str(raised.value), raised.value
    if importlib.util.find_spec("tensorflow_datasets") is None:  # the main venv: the extra is not installed
        with pytest.raises(UsageError, match=re.escape("pip install 'ortf_ros[rlds]'")):
            ortf.convert.to_rlds(dataset, tmp_path / "a")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    assert [p.name for p in kept.iterdir()] == ["keep.txt"] and (kept / "keep.txt").read_text() == "keep me"
