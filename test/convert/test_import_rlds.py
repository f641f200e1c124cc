"""``ortf import rlds`` on RLDS written by TensorFlow Datasets itself: ``ortf export rlds``'s
output (the round trip), an Open X-Embodiment-shaped dataset (``fractal20220817_data``'s
features) and one with raw image arrays, float depth and episode metadata
(``support/rlds_sources_child.py``), all written in the TFDS venv; the import runs here,
in the main venv, without TensorFlow. Values are checked against what was written,
frames by decoding the imported videos."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from convert.test_export_rlds import child_env, tfds_python  # noqa: F401 (the fixture)
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.convert import from_rlds
from ortf_ros.convert.rlds_import import EPISODE_METADATA, NO_INSTRUCTION
from ortf_ros.convert.rlds_plan import ActionOptions
from ortf_ros.convert.tfrecord import _crc32c_numpy, _crc32c_python, masked_crc, read_records
from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout
from ortf_ros.synthetic.dataset import write_demo_dataset
from support.cli_errors import one_line_error
from support.rlds_sources_child import (
    INSTRUCTIONS,
    VARIED_RATE,
    oxe_image,
    oxe_step,
    varied_depth,
    varied_metadata,
    varied_step,
    varied_wrist_depth,
)

SOURCES = Path(__file__).resolve().parents[1] / "support" / "rlds_sources_child.py"
STEPS = 8
OXE_EPISODES, OXE_STEPS = 4, 6
SEVEN_D = ("world_vector", "rotation_delta", "gripper_closedness_action")
pytestmark = pytest.mark.timeout(900)


def written(tfds_python: Path, kind: str, out: Path, episodes: int, steps: int) -> Path:  # noqa: F811
    """An RLDS dataset ``kind`` written by TFDS in its venv."""
    command = [str(tfds_python), str(SOURCES), kind, str(out), str(episodes), str(steps)]
    done = subprocess.run(command, capture_output=True, text=True, env=child_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


# -- the round trip: ORTF -> ortf export rlds -> ortf import rlds ---------------------------


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    root = tmp_path_factory.mktemp("ortf") / "ds"
    write_demo_dataset(root, episodes=3, steps=STEPS, width=64, height=48)
    return load_dataset(root)


@pytest.fixture(scope="module")
def exported(tfds_python: Path, source: Dataset, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    out = tmp_path_factory.mktemp("rlds") / "rlds"
    command = [str(tfds_python), "-m", "ortf_ros.cli.ortf", "export", "rlds", str(source.root), str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=child_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def round_trip(exported: Path, tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    out = tmp_path_factory.mktemp("back") / "ortf"
    from_rlds(exported, out)
    return load_dataset(out)


def test_round_trip_gives_the_same_steps_tasks_and_labels(source: Dataset, round_trip: Dataset) -> None:
    assert len(round_trip.episodes) == len(source.episodes) == 3
    for before, after in zip(source, round_trip, strict=True):
        assert after.task.instruction == before.task.instruction
        for label in ("success", "failure_reason", "operator_notes", "recorded_at"):
            assert getattr(after.record, label) == getattr(before.record, label), label
        assert after.record.length == before.record.length == STEPS
        assert np.array_equal(after.array("action"), before.array("action"))
        for component in source.manifest.observation_space.state:
            column = layout.state_column(component)
            assert np.array_equal(after.array(column), before.array(column)), component
        for flag in ("is_first", "is_last", "is_terminal"):
            assert np.array_equal(after.array(flag), before.array(flag)), flag
        # tf.train.Example has float32 lists only: TFDS stores float64 timestamps as float32.
        np.testing.assert_allclose(after.array("timestamp"), before.array("timestamp"), rtol=0, atol=1e-6)
        before.close()
        after.close()


def test_round_trip_frames_within_the_codec_loss(source: Dataset, round_trip: Dataset) -> None:
    for before, after in zip(source, round_trip, strict=True):
        for camera in ("cam_wrist", "cam_overhead"):
            old = np.stack(list(before.step_frames(camera)))
            new = np.stack(list(after.step_frames(camera)))
            assert new.shape == old.shape == (STEPS, 48, 64, 3)
            assert psnr(new, old) > 35, camera  # H.264 once more over the PNG the export wrote
        old_depth = np.stack(list(before.step_frames("depth")))
        new_depth = np.stack(list(after.step_frames("depth")))
        assert new_depth.dtype == np.uint16 and np.array_equal(new_depth, old_depth)  # FFV1 / PNG: bit-exact
        before.close()
        after.close()


def test_round_trip_keeps_the_manifest(source: Dataset, round_trip: Dataset) -> None:
    old, new = source.manifest, round_trip.manifest
    assert new.action_space.dimensions == old.action_space.dimensions  # names, types and units
    assert new.observation_space.state == old.observation_space.state
    assert {k: (s.type, s.resolution, s.fps) for k, s in new.cameras.items()} == {
        k: (s.type, s.resolution, s.fps) for k, s in old.cameras.items()
    }
    assert new.robot.name == old.robot.name and new.robot.joints == old.robot.joints
    assert not new.native_streams  # reward and discount are the export's, derived: not kept
    features = new.extra["rlds"]["features"]
    assert features["steps/observation/state"].startswith("left: the state components concatenated")
    assert features["steps/action"] == "ORTF action"
    assert validate(round_trip.root).ok, validate(round_trip.root).failures


# -- Open X-Embodiment (fractal20220817_data) -------------------------------------------------


@pytest.fixture(scope="module")
def oxe(tfds_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    return written(tfds_python, "oxe", tmp_path_factory.mktemp("oxe") / "fractal", OXE_EPISODES, OXE_STEPS)


@pytest.fixture(scope="module")
def oxe_imported(oxe: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Dataset, str, str]:
    out = tmp_path_factory.mktemp("oxe-import") / "ortf"
    command = [sys.executable, "-m", "ortf_ros.cli.ortf", "import", "rlds", str(oxe), str(out), "--fps", "3"]
    command += ["--action-keys", ",".join(SEVEN_D)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return load_dataset(out), done.stdout, done.stderr


def test_oxe_imports_with_its_instruction_images_and_7d_action(oxe_imported: tuple[Dataset, str, str]) -> None:
    dataset, _, _ = oxe_imported
    assert len(dataset.episodes) == OXE_EPISODES
    assert [d.name for d in dataset.manifest.action_space.dimensions] == [
        "world_vector_0",
        "world_vector_1",
        "world_vector_2",
        "rotation_delta_0",
        "rotation_delta_1",
        "rotation_delta_2",
        "gripper_closedness_action",
    ]
    for n, episode in enumerate(dataset):
        steps = [oxe_step(n, i, OXE_STEPS, 80, 64) for i in range(OXE_STEPS)]
        assert episode.task.instruction == INSTRUCTIONS[n % len(INSTRUCTIONS)]
        action = np.stack([np.concatenate([s["action"][k] for k in SEVEN_D]) for s in steps])
        assert np.array_equal(episode.array("action"), action)
        for key in ("base_pose_tool_reached", "natural_language_embedding", "workspace_bounds"):
            expected = np.stack([s["observation"][key].reshape(-1) for s in steps])
            assert np.array_equal(episode.array(layout.state_column(key)), expected), key
        np.testing.assert_allclose(episode.array("timestamp"), np.arange(OXE_STEPS) / 3)
        assert episode.array("is_terminal").tolist() == [False] * (OXE_STEPS - 1) + [True]
        frames = np.stack(list(episode.step_frames("image")))
        assert frames.shape == (OXE_STEPS, 64, 80, 3)
        drawn = np.stack([oxe_image(n, i, 80, 64) for i in range(OXE_STEPS)])
        assert psnr(frames, drawn) > 30  # JPEG, then H.264
        stream = episode.stream("rlds_steps").to_pydict()
        terminate = np.array(stream["action_terminate_episode"])
        assert np.array_equal(terminate, np.stack([s["action"]["terminate_episode"] for s in steps]))
        assert stream["reward"] == [[0.0]] * (OXE_STEPS - 1) + [[1.0]]
        assert episode.record.success is None  # the source has no success label: none is made up
        episode.close()


def test_oxe_summary_says_where_each_feature_went(oxe_imported: tuple[Dataset, str, str]) -> None:
    dataset, stdout, stderr = oxe_imported
    lines = stdout.splitlines()
    assert lines[0].endswith(f"{OXE_EPISODES} episode(s), {OXE_EPISODES * OXE_STEPS} steps at 3 Hz, cameras: image")
    summary = dict(line.strip().split("  -> ") for line in lines[1:])
    summary = {k.strip(): v for k, v in summary.items()}
    assert len(summary) == 6 + 3 + 14 + 1  # action parts, flags, observation, reward: every feature
    assert summary["steps/action/world_vector"] == "ORTF action[0:3]"
    assert summary["steps/action/terminate_episode"].startswith("native stream 'rlds_steps'")
    assert summary["steps/observation/image"] == "camera 'image' (jpeg), a video per episode"
    assert summary["steps/observation/natural_language_instruction"] == "the episode's task (tasks.jsonl)"
    assert "(dim 9, (3, 3) flattened row-major)" in summary["steps/observation/workspace_bounds"]
    assert dataset.manifest.extra["rlds"]["features"] == summary
    assert "action: the dataset does not say its dimensions' types and units" in stderr
    units = {d.units for d in dataset.manifest.action_space.dimensions}
    assert units == {"unknown"} and dataset.manifest.action_space.type == "unknown"
    assert validate(dataset.root).ok, validate(dataset.root).failures


def test_action_options_state_the_semantics(oxe: Path, tmp_path: Path) -> None:
    options = ActionOptions(
        keys=SEVEN_D,
        types=("position",) * 3 + ("rotation",) * 3 + ("continuous",),
        units=("normalized",),
        space_type="end_effector_delta",
        names=("dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper"),
    )
    warnings: list[str] = []
    from_rlds(oxe, tmp_path / "out", fps=3, action=options, warn=warnings.append)
    space = load_dataset(tmp_path / "out").manifest.action_space
    assert space.type == "end_effector_delta" and space.control_frequency_hz == 3
    assert [(d.name, d.type, d.units) for d in space.dimensions][2:4] == [
        ("dz", "position", "normalized"),
        ("droll", "rotation", "normalized"),
    ]
    assert all(d.description is None for d in space.dimensions)
    assert not [w for w in warnings if w.startswith("action:")]


# -- raw arrays, float depth, episode metadata, the rate from metadata.json ----------------------


@pytest.fixture(scope="module")
def varied(tfds_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    return written(tfds_python, "varied", tmp_path_factory.mktemp("varied") / "rlds", 4, 5)


def test_raw_arrays_float_depth_and_episode_metadata(varied: Path, tmp_path: Path) -> None:
    warnings: list[str] = []
    result = from_rlds(varied, tmp_path / "out", float_depth_units="m", warn=warnings.append)
    assert result.fps == VARIED_RATE  # from metadata.json: no --fps needed
    assert result.uninstructed == 1 and sum("an empty instruction" in w for w in warnings) == 1
    dataset = load_dataset(tmp_path / "out")
    extension = dataset.manifest.extra["rlds"]
    assert extension["episode_metadata"] == {"file": EPISODE_METADATA, "episodes": 4}
    lines = (tmp_path / "out" / EPISODE_METADATA).read_text().splitlines()
    episode_metadata = {entry.pop("episode_id"): entry for entry in map(json.loads, lines)}
    for n, episode in enumerate(dataset):
        steps = [varied_step(n, i, 5) for i in range(5)]
        metadata = varied_metadata(n)
        assert episode.task.instruction == (metadata["language_instruction"] or NO_INSTRUCTION)
        assert episode.record.success is metadata["success"]
        assert episode.array("is_terminal")[-1] == (n % 2 == 0)
        assert np.array_equal(episode.array("action"), np.stack([s["action"] for s in steps]))
        gripper = np.array([s["observation"]["gripper"] for s in steps], np.float32)
        assert np.array_equal(episode.array(layout.state_column("gripper"))[:, 0], gripper)
        np.testing.assert_allclose(episode.array("timestamp"), np.arange(5) / VARIED_RATE)
        rgb = np.stack(list(episode.step_frames("rgb")))
        assert psnr(rgb, np.stack([s["observation"]["rgb"] for s in steps])) > 30
        for camera, later in (("depth", 0), ("image_with_depth", 1)):  # an array; a float32 image (PNG)
            depth = np.stack(list(episode.step_frames(camera)))
            metres = np.stack([varied_depth(n, i + later)[..., 0] for i in range(5)])
            expected = np.where(np.isfinite(metres) & (metres > 0), np.rint(metres * 1000), 0).astype(np.uint16)
            assert depth.dtype == np.uint16 and np.array_equal(depth, expected), camera  # the rule, bit-exact after
        wrist = np.stack(list(episode.step_frames("wrist_depth")))
        assert np.array_equal(wrist, np.stack([varied_wrist_depth(n, i)[..., 0] for i in range(5)]))
        kept = episode_metadata[episode.episode_id]
        assert kept == {"episode_metadata/file_path": metadata["file_path"], "episode_metadata/score": n / 4}
        stream = episode.stream("rlds_steps").to_pydict()
        assert stream["discount"] == [[pytest.approx(0.99)]] * 5
        episode.close()
    assert dataset.manifest.sensor("depth").extra["depth_units"] == "millimeters"  # type: ignore[union-attr]
    # uint16 depth whose units the source does not state: the required field says so (not guessed)
    assert dataset.manifest.sensor("wrist_depth").extra["depth_units"] == "unknown"  # type: ignore[union-attr]
    assert validate(dataset.root).ok, validate(dataset.root).failures
    assert extension["splits"] == {"train": {"first_episode": "000000", "episodes": 4}}


def test_float_depth_without_units_is_left_and_said(varied: Path, tmp_path: Path) -> None:
    result = from_rlds(varied, tmp_path / "out")
    assert result.cameras == ("rgb", "wrist_depth")
    for feature in ("depth", "image_with_depth"):
        assert result.summary[f"steps/observation/{feature}"].startswith("left: float depth whose units")


# -- memory ---------------------------------------------------------------------------------

PEAK_RSS = """
import resource, sys
from ortf_ros.convert import from_rlds
from_rlds(sys.argv[1], sys.argv[2], fps=10)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss_kib(src: Path, out: Path) -> int:
    done = subprocess.run([sys.executable, "-c", PEAK_RSS, str(src), str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_memory_stays_flat_over_many_episodes(tfds_python: Path, tmp_path: Path) -> None:  # noqa: F811
    short = written(tfds_python, "oxe", tmp_path / "short", 2, 20)
    many = written(tfds_python, "oxe", tmp_path / "many", 60, 20)
    short_kib = peak_rss_kib(short, tmp_path / "short-out")
    many_kib = peak_rss_kib(many, tmp_path / "many-out")
    # 30 times the episodes: the same peak within noise (an episode's record is ~0.2 MB).
    assert many_kib - short_kib < 16 * 1024, (short_kib, many_kib)
    assert len(load_dataset(tmp_path / "many-out").episodes) == 60


# -- the TFRecord reader ----------------------------------------------------------------------


def test_crc32c_is_tensorflows(exported: Path) -> None:
    """The pure-Python and the numpy CRC32C give the checksums TFDS wrote (numpy's checks the
    data when no native CRC32C is installed)."""
    shard = next(exported.glob("*.tfrecord-*"))
    raw = shard.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    assert masked_crc(raw[:8]) == int.from_bytes(raw[8:12], "little")
    data = raw[12 : 12 + length]
    assert masked_crc(data, _crc32c_python) == int.from_bytes(raw[12 + length : 16 + length], "little")
    assert len(data) > 4096  # numpy's lanes, not its fallback to the loop
    assert masked_crc(data, _crc32c_numpy) == masked_crc(data, _crc32c_python)
    for size in (4096, 4099, 65537):  # lanes padded in front, or not
        assert _crc32c_numpy(data[:size]) == _crc32c_python(data[:size]), size
    assert next(read_records(shard)) == data


# -- bad input ------------------------------------------------------------------------------------


def test_bad_input_is_one_line_and_leaves_nothing(
    oxe: Path, exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    error = one_line_error(capsys, "import rlds", oxe, out)
    assert "does not state its control rate" in error and "pass --fps HZ" in error
    error = one_line_error(capsys, "import rlds", oxe, out, "--fps", "3", "--action-keys", "world_vector,grip")
    assert "has no numeric part 'grip'" in error
    error = one_line_error(capsys, "import rlds", tmp_path, out)
    assert f"{tmp_path / 'dataset_info.json'}: missing; expected a TFDS builder directory" in error
    with pytest.raises(SystemExit, match="2"):
        ortf(["import", "rlds", str(oxe), str(out), "--fps", "0"])
    assert "argument --fps: expected a positive rate in Hz, got '0'" in capsys.readouterr().err

    broken = tmp_path / "broken"
    broken.mkdir()
    for file in exported.iterdir():
        (broken / file.name).write_bytes(file.read_bytes())
    shard = next(broken.glob("*.tfrecord-*"))
    intact = shard.read_bytes()
    flipped = bytearray(intact)
    flipped[40] ^= 0x10  # one bit inside record 0's data: a value that would import wrong
    shard.write_bytes(bytes(flipped))
    error = one_line_error(capsys, "import rlds", broken, out)
    assert f"{shard}: record 0: data checksum mismatch" in error
    shard.write_bytes(intact[:-100])  # cut inside the last episode
    error = one_line_error(capsys, "import rlds", broken, out)
    assert f"{shard}: record 2: the file ends inside the record" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken"]  # nothing half-written, no scratch left

    garbage = b"\xff" * 16  # framed as TFRecord, checksums right, but no Example inside
    length = len(garbage).to_bytes(8, "little")
    framed = length + masked_crc(length).to_bytes(4, "little") + garbage + masked_crc(garbage).to_bytes(4, "little")
    shard.write_bytes(framed)
    error = one_line_error(capsys, "import rlds", broken, out)
    assert f"{shard}: record 0: not a tf.train.Example" in error
    assert "--split val: " in one_line_error(capsys, "import rlds", exported, out, "--split", "val", code=2)

    features = json.loads((broken / "features.json").read_text())
    del features["featuresDict"]["features"]["steps"]
    (broken / "features.json").write_text(json.dumps(features))
    error = one_line_error(capsys, "import rlds", broken, out)
    assert "features.json: no Dataset feature" in error

    out.mkdir()
    (out / "keep.txt").write_text("keep me")
    assert "exists and is not empty" in one_line_error(capsys, "import rlds", exported, out, code=2)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_cli_prints_the_summary(exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ortf(["import", "rlds", str(exported), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "3 episode(s), 24 steps at 30 Hz, cameras: cam_overhead, cam_wrist, depth" in out
    lines = {line.split("->")[0].strip(): line.split("->")[1].strip() for line in out.splitlines()[1:]}
    assert lines["steps/reward"] == "left: derived from the episode's success by ortf export rlds"
    assert lines["episode_metadata/success"] == "the episode's success label"


def test_features_it_cannot_take_are_left_and_said(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dtype numpy lacks (bfloat16) and per-step text beside the instruction: left, each
    with its reason in the summary, and the rest imported."""
    odd = tmp_path / "odd"
    odd.mkdir()
    for file in exported.iterdir():
        (odd / file.name).write_bytes(file.read_bytes())
    features = json.loads((odd / "features.json").read_text())
    step = features["featuresDict"]["features"]["steps"]["sequence"]["feature"]["featuresDict"]["features"]
    observation = step["observation"]["featuresDict"]["features"]
    tensor = "tensorflow_datasets.core.features.tensor_feature.Tensor"
    observation["half"] = {"pythonClassName": tensor, "tensor": {"dtype": "bfloat16", "shape": {"dimensions": ["2"]}}}
    observation["note"] = {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text", "text": {}}
    (odd / "features.json").write_text(json.dumps(features))
    assert ortf(["import", "rlds", str(odd), str(tmp_path / "out")]) == 0
    summary = capsys.readouterr().out
    assert re.search(r"steps/observation/half +-> left: dtype 'bfloat16'", summary), summary
    assert re.search(r"steps/observation/note +-> left", summary), summary
    assert load_dataset(tmp_path / "out").total_steps == 3 * STEPS
