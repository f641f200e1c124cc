"""``ortf demo``'s live part: the scene over loopback DDS, two episodes recorded through
ortf_recorder's services with their labels, a strictly valid dataset, no child left."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.ros.live_demo import FAILURE, NOTES, TASK

SMALL_OFFLINE = ("--episodes", "1", "--seconds", "0.5", "--width", "64", "--height", "48")


def ortf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ortf_ros.cli.ortf", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=240,
    )


@pytest.mark.ros  # (in the child: `ortf demo`'s live part)
def test_demo_records_two_labelled_episodes_live(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = ortf("demo", str(out), *SMALL_OFFLINE)
    assert result.returncode == 0, result.stdout + result.stderr
    text = result.stdout
    for line in (
        "start_episode: recording episode 000000: 'Pick up the peg'",
        "set_success(true): success: True (episode 000000)",
        "stop_episode: committed episode 000000",
        "set_success(false): success: False (episode 000001)",
        "stop_episode: committed episode 000001",
        "SIGINT -> ortf_recorder exited 0",
        f"ortf validate --strict {out / 'live'}: valid (strict)",
        "50.0% (1 succeeded, 1 failed, 0 not evaluated)",
    ):
        assert line in text, text
    assert "Traceback" not in result.stderr, result.stderr
    root = out / "live"
    report = validate(root, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    dataset = load_dataset(root)
    records = [dataset.episode(i).record for i in range(len(dataset.episodes))]
    assert [r.success for r in records] == [True, False]
    assert [r.operator_notes for r in records] == [NOTES, None]
    assert [r.failure_reason for r in records] == [None, FAILURE]
    assert [dataset.episode(i).task.instruction for i in range(2)] == [TASK, TASK]
    assert all(r.duration_seconds > 2.0 for r in records)
    assert {p.name for p in (out / "live-logs").iterdir()} >= {"recorder.log", "scene_publisher.log", "scene.json"}
    for pid in re.findall(r"\(pid (\d+)\)", text):  # the publisher and the recorder are gone
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text(), pid


def test_no_live_skips_it(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = ortf("demo", str(out), *SMALL_OFFLINE, "--no-live")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "live recording" not in result.stdout and not (out / "live").exists()


def test_without_ros_the_live_part_is_one_line_and_exit_0(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    program = (
        "import sys; sys.modules['rclpy'] = None; from ortf_ros.ros.live_demo import main; sys.exit(main(sys.argv[1:]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", program, str(out)], capture_output=True, text=True, env=dict(os.environ), timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1 and "needs ROS 2 (rclpy is not importable)" in lines[0], result.stdout
    assert not result.stderr and not out.exists()
