"""ortf_player over real DDS on loopback with a lidar: every LaserScan and PointCloud2 the
dataset holds arrives, value-exact, and the recording of the player converts back (with
``replay_mapping``) to the same scans and clouds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import rclpy

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout, point_clouds
from ortf_ros.pipeline.mapping import write_mapping
from ortf_ros.pipeline.samples import Stamps
from ortf_ros.pipeline.streams.range_sensors import point_cloud
from ortf_ros.playback.replay import replay_mapping
from ortf_ros.playback.settings import default_settings
from ortf_ros.synthetic.lidar import CLOUD_RATE_HZ, SCAN_RATE_HZ, cloud_values, scan_intensities, scan_ranges
from ortf_ros.synthetic.scene import START_NS
from ros.test_playback_node import recorder_for
from support.playback_data import teleop_dataset
from support.playback_ros import play_through


@pytest.fixture(scope="module")
def ros() -> Iterator[None]:
    rclpy.init()
    yield
    rclpy.shutdown()


def test_the_player_publishes_every_scan_and_cloud(ros: None, tmp_path: Path) -> None:
    root, _ = teleop_dataset(tmp_path, seconds=1.2, lidar=True, with_depth=False)
    dataset = load_dataset(root)
    recorder = recorder_for(dataset)
    try:
        play_through(recorder, root, tmp_path / "player.log")
        scans = recorder.messages("/lidar/scan")
        clouds = recorder.messages("/lidar_points/points")
        table = pq.read_table(root / layout.episode_stream_path(0, "lidar", 0))
        assert len(scans) == table.num_rows
        first = round((table.column("stamp_ns")[0].as_py() - START_NS) * SCAN_RATE_HZ / 1e9)
        for seq, scan in enumerate(scans, start=first):
            np.testing.assert_array_equal(np.asarray(scan.ranges, np.float32), scan_ranges(seq))
            np.testing.assert_array_equal(np.asarray(scan.intensities, np.float32), scan_intensities(seq))
        stored = pq.read_table(root / point_clouds.cloud_path("lidar_points", 0, 0))
        assert len(clouds) == stored.num_rows
        for row, cloud in enumerate(clouds):
            decoded = point_cloud(cloud, "/lidar_points/points", Stamps(0))
            seq = row + round((stored.column("stamp_ns")[0].as_py() - START_NS) * CLOUD_RATE_HZ / 1e9)
            for name, values in cloud_values(seq).items():
                np.testing.assert_array_equal(decoded.values[name], values)
        recorder.write_bag(tmp_path / "recording")
    finally:
        recorder.close()
    mapping = tmp_path / "mapping.yaml"
    write_mapping(replay_mapping(dataset.manifest, default_settings().messages, split_episodes=False), mapping)
    again = tmp_path / "again"
    assert bag2ortf([str(tmp_path / "recording"), "-o", str(again), "--config", str(mapping)]) == 0
    assert validate(again).ok
    before = pq.read_table(root / layout.episode_stream_path(0, "lidar", 0)).column("ranges").to_pylist()
    after = pq.read_table(again / layout.episode_stream_path(0, "lidar", 0)).column("ranges").to_pylist()
    np.testing.assert_array_equal(np.array(after, np.float32), np.array(before, np.float32))
    cloud_after = pq.read_table(again / point_clouds.cloud_path("lidar_points", 0, 0))
    for column in stored.column_names:
        if column.startswith("points."):
            np.testing.assert_array_equal(
                np.array(cloud_after.column(column).to_pylist()), np.array(stored.column(column).to_pylist())
            )
