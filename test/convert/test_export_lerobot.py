"""``ortf export lerobot``: the export read back by pyarrow / PyAV and by LeRobot 0.4.4 itself.

LeRobot runs in its own venv, built once by ``../shared/lerobot-env/setup.sh`` and cached
under ``.cache/lerobot-venv``; ``lerobot_child.py`` loads the export there with
``LeRobotDataset`` and dumps every item, which is compared here with the ORTF source.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow.parquet as pq
import pytest
from av.container import InputContainer

from dataset.test_writer_reader import psnr
from ortf_ros.cli.ortf import main as ortf_main
from ortf_ros.convert.gr00t_export import TASK_ANNOTATION, VALIDITY_ANNOTATION
from ortf_ros.convert.lerobot_common import ExportSummary
from ortf_ros.convert.lerobot_export import to_lerobot
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ConversionError
from ortf_ros.format import layout
from ortf_ros.io.scratch import scratch_directory
from ortf_ros.io.video import VideoSettings
from ortf_ros.synthetic.dataset import write_demo_dataset
from ortf_ros.synthetic.demo_arm import demo_action, demo_manifest, demo_rgb, demo_state
from support import lerobot_env
from support.child_process import kill_when
from support.cli_errors import one_line_error

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).resolve().parents[1] / "support" / "lerobot_child.py"
STEPS, WIDTH, HEIGHT = 20, 64, 48
COLOUR = ("cam_wrist", "cam_overhead")


@pytest.fixture(scope="module")
def lerobot_python(announce: Callable[[str], None]) -> Path:
    return lerobot_env.lerobot_python(announce)


def load_with_lerobot(python: Path, root: Path, dump: Path) -> Any:
    lerobot_env.run_in_lerobot(python, CHILD, str(root), str(dump), home=dump.parent / "hf-home")
    return np.load(dump)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    """Three episodes, two colour cameras and depth; the third one failed."""
    root = tmp_path_factory.mktemp("ortf") / "ds"
    write_demo_dataset(root, episodes=3, steps=STEPS, width=WIDTH, height=HEIGHT)
    return load_dataset(root)


@pytest.fixture(scope="module")
def exported(source: Dataset, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ExportSummary]:
    """Small video shards, so that one holds two episodes and the third starts another."""
    first = max(sum(len(data) for _, data in packets(source.episode(0).video_path(c))) for c in COLOUR)
    out = tmp_path_factory.mktemp("lerobot") / "out"
    return out, to_lerobot(source, out, video_files_size_in_mb=1.5 * first / 2**20)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def episodes_meta(root: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    return rows


def packets(path: Path, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(frame index from pts, payload) of the packets of frames [start, stop), in decode order."""
    with av.open(str(path)) as container:
        assert isinstance(container, InputContainer)
        stream = container.streams.video[0]
        base, fps = float(stream.time_base or 0), float(stream.average_rate or 0)
        first = stream.start_time or 0
        for packet in container.demux(stream):
            if packet.pts is None:
                continue
            index = round((packet.pts - first) * base * fps)
            if start <= index and (stop is None or index < stop):
                yield index - start, bytes(packet)


def expected_state(source: Dataset, episode_index: int) -> np.ndarray:
    episode = source.episode(episode_index)
    parts = [episode.array(layout.state_column(c)) for c in source.manifest.observation_space.state]
    return np.concatenate(parts, axis=1)


def test_layout_is_lerobot_v3_with_offsets_into_shared_files(
    source: Dataset, exported: tuple[Path, ExportSummary]
) -> None:
    root, summary = exported
    assert (summary.episodes, summary.frames, summary.videos_reused, summary.videos_reencoded) == (3, 3 * STEPS, 6, 0)
    info = read_json(root / "meta/info.json")
    assert info["codebase_version"] == "v3.0" and info["fps"] == 30 and info["robot_type"] == "ortf_demo_arm"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (3, 3 * STEPS, 2)
    assert info["splits"] == {"train": "0:3"}
    features = info["features"]
    state_names = features["observation.state"]["names"]
    assert state_names[:2] == ["joint_positions.demo_joint1", "joint_positions.demo_joint2"]
    assert state_names[-1] == "gripper_position.0" and features["observation.state"]["shape"] == [22]
    assert features["action"]["names"] == [d.name for d in source.manifest.action_space.dimensions]
    assert features["ortf.timestamp"]["dtype"] == "float64"
    assert {k for k, f in features.items() if f["dtype"] == "video"} == {f"observation.images.{c}" for c in COLOUR}
    assert features["observation.images.cam_wrist"]["shape"] == [HEIGHT, WIDTH, 3]

    meta = episodes_meta(root)
    assert [m["dataset_from_index"] for m in meta] == [0, STEPS, 2 * STEPS]
    assert [m["dataset_to_index"] for m in meta] == [STEPS, 2 * STEPS, 3 * STEPS]
    assert [m["ortf/success"] for m in meta] == [True, True, False]
    assert meta[2]["ortf/failure_reason"] == "gripper slipped"
    assert meta[0]["stats/observation.state/count"] == [STEPS] and len(meta[0]["stats/action/q50"]) == 8
    for camera in COLOUR:
        key = f"videos/observation.images.{camera}"
        assert [(m[f"{key}/chunk_index"], m[f"{key}/file_index"]) for m in meta] == [(0, 0), (0, 0), (0, 1)]
        spans = [t for m in meta for t in (m[f"{key}/from_timestamp"], m[f"{key}/to_timestamp"])]
        assert spans == pytest.approx(np.array([0, 1, 1, 2, 0, 1]) * STEPS / 30)
    tasks = pq.read_table(root / "meta/tasks.parquet").to_pylist()
    assert [(t["task_index"], t["__index_level_0__"]) for t in tasks] == [
        (i, source.task(i).instruction) for i in range(2)
    ]
    stats = read_json(root / "meta/stats.json")
    assert stats["observation.state"]["count"] == [3 * STEPS]
    assert set(stats["action"]) == {"min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"}

    rows = pq.read_table(root / "data/chunk-000/file-000.parquet")
    assert rows.num_rows == 3 * STEPS
    assert str(rows.schema.field("observation.state").type) == "fixed_size_list<element: float>[22]"
    assert np.array_equal(rows["index"].to_numpy(), np.arange(3 * STEPS))


def test_reused_video_is_the_source_bitstream(source: Dataset, exported: tuple[Path, ExportSummary]) -> None:
    """Shards hold ORTF's packets unchanged (no re-encode), each episode at its offset."""
    root, _ = exported
    for position, meta in enumerate(episodes_meta(root)):
        for camera in COLOUR:
            key = f"observation.images.{camera}"
            shard = root / f"videos/{key}/chunk-000/file-{meta[f'videos/{key}/file_index']:03d}.mp4"
            start = round(meta[f"videos/{key}/from_timestamp"] * 30)
            copied = sorted(packets(shard, start, start + STEPS))
            original = sorted(packets(source.episode(position).video_path(camera)))
            assert copied == original


def test_depth_is_kept_lossless_beside_the_lerobot_files(source: Dataset, exported: tuple[Path, ExportSummary]) -> None:
    root, _ = exported
    depth = read_json(root / "meta/info.json")["ortf"]["depth"]["depth"]
    for position in range(3):
        copy = root / depth["path"].format(episode_index=position, suffix=".mp4")
        assert copy.read_bytes() == source.episode(position).video_path("depth").read_bytes()
    rows = pq.read_table(root / "data/chunk-000/file-000.parquet")
    assert rows[depth["frame_index_column"]].to_pylist() == list(range(STEPS)) * 3
    assert (root / "ortf/meta/manifest.json").read_bytes() == (source.root / layout.MANIFEST).read_bytes()
    assert (root / "ortf/robot/robot.urdf").exists()


def test_lerobot_loads_every_frame_as_the_source_has_it(
    source: Dataset, exported: tuple[Path, ExportSummary], lerobot_python: Path, tmp_path: Path
) -> None:
    root, _ = exported
    items = load_with_lerobot(lerobot_python, root, tmp_path / "dump.npz")
    assert int(items["num_episodes"]) == 3 and len(items["index"]) == 3 * STEPS
    for position, episode in enumerate(source):
        rows = slice(position * STEPS, (position + 1) * STEPS)
        assert np.array_equal(items["episode_index"][rows], np.full(STEPS, position))
        assert np.array_equal(items["frame_index"][rows], np.arange(STEPS))
        assert np.allclose(items["timestamp"][rows], np.arange(STEPS) / 30, atol=1e-6)
        assert np.array_equal(items["ortf.timestamp"][rows], episode.array("timestamp"))
        assert np.array_equal(items["observation.state"][rows], expected_state(source, position))
        assert np.array_equal(items["action"][rows], episode.array("action"))
        assert np.array_equal(items["next.done"][rows], episode.array("is_terminal"))
        assert set(items["tasks"][rows]) == {episode.task.instruction}
        for camera in COLOUR:
            frames = items[f"observation.images.{camera}"][rows]
            for step in range(STEPS):
                assert np.array_equal(frames[step], episode.frame(camera, step)), (camera, position, step)


def test_reencoded_video_loads_in_lerobot_within_35_db(
    tmp_path: Path, lerobot_python: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """yuv444p episodes cannot be reused (LeRobot's shards are yuv420p): re-encoded, every
    episode in a shard and a data file of its own (tiny size limits)."""
    root = tmp_path / "ds444"
    config = WriterConfig(video=VideoSettings(pix_fmt="yuv444p"))
    write_demo_dataset(root, episodes=2, steps=12, width=WIDTH, height=HEIGHT, depth=False, config=config)
    source = load_dataset(root)
    seen: list[tuple[int, int]] = []
    out = tmp_path / "out"
    summary = to_lerobot(
        source, out, data_files_size_in_mb=1e-6, video_files_size_in_mb=1e-6, progress=lambda d, t: seen.append((d, t))
    )
    assert (summary.videos_reused, summary.videos_reencoded) == (0, 4)
    assert seen[-1] == (48, 48) and len(seen) == 48  # every re-encoded frame moves the bar
    assert sorted(p.name for p in (out / "data/chunk-000").iterdir()) == ["file-000.parquet", "file-001.parquet"]
    assert [m["data/file_index"] for m in episodes_meta(out)] == [0, 1]
    assert [m["videos/observation.images.cam_wrist/file_index"] for m in episodes_meta(out)] == [0, 1]
    items = load_with_lerobot(lerobot_python, out, tmp_path / "dump.npz")
    for position, episode in enumerate(source):
        for camera in COLOUR:
            frames = items[f"observation.images.{camera}"][position * 12 : (position + 1) * 12]
            for step in range(12):
                assert psnr(frames[step], episode.frame(camera, step)) >= 35


def test_gr00t_flavour_follows_the_conversion_guide(source: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "gr00t"
    assert ortf_main(["export", "lerobot", str(source.root), str(out), "--flavor", "gr00t"]) == 0
    info = read_json(out / "meta/info.json")
    assert info["codebase_version"] == "v2.0" and info["total_videos"] == 6 and info["total_chunks"] == 1
    modality = read_json(out / "meta/modality.json")
    state_dim = info["features"]["observation.state"]["shape"][0]
    action_dim = info["features"]["action"]["shape"][0]
    for part, dim in (("state", state_dim), ("action", action_dim)):
        spans = sorted((s["start"], s["end"]) for s in modality[part].values())
        covered = [i for start, end in spans for i in range(start, end)]
        assert covered == list(range(dim)), part  # contiguous, no overlap, nothing left out
    assert modality["state"]["ee_orientation"] == {"start": 17, "end": 21, "rotation_type": "quaternion"}
    assert list(modality["action"]) == [d.name for d in source.manifest.action_space.dimensions]
    assert modality["annotation"] == {"human.action.task_description": {}, "human.validity": {}}
    tasks = [json.loads(line) for line in (out / "meta/tasks.jsonl").read_text().splitlines()]
    assert [t["task_index"] for t in tasks] == list(range(len(tasks)))
    episodes = [json.loads(line) for line in (out / "meta/episodes.jsonl").read_text().splitlines()]
    assert [e["length"] for e in episodes] == [STEPS] * 3
    for position, episode in enumerate(source):
        rows = pq.read_table(out / info["data_path"].format(episode_chunk=0, episode_index=position))
        annotated = [c for c in rows.column_names if c.startswith("annotation.")]
        assert sorted(annotated) == sorted([TASK_ANNOTATION, VALIDITY_ANNOTATION])
        assert tasks[rows[TASK_ANNOTATION][0].as_py()]["task"] == episode.task.instruction
        assert tasks[rows[VALIDITY_ANNOTATION][0].as_py()]["task"] == ("valid" if episode.record.success else "invalid")
        assert np.array_equal(
            rows["observation.state"].combine_chunks().flatten().to_numpy().reshape(STEPS, -1),
            expected_state(source, position),
        )
        for new_key, entry in modality["video"].items():
            path = out / info["video_path"].format(
                episode_chunk=0, video_key=entry["original_key"], episode_index=position
            )
            assert sorted(packets(path)) == sorted(packets(episode.video_path(new_key)))
            with av.open(str(path)) as container:
                assert next(f.pts for f in container.decode(video=0)) == 0  # frame 0 at timestamp 0


def test_bad_input_one_line_and_nothing_written(
    source: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_ortf = tmp_path / "plain"
    not_ortf.mkdir()
    (not_ortf / "notes.txt").write_text("x")
    target = tmp_path / "new"
    err = one_line_error(capsys, "export lerobot", not_ortf, target)
    assert "meta/manifest.json" in err and "ORTF dataset" in err
    assert not target.exists()

    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("mine")
    err = one_line_error(capsys, "export lerobot", source.root, occupied, code=2)
    assert str(occupied) in err and "not empty" in err
    assert [p.name for p in occupied.iterdir()] == ["keep.txt"] and (occupied / "keep.txt").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no scratch left behind

    with pytest.raises(ConversionError, match="unknown flavor"):
        to_lerobot(source, tmp_path / "x", "rlds")  # type: ignore[arg-type]
    assert not (tmp_path / "x").exists()


def test_steps_sharing_a_camera_frame_are_re_encoded_one_frame_per_step(tmp_path: Path) -> None:
    """A camera slower than the steps (frame i is not step i) cannot be remuxed: LeRobot
    addresses frames by step, so each step's frame is encoded, repeats included."""
    root, steps = tmp_path / "slow-camera", 10
    with DatasetWriter(root, demo_manifest(WIDTH, HEIGHT, depth=False)) as writer:
        writer.begin_episode("Open the drawer")
        for step in range(steps):
            images = {c: demo_rgb(n, step, WIDTH, HEIGHT) for n, c in enumerate(COLOUR)} if step % 2 == 0 else {}
            writer.add_step(step / 30, demo_state(0, step), demo_action(0, step), images)
        writer.end_episode(success=True)
    source = load_dataset(root)
    summary = to_lerobot(source, tmp_path / "out")
    assert (summary.videos_reused, summary.videos_reencoded) == (0, 2)
    episode = source.episode(0)
    for camera in COLOUR:
        assert episode.array(layout.image_column(camera)).tolist() == [s // 2 for s in range(steps)]
        with av.open(str(tmp_path / f"out/videos/observation.images.{camera}/chunk-000/file-000.mp4")) as shard:
            decoded = [f.to_ndarray(format="rgb24") for f in shard.decode(video=0)]
        assert len(decoded) == steps
        for step, frame in enumerate(decoded):
            assert psnr(frame, episode.frame(camera, step // 2)) >= 35, (camera, step)


def test_what_a_killed_export_leaves_is_removed_by_the_next(source: Dataset, tmp_path: Path) -> None:
    """SIGKILLed mid-export, nothing is at the target; its scratch directory is removed by
    the next export there, and a live export's scratch directory is left alone."""
    out = tmp_path / "out"
    kill_when(
        ["-m", "ortf_ros.cli.ortf", "export", "lerobot", str(source.root), str(out)],
        ready=lambda: bool(list(tmp_path.glob(".out.export-*/export/*"))),
    )
    [stale] = tmp_path.glob(".out.export-*")
    assert not out.exists()
    unrelated = tmp_path / ".out.export-notes"  # named alike, but no export's (it has no owner lock)
    unrelated.mkdir()
    with scratch_directory(tmp_path, ".out.export-") as live:  # another export's, still at work
        assert ortf_main(["export", "lerobot", str(source.root), str(out)]) == 0
        assert sorted(tmp_path.glob(".out.export-*")) == sorted([live, unrelated])
    assert not stale.exists()
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["total_episodes"] == len(source.episodes)
