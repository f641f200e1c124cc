"""The dataset writer of the demo arm's episodes: ORTF written directly, with no bag and
no conversion between (``demo_arm`` has the values; ``bag`` is the way through a bag).

The dataset tests and benchmarks start from it: it is the quickest way to a valid
dataset of any size.
"""

from __future__ import annotations

import os

from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.synthetic.demo_arm import (
    DEPTH_CAMERA,
    RGB_CAMERAS,
    TASKS,
    demo_action,
    demo_depth,
    demo_manifest,
    demo_rgb,
    demo_state,
    demo_urdf,
)


def write_demo_dataset(
    root: str | os.PathLike[str],
    *,
    episodes: int = 1,
    steps: int = 90,
    width: int = 640,
    height: int = 480,
    fps: int = 30,
    depth: bool = True,
    config: WriterConfig | None = None,
) -> list[EpisodeRecord]:
    """Write (or append) ``episodes`` synthetic episodes with the demo URDF."""
    records = []
    with DatasetWriter(root, demo_manifest(width, height, fps, depth), config=config, urdf=demo_urdf()) as writer:
        first = writer.episode_count
        for episode in range(first, first + episodes):
            writer.begin_episode(TASKS[episode % len(TASKS)])
            for step in range(steps):
                images = {cam: demo_rgb(n, step, width, height) for n, cam in enumerate(RGB_CAMERAS)}
                if depth:
                    images[DEPTH_CAMERA[0]] = demo_depth(step, width, height)
                writer.add_step(
                    1_700_000_000.0 + episode * 100 + step / fps,
                    demo_state(episode, step, fps),
                    demo_action(episode, step, fps),
                    images,
                )
            records.append(
                writer.end_episode(
                    success=episode % 3 != 2,
                    failure_reason="gripper slipped" if episode % 3 == 2 else None,
                    operator_notes=f"synthetic episode {episode}",
                )
            )
    return records
