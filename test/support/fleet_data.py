"""Recordings of a small fleet, and what makes two datasets converted from them the same.

The recordings differ in content (their start times, formats, lengths), as a fleet's do:
two byte-identical recordings are one recording to the converter, which converts it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cli.test_bag2ortf import mapping_for
from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout
from ortf_ros.pipeline.mapping import write_mapping
from ortf_ros.synthetic.bag import TeleopBagInfo, write_teleop_bag
from ortf_ros.synthetic.images import decode_frame_number
from ortf_ros.synthetic.scene import START_NS, BagFormat

NS = 1_000_000_000


@dataclass(frozen=True)
class Fleet:
    recordings: list[TeleopBagInfo]
    mapping: Path  # one mapping for all: their manifests agree, as one dataset needs

    def paths(self) -> list[str]:
        return [str(r.path) for r in self.recordings]


def make_fleet(directory: Path, count: int, duration_s: float = 0.5) -> Fleet:
    """``count`` recordings in ``directory`` (rosbag2 MCAP and ROS 1, alternately), each
    starting a minute after the one before."""
    recordings = []
    for n in range(count):
        fmt: BagFormat = "mcap" if n % 2 == 0 else "ros1"
        path = directory / f"rec{n:02d}"
        recordings.append(write_teleop_bag(path, fmt, duration_s=duration_s, start_ns=START_NS + n * 60 * NS))
    mapping = directory / "mapping.yaml"
    write_mapping(mapping_for(recordings[0].path), mapping)
    return Fleet(recordings, mapping)


def dataset_digest(root: Path) -> dict[str, Any]:
    """What two conversions of the same recordings must agree on: the manifest (but its
    identity), each episode's index row (but where its source lay: the same), its steps,
    its native streams, and its frames as decoded (RGB by the frame numbers drawn into
    them, as lossy encoding with other thread counts gives other bytes; depth exactly)."""
    dataset = load_dataset(root)
    manifest = dataset.manifest.to_dict()
    for field in ("dataset_id", "created_at"):
        manifest.pop(field, None)
    episodes = [_episode_digest(dataset, position) for position in range(len(dataset))]
    return {"manifest": manifest, "episodes": episodes}


def _episode_digest(dataset: Dataset, position: int) -> dict[str, Any]:
    episode = dataset.episode(position)
    record = episode.record
    digest: dict[str, Any] = {
        "record": (record.episode_id, record.task_id, record.length, record.success, record.recorded_at),
        "source": None
        if record.source is None
        else (record.source.path, record.source.episode, record.source.episodes),
        "steps": episode.steps().to_pydict(),
        "streams": {name: episode.stream(name).to_pydict() for name in dataset.manifest.native_streams},
    }
    for camera, sensor in dataset.manifest.cameras.items():
        indices = [int(i) for i in np.unique(episode.array(layout.image_column(camera)))]
        frames = [episode.frame(camera, i) for i in indices]
        if sensor.is_depth:
            digest[camera] = [frame.tobytes() for frame in frames]
        else:
            digest[camera] = [decode_frame_number(frame) for frame in frames]
    episode.close()
    return digest


def converted_in_place(fleet: Fleet, root: Path) -> dict[str, Any]:
    """The fleet converted in one run, in place, into ``root``: what every other way must give."""
    assert bag2ortf([*fleet.paths(), "-o", str(root), "--config", str(fleet.mapping), "--jobs", "1"]) == 0
    report = validate(root, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    return dataset_digest(root)
