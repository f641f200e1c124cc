"""Writer -> reader round trips, appends, chunking and plain-tool readability."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import av
import duckdb
import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.importing import import_episode
from ortf_ros.dataset.logs import StepLog
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.staging import StagedEpisode, lock_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.dataset.writer import Annotations, DatasetWriter
from ortf_ros.errors import FormatError, ReaderError, WriterError
from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.io import video as video_io
from ortf_ros.io.mapped_file import MappedFile
from ortf_ros.synthetic.dataset import write_demo_dataset
from ortf_ros.synthetic.demo_arm import (
    DEPTH_CAMERA,
    RGB_CAMERAS,
    TASKS,
    demo_action,
    demo_depth,
    demo_manifest,
    demo_rgb,
    demo_state,
)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def test_round_trip_state_action_exact_rgb_psnr_depth_bit_exact(tmp_path: Path) -> None:
    width, height, steps = 320, 240, 20
    write_demo_dataset(tmp_path / "ds", episodes=2, steps=steps, width=width, height=height)
    dataset = load_dataset(tmp_path / "ds")
    assert [e.episode_id for e in dataset.episodes] == ["000000", "000001"]
    for number, episode in enumerate(dataset):
        assert episode.task.instruction == TASKS[number]
        for name in dataset.manifest.observation_space.state:
            expected = np.stack([demo_state(number, s)[name] for s in range(steps)])
            np.testing.assert_array_equal(episode.array(layout.state_column(name)), expected)
        np.testing.assert_array_equal(episode.array("action"), np.stack([demo_action(number, s) for s in range(steps)]))
        np.testing.assert_allclose(episode.array("timestamp"), np.arange(steps) / 30, atol=1e-6)
        for cam_number, camera in enumerate(RGB_CAMERAS):
            for step, frame in enumerate(episode.step_frames(camera)):
                assert psnr(frame, demo_rgb(cam_number, step, width, height)) >= 35.0
        for step, frame in enumerate(episode.step_frames(DEPTH_CAMERA[0])):
            assert frame.dtype == np.uint16
            np.testing.assert_array_equal(frame, demo_depth(step, width, height))
        episode.close()


def test_random_access_frames_equal_sequential_decode(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    episode = load_dataset(root).episode("000001")
    sequential = list(episode.step_frames("cam_wrist"))
    with av.open(str(episode.video_path("cam_wrist"))) as container:
        plain = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(plain) == len(sequential)
    for index in [11, 0, 7, 3, 3, 10, 1]:
        np.testing.assert_array_equal(episode.frame("cam_wrist", index), plain[index])
    episode.close()


def test_episode_index_and_metadata_files(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    table = pq.read_table(root / layout.EPISODES)
    assert table.column_names == [
        "episode_id", "task_id", "start_step", "end_step", "length", "duration_seconds", "success",
        "failure_reason", "operator_notes", "chunk_id", "recorded_at", "video_files", "audio_file", "source",
        "accounting",
        "review_flag",
    ]  # fmt: skip
    assert table.column("source").null_count == 3  # (written by hand, not converted from a recording)
    assert table.schema.field("video_files").type == pa.struct(
        [("cam_wrist", pa.string()), ("cam_overhead", pa.string()), ("depth", pa.string())]
    )
    rows = table.to_pylist()
    assert [(r["start_step"], r["end_step"], r["length"]) for r in rows] == [(0, 12, 12), (12, 24, 12), (24, 36, 12)]
    assert [r["success"] for r in rows] == [True, True, False]
    assert rows[2]["failure_reason"] == "gripper slipped"
    assert rows[1]["video_files"]["depth"] == "videos/depth/chunk-000/episode_000001.mp4"
    tasks = [json.loads(line) for line in (root / layout.TASKS).read_text().splitlines()]
    assert tasks == [{"task_id": 0, "instruction": TASKS[0]}, {"task_id": 1, "instruction": TASKS[1]}]
    assert [r["task_id"] for r in rows] == [0, 1, 0]
    manifest = json.loads((root / layout.MANIFEST).read_text())
    for section in ("robot", "action_space", "observation_space", "sensors", "frames", "collection", "statistics",
                    "timestamp_reference", "sync_tolerance_ms"):  # fmt: skip
        assert section in manifest
    assert manifest["statistics"]["total_episodes"] == 3
    assert manifest["statistics"]["total_steps"] == 36
    assert manifest["robot"]["urdf_path"] == "robot/robot.urdf"
    depth_sensor = next(s for s in manifest["sensors"] if s["type"] == "depth_camera")
    assert depth_sensor["encoding"] == "ffv1"
    assert not (root / layout.STAGING_DIR).exists()


def test_stats_are_those_of_all_steps(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    stats = json.loads((root / layout.STATS).read_text())
    actions = np.stack([demo_action(e, s) for e in range(3) for s in range(12)]).astype(np.float64)
    np.testing.assert_allclose(stats["action"]["mean"], actions.mean(axis=0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(stats["action"]["std"], actions.std(axis=0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(stats["action"]["min"], actions.min(axis=0), rtol=1e-6)
    np.testing.assert_allclose(stats["action"]["max"], actions.max(axis=0), rtol=1e-6)
    # 36 values: the sketch is exact, so q01/q99 are order statistics of the data.
    for q, key in ((0.01, "q01"), (0.99, "q99")):
        for dim, value in enumerate(stats["action"][key]):
            assert np.min(np.abs(actions[:, dim] - value)) < 1e-6
            assert abs(value - np.quantile(actions[:, dim], q)) <= np.ptp(actions[:, dim]) * 0.1
    assert stats["action"]["count"] == [36]
    assert set(stats) == {"action", *(layout.state_column(n) for n in demo_manifest().observation_space.state)}


def test_append_continues_indices_tasks_and_stats(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    before = {p: p.read_bytes() for p in (root / "videos").rglob("*.mp4")}
    records = write_demo_dataset(root, episodes=2, steps=5, width=64, height=48)
    assert [(r.episode_id, r.start_step, r.end_step) for r in records] == [("000003", 36, 41), ("000004", 41, 46)]
    dataset = load_dataset(root)
    assert len(dataset) == 5
    assert len(dataset.tasks) == 2
    assert all(p.read_bytes() == data for p, data in before.items())
    steps = pq.read_table(root / layout.steps_path(0))
    assert steps["step_index"].to_pylist() == list(range(46))
    assert json.loads((root / layout.STATS).read_text())["action"]["count"] == [46]


def test_append_to_a_dataset_without_running_stats_rebuilds_them_once(
    small_dataset: tuple[Path, list[EpisodeRecord]],
) -> None:
    root, _ = small_dataset
    expected = json.loads((root / layout.STATS).read_text())
    (root / layout.STATS_STATE).unlink()  # as another writer would leave it
    write_demo_dataset(root, episodes=1, steps=4, width=64, height=48)
    stats = json.loads((root / layout.STATS).read_text())
    assert stats["action"]["count"] == [40]
    old = np.stack([demo_action(e, s) for e in range(3) for s in range(12)])
    new = np.stack([demo_action(3, s) for s in range(4)])
    np.testing.assert_allclose(stats["action"]["mean"], np.concatenate([old, new]).mean(axis=0), rtol=1e-6)
    assert expected["action"]["count"] == [36]


def test_chunks_hold_a_configured_number_of_episodes(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_demo_dataset(root, episodes=3, steps=4, width=64, height=48, config=WriterConfig(chunk_size=2))
    assert (root / "data/chunk-000/steps.parquet").exists() and (root / "data/chunk-001/steps.parquet").exists()
    assert (root / "videos/cam_wrist/chunk-001/episode_000002.mp4").exists()
    dataset = load_dataset(root)
    assert [e.chunk_id for e in dataset.episodes] == [0, 0, 1]
    assert dataset.episode(2).array("step_index").tolist() == [8, 9, 10, 11]
    assert pq.read_table(root / "data/chunk-001/steps.parquet").num_rows == 4


def test_plain_pyarrow_duckdb_and_pyav_read_the_dataset(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    steps = pq.read_table(root / "data/chunk-000/steps.parquet")
    assert steps.schema.field("action").type == pa.list_(pa.float32(), 8)
    assert steps.schema.field("observation.state.ee_orientation").type == pa.list_(pa.float32(), 4)
    counts = duckdb.execute(
        f"SELECT e.episode_id, count(*) AS n, sum(CAST(s.is_first AS INT)) AS firsts, bool_or(s.is_terminal) AS term "
        f"FROM '{root}/data/chunk-000/steps.parquet' s JOIN '{root}/meta/episodes.parquet' e USING (episode_id) "
        f"GROUP BY ALL ORDER BY 1"
    ).fetchall()
    assert counts == [("000000", 12, 1, True), ("000001", 12, 1, True), ("000002", 12, 1, True)]
    first_action = duckdb.execute(f"SELECT action[1] FROM '{root}/data/chunk-000/steps.parquet' LIMIT 1").fetchall()
    assert first_action[0][0] == pytest.approx(float(demo_action(0, 0)[0]))
    for camera in (*RGB_CAMERAS, DEPTH_CAMERA[0]):
        with av.open(str(root / f"videos/{camera}/chunk-000/episode_000002.mp4")) as container:
            assert sum(1 for _ in container.decode(video=0)) == 12


def test_step_index_per_episode_convention_is_read(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    path = root / "data/chunk-000/steps.parquet"
    table = pq.read_table(path)
    per_episode = pa.array([i % 12 for i in range(table.num_rows)], pa.int64())
    index = table.schema.get_field_index("step_index")
    pq.write_table(table.set_column(index, table.schema.field(index), per_episode), path)
    dataset = load_dataset(root)
    assert dataset.step_index_convention == "episode"
    assert dataset.episode("000002").array("step_index").tolist() == list(range(12))
    assert load_dataset(root).episode(1).array("action").shape == (12, 8)


def test_discarded_episode_leaves_no_trace(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    with DatasetWriter(root) as writer:
        writer.begin_episode("a task never done")
        writer.add_step(0.0, demo_state(0, 0), demo_action(0, 0), _images(0))
        writer.discard_episode()
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before


def test_annotations_are_stored_per_episode(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    objects = {
        "annotated_frame": 0,
        "objects": [{"label": "Box A", "bounding_box": {"x": 1, "y": 2, "width": 3, "height": 4}}],
    }
    with DatasetWriter(root, demo_manifest(64, 48)) as writer:
        writer.begin_episode("pick")
        writer.add_step(0.0, demo_state(0, 0), demo_action(0, 0), _images(0))
        writer.end_episode(success=True, annotations=Annotations(objects, b"\xff\xd8jpeg\xff\xd9"))
    assert json.loads((root / "annotations/episode_000000/scene_objects.json").read_text()) == objects
    assert (root / "annotations/episode_000000/first_frame.jpg").read_bytes() == b"\xff\xd8jpeg\xff\xd9"


def _images(step: int, width: int = 64, height: int = 48) -> dict[str, np.ndarray]:
    images = {cam: demo_rgb(n, step, width, height) for n, cam in enumerate(RGB_CAMERAS)}
    images[DEPTH_CAMERA[0]] = demo_depth(step, width, height)
    return images


def _step(frames: dict[str, int] | None = None, **change: object) -> tuple[tuple[object, ...], dict[str, object]]:
    """add_step arguments of a good step 0, with some of them replaced."""
    args: dict[str, object] = {
        "timestamp": 0.0,
        "state": demo_state(0, 0),
        "action": demo_action(0, 0),
        "images": _images(0),
    }
    args.update(change)
    return tuple(args.values()), {"frames": frames}


def _with_image(camera: str, image: np.ndarray) -> dict[str, np.ndarray]:
    return {**_images(0), camera: image}


BAD_STEPS = [
    ("wrong action size", lambda: _step(action=np.zeros(3)), "action: expected 8 values"),
    ("missing state", lambda: _step(state={"joint_positions": np.zeros(7)}), "missing"),
    ("unknown camera", lambda: _step(images=_with_image("cam_x", np.zeros((48, 64, 3), np.uint8))),
     "unknown camera 'cam_x'"),
    ("rgb dtype", lambda: _step(images=_with_image("cam_wrist", np.zeros((48, 64, 3), np.float32))),
     "camera 'cam_wrist': expected a uint8 image of shape (48, 64, 3)"),
    ("depth as rgb", lambda: _step(images=_with_image("depth", np.zeros((48, 64, 3), np.uint8))),
     "camera 'depth': expected a uint16 image of shape (48, 64)"),
    ("nan action", lambda: _step(action=np.full(8, np.nan)), "values must be finite"),
    ("no frame yet", lambda: _step(images={}), "camera 'cam_wrist' has no frame -1 (0 written)"),
    ("frame not written", lambda: _step(frames={"cam_wrist": 1}), "camera 'cam_wrist' has no frame 1 (1 written)"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "make", "message"), BAD_STEPS, ids=[c[0] for c in BAD_STEPS])
def test_bad_step_is_rejected_and_nothing_written_is_lost(
    small_dataset: tuple[Path, list[EpisodeRecord]], case: str, make: object, message: str
) -> None:
    root, _ = small_dataset
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with DatasetWriter(root) as writer:
        writer.begin_episode("pick")
        args, kwargs = make()  # type: ignore[operator]
        with pytest.raises(WriterError, match=_re(message)):
            writer.add_step(*args, **kwargs)
        writer.add_step(1.0, demo_state(0, 1), demo_action(0, 1), _images(1))
        with pytest.raises(WriterError, match="timestamp 0.5 must be finite and after"):
            writer.add_step(0.5, demo_state(0, 2), demo_action(0, 2), _images(2))
        record = writer.end_episode(success=True)
    assert record.length == 1
    assert all(path.read_bytes() == data for path, data in before.items() if "videos" in path.parts)
    assert len(load_dataset(root)) == 4


def _re(text: str) -> str:
    import re

    return re.escape(text)


def test_refuses_to_clobber_a_directory_it_did_not_create(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(WriterError, match="not an ORTF dataset"):
        DatasetWriter(tmp_path, demo_manifest()).open()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_second_writer_is_refused_while_one_is_open(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    with DatasetWriter(root), pytest.raises(WriterError, match="another process is writing"):
        DatasetWriter(root).open()


def test_a_writer_waiting_for_the_lock_excludes_the_next_one(tmp_path: Path) -> None:
    """The writer before it ends with nothing staged and removes its lock file: the lock
    the waiting one takes must be on the file that others will find."""
    root = tmp_path / "ds"
    with DatasetWriter(root, demo_manifest(64, 48)):
        pass
    first = DatasetWriter(root).open()
    waited: list[DatasetWriter] = []
    second = threading.Thread(target=lambda: waited.append(DatasetWriter(root).open()))
    second.start()
    time.sleep(0.2)  # (the second one waits; a lock on another handle conflicts in this process too)
    first.close()
    second.join()
    [writer] = waited
    try:
        with pytest.raises(WriterError, match="another process is writing"):
            lock_dataset(root, wait_s=0.1)
    finally:
        writer.close()
    assert not (root / layout.STAGING_DIR).exists()  # and it leaves no trace either


def test_appending_with_a_different_schema_is_refused(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    with pytest.raises(WriterError, match="cannot append"):
        DatasetWriter(root, demo_manifest(64, 48, depth=False)).open()


def test_malformed_manifest_names_the_field(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    manifest = json.loads((root / layout.MANIFEST).read_text())
    manifest["robot"]["joints"][2]["index"] = "two"
    (root / layout.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(FormatError, match=r"meta/manifest.json: robot.joints\[2\].index: expected an integer"):
        load_dataset(root)
    (root / layout.MANIFEST).write_text("{not json")
    with pytest.raises(FormatError, match="meta/manifest.json: not valid JSON"):
        load_dataset(root)


def test_missing_or_truncated_files_name_the_file(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    video = root / "videos/cam_wrist/chunk-000/episode_000001.mp4"
    video.write_bytes(video.read_bytes()[:300])
    with pytest.raises(ReaderError, match="episode_000001.mp4"):
        load_dataset(root).episode(1).frame("cam_wrist", 5)
    steps = root / "data/chunk-000/steps.parquet"
    steps.write_bytes(steps.read_bytes()[:-100])
    with pytest.raises(ReaderError, match="data/chunk-000/steps.parquet: unreadable Parquet"):
        load_dataset(root).episode(0).steps()
    (root / layout.EPISODES).unlink()
    with pytest.raises(FormatError, match="meta/episodes.parquet: missing"):
        load_dataset(root)


def test_npz_depth_from_another_writer_is_read(small_dataset: tuple[Path, list[EpisodeRecord]]) -> None:
    root, _ = small_dataset
    stack = np.stack([demo_depth(step, 64, 48) for step in range(12)])
    np.savez_compressed(root / "videos/depth/chunk-000/episode_000001.npz", depth=stack)
    table = pq.read_table(root / layout.EPISODES)
    rows = table.to_pylist()
    rows[1]["video_files"]["depth"] = "videos/depth/chunk-000/episode_000001.npz"
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), root / layout.EPISODES)
    episode = load_dataset(root).episode("000001")
    for step, frame in enumerate(episode.step_frames("depth")):
        np.testing.assert_array_equal(frame, stack[step])
    with pytest.raises(ReaderError, match="has no frame 12"):
        episode.frame("depth", 12)


def test_a_step_can_point_at_a_frame_other_than_the_newest(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "ds", demo_manifest(64, 48)) as writer:
        writer.begin_episode("pick")
        for frame in range(3):
            writer.add_frame("cam_wrist", demo_rgb(0, frame, 64, 48))
        writer.add_step(0.0, demo_state(0, 0), demo_action(0, 0), _images(0), frames={"cam_wrist": 1})
        with pytest.raises(WriterError, match=r"unknown camera\(s\) \['cam_x'\]"):
            writer.add_step(0.1, demo_state(0, 1), demo_action(0, 1), frames={"cam_x": 0})
        writer.end_episode()
    episode = load_dataset(tmp_path / "ds").episode(0)
    assert episode.array(layout.image_column("cam_wrist")).tolist() == [1]
    assert psnr(episode.frame("cam_wrist", 1), demo_rgb(0, 1, 64, 48)) >= 35.0


def test_import_episode_copies_another_datasets_episode_without_reencoding(
    small_dataset: tuple[Path, list[EpisodeRecord]], tmp_path: Path
) -> None:
    source_root, _ = small_dataset
    source = load_dataset(source_root)
    target = tmp_path / "target"
    write_demo_dataset(target, episodes=1, steps=3, width=64, height=48)
    with DatasetWriter(target) as writer:
        imported = [import_episode(writer, source.episode(i)) for i in (2, 0)]
    assert [r.episode_id for r in imported] == ["000001", "000002"]
    assert (imported[0].success, imported[0].failure_reason) == (False, "gripper slipped")
    result = load_dataset(target)
    for ours, theirs in ((result.episode(1), source.episode(2)), (result.episode(2), source.episode(0))):
        np.testing.assert_array_equal(ours.array("action"), theirs.array("action"))
        np.testing.assert_array_equal(ours.array("timestamp"), theirs.array("timestamp"))
        assert ours.task.instruction == theirs.task.instruction
        for camera in ("cam_wrist", "depth"):
            np.testing.assert_array_equal(ours.frame(camera, 5), theirs.frame(camera, 5))
    report = validate(target, strict=True)
    assert report.ok, [f.line() for f in report.findings]


def test_import_refuses_a_differently_laid_out_episode(
    small_dataset: tuple[Path, list[EpisodeRecord]], tmp_path: Path
) -> None:
    source_root, _ = small_dataset
    other = tmp_path / "other"
    write_demo_dataset(other, episodes=1, steps=3, width=64, height=48, depth=False)
    with (
        DatasetWriter(other) as writer,
        pytest.raises(WriterError, match="cannot import episode 000000: cameras differ"),
    ):
        import_episode(writer, load_dataset(source_root).episode(0))
    assert len(load_dataset(other)) == 1


def test_an_encoder_failure_reaches_the_caller_naming_the_camera(
    small_dataset: tuple[Path, list[EpisodeRecord]],
) -> None:
    root, _ = small_dataset
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with DatasetWriter(root) as writer:
        writer.begin_episode("pick")
        video = root / layout.STAGING_DIR / layout.episode_file_stem(3) / "videos" / "cam_wrist.mp4"
        video.parent.mkdir(parents=True)
        video.symlink_to("/dev/full")  # every write of cam_wrist's encoder process fails: ENOSPC
        with pytest.raises(WriterError, match=r"camera 'cam_wrist': encoding into .* No space left on device"):
            _record(writer, steps=200)  # raised by a later add_step, or at the latest by end_episode
        writer.discard_episode()
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert len(load_dataset(root)) == 3


def test_the_encoder_threads_are_joined_when_the_step_log_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: StepLog, batch: pa.RecordBatch) -> None:
        raise OSError(28, "No space left on device")

    with DatasetWriter(tmp_path / "ds", demo_manifest(64, 48)) as writer:
        writer.begin_episode("pick")
        writer.add_step(0.0, demo_state(0, 0), demo_action(0, 0), _images(0))
        monkeypatch.setattr(StepLog, "append", full)
        with pytest.raises(OSError, match="No space left on device"):
            writer.end_episode()
        assert not [t for t in threading.enumerate() if t.name.startswith("encoder ")]
        monkeypatch.undo()
        writer.discard_episode()


def _record(writer: DatasetWriter, steps: int) -> None:
    for step in range(steps):
        writer.add_step(step / 30, demo_state(0, step), demo_action(0, step), _images(step))
    writer.end_episode(success=True)


def test_a_frame_is_copied_before_add_frame_returns(tmp_path: Path) -> None:
    image = demo_rgb(0, 0, 64, 48)
    with DatasetWriter(tmp_path / "ds", demo_manifest(64, 48)) as writer:
        writer.begin_episode("pick")
        for camera, frame in _images(0).items():
            writer.add_frame(camera, image if camera == "cam_wrist" else frame)
        image[:] = 0  # the caller reuses its buffer while the frame waits for the encoder
        writer.add_step(0.0, demo_state(0, 0), demo_action(0, 0))
        writer.end_episode()
    assert psnr(load_dataset(tmp_path / "ds").episode(0).frame("cam_wrist", 0), demo_rgb(0, 0, 64, 48)) >= 35.0


def test_the_encoder_queue_is_bounded_by_configuration() -> None:
    assert WriterConfig.from_mapping({"encoder_queue_frames": 2}, "test").encoder_queue_frames == 2
    with pytest.raises(WriterError, match="encoder_queue_frames: expected an integer from 1 to 1024, got 0"):
        WriterConfig.from_mapping({"encoder_queue_frames": 0}, "test")
    with pytest.raises(WriterError, match="step_batch: expected an integer from 1 to 100000, got 0"):
        WriterConfig.from_mapping({"step_batch": 0}, "test")


def test_frames_whose_rows_ffmpeg_pads_round_trip(tmp_path: Path) -> None:
    width, height = 100, 50  # 300-byte colour rows and 200-byte depth rows: FFmpeg aligns them wider
    write_demo_dataset(tmp_path / "ds", episodes=1, steps=3, width=width, height=height)
    episode = load_dataset(tmp_path / "ds").episode(0)
    for step, frame in enumerate(episode.step_frames(DEPTH_CAMERA[0])):
        np.testing.assert_array_equal(frame, demo_depth(step, width, height))
    for step, frame in enumerate(episode.step_frames("cam_wrist")):
        assert psnr(frame, demo_rgb(0, step, width, height)) >= 35.0
    episode.close()


def test_steps_reach_the_staging_log_in_batches_of_step_batch(tmp_path: Path) -> None:
    tables = []
    for batch in (1, 4):
        root = tmp_path / f"batch{batch}"
        with DatasetWriter(root, demo_manifest(64, 48), config=WriterConfig(step_batch=batch)) as writer:
            writer.begin_episode("pick")
            for step in range(10):
                writer.add_step(step / 30, demo_state(0, step), demo_action(0, step), _images(step))
            staged = StagedEpisode(next((root / layout.STAGING_DIR).glob("episode_*")))
            assert sum(b.num_rows for b in staged.read_steps()) == 10 // batch * batch  # the rest waits
            writer.end_episode()
        tables.append(pq.read_table(root / layout.steps_path(0)))
        assert load_dataset(root).episode(0).record.length == 10
    assert tables[0].equals(tables[1])


def _x264_threads(video: Path) -> int:
    """The thread count x264 wrote into the stream's settings SEI ("... threads=N ...")."""
    found = re.search(rb"x264 - core .*? threads=(\d+) ", video.read_bytes())
    assert found is not None, f"{video}: no x264 settings string"
    return int(found.group(1))


def test_each_colour_video_gets_its_share_of_the_cores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(video_io, "usable_cpus", lambda: 4)  # (the share is decided in this process)
    # (x264 caps its threads by the rows of macroblocks: at 64x48 one, at 320x240 three)
    write_demo_dataset(tmp_path / "auto", steps=3, width=320, height=240)
    explicit = WriterConfig.from_mapping({"video": {"threads": 3}}, "test")
    write_demo_dataset(tmp_path / "three", steps=3, width=320, height=240, config=explicit)
    for root, threads in ((tmp_path / "auto", 2), (tmp_path / "three", 3)):  # 4 cores, 2 colour cameras
        videos = [root / layout.video_path(camera, 0, 0) for camera in RGB_CAMERAS]
        assert [_x264_threads(video) for video in videos] == [threads] * len(RGB_CAMERAS)
    with pytest.raises(WriterError, match=r"video.threads: expected an integer from 0 to 256, got -1"):
        WriterConfig.from_mapping({"video": {"threads": -1}}, "test")


def test_the_encoder_processes_hold_the_dataset_lock_while_their_videos_are_open(tmp_path: Path) -> None:
    """So that the dataset stays locked until a killed writer's videos are complete
    (test_crash.py shows the holding); closed, they let go of it."""
    root = tmp_path / "ds"
    lock = root / layout.STAGING_DIR / "writer.lock"

    def holders() -> set[int]:
        return {
            child.pid
            for child in psutil.Process().children()
            if any(Path(f.path) == lock for f in child.open_files() if Path(f.path).exists())
        }

    with DatasetWriter(root, demo_manifest(64, 48)) as writer:
        writer.begin_episode("pick")
        writer.add_step(0.0, demo_state(0, 0), demo_action(0, 0), _images(0))
        deadline = time.monotonic() + 60
        while len(holders()) < 3 and time.monotonic() < deadline:  # (a new process reads its first message late)
            time.sleep(0.01)
        assert len(holders()) == 3  # two colour cameras and depth
        writer.end_episode()
        assert holders() == set()


def _encoder_processes() -> list[psutil.Process]:
    """This process's encoder children (other children, e.g. another test's exited one, are not asked)."""
    found = []
    for child in psutil.Process().children():
        try:
            if "ortf_ros.io.encoder_process" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:  # gone, or a zombie not yet reaped
            continue
    return found


def _holding(path: Path) -> int:
    """How many encoder processes hold ``path`` open."""
    return sum(any(f.path == str(path) for f in child.open_files()) for child in _encoder_processes())


def _mapping(path: Path) -> int:
    """How many encoder processes map ``path`` into their memory."""
    return sum(any(m.path == str(path) for m in child.memory_maps()) for child in _encoder_processes())


def test_frames_that_lie_in_a_mapped_file_are_encoded_from_there(tmp_path: Path) -> None:
    """Frames that are views of a ``MappedFile`` (a raw image in an uncompressed MCAP
    chunk) reach the encoder processes as a place in the file, which they read: from two
    files, mixed with frames in memory, they decode as written (depth bit-exactly). An
    encoder process holds one of the files open at a time, and maps neither: the frames
    it read leave nothing of the file in its RSS."""
    width, height, steps = 320, 240, 80
    files, frames = [tmp_path / "a.bin", tmp_path / "b.bin"], {}
    for number, file in enumerate(files):
        with file.open("wb") as out:
            out.write(b"x" * 100)  # (frames off page boundaries)
            for step in range(number * steps // 2, (number + 1) * steps // 2):
                for camera, image in _images(step, width, height).items():
                    frames[camera, step] = (number, out.tell(), image.dtype, image.shape)
                    out.write(image.tobytes())
    mapped = [MappedFile(file) for file in files]
    with DatasetWriter(tmp_path / "ds", demo_manifest(width, height)) as writer:
        writer.begin_episode("pick")
        for step in range(steps):
            in_memory = _images(step, width, height)
            for camera in in_memory:
                number, offset, dtype, shape = frames[camera, step]
                view = np.frombuffer(mapped[number], dtype, int(np.prod(shape)), offset).reshape(shape)
                writer.add_frame(camera, in_memory[camera] if step % 4 == 3 else view)
            writer.add_step(step / 30, demo_state(0, step), demo_action(0, step))
            if step == steps // 2 - 1:
                deadline = time.monotonic() + 30  # (a process may not have read the file's message yet)
                while _holding(files[0]) < len(in_memory) and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert _holding(files[0]) == len(in_memory)  # every camera's process holds the file
        deadline = time.monotonic() + 30  # (the processes may still be encoding the first file's frames)
        while _holding(files[1]) < len(in_memory) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (_holding(files[0]), _holding(files[1])) == (0, len(in_memory))  # (one file at a time)
        assert _mapping(files[0]) == _mapping(files[1]) == 0
        writer.end_episode()
        assert _holding(files[1]) == 0  # (a closed video's processes let go of it)
    episode = load_dataset(tmp_path / "ds").episode(0)
    for step, frame in enumerate(episode.step_frames(DEPTH_CAMERA[0])):
        np.testing.assert_array_equal(frame, demo_depth(step, width, height))
    for number, camera in enumerate(RGB_CAMERAS):
        for step, frame in enumerate(episode.step_frames(camera)):
            assert psnr(frame, demo_rgb(number, step, width, height)) >= 35.0
    episode.close()
