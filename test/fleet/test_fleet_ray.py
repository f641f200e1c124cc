"""``ortf-bag2ortf --ray`` on a local Ray cluster the module starts (two CPUs, no dashboard,
bound to loopback) and stops: the dataset it gives equals the in-place conversion's; a
worker killed mid-task is retried and leaves nothing behind; a driver killed midway,
then the same command again, converts only the rest and gives the same dataset; ``--again``
converts held and deleted recordings anew (test_again: in place and with --jobs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cli.test_bag2ortf_crash import staged_steps
from ortf_ros.cli.bag2ortf import SCRATCH_PREFIX
from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.dataset.edits import delete_episodes
from ortf_ros.dataset.validation import validate
from ortf_ros.fleet.task import ATTEMPT_FILE, DATASET_DIR
from ortf_ros.format import layout
from ortf_ros.synthetic.bag import write_teleop_bag
from support.fleet_data import Fleet, converted_in_place, dataset_digest, make_fleet

LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A Ray cluster of this machine; its address, for commands run as a user runs them."""
    saved = {name: os.environ.get(name) for name in LOOPBACK_ONLY}
    os.environ.update(LOOPBACK_ONLY)  # (inherited by Ray's processes and by the commands)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        address: str = ray.get_runtime_context().gcs_address
        assert address.startswith("127.0.0.1:"), address
        yield address
    finally:
        ray.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return make_fleet(tmp_path_factory.mktemp("fleet"), 6)


@pytest.fixture(scope="module")
def in_place(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    return converted_in_place(fleet, tmp_path_factory.mktemp("in_place") / "ds")


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ortf_ros.cli.bag2ortf", *args]


def episodes_in(root: Path) -> int:
    try:
        return int(pq.read_metadata(root / layout.EPISODES).num_rows)
    except (OSError, ValueError):  # not made yet, or being replaced this instant
        return 0


def test_six_recordings_on_ray_give_the_in_place_dataset(
    cluster: str, fleet: Fleet, in_place: dict[str, object], tmp_path: Path
) -> None:
    output = tmp_path / "ds"
    assert bag2ortf([*fleet.paths(), "-o", str(output), "--config", str(fleet.mapping), "--ray"]) == 0
    report = validate(output, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    assert dataset_digest(output) == in_place
    assert not list(tmp_path.glob(f"{SCRATCH_PREFIX}*"))


def test_a_worker_killed_mid_task_is_retried_and_the_dataset_is_complete(
    cluster: str, fleet: Fleet, tmp_path: Path
) -> None:
    long = write_teleop_bag(tmp_path / "long", "mcap", duration_s=8.0)
    inputs = [str(long.path), *fleet.paths()[:2]]
    output = tmp_path / "ds"
    child = subprocess.Popen(
        command(*inputs, "-o", str(output), "--config", str(fleet.mapping), "--ray", cluster),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and child.poll() is None and time.monotonic() < deadline:
        for attempt in tmp_path.glob(f"{SCRATCH_PREFIX}*/part-000000-*"):
            if (attempt / ATTEMPT_FILE).is_file() and staged_steps(attempt / DATASET_DIR) >= 30:
                killed = int(json.loads((attempt / ATTEMPT_FILE).read_text())["pid"])
                os.kill(killed, signal.SIGKILL)  # as the OOM killer would
                break
        time.sleep(0.01)
    out, err = child.communicate(timeout=300)
    assert killed is not None, f"the long recording was converted before its worker could be killed: {out}{err}"
    assert child.returncode == 0, err
    assert "3 recordings: 3 converted" in out
    report = validate(output, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    digest = dataset_digest(output)
    assert digest["episodes"][0]["record"][2] == 240  # the long one whole: 8 s at 30 steps/s
    assert not list(tmp_path.glob(f"{SCRATCH_PREFIX}*"))  # the dead attempt's directory too


def test_a_driver_killed_midway_then_run_again_converts_only_the_rest(
    cluster: str, fleet: Fleet, in_place: dict[str, object], tmp_path: Path
) -> None:
    output = tmp_path / "ds"
    args = command(*fleet.paths(), "-o", str(output), "--config", str(fleet.mapping), "--ray", cluster)
    driver = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while episodes_in(output) < 2 and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    driver.send_signal(signal.SIGKILL)
    assert driver.wait(timeout=60) == -signal.SIGKILL, "the run ended before its driver could be killed"
    done = episodes_in(output)
    assert 2 <= done < 6
    rerun = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.count("skipped: already in the dataset") >= done
    assert f"6 recordings: {6 - rerun.stdout.count('skipped: already')} converted" in rerun.stdout
    report = validate(output, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    assert dataset_digest(output) == in_place
    assert not list(tmp_path.glob(f"{SCRATCH_PREFIX}*"))


def test_again_on_ray_adds_new_episodes_beside_the_older_ones(
    cluster: str, fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "ds"
    args = [*fleet.paths()[:2], "-o", str(output), "--config", str(fleet.mapping), "--ray"]
    assert bag2ortf(args) == 0
    delete_episodes(output, ["000001"])
    capsys.readouterr()
    assert bag2ortf([*args, "--again", "--json"]) == 0
    outcomes = json.loads(capsys.readouterr().out)["recordings"]
    assert [(o["episodes"], o["converted_again"]) for o in outcomes] == [
        (["000002"], {"older_episodes": ["000000"], "deleted_episodes": []}),
        (["000003"], {"older_episodes": [], "deleted_episodes": ["000001"]}),
    ]
    report = validate(output, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    assert not list(tmp_path.glob(f"{SCRATCH_PREFIX}*"))
