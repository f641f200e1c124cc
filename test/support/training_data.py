"""Datasets for the training reader's tests: every value tells where it came from.

Each RGB frame carries its (episode, step) number in code blocks (``synthetic.images``,
readable after lossy coding), depth is exact, the state and action of a step encode the
episode and step, and a 1 kHz force-torque stream's samples encode their sample number, so
a window that read the wrong step, frame or sample shows it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format.native_streams import Alignment, NativeStream
from ortf_ros.format.spaces import StateComponent
from ortf_ros.synthetic.demo_arm import demo_depth, demo_manifest, demo_state
from ortf_ros.synthetic.images import rgb_frame
from ortf_ros.synthetic.topics import TOPIC_WRIST_IMAGE

WIDTH, HEIGHT, FPS, WRENCH_HZ = 64, 48, 30, 1000
RGB = ("cam_wrist", "cam_overhead")
DEPTH = "depth"
WRENCH = "wrist_ft"
TASKS = ("Pick up the red box and place it in the bowl", "Open the drawer")


def frame_number(episode: int, step: int, camera: int) -> int:
    return (episode * 1000 + step) * 2 + camera


def action(episode: int, step: int) -> np.ndarray:
    return np.array([episode, step, *range(6)], np.float32)  # the demo arm's 8-D action


def wrench(sample: int) -> dict[str, np.ndarray]:
    return {
        "force": np.array([sample, 0.5, -1.0], np.float32),
        "torque": np.array([0.0, 0.0, sample / 1000], np.float32),
    }


def late_steps(step: int) -> bool:
    """The steps whose wrist camera frame is late (alignment 50 ms, past a 20 ms tolerance)."""
    return step % 5 == 4


def write_training_dataset(
    root: Path,
    *,
    episodes: int = 3,
    steps: int = 20,
    chunk_size: int = 1000,
    first: int = 0,
    row_group_steps: int = 65536,
) -> None:
    """``episodes`` episodes of ``steps`` steps at 30 Hz (episode ``first + e``); every third fails."""
    manifest = replace(
        demo_manifest(WIDTH, HEIGHT, FPS, depth=True),
        native_streams={
            WRENCH: NativeStream(
                columns={"force": StateComponent(3, "newtons"), "torque": StateComponent(3, "newton_meters")},
                rate_hz=WRENCH_HZ,
                source="/ft_sensor/wrench",
            )
        },
        alignment=Alignment(streams=("cam_wrist", WRENCH)),
        sync_tolerance_ms=20.0,
    )
    with DatasetWriter(
        root, manifest, config=WriterConfig(chunk_size=chunk_size, row_group_steps=row_group_steps)
    ) as writer:
        for e in range(first, first + episodes):
            writer.begin_episode(TASKS[e % len(TASKS)])
            sample = -1
            for step in range(steps):
                t = step / FPS
                while (sample + 1) / WRENCH_HZ <= t:
                    sample += 1
                    writer.add_sample(WRENCH, sample / WRENCH_HZ, wrench(sample), stamp_ns=sample * 10**6, receive_ns=0)
                images = {
                    cam: rgb_frame(TOPIC_WRIST_IMAGE, frame_number(e, step, n), WIDTH, HEIGHT)
                    for n, cam in enumerate(RGB)
                }
                images[DEPTH] = demo_depth(step + e, WIDTH, HEIGHT)
                writer.add_step(
                    t,
                    demo_state(e, step),
                    action(e, step),
                    images,
                    samples={WRENCH: sample},
                    alignment_ms={
                        "cam_wrist": 50.0 if late_steps(step) else 1.0,
                        WRENCH: (t - sample / WRENCH_HZ) * 1000,
                    },
                )
            writer.end_episode(success=e % 3 != 2, failure_reason="slipped" if e % 3 == 2 else None)
