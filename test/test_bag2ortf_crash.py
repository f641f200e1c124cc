"""``ortf-bag2ortf`` SIGKILLed mid-conversion: the episodes already in the dataset stay
byte-identical, a rerun says to recover instead of guessing, and ``ortf recover`` turns
what was staged into a valid episode whose steps are those of a clean conversion."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_crash import committed_files

from ortf_ros.bag2ortf import main as bag2ortf
from ortf_ros.cli import main as ortf
from ortf_ros.format import layout
from ortf_ros.pipeline.config import auto_config, write_config
from ortf_ros.pipeline.source import BagSource
from ortf_ros.reader import load_dataset
from ortf_ros.recover import RECOVERED_NOTE
from ortf_ros.staging import StagedEpisode, staged_episode_dirs
from ortf_ros.synthetic_bag import write_teleop_bag
from ortf_ros.validation import validate

STAGED_STEPS_BEFORE_KILL = 30


def staged_steps(root: Path) -> int:
    """Steps the converter has logged so far (0 before its episode is staged)."""
    directories = staged_episode_dirs(root)
    if not directories or not StagedEpisode(directories[0]).steps_file.exists():
        return 0
    return sum(batch.num_rows for batch in StagedEpisode(directories[0]).read_steps())


def kill_mid_conversion(bag: Path, output: Path, config: Path) -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ortf_ros.bag2ortf",
            str(bag),
            "-o",
            str(output),
            "--config",
            str(config),
            "--jobs",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    deadline = time.monotonic() + 120
    while staged_steps(output) < STAGED_STEPS_BEFORE_KILL and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=60) == -signal.SIGKILL, "the conversion ended before it could be killed"


@pytest.mark.parametrize("resolution", ["recover", "discard"])
def test_killed_conversion_loses_only_what_was_in_flight(tmp_path: Path, resolution: str) -> None:
    first = write_teleop_bag(tmp_path / "first", "mcap", duration_s=0.5)
    long = write_teleop_bag(tmp_path / "long", "mcap", duration_s=20.0)  # several seconds to convert
    config = tmp_path / "mapping.yaml"
    with BagSource(long.path) as source:  # the 50 Hz command is up to 20 ms old at a step
        write_config(replace(auto_config(source.topics()), sync_tolerance_ms=25.0), config)
    output = tmp_path / "ds"
    assert bag2ortf([str(first.path), "-o", str(output), "--config", str(config)]) == 0
    committed = committed_files(output)

    kill_mid_conversion(long.path, output, config)
    assert committed_files(output) == committed  # nothing committed was touched
    assert validate(output).ok

    rerun = subprocess.run(
        [sys.executable, "-m", "ortf_ros.bag2ortf", str(long.path), "-o", str(output), "--config", str(config)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert rerun.returncode != 0 and "Traceback" not in rerun.stderr
    assert f"ortf recover {output}" in rerun.stderr  # the way out, not a silent overwrite
    assert committed_files(output) == committed

    if resolution == "discard":
        assert ortf(["recover", str(output), "--discard"]) == 0
        assert committed_files(output) == committed
        assert len(load_dataset(output)) == 1
        return
    assert ortf(["recover", str(output)]) == 0
    report = validate(output, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    recovered = load_dataset(output).episode(1)
    assert recovered.record.operator_notes == RECOVERED_NOTE
    assert recovered.record.length > 0  # the steps whose frames were flushed before the kill

    # The steps that survived are the first steps of an uninterrupted conversion, unchanged.
    assert bag2ortf([str(long.path), "-o", str(tmp_path / "clean"), "--config", str(config)]) == 0
    clean = load_dataset(tmp_path / "clean").episode(0)
    length = recovered.record.length
    for column in ("observation.state.joint_positions", "action", "timestamp"):
        np.testing.assert_array_equal(recovered.array(column), clean.array(column)[:length])
    for camera in ("wrist_camera", "depth_camera"):
        frame_indices = recovered.array(layout.image_column(camera))
        np.testing.assert_array_equal(frame_indices, clean.array(layout.image_column(camera))[:length])
        last = int(frame_indices[-1])
        np.testing.assert_array_equal(recovered.frame(camera, last), clean.frame(camera, last))
