"""``ortf-bag2ortf`` SIGKILLed mid-conversion: the episodes already in the dataset stay
byte-identical, a rerun says to recover instead of guessing, and ``ortf recover`` turns
what was staged into a valid episode whose steps are those of a clean conversion. Killed
with ``--jobs``, its workers follow it and the next run removes its scratch directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import psutil
import pytest

from dataset.test_crash import committed_files
from ortf_ros.cli.bag2ortf import SCRATCH_PREFIX
from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.recover import RECOVERED_NOTE
from ortf_ros.dataset.staging import StagedEpisode, staged_episode_dirs
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout
from ortf_ros.io.scratch import scratch_directory
from ortf_ros.pipeline.mapping import detect_mapping, write_mapping
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.synthetic.bag import TeleopBagInfo, write_teleop_bag

STAGED_STEPS_BEFORE_KILL = 30


def staged_steps(root: Path) -> int:
    """Steps the converter has logged so far (0 before its episode is staged)."""
    directories = staged_episode_dirs(root)
    if not directories or not StagedEpisode(directories[0]).steps_file.exists():
        return 0
    return sum(batch.num_rows for batch in StagedEpisode(directories[0]).read_steps())


def kill_mid_conversion(
    inputs: list[Path], output: Path, config: Path, jobs: int, ready: Callable[[], bool]
) -> list[psutil.Process]:
    """Start ``ortf-bag2ortf``, SIGKILL it once ``ready()``, and return the processes it had
    started (its workers), which the kill does not reach."""
    command = [sys.executable, "-m", "ortf_ros.cli.bag2ortf", *map(str, inputs), "-o", str(output)]
    command += ["--config", str(config), "--jobs", str(jobs)]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    deadline = time.monotonic() + 120
    while not ready() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    workers: list[psutil.Process] = psutil.Process(child.pid).children()
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=60) == -signal.SIGKILL, "the conversion ended before it could be killed"
    return workers


@dataclass(frozen=True)
class Recordings:
    first: TeleopBagInfo  # a short one
    long: TeleopBagInfo  # long enough to be killed while it converts
    config: Path


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Recordings:
    tmp = tmp_path_factory.mktemp("recordings")
    first = write_teleop_bag(tmp / "first", "mcap", duration_s=0.5)
    long = write_teleop_bag(tmp / "long", "mcap", duration_s=20.0)
    config = tmp / "mapping.yaml"
    with BagSource(long.path) as source:  # the 50 Hz command is up to 20 ms old at a step
        write_mapping(replace(detect_mapping(source.topics()), sync_tolerance_ms=25.0), config)
    return Recordings(first, long, config)


@pytest.mark.parametrize("resolution", ["rerun", "recover", "discard"])
def test_killed_conversion_loses_only_what_was_in_flight(
    recordings: Recordings, tmp_path: Path, resolution: str
) -> None:
    first, long, config = recordings.first, recordings.long, recordings.config
    output = tmp_path / "ds"
    assert bag2ortf([str(first.path), "-o", str(output), "--config", str(config)]) == 0
    committed = committed_files(output)

    kill_mid_conversion(
        [long.path], output, config, jobs=1, ready=lambda: staged_steps(output) >= STAGED_STEPS_BEFORE_KILL
    )
    assert committed_files(output) == committed  # nothing committed was touched
    assert validate(output).ok

    if resolution == "rerun":  # the same command again: the recording is converted anew, whole
        rerun = subprocess.run(
            [sys.executable, "-m", "ortf_ros.cli.bag2ortf", str(long.path), "-o", str(output), "--config", str(config)],
            capture_output=True,
            text=True,
            env=dict(os.environ),
        )
        assert rerun.returncode == 0, rerun.stderr
        assert f"{output}: a run was cut off; episode 000001: discarded" in rerun.stdout
        assert len(load_dataset(output)) == 2 and load_dataset(output).episode(1).record.length == 600
        assert validate(output, strict=True).ok
        return
    # Another recording's conversion does not guess what to do with it: the way out is said.
    rerun = subprocess.run(
        [sys.executable, "-m", "ortf_ros.cli.bag2ortf", str(first.path), "-o", str(output), "--config", str(config)],
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


def exited(process: psutil.Process) -> bool:
    """Gone, or a zombie (its files closed, its locks released) that no one reaped yet."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_killed_parallel_conversion_leaves_its_scratch_directory_to_the_next_run(
    recordings: Recordings, tmp_path: Path
) -> None:
    first, long, config = recordings.first, recordings.long, recordings.config
    output = tmp_path / "ds"
    assert bag2ortf([str(first.path), "-o", str(output), "--config", str(config)]) == 0
    committed = committed_files(output)
    inputs = [long.path, first.path]  # the long one first: nothing is imported before it is done

    def converting() -> bool:
        parts = tmp_path.glob(f"{SCRATCH_PREFIX}*/part-000000-*/dataset")
        return any(staged_steps(part) >= STAGED_STEPS_BEFORE_KILL for part in parts)

    workers = kill_mid_conversion(inputs, output, config, jobs=2, ready=converting)
    assert len(workers) >= 2  # the two workers (and whatever else the pool started)
    deadline = time.monotonic() + 60
    while not all(exited(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.01)
    survivors = [w for w in workers if not exited(w)]
    for worker in survivors:
        worker.kill()
    assert not survivors, "the workers outlived the conversion they worked for"
    (stale,) = tmp_path.glob(f"{SCRATCH_PREFIX}*")
    assert committed_files(output) == committed  # nothing was imported
    # The dataset's tools do not care about the directory beside it.
    assert validate(output, strict=True).ok
    assert ortf(["info", str(output)]) == 0

    with scratch_directory(tmp_path, SCRATCH_PREFIX) as live:  # another run's, still at work
        assert bag2ortf([*map(str, inputs), "-o", str(output), "--config", str(config), "--jobs", "2"]) == 0
        assert list(tmp_path.glob(f"{SCRATCH_PREFIX}*")) == [live]  # the dead run's is gone, the live one's kept
        assert not stale.exists()
    assert not list(tmp_path.glob(f"{SCRATCH_PREFIX}*"))
    report = validate(output, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    dataset = load_dataset(output)
    lengths = [e.length for e in dataset.episodes]
    assert lengths == [lengths[0], 600]  # the first was in the dataset already; the long one's 20 s at 30 steps/s
    sources = [e.source for e in dataset.episodes]
    assert [s.path if s else None for s in sources] == [str(first.path), str(long.path)]


def test_a_worker_killed_mid_conversion_is_one_line_and_the_dataset_is_untouched(
    recordings: Recordings, tmp_path: Path
) -> None:
    """As when the kernel's OOM killer picks a worker: no traceback, exit 1, nothing imported
    of the recordings in flight, and no scratch directory left behind."""
    first, long, config = recordings.first, recordings.long, recordings.config
    output = tmp_path / "ds"
    assert bag2ortf([str(first.path), "-o", str(output), "--config", str(config)]) == 0
    committed = committed_files(output)
    command = [sys.executable, "-m", "ortf_ros.cli.bag2ortf", str(long.path), str(first.path), "-o", str(output)]
    command += ["--config", str(config), "--jobs", "2"]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    part = None
    deadline = time.monotonic() + 120
    while child.poll() is None and time.monotonic() < deadline:
        part = next(iter(tmp_path.glob(f"{SCRATCH_PREFIX}*/part-000000-*/dataset")), None)
        if part is not None and staged_steps(part) >= STAGED_STEPS_BEFORE_KILL:
            break
        time.sleep(0.005)
    assert part is not None and child.poll() is None, "the conversion ended before a worker could be killed"
    [steps_log] = (part / layout.STAGING_DIR).glob("*/steps.arrows")
    [worker] = [
        w for w in psutil.Process(child.pid).children() if any(Path(f.path) == steps_log for f in w.open_files())
    ]
    worker.send_signal(signal.SIGKILL)
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == 1, stderr
    assert stderr == (
        "ortf-bag2ortf: a worker process ended abruptly (killed, perhaps for lack of memory: BrokenProcessPool: "
        "A process in the process pool was terminated abruptly while the future was running or pending) while "
        f"converting {long.path} or a recording after it: those are not in the dataset; the recordings before "
        "them are, and running the same command again converts the rest\n"
    )
    assert committed_files(output) == committed
    assert not list(tmp_path.glob(f"{SCRATCH_PREFIX}*"))
