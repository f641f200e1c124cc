"""Child process of test_write_failures: a writer whose files stop growing at a size, as a
full disk or a quota stops them, for real.

``RLIMIT_FSIZE`` caps every file the process writes; with SIGXFSZ ignored, a write past
the cap fails with EFBIG ("File too large") instead of killing the process. The cap is
set only around the call under test, so what comes before and after it is written.
Each scenario prints the WriterError it expects; any other exception is a traceback
and a non-zero exit.

``stage ROOT CAMERA CAP``: a new episode copies episode 0's video of CAMERA.
``samples ROOT``: a new episode of native samples, a batch of which fails to reach its
log, then is added again.
``steps ROOT``: a new episode whose batch of steps fails to reach the step log; the
steps after it go on once the log can grow again.
"""

from __future__ import annotations

import resource
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.staging import StagedEpisode, staged_episode_dirs
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import WriterError
from ortf_ros.io.segment import whole_video
from ortf_ros.synthetic.demo_arm import DEPTH_CAMERA, RGB_CAMERAS, demo_action, demo_depth, demo_rgb, demo_state

STREAM = "wrist_ft"
BEFORE, FAILING = 1500, 2000  # samples added before the capped call, and in it
HZ = 1000


@contextmanager
def capped(size: int) -> Iterator[None]:
    """Files may not grow past ``size`` bytes inside the block."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))


def stage(root: Path, camera: str, cap: int) -> None:
    video = load_dataset(root).episode(0).video_path(camera)
    with DatasetWriter(root) as writer:
        writer.begin_episode("copy")
        with capped(cap):
            try:
                writer.add_encoded_video(camera, whole_video(video))
            except WriterError as exc:
                print(f"{type(exc).__name__}: {exc}")  # not a refusal, which a caller would answer by re-encoding
    # closed without end_episode: the episode stays staged, for the parent to look into


def expected_force(first: int, count: int) -> np.ndarray:
    index = np.arange(first, first + count, dtype=np.float64)
    return np.stack([index, -index, index / 7], axis=1)


def add(writer: DatasetWriter, first: int, count: int) -> None:
    """Samples ``first ..`` of the stream: times i / HZ, force (i, -i, i / 7), stamp_ns i."""
    times = np.arange(first, first + count) / HZ
    values = {"force": expected_force(first, count), "torque": np.zeros((count, 3))}
    writer.add_samples(STREAM, times, values, stamp_ns=list(range(first, first + count)))


def samples(root: Path) -> None:
    with DatasetWriter(root) as writer:
        writer.begin_episode("Hold the peg")
        add(writer, 0, BEFORE)  # one batch reaches the log, the rest waits
        log = StagedEpisode(staged_episode_dirs(root)[0]).stream_file(STREAM)
        with capped(log.stat().st_size * 5 // 2):  # room for one more batch, not for two
            try:
                add(writer, BEFORE, FAILING)
            except WriterError as exc:
                print(exc)
        add(writer, BEFORE, FAILING)  # the same samples again, now that they fit
        last = BEFORE + FAILING - 1
        images = {camera: demo_rgb(n, 0, 64, 48) for n, camera in enumerate(("cam_wrist", "cam_overhead"))}
        writer.add_step(last / HZ, demo_state(0, 0), demo_action(0, 0), images, samples={STREAM: last})
        writer.end_episode()


STEPS, STEP_BATCH = 20, 8


def steps(root: Path) -> None:
    with DatasetWriter(root, config=WriterConfig(step_batch=STEP_BATCH)) as writer:
        writer.begin_episode("pick")
        images = {camera: demo_rgb(n, 0, 64, 48) for n, camera in enumerate(RGB_CAMERAS)}
        images[DEPTH_CAMERA[0]] = demo_depth(0, 64, 48)
        writer.add_step(0.0, demo_state(0, 0), demo_action(0, 0), images)  # (the encoders start uncapped)
        log = StagedEpisode(staged_episode_dirs(root)[0]).steps_file
        with capped(log.stat().st_size):
            for step in range(1, STEP_BATCH):
                try:
                    writer.add_step(step / 30, demo_state(0, step), demo_action(0, step))
                except WriterError as exc:
                    print(exc)
        for step in range(STEP_BATCH, STEPS):
            writer.add_step(step / 30, demo_state(0, step), demo_action(0, step))
        writer.end_episode()


if __name__ == "__main__":
    scenario, root, *args = sys.argv[1:]
    if scenario == "stage":
        stage(Path(root), args[0], int(args[1]))
    elif scenario == "steps":
        steps(Path(root))
    else:
        samples(Path(root))
