"""The console scripts stopped midway, as a user stops them: Ctrl-C (SIGINT to the whole
process group, as a terminal sends it) and SIGTERM (to the command alone, as ``timeout``
or a job scheduler sends it), while ``ortf-bag2ortf`` converts with ``--jobs`` and
``--ray`` (while its workers or its Ray instance start, and while they convert), and
while ``ortf`` exports and imports (while an episode is written, and committed).

Each must end quietly with the README's code (130, 143: 128 + the signal), no traceback
(nor any worker's), none of the processes it started still running (workers, encoder
processes, Ray's servers: found by a mark in the environment they inherit), and nothing
left beside its output: no scratch directory, no lock file, no half dataset, the inputs
as they were.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ortf_ros.cli.bag2ortf import SCRATCH_PREFIX
from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.dataset.staging import COMMIT_FILE, staged_episode_dirs
from ortf_ros.synthetic.bag import write_teleop_bag

BIN = Path(sys.executable).parent
TIMEOUT_S = 120
GONE_WITHIN_S = 20  # what a stopped command started has this long to exit after it
RAY_GONE_WITHIN_S = 120  # Ray's agents, when stopped while Ray starts, see their raylet gone by polling (~1 min)
MARK = "ORTF_STOP_SIGNAL_TEST"
Ready = Callable[[Path, str], bool]


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and modification time."""
    return {
        str(p.relative_to(root)): (0 if p.is_dir() else p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two recordings, the dataset of one, and its LeRobot export."""
    root = tmp_path_factory.mktemp("stop-inputs")
    for name in ("a", "b"):
        write_teleop_bag(root / name, "mcap", duration_s=8.0, width=64, height=48)
    assert bag2ortf([str(root / "a"), "-o", str(root / "dataset"), "--json"]) == 0
    assert ortf(["export", "lerobot", str(root / "dataset"), str(root / "lerobot")]) == 0
    return root


def _staging_in(pattern: str, file: str = "") -> Ready:
    """Ready once an episode is being written (``file``: has that file) in a directory
    matching ``pattern`` under the case's directory."""
    return lambda work, _: any((e / file).exists() for d in work.glob(pattern) for e in staged_episode_dirs(d))


def _exists(pattern: str) -> Ready:
    return lambda work, _: any(work.glob(pattern))


def _workers_importing(work: Path, mark: str) -> bool:
    """Ready once a worker process is importing what it needs (numpy loaded; the rest
    takes a second more): a worker stopped there printed the import's traceback."""
    for line in _processes_marked(mark):
        if "multiprocessing.spawn" in line:
            with contextlib.suppress(OSError):
                if "_multiarray_umath" in Path(f"/proc/{line.split()[0]}/maps").read_text():
                    return True
    return False


def _ray_starting(work: Path, mark: str) -> bool:
    """Ready once the Ray instance of the command is starting (its raylet has been started)."""
    return any("/raylet" in line.split(" ", 2)[1] for line in _processes_marked(mark))


@dataclass(frozen=True)
class Stop:
    """``script ARGS`` (``{in}``: the inputs' directory), stopped once ``ready(work, mark)``."""

    name: str
    script: str
    args: tuple[str, ...]
    ready: Ready


JOBS = ("{in}/a", "{in}/b", "-o", "out", "--jobs", "2")
RAY = ("{in}/a", "{in}/b", "-o", "out", "--ray")
CONVERTING_IN_SCRATCH = _staging_in(f"{SCRATCH_PREFIX}*/part-*/dataset")
IMPORT = ("import", "lerobot", "{in}/lerobot", "out")
STOPS = [
    Stop("jobs-importing", "ortf-bag2ortf", JOBS, _workers_importing),
    Stop("jobs-converting", "ortf-bag2ortf", JOBS, CONVERTING_IN_SCRATCH),
    Stop("ray-starting", "ortf-bag2ortf", RAY, _ray_starting),
    Stop("ray-converting", "ortf-bag2ortf", RAY, CONVERTING_IN_SCRATCH),
    Stop("export-lerobot", "ortf", ("export", "lerobot", "{in}/dataset", "out"), _exists(".out.export-*/export/*")),
    Stop("export-mixtrain", "ortf", ("export", "mixtrain", "{in}/dataset", "out"), _exists(".out.export-*/export")),
    Stop("export-mcap", "ortf", ("export", "mcap", "{in}/dataset", "out.mcap"), _exists(".out.mcap.export-*/export")),
    Stop("import-writing", "ortf", IMPORT, _staging_in(".out.export-*/export")),
    Stop("import-committing", "ortf", IMPORT, _staging_in(".out.export-*/export", COMMIT_FILE)),
]


def _processes_marked(mark: str) -> list[str]:
    """The live processes whose environment holds ``MARK=mark`` (zombies are gone: only
    their exit status waits for a parent, which may be an init that does not reap)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if f"{MARK}={mark}".encode() not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if state != "Z":
            found.append(f"{entry.name} {command[:120]}")
    return found


def _kill_marked(mark: str) -> None:
    for line in _processes_marked(mark):
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except OSError:
            continue


def _cases() -> list[Any]:
    cases: list[Any] = []
    for stop in STOPS:
        for signum in (signal.SIGINT, signal.SIGTERM):
            marks = [pytest.mark.ray] if stop.name.startswith("ray") else []
            cases.append(pytest.param(stop, signum, marks=marks, id=f"{stop.name}-{signal.Signals(signum).name}"))
    return cases


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("stop", "signum"), _cases())
def test_a_stopped_command_exits_quietly_and_leaves_nothing(
    inputs: Path, tmp_path: Path, stop: Stop, signum: signal.Signals
) -> None:
    before = snapshot(inputs)
    mark = uuid.uuid4().hex
    environment = {**os.environ, MARK: mark}
    environment.pop("PYTHONUNBUFFERED", None)  # (as a user runs it)
    command = [str(BIN / stop.script), *(arg.format(**{"in": inputs}) for arg in stop.args)]
    child = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a process group of its own, as a terminal's foreground job
    )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not stop.ready(tmp_path, mark) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        assert child.poll() is None, f"ended before it could be stopped: {child.stderr and child.stderr.read()!r}"
        if signum == signal.SIGINT:
            os.killpg(child.pid, signum)  # Ctrl-C: the whole process group
        else:
            child.send_signal(signum)
        _, err = child.communicate(timeout=TIMEOUT_S)
        deadline = time.monotonic() + (RAY_GONE_WITHIN_S if stop.name.startswith("ray") else GONE_WITHIN_S)
        while _processes_marked(mark) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _processes_marked(mark)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        _kill_marked(mark)
    text = err.decode(errors="replace")
    assert child.returncode == 128 + signum, text
    assert text == "", text  # quiet, as git is on Ctrl-C: no traceback, no worker's
    assert left == [], "still running"
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "left behind"
    assert snapshot(inputs) == before


FINALIZER_TAKES_THE_SIGNAL = """
import os, signal, sys, time
from ortf_ros.cli.boundary import run_guarded

class Finalized:
    def __del__(self):
        os.kill(os.getpid(), {signum})
        for _ in range(100_000):  # the handler runs in this loop, and its exception is Python's to ignore
            pass

def run():
    Finalized()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the command's work goes on
        time.sleep(0.01)
    return 0

sys.exit(run_guarded("probe", run))
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_taken_in_a_finalizer_still_stops_the_command(signum: signal.Signals) -> None:
    """Python reports an exception raised in a finalizer or a weakref callback and goes on;
    a stop raised there (it happened during a conversion's import of a module) is not lost."""
    done = subprocess.run(
        [sys.executable, "-c", FINALIZER_TAKES_THE_SIGNAL.format(signum=int(signum))],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert (done.returncode, done.stderr) == (128 + signum, "")
