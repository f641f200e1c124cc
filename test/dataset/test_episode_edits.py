"""Review decisions written back into a dataset: labels and deletes (``ortf_ros.dataset.edits``,
``ortf episodes``), each valid after, refused whole when it cannot be done, and safe to kill."""

from __future__ import annotations

import errno
import io
import json
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataset.test_append import LEGACY
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.dataset import deletion, edits
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.run_lock import run_lock
from ortf_ros.dataset.staging import lock_dataset, unlock_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.dataset.writer import Annotations, DatasetWriter
from ortf_ros.errors import DatasetBusyError, UsageError, WriterError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.format.native_streams import NativeStream
from ortf_ros.format.spaces import StateComponent
from ortf_ros.synthetic.demo_arm import TASKS, demo_action, demo_manifest, demo_rgb, demo_state

TEST_DIR = Path(__file__).resolve().parents[1]
CHILD = ("-m", "support.edit_child")  # run in TEST_DIR: it imports support.crash_child
STEPS, STEP_HZ, FT_HZ, CAMERAS = 8, 30, 200, ("cam_wrist", "cam_overhead")
EPISODES = 5  # chunk_size 2: chunks {0, 1}, {2, 3}, {4}; tasks 0, 1, 0, 1, 0


def manifest() -> Manifest:
    stream = NativeStream(columns={"force": StateComponent(3, "newtons")}, rate_hz=FT_HZ, source="/ft_sensor/wrench")
    return replace(demo_manifest(64, 48, depth=False), native_streams={"wrist_ft": stream})


def record_episodes(root: Path, count: int) -> None:
    """Episodes that differ from each other in every column, sample and frame."""
    with DatasetWriter(root, manifest(), config=WriterConfig(chunk_size=2)) as writer:
        for _ in range(count):
            number = int(writer.begin_episode(TASKS[writer.episode_count % len(TASKS)]))
            start, sample = 100.0 * number, -1
            for step in range(STEPS):
                while (sample + 1) / FT_HZ <= step / STEP_HZ:
                    sample += 1
                    force = np.array([number, sample, -1.0], np.float32)
                    writer.add_sample("wrist_ft", start + sample / FT_HZ, {"force": force})
                images = {cam: demo_rgb(n, step + 7 * number, 64, 48) for n, cam in enumerate(CAMERAS)}
                writer.add_step(
                    start + step / STEP_HZ,
                    demo_state(number, step),
                    demo_action(number, step),
                    images,
                    samples={"wrist_ft": sample},
                )
            box = {"x": number, "y": 0, "width": 8, "height": 8}
            scene = {"objects": [{"label": f"box {number}", "class": "box", "bounding_box": box, "color": "#ef4444"}]}
            writer.end_episode(success=True, annotations=Annotations(scene_objects=scene))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("edits") / "ds"
    record_episodes(root, EPISODES)
    return root


@pytest.fixture
def dataset(recorded: Path, tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    shutil.copytree(recorded, root)
    return root


def assert_strictly_valid(root: Path) -> None:
    report = validate(root, strict=True)
    assert report.findings == (), "\n".join(f.line() for f in report.findings)


def index_rows(root: Path) -> dict[str, dict[str, object]]:
    """meta/episodes.parquet as written, read with pyarrow alone."""
    return {row["episode_id"]: row for row in pq.read_table(root / layout.EPISODES).to_pylist()}


def contents(root: Path) -> dict[str, tuple[pa.Table, pa.Table, list[np.ndarray]]]:
    """Each episode's steps, native samples and a decoded frame of each camera."""
    found = {}
    for episode in load_dataset(root):
        frames = [episode.frame(camera, 5) for camera in CAMERAS]
        found[episode.episode_id] = (episode.steps(), episode.stream("wrist_ft"), frames)
        episode.close()
    return found


def own_files(root: Path, record: EpisodeRecord) -> list[Path]:
    """Every file and directory that is the episode's alone."""
    index = int(record.episode_id)
    paths = [root / path for path in record.video_files.values() if path is not None]
    paths.append(root / layout.episode_stream_path(record.chunk_id, "wrist_ft", index))
    paths.append(root / layout.annotations_dir(index))
    return paths


def test_each_label_is_written_to_the_index_and_reads_back(dataset: Path) -> None:
    record = edits.set_episode_labels(dataset, "000001", success=False, failure_reason="gripper slipped")
    assert (record.success, record.failure_reason) == (False, "gripper slipped")
    edits.set_episode_labels(dataset, "000001", operator_notes="cable in view")
    edits.set_episode_labels(dataset, "000003", review_flag=True)
    rows = index_rows(dataset)
    assert rows["000001"]["success"] is False
    assert rows["000001"]["failure_reason"] == "gripper slipped"
    assert rows["000001"]["operator_notes"] == "cable in view"
    assert [rows[i]["review_flag"] for i in sorted(rows)] == [None, None, None, True, None]
    assert pq.read_schema(dataset / layout.EPISODES).field("review_flag").type == pa.bool_()
    assert_strictly_valid(dataset)

    record = edits.set_episode_labels(dataset, "000001", success=True, review_flag=False, operator_notes="")
    assert (record.success, record.failure_reason, record.operator_notes, record.review_flag) == (
        True,
        None,
        None,
        False,
    )
    row = index_rows(dataset)["000001"]
    assert (row["success"], row["failure_reason"], row["operator_notes"], row["review_flag"]) == (
        True,
        None,
        None,
        False,
    )
    assert_strictly_valid(dataset)
    before = (dataset / layout.EPISODES).read_bytes()
    with pytest.raises(UsageError, match="a failure reason is for a failed episode; its outcome is success"):
        edits.set_episode_labels(dataset, "000001", failure_reason="dropped")
    with pytest.raises(UsageError, match="no episode with id '000042'"):
        edits.set_episode_labels(dataset, "000042", review_flag=True)
    with pytest.raises(UsageError, match="success: expected true, false or null, got 'yes'"):
        edits.set_episode_labels(dataset, "000001", success="yes")  # type: ignore[arg-type]
    assert (dataset / layout.EPISODES).read_bytes() == before
    assert not (dataset / layout.STAGING_DIR).exists()


def test_a_dataset_from_before_the_review_flag_takes_labels(tmp_path: Path) -> None:
    root = tmp_path / "legacy"
    shutil.copytree(LEGACY, root)
    assert "review_flag" not in pq.read_schema(root / layout.EPISODES).names
    edits.set_episode_labels(root, "000001", review_flag=True, success=False, failure_reason="late")
    row = index_rows(root)["000001"]
    assert (row["review_flag"], row["success"], row["failure_reason"]) == (True, False, "late")
    assert validate(root).ok


def test_deleting_first_middle_and_last_leaves_the_others_untouched(dataset: Path) -> None:
    before = contents(dataset)
    records = {e.episode_id: e.record for e in load_dataset(dataset)}
    for doomed in ("000000", "000002", "000004"):
        edits.delete_episodes(dataset, [doomed])
        assert_strictly_valid(dataset)
        assert all(not path.exists() for path in own_files(dataset, records[doomed]))
        assert doomed not in index_rows(dataset)
        assert not (dataset / layout.STAGING_DIR).exists()
    assert not (dataset / layout.steps_path(2)).exists()  # chunk 2 held episode 4 alone
    for chunk, kept in ((0, {"000001"}), (1, {"000003"})):
        table = pq.read_table(dataset / layout.steps_path(chunk), columns=["episode_id"])
        assert set(table["episode_id"].to_pylist()) == kept
    after = contents(dataset)
    assert sorted(after) == ["000001", "000003"]
    for episode_id, (steps, samples, frames) in after.items():
        old_steps, old_samples, old_frames = before[episode_id]
        assert steps.equals(old_steps) and samples.equals(old_samples)
        for frame, old in zip(frames, old_frames, strict=True):
            np.testing.assert_array_equal(frame, old)
    # Task 0, whose episodes are all deleted, is gone; task 1 keeps its id.
    tasks = [json.loads(line) for line in (dataset / layout.TASKS).read_text().splitlines()]
    assert [t["task_id"] for t in tasks] == [1]
    # Statistics and totals are those of the two episodes left.
    manifest_json = json.loads((dataset / layout.MANIFEST).read_text())
    assert manifest_json["statistics"]["total_episodes"] == 2
    assert manifest_json["statistics"]["total_steps"] == 2 * STEPS
    actions = np.concatenate([after[i][0]["action"].combine_chunks().flatten().to_numpy() for i in after])
    stats = json.loads((dataset / layout.STATS).read_text())["action"]
    assert stats["count"] == [2 * STEPS]
    np.testing.assert_allclose(
        stats["mean"], actions.reshape(2 * STEPS, -1).astype(np.float64).mean(axis=0), rtol=1e-6, atol=1e-7
    )

    # A new episode takes a new id and starts past every step range; the dataset stays valid.
    record_episodes(dataset, 1)
    rows = index_rows(dataset)
    assert sorted(rows) == ["000001", "000003", "000005"]
    assert rows["000005"]["start_step"] == rows["000003"]["end_step"]
    assert_strictly_valid(dataset)


def test_deleting_several_at_once_from_the_per_chunk_stream_layout(tmp_path: Path) -> None:
    root = tmp_path / "legacy"
    shutil.copytree(LEGACY, root)
    kept = load_dataset(root).episode("000001").stream("wrist_ft")
    edits.delete_episodes(root, ["000000", "000000"])
    table = pq.read_table(root / layout.stream_path(0, "wrist_ft"))
    assert set(table["episode_id"].to_pylist()) == {"000001"}
    assert load_dataset(root).episode("000001").stream("wrist_ft").equals(kept)
    report = validate(root)
    assert report.ok and {f.rule for f in report.findings} <= {"alignment.tolerance"}
    edits.delete_episodes(root, ["000001"])  # the last one: an empty dataset, valid
    assert index_rows(root) == {}
    assert not (root / layout.steps_path(0)).exists()
    assert_strictly_valid(root)


def test_a_dropped_task_id_is_not_given_again(tmp_path: Path) -> None:
    """Deleting every episode of the newest task drops it from tasks.jsonl; the next new task
    (here the same instruction again) takes a new id, so ids named elsewhere (an export, a
    note) never come to mean another task."""
    root = tmp_path / "ds"
    record_episodes(root, 2)  # tasks 0 and 1
    edits.delete_episodes(root, ["000001"])
    assert [json.loads(line)["task_id"] for line in (root / layout.TASKS).read_text().splitlines()] == [0]
    record_episodes(root, 1)  # TASKS[1] again
    tasks = {
        json.loads(line)["instruction"]: json.loads(line)["task_id"]
        for line in (root / layout.TASKS).read_text().splitlines()
    }
    assert tasks == {TASKS[0]: 0, TASKS[1]: 2}
    assert index_rows(root)["000002"]["task_id"] == 2
    assert_strictly_valid(root)


def test_unknown_ids_and_a_busy_dataset_are_refused_before_anything_changes(
    dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = (dataset / layout.EPISODES).read_bytes()
    with pytest.raises(UsageError, match="no episode with id '000099'"):
        edits.delete_episodes(dataset, ["000001", "000099"])
    monkeypatch.setattr(edits, "EDIT_LOCK_WAIT_S", 0.2)
    lock = lock_dataset(dataset)  # as a recorder or a conversion holds it
    try:
        with pytest.raises(DatasetBusyError, match="another process is writing this dataset"):
            edits.delete_episodes(dataset, ["000001"])
        with pytest.raises(DatasetBusyError):
            edits.set_episode_labels(dataset, "000001", review_flag=True)
        assert ortf(["episodes", "set", str(dataset), "000001", "--flag"]) == 1
    finally:
        unlock_dataset(dataset, lock)
    # An ortf-bag2ortf run into it, between two recordings:
    with run_lock(dataset), pytest.raises(DatasetBusyError, match="another ortf-bag2ortf run or an edit"):
        edits.set_episode_labels(dataset, "000001", review_flag=True)
    staged = dataset / layout.STAGING_DIR / "episode_000005"  # a recording a crash left
    staged.mkdir(parents=True)
    with pytest.raises(WriterError, match="has an unfinished episode .* run `ortf recover"):
        edits.delete_episodes(dataset, ["000001"])
    staged.rmdir()
    assert (dataset / layout.EPISODES).read_bytes() == before
    assert len(load_dataset(dataset)) == EPISODES


def test_an_index_naming_a_file_outside_the_dataset_is_refused_before_anything_changes(dataset: Path) -> None:
    """Another tool's index may name any path: a delete never touches one outside the dataset,
    and refuses before its commit point, so no journal is left that could not be finished."""
    table = pq.read_table(dataset / layout.EPISODES)
    rows = table.to_pylist()
    outside = dataset.parent / "elsewhere.mp4"
    outside.write_bytes(b"not ours")
    rows[1]["video_files"] = {**rows[1]["video_files"], "cam_wrist": "../elsewhere.mp4"}
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), dataset / layout.EPISODES)
    before = (dataset / layout.EPISODES).read_bytes()
    with pytest.raises(WriterError, match="names ../elsewhere.mp4, outside the dataset; nothing deleted"):
        edits.delete_episodes(dataset, ["000001"])
    assert (dataset / layout.EPISODES).read_bytes() == before and outside.read_bytes() == b"not ours"
    assert not (dataset / layout.STAGING_DIR / "deletion.json").exists()


@pytest.mark.parametrize("point", ["plan", "index", "table", "rows", "stats"])
def test_a_delete_killed_anywhere_is_finished_by_recover(dataset: Path, point: str) -> None:
    before = contents(dataset)
    doomed = {e.episode_id: e.record for e in load_dataset(dataset) if e.episode_id in ("000001", "000002")}
    child = subprocess.run(
        [sys.executable, *CHILD, str(dataset), point, *doomed],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=TEST_DIR,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    report = validate(dataset, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.failures)  # leftovers, never corruption
    assert "staging.interrupted_delete" in {f.rule for f in report.findings}
    happened = point != "plan"
    assert sorted(e.episode_id for e in load_dataset(dataset)) == (
        ["000000", "000003", "000004"] if happened else sorted(before)
    )

    assert ortf(["recover", str(dataset)]) == 0
    assert_strictly_valid(dataset)
    assert not (dataset / layout.STAGING_DIR).exists()
    after = contents(dataset)
    assert sorted(after) == (["000000", "000003", "000004"] if happened else sorted(before))
    for episode_id, (steps, samples, _) in after.items():
        assert steps.equals(before[episode_id][0]) and samples.equals(before[episode_id][1])
    for record in doomed.values():
        assert all(path.exists() != happened for path in own_files(dataset, record))
    assert not list(dataset.rglob(f"*{'.tmp-ortf'}"))


@pytest.mark.parametrize("next_one", ["writer", "edit"])
def test_an_interrupted_delete_is_finished_by_the_next_writer_or_edit(dataset: Path, next_one: str) -> None:
    child = subprocess.run(
        [sys.executable, *CHILD, str(dataset), "rows", "000002"], capture_output=True, timeout=120, cwd=TEST_DIR
    )
    assert child.returncode == -signal.SIGKILL
    assert (dataset / layout.STAGING_DIR / "deletion.json").is_file()
    if next_one == "writer":
        record_episodes(dataset, 1)
        assert sorted(index_rows(dataset)) == ["000000", "000001", "000003", "000004", "000005"]
    else:
        edits.set_episode_labels(dataset, "000004", review_flag=True)
        assert sorted(index_rows(dataset)) == ["000000", "000001", "000003", "000004"]
    assert not (dataset / layout.STAGING_DIR).exists()
    assert_strictly_valid(dataset)


def test_command_line(dataset: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = ortf(list(args))
        except SystemExit as exc:  # argparse's own refusals (OneLineParser): one line, exit 2
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    root = str(dataset)
    code, out, err = run("episodes", "set", root, "000001", "--failure", "--failure-reason", "slipped", "--flag")
    assert (code, err) == (0, "")
    assert out == "episode 000001: success true -> false, failure_reason null -> 'slipped', review_flag null -> true\n"
    assert run("episodes", "set", root, "000001", "--flag")[1] == "episode 000001: unchanged (already so)\n"
    assert run("episodes", "set", root, "000001", "--notes", "ok")[1] == "episode 000001: operator_notes null -> 'ok'\n"

    bad = [
        (["episodes", "set", root, "000001"], "nothing to set: give --success or --failure"),
        (["episodes", "set", root, "000042", "--flag"], "no episode with id '000042'"),
        (["episodes", "set", root, "000002", "--success", "--failure-reason", "x"], "a failure reason is for a failed"),
        (["episodes", "set", root, "000001", "--success", "--failure"], "not allowed with argument"),
        (["episodes", "delete", root, "000001"], "needs --yes when not asked on a terminal"),
        (["episodes", "delete", root, "000001", "000077", "--yes"], "no episode with id '000077'"),
        (["episodes", "delete", str(dataset / "nowhere"), "000001", "--yes"], "nowhere"),
    ]
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    for args, message in bad:
        code, out, err = run(*args)
        assert code == 2, (args, err)
        assert out == "" and err.count("\n") == 1 and message in err, (args, err)
    assert sorted(index_rows(dataset)) == [f"{i:06d}" for i in range(EPISODES)]

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    code, out, err = run("episodes", "delete", root, "000003")
    assert code == 1 and out.endswith(f"{root}: nothing deleted\n") and "[y/N]" in out
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    code, out, err = run("episodes", "delete", root, "000003")
    assert code == 0 and out.endswith(f"episode 000003: deleted ({STEPS} steps)\n")

    code, out, err = run("episodes", "delete", root, "000002", "000001", "--yes")
    assert (code, err) == (0, "")
    assert out == f"episode 000002: deleted ({STEPS} steps)\nepisode 000001: deleted ({STEPS} steps)\n"
    assert sorted(index_rows(dataset)) == ["000000", "000004"]
    assert ortf(["validate", "--strict", root]) == 0


def test_a_clean_up_that_fails_says_the_episodes_are_deleted_and_leaves_it_to_recover(
    dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(path: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(deletion, "_remove_file", full_disk)
    with pytest.raises(WriterError, match=r"episode\(s\) 000004 deleted, but removing their files failed \(.*No space"):
        edits.delete_episodes(dataset, ["000004"])
    assert "000004" not in index_rows(dataset)
    assert validate(dataset, strict=True).ok
    monkeypatch.undo()
    assert ortf(["recover", str(dataset)]) == 0
    assert_strictly_valid(dataset)
    assert not (dataset / layout.steps_path(2)).exists()
