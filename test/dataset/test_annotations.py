"""Episode annotations: ``ortf annotate`` (scene_objects.json and first_frame.jpg with the boxes
drawn), ``depth_colorized.jpg`` written at each commit, read back by the reader and checked by
``ortf validate``."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Rosbag2Writer

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.recover import recover
from ortf_ros.dataset.validation import validate
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ConversionError
from ortf_ros.format import layout
from ortf_ros.pipeline.mapping import (
    DetectionsMapping,
    detect_mapping,
    mapping_from_dict,
    mapping_from_parameters,
    mapping_to_dict,
    write_mapping,
)
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.demo_arm import DEPTH_CAMERA, TASKS, demo_action, demo_manifest, demo_rgb, demo_state
from ortf_ros.synthetic.detections import detected_objects
from ortf_ros.synthetic.topics import TOPIC_DETECTIONS

WIDTH, HEIGHT, STEPS, FPS = 64, 48, 6, 30
DEPTH = DEPTH_CAMERA[0]
NEAR_MM, FAR_MM = 1500, 9500  # inside the demo camera's depth_range, 0.1 to 10 m

OBJECTS_YAML = """\
objects:
  - label: Box A
    class: box
    bounding_box: {x: 8, y: 10, width: 20, height: 16}
    color: "#ef4444"
  - label: Bowl
    class: container
    bounding_box: {x: 34, y: 4, width: 28, height: 40}
"""


def depth_frame(step: int) -> np.ndarray:
    """Near on the left half, far on the right, no reading in the top-left corner."""
    depth = np.full((HEIGHT, WIDTH), FAR_MM, np.uint16)
    depth[:, : WIDTH // 2] = NEAR_MM + step
    depth[:8, :8] = 0
    return depth


def record(root: Path, episodes: int = 2) -> None:
    with DatasetWriter(root, demo_manifest(WIDTH, HEIGHT, FPS, depth=True)) as writer:
        for number in range(episodes):
            writer.begin_episode(TASKS[number % len(TASKS)])
            for step in range(STEPS):
                images = {
                    "cam_wrist": demo_rgb(0, step, WIDTH, HEIGHT),
                    "cam_overhead": demo_rgb(1, step, WIDTH, HEIGHT),
                }
                images[DEPTH] = depth_frame(step)
                writer.add_step(
                    100.0 * number + step / FPS, demo_state(number, step), demo_action(number, step), images
                )
            writer.end_episode(success=True)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("annotations") / "ds"
    record(root)
    return root


@pytest.fixture
def dataset(recorded: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(recorded, tmp_path / "ds"))


def objects_file(tmp_path: Path, text: str = OBJECTS_YAML, name: str = "objects.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def decoded(path: Path) -> np.ndarray:
    picture = cv2.imdecode(np.fromfile(path, np.uint8), cv2.IMREAD_COLOR)
    assert picture is not None, f"{path} does not decode"
    return picture[:, :, ::-1]  # RGB


def assert_strictly_valid(root: Path) -> None:
    report = validate(root, strict=True)
    assert report.findings == (), "\n".join(f.line() for f in report.findings)


def test_annotate_round_trip(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ortf(["annotate", str(dataset), "--episode", "000001", "--objects", str(objects_file(tmp_path))]) == 0
    assert "2 object(s) on frame 0 of camera 'cam_wrist'" in capsys.readouterr().out
    directory = dataset / layout.annotations_dir(1)
    written = json.loads((directory / "scene_objects.json").read_text())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", written.pop("annotated_at"))
    assert written == {
        "annotated_frame": 0,
        "annotated_frame_timestamp": 0.0,
        "camera": "cam_wrist",
        "objects": [
            {"label": "Box A", "class": "box", "bounding_box": {"x": 8, "y": 10, "width": 20, "height": 16},
             "color": "#ef4444"},
            {"label": "Bowl", "class": "container", "bounding_box": {"x": 34, "y": 4, "width": 28, "height": 40},
             "color": "#3b82f6"},  # the palette's second: the object without a colour is the second
        ],
    }  # fmt: skip
    with load_dataset(dataset).episode("000001") as episode:
        objects = episode.scene_objects()
        assert objects is not None and [o.label for o in objects.objects] == ["Box A", "Bowl"]
        frame = episode.frame("cam_wrist", 0)
    picture = decoded(directory / "first_frame.jpg")
    assert picture.shape == (HEIGHT, WIDTH, 3)
    # The boxes' left and right edges, below their label tab, in their colours; the frame elsewhere.
    for (x, y, red_like), colour in (((8, 20, True), (0xEF, 0x44, 0x44)), ((61, 30, False), (0x3B, 0x82, 0xF6))):
        assert np.abs(picture[y, x].astype(int) - colour).max() < 60, (x, y, picture[y, x])
        assert red_like == (picture[y, x, 0] > picture[y, x, 2])
    assert np.abs(picture[30, 20].astype(int) - frame[30, 20]).max() < 40  # inside Box A: the frame itself
    assert load_dataset(dataset).episode("000000").scene_objects() is None
    assert_strictly_valid(dataset)


def test_annotate_again_replaces_both_files(dataset: Path, tmp_path: Path) -> None:
    first = objects_file(tmp_path)
    assert ortf(["annotate", str(dataset), "--episode", "000000", "--objects", str(first)]) == 0
    directory = dataset / layout.annotations_dir(0)
    before = (directory / "first_frame.jpg").read_bytes()
    again = [{"label": "Cup", "class": "cup", "bounding_box": {"x": 0, "y": 0, "width": 64, "height": 48},
              "color": "#22c55e"}]  # fmt: skip
    path = objects_file(tmp_path, json.dumps({"annotated_at": "2025-12-21T10:30:00Z", "objects": again}), "o.json")
    assert ortf(["annotate", str(dataset), "--episode", "000000", "--objects", str(path), "--frame", "3"]) == 0
    written = json.loads((directory / "scene_objects.json").read_text())
    assert written["objects"] == again and written["annotated_at"] == "2025-12-21T10:30:00Z"
    assert written["annotated_frame"] == 3 and written["annotated_frame_timestamp"] == pytest.approx(3 / FPS)
    assert (directory / "first_frame.jpg").read_bytes() != before
    picture = decoded(directory / "first_frame.jpg")
    assert np.abs(picture[47, 30].astype(int) - (0x22, 0xC5, 0x5E)).max() < 60  # the frame's bottom edge
    assert (directory / "depth_colorized.jpg").exists()  # the commit's picture stays
    assert_strictly_valid(dataset)


def test_annotate_a_depth_camera(dataset: Path, tmp_path: Path) -> None:
    arguments = ["annotate", str(dataset), "--episode", "000000", "--objects", str(objects_file(tmp_path))]
    assert ortf([*arguments, "--camera", DEPTH]) == 0
    assert json.loads((dataset / layout.annotations_dir(0) / "scene_objects.json").read_text())["camera"] == DEPTH
    assert_strictly_valid(dataset)


BAD = [
    ("class", OBJECTS_YAML.replace("    class: box\n", ""), [], "objects[0].class: expected a non-empty string"),
    ("box outside", OBJECTS_YAML.replace("x: 34", "x: 40"), [], "must fit the 64x48 frame"),
    ("negative", OBJECTS_YAML.replace("y: 10", "y: -1"), [], "objects[0].bounding_box.y: expected a number >= 0"),
    ("colour", OBJECTS_YAML.replace('"#ef4444"', "red"), [], "objects[0].color: expected a colour '#rrggbb'"),
    ("not objects", "- 1\n- 2\n", [], "objects[0]: expected an object"),
    ("not YAML", "objects: [", [], "not valid JSON or YAML"),
    ("episode", OBJECTS_YAML, ["--episode", "000042"], "no episode with id '000042'"),
    ("camera", OBJECTS_YAML, ["--camera", "cam_nowhere"], "no camera 'cam_nowhere' to annotate"),
    ("frame", OBJECTS_YAML, ["--frame", str(STEPS)], f"camera 'cam_wrist': no frame {STEPS}"),
]


@pytest.mark.parametrize(("text", "extra", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_writes_nothing(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, extra: list[str], message: str
) -> None:
    arguments = ["annotate", str(dataset), "--episode", "000000", "--objects", str(objects_file(tmp_path, text))]
    if "--episode" in extra:
        arguments[2:4] = []
    assert ortf([*arguments, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in (dataset / layout.annotations_dir(0)).iterdir()) == ["depth_colorized.jpg"]


def test_depth_colorized_is_written_at_commit(recorded: Path) -> None:
    """The first depth frame in the turbo map over the declared range: near blue, far red, no reading black."""
    for index in (0, 1):
        picture = decoded(recorded / layout.annotations_dir(index) / "depth_colorized.jpg")
        assert picture.shape == (HEIGHT, WIDTH, 3)
        near, far, nothing = picture[30, 12].astype(int), picture[30, 50].astype(int), picture[2, 2].astype(int)
        assert near[2] > near[0] + 60, near  # 1.5 m of 0.1..10 m: turbo's blue
        assert far[0] > far[2] + 60, far  # 9.5 m: its red end
        assert nothing.max() < 40, nothing
    assert_strictly_valid(recorded)


# -- a conversion: depth_colorized.jpg, and detections as scene objects ------------------------


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording with detections on the wrist camera, converted with a mapping naming them."""
    tmp = tmp_path_factory.mktemp("converted")
    bag = write_teleop_bag(tmp / "bag", "mcap", duration_s=0.5, detections=True)
    with BagSource(bag.path) as source:
        config = detect_mapping(source.topics())
    assert config.detections == DetectionsMapping(TOPIC_DETECTIONS, "wrist_camera")  # by the topics' namespace
    detections = DetectionsMapping(TOPIC_DETECTIONS, "wrist_camera", {"1": "block"})
    write_mapping(replace(config, detections=detections), tmp / "mapping.yaml")
    assert bag2ortf([str(bag.path), "-o", str(tmp / "ds"), "--config", str(tmp / "mapping.yaml")]) == 0
    return tmp / "ds"


def assert_detections_annotated(root: Path) -> None:
    """The synthetic detections (``synthetic.detections``) of the wrist camera's first frame,
    as scene objects and drawn on that frame."""
    with load_dataset(root).episode(0) as episode:
        objects = episode.scene_objects()
        width, height = WIDTH, HEIGHT
        first = episode.frame("wrist_camera", 0)
        directory = episode.annotations_dir
    assert objects is not None and objects.camera == "wrist_camera" and objects.annotated_frame == 0
    assert objects.annotated_at is not None and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", objects.annotated_at)
    expected = detected_objects(0, width, height)
    assert [(o.label, o.object_class) for o in objects.objects] == [("block A", "block"), ("2 A", "2")]
    for found, item in zip(objects.objects, expected, strict=True):
        box = found.bounding_box
        left, top = max(round(item.center_x - item.size / 2), 0), max(round(item.center_y - item.size / 2), 0)
        assert (box.x, box.y) == (left, top)
        assert (box.x + box.width, box.y + box.height) == (round(item.center_x + item.size / 2), 18)
    picture = decoded(directory / "first_frame.jpg")
    assert picture.shape == first.shape
    right = objects.objects[1].bounding_box  # its right edge, below the label tab, in its colour
    x, y = int(right.x + right.width - 1), 14
    assert np.abs(picture[y, x].astype(int) - objects.objects[1].rgb).max() < 60, picture[y, x]
    assert np.abs(picture[30, 40].astype(int) - first[30, 40]).max() < 40  # outside the boxes: the frame


def assert_depth_colorized(root: Path) -> None:
    """The first depth frame's picture: its size, and the nearer a reading the bluer its colour."""
    with load_dataset(root).episode(0) as episode:
        depth = episode.frame("depth_camera", 0)
        picture = decoded(episode.annotations_dir / "depth_colorized.jpg")
    assert picture.shape == (*depth.shape, 3)
    near = np.unravel_index(np.argmin(np.abs(depth.astype(int) - np.percentile(depth, 10))), depth.shape)
    far = np.unravel_index(np.argmin(np.abs(depth.astype(int) - np.percentile(depth, 90))), depth.shape)
    near_rgb, far_rgb = picture[near].astype(int), picture[far].astype(int)
    assert near_rgb[2] > near_rgb[0] and far_rgb[0] > far_rgb[2], (near_rgb, far_rgb)


def test_a_conversion_annotates_the_first_frame_with_its_detections(converted: Path) -> None:
    assert_detections_annotated(converted)
    assert_strictly_valid(converted)


def test_the_annotated_frame_s_time_is_on_the_episode_clock_when_audio_starts_first(tmp_path: Path) -> None:
    """A microphone whose chunks start half a second before the cameras (the writer's
    episode clock starts at the first step, not at the first audio chunk): the annotated
    frame's time is that frame's step time, 0.0, not 0.5."""
    source = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=1.0, audio="ros2", detections=True, with_depth=False)
    shift = 500_000_000
    with AnyReader([source.path]) as reader:
        shifted = Rosbag2Writer(tmp_path / "shifted", version=9, storage_plugin=StoragePlugin.MCAP)
        shifted.open()
        connections = {
            c.id: shifted.add_connection(c.topic, c.msgtype, typestore=reader.typestore) for c in reader.connections
        }
        messages = []
        for connection, receive_ns, data in reader.messages():
            if connection.msgtype.endswith("/AudioStamped"):
                message: Any = reader.deserialize(data, connection.msgtype)
                stamp_ns = message.header.stamp.sec * 10**9 + message.header.stamp.nanosec - shift
                message.header.stamp.sec, message.header.stamp.nanosec = divmod(stamp_ns, 10**9)
                data = bytes(reader.typestore.serialize_cdr(message, connection.msgtype))
                receive_ns -= shift
            messages.append((receive_ns, connections[connection.id], bytes(data)))
        for receive_ns, connection, data in sorted(messages, key=lambda m: m[0]):
            shifted.write(connection, receive_ns, data)
        shifted.close()
    assert bag2ortf([str(tmp_path / "shifted"), "-o", str(tmp_path / "ds")]) == 0
    with load_dataset(tmp_path / "ds").episode(0) as episode:
        objects = episode.scene_objects()
        steps = episode.steps(["timestamp", layout.image_column("wrist_camera")])
    first = steps[1].to_pylist().index(0)
    assert objects is not None and objects.annotated_frame_timestamp == pytest.approx(steps[0][first].as_py(), abs=1e-6)


def test_a_conversion_writes_depth_colorized(converted: Path) -> None:
    assert_depth_colorized(converted)


def test_detections_mapping_is_checked(tmp_path: Path) -> None:
    base = {"cameras": {"wrist": {"topic": "/wrist/image", "kind": "rgb"}}}
    good = mapping_from_dict({**base, "detections": {"topic": "/det", "camera": "wrist", "labels": {1: "cup"}}}, "m")
    assert good.detections == DetectionsMapping("/det", "wrist", {"1": "cup"})
    assert mapping_from_dict(mapping_to_dict(good), "again") == good
    parameters = {  # the recorder's: the same keys as ROS parameters
        "cameras.wrist.topic": "/wrist/image",
        "cameras.wrist.kind": "rgb",
        "detections.topic": "/det",
        "detections.camera": "wrist",
        "detections.labels.1": "cup",
    }
    assert mapping_from_parameters(parameters).detections == good.detections
    for detections, message in (
        ({"topic": "/det", "camera": "elbow"}, "m: detections.camera: 'elbow' is not one of the cameras (wrist)"),
        ({"topic": "/det"}, "m: detections.camera: required key is missing"),
        ({"camera": "wrist"}, "m: detections.topic: required key is missing"),
        ({"topic": "/det", "camera": "wrist", "labels": ["cup"]}, "m: detections.labels: expected a mapping"),
    ):
        with pytest.raises(ConversionError) as caught:
            mapping_from_dict({**base, "detections": detections}, "m")
        assert str(caught.value).startswith(message), caught.value


def test_the_review_page_shows_the_annotated_frame(dataset: Path, tmp_path: Path) -> None:
    testclient = pytest.importorskip("starlette.testclient", reason="the review extra: pip install -e '.[review]'")
    from ortf_ros.review.app import create_app

    assert ortf(["annotate", str(dataset), "--episode", "000001", "--objects", str(objects_file(tmp_path))]) == 0
    with testclient.TestClient(create_app(dataset), base_url="http://127.0.0.1") as client:
        page = client.get("/episodes/000001").text
        assert 'src="/episodes/000001/annotations/first_frame.jpg"' in page
        picture = client.get("/episodes/000001/annotations/first_frame.jpg")
        assert picture.status_code == 200 and picture.headers["content-type"] == "image/jpeg"
        assert picture.content == (dataset / layout.annotations_dir(1) / "first_frame.jpg").read_bytes()
        assert 'data-testid="first-frame"' not in client.get("/episodes/000000").text
        assert client.get("/episodes/000000/annotations/first_frame.jpg").status_code == 404


def test_ortf_recover_commits_the_staged_depth_picture(tmp_path: Path) -> None:
    """A writer that stopped mid-episode (``close`` without ``end_episode``, as a crash leaves
    it): the picture staged with the first depth frame is committed by ``ortf recover``."""
    root = tmp_path / "ds"
    writer = DatasetWriter(root, demo_manifest(WIDTH, HEIGHT, FPS, depth=True)).open()
    writer.begin_episode(TASKS[0])
    for step in range(STEPS):
        images = {"cam_wrist": demo_rgb(0, step, WIDTH, HEIGHT), "cam_overhead": demo_rgb(1, step, WIDTH, HEIGHT)}
        writer.add_step(step / FPS, demo_state(0, step), demo_action(0, step), {**images, DEPTH: depth_frame(step)})
    writer.close()
    assert not (root / layout.annotations_dir(0)).exists()
    recover(root)
    picture = decoded(root / layout.annotations_dir(0) / "depth_colorized.jpg")
    assert picture.shape == (HEIGHT, WIDTH, 3) and picture[30, 50, 0] > picture[30, 50, 2]  # far: red
    assert_strictly_valid(root)
