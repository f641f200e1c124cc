"""``usable_cpus``: the affinity capped by a cgroup CPU quota, read from cgroup trees laid
out as the kernel mounts them (v2 unified, v1 per controller)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ortf_ros.io.cpus import cgroup_cpu_quota, usable_cpus


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_v2_takes_the_tightest_quota_of_the_cgroup_and_its_ancestors(tmp_path: Path) -> None:
    proc, root = tmp_path / "cgroup", tmp_path / "fs"
    write(proc, "0::/system.slice/docker-1.scope\n")
    write(root / "cgroup.controllers", "cpu memory\n")
    write(root / "system.slice" / "docker-1.scope" / "cpu.max", "max 100000\n")
    write(root / "system.slice" / "cpu.max", "150000 100000\n")  # 1.5 CPUs for the slice
    assert cgroup_cpu_quota(proc, root) == 1.5
    assert usable_cpus(proc, root) == min(len(os.sched_getaffinity(0)), 2)


def test_v1_reads_the_cpu_controllers_hierarchy(tmp_path: Path) -> None:
    proc, root = tmp_path / "cgroup", tmp_path / "fs"
    write(proc, "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n")
    cgroup = root / "cpu,cpuacct" / "docker" / "abc"
    write(cgroup / "cpu.cfs_quota_us", "50000\n")
    write(cgroup / "cpu.cfs_period_us", "100000\n")
    write(root / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")
    write(root / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_quota(proc, root) == 0.5
    assert usable_cpus(proc, root) == 1  # half a CPU still runs one thread


@pytest.mark.parametrize(
    "cgroup",
    [
        "0::/\n",  # v2 without a limit anywhere
        "1:cpu:/\n",  # v1 with quota -1
        "garbage\n",  # unreadable lines are skipped
    ],
)
def test_without_a_quota_the_affinity_counts(tmp_path: Path, cgroup: str) -> None:
    proc, root = tmp_path / "cgroup", tmp_path / "fs"
    write(proc, cgroup)
    write(root / "cgroup.controllers", "cpu\n")
    write(root / "cpu.max", "max 100000\n")
    write(root / "cpu" / "cpu.cfs_quota_us", "-1\n")
    write(root / "cpu" / "cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_quota(proc, root) is None
    assert usable_cpus(proc, root) == len(os.sched_getaffinity(0))


def test_no_cgroup_files_at_all(tmp_path: Path) -> None:
    assert cgroup_cpu_quota(tmp_path / "missing", tmp_path) is None
    assert usable_cpus(tmp_path / "missing", tmp_path) == len(os.sched_getaffinity(0))
