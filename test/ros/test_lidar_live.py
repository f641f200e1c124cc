"""Laser scans and point clouds recorded live over real DDS on loopback (the scene
publisher with ``--lidar``, the recorder as a module): every scan and cloud published
during the episode recorded value-exact, ``validate --strict`` clean, and the bag of the
same scene converted offline with the same mapping giving the same scans, clouds and step
references."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import rclpy
import yaml

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout, point_clouds
from ortf_ros.synthetic.lidar import CLOUD_RATE_HZ, SCAN_RATE_HZ, cloud_values, scan_intensities, scan_ranges
from support.recorder_ros import Scene, record_one_episode

EPISODE_S = 2.0
SCENE = Scene(lidar=True)


@pytest.fixture(scope="module")
def ros() -> Iterator[None]:
    rclpy.init()
    yield
    rclpy.shutdown()


@dataclass(frozen=True)
class Recorded:
    root: Path
    mapping: Path
    start_ns: int
    tmp: Path


@pytest.fixture(scope="module")
def recorded(ros: None, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    tmp = tmp_path_factory.mktemp("lidar_live")
    bag = SCENE.bag(tmp / "mapping_bag", duration_s=1.0, start_ns=time.time_ns())
    mapping = tmp / "mapping.yaml"
    assert bag2ortf([str(bag.path), "--write-config", str(mapping)]) == 0
    data = yaml.safe_load(mapping.read_text())
    assert data["laser_scans"] == {
        "lidar": {
            "topic": "/lidar/scan",
            "time": "header",
            "clock_offset_ms": None,
            "policy": "nearest",
            "native": True,
            "sync_tolerance_ms": None,
        }
    }
    assert data["point_clouds"] == {
        "lidar_points": {"topic": "/lidar/points", "time": "header", "clock_offset_ms": None}
    }
    data["step"] = {"rate_hz": None, "camera": "wrist_camera"}
    mapping.write_text(yaml.safe_dump(data, sort_keys=False))
    root = tmp / "dataset"
    record_one_episode(SCENE, tmp, mapping, root, EPISODE_S)
    start_ns = int(json.loads((tmp / "scene.json").read_text())["start_ns"])
    return Recorded(root, mapping, start_ns, tmp)


def test_live_scans_and_clouds_are_value_exact_and_valid(recorded: Recorded) -> None:
    report = validate(recorded.root, strict=True)
    assert report.ok and not report.findings, "\n".join(f.line() for f in report.findings)
    scans = pq.read_table(recorded.root / layout.episode_stream_path(0, "lidar", 0))
    seqs = [round((s - recorded.start_ns) * SCAN_RATE_HZ / 1e9) for s in scans.column("stamp_ns").to_pylist()]
    assert len(seqs) >= EPISODE_S * SCAN_RATE_HZ * 0.8 and seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    for seq, ranges, intensities in zip(
        seqs, scans.column("ranges").to_pylist(), scans.column("intensities").to_pylist(), strict=True
    ):
        np.testing.assert_array_equal(np.array(ranges, np.float32), scan_ranges(seq))
        np.testing.assert_array_equal(np.array(intensities, np.float32), scan_intensities(seq))
    clouds = pq.read_table(recorded.root / point_clouds.cloud_path("lidar_points", 0, 0))
    cloud_seqs = [round((s - recorded.start_ns) * CLOUD_RATE_HZ / 1e9) for s in clouds.column("stamp_ns").to_pylist()]
    assert len(cloud_seqs) >= EPISODE_S * CLOUD_RATE_HZ * 0.8
    assert cloud_seqs == list(range(cloud_seqs[0], cloud_seqs[0] + len(cloud_seqs)))
    for row, seq in enumerate(cloud_seqs):
        for name, values in cloud_values(seq).items():
            got = np.array(clouds.column(f"points.{name}")[row].as_py(), values.dtype)
            np.testing.assert_array_equal(got, values)
    accounts = {a.stream: a for a in load_dataset(recorded.root).episode(0).record.accounting or ()}
    assert accounts["lidar"].received == accounts["lidar"].kept == len(seqs)
    assert accounts["lidar_points"].received == accounts["lidar_points"].kept == len(cloud_seqs)


def test_live_equals_the_bag_of_the_same_scene(recorded: Recorded) -> None:
    """The same lidar sensors, scans and clouds (the bag's that the episode spans), and at
    each step the same scan referenced."""
    live = load_dataset(recorded.root)
    scans = pq.read_table(recorded.root / layout.episode_stream_path(0, "lidar", 0))
    last_ns = int(scans.column("stamp_ns").to_pylist()[-1])
    bag = SCENE.bag(
        recorded.tmp / "scene_bag", duration_s=(last_ns - recorded.start_ns) / 1e9 + 1, start_ns=recorded.start_ns
    )
    offline_root = recorded.tmp / "offline"
    assert bag2ortf([str(bag.path), "-o", str(offline_root), "--config", str(recorded.mapping)]) == 0
    offline = load_dataset(offline_root)
    for name in ("lidar", "lidar_points"):
        ours, theirs = live.manifest.sensor(name), offline.manifest.sensor(name)
        assert ours is not None and theirs is not None
        assert {k: v for k, v in ours.to_dict().items() if k != "scan_rate"} == {
            k: v for k, v in theirs.to_dict().items() if k != "scan_rate"
        }
    assert (
        live.manifest.extra["point_clouds"]["lidar_points"]["fields"]
        == offline.manifest.extra["point_clouds"]["lidar_points"]["fields"]
    )
    offline_scans = pq.read_table(offline_root / layout.episode_stream_path(0, "lidar", 0))
    by_stamp = {s: i for i, s in enumerate(offline_scans.column("stamp_ns").to_pylist())}
    for i, stamp in enumerate(scans.column("stamp_ns").to_pylist()):
        ours_ranges = np.array(scans.column("ranges")[i].as_py(), np.float32)
        theirs_ranges = np.array(offline_scans.column("ranges")[by_stamp[stamp]].as_py(), np.float32)
        np.testing.assert_array_equal(ours_ranges, theirs_ranges)
    offline_clouds = pq.read_table(offline_root / point_clouds.cloud_path("lidar_points", 0, 0))
    live_clouds = pq.read_table(recorded.root / point_clouds.cloud_path("lidar_points", 0, 0))
    cloud_rows = {s: i for i, s in enumerate(offline_clouds.column("stamp_ns").to_pylist())}
    for i, stamp in enumerate(live_clouds.column("stamp_ns").to_pylist()):
        for column in live_clouds.column_names:
            if column.startswith("points."):
                values = np.array(live_clouds.column(column)[i].as_py())
                np.testing.assert_array_equal(
                    values, np.array(offline_clouds.column(column)[cloud_rows[stamp]].as_py())
                )
    # each live step points at the scan the offline step at the same instant points at
    live_refs, offline_refs = _referenced(recorded.root), _referenced(offline_root)
    inner = sorted(live_refs)[:-6]  # (the last steps of a live episode see no scan after them)
    assert inner and all(live_refs[t] == offline_refs[t] for t in inner)


def _referenced(root: Path) -> dict[int, int]:
    """Each step's instant (ns, header clock) -> the stamp of the scan it points at."""
    episode = load_dataset(root).episode(0)
    native = episode.stream("joint_states", ["timestamp", "stamp_ns"])
    origin = int(native["stamp_ns"][0].as_py()) - round(native["timestamp"][0].as_py() * 1e9)
    steps = episode.steps(["timestamp", layout.stream_index_column("lidar")])
    stamps = pq.read_table(root / layout.episode_stream_path(0, "lidar", 0)).column("stamp_ns").to_pylist()
    times = np.round(steps["timestamp"].to_numpy() * 1e9).astype(np.int64) + origin
    indices = steps[layout.stream_index_column("lidar")].to_pylist()
    return {int(t): stamps[k] for t, k in zip(times, indices, strict=True)}
