"""Laser scans and point clouds, offline: every scan in its native-rate table and every
cloud in the episode's cloud file, value-exact against the synthetic recording; steps
pointing at the nearest scan; the manifest's lidar sensors and ``point_clouds``; the
accounting; ``ortf validate --strict`` clean; the mapping keys."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag2 import Writer as Rosbag2Writer
from rosbags.typesys import Stores, get_typestore

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.dataset.info import dataset_info
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.recover import recover
from ortf_ros.dataset.staging import staging_root
from ortf_ros.dataset.validation import validate
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ReaderError
from ortf_ros.format import layout, point_clouds
from ortf_ros.format.accounting import ROLE_LIDAR, ROLE_POINT_CLOUD, accounts_from_rows
from ortf_ros.format.sensors import Sensor
from ortf_ros.pipeline.mapping import (
    LaserScanMapping,
    PointCloudMapping,
    TopicMapping,
    describe_mapping,
    detect_mapping,
    mapping_from_dict,
    mapping_from_parameters,
    mapping_to_dict,
)
from ortf_ros.pipeline.samples import PointField, Stamps
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.pipeline.sources.base import TopicInfo
from ortf_ros.pipeline.streams.range_sensors import cloud_bytes, point_cloud
from ortf_ros.synthetic.bag import TeleopBagInfo, write_teleop_bag
from ortf_ros.synthetic.demo_arm import demo_action, demo_manifest, demo_rgb, demo_state
from ortf_ros.synthetic.lidar import (
    CLOUD_FIELDS,
    CLOUD_HEIGHT,
    CLOUD_POINT_STEP,
    CLOUD_RATE_HZ,
    CLOUD_WIDTH,
    SCAN_ANGLE_INCREMENT,
    SCAN_ANGLE_MIN,
    SCAN_RATE_HZ,
    SCAN_SAMPLES,
    cloud_data,
    cloud_values,
    scan_intensities,
    scan_ranges,
)
from ortf_ros.synthetic.scene import BagFormat
from ortf_ros.synthetic.schedule import stamp_ns
from ortf_ros.synthetic.tf import LIDAR_FRAME, LIDAR_TRANSFORM
from ortf_ros.synthetic.topics import TOPIC_POINTS, TOPIC_SCAN

DURATION_S = 1.2


_CONVERTED: dict[str, tuple[TeleopBagInfo, Path]] = {}


def _converted(fmt: BagFormat, tmp_path_factory: pytest.TempPathFactory) -> tuple[TeleopBagInfo, Path]:
    """The synthetic scene with a lidar, as a bag of ``fmt`` converted with the detected mapping (once)."""
    if fmt not in _CONVERTED:
        tmp = tmp_path_factory.mktemp(f"lidar-{fmt}")
        bag = write_teleop_bag(tmp / f"bag-{fmt}", fmt, duration_s=DURATION_S, lidar=True)
        out = tmp / "ds"
        assert bag2ortf([str(bag.path), "-o", str(out)]) == 0
        _CONVERTED[fmt] = (bag, out)
    return _CONVERTED[fmt]


@pytest.fixture(scope="module", params=["mcap", "sqlite3", "ros1"])
def converted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[TeleopBagInfo, Path]:
    return _converted(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def converted_mcap(tmp_path_factory: pytest.TempPathFactory) -> tuple[TeleopBagInfo, Path]:
    """The MCAP one alone, for what does not depend on the bag's format (exports, rules)."""
    return _converted("mcap", tmp_path_factory)


def _manifest(out: Path) -> dict[str, object]:
    data = json.loads((out / layout.MANIFEST).read_text())
    assert isinstance(data, dict)
    return data


def test_validates_strictly(converted: tuple[TeleopBagInfo, Path]) -> None:
    report = validate(converted[1], strict=True)
    assert report.ok, [f.message for f in report.findings]
    assert not report.findings


def test_every_scan_is_kept_value_exact(converted: tuple[TeleopBagInfo, Path]) -> None:
    bag, out = converted
    table = pq.read_table(out / layout.episode_stream_path(0, "lidar", 0))
    count = bag.counts[TOPIC_SCAN]
    assert count == round(DURATION_S * SCAN_RATE_HZ) and table.num_rows == count
    ranges = np.array(table.column("ranges").to_pylist(), np.float32)
    intensities = np.array(table.column("intensities").to_pylist(), np.float32)
    assert ranges.shape == (count, SCAN_SAMPLES)
    for seq in range(count):
        # +inf, -inf and NaN (REP 117) kept as sent, every other value bit for bit
        np.testing.assert_array_equal(ranges[seq], scan_ranges(seq))
        np.testing.assert_array_equal(intensities[seq], scan_intensities(seq))
    stamps = table.column("stamp_ns").to_pylist()
    assert stamps == [stamp_ns(seq, SCAN_RATE_HZ, bag.config.start_ns) for seq in range(count)]
    assert np.isposinf(ranges[:, 7]).all() and np.isneginf(ranges[:, 3]).all() and np.isnan(ranges[:, 11]).all()


def test_steps_point_at_the_nearest_scan(converted: tuple[TeleopBagInfo, Path]) -> None:
    out = converted[1]
    steps = pq.read_table(out / layout.steps_path(0))
    scans = pq.read_table(out / layout.episode_stream_path(0, "lidar", 0))
    index = np.array(steps.column(layout.stream_index_column("lidar")).to_pylist())
    step_times = steps.column("timestamp").to_numpy()
    scan_times = scans.column("timestamp").to_numpy()
    nearest = np.abs(scan_times[np.newaxis, :] - step_times[:, np.newaxis]).argmin(axis=1)
    np.testing.assert_array_equal(index, nearest)
    error = np.array(steps.column(layout.alignment_column("lidar")).to_pylist())
    np.testing.assert_allclose(error, np.abs(scan_times[index] - step_times) * 1000, atol=1e-3)
    assert error.max() <= 1000 / SCAN_RATE_HZ / 2 + 1e-3


def test_manifest_declares_the_lidars(converted: tuple[TeleopBagInfo, Path]) -> None:
    manifest = _manifest(converted[1])
    sensors = {s["name"]: s for s in manifest["sensors"]}  # type: ignore[attr-defined]
    scan = sensors["lidar"]
    assert scan["type"] == "lidar" and scan["channels"] == 1 and scan["scan_rate"] == pytest.approx(SCAN_RATE_HZ, 0.05)
    assert scan["samples"] == SCAN_SAMPLES and scan["intensities"] is True and scan["angle_units"] == "radians"
    assert scan["range"] == [pytest.approx(0.05), pytest.approx(12.0)]
    assert scan["fov_horizontal"] == pytest.approx(scan["angle_max"] - scan["angle_min"])
    assert scan["frame"] == LIDAR_FRAME
    extrinsics = scan["extrinsics"]
    assert extrinsics["parent_frame"] == LIDAR_TRANSFORM.parent
    np.testing.assert_allclose(extrinsics["translation"], LIDAR_TRANSFORM.translation)
    assert LIDAR_FRAME in manifest["frames"]  # type: ignore[operator]
    cloud = sensors["lidar_points"]
    assert cloud["type"] == "lidar" and cloud["format"] == "point_cloud" and cloud["channels"] == CLOUD_HEIGHT
    declared = manifest[point_clouds.POINT_CLOUDS_KEY]["lidar_points"]  # type: ignore[index]
    assert declared["point_step"] == CLOUD_POINT_STEP and declared["organized"] is True
    assert [(f["name"], f["offset"], f["count"]) for f in declared["fields"]] == [
        (name, offset, count) for name, offset, _, count in CLOUD_FIELDS
    ]
    streams = manifest["native_streams"]["lidar"]  # type: ignore[index]
    assert streams["columns"]["ranges"]["dim"] == SCAN_SAMPLES and "non_finite" in streams
    scan_line, cloud_line = dataset_info(load_dataset(converted[1])).lidars  # (`ortf info`)
    assert scan_line.split()[:5] == ["lidar", "scans", "of", str(SCAN_SAMPLES), "ranges"]
    assert cloud_line.startswith("lidar_points") and f"{CLOUD_HEIGHT} channel(s) @ 5 Hz" in cloud_line


def test_every_cloud_is_kept_value_exact(converted: tuple[TeleopBagInfo, Path]) -> None:
    bag, out = converted
    path = out / point_clouds.cloud_path("lidar_points", 0, 0)
    parquet = pq.ParquetFile(path)
    count = bag.counts[TOPIC_POINTS]
    assert count == round(DURATION_S * CLOUD_RATE_HZ) and parquet.metadata.num_rows == count
    assert parquet.num_row_groups == count  # a row group per cloud: memory is one cloud
    table = parquet.read()
    assert table.column("frame_id").to_pylist() == [LIDAR_FRAME] * count
    assert table.column("height").to_pylist() == [CLOUD_HEIGHT] * count
    assert table.column("width").to_pylist() == [CLOUD_WIDTH] * count
    assert table.column("stamp_ns").to_pylist() == [
        stamp_ns(s, CLOUD_RATE_HZ, bag.config.start_ns) for s in range(count)
    ]
    for seq in range(count):
        expected = cloud_values(seq)
        for name, values in expected.items():
            got = np.array(table.column(f"points.{name}")[seq].as_py(), dtype=values.dtype)
            np.testing.assert_array_equal(got, values)
        # rebuilt with the declared layout: the same bytes as sent, but for the padding
        rebuilt = np.frombuffer(cloud_bytes(expected, _fields(), CLOUD_POINT_STEP), np.uint8).reshape(CLOUD_HEIGHT, -1)
        sent = np.frombuffer(cloud_data(seq), np.uint8).reshape(CLOUD_HEIGHT, -1)[:, : rebuilt.shape[1]]
        mask = np.zeros(CLOUD_POINT_STEP, bool)
        for _, offset, datatype, _ in CLOUD_FIELDS:
            mask[offset : offset + {4: 2, 7: 4, 8: 8}[datatype]] = True
        np.testing.assert_array_equal(rebuilt[:, np.tile(mask, CLOUD_WIDTH)], sent[:, np.tile(mask, CLOUD_WIDTH)])


def _fields() -> tuple[PointField, ...]:
    return tuple(PointField(name, offset, datatype, count) for name, offset, datatype, count in CLOUD_FIELDS)


def test_accounting_counts_scans_and_clouds(converted: tuple[TeleopBagInfo, Path]) -> None:
    bag, out = converted
    row = pq.read_table(out / layout.EPISODES).to_pylist()[0]
    accounts = {a.stream: a for a in accounts_from_rows(row["accounting"]) or ()}
    scan, cloud = accounts["lidar"], accounts["lidar_points"]
    assert scan.role == ROLE_LIDAR and scan.read == scan.kept == scan.native_samples == bag.counts[TOPIC_SCAN]
    assert scan.steps_referencing == row["length"]
    assert (
        cloud.role == ROLE_POINT_CLOUD and cloud.read == cloud.kept == cloud.native_samples == bag.counts[TOPIC_POINTS]
    )
    assert cloud.steps_referencing == 0


def test_a_cloud_file_cut_short_is_reported(converted_mcap: tuple[TeleopBagInfo, Path], tmp_path: Path) -> None:
    out = tmp_path / "ds"
    shutil.copytree(converted_mcap[1], out)
    path = out / point_clouds.cloud_path("lidar_points", 0, 0)
    table = pq.read_table(path)
    pq.write_table(table.slice(0, table.num_rows - 1), path)
    rules = {f.rule for f in validate(out).findings}
    assert "episodes.accounting_files" in rules


def test_auto_config_detects_scans_and_clouds(converted_mcap: tuple[TeleopBagInfo, Path]) -> None:
    with BagSource(converted_mcap[0].path) as source:
        config = detect_mapping(source.topics())
    assert config.laser_scans == (LaserScanMapping("lidar", TOPIC_SCAN),)
    assert config.point_clouds == (PointCloudMapping("lidar_points", TOPIC_POINTS),)
    lines = describe_mapping(config, None)
    assert any(line.startswith(f"laser scan lidar: {TOPIC_SCAN}") for line in lines)
    assert any(line.startswith(f"point cloud lidar_points: {TOPIC_POINTS}") for line in lines)


def test_auto_config_names_a_microphone_and_a_lidar_of_one_namespace_apart() -> None:
    """/front/audio, /front/scan and /front/points: three sensors, three names, and the
    mapping written from them reads back (a file naming two sensors alike is refused)."""

    def topic(name: str, msgtype: str) -> TopicInfo:
        return TopicInfo(name, msgtype, msgtype, 10, 1, 2, "", "ros2msg", "cdr")

    config = detect_mapping(
        [
            topic("/front/audio", "audio_common_msgs/msg/AudioStamped"),
            topic("/front/scan", "sensor_msgs/msg/LaserScan"),
            topic("/front/points", "sensor_msgs/msg/PointCloud2"),
        ]
    )
    names = [config.audio[0].name, config.laser_scans[0].name, config.point_clouds[0].name]
    assert len(set(names)) == 3, names
    assert mapping_from_dict(mapping_to_dict(config), "x") == config


def test_mapping_keys_round_trip_and_are_checked() -> None:
    config = TopicMapping(
        laser_scans=(LaserScanMapping("front", "/front/scan", time="receive", policy="latest"),),
        point_clouds=(PointCloudMapping("top", "/top/points"),),
    )
    assert mapping_from_dict(mapping_to_dict(config), "x") == config
    parameters = {"laser_scans.front.topic": "/front/scan", "laser_scans.front.time": "receive"}
    parameters |= {"laser_scans.front.policy": "latest", "point_clouds.top.topic": "/top/points"}
    assert mapping_from_parameters(parameters) == config  # the recorder's ROS parameters, same keys
    with pytest.raises(Exception, match="laser_scans.front.policy: .*latest or nearest"):
        mapping_from_dict({"laser_scans": {"front": {"topic": "/s", "policy": "linear"}}}, "m.yaml")
    with pytest.raises(Exception, match="native: .*false is not supported"):
        mapping_from_dict({"laser_scans": {"front": {"topic": "/s", "native": False}}}, "m.yaml")
    with pytest.raises(Exception, match="names must be unique"):
        mapping_from_dict({"laser_scans": {"a": {"topic": "/s"}}, "point_clouds": {"a": {"topic": "/p"}}}, "m.yaml")


def _cloud_msg(
    big_endian: bool, height: int, width: int, row_padding: int
) -> tuple[SimpleNamespace, dict[str, np.ndarray]]:
    """A cloud of float64 xyz (count 3), int8 and uint32 fields with padding, in either byte order."""
    order = ">" if big_endian else "<"
    n = height * width
    values: dict[str, np.ndarray] = {
        "xyz": np.arange(n * 3, dtype=np.float64).reshape(n, 3) / 7,
        "label": (np.arange(n) - 3).astype(np.int8),
        "id": (np.arange(n) * 1000003).astype(np.uint32),
    }
    spec: Any = {  # (Any: numpy's stubs type this dict differently for Python 3.10 and 3.12)
        "names": ["xyz", "label", "id"],
        "formats": [(order + "f8", (3,)), "i1", order + "u4"],
        "offsets": [0, 25, 28],
        "itemsize": 40,
    }
    dtype = np.dtype(spec)
    points = np.zeros(n, dtype)
    for name, v in values.items():
        points[name] = v
    rows = points.view(np.uint8).reshape(height, width * 40)
    data = np.concatenate([rows, np.full((height, row_padding), 0xEE, np.uint8)], axis=1).tobytes()
    fields = [
        SimpleNamespace(name="xyz", offset=0, datatype=8, count=3),
        SimpleNamespace(name="label", offset=25, datatype=1, count=1),
        SimpleNamespace(name="id", offset=28, datatype=6, count=1),
    ]
    msg = SimpleNamespace(
        height=height,
        width=width,
        fields=fields,
        is_bigendian=big_endian,
        point_step=40,
        row_step=width * 40 + row_padding,
        data=data,
        is_dense=True,
    )
    return msg, values


@pytest.mark.parametrize(("big_endian", "height", "width"), [(False, 1, 7), (True, 3, 4), (False, 0, 0)])
def test_cloud_decoding_any_layout(big_endian: bool, height: int, width: int) -> None:
    msg, values = _cloud_msg(big_endian, height, width, row_padding=5)
    msg.fields += [SimpleNamespace(name="_", offset=24, datatype=2, count=1)] * 2  # PCL's padding fields
    sample = point_cloud(msg, "/c", Stamps(1, 2, "f"))
    assert (sample.height, sample.width) == (height, width)
    assert list(sample.values) == list(values)  # (padding fields are no values)
    for name, expected in values.items():
        np.testing.assert_array_equal(sample.values[name], expected)
        assert sample.values[name].dtype.byteorder in ("=", "<", "|")


def _edit_manifest(out: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = out / layout.MANIFEST
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _sensor(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in data["sensors"] if s["name"] == name)


def _renumber_clouds(out: Path) -> None:
    path = out / point_clouds.cloud_path("lidar_points", 0, 0)
    table = pq.read_table(path)
    index = table.schema.get_field_index("cloud_index")
    shifted = pa.array(np.arange(1, table.num_rows + 1), pa.int64())
    pq.write_table(table.set_column(index, table.schema.field(index), shifted), path)


LIDAR_BREAKAGES: list[tuple[str, Callable[[Path], None]]] = [
    ("lidar.scan_columns", lambda out: _edit_manifest(out, lambda d: _sensor(d, "lidar").update(samples=91))),
    (
        "lidar.cloud_declaration",
        lambda out: _edit_manifest(
            out, lambda d: d[point_clouds.POINT_CLOUDS_KEY]["lidar_points"].update(point_step=8)
        ),
    ),
    ("lidar.cloud_file", _renumber_clouds),
]
"""A breakage of each lidar rule (``test_validate.test_every_rule_has_a_breakage`` counts them)."""


@pytest.mark.parametrize(("rule", "breaker"), LIDAR_BREAKAGES, ids=[rule for rule, _ in LIDAR_BREAKAGES])
def test_rule(
    converted_mcap: tuple[TeleopBagInfo, Path], tmp_path: Path, rule: str, breaker: Callable[[Path], None]
) -> None:
    out = tmp_path / "ds"
    shutil.copytree(converted_mcap[1], out)
    breaker(out)
    report = validate(out)
    assert not report.ok
    assert rule in {f.rule for f in report.findings}


def test_export_mcap_publishes_every_scan_and_cloud_value_exact(
    converted_mcap: tuple[TeleopBagInfo, Path], tmp_path: Path
) -> None:
    """Read back with mcap-ros2-support; converted back, the same scans and clouds."""
    bag, out = converted_mcap
    mcap_path = tmp_path / "lidar.mcap"
    assert ortf(["export", "mcap", str(out), str(mcap_path)]) == 0
    scans: list[Any] = []
    clouds: list[Any] = []
    with mcap_path.open("rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        for _, channel, _, decoded in reader.iter_decoded_messages(topics=["/lidar/scan", "/lidar_points/points"]):
            (scans if channel.topic == "/lidar/scan" else clouds).append(decoded)
    assert len(scans) == bag.counts[TOPIC_SCAN] and len(clouds) == bag.counts[TOPIC_POINTS]
    for seq, scan in enumerate(scans):
        np.testing.assert_array_equal(np.asarray(scan.ranges, np.float32), scan_ranges(seq))
        np.testing.assert_array_equal(np.asarray(scan.intensities, np.float32), scan_intensities(seq))
        assert scan.header.frame_id == LIDAR_FRAME and scan.range_max == pytest.approx(12.0)
        assert len(scan.ranges) == SCAN_SAMPLES
    for seq, cloud in enumerate(clouds):
        decoded = point_cloud(cloud, "/lidar_points/points", Stamps(0))
        assert (decoded.height, decoded.width, decoded.point_step) == (CLOUD_HEIGHT, CLOUD_WIDTH, CLOUD_POINT_STEP)
        for name, values in cloud_values(seq).items():
            np.testing.assert_array_equal(decoded.values[name], values)
    again = tmp_path / "again"
    assert bag2ortf([str(mcap_path), "-o", str(again)]) == 0
    assert validate(again, strict=True).ok
    first = pq.read_table(out / layout.episode_stream_path(0, "lidar", 0)).column("ranges").to_pylist()
    second = pq.read_table(again / layout.episode_stream_path(0, "lidar", 0)).column("ranges").to_pylist()
    np.testing.assert_array_equal(np.array(first, np.float32), np.array(second, np.float32))
    ours = pq.read_table(out / point_clouds.cloud_path("lidar_points", 0, 0)).drop(["episode_id"])
    theirs = pq.read_table(again / point_clouds.cloud_path("lidar_points", 0, 0)).drop(["episode_id"])
    for column in ours.column_names:
        if column.startswith("points."):
            np.testing.assert_array_equal(
                np.array(ours.column(column).to_pylist()), np.array(theirs.column(column).to_pylist())
            )


def test_mixtrain_export_references_the_scans_and_clouds(
    converted_mcap: tuple[TeleopBagInfo, Path], tmp_path: Path
) -> None:
    out = converted_mcap[1]
    target = tmp_path / "mixtrain"
    assert ortf(["export", "mixtrain", str(out), str(target)]) == 0
    row = pq.read_table(target / "data" / "part-00000.parquet").to_pylist()[0]
    types = json.loads((target / "mixtrain.json").read_text())["column_types"]
    assert types["lidar_lidar"]["type"] == "3d" and types["lidar_lidar"]["samples"] == SCAN_SAMPLES
    assert types["point_cloud_lidar_points"]["type"] == "4d"
    scans = (target / row["lidar_lidar"]).read_bytes()  # (the file itself: NaN ranges compare unequal)
    assert scans == (out / layout.episode_stream_path(0, "lidar", 0)).read_bytes()
    steps = pq.read_table(out / layout.steps_path(0))
    assert row["lidar_lidar_index"] == steps.column(layout.stream_index_column("lidar")).to_pylist()
    clouds = (target / row["point_cloud_lidar_points"]).read_bytes()
    assert clouds == (out / point_clouds.cloud_path("lidar_points", 0, 0)).read_bytes()


def test_doctor_takes_rep117_ranges_as_meant(
    converted_mcap: tuple[TeleopBagInfo, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """+inf, -inf and NaN in a scan's ranges are readings (REP 117), not broken values."""
    ortf(["doctor", str(converted_mcap[1])])
    assert "value.non_finite" not in capsys.readouterr().out


def test_parallel_conversion_imports_the_clouds(converted_mcap: tuple[TeleopBagInfo, Path], tmp_path: Path) -> None:
    """``--jobs`` converts into scratch datasets and imports their episodes: clouds too; and
    ``ortf episodes delete`` removes an episode's clouds with it."""
    bag, out = converted_mcap
    later = write_teleop_bag(
        tmp_path / "later", bag.fmt, duration_s=DURATION_S, lidar=True, start_ns=bag.start_ns + 10**10
    )
    target = tmp_path / "jobs"
    assert bag2ortf([str(bag.path), str(later.path), "-o", str(target), "--jobs", "2"]) == 0
    assert validate(target, strict=True).ok
    ours = pq.read_table(out / point_clouds.cloud_path("lidar_points", 0, 0))
    for index in range(2):
        theirs = pq.read_table(target / point_clouds.cloud_path("lidar_points", 0, index))
        assert (
            theirs.num_rows == ours.num_rows
            and theirs.column("episode_id").to_pylist() == [f"{index:06d}"] * ours.num_rows
        )
        shift = index * 10**10
        assert [s - shift for s in theirs.column("stamp_ns").to_pylist()] == ours.column("stamp_ns").to_pylist()
    # deleting an episode deletes its clouds
    assert ortf(["episodes", "delete", str(target), "000000", "--yes"]) == 0
    assert not (target / point_clouds.cloud_path("lidar_points", 0, 0)).exists()
    assert (target / point_clouds.cloud_path("lidar_points", 0, 1)).exists()
    assert validate(target, strict=True).ok


def write_plain_lidar_bag(path: Path) -> tuple[list[np.ndarray], list[dict[str, np.ndarray]]]:
    """A mobile base's recording: /joint_states at 50 Hz, a scanner that gives no
    intensities (scan 4 of another length: reconfigured), and an unorganized, dense,
    big-endian cloud with a 3-element field; returns the scans and clouds written."""
    store = get_typestore(Stores.ROS2_JAZZY)
    types = store.types
    scans, clouds = [], []

    def header(ns: int, frame: str) -> Any:
        stamp = types["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)
        return types["std_msgs/msg/Header"](stamp=stamp, frame_id=frame)

    with Rosbag2Writer(path, version=9) as bag:
        joints = bag.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=store)
        scan_conn = bag.add_connection("/base_scan", "sensor_msgs/msg/LaserScan", typestore=store)
        cloud_conn = bag.add_connection("/velodyne_points", "sensor_msgs/msg/PointCloud2", typestore=store)
        events = [(i * 20_000_000, "j", i) for i in range(75)] + [
            (i * 100_000_000 + 3_000_000, "s", i) for i in range(15)
        ]
        events += [(i * 200_000_000 + 7_000_000, "c", i) for i in range(7)]
        for t, kind, i in sorted(events):
            ns = START + t
            if kind == "j":
                position = np.array([0.1 * i, -0.2 * i])
                message = types["sensor_msgs/msg/JointState"](
                    header=header(ns, ""),
                    name=["wheel_l", "wheel_r"],
                    position=position,
                    velocity=np.zeros(2),
                    effort=np.zeros(0),
                )
                bag.write(joints, ns + 100_000, store.serialize_cdr(message, "sensor_msgs/msg/JointState"))
            elif kind == "s":
                ranges = np.linspace(0.2, 5.0, 89 if i == 4 else 360).astype(np.float32) + np.float32(i)
                ranges[10] = np.inf
                scans.append(ranges)
                message = types["sensor_msgs/msg/LaserScan"](
                    header=header(ns, "base_laser"),
                    angle_min=-np.pi,
                    angle_max=np.pi,
                    angle_increment=2 * np.pi / 360,
                    time_increment=0.0,
                    scan_time=0.1,
                    range_min=0.1,
                    range_max=30.0,
                    ranges=ranges,
                    intensities=np.zeros(0, np.float32),
                )
                bag.write(scan_conn, ns + 2_000_000, store.serialize_cdr(message, "sensor_msgs/msg/LaserScan"))
            else:
                msg, values = _cloud_msg(True, 1, 5 + i, row_padding=0)
                clouds.append(values)
                fields = [
                    types["sensor_msgs/msg/PointField"](
                        name=f.name, offset=f.offset, datatype=f.datatype, count=f.count
                    )
                    for f in msg.fields
                ]
                message = types["sensor_msgs/msg/PointCloud2"](
                    header=header(ns, "velodyne"),
                    height=1,
                    width=5 + i,
                    fields=fields,
                    is_bigendian=True,
                    point_step=40,
                    row_step=msg.row_step,
                    data=np.frombuffer(msg.data, np.uint8),
                    is_dense=True,
                )
                bag.write(cloud_conn, ns + 4_000_000, store.serialize_cdr(message, "sensor_msgs/msg/PointCloud2"))
    return scans, clouds


START = 1_700_000_000 * 10**9


def test_scans_without_intensities_a_resized_scan_and_a_big_endian_cloud(tmp_path: Path) -> None:
    scans, clouds = write_plain_lidar_bag(tmp_path / "base")
    out = tmp_path / "ds"
    assert bag2ortf([str(tmp_path / "base"), "-o", str(out)]) == 0
    report = validate(out)
    # (the steps around the refused scan are a scan period from the next: the one warning)
    assert report.ok and {f.rule for f in report.findings} <= {"alignment.tolerance"}, [
        f.line() for f in report.findings
    ]
    table = pq.read_table(out / layout.episode_stream_path(0, "base_scan", 0))
    assert "intensities" not in table.column_names  # the scanner gives none: no column
    kept = [s for s in scans if s.size == 360]
    np.testing.assert_array_equal(np.array(table.column("ranges").to_pylist(), np.float32), np.array(kept))
    row = pq.read_table(out / layout.EPISODES).to_pylist()[0]
    accounts = {a.stream: a for a in accounts_from_rows(row["accounting"]) or ()}
    assert accounts["base_scan"].undecodable == 1 and accounts["base_scan"].kept == len(kept)
    cloud_table = pq.read_table(out / point_clouds.cloud_path("velodyne_points", 0, 0))
    assert cloud_table.column("height").to_pylist() == [1] * len(clouds)
    assert cloud_table.column("is_dense").to_pylist() == [True] * len(clouds)
    for i, values in enumerate(clouds):
        xyz = np.array(cloud_table.column("points.xyz")[i].as_py())
        np.testing.assert_array_equal(xyz, values["xyz"])  # (n, 3) float64, now little-endian
        np.testing.assert_array_equal(np.array(cloud_table.column("points.label")[i].as_py(), np.int8), values["label"])
        np.testing.assert_array_equal(np.array(cloud_table.column("points.id")[i].as_py(), np.uint32), values["id"])
    manifest = _manifest(out)
    assert (
        _sensor(manifest, "velodyne_points")["channels"] == "unknown"
        and _sensor(manifest, "base_scan")["intensities"] is False
    )


@pytest.mark.rerun  # (imported here: the rest of this module, and test_validate that uses it, need no Rerun)
def test_rerun_export_shows_scans_and_clouds_as_points(
    converted_mcap: tuple[TeleopBagInfo, Path], tmp_path: Path
) -> None:
    """Read back with Rerun's own reader: a Points3D per scan (its finite ranges at their
    angles) and per cloud (its finite x, y, z), in the lidar's frame; no scalar plot per beam."""
    from rerun.chunk import RrdReader

    bag, out = converted_mcap
    rrd = tmp_path / "lidar.rrd"
    assert ortf(["export", "rerun", str(out), str(rrd)]) == 0
    store = RrdReader(rrd).stream().collect()
    scans = store.reader(index="episode_000000", contents="/lidar/lidar").to_arrow_table()
    positions = [cell for cell in scans["/lidar/lidar:Points3D:positions"].to_pylist() if cell is not None]
    assert len(positions) == bag.counts[TOPIC_SCAN]
    angles = SCAN_ANGLE_MIN + np.float32(SCAN_ANGLE_INCREMENT) * np.arange(SCAN_SAMPLES)
    for seq, points in enumerate(positions):
        ranges = scan_ranges(seq).astype(np.float64)
        hit = np.isfinite(ranges)
        expected = np.stack([ranges * np.cos(angles), ranges * np.sin(angles), np.zeros(SCAN_SAMPLES)], axis=1)[hit]
        np.testing.assert_allclose(np.array(points), expected, atol=1e-5)
    clouds = store.reader(index="episode_000000", contents="/lidar/lidar_points").to_arrow_table()
    cells = [cell for cell in clouds["/lidar/lidar_points:Points3D:positions"].to_pylist() if cell is not None]
    assert len(cells) == bag.counts[TOPIC_POINTS]
    for seq, points in enumerate(cells):
        values = cloud_values(seq)
        xyz = np.stack([values["x"], values["y"], values["z"]], axis=1)
        np.testing.assert_array_equal(np.array(points, np.float32), xyz[np.isfinite(xyz).all(axis=1)])
    frame = store.reader(index=None, contents="/lidar/lidar").to_arrow_table()["/lidar/lidar:CoordinateFrame:frame"]
    assert frame.to_pylist()[0] == [LIDAR_FRAME]
    assert not [c for c in store.schema().component_columns() if c.entity_path.startswith("/state/lidar")]


def test_an_interrupted_episode_keeps_its_clouds_and_a_torn_one_is_cut(tmp_path: Path) -> None:
    """Clouds are in the staged log as each is added: ``ortf recover`` commits them; a
    cloud torn by the crash (half a record) is not there, the ones before it are."""
    fields = [
        {"name": n, "datatype": d, "count": 1, "offset": o} for n, d, o in (("x", "FLOAT32", 0), ("i", "UINT8", 4))
    ]
    declaration = {"sensor": "top", "fields": fields, "point_step": 8, "frame": "top_link", "rate_hz": 10.0}
    base = demo_manifest(64, 48, depth=False)
    manifest = replace(
        base,
        sensors=(*base.sensors, Sensor("top", "lidar", extra={"scan_rate": 10.0, "range": "unknown", "channels": 1})),
        extra={**base.extra, point_clouds.POINT_CLOUDS_KEY: {"top": declaration}},
    )
    root = tmp_path / "ds"
    writer = DatasetWriter(root, manifest).open()
    writer.begin_episode("scan the room")
    for k in range(4):
        images = {cam: demo_rgb(n, k, 64, 48) for n, cam in enumerate(("cam_wrist", "cam_overhead"))}
        writer.add_step(k / 10, demo_state(0, k), demo_action(0, k), images)
        x, i = np.arange(k + 1, dtype=np.float32), np.full(k + 1, k, np.uint8)
        writer.add_point_cloud("top", k / 10 + 0.01, {"x": x, "i": i}, height=1, width=k + 1, is_dense=True)
    writer.close()  # the episode stays staged, as after a crash
    staged = next(staging_root(root).glob("episode_*")) / "point_clouds" / "top.arrows"
    staged.write_bytes(staged.read_bytes()[:-40])  # the last cloud torn
    (result,) = recover(root)
    assert result.action == "recovered"
    table = pq.read_table(root / point_clouds.cloud_path("top", 0, 0))
    assert table.column("cloud_index").to_pylist() == [0, 1, 2]
    assert table.column("points.x").to_pylist() == [[0.0], [0.0, 1.0], [0.0, 1.0, 2.0]]
    assert table.column("points.i").to_pylist() == [[0], [1, 1], [2, 2, 2]]
    report = validate(root)
    assert report.ok, [f.line() for f in report.findings]


def test_the_reader_gives_an_episode_s_clouds_one_at_a_time(converted_mcap: tuple[TeleopBagInfo, Path]) -> None:
    bag, out = converted_mcap
    episode = load_dataset(out).episode(0)
    batches = list(episode.cloud_batches("lidar_points", ["cloud_index", "points.ring"]))
    assert [b.num_rows for b in batches] == [1] * bag.counts[TOPIC_POINTS]
    assert [b.column("cloud_index")[0].as_py() for b in batches] == list(range(bag.counts[TOPIC_POINTS]))
    assert batches[0].column("points.ring")[0].as_py() == cloud_values(0)["ring"].tolist()
    with pytest.raises(ReaderError, match="unknown point cloud stream 'nope'"):
        episode.cloud_file("nope")
