"""The validator against a dataset built by hand (pyarrow, PyAV, json), one breakage per rule.

The reference dataset is written here without the package's writer or schema helpers,
so it is an independent reading of the spec: if the validator accepts it and the
writer's output alike, the two agree on the format. Each rule test copies it, breaks
exactly one thing and checks that the rule fires with its severity.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from av.video.stream import VideoStream

from dataset.test_native_streams import STREAM_BREAKAGES
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.dataset.validation import RULES, Finding, Report, check_manifest, steps, validate
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import WriterError
from ortf_ros.format.accounting import ACCOUNTING_TYPE, StreamAccount
from ortf_ros.format.manifest import Manifest
from ortf_ros.synthetic.dataset import write_demo_dataset
from ortf_ros.synthetic.demo_arm import JOINTS, demo_manifest
from pipeline.streams.test_audio import AUDIO_BREAKAGES
from pipeline.streams.test_lidar import LIDAR_BREAKAGES

WIDTH, HEIGHT, FPS = 32, 24, 10
STEPS = 4
EPISODES = 3
CHUNK_SIZE = 2  # episodes 0 and 1 in chunk-000, episode 2 in chunk-001
DEPTH_FRAMES = 2  # depth runs at half the step rate: frame indices 0, 0, 1, 1
STATE_DIMS = {"joint_positions": 2, "gripper_position": 1}
ACTION_DIM = 3

URDF = """<?xml version="1.0"?>
<robot name="tiny">
  <link name="base"/><link name="l1"/><link name="l2"/><link name="finger"/><link name="tool"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/></joint>
  <joint name="j2" type="prismatic"><parent link="l1"/><child link="l2"/></joint>
  <joint name="finger_mimic" type="prismatic"><parent link="l2"/><child link="finger"/><mimic joint="j2"/></joint>
  <joint name="tool_mount" type="fixed"><parent link="l2"/><child link="tool"/></joint>
  <transmission name="t1"><joint name="j1"/></transmission>
</robot>
"""


UNLISTED_JOINT = '<joint name="j3" type="continuous"><parent link="l2"/><child link="l3"/></joint><link name="l3"/>'


def manifest_dict() -> dict[str, Any]:
    identity = {"translation": [0.0, 0.0, 0.5], "rotation": [1.0, 0.0, 0.0, 0.0]}
    return {
        "ortf_version": "0.2",
        "dataset_id": "00000000-0000-0000-0000-000000000001",
        "name": "hand-built",
        "robot": {
            "name": "tiny",
            "dof": 2,
            "urdf_path": "robot/robot.urdf",
            "joints": [
                {"name": "j1", "type": "revolute", "index": 0, "limits": [-1.0, 1.0]},
                {"name": "j2", "type": "prismatic", "index": 1},
            ],
            "end_effector_link": "tool",
        },
        "action_space": {
            "type": "joint_position",
            "dimensions": [
                {"name": "j1", "index": 0, "type": "position", "units": "radians"},
                {"name": "j2", "index": 1, "type": "position", "units": "meters"},
                {"name": "grip", "index": 2, "type": "binary", "units": "discrete"},
            ],
        },
        "observation_space": {
            "state": {name: {"dim": dim} for name, dim in STATE_DIMS.items()},
            "images": {"cam_rgb": "rgb", "cam_depth": "depth"},
        },
        "sensors": [
            {
                "name": "rgb",
                "type": "camera",
                "resolution": {"width": WIDTH, "height": HEIGHT},
                "fps": FPS,
                "encoding": "h264",
                "intrinsics": {"fx": 30.0, "fy": 30.0, "cx": 16.0, "cy": 12.0},
                "extrinsics": {"parent_frame": "l1", **identity},
            },
            {
                "name": "depth",
                "type": "depth_camera",
                "resolution": {"width": WIDTH, "height": HEIGHT},
                "fps": FPS,
                "encoding": "ffv1",
                "depth_units": "millimeters",
                "depth_range": [0.1, 4.0],
                "extrinsics": {"parent_frame": "world", **identity},
            },
            {"name": "wrist_ft", "type": "force_torque", "rate_hz": 100, "range_force": 50, "range_torque": 5},
        ],
        "frames": {
            "world": {"type": "fixed", "convention": "z_up"},
            "robot_base": {"type": "fixed", "parent": "world", "transform": identity},
            "end_effector": {"type": "dynamic", "parent": "robot_base", "source": "forward_kinematics"},
        },
        "statistics": {
            "total_episodes": EPISODES,
            "total_steps": EPISODES * STEPS,
            "total_duration_hours": EPISODES * (STEPS - 1) / FPS / 3600,
        },
        "chunk_size": CHUNK_SIZE,
    }


def vector(dim: int) -> pa.DataType:
    return pa.list_(pa.float32(), dim)


STEP_SCHEMA = pa.schema(
    [
        ("episode_id", pa.string()),
        ("step_index", pa.int64()),
        ("timestamp", pa.float64()),
        ("is_first", pa.bool_()),
        ("is_last", pa.bool_()),
        ("is_terminal", pa.bool_()),
        ("action", vector(ACTION_DIM)),
        *((f"observation.state.{name}", vector(dim)) for name, dim in STATE_DIMS.items()),
        ("observation.images.cam_rgb.frame_index", pa.int64()),
        ("observation.images.cam_depth.frame_index", pa.int64()),
    ]
)
EPISODE_SCHEMA = pa.schema(
    [
        ("episode_id", pa.string()),
        ("task_id", pa.int64()),
        ("start_step", pa.int64()),
        ("end_step", pa.int64()),
        ("length", pa.int64()),
        ("duration_seconds", pa.float64()),
        ("success", pa.bool_()),
        ("failure_reason", pa.string()),
        ("operator_notes", pa.string()),
        ("chunk_id", pa.int64()),
        ("recorded_at", pa.string()),
        ("video_files", pa.struct([("cam_rgb", pa.string()), ("cam_depth", pa.string())])),
        ("audio_file", pa.string()),
        ("accounting", ACCOUNTING_TYPE),
    ]
)


def write_video(path: Path, frames: int, *, depth: bool, width: int = WIDTH) -> None:
    """A plain (faststart) MP4: H.264 yuv420p colour or FFV1 gray16le depth."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", format="mp4", options={"movflags": "+faststart"}) as out:
        stream = out.add_stream("ffv1" if depth else "libx264", rate=FPS)
        assert isinstance(stream, VideoStream)
        stream.width, stream.height = width, HEIGHT
        stream.pix_fmt = "gray16le" if depth else "yuv420p"
        for i in range(frames):
            if depth:
                frame = av.VideoFrame.from_ndarray(np.full((HEIGHT, width), 1000 + i, np.uint16), format="gray16le")
            else:
                frame = av.VideoFrame.from_ndarray(np.full((HEIGHT, width, 3), 40 * i, np.uint8), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, FPS)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)


def video_rel(camera: str, episode: int) -> str:
    return f"videos/{camera}/chunk-{episode // CHUNK_SIZE:03d}/episode_{episode:06d}.mp4"


def steps_rel(chunk: int) -> str:
    return f"data/chunk-{chunk:03d}/steps.parquet"


def episode_steps(episode: int, rng: np.random.Generator) -> dict[str, list[Any]]:
    rows = np.arange(STEPS)
    columns: dict[str, list[Any]] = {
        "episode_id": [f"{episode:06d}"] * STEPS,
        "step_index": (episode * STEPS + rows).tolist(),
        "timestamp": (rows / FPS).tolist(),
        "is_first": (rows == 0).tolist(),
        "is_last": (rows == STEPS - 1).tolist(),
        "is_terminal": (rows == STEPS - 1).tolist(),
        "action": rng.uniform(-1, 1, (STEPS, ACTION_DIM)).astype(np.float32).tolist(),
        "observation.images.cam_rgb.frame_index": rows.tolist(),
        "observation.images.cam_depth.frame_index": (rows * DEPTH_FRAMES // STEPS).tolist(),
    }
    for name, dim in STATE_DIMS.items():
        columns[f"observation.state.{name}"] = rng.uniform(-1, 1, (STEPS, dim)).astype(np.float32).tolist()
    return columns


def feature_stats(values: np.ndarray) -> dict[str, list[float]]:
    values = values.astype(np.float64)
    return {
        "mean": values.mean(0).tolist(),
        "std": values.std(0).tolist(),
        "min": values.min(0).tolist(),
        "max": values.max(0).tolist(),
        "q01": np.quantile(values, 0.01, axis=0).tolist(),
        "q99": np.quantile(values, 0.99, axis=0).tolist(),
    }


def build_dataset(root: Path) -> None:
    rng = np.random.default_rng(7)
    steps = [episode_steps(e, rng) for e in range(EPISODES)]
    for chunk in range((EPISODES + CHUNK_SIZE - 1) // CHUNK_SIZE):
        members = steps[chunk * CHUNK_SIZE : (chunk + 1) * CHUNK_SIZE]
        table = pa.concat_tables([pa.Table.from_pydict(s, schema=STEP_SCHEMA) for s in members])
        (root / steps_rel(chunk)).parent.mkdir(parents=True)
        pq.write_table(table, root / steps_rel(chunk), row_group_size=STEPS)
    rows = []
    for e in range(EPISODES):
        write_video(root / video_rel("cam_rgb", e), STEPS, depth=False)
        write_video(root / video_rel("cam_depth", e), DEPTH_FRAMES, depth=True)
        rows.append(
            {
                "episode_id": f"{e:06d}",
                "task_id": e % 2,
                "start_step": e * STEPS,
                "end_step": (e + 1) * STEPS,
                "length": STEPS,
                "duration_seconds": (STEPS - 1) / FPS,
                "success": [True, False, None][e],
                "failure_reason": [None, "dropped the cube", None][e],
                "operator_notes": "fine",
                "chunk_id": e // CHUNK_SIZE,
                "recorded_at": "2025-12-21T10:30:00Z",
                "video_files": {"cam_rgb": video_rel("cam_rgb", e), "cam_depth": video_rel("cam_depth", e)},
                "audio_file": None,
                "accounting": [
                    StreamAccount(
                        "cam_rgb", "camera", frames_encoded=STEPS, frames_in_video=STEPS, steps_referencing=STEPS
                    ).to_dict(),
                    StreamAccount(
                        "cam_depth", "depth", frames_in_video=DEPTH_FRAMES, steps_referencing=STEPS
                    ).to_dict(),
                ],
            }
        )
    (root / "meta").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=EPISODE_SCHEMA), root / "meta/episodes.parquet")
    tasks = [{"task_id": 0, "instruction": "pick the cube"}, {"task_id": 1, "instruction": "open the drawer"}]
    (root / "meta/tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    features = ["action", *(f"observation.state.{name}" for name in STATE_DIMS)]
    stats = {f: feature_stats(np.concatenate([np.array(s[f]) for s in steps])) for f in features}
    (root / "meta/stats.json").write_text(json.dumps(stats))
    (root / "meta/manifest.json").write_text(json.dumps(manifest_dict(), indent=2))
    (root / "robot").mkdir()
    (root / "robot/robot.urdf").write_text(URDF)
    (root / "annotations/episode_000000").mkdir(parents=True)
    box = {"x": 1, "y": 2, "width": 3, "height": 4}
    cube = {"label": "cube", "class": "box", "bounding_box": box, "color": "#ef4444"}
    scene = {"annotated_frame": 0, "objects": [cube]}
    (root / "annotations/episode_000000/scene_objects.json").write_text(json.dumps(scene))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reference") / "ds"
    build_dataset(root)
    return root


@pytest.fixture
def dataset(reference: Path, tmp_path: Path) -> Path:
    """A private copy of the reference dataset, to break."""
    return Path(shutil.copytree(reference, tmp_path / "ds"))


# -- ways to break a dataset ----------------------------------------------------------------

Breaker = Callable[[Path], None]


def edit_json(relative: str, change: Callable[[dict[str, Any]], None]) -> Breaker:
    def apply(root: Path) -> None:
        data = json.loads((root / relative).read_text())
        change(data)
        (root / relative).write_text(json.dumps(data))

    return apply


def edit_manifest(change: Callable[[dict[str, Any]], None]) -> Breaker:
    return edit_json("meta/manifest.json", change)


def edit_table(relative: str, change: Callable[[pa.Table], pa.Table]) -> Breaker:
    def apply(root: Path) -> None:
        pq.write_table(change(pq.read_table(root / relative)), root / relative)

    return apply


def edit_steps(chunk: int, change: Callable[[pa.Table], pa.Table]) -> Breaker:
    return edit_table(steps_rel(chunk), change)


def edit_episodes(change: Callable[[list[dict[str, Any]]], None]) -> Breaker:
    def rows(table: pa.Table) -> pa.Table:
        data = table.to_pylist()
        change(data)
        return pa.Table.from_pylist(data, schema=table.schema)

    return edit_table("meta/episodes.parquet", rows)


def stream_count(i: int, stream: str, **changes: int) -> Breaker:
    """Episode ``i``'s accounting row of ``stream`` doctored: each named count moved by its delta."""

    def change(rows: list[dict[str, Any]]) -> None:
        account = next(a for a in rows[i]["accounting"] if a["stream"] == stream)
        for key, delta in changes.items():
            account[key] += delta

    return edit_episodes(change)


def set_cell(table: pa.Table, column: str, row: int, value: Any) -> pa.Table:
    values = table[column].to_pylist()
    values[row] = value
    index = table.schema.get_field_index(column)
    return table.set_column(index, table.schema.field(index), pa.array(values, table.schema.field(index).type))


def cell(column: str, row: int, value: Any, chunk: int = 0) -> Breaker:
    return edit_steps(chunk, lambda t: set_cell(t, column, row, value))


def remove(relative: str) -> Breaker:
    return lambda root: (root / relative).unlink()


SCENE = "annotations/episode_000000/scene_objects.json"


def write(relative: str, text: str) -> Breaker:
    def apply(root: Path) -> None:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)

    return apply


def truncate(relative: str, fraction: float) -> Breaker:
    def apply(root: Path) -> None:
        data = (root / relative).read_bytes()
        (root / relative).write_bytes(data[: int(len(data) * fraction)])

    return apply


def both(*breakers: Breaker) -> Breaker:
    def apply(root: Path) -> None:
        for breaker in breakers:
            breaker(root)

    return apply


def move_video(camera: str, episode: int, target: str) -> Breaker:
    def rows(data: list[dict[str, Any]]) -> None:
        data[episode]["video_files"][camera] = target

    def apply(root: Path) -> None:
        (root / target).parent.mkdir(parents=True, exist_ok=True)
        (root / video_rel(camera, episode)).rename(root / target)
        edit_episodes(rows)(root)

    return apply


def stage(episode: str, *, committing: bool) -> Breaker:
    """A staged episode as the writer leaves it after a crash."""

    def apply(root: Path) -> None:
        directory = root / f".staging/episode_{episode}"
        directory.mkdir(parents=True)
        header = {"episode_index": int(episode), "episode_id": episode, "task": "t", "recorded_at": "2025-12-21"}
        (directory / "episode.json").write_text(json.dumps(header))
        if committing:
            (directory / "COMMIT.json").write_text(json.dumps({"success": True}))

    return apply


def extra_rows(episode_id: str) -> Breaker:
    def add(table: pa.Table) -> pa.Table:
        extra = table.slice(0, STEPS).set_column(0, "episode_id", pa.array([episode_id] * STEPS))
        return pa.concat_tables([table, extra])

    return edit_steps(1, add)


def urdf(change: Callable[[str], str]) -> Breaker:
    def apply(root: Path) -> None:
        path = root / "robot/robot.urdf"
        path.write_text(change(path.read_text()))

    return apply


def joint(i: int, key: str, value: Any) -> Breaker:
    return edit_manifest(lambda m: m["robot"]["joints"][i].__setitem__(key, value))


def sensor(i: int, key: str, value: Any) -> Breaker:
    return edit_manifest(lambda m: m["sensors"][i].__setitem__(key, value))


def base_rotation(rotation: list[float]) -> Breaker:
    return edit_manifest(lambda m: m["frames"]["robot_base"]["transform"].__setitem__("rotation", rotation))


def episode_field(i: int, key: str, value: Any) -> Breaker:
    def change(rows: list[dict[str, Any]]) -> None:
        rows[i][key] = value

    return edit_episodes(change)


def count_steps_from_zero(chunk: int) -> Breaker:
    """step_index per episode (0, 1, ...) instead of from start_step."""
    return edit_steps(chunk, lambda t: t.set_column(1, "step_index", pa.array(np.arange(t.num_rows) % STEPS)))


# -- expectations ----------------------------------------------------------------------------


def rules(report: Report) -> dict[str, str]:
    return {f.rule: f.severity for f in report.findings}


def assert_reports(report: Report, rule: str) -> None:
    found = rules(report)
    assert rule in found, "\n".join(f.line() for f in report.findings) or "no findings"
    assert found[rule] == RULES[rule][0]


BREAKAGES: list[tuple[str, Breaker]] = [
    # manifest
    ("manifest.missing", remove("meta/manifest.json")),
    ("manifest.unreadable", write("meta/manifest.json", "{not json")),
    ("manifest.unreadable", edit_manifest(lambda m: m["robot"]["joints"][0].__setitem__("index", "zero"))),
    ("manifest.required", edit_manifest(lambda m: m.pop("frames"))),
    ("manifest.version", edit_manifest(lambda m: m.__setitem__("ortf_version", "0.3"))),
    ("manifest.action_indices", edit_manifest(lambda m: m["action_space"]["dimensions"][2].__setitem__("index", 1))),
    (
        "manifest.action_type",
        edit_manifest(lambda m: m["action_space"]["dimensions"][2].__setitem__("type", "gripper")),
    ),
    (
        "manifest.action_units",
        edit_manifest(lambda m: m["action_space"]["dimensions"][0].__setitem__("units", "degrees")),
    ),
    ("manifest.joint_indices", joint(1, "index", 5)),
    ("manifest.joint_type", joint(0, "type", "fixed")),
    ("manifest.dof", edit_manifest(lambda m: m["robot"].__setitem__("dof", 7))),
    ("manifest.images", edit_manifest(lambda m: m["observation_space"]["images"].__setitem__("cam_rgb", "nope"))),
    ("manifest.images", edit_manifest(lambda m: m["observation_space"]["images"].__setitem__("cam_rgb", "wrist_ft"))),
    ("manifest.sensor_names", sensor(2, "name", "rgb")),
    ("manifest.sensor_fields", edit_manifest(lambda m: m["sensors"][0].pop("intrinsics"))),
    ("manifest.sensor_fields", edit_manifest(lambda m: m["sensors"][1].pop("depth_units"))),
    ("manifest.sensor_fields", edit_manifest(lambda m: m["sensors"][2].pop("range_torque"))),
    ("manifest.depth_encoding", sensor(1, "encoding", "h264")),
    ("manifest.intrinsics_unknown", sensor(0, "intrinsics", {"unknown": True})),
    ("manifest.quaternion", base_rotation([1.0, 1.0, 0.0, 0.0])),
    (
        "manifest.quaternion",
        edit_manifest(lambda m: m["sensors"][0]["extrinsics"].__setitem__("rotation", [0, 0, 0, 0])),
    ),
    ("manifest.quaternion_order", base_rotation([0.0, 0.0, 0.0, 1.0])),
    ("manifest.frame_parent", edit_manifest(lambda m: m["frames"]["robot_base"].__setitem__("parent", "table"))),
    ("manifest.frame_transform", edit_manifest(lambda m: m["frames"]["robot_base"].pop("transform"))),
    ("manifest.statistics", edit_manifest(lambda m: m["statistics"].__setitem__("total_steps", 11))),
    ("manifest.statistics", edit_manifest(lambda m: m["statistics"].__setitem__("total_duration_hours", 1.0))),
    ("manifest.urdf", edit_manifest(lambda m: m["robot"].__setitem__("urdf_path", "robot/missing.urdf"))),
    ("manifest.urdf", edit_manifest(lambda m: m["robot"].__setitem__("urdf_path", "meta/tasks.jsonl"))),
    ("manifest.urdf", write("robot/robot.urdf", "<robot><joint")),
    ("manifest.urdf", write("robot/robot.urdf", "<sdf/>")),
    ("manifest.urdf_joints", joint(1, "name", "j9")),
    ("manifest.urdf_joints", edit_manifest(lambda m: m["robot"].__setitem__("gripper", {"joints": ["no_such_joint"]}))),
    ("manifest.urdf_movable", urdf(lambda u: u.replace("</robot>", f"{UNLISTED_JOINT}</robot>"))),
    ("manifest.urdf_undeclared", edit_manifest(lambda m: m["robot"].pop("urdf_path"))),
    # episodes.parquet
    ("episodes.missing", remove("meta/episodes.parquet")),
    ("episodes.unreadable", write("meta/episodes.parquet", "PAR1 garbage")),
    ("episodes.schema", edit_table("meta/episodes.parquet", lambda t: t.drop_columns(["recorded_at"]))),
    (
        "episodes.schema",
        edit_table("meta/episodes.parquet", lambda t: t.set_column(4, "length", t["length"].cast("int32"))),
    ),
    ("episodes.schema", edit_table("meta/episodes.parquet", lambda t: set_cell(t, "episode_id", 1, None))),
    ("episodes.unique_id", episode_field(1, "episode_id", "000000")),
    ("episodes.length", episode_field(0, "length", 5)),
    ("episodes.empty", edit_episodes(lambda rows: rows[2].update(length=0, end_step=rows[2]["start_step"]))),
    ("episodes.overlap", edit_episodes(lambda rows: rows[1].update(start_step=2, end_step=6))),
    ("episodes.chunk_id", episode_field(1, "chunk_id", 1)),
    ("episodes.video_path", move_video("cam_rgb", 0, "videos/cam_rgb/chunk-001/episode_000000.mp4")),
    ("episodes.video_path", edit_episodes(lambda rows: rows[0]["video_files"].__setitem__("cam_depth", None))),
    ("episodes.video_name", move_video("cam_rgb", 0, "videos/cam_rgb/chunk-000/first.mp4")),
    ("episodes.audio_file", episode_field(0, "audio_file", "audio/episode_000000.wav")),
    ("episodes.task_id", episode_field(0, "task_id", 7)),
    ("episodes.recorded_at", episode_field(0, "recorded_at", "yesterday")),
    ("episodes.success_reason", episode_field(0, "failure_reason", "slipped")),
    ("episodes.accounting", stream_count(0, "cam_rgb", frames_encoded=-(10**6))),  # (a negative count)
    # An encoder that lost frames and said nothing, and the same two counts raised to hide it.
    ("episodes.accounting_stages", stream_count(0, "cam_rgb", frames_encoded=2)),
    ("episodes.accounting_files", stream_count(1, "cam_rgb", frames_encoded=1, frames_in_video=1)),
    ("episodes.accounting_files", stream_count(2, "cam_depth", steps_referencing=-1)),
    # tasks.jsonl
    ("tasks.missing", remove("meta/tasks.jsonl")),
    ("tasks.invalid", write("meta/tasks.jsonl", '{"task_id": 0, "instruction": "a"}\nnot json\n{"task_id": 1}\n')),
    ("tasks.invalid", write("meta/tasks.jsonl", '{"task_id": "0", "instruction": "a"}\n')),
    ("tasks.unique_id", write("meta/tasks.jsonl", '{"task_id": 0, "instruction": "a"}\n' * 2)),
    ("tasks.task_key", write("meta/tasks.jsonl", '{"task_id": 0, "task": "a"}\n{"task_id": 1, "task": "b"}\n')),
    # steps
    ("steps.missing", remove(steps_rel(1))),
    ("steps.unreadable", truncate(steps_rel(0), 0.5)),
    ("steps.schema", edit_steps(0, lambda t: t.set_column(6, "action", t["action"].cast(pa.list_(pa.float64(), 3))))),
    ("steps.schema", edit_steps(0, lambda t: t.drop_columns(["observation.images.cam_depth.frame_index"]))),
    ("steps.schema_mismatch", edit_steps(1, lambda t: t.append_column("reward", pa.array([0.0] * t.num_rows)))),
    ("steps.null", cell("timestamp", 1, None)),
    ("steps.length", edit_steps(0, lambda t: t.slice(1))),
    ("steps.is_first", cell("is_first", 1, True)),
    ("steps.is_first", cell("is_first", 0, False)),
    ("steps.is_last", cell("is_last", 3, False)),
    ("steps.is_last", cell("is_last", 1, True)),
    ("steps.is_terminal", cell("is_terminal", 0, True)),
    ("steps.timestamp", cell("timestamp", 2, 0.1)),
    ("steps.timestamp", cell("timestamp", 0, float("inf"))),
    ("steps.action_finite", cell("action", 2, [0.0, float("nan"), 0.0])),
    ("steps.state_finite", cell("observation.state.gripper_position", 2, [float("inf")])),
    ("steps.step_index", cell("step_index", 2, 42)),
    # Episode 1 counts from 0 (episode 0 fits both conventions), episode 2 from start_step.
    ("steps.step_index_convention", count_steps_from_zero(0)),
    ("steps.frame_index", cell("observation.images.cam_rgb.frame_index", 3, STEPS)),
    ("steps.frame_index", cell("observation.images.cam_depth.frame_index", 3, 0)),
    ("steps.frame_index", cell("observation.images.cam_rgb.frame_index", 0, -1)),
    ("steps.orphan", extra_rows("000099")),
    ("steps.pending_commit", both(extra_rows("000003"), stage("000003", committing=True))),
    # videos
    ("videos.missing", remove(video_rel("cam_rgb", 1))),
    ("videos.unreadable", truncate(video_rel("cam_rgb", 1), 0.6)),
    ("videos.unreadable", write(video_rel("cam_depth", 2), "not a video")),
    ("videos.resolution", lambda root: write_video(root / video_rel("cam_rgb", 1), STEPS, depth=False, width=64)),
    ("videos.depth_lossless", lambda root: write_video(root / video_rel("cam_depth", 1), DEPTH_FRAMES, depth=False)),
    # stats, annotations, staging
    ("stats.missing", remove("meta/stats.json")),
    ("stats.invalid", edit_json("meta/stats.json", lambda s: s["action"].__setitem__("q99", [1.0]))),
    ("stats.invalid", edit_json("meta/stats.json", lambda s: s.pop("observation.state.gripper_position"))),
    ("stats.invalid", write("meta/stats.json", "[]")),
    ("annotations.scene_objects", write("annotations/episode_000001/scene_objects.json", '{"labels": []}')),
    ("annotations.scene_objects", write("annotations/episode_000000/scene_objects.json", "{")),
    ("annotations.scene_objects", edit_json(SCENE, lambda s: s["objects"][0].pop("class"))),
    ("annotations.scene_objects", edit_json(SCENE, lambda s: s["objects"][0].__setitem__("color", "red"))),
    ("annotations.scene_objects", edit_json(SCENE, lambda s: s["objects"][0]["bounding_box"].__setitem__("x", 9999))),
    ("annotations.scene_objects", edit_json(SCENE, lambda s: s.__setitem__("camera", "cam_nowhere"))),
    ("annotations.pictures", write("annotations/episode_000000/first_frame.jpg", "not a JPEG")),
    ("staging.unfinished", stage("000003", committing=False)),
    ("staging.interrupted_commit", stage("000003", committing=True)),
    ("staging.interrupted_delete", write(".staging/deletion.json", '{"episodes": [{"episode_id": "000001"}]}')),
]


def test_every_rule_has_a_breakage() -> None:
    """Guards the catalogue: a rule nobody can trigger is dead, an untested one unguarded."""
    broken = BREAKAGES + STREAM_BREAKAGES + AUDIO_BREAKAGES + LIDAR_BREAKAGES
    untested = set(RULES) - {rule for rule, _ in broken} - {"videos.fps", "episode.not_found"}
    assert not untested


def test_reference_dataset_is_valid_in_strict_mode(reference: Path) -> None:
    report = validate(reference, strict=True)
    assert report.findings == (), "\n".join(f.line() for f in report.findings)
    assert report.ok


@pytest.mark.parametrize(("rule", "breaker"), BREAKAGES, ids=[f"{r}-{i}" for i, (r, _) in enumerate(BREAKAGES)])
def test_rule(dataset: Path, rule: str, breaker: Breaker) -> None:
    breaker(dataset)
    report = validate(dataset)
    assert_reports(report, rule)
    assert report.ok == (RULES[rule][0] != "error")
    assert not validate(dataset, strict=True).ok or RULES[rule][0] == "info"


def test_fps_mismatch_is_checked_in_strict_mode_only(dataset: Path) -> None:
    sensor(0, "fps", 30)(dataset)
    assert "videos.fps" not in rules(validate(dataset))
    assert_reports(validate(dataset, strict=True), "videos.fps")


def test_per_episode_step_index_is_accepted(dataset: Path) -> None:
    both(count_steps_from_zero(0), count_steps_from_zero(1))(dataset)
    assert validate(dataset, strict=True).findings == ()


def test_episodes_split_across_batches_are_checked_whole(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches and row groups of 3 rows split every episode; the rules still see each episode whole."""
    monkeypatch.setattr(steps, "BATCH_ROWS", 3)
    table = pq.read_table(dataset / steps_rel(0))
    pq.write_table(table, dataset / steps_rel(0), row_group_size=3)
    assert validate(dataset, strict=True).findings == ()
    assert validate(dataset, episode="000001").findings == ()
    pq.write_table(set_cell(table, "is_last", STEPS + 2, True), dataset / steps_rel(0), row_group_size=3)
    report = validate(dataset, episode="000001")
    assert [(f.rule, f.message) for f in report.findings] == [
        ("steps.is_last", "set on 2 row(s) (2, 3); expected exactly row 3")
    ]


def test_npz_depth_stacks_are_accepted(dataset: Path) -> None:
    """NPZ is the spec's other lossless depth storage; its frame count bounds frame_index too."""
    sensor(1, "encoding", "npz")(dataset)

    def to_npz(rows: list[dict[str, Any]]) -> None:
        for e, row in enumerate(rows):
            path = video_rel("cam_depth", e).removesuffix(".mp4") + ".npz"
            np.savez_compressed(dataset / path, depth=np.zeros((DEPTH_FRAMES, HEIGHT, WIDTH), np.uint16))
            row["video_files"]["cam_depth"] = path

    edit_episodes(to_npz)(dataset)
    assert validate(dataset, strict=True).findings == ()
    cell("observation.images.cam_depth.frame_index", 3, DEPTH_FRAMES)(dataset)
    assert_reports(validate(dataset), "steps.frame_index")


def test_a_truncated_step_file_is_one_error_naming_it(dataset: Path) -> None:
    truncate(steps_rel(0), 0.5)(dataset)
    report = validate(dataset)
    step_findings = [f for f in report.findings if f.file == steps_rel(0)]
    assert [f.rule for f in step_findings] == ["steps.unreadable"]


def test_pending_commit_rows_are_not_orphans(dataset: Path) -> None:
    both(extra_rows("000003"), stage("000003", committing=True))(dataset)
    report = validate(dataset, strict=True)
    assert "steps.orphan" not in rules(report)
    assert report.ok


def test_episode_option_checks_only_that_episode(dataset: Path) -> None:
    both(cell("is_first", STEPS + 1, True), edit_manifest(lambda m: m["statistics"].__setitem__("total_steps", 1)))(
        dataset
    )
    assert validate(dataset, episode="000000").findings == ()
    report = validate(dataset, episode="000001")
    assert {f.rule for f in report.findings} == {"steps.is_first"}
    assert all(f.episode == "000001" for f in report.findings)
    assert "manifest.statistics" in rules(validate(dataset))


def test_unknown_episode_is_an_error(dataset: Path) -> None:
    assert_reports(validate(dataset, episode="424242"), "episode.not_found")


def test_episode_option_keeps_manifest_rules(dataset: Path) -> None:
    joint(0, "type", "fixed")(dataset)
    assert_reports(validate(dataset, episode="000002"), "manifest.joint_type")


def test_check_manifest_is_pure() -> None:
    manifest = Manifest.from_dict(manifest_dict())
    # The wrist camera hangs off a URDF link, which only the URDF declares.
    assert [f.rule for f in check_manifest(manifest)] == ["manifest.frame_parent"]
    assert check_manifest(manifest, known_links={"l1"}) == []
    data = manifest_dict()
    data["sensors"][1]["encoding"] = "h264"
    data["robot"]["joints"][0]["type"] = "ball"
    assert {f.rule for f in check_manifest(Manifest.from_dict(data), known_links={"l1"})} == {
        "manifest.depth_encoding",
        "manifest.joint_type",
    }


def test_finding_line_and_dict() -> None:
    item = Finding("error", "steps.is_first", "data/chunk-000/steps.parquet", "set on 2 row(s)", "000003", "is_first")
    assert item.line() == (
        "ERROR data/chunk-000/steps.parquet episode=000003 field=is_first: set on 2 row(s) [steps.is_first]"
    )
    assert item.to_dict()["episode"] == "000003"
    assert Finding("info", "staging.unfinished", ".staging", "x").line() == "INFO .staging: x [staging.unfinished]"


def test_strict_turns_warnings_into_failures(dataset: Path) -> None:
    remove("meta/stats.json")(dataset)
    assert validate(dataset).ok
    report = validate(dataset, strict=True)
    assert not report.ok
    assert [f.rule for f in report.failures] == ["stats.missing"]


def test_never_raises_on_garbage(dataset: Path) -> None:
    for path in sorted(dataset.rglob("*")):
        if path.is_file() and path.name != "manifest.json":
            path.write_bytes(b"\x00garbage")
    report = validate(dataset, strict=True)
    assert not report.ok


def test_writer_output_validates_in_strict_mode(tmp_path: Path) -> None:
    write_demo_dataset(tmp_path / "ds", episodes=2, steps=5, width=WIDTH, height=HEIGHT)
    report = validate(tmp_path / "ds", strict=True)
    assert report.findings == (), "\n".join(f.line() for f in report.findings)


# -- the spec's version and closed lists, on the writer's own output ----------------------------


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("written") / "ds"
    write_demo_dataset(root, episodes=1, steps=3, width=WIDTH, height=HEIGHT)
    return root


@pytest.fixture
def demo(written: Path, tmp_path: Path) -> Path:
    shutil.copytree(written, tmp_path / "ds")
    return tmp_path / "ds"


def cli_validate(capsys: pytest.CaptureFixture[str], root: Path, *flags: str) -> tuple[int, list[str]]:
    """(exit code, printed lines) of ``ortf validate``."""
    code = ortf(["validate", *flags, str(root)])
    captured = capsys.readouterr()
    assert captured.err == ""
    return code, captured.out.splitlines()


def set_dimensions(key: str, values: dict[int, str]) -> Breaker:
    def change(manifest: dict[str, Any]) -> None:
        for i, value in values.items():
            manifest["action_space"]["dimensions"][i][key] = value

    return edit_manifest(change)


def test_the_writers_output_is_valid_without_a_warning(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every dimension the writer declares (7 joint positions in radians, a normalized
    continuous gripper) is in the spec's lists; the version is the one it knows."""
    manifest = json.loads((demo / "meta/manifest.json").read_text())
    assert manifest["ortf_version"] == "0.2"
    assert [(d["type"], d["units"]) for d in manifest["action_space"]["dimensions"]] == [
        *[("position", "radians")] * len(JOINTS),
        ("continuous", "normalized"),
    ]
    assert validate(demo, strict=True).findings == ()
    assert cli_validate(capsys, demo, "--strict") == (0, ["valid (strict): 0 error(s), 0 warning(s), 0 info(s)"])


def test_a_version_it_does_not_know_is_one_error_and_nothing_else_is_checked(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 9.9 dataset is not checked by 0.2's rules (a missing episode index is not reported):
    the validator says which version it met and which it knows, and the dataset is invalid."""
    both(edit_manifest(lambda m: m.__setitem__("ortf_version", "9.9")), remove("meta/episodes.parquet"))(demo)
    message = "is '9.9'; this validator knows ORTF 0.2 and cannot check a version it does not know"
    report = validate(demo)
    assert report.findings == (
        Finding("error", "manifest.version", "meta/manifest.json", message, None, "ortf_version"),
    )
    assert not report.ok
    assert cli_validate(capsys, demo) == (
        1,
        [
            f"ERROR meta/manifest.json field=ortf_version: {message} [manifest.version]",
            "INVALID: 1 error(s), 0 warning(s), 0 info(s)",
        ],
    )


def test_an_action_type_outside_the_spec_is_an_error_naming_the_dimensions(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_dimensions("type", {0: "torque", 2: "torque", 7: "gripper"})(demo)
    expected = "expected one of position, rotation, velocity, binary, continuous"
    lines = [
        "ERROR meta/manifest.json field=action_space.dimensions[0,2].type: "
        f"dimensions 'demo_joint1', 'demo_joint3' have type 'torque'; {expected} [manifest.action_type]",
        "ERROR meta/manifest.json field=action_space.dimensions[7].type: "
        f"dimension 'gripper' has type 'gripper'; {expected} [manifest.action_type]",
    ]
    report = validate(demo)
    assert [f.line() for f in report.findings] == lines
    assert [f.severity for f in report.findings] == ["error", "error"] and not report.ok
    assert cli_validate(capsys, demo) == (1, [*lines, "INVALID: 2 error(s), 0 warning(s), 0 info(s)"])


def test_units_outside_the_spec_are_one_warning_naming_the_dimensions(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown unit is a fact about the source: valid, with a warning (strict fails).
    Eight dimensions with the same unit make one line naming six of them."""
    set_dimensions("units", dict.fromkeys(range(len(JOINTS) + 1), "unknown"))(demo)
    line = (
        "WARNING meta/manifest.json field=action_space.dimensions[0,1,2,3,4,5,6,7].units: dimensions "
        "'demo_joint1', 'demo_joint2', 'demo_joint3', 'demo_joint4', 'demo_joint5', 'demo_joint6' and 2 more "
        "have units 'unknown', which the spec does not list (meters, radians, rad_per_s, normalized, discrete) "
        "[manifest.action_units]"
    )
    report = validate(demo)
    assert [f.line() for f in report.findings] == [line] and report.ok
    assert [(f.rule, f.severity) for f in report.findings] == [("manifest.action_units", "warning")]
    assert cli_validate(capsys, demo) == (0, [line, "valid: 0 error(s), 1 warning(s), 0 info(s)"])
    assert cli_validate(capsys, demo, "--strict") == (
        1,
        [line, "INVALID (strict): 0 error(s), 1 warning(s), 0 info(s)"],
    )


def test_the_writer_refuses_an_unknown_version_or_action_type_and_keeps_unknown_units(tmp_path: Path) -> None:
    """The writer runs the same rules before it creates anything: the errors refuse the
    manifest in one message naming the value; a unit the spec does not list is written."""
    manifest = demo_manifest(WIDTH, HEIGHT)
    dimensions = manifest.action_space.dimensions
    bad_type = replace(manifest, action_space=replace(manifest.action_space, dimensions=(
        replace(dimensions[0], type="torque"), *dimensions[1:])))  # fmt: skip
    bad_version = replace(manifest, ortf_version="9.9")
    for bad, problem in (
        (
            bad_type,
            "action_space.dimensions[0].type: dimension 'demo_joint1' has type 'torque'; expected one of position,",
        ),
        (
            bad_version,
            "ortf_version: is '9.9'; this validator knows ORTF 0.2 and cannot check a version it does not know",
        ),
    ):
        with pytest.raises(WriterError, match=re.escape(f"manifest is not valid ORTF: {problem}")):
            DatasetWriter(tmp_path / "refused", bad).open()
        assert not (tmp_path / "refused").exists()
    unknown_units = replace(manifest, action_space=replace(manifest.action_space, dimensions=(
        replace(dimensions[0], units="degrees"), *dimensions[1:])))  # fmt: skip
    with DatasetWriter(tmp_path / "written", unknown_units):
        pass
    report = validate(tmp_path / "written")
    assert report.ok and rules(report)["manifest.action_units"] == "warning"
