"""Audio live: a scene publisher with a microphone (``audio_common_msgs/AudioStamped``, the
interface package built from ``ros/audio_common_msgs``), some of its messages never
published (dropped chunks), recorded by ``ortf_recorder`` over real DDS on loopback: the
episode's WAV holds exactly the samples published during it, the chunk table shows the
gaps, and a bag of the same scene converts to the same audio."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import rclpy

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.io.wav import read_wav
from ortf_ros.pipeline.streams.audio_definitions import AUDIO_STAMPED
from ortf_ros.playback.rosmsg import RosMessages
from ortf_ros.synthetic.audio import audio_samples
from ortf_ros.synthetic.bag import write_scene_bag
from ortf_ros.synthetic.scene import TeleopConfig
from support.playback_ros import Recorder, play_through
from support.recorder_ros import Scene, record_one_episode

DROPPED = tuple(range(20, 1000, 9))  # every 9th message from 1.3 s on: several in any episode
EPISODE_S = 2.0


@pytest.fixture(scope="module")
def ros() -> Iterator[None]:
    rclpy.init()
    yield
    rclpy.shutdown()


def audio_scene(scene: Scene, duration_s: float, start_ns: int) -> TeleopConfig:
    return replace(scene.teleop(duration_s, start_ns), audio="ros2", audio_dropped=DROPPED)


def seqs_of(table: dict[str, list[int]], config: TeleopConfig) -> list[int]:
    """Each chunk's message number, from its header stamp."""
    period_ns = 1e9 * config.audio_chunk / config.audio_rate_hz
    return [round((stamp - config.start_ns) / period_ns) for stamp in table["stamp_ns"]]


def check_audio(episode: Episode, config: TeleopConfig) -> list[int]:
    """The episode's audio is the published samples of the messages its table lists; those."""
    wav, chunks = episode.audio_files("microphone")
    table = pq.read_table(chunks).to_pydict()
    seqs = seqs_of(table, config)
    assert seqs and not set(seqs) & set(DROPPED)
    samples = read_wav(wav, "s16le")
    expected = np.concatenate([audio_samples(config, seq) for seq in seqs])
    np.testing.assert_array_equal(samples, expected)
    gaps = [(table["gap_samples"][i], seqs[i] - seqs[i - 1]) for i in range(1, len(seqs))]
    assert all(gap == (step - 1) * config.audio_chunk for gap, step in gaps)
    return seqs


def test_live_audio_is_sample_exact_and_matches_the_bag(ros: None, tmp_path: Path) -> None:
    scene = Scene()
    mapping = tmp_path / "mapping.yaml"
    bag = write_scene_bag(tmp_path / "mapping_bag", audio_scene(scene, 1.0, time.time_ns()))
    assert bag2ortf([str(bag.path), "--write-config", str(mapping)]) == 0
    root = tmp_path / "dataset"
    record_one_episode(scene, tmp_path, mapping, root, EPISODE_S, "--audio", "--audio-drop", *map(str, DROPPED))
    report = validate(root, strict=True)
    assert {f.rule for f in report.findings} <= {"alignment.tolerance"}, "\n".join(f.line() for f in report.findings)
    start_ns = json.loads((tmp_path / "scene.json").read_text())["start_ns"]
    live = load_dataset(root).episode(0)
    config = audio_scene(scene, 0.0, start_ns)
    seqs = check_audio(live, config)
    assert len(seqs) >= EPISODE_S * 15 * 0.8 and any(s in DROPPED for s in range(seqs[0], seqs[-1]))
    account = next(a for a in live.record.accounting or () if a.stream == "microphone")
    assert account.kept == account.native_samples == len(seqs)
    # The same scene as a bag, converted with the same mapping: the same sensor, the same chunks.
    duration_s = (max(pq.read_table(live.audio_files("microphone")[1])["stamp_ns"].to_pylist()) - start_ns) / 1e9 + 1
    scene_bag = write_scene_bag(tmp_path / "scene_bag", audio_scene(scene, duration_s, start_ns))
    assert bag2ortf([str(scene_bag.path), "-o", str(tmp_path / "offline"), "--config", str(mapping)]) == 0
    offline = load_dataset(tmp_path / "offline")
    assert offline.manifest.sensor("microphone") == live.dataset.manifest.sensor("microphone")
    offline_seqs = check_audio(offline.episode(0), config)
    assert set(seqs) <= set(offline_seqs)


def test_the_player_republishes_each_chunk_over_dds(ros: None, tmp_path: Path) -> None:
    """``ortf_player`` publishes an AudioStamped per chunk of the episode's audio, its samples
    the file's, its stamps as far apart as the chunks were recorded (the gap kept)."""
    config = TeleopConfig(fmt="mcap", duration_s=1.0, with_depth=False, audio="ros2", audio_dropped=(5,))
    bag = write_scene_bag(tmp_path / "bag", config)
    mapping = tmp_path / "mapping.yaml"
    assert bag2ortf([str(bag.path), "--write-config", str(mapping)]) == 0
    assert bag2ortf([str(bag.path), "-o", str(tmp_path / "ds"), "--config", str(mapping)]) == 0
    episode = load_dataset(tmp_path / "ds").episode(0)
    recorder = Recorder({"/microphone/audio": AUDIO_STAMPED})
    try:
        play_through(recorder, tmp_path / "ds", tmp_path / "player.log", "streams:=[audio, episode]", "rate:=4.0")
        received = recorder.received["/microphone/audio"]
    finally:
        recorder.close()
    wav, chunks = episode.audio_files("microphone")
    table = pq.read_table(chunks).to_pydict()
    written = read_wav(wav, "s16le")
    store = RosMessages().store
    messages: list[Any] = [store.deserialize_cdr(r.data, AUDIO_STAMPED) for r in received]
    assert len(messages) == len(table["chunk_index"]) == 15
    for message, first, count in zip(messages, table["first_sample"], table["sample_count"], strict=True):
        assert message.audio.info.format == 8 and message.audio.info.rate == 16000
        np.testing.assert_array_equal(message.audio.audio_data.int16_data, written[first : first + count])
    stamps = np.array([m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in messages])
    np.testing.assert_allclose(np.diff(stamps) / 1e9, np.diff(table["timestamp"]), atol=1e-6)
