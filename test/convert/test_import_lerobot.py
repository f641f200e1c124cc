"""``ortf import lerobot`` on a dataset LeRobot itself wrote, compared value by value with
the formulas it was written from (test/convert/resources/lerobot-v3-reference/PROVENANCE.md),
and on hand-made variants: image-typed and H.264 cameras, variable-length list
columns, GR00T's modality.json, the same episodes in the LeRobot v2.1 layout (a file
per episode), and bad input."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from collections.abc import Container, Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from av.video.frame import PictureType

from ortf_ros.cli.ortf import main as ortf
from ortf_ros.convert import from_lerobot, lerobot_import, to_lerobot
from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.errors import ConversionError
from ortf_ros.io.video import VideoReader, probe
from ortf_ros.synthetic.dataset import write_demo_dataset
from support.cli_errors import one_line_error

REFERENCE = Path(__file__).parent / "resources" / "lerobot-v3-reference"
LENGTHS = (24, 9, 37)
FPS = 30
CAMERAS = {"front": (128, 96), "wrist": (96, 64)}
H264_KEYFRAMES = (0, LENGTHS[0])


def reference_state(episode: int, frames: int) -> np.ndarray:
    f = np.arange(frames, dtype=np.float64)[:, None]
    j = np.arange(7, dtype=np.float64)[None, :]
    return (episode * 100 + f + j / 8).astype(np.float32)


def drawn_numbers(image: np.ndarray) -> tuple[int, int, tuple[int, int, int]]:
    """(frame number, episode number, strongest channel of the red/green/blue patches) as the
    reference frames draw them: 8 frame bits across the top, 4 episode bits along the bottom."""
    h, w, _ = image.shape
    gray = image.mean(axis=2)
    frame = sum(int(gray[h // 4, int((k + 0.5) * w / 8)] > 128) << (7 - k) for k in range(8))
    episode = sum(int(gray[int(h * 0.9), int((k + 0.5) * w / 4)] > 128) << (3 - k) for k in range(4))
    row = h * 5 // 8
    patches = tuple(int(image[row, x].argmax()) for x in (w // 6, w // 2, w * 5 // 6))
    return frame, episode, patches  # type: ignore[return-value]


def source_tasks(root: Path) -> list[str]:
    """Each episode's task, read from LeRobot's own files with plain pyarrow."""
    episodes = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet", columns=["episode_index", "tasks"])
    return [tasks[0] for tasks in episodes.sort_by("episode_index").column("tasks").to_pylist()]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    out = tmp_path_factory.mktemp("import") / "ortf"
    from_lerobot(REFERENCE, out)
    return load_dataset(out)


UNITS_UNKNOWN = (
    "WARNING meta/manifest.json field=action_space.dimensions[0,1,2,3,4,5,6].units: dimensions 'joint_1', "
    "'joint_2', 'joint_3', 'joint_4', 'joint_5', 'joint_6' and 1 more have units 'unknown', which the spec does "
    "not list (meters, radians, rad_per_s, normalized, discrete) [manifest.action_units]"
)


def intrinsics_unknown(*cameras: str) -> list[str]:
    """The warnings of cameras whose calibration LeRobot does not record (sensors in this order)."""
    return [
        f"WARNING meta/manifest.json field=sensors[{i}].intrinsics: camera sensor {camera!r} declares its "
        "intrinsics unknown: its frames cannot be related to 3D [manifest.intrinsics_unknown]"
        for i, camera in enumerate(cameras)
    ]


def assert_valid_with_what_lerobot_does_not_say(root: Path) -> None:
    """Valid ORTF whose only warnings are the ones LeRobot's silence earns: a plain LeRobot
    dataset names the action's elements and says nothing else of them (units), nor of its
    cameras' calibration."""
    report = validate(root, strict=True)
    cameras = [s.name for s in load_dataset(root).manifest.sensors if s.is_camera]
    assert [f.line() for f in report.findings] == [UNITS_UNKNOWN, *intrinsics_unknown(*cameras)]


def test_what_lerobot_does_not_say_of_the_action_is_declared_in_spec_values(imported: Dataset) -> None:
    """The spec has no "unknown" dimension type: each dimension is written ``continuous`` (its
    most general type) with a description saying the source did not tell; the units the
    source did not give either are "unknown"."""
    written = json.loads((imported.root / "meta/manifest.json").read_text())["action_space"]
    names = ("joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "joint_6", "gripper")
    description = (
        "the source LeRobot dataset does not say what this dimension is: "
        "continuous is the spec's most general type, and the units are unknown"
    )
    assert written["dimensions"] == [
        {"name": name, "index": i, "type": "continuous", "units": "unknown", "description": description}
        for i, name in enumerate(names)
    ]
    assert written["type"] == "unknown"  # the spec's action space types are not a closed list
    assert_valid_with_what_lerobot_does_not_say(imported.root)


def test_steps_are_the_reference_values(imported: Dataset) -> None:
    assert [e.record.length for e in imported] == list(LENGTHS)
    assert [e.task.instruction for e in imported] == source_tasks(REFERENCE)
    assert imported.manifest.robot.name == "reference_arm_7dof"
    state_space = imported.manifest.observation_space.state["state"]
    assert state_space.names == ("joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "joint_6", "gripper")
    assert [d.name for d in imported.manifest.action_space.dimensions] == list(state_space.names)
    for number, episode in enumerate(imported):
        expected = reference_state(number, LENGTHS[number])
        np.testing.assert_array_equal(episode.array("observation.state.state"), expected)
        np.testing.assert_array_equal(episode.array("action"), expected + np.float32(1000))
        times = episode.steps(["timestamp"]).column("timestamp").to_numpy()
        np.testing.assert_allclose(times, np.arange(LENGTHS[number]) / FPS, atol=1e-6)
        assert episode.record.success is None  # LeRobot does not say


def test_reward_is_kept_beside_the_steps(imported: Dataset) -> None:
    for number, episode in enumerate(imported):
        reward = episode.stream("lerobot_extras", ["next_reward"]).column("next_reward").to_pylist()
        assert reward == [[0.0]] * (LENGTHS[number] - 1) + [[1.0]]
        samples = episode.steps(["streams.lerobot_extras.sample_index"]).column(0).to_pylist()
        assert samples == list(range(LENGTHS[number]))


def test_av1_frames_decode_to_their_frame_and_episode(imported: Dataset) -> None:
    for camera, (width, height) in CAMERAS.items():
        sensor = imported.manifest.cameras[camera]
        assert sensor.resolution is not None and (sensor.resolution.width, sensor.resolution.height) == (width, height)
        assert sensor.extra["source_codec"] == "av1" and sensor.intrinsics == {"unknown": True}
        for number, episode in enumerate(imported):
            drawn = [drawn_numbers(image) for image in episode.step_frames(camera)]
            assert drawn == [(f, number, (0, 1, 2)) for f in range(LENGTHS[number])], camera


def test_cli_import_then_validation(tmp_path: Path) -> None:
    """Valid; ``--strict`` fails on the warnings: the units and the cameras' intrinsics are unknown."""
    out = tmp_path / "ortf"
    run = [sys.executable, "-m", "ortf_ros.cli.ortf"]
    imported = subprocess.run([*run, "import", "lerobot", str(REFERENCE), str(out)], capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    assert "3 episode(s), 70 steps, cameras: front, wrist" in imported.stdout
    warnings = "".join(f"{line}\n" for line in [UNITS_UNKNOWN, *intrinsics_unknown("front", "wrist")])
    checked = subprocess.run([*run, "validate", str(out)], capture_output=True, text=True)
    assert (checked.returncode, checked.stdout) == (0, f"{warnings}valid: 0 error(s), 3 warning(s), 0 info(s)\n")
    checked = subprocess.run([*run, "validate", "--strict", str(out)], capture_output=True, text=True)
    assert checked.returncode == 1
    assert checked.stdout == f"{warnings}INVALID (strict): 0 error(s), 3 warning(s), 0 info(s)\n"


def _reference_frames(camera: str) -> Iterator[np.ndarray]:
    path = REFERENCE / f"videos/observation.images.{camera}/chunk-000/file-000.mp4"
    with VideoReader(path, "rgb") as reader:
        for index in range(sum(LENGTHS)):
            yield reader.read(index)


def _png(image: np.ndarray) -> bytes:
    context = av.CodecContext.create("png", "w")
    context.width, context.height, context.pix_fmt = image.shape[1], image.shape[0], "rgb24"
    frame = av.VideoFrame.from_ndarray(image, format="rgb24")
    return b"".join(bytes(p) for p in [*context.encode(frame), *context.encode(None)])


def _h264(
    frames: Iterator[np.ndarray],
    path: Path,
    width: int,
    height: int,
    keyframes: Container[int],
    pix_fmt: str = "yuv420p",
) -> None:
    """Frames as H.264 with B-frames, keyframes (IDR) at ``keyframes`` and nowhere else."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.options = {"crf": "18", "x264-params": "keyint=1000:min-keyint=1000:scenecut=0:bframes=2"}
        for index, image in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts, frame.time_base = index, Fraction(1, FPS)
            frame.pict_type = PictureType.I if index in keyframes else PictureType.NONE
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))


@pytest.fixture
def variant(tmp_path: Path) -> Path:
    """The reference rewritten the ways other LeRobot writers store it: the wrist camera as
    PNG images in the data shard, the front camera as H.264 (keyframes at frames 0 and 24
    only: the start of episodes 0 and 1), state as a variable-length list (a ``List``
    without length), and GR00T's modality.json splitting state and action."""
    root = tmp_path / "variant"
    shutil.copytree(REFERENCE, root)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    info = json.loads((root / "meta/info.json").read_text())
    data = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(data)
    state = pa.array(table.column("observation.state").to_pylist(), pa.list_(pa.float32()))
    table = table.set_column(table.schema.get_field_index("observation.state"), "observation.state", state)
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    cells = [{"bytes": _png(image), "path": None} for image in _reference_frames("wrist")]
    table = table.append_column("observation.images.wrist", pa.array(cells, image_type))
    pq.write_table(table.replace_schema_metadata(None), data)
    wrist = info["features"]["observation.images.wrist"]
    wrist["dtype"] = "image"
    del wrist["info"]
    shutil.rmtree(root / "videos/observation.images.wrist")
    front = root / "videos/observation.images.front/chunk-000/file-000.mp4"
    frames = list(_reference_frames("front"))
    _h264(iter(frames), front, *CAMERAS["front"], keyframes=H264_KEYFRAMES)
    info["features"]["observation.images.front"]["info"]["video.codec"] = "h264"
    (root / "meta/info.json").write_text(json.dumps(info))
    episodes = root / "meta/episodes/chunk-000/file-000.parquet"
    meta = pq.read_table(episodes)
    pq.write_table(meta.drop_columns([c for c in meta.column_names if "observation.images.wrist" in c]), episodes)
    modality = {
        "state": {"arm": {"start": 0, "end": 6}, "gripper": {"start": 6, "end": 7}},
        "action": {"arm": {"start": 0, "end": 6}, "gripper": {"start": 6, "end": 7}},
        "video": {"front_view": {"original_key": "observation.images.front"}},
    }
    (root / "meta/modality.json").write_text(json.dumps(modality))
    return root


def test_image_and_h264_cameras_list_columns_and_modality(
    variant: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "ortf"
    monkeypatch.setattr(lerobot_import, "BATCH_ROWS", 5)  # episodes span several batches
    reported: list[tuple[int, int]] = []
    from_lerobot(variant, out, progress=lambda done, total: reported.append((done, total)))
    done = [0] + [d for d, _ in reported]
    assert reported[-1] == (sum(LENGTHS), sum(LENGTHS))
    assert all(0 < b - a <= 5 for a, b in itertools.pairwise(done))  # never more than a batch at once
    assert_valid_with_what_lerobot_does_not_say(out)
    dataset = load_dataset(out)
    state = dataset.manifest.observation_space.state
    assert list(state) == ["arm", "gripper"]
    assert state["arm"].names == ("joint_1", "joint_2", "joint_3", "joint_4", "joint_5", "joint_6")
    assert state["gripper"].names == ("gripper",)
    assert probe(dataset.episode(0).video_path("front")).codec == "h264"
    for number, episode in enumerate(dataset):
        expected = reference_state(number, LENGTHS[number])
        np.testing.assert_array_equal(episode.array("observation.state.arm"), expected[:, :6])
        np.testing.assert_array_equal(episode.array("observation.state.gripper"), expected[:, 6:])
        np.testing.assert_array_equal(episode.array("action"), expected + np.float32(1000))
        for camera in CAMERAS:
            drawn = [drawn_numbers(image)[:2] for image in episode.step_frames(camera)]
            assert drawn == [(f, number) for f in range(LENGTHS[number])], camera


def test_h264_episodes_cut_at_keyframes_are_copied_the_others_reencoded(variant: Path, tmp_path: Path) -> None:
    """Episode 0 (frames 0..23) starts at a keyframe and frame 24 is one: its packets are
    copied, and its frames decode bit-exactly as the shard's. Episode 1 (24..32) starts at
    one but frame 33 is not (its B-frames may reference frames past its end), episode 2
    (33..69) does not start at one: both are decoded and re-encoded, and still show the
    right frames."""
    result = from_lerobot(variant, tmp_path / "ortf")
    assert (result.videos_reused, result.videos_reencoded) == (1, 2)
    assert_valid_with_what_lerobot_does_not_say(tmp_path / "ortf")
    dataset = load_dataset(tmp_path / "ortf")
    shard = variant / "videos/observation.images.front/chunk-000/file-000.mp4"
    with av.open(str(shard)) as container:
        keyframes = [p.pts for p in container.demux(video=0) if p.is_keyframe]
    assert len(keyframes) == len(H264_KEYFRAMES)  # the input is cut as the test means it
    with VideoReader(shard, "rgb") as reader:
        for image, index in zip(dataset.episode(0).step_frames("front"), range(LENGTHS[0]), strict=True):
            assert np.array_equal(image, reader.read(index)), index
    for number, episode in enumerate(dataset):
        drawn = [drawn_numbers(image)[:2] for image in episode.step_frames("front")]
        assert drawn == [(f, number) for f in range(LENGTHS[number])]


def test_bad_input_is_one_line_and_the_destination_is_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert "nothing: no such file or directory" in one_line_error(
        capsys, "import lerobot", tmp_path / "nothing", out, code=2
    )
    v16 = tmp_path / "v16"
    (v16 / "meta").mkdir(parents=True)
    (v16 / "meta/info.json").write_text(json.dumps({"codebase_version": "v1.6", "fps": 30, "features": {}}))
    error = one_line_error(capsys, "import lerobot", v16, out)
    assert "v16/meta/info.json: codebase_version: expected one of v2.0, v2.1, v3.0, got 'v1.6'" in error
    unknown = tmp_path / "unknown"
    shutil.copytree(REFERENCE, unknown)
    info_path = unknown / "meta/info.json"
    info_path.chmod(0o644)
    info = json.loads(info_path.read_text())
    info["features"]["next.reward"]["dtype"] = "complex64"
    info_path.write_text(json.dumps(info))
    assert "features.next.reward.dtype: unknown dtype 'complex64'" in one_line_error(
        capsys, "import lerobot", unknown, out
    )
    assert not out.exists() and not list(tmp_path.glob(".out.*"))  # no scratch directory left behind
    out.mkdir()
    (out / "keep.txt").write_text("keep me")
    assert "out: exists and is not empty" in one_line_error(capsys, "import lerobot", REFERENCE, out, code=2)
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_text() == "keep me"
    ortf_dataset = tmp_path / "ortf"
    assert ortf(["import", "lerobot", str(REFERENCE), str(ortf_dataset)]) == 0
    assert "is an ORTF dataset, not a LeRobot one" in one_line_error(
        capsys, "import lerobot", ortf_dataset, tmp_path / "again"
    )


V21_DATA = "data/c{episode_chunk:02d}/ep-{episode_index:03d}.parquet"
V21_VIDEO = "media/{video_key}/c{episode_chunk:02d}/ep-{episode_index:03d}.mp4"


@pytest.fixture
def v21(tmp_path: Path) -> Path:
    """The reference in LeRobot's v2.1 layout: meta/episodes.jsonl, tasks.jsonl and
    episodes_stats.jsonl, a data file and a video per camera for each episode, two episodes
    per chunk (episode 2 is in chunk 1), under path templates of its own (not LeRobot's
    defaults, so the import must follow info.json's). The front camera is H.264 yuv420p
    (the writer's format: copied), the wrist camera yuv444p (decoded and re-encoded)."""
    root = tmp_path / "v21"
    info = json.loads((REFERENCE / "meta/info.json").read_text())
    for key in ("data_files_size_in_mb", "video_files_size_in_mb"):
        del info[key]
    info.update(codebase_version="v2.1", chunks_size=2, data_path=V21_DATA, video_path=V21_VIDEO)
    pix_fmts = {"front": "yuv420p", "wrist": "yuv444p"}
    for camera, pix_fmt in pix_fmts.items():
        info["features"][f"observation.images.{camera}"]["info"].update(
            {"video.codec": "h264", "video.pix_fmt": pix_fmt}
        )
    rows = pq.read_table(REFERENCE / "data/chunk-000/file-000.parquet")
    tasks = pq.read_table(REFERENCE / "meta/tasks.parquet").to_pylist()
    frames = {camera: _reference_frames(camera) for camera in CAMERAS}
    episodes, stats = [], []
    for number, length in enumerate(LENGTHS):
        fields = {"episode_chunk": number // 2, "episode_index": number}
        data = root / V21_DATA.format(**fields)
        data.parent.mkdir(parents=True, exist_ok=True)
        episode_rows = rows.filter(pc.equal(rows.column("episode_index"), number))
        pq.write_table(episode_rows, data)
        for camera, (width, height) in CAMERAS.items():
            video = root / V21_VIDEO.format(video_key=f"observation.images.{camera}", **fields)
            video.parent.mkdir(parents=True, exist_ok=True)
            _h264(itertools.islice(frames[camera], length), video, width, height, (0,), pix_fmts[camera])
        used = sorted(set(episode_rows.column("task_index").to_pylist()))
        episodes.append(
            {"episode_index": number, "tasks": [tasks[i]["__index_level_0__"] for i in used], "length": length}
        )
        state = np.asarray(episode_rows.column("observation.state").to_pylist())
        stats.append({"episode_index": number, "stats": {"observation.state": {"min": state.min(0).tolist()}}})
    (root / "meta").mkdir()
    (root / "meta/info.json").write_text(json.dumps(info))
    for name, lines in (
        ("episodes", episodes),
        ("tasks", [{"task_index": t["task_index"], "task": t["__index_level_0__"]} for t in tasks]),
        ("episodes_stats", stats),
    ):
        (root / f"meta/{name}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return root


def test_a_v21_dataset_is_read_through_its_path_templates(
    v21: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same steps, tasks, reward and frames as the v3.0 reference, rows streamed a batch at
    a time, and the yuv420p camera's episode files copied as they are."""
    out = tmp_path / "ortf"
    monkeypatch.setattr(lerobot_import, "BATCH_ROWS", 5)
    reported: list[int] = []
    result = from_lerobot(v21, out, progress=lambda done, _: reported.append(done))
    assert all(0 < b - a <= 5 for a, b in itertools.pairwise([0, *reported])) and reported[-1] == sum(LENGTHS)
    assert (result.episodes, result.steps, result.videos_reused, result.videos_reencoded) == (3, 70, 3, 3)
    assert_valid_with_what_lerobot_does_not_say(out)
    dataset = load_dataset(out)
    assert dataset.manifest.collection["source_format"] == "lerobot v2.1"
    assert [e.task.instruction for e in dataset] == source_tasks(REFERENCE)
    for number, episode in enumerate(dataset):
        expected = reference_state(number, LENGTHS[number])
        np.testing.assert_array_equal(episode.array("observation.state.state"), expected)
        np.testing.assert_array_equal(episode.array("action"), expected + np.float32(1000))
        reward = episode.stream("lerobot_extras", ["next_reward"]).column("next_reward").to_pylist()
        assert reward == [[0.0]] * (LENGTHS[number] - 1) + [[1.0]]
        front = V21_VIDEO.format(video_key="observation.images.front", episode_chunk=number // 2, episode_index=number)
        assert probe(episode.video_path("front")).frames == LENGTHS[number]
        with VideoReader(v21 / front, "rgb") as reader:
            for step, image in enumerate(episode.step_frames("front")):
                assert np.array_equal(image, reader.read(step)), step  # copied: bit-exact
        for camera in CAMERAS:
            drawn = [drawn_numbers(image)[:2] for image in episode.step_frames(camera)]
            assert drawn == [(f, number) for f in range(LENGTHS[number])], camera


def test_an_episode_keeps_its_first_rows_task_and_warns_only_if_its_rows_name_another(
    v21: Path, tmp_path: Path
) -> None:
    """Annotation strings GR00T lists among an episode's tasks ("valid") are no second task;
    a row naming another task_index is, and is warned about."""
    episodes = v21 / "meta/episodes.jsonl"
    lines = [json.loads(line) for line in episodes.read_text().splitlines()]
    lines[0]["tasks"].append("valid")
    episodes.write_text("".join(json.dumps(line) + "\n" for line in lines))
    data = v21 / V21_DATA.format(episode_chunk=0, episode_index=1)
    rows = pq.read_table(data)
    first = rows.column("task_index")[0].as_py()
    named = pa.array([first] * (LENGTHS[1] - 1) + [1 - first], pa.int64())
    pq.write_table(rows.set_column(rows.schema.get_field_index("task_index"), "task_index", named), data)
    warnings: list[str] = []
    from_lerobot(v21, tmp_path / "ortf", warn=warnings.append)
    assert warnings == [f"episode 1 has 2 tasks; ORTF keeps one: {source_tasks(REFERENCE)[1]!r}"]
    assert [e.task.instruction for e in load_dataset(tmp_path / "ortf")] == source_tasks(REFERENCE)


def test_bad_v2_metadata_is_one_line(v21: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A template the v2.x fields cannot fill, a bad or missing episodes.jsonl, a missing
    episode file (found before any episode is imported): one line naming the file and
    what is wrong; nothing written."""
    out = tmp_path / "out"
    info_path, episodes_path = v21 / "meta/info.json", v21 / "meta/episodes.jsonl"
    info, episodes = info_path.read_text(), episodes_path.read_text()
    info_path.write_text(info.replace("{episode_chunk:02d}/ep-", "{chunk_index:03d}/ep-", 1))
    error = one_line_error(capsys, "import lerobot", v21, out)
    assert "v21/meta/info.json: data_path: cannot fill 'data/c{chunk_index:03d}/ep-" in error and "chunk_index" in error
    info_path.write_text(info)
    episodes_path.write_text(episodes.replace('"length": 9', '"length": "9"'))
    assert "v21/meta/episodes.jsonl:2: length: expected a positive integer, got '9'" in one_line_error(
        capsys, "import lerobot", v21, out
    )
    episodes_path.unlink()
    assert "v21/meta/episodes.jsonl: missing (LeRobot v2.x metadata)" in one_line_error(
        capsys, "import lerobot", v21, out
    )
    episodes_path.write_text(episodes)
    (v21 / V21_DATA.format(episode_chunk=1, episode_index=2)).unlink()
    error = one_line_error(capsys, "import lerobot", v21, out)
    assert "v21/data/c01/ep-002.parquet: missing (episode 2, by " in error and "info.json's data_path)" in error
    assert not out.exists() and not list(tmp_path.glob(".out.*"))


def test_an_ortf_export_gets_its_manifest_urdf_and_depth_back(tmp_path: Path) -> None:
    """What LeRobot has no place for comes back from the exporter's ``ortf/`` copy, depth
    included (test_lerobot_round_trip compares its frames); depth the writer could not
    take as it is (an NPZ stack) is left out with a warning, a depth file gone is an error."""
    source = tmp_path / "source"
    write_demo_dataset(source, episodes=2, steps=6, width=64, height=48)
    to_lerobot(source, tmp_path / "lerobot")
    warnings: list[str] = []
    from_lerobot(tmp_path / "lerobot", tmp_path / "back", warn=warnings.append)
    assert validate(tmp_path / "back", strict=True).ok
    before, after = load_dataset(source).manifest, load_dataset(tmp_path / "back").manifest
    assert (after.robot, after.action_space, after.frames) == (before.robot, before.action_space, before.frames)
    assert after.observation_space.state == before.observation_space.state
    assert after.cameras == before.cameras and warnings == []
    assert (tmp_path / "back/robot/robot.urdf").read_text() == (source / "robot/robot.urdf").read_text()
    kept = tmp_path / "lerobot/ortf/meta/manifest.json"
    exported = kept.read_text()
    data = json.loads(exported)
    depth_sensor = data["observation_space"]["images"]["depth"]
    next(s for s in data["sensors"] if s["name"] == depth_sensor)["encoding"] = "npz"
    kept.write_text(json.dumps(data))
    from_lerobot(tmp_path / "lerobot", tmp_path / "npz", warn=warnings.append)
    assert warnings == ["cameras ['depth'] are neither LeRobot features nor FFV1 depth under ortf/depth; not imported"]
    assert "depth" not in load_dataset(tmp_path / "npz").manifest.cameras
    kept.write_text(exported)
    (tmp_path / "lerobot/ortf/depth/depth/episode_000001.mp4").unlink()
    with pytest.raises(ConversionError, match=r"episode_000001.mp4: .*\(depth camera 'depth', kept by ortf export"):
        from_lerobot(tmp_path / "lerobot", tmp_path / "gone")
    assert not (tmp_path / "gone").exists()
    data = json.loads(exported)
    del data["observation_space"]["state"]["ee_position"]
    kept.write_text(json.dumps(data))
    warnings.clear()
    from_lerobot(tmp_path / "lerobot", tmp_path / "stale", warn=warnings.append)
    assert len(warnings) == 1 and "no longer describes the data (state components" in warnings[0]
    assert load_dataset(tmp_path / "stale").manifest.robot.joints == ()  # built from LeRobot's metadata alone


def test_an_unreadable_kept_urdf_is_a_warning_like_an_unreadable_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Undecodable bytes or a directory in its place: the import goes on without it."""
    write_demo_dataset(tmp_path / "source", episodes=1, steps=3, width=64, height=48)
    lerobot = tmp_path / "lerobot"
    to_lerobot(tmp_path / "source", lerobot)
    urdf = lerobot / "ortf/robot/robot.urdf"
    urdf.write_bytes(b"\xff<robot/>")
    for name, cause in (("bytes", "not UTF-8 text (byte 0: 0xff)"), ("directory", "Is a directory")):
        if name == "directory":
            urdf.unlink()
            urdf.mkdir()
        assert ortf(["import", "lerobot", str(lerobot), str(tmp_path / name)]) == 0
        warning = capsys.readouterr().err
        assert (
            warning.startswith("ortf import lerobot: warning: ortf/robot/robot.urdf: not used (") and cause in warning
        )
        assert warning.endswith("; the dataset is imported without a robot description\n") and warning.count("\n") == 1
        imported = load_dataset(tmp_path / name)
        assert imported.manifest.robot.urdf_path is None and not (imported.root / "robot").exists()
        assert imported.manifest.cameras == load_dataset(tmp_path / "source").manifest.cameras  # the rest came back


def test_a_lerobot_dataset_exported_back_and_imported_again_keeps_its_declared_action(
    imported: Dataset, tmp_path: Path
) -> None:
    """LeRobot -> ORTF -> LeRobot -> ORTF: the second import restores the manifest the
    export kept, so the action is described as the first import described it, with no
    warning. A manifest an earlier version kept with type "unknown" (which the writer
    now refuses) is not used: a warning, and the action is declared from LeRobot's names."""
    to_lerobot(imported.root, tmp_path / "lerobot")
    warnings: list[str] = []
    from_lerobot(tmp_path / "lerobot", tmp_path / "again", warn=warnings.append)
    assert warnings == []
    assert load_dataset(tmp_path / "again").manifest.action_space == imported.manifest.action_space
    kept = tmp_path / "lerobot/ortf/meta/manifest.json"
    data = json.loads(kept.read_text())
    for dimension in data["action_space"]["dimensions"]:
        dimension.update(type="unknown")
        del dimension["description"]
    kept.write_text(json.dumps(data))
    from_lerobot(tmp_path / "lerobot", tmp_path / "earlier", warn=warnings.append)
    assert warnings == [
        "ortf/meta/manifest.json: not used (not valid ORTF: action_space.dimensions[0,1,2,3,4,5,6].type: dimensions "
        "'joint_1', 'joint_2', 'joint_3', 'joint_4', 'joint_5', 'joint_6' and 1 more have type 'unknown'; expected "
        "one of position, rotation, velocity, binary, continuous); the manifest is built from LeRobot's metadata"
    ]
    assert load_dataset(tmp_path / "earlier").manifest.action_space == imported.manifest.action_space
