"""Datasets the playback tests play: generated teleop bags converted by ortf-bag2ortf,
so they carry what a real conversion gives (native-rate force-torque, TF frames with
aliases, camera extrinsics and calibration, a JointState command as the action)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ortf_ros.dataset.reader import Dataset, Episode
from ortf_ros.pipeline.mapping import TopicMapping, detect_mapping
from ortf_ros.pipeline.offline import convert_recording
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.playback.messages import Outgoing, Playlist
from ortf_ros.playback.settings import MessageSettings, default_settings
from ortf_ros.synthetic.bag import TeleopBagInfo, write_teleop_bag

SYNC_TOLERANCE_MS = 25.0  # the 50 Hz command is up to 20 ms old under "latest"


def teleop_mapping(bag: Path, *, native_wrench: bool = True) -> TopicMapping:
    with BagSource(bag) as source:
        config = detect_mapping(source.topics())
    wrenches = tuple(replace(w, native=native_wrench) for w in config.wrenches)
    return replace(config, wrenches=wrenches, sync_tolerance_ms=SYNC_TOLERANCE_MS)


def teleop_dataset(
    tmp: Path, *, seconds: float = 1.0, episodes: int = 1, native_wrench: bool = True, **bag: Any
) -> tuple[Path, list[TeleopBagInfo]]:
    """A dataset of ``episodes`` converted teleop bags (64x48 cameras and depth by default)."""
    bags = []
    out = tmp / "dataset"
    for n in range(episodes):
        info = write_teleop_bag(tmp / f"bag{n}", "mcap", duration_s=seconds, **bag)
        convert_recording([info.path], out, teleop_mapping(info.path, native_wrench=native_wrench))
        bags.append(info)
    return out, bags


def play(
    dataset: Dataset, settings: MessageSettings | None = None, warnings: list[str] | None = None, **options: Any
) -> list[Outgoing]:
    """Every item the player would publish for all episodes, in order."""
    sink = warnings if warnings is not None else []
    playlist = Playlist(
        dataset, [e.episode_id for e in dataset.episodes], settings or default_settings().messages, sink.append
    )
    return [item for episode in playlist.play(**options) for item in episode.items()]


def on(items: list[Outgoing], topic: str) -> list[Outgoing]:
    return [item for item in items if item.topic == topic]


def time_ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def stamp_ns(message: Any) -> int:
    return time_ns(message.header.stamp)


def vectors(table: pa.Table, column: str) -> np.ndarray:
    values = table[column].combine_chunks()
    array: np.ndarray = values.flatten().to_numpy().reshape(len(values), -1)
    return array


def pairs(items: list[Outgoing], rows: int) -> Iterator[tuple[int, Outgoing]]:
    """(step row, item) for per-step items, checking there is one per row."""
    assert len(items) == rows, f"{len(items)} messages for {rows} steps"
    for row, item in enumerate(items):
        assert item.step == row
        yield row, item


def equal_columns(first: Episode, second: Episode, *, timestamp_atol: float = 0.0) -> None:
    """The state and action columns bit for bit, and the timestamps to ``timestamp_atol`` seconds."""
    a, b = first.steps(), second.steps()
    assert a.num_rows == b.num_rows
    for column in [c for c in a.column_names if c.startswith(("observation.state.", "action"))]:
        assert b[column].equals(a[column]), column
    np.testing.assert_allclose(b["timestamp"].to_numpy(), a["timestamp"].to_numpy(), rtol=0, atol=timestamp_atol)
