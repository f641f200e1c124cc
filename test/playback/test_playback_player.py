"""The player's schedule and controls without ROS: a sink that keeps what it is handed
gets the very bytes the MCAP export writes; stepping; the decode-ahead bound."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.errors import ReaderError
from ortf_ros.playback.messages import Outgoing, Playlist
from ortf_ros.playback.player import Player
from ortf_ros.playback.settings import PlayerSettings, default_settings
from support.playback_data import play, teleop_dataset


class Kept:
    """A sink that keeps every message it is handed."""

    def __init__(self) -> None:
        self.items: list[tuple[Outgoing, bytes]] = []
        self.clocks: list[int] = []

    def publish(self, item: Outgoing, data: bytes) -> None:
        self.items.append((item, data))

    def clock(self, stamp_ns: int) -> None:
        self.clocks.append(stamp_ns)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    root, _ = teleop_dataset(tmp_path_factory.mktemp("player"), seconds=0.6, with_depth=False)
    return load_dataset(root)


def player_for(dataset: Dataset, sink: Kept, **changes: object) -> Player:
    settings: PlayerSettings = replace(default_settings(), **changes)  # type: ignore[arg-type]
    playlist = Playlist(dataset, [e.episode_id for e in dataset.episodes], settings.messages, print)
    return Player(playlist, settings, sink)


def test_the_node_publishes_the_bytes_the_export_writes(dataset: Dataset) -> None:
    sink = Kept()
    player_for(dataset, sink, rate=0.0, stamps="sim", publish_clock=True).run()
    expected = play(dataset)
    ros = Playlist(dataset, ["000000"], default_settings().messages, print).ros
    assert [(item.topic, item.time_ns) for item, _ in sink.items] == [(i.topic, i.time_ns) for i in expected]
    assert [data for _, data in sink.items] == [ros.serialize(i.message, i.msgtype) for i in expected]
    assert sink.clocks == sorted(sink.clocks) and sink.clocks[0] == expected[0].time_ns


def test_step_publishes_one_step_and_what_came_before_it(dataset: Dataset) -> None:
    sink = Kept()
    player = player_for(dataset, sink, start_paused=True, lookahead_frames=2)
    runner = threading.Thread(target=player.run)
    runner.start()
    try:
        time.sleep(0.2)
        assert sink.items == [] and player.status().state == "paused"
        assert player.step() == "episode 000000 step 0"
        assert player.step() == "episode 000000 step 1"
        steps = [item.step for item, _ in sink.items if item.kind == "joint_states"]
        assert steps == [0, 1]
        last_time = sink.items[-1][0].time_ns
        assert all(item.time_ns <= last_time for item, _ in sink.items)
        assert player.status().step == 1 and player.resume() and not player.resume()
    finally:
        player.stop()
        runner.join()


def test_decoding_runs_at_most_lookahead_frames_ahead(dataset: Dataset) -> None:
    player = player_for(dataset, Kept(), start_paused=True, lookahead_frames=3)
    runner = threading.Thread(target=player.run)
    runner.start()
    try:
        deadline = time.monotonic() + 10
        while player.status().decoded_ahead != {"overhead_camera": 3, "wrist_camera": 3}:
            assert time.monotonic() < deadline, player.status()
            time.sleep(0.01)
        time.sleep(0.2)  # the producer now waits for room
        assert player.status().decoded_ahead == {"overhead_camera": 3, "wrist_camera": 3}
    finally:
        player.stop()
        runner.join()


def test_a_failing_dataset_read_reaches_the_caller(dataset: Dataset) -> None:
    player = player_for(dataset, Kept(), rate=0.0)
    player.playlist.episode_ids = ("000000", "nope")
    with pytest.raises(ReaderError, match="no episode with id 'nope'"):
        player.run()
