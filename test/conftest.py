"""Shared fixtures. DDS traffic stays on this machine: every rclpy process the tests
start (this one included) runs with LOCALHOST discovery and a domain of its own.

A test module that needs what this interpreter lacks (ROS 2, an optional extra: see
support/needs.py) is skipped with one line naming it, before it is imported; its tests carry
the need's marker (``-m ros``: the tests that need ROS 2).

The folders mirror ortf_ros's rooms (dataset/, pipeline/ with mapping/, sources/ and
streams/, playback/, convert/, cli/, ros/, fleet/, quality/, review/, synthetic/, io/), plus
install/ (how the package ships: wheel, rosdep, colcon, import rules) and support/ (helpers,
child scripts, shared recordings). This folder is on sys.path (pyproject's ``pythonpath``),
and each folder is a package named from here: ``from support.fleet_data import ...``,
``from dataset.test_append import LEGACY``. Not io/: a package named ``io`` would be
Python's own, so io/ is a plain folder whose modules pytest imports by their file names,
which must stay unique (no other module imports them)."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from pathlib import Path

import pytest

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_DOMAIN_ID"] = str(20 + os.getpid() % 80)
os.environ.pop("ROS_LOCALHOST_ONLY", None)
os.environ.setdefault("ROS_LOG_DIR", str(Path(tempfile.gettempdir()) / "ortf_ros-test-ros-log"))

# The commands the tests start get Ctrl-C as from a terminal. A shell without job control
# starts a background job (``make test &``, ``nohup ... &``) with SIGINT ignored, which
# every child inherits: a command then rightly ignores Ctrl-C, and the tests that stop
# one with it (test_stop_signals, test_review's server) would see it run on.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from collections.abc import Callable

from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.synthetic.dataset import write_demo_dataset
from support import needs


class _SkippedModule(pytest.Module):
    """A test module whose imports this interpreter lacks: one skip, nothing imported."""

    reason = ""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        pytest.skip(self.reason, allow_module_level=True)


def pytest_configure(config: pytest.Config) -> None:
    for marker in needs.MARKERS:
        config.addinivalue_line("markers", f"{marker}: the test needs an optional dependency (test/support/needs.py)")


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if not module_path.name.startswith("test_"):
        return None
    lacking = needs.missing(needs.module_needs(module_path))
    if not lacking:
        return None
    module = _SkippedModule.from_parent(parent, path=module_path)
    module.reason = f"{module_path.name}: " + "; ".join(need.line() for need in lacking)
    return module


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for marker in needs.markers(needs.module_needs(item.path)):
            item.add_marker(marker)
        marked = tuple(needs.MARKER_ROOT[m.name] for m in item.iter_markers() if m.name in needs.MARKER_ROOT)
        lacking = needs.missing(marked)
        if lacking:
            item.add_marker(pytest.mark.skip(reason="; ".join(need.line() for need in lacking)))


@pytest.fixture
def small_dataset(tmp_path: Path) -> tuple[Path, list[EpisodeRecord]]:
    """Three small episodes (two RGB cameras and depth); the third one failed."""
    root = tmp_path / "ds"
    records = write_demo_dataset(root, episodes=3, steps=12, width=64, height=48)
    return root, records


@pytest.fixture(scope="session")
def announce(pytestconfig: pytest.Config) -> Callable[[str], None]:
    """Say a line on the terminal now, past pytest's capture: for a fixture that works for
    minutes the first time (building an environment), so the run does not look hung."""

    def say(line: str) -> None:
        capture = pytestconfig.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            print(f"\n[ortf_ros tests] {line}", flush=True)

    return say
