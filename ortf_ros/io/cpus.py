"""How many CPUs this process can keep busy: what sizes encoder threads and ``--jobs``.

``os.cpu_count()`` counts the host's CPUs. A container started with ``--cpus 2`` on a
32-core host may run on all 32 but gets two CPUs' worth of time (a cgroup CPU quota), and
sizing by 32 oversubscribes it sixteen-fold. So the count is this process's CPU affinity,
capped by the tightest quota of its cgroup and the cgroups above it (v2 ``cpu.max``, or
v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), rounded up.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

PROC_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cpus(proc_cgroup: Path = PROC_CGROUP, cgroup_root: Path = CGROUP_ROOT) -> int:
    """This process's CPU affinity, capped by its cgroup CPU quota; at least 1."""
    cpus = len(os.sched_getaffinity(0))
    quota = cgroup_cpu_quota(proc_cgroup, cgroup_root)
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)


def cgroup_cpu_quota(proc_cgroup: Path = PROC_CGROUP, cgroup_root: Path = CGROUP_ROOT) -> float | None:
    """The CPUs' worth of time the process's cgroups allow (1.5: one and a half), or None
    when none of them sets a quota (or the files cannot be read)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if not controllers and (cgroup_root / "cgroup.controllers").exists():  # v2, the unified hierarchy
            limits += [_v2_limit(directory) for directory in _upwards(cgroup_root, path)]
        elif "cpu" in controllers.split(","):  # v1: the hierarchy is mounted under the controllers' names
            limits += [_v1_limit(directory) for directory in _upwards(cgroup_root / controllers, path)]
    found = [limit for limit in limits if limit is not None]
    return min(found) if found else None


def _upwards(mount: Path, path: str) -> list[Path]:
    """The cgroup's directory and those of its ancestors up to the mount point."""
    parts = [part for part in path.split("/") if part]
    return [mount.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]


def _v2_limit(directory: Path) -> float | None:
    """``cpu.max`` holds "QUOTA PERIOD" in microseconds, or "max PERIOD" for no limit."""
    try:
        quota, period = (directory / "cpu.max").read_text().split()
    except (OSError, ValueError):
        return None
    return None if quota == "max" else _ratio(quota, period)


def _v1_limit(directory: Path) -> float | None:
    """``cpu.cfs_quota_us`` is -1 for no limit."""
    try:
        quota = (directory / "cpu.cfs_quota_us").read_text().strip()
        period = (directory / "cpu.cfs_period_us").read_text().strip()
    except OSError:
        return None
    return None if quota.startswith("-") else _ratio(quota, period)


def _ratio(quota: str, period: str) -> float | None:
    try:
        value = int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None
    return value if value > 0 else None
