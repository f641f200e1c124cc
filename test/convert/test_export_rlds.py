"""``ortf export rlds``: the export written and read back by TensorFlow Datasets itself.

TensorFlow stays out of the main venv: ``scripts/tfds-env.sh`` builds a cached venv
(``.cache/tfds-venv``: tensorflow-cpu, tensorflow-datasets and this project) once, the
export runs there through the ``ortf`` command, and ``rlds_child.py`` reads the result
with ``tfds.builder_from_directory(...).as_dataset()`` and dumps every step, which is
compared here with the ORTF source.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.format import layout
from ortf_ros.synthetic.dataset import write_demo_dataset
from support.cli_errors import one_line_error

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).resolve().parents[1] / "support" / "rlds_child.py"
STATE = ("joint_positions", "joint_velocities", "ee_position", "ee_orientation", "gripper_position")
STEPS = 8
# The first test also builds the TFDS venv (about 3 minutes with an empty pip cache).
pytestmark = pytest.mark.timeout(900)


def child_env() -> dict[str, str]:
    """The test's environment for a process of the other venv, minus this venv's paths."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return env | {"TF_CPP_MIN_LOG_LEVEL": "3"}


@pytest.fixture(scope="module")
def tfds_python(announce: Callable[[str], None]) -> Path:
    python = REPO / ".cache" / "tfds-venv" / "bin" / "python"
    if not python.exists():
        announce(
            f"building {python.parent.parent} (TensorFlow Datasets, ~1.9 GB, 1-3 minutes) for the RLDS tests, once"
        )
    built = subprocess.run(
        ["bash", str(REPO / "scripts" / "tfds-env.sh")], capture_output=True, text=True, env=dict(os.environ)
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return REPO / ".cache" / "tfds-venv" / "bin" / "python"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    """Three episodes, two colour cameras and depth; the third one failed."""
    root = tmp_path_factory.mktemp("ortf") / "ds"
    write_demo_dataset(root, episodes=3, steps=STEPS, width=64, height=48)
    return load_dataset(root)


@pytest.fixture(scope="module")
def dump(tfds_python: Path, source: Dataset, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What TFDS reads from ``ortf export rlds`` run in the TFDS venv."""
    tmp = tmp_path_factory.mktemp("rlds")
    out = tmp / "rlds"
    command = [str(tfds_python), "-m", "ortf_ros.cli.ortf", "export", "rlds", str(source.root), str(out)]
    exported = subprocess.run(command, capture_output=True, text=True, env=child_env())
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert "3 episode(s), 24 steps" in exported.stdout
    read = subprocess.run(
        [str(tfds_python), str(CHILD), str(out), str(tmp / "dump.npz")], capture_output=True, text=True, env=child_env()
    )
    assert read.returncode == 0, read.stderr[-3000:]
    return np.load(tmp / "dump.npz")


def test_tfds_reads_every_step_as_in_the_source(source: Dataset, dump: Any) -> None:
    for n, episode in enumerate(source):
        steps = {key.removeprefix(f"{n}/steps/"): dump[key] for key in dump.files if key.startswith(f"{n}/steps/")}
        assert np.array_equal(steps["action"], episode.array("action"))
        assert steps["action"].dtype == np.float32
        for component in STATE:
            assert np.array_equal(steps[f"observation/{component}"], episode.array(layout.state_column(component)))
        concatenated = np.concatenate([episode.array(layout.state_column(c)) for c in STATE], axis=1)
        assert np.array_equal(steps["observation/state"], concatenated)
        assert np.array_equal(steps["timestamp"], episode.array("timestamp"))
        for flag in ("is_first", "is_last", "is_terminal"):
            assert np.array_equal(steps[flag], episode.array(flag)), flag
        assert steps["is_first"].tolist() == [True] + [False] * (STEPS - 1)
        assert steps["is_last"].tolist() == [False] * (STEPS - 1) + [True]
        success = bool(episode.record.success)
        assert steps["reward"].tolist() == [0.0] * (STEPS - 1) + [1.0 if success else 0.0]
        assert steps["discount"].tolist() == [1.0] * STEPS
        assert {s.decode() for s in steps["language_instruction"]} == {episode.task.instruction}
        for camera in ("cam_wrist", "cam_overhead"):
            frames = steps[f"observation/{camera}"]
            assert frames.shape == (STEPS, 48, 64, 3) and frames.dtype == np.uint8
            assert np.array_equal(frames, np.stack(list(episode.step_frames(camera))))  # PNG: lossless
        depth = steps["observation/depth"]
        assert depth.shape == (STEPS, 48, 64, 1) and depth.dtype == np.uint16
        assert np.array_equal(depth[..., 0], np.stack(list(episode.step_frames("depth"))))  # bit-exact mm
        episode.close()


def test_episode_metadata_and_dataset_info(source: Dataset, dump: Any) -> None:
    info = json.loads(str(dump["info"]))
    assert info["episodes"] == info["num_examples"] == 3
    assert info["name"] == "ortf_ros_synthetic_demo"
    assert {"observation", "action", "reward", "discount", "is_first", "is_last", "is_terminal"} <= set(
        info["step_features"]
    )
    assert "language_instruction" in info["step_features"]
    assert info["metadata"]["ortf_manifest"]["dataset_id"] == source.manifest.dataset_id
    for n, record in enumerate(source.episodes):
        metadata = {k.rsplit("/", 1)[1]: dump[k] for k in dump.files if k.startswith(f"{n}/episode_metadata/")}
        assert metadata["episode_id"].item().decode() == record.episode_id
        assert int(metadata["success"]) == (1 if record.success else 0)
        assert metadata["failure_reason"].item().decode() == (record.failure_reason or "")
        assert metadata["operator_notes"].item().decode() == record.operator_notes
        assert float(metadata["duration_seconds"]) == record.duration_seconds
    assert int(dump["2/episode_metadata/success"]) == 0  # the failed episode


def test_the_core_never_imports_tensorflow(tfds_python: Path) -> None:
    code = (
        "import sys, ortf_ros.cli.ortf, ortf_ros.dataset.reader, ortf_ros.convert.rlds_export, ortf.convert; "
        "assert 'tensorflow' not in sys.modules, 'imported'; "
        "import ortf_ros.convert as c; c.to_rlds; print(sorted(m for m in sys.modules if m.startswith('tensorflow')))"
    )
    done = subprocess.run([str(tfds_python), "-c", code], capture_output=True, text=True, env=child_env())
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_bad_input_is_one_line_and_leaves_the_destination_untouched(
    source: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert f"is {tmp_path} an ORTF dataset" in one_line_error(capsys, "export rlds", tmp_path, out)
    out.mkdir()
    (out / "keep.txt").write_text("keep me")
    assert "exists and is not empty" in one_line_error(capsys, "export rlds", source.root, out, code=2)
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_text() == "keep me"
    if importlib.util.find_spec("tensorflow_datasets") is None:  # the main venv: the extra is not installed
        error = one_line_error(capsys, "export rlds", source.root, tmp_path / "new", code=2)
        assert "pip install 'ortf_ros[rlds]'" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no scratch directory left
