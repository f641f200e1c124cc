"""A forked child (a DataLoader worker) and the videos its parent left open or dropped."""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

import numpy as np

from ortf_ros.dataset.reader import load_dataset
from ortf_ros.io.video import VideoReader
from ortf_ros.synthetic.dataset import write_demo_dataset


def test_a_forked_child_never_collects_a_video_its_parent_dropped_unclosed(tmp_path: Path) -> None:
    """A dropped VideoReader's container is a reference cycle that waits for the collector;
    collected in a forked child, its destructor would join decoder threads that exist only in
    the parent, and the child would hang (``io.video._inherit_without_collecting``)."""
    write_demo_dataset(tmp_path / "ds", episodes=1, steps=30, width=640, height=480, depth=False)
    dataset = load_dataset(tmp_path / "ds")
    path = dataset.root / str(dataset.episodes[0].video_files["cam_wrist"])
    gc.disable()  # the parent must not collect it first
    try:
        reader = VideoReader(path, "rgb")
        first = reader.read(12)
        del reader  # dropped without close(): garbage in a cycle, with the decoder's threads
        child = os.fork()
        if child == 0:  # the child: collect everything, then read as a worker does
            try:
                gc.enable()
                gc.collect()
                again = VideoReader(path, "rgb").read(12, channels_first=True)
                os._exit(0 if np.array_equal(again, first.transpose(2, 0, 1)) else 3)
            finally:
                os._exit(4)
    finally:
        gc.enable()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.1)
    os.kill(child, 9)
    os.waitpid(child, 0)
    raise AssertionError("the forked child hung collecting its parent's video")
