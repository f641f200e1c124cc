"""Cameras without camera_info: intrinsics from the topic, else from the mapping's
``camera_info_url`` (the YAML ``camera_calibration`` writes), else declared unknown with a
warning in the conversion summary and from ``ortf validate``; the player and the MCAP
export publish no CameraInfo for such a camera."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from mcap.reader import make_reader

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.errors import ConversionError
from ortf_ros.format import layout
from ortf_ros.format.sensors import Sensor
from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.fastpath import SampleDecoder
from ortf_ros.pipeline.mapping import (
    CameraMapping,
    TopicMapping,
    describe_mapping,
    detect_mapping,
    load_mapping,
    write_mapping,
)
from ortf_ros.pipeline.offline import read_prologue
from ortf_ros.pipeline.prologue import prologue_topics
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.playback.publication import Publication
from ortf_ros.playback.settings import default_settings
from ortf_ros.synthetic.bag import TeleopBagInfo, write_teleop_bag
from ortf_ros.synthetic.images import CAMERA_DISTORTION, camera_intrinsics, decode_frame_number
from ortf_ros.synthetic.scene import BagFormat
from ortf_ros.synthetic.topics import TOPIC_DEPTH_IMAGE, TOPIC_OVERHEAD_CAMERA_INFO, TOPIC_OVERHEAD_IMAGE
from pipeline.test_prologue import CountingSource
from support.playback_data import on, play

LACKING = "overhead_camera"
UNKNOWN_WARNING = (
    "camera overhead_camera: no camera_info topic and no camera_info_url in the mapping: intrinsics declared "
    "unknown (to give them, name the camera's calibration YAML as cameras.overhead_camera.camera_info_url)"
)
# The overhead camera's calibration file: values no CameraInfo of the bag carries.
FILE_K = (57.25, 0.0, 31.75, 0.0, 56.5, 23.5, 0.0, 0.0, 1.0)
FILE_D = (-0.25, 0.0625, 0.001, -0.002, 0.0)


def calibration_yaml(
    width: int = 64, height: int = 48, k: tuple[float, ...] = FILE_K, d: tuple[float, ...] = FILE_D
) -> str:
    """A calibration in the layout ``camera_calibration``'s cameracalibrator writes it."""

    def numbers(values: tuple[float, ...]) -> str:
        return "[" + ", ".join(repr(v) for v in values) + "]"

    fx, _, cx, _, fy, cy, _, _, _ = k
    return (
        f"image_width: {width}\n"
        f"image_height: {height}\n"
        "camera_name: overhead_camera\n"
        "camera_matrix:\n  rows: 3\n  cols: 3\n"
        f"  data: {numbers(k)}\n"
        "distortion_model: plumb_bob\n"
        f"distortion_coefficients:\n  rows: 1\n  cols: {len(d)}\n  data: {numbers(d)}\n"
        "rectification_matrix:\n  rows: 3\n  cols: 3\n  data: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]\n"
        "projection_matrix:\n  rows: 3\n  cols: 4\n"
        f"  data: {numbers((fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0))}\n"
    )


def detected(bag: Path) -> TopicMapping:
    with BagSource([bag]) as source:
        return detect_mapping(source.topics())


def with_camera(config: TopicMapping, name: str, **change: object) -> TopicMapping:
    cameras = tuple(replace(c, **change) if c.name == name else c for c in config.cameras)  # type: ignore[arg-type]
    return replace(config, cameras=cameras)


def convert(*args: str | Path) -> tuple[int, str]:
    """``ortf-bag2ortf ARGS`` in this process: its exit code and standard output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = bag2ortf([str(a) for a in args])
    return code, out.getvalue()


def expected_topic_calibration(width: int, height: int) -> tuple[dict[str, float], dict[str, object]]:
    fx, fy, cx, cy = camera_intrinsics(width, height)
    return {"fx": fx, "fy": fy, "cx": cx, "cy": cy}, {
        "model": CAMERA_DISTORTION[0],
        "coefficients": list(CAMERA_DISTORTION[1]),
    }


def camera(dataset: Dataset, name: str) -> Sensor:
    sensor = dataset.manifest.sensor(name)
    assert sensor is not None
    return sensor


# -- a camera without camera_info, in every bag format --------------------------------------


@pytest.fixture(scope="module", params=["mcap", "sqlite3", "ros1"])
def converted(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[TeleopBagInfo, Dataset, str]:
    """(the bag, its dataset, the conversion's summary) of a recording whose overhead camera has no camera_info."""
    fmt: BagFormat = request.param
    tmp = tmp_path_factory.mktemp(fmt)
    bag = write_teleop_bag(tmp / "bag", fmt, duration_s=1.0, without_camera_info=(TOPIC_OVERHEAD_IMAGE,))
    code, summary = convert(bag.path, "-o", tmp / "ds")
    assert code == 0, summary
    return bag, load_dataset(tmp / "ds"), summary


def test_a_camera_without_camera_info_converts_with_its_intrinsics_declared_unknown(
    converted: tuple[TeleopBagInfo, Dataset, str],
) -> None:
    bag, dataset, _ = converted
    assert TOPIC_OVERHEAD_CAMERA_INFO not in bag.counts
    overhead = camera(dataset, LACKING)
    assert overhead.intrinsics == {"unknown": True} and overhead.distortion is None
    assert "calibration_source" not in overhead.extra
    intrinsics, distortion = expected_topic_calibration(bag.config.width, bag.config.height)
    for name, info_topic in (
        ("wrist_camera", "/wrist_camera/camera_info"),
        ("depth_camera", "/depth_camera/camera_info"),
    ):
        sensor = camera(dataset, name)
        assert sensor.intrinsics == intrinsics and sensor.distortion == distortion, name
        assert sensor.extra["calibration_source"] == info_topic
    # its frames are there as ever: each step's frame is one the camera published
    episode = dataset.episode(0)
    frames = episode.array(layout.image_column(LACKING))
    assert len(frames) == episode.record.length
    assert [decode_frame_number(episode.frame(LACKING, int(i))) for i in frames[:3]] == [int(i) for i in frames[:3]]
    episode.close()


def test_the_summary_warns_once_about_the_unknown_intrinsics(converted: tuple[TeleopBagInfo, Dataset, str]) -> None:
    _, _, summary = converted
    warnings = [line for line in summary.splitlines() if line.startswith("  warning: ")]
    assert warnings == [f"  warning: {UNKNOWN_WARNING}"]


def test_validate_warns_and_the_dataset_is_valid(converted: tuple[TeleopBagInfo, Dataset, str]) -> None:
    _, dataset, _ = converted
    report = validate(dataset.root)
    assert report.ok
    index = [s.name for s in dataset.manifest.sensors].index(LACKING)
    assert [(f.severity, f.rule, f.field) for f in report.findings] == [
        ("warning", "manifest.intrinsics_unknown", f"sensors[{index}].intrinsics")
    ]
    assert not validate(dataset.root, strict=True).ok  # strict: warnings fail


def test_ortf_validate_prints_the_warning_and_valid(
    converted: tuple[TeleopBagInfo, Dataset, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, dataset, _ = converted
    assert ortf(["validate", str(dataset.root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    index = [s.name for s in dataset.manifest.sensors].index(LACKING)
    assert (
        f"WARNING meta/manifest.json field=sensors[{index}].intrinsics: camera sensor 'overhead_camera' declares "
        "its intrinsics unknown: its frames cannot be related to 3D [manifest.intrinsics_unknown]"
    ) in lines
    assert "valid: 0 error(s), 1 warning(s), 0 info(s)" in lines


# -- the player and the MCAP export -----------------------------------------------------------


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> tuple[TeleopBagInfo, Dataset]:
    """A dataset whose overhead camera's intrinsics are unknown, for the player and the export."""
    tmp = tmp_path_factory.mktemp("played")
    bag = write_teleop_bag(tmp / "bag", "mcap", duration_s=0.6, without_camera_info=(TOPIC_OVERHEAD_IMAGE,))
    assert convert(bag.path, "-o", tmp / "ds")[0] == 0
    return bag, load_dataset(tmp / "ds")


def test_the_player_publishes_no_camera_info_for_it(played: tuple[TeleopBagInfo, Dataset]) -> None:
    bag, dataset = played
    settings = default_settings().messages
    publication = Publication.of(dataset.manifest, settings)
    topics = publication.topics()
    assert "/overhead_camera/camera_info" not in topics and "/overhead_camera/image_raw" in topics
    assert {"/wrist_camera/camera_info", "/depth_camera/camera_info"} <= set(topics)
    assert publication.without_info_line() == (
        "no CameraInfo published for camera(s) overhead_camera: the dataset has no intrinsics for them"
    )
    items = play(dataset)
    steps = dataset.total_steps
    assert len(on(items, "/overhead_camera/image_raw")) == steps
    assert on(items, "/overhead_camera/camera_info") == []
    infos = on(items, "/wrist_camera/camera_info")
    assert len(infos) == steps
    fx, fy, cx, cy = camera_intrinsics(bag.config.width, bag.config.height)
    assert infos[0].message.k.tolist() == [fx, 0, cx, 0, fy, cy, 0, 0, 1]


def test_the_mcap_export_has_no_camera_info_for_it_and_says_so(
    played: tuple[TeleopBagInfo, Dataset], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, dataset = played
    out = tmp_path / "export.mcap"
    assert ortf(["export", "mcap", str(dataset.root), str(out)]) == 0
    report = capsys.readouterr().out.splitlines()
    assert "  no CameraInfo published for camera(s) overhead_camera: the dataset has no intrinsics for them" in report
    with out.open("rb") as stream:
        summary = make_reader(stream).get_summary()
    assert summary is not None and summary.statistics is not None
    counts = {
        summary.channels[channel].topic: count for channel, count in summary.statistics.channel_message_counts.items()
    }
    steps = dataset.total_steps
    assert "/overhead_camera/camera_info" not in counts and counts["/overhead_camera/image_raw"] == steps
    assert counts["/wrist_camera/camera_info"] == counts["/depth_camera/camera_info"] == steps


# -- the synthetic bag's option ---------------------------------------------------------------


def test_without_camera_info_leaves_every_other_message_as_it_was(tmp_path: Path) -> None:
    full = write_teleop_bag(tmp_path / "full", "sqlite3", duration_s=0.5)
    lacking = write_teleop_bag(
        tmp_path / "lacking", "sqlite3", duration_s=0.5, without_camera_info=(TOPIC_OVERHEAD_IMAGE, TOPIC_DEPTH_IMAGE)
    )
    gone = {TOPIC_OVERHEAD_CAMERA_INFO, "/depth_camera/camera_info"}
    assert lacking.counts == {t: n for t, n in full.counts.items() if t not in gone}
    with BagSource([full.path]) as a, BagSource([lacking.path]) as b:
        kept = [(m.topic, m.receive_ns, bytes(m.data)) for m in a.messages() if m.topic not in gone]
        assert kept == [(m.topic, m.receive_ns, bytes(m.data)) for m in b.messages()]
    with pytest.raises(ValueError, match="camera without camera_info '/nope/image_raw'"):
        write_teleop_bag(tmp_path / "bad", "mcap", without_camera_info=("/nope/image_raw",))


# -- the prologue does not wait for what cannot come ------------------------------------------


@pytest.mark.parametrize("mapped", [False, True])
def test_a_camera_without_camera_info_is_not_waited_for(tmp_path: Path, mapped: bool) -> None:
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=4.0, without_camera_info=(TOPIC_OVERHEAD_IMAGE,))
    source = CountingSource([bag.path])
    with source:
        mapping = detect_mapping(source.topics())
        if mapped:  # a mapping written for a recording that had it
            mapping = with_camera(mapping, LACKING, camera_info_topic=TOPIC_OVERHEAD_CAMERA_INFO)
        prologue = read_prologue(source, SampleDecoder(Decoder()), mapping)
        wanted = sum(t.count for t in source.topics() if t.topic in prologue_topics(mapping))
        assert set(prologue.camera_info) == {"wrist_camera", "depth_camera"}
        # about 1 s of input (the TF window), not the whole 4 s recording with every frame
        assert source.read < wanted / 3, (source.read, wanted)


# -- a calibration file named by the mapping ---------------------------------------------------


@pytest.fixture(scope="module")
def short_bag(tmp_path_factory: pytest.TempPathFactory) -> TeleopBagInfo:
    tmp = tmp_path_factory.mktemp("short")
    return write_teleop_bag(tmp / "bag", "mcap", duration_s=0.6, without_camera_info=(TOPIC_OVERHEAD_IMAGE,))


def mapping_with_file(bag: TeleopBagInfo, tmp: Path, url: str, **change: object) -> Path:
    """A mapping file in ``tmp`` whose overhead camera names ``url`` as its camera_info_url."""
    path = tmp / "mapping.yaml"
    write_mapping(with_camera(detected(bag.path), LACKING, camera_info_url=url, **change), path)
    return path


@pytest.mark.parametrize("form", ["relative", "file_url", "package_url"])
def test_the_intrinsics_and_distortion_are_exactly_the_files(
    short_bag: TeleopBagInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    calib = tmp_path / "calib" / "overhead.yaml"
    url = {"relative": "calib/overhead.yaml", "file_url": f"file://{calib}", "package_url": "package://cams/c.yaml"}
    if form == "package_url":  # an install space as ament indexes it
        prefix = tmp_path / "install"
        (prefix / "share/ament_index/resource_index/packages").mkdir(parents=True)
        (prefix / "share/ament_index/resource_index/packages/cams").write_text("")
        calib = prefix / "share/cams/c.yaml"
        monkeypatch.setenv("AMENT_PREFIX_PATH", f"{tmp_path / 'elsewhere'}:{prefix}")
    calib.parent.mkdir(parents=True)
    calib.write_text(calibration_yaml())
    mapping = mapping_with_file(short_bag, tmp_path, url[form])
    code, summary = convert(short_bag.path, "-o", tmp_path / "ds", "--config", mapping, "--json")
    assert code == 0
    assert json.loads(summary)["recordings"][0]["warnings"] == []
    dataset = load_dataset(tmp_path / "ds")
    overhead = camera(dataset, LACKING)
    fx, _, cx, _, fy, cy, _, _, _ = FILE_K
    assert overhead.intrinsics == {"fx": fx, "fy": fy, "cx": cx, "cy": cy}
    assert overhead.distortion == {"model": "plumb_bob", "coefficients": list(FILE_D)}
    assert overhead.extra["calibration_source"] == str(calib)
    intrinsics, _ = expected_topic_calibration(64, 48)
    assert camera(dataset, "wrist_camera").intrinsics == intrinsics  # the others from their topic
    assert validate(dataset.root, strict=True).ok


def test_a_file_without_distortion_model_is_plumb_bob_as_ros_reads_it(short_bag: TeleopBagInfo, tmp_path: Path) -> None:
    """Older calibration files have no distortion_model; camera_calibration_parsers reads them as plumb_bob."""
    (tmp_path / "overhead.yaml").write_text(calibration_yaml().replace("distortion_model: plumb_bob\n", ""))
    mapping = mapping_with_file(short_bag, tmp_path, "overhead.yaml")
    assert convert(short_bag.path, "-o", tmp_path / "ds", "--config", mapping)[0] == 0
    distortion = camera(load_dataset(tmp_path / "ds"), LACKING).distortion
    assert distortion == {"model": "plumb_bob", "coefficients": list(FILE_D)}


def test_a_mapped_camera_info_topic_that_gives_nothing_falls_back_with_a_warning(
    short_bag: TeleopBagInfo, tmp_path: Path
) -> None:
    (tmp_path / "overhead.yaml").write_text(calibration_yaml())
    mapping = mapping_with_file(short_bag, tmp_path, "overhead.yaml", camera_info_topic=TOPIC_OVERHEAD_CAMERA_INFO)
    code, summary = convert(short_bag.path, "-o", tmp_path / "ds", "--config", mapping)
    assert code == 0
    warning = (
        f"  warning: camera overhead_camera: no CameraInfo came on {TOPIC_OVERHEAD_CAMERA_INFO}: intrinsics from "
        f"{tmp_path / 'overhead.yaml'}"
    )
    assert [line for line in summary.splitlines() if line.startswith("  warning: ")] == [warning]
    assert camera(load_dataset(tmp_path / "ds"), LACKING).intrinsics == {
        "fx": 57.25,
        "fy": 56.5,
        "cx": 31.75,
        "cy": 23.5,
    }


def test_without_the_file_a_mapped_topic_that_gives_nothing_leaves_them_unknown(
    short_bag: TeleopBagInfo, tmp_path: Path
) -> None:
    mapping = tmp_path / "m.yaml"
    write_mapping(with_camera(detected(short_bag.path), LACKING, camera_info_topic=TOPIC_OVERHEAD_CAMERA_INFO), mapping)
    code, summary = convert(short_bag.path, "-o", tmp_path / "ds", "--config", mapping)
    assert code == 0
    warning = (
        f"  warning: camera overhead_camera: no CameraInfo came on {TOPIC_OVERHEAD_CAMERA_INFO}: intrinsics declared "
        "unknown (to give them, name the camera's calibration YAML as cameras.overhead_camera.camera_info_url)"
    )
    assert [line for line in summary.splitlines() if line.startswith("  warning: ")] == [warning]
    assert camera(load_dataset(tmp_path / "ds"), LACKING).intrinsics == {"unknown": True}


K_TEXT = "  data: " + repr(list(FILE_K)) + "\n"
BAD_FILES = [
    ("image_width: [64\n", "not valid YAML: "),
    ("- 64\n- 48\n", "expected a camera calibration (image_width, image_height, camera_matrix, ...), got list"),
    ("", "expected a camera calibration (image_width, image_height, camera_matrix, ...), got an empty file"),
    (calibration_yaml().replace("camera_matrix:", "camera_matrx:"), "camera_matrix: required key is missing"),
    (calibration_yaml().replace("image_height: 48\n", ""), "image_height: required key is missing"),
    (calibration_yaml().replace("image_width: 64", "image_width: 64.5"), "image_width: expected a positive whole"),
    (
        calibration_yaml().replace("rows: 3\n  cols: 3\n" + K_TEXT, "rows: 3\n  cols: 4\n" + K_TEXT),
        "camera_matrix: expected rows 3, cols 3, got rows 3, cols 4",
    ),
    (
        calibration_yaml().replace(K_TEXT, "  data: [57.25, 0.0, 31.75, 0.0, 56.5, 23.5, 0.0, 0.0]\n"),
        "camera_matrix.data: expected 9 numbers (rows 3 x cols 3), got 8 numbers",
    ),
    (
        calibration_yaml().replace(K_TEXT, "  data: [57.25, 0.0, fx, 0.0, 56.5, 23.5, 0.0, 0.0, 1.0]\n"),
        "camera_matrix.data[2]: expected a finite number, got 'fx'",
    ),
    (calibration_yaml().replace("cols: 5", "cols: 4"), "distortion_coefficients.data: expected 4 numbers"),
    (
        calibration_yaml().replace(
            "projection_matrix:\n  rows: 3\n  cols: 4", "projection_matrix:\n  rows: 3\n  cols: 3"
        ),
        "projection_matrix: expected rows 3, cols 4, got rows 3, cols 3",
    ),
    (calibration_yaml(k=(0.0,) * 9), "camera_matrix: fx and fy must be positive, got 0.0 and 0.0 (not calibrated?)"),
    (
        calibration_yaml(width=640, height=480),
        "image_width x image_height is 640x480, but camera overhead_camera's frames on /overhead_camera/image_raw "
        "are 64x48",
    ),
]


@pytest.mark.parametrize(("text", "problem"), BAD_FILES)
def test_a_bad_calibration_file_is_one_clear_line(
    short_bag: TeleopBagInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    calib = tmp_path / "overhead.yaml"
    calib.write_text(text)
    mapping = mapping_with_file(short_bag, tmp_path, "overhead.yaml")
    assert bag2ortf([str(short_bag.path), "-o", str(tmp_path / "ds"), "--config", str(mapping)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"ortf-bag2ortf: {calib}: {problem}"), err
    assert not (tmp_path / "ds").exists()


def test_a_missing_calibration_file_is_one_clear_line(
    short_bag: TeleopBagInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = mapping_with_file(short_bag, tmp_path, "nowhere.yaml")
    assert bag2ortf([str(short_bag.path), "-o", str(tmp_path / "ds"), "--config", str(mapping)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        f"ortf-bag2ortf: cannot read the camera calibration: {tmp_path / 'nowhere.yaml'}: No such file or directory"
    )


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://example.com/c.yaml", "'http://example.com/c.yaml': unsupported URL; expected file:///path/calib.yaml"),
        ("file://${ROS_HOME}/camera_info/c.yaml", "substitutions are not supported"),
        ("package://cams", "'package://cams': expected package://PACKAGE/path/calib.yaml inside the package"),
        ("   ", "expected a non-empty string"),
    ],
)
def test_a_url_of_an_unsupported_form_is_refused_where_the_mapping_is_read(
    tmp_path: Path, url: str, problem: str
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(f"cameras:\n  cam:\n    topic: /cam/image_raw\n    kind: rgb\n    camera_info_url: {url!r}\n")
    with pytest.raises(ConversionError) as raised:
        load_mapping(path)
    assert str(raised.value).startswith(f"{path}: cameras.cam.camera_info_url: ")
    assert problem in str(raised.value)


def test_a_package_url_without_a_ros_workspace_is_one_clear_line(
    short_bag: TeleopBagInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    mapping = mapping_with_file(short_bag, tmp_path, "package://cams/c.yaml")
    assert bag2ortf([str(short_bag.path), "-o", str(tmp_path / "ds"), "--config", str(mapping)]) == 1
    assert capsys.readouterr().err.strip() == (
        "ortf-bag2ortf: package://cams/c.yaml: finding a ROS package needs a sourced workspace (AMENT_PREFIX_PATH "
        "is not set); give the file's path or a file:// URL as camera_info_url"
    )
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path))
    assert bag2ortf([str(short_bag.path), "-o", str(tmp_path / "ds"), "--config", str(mapping)]) == 1
    assert "package 'cams' is not in AMENT_PREFIX_PATH" in capsys.readouterr().err


# -- the mapping: reading, writing, and saying what will happen ---------------------------------


def test_camera_info_url_is_kept_absolute_and_reads_back(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "m.yaml"
    path.write_text(
        "cameras:\n"
        "  a: {topic: /a/image_raw, kind: rgb, camera_info_url: calib/a.yaml}\n"
        "  b: {topic: /b/image_raw, kind: rgb, camera_info_url: 'file:///opt/calib/b.yaml'}\n"
        "  c: {topic: /c/image_raw, kind: rgb, camera_info_url: 'package://cams/c.yaml'}\n"
        "  d: {topic: /d/image_raw, kind: rgb}\n"
    )
    config = load_mapping(path)
    urls = [c.camera_info_url for c in config.cameras]
    assert urls == [str(tmp_path / "sub/calib/a.yaml"), "/opt/calib/b.yaml", "package://cams/c.yaml", None]
    write_mapping(config, tmp_path / "again.yaml")
    assert load_mapping(tmp_path / "again.yaml") == config


def test_list_says_where_each_cameras_intrinsics_will_come_from(short_bag: TeleopBagInfo) -> None:
    code, listing = convert(short_bag.path, "--list")
    assert code == 0
    assert (
        "  camera overhead_camera (rgb): /overhead_camera/image_raw (header time, nearest, no camera_info: "
        "intrinsics unknown)"
    ) in listing.splitlines()
    assert (
        "  camera wrist_camera (rgb): /wrist_camera/image_raw (header time, nearest, camera_info "
        "/wrist_camera/camera_info, without it intrinsics unknown)"
    ) in listing.splitlines()
    cameras = (
        CameraMapping("a", "/a/image_raw", "rgb", camera_info_url="/calib/a.yaml"),
        CameraMapping("b", "/b/image_raw", "rgb", camera_info_topic="/b/camera_info", camera_info_url="/calib/b.yaml"),
    )
    lines = describe_mapping(TopicMapping(cameras=cameras), None)
    assert "camera a (rgb): /a/image_raw (header time, nearest, no camera_info: intrinsics from /calib/a.yaml)" in lines
    assert (
        "camera b (rgb): /b/image_raw (header time, nearest, camera_info /b/camera_info, without it intrinsics from "
        "/calib/b.yaml)"
    ) in lines
