"""README's "Install in a ROS 2 workspace", followed as far as this machine allows.

Why: a ROS user installs ortf_ros into a colcon workspace over an apt-installed ROS 2 (Jazzy
on Ubuntu 24.04, Humble on 22.04), where PEP 668 forbids pip into the system Python. The
README's answer is a chain of claims no other test follows end to end:

- `rosdep install`, with a venv made with ``--system-site-packages`` active and
  ``--as-root pip:false``, installs package.xml's pip keys (rosdep/ortf_ros.yaml registered as
  the README says) into that venv and nothing into the system, whose ROS (rclpy) and apt
  packages (numpy, OpenCV, PyYAML, rich) the venv keeps seeing;
- rosdep/pip-constraints.txt (PIP_CONSTRAINT) keeps what pip picks working with the system's
  numpy 1.x, which ROS 2's own C extensions are built against (the newest pyarrow needs numpy 2);
  on 22.04 a newer rich goes into the venv too (apt's 11.2 is too old for `ortf`);
- ``python -m colcon build`` run by the venv's interpreter gives the installed nodes that
  interpreter in their shebang (colcon runs ``setup.py`` with ``sys.executable``, and setuptools
  writes that path into the console scripts), where a plain ``colcon`` gives them the system
  python, which has no pyarrow;
- the recorder then runs from ``install/`` with only the two setup.bash files sourced, and
  records an episode that validates and reads back as published.

There is no apt ROS 2 here. scripts/setup-env.sh with ROS_LAYOUT=system builds the stand-in:
a copy of CPython with the ROS 2 Jazzy wheels in its own site-packages and a setup.bash (the
/opt/ros/<distro> of a user), for the Python version of this run (3.12 is Jazzy's on 24.04,
3.10 Humble's on 22.04). pip into that copy stands for apt, at the versions Ubuntu ships;
rosdep is the real one, against a copy of ros/rosdistro; `ros2 launch`/`ros2 run` (no ros2cli
on PyPI) are replaced by what they run: the installed executable with the installed parameter
file and the launch file's overrides.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import rclpy
import yaml
from packaging.requirements import Requirement

from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout
from ortf_ros.synthetic.motion import FINGERS_ONLY_EVERY, joint_positions
from ortf_ros.synthetic.robot import JOINTS
from ortf_ros.synthetic.schedule import seconds
from support.colcon_workspace import PACKAGE, RECORDER_NODE, RECORDER_PARAMS, Workspace
from support.recorder_ros import Scene, record_one_episode

REPO = Path(__file__).resolve().parents[2]
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
INSTALL = REPO / ".cache" / "ros-install" / f"jazzy-py{PY}"
"""The stand-in ROS install of this run's Python version (what /opt/ros/<distro> is to a user)."""
ROSDISTRO = REPO.parent / "shared" / "rosdistro"
OWN_RULES = REPO / "rosdep" / "ortf_ros.yaml"
PIP_CONSTRAINTS = REPO / "rosdep" / "pip-constraints.txt"
"""What pip may install into the venv beside the system's numpy 1.x (README: PIP_CONSTRAINT)."""
# The first test builds the stand-in install (3-5 minutes), once per Python version.
pytestmark = pytest.mark.timeout(1800)

APT: dict[str, tuple[str, str]] = {
    "python3-numpy": ("numpy", "numpy"),
    "python3-opencv": ("opencv-python-headless", "cv2"),
    "python3-yaml": ("pyyaml", "yaml"),
    "python3-rich": ("rich", "rich"),
}
"""package.xml's exec keys that `rosdep install` installs with apt (Ubuntu's python3-*): the PyPI
project pip installs into the stand-in in its place (the apt part of `rosdep install`), and the
module it gives."""
UBUNTU: dict[str, tuple[str, dict[str, str]]] = {
    "3.12": ("noble", {"numpy": "1.26.4", "opencv-python-headless": "4.6.0.66", "pyyaml": "6.0.1", "rich": "13.7.1"}),
    "3.10": ("jammy", {"numpy": "1.21.5", "opencv-python-headless": "4.5.4.60", "pyyaml": "5.4.1", "rich": "11.2.0"}),
}
"""The Ubuntu release whose system Python a Python version is (24.04: Jazzy, 22.04: Humble), and
the versions its apt packages have there: what the venv sees through --system-site-packages."""
CODENAME, APT_VERSIONS = UBUNTU.get(PY, ("noble", {}))
VENV_EXTRAS: dict[str, tuple[str, ...]] = {"jammy": ("rich>=13",)}
"""What the README has pip add to the venv after rosdep, on an Ubuntu release whose apt package is
too old: 22.04's python3-rich 11.2 lacks what `ortf` imports (MofNCompleteColumn, rich 12)."""
APT_TOOLS = ("rosdep",)
"""What else a ROS install from apt has that the steps use: python3-rosdep (colcon is there already)."""
# Inherited from this process's own ROS and venv; a user's shell has none of them before sourcing.
NOT_INHERITED = {
    "AMENT_PREFIX_PATH",
    "CMAKE_PREFIX_PATH",
    "COLCON_PREFIX_PATH",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "_ROS_WHEELS_BOOTSTRAP_COMPLETE",
    "ROS_DISTRO",
    "ROS_VERSION",
    "ROS_PYTHON_VERSION",
    "ROS_HOME",
}
TASK = "pick up the cube"
MAPPING = {
    "step": {"rate_hz": 30.0},
    "cameras": {
        "wrist_camera": {
            "topic": "/wrist_camera/image_raw",
            "kind": "rgb",
            "camera_info_topic": "/wrist_camera/camera_info",
        }
    },
    "joint_states": {"topic": "/joint_states", "native": True},
    "action": {"topic": None},
    "tf_topics": [],
    "tf_static_topics": [],
    "labels": {"task": TASK},
}
"""The recorder's topic mapping: the scene's joint states and one camera."""
EPISODE_S = 1.5


def login_environment() -> dict[str, str]:
    """A user's shell before anything is sourced: this process's environment (its DDS settings:
    LOCALHOST discovery, a domain of its own, ROS_LOG_DIR) less what its own ROS and venv add."""
    env = {key: value for key, value in os.environ.items() if key not in NOT_INHERITED}
    own_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != own_bin)
    return env


def bash(script: str, env: dict[str, str], cwd: Path, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    """``script`` (commands joined with ``&&``) run by bash, its output captured."""
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The output of a command that must have succeeded."""
    assert result.returncode == 0, f"{result.args[-1]}\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    return result.stdout


def source(*scripts: Path) -> str:
    return " && ".join(f"source {shlex.quote(str(script))}" for script in scripts)


def site_packages(prefix: Path) -> Path:
    return prefix / "lib" / f"python{PY}" / "site-packages"


def pip_packages(key: str) -> list[str]:
    """What rosdep's pip installer installs for a -pip key on Ubuntu: this package's rules
    (rosdep/ortf_ros.yaml), else ros/rosdistro's rosdep/python.yaml."""
    for rules_file in (OWN_RULES, ROSDISTRO / "rosdep" / "python.yaml"):
        rules: dict[str, Any] = yaml.safe_load(rules_file.read_text())
        if key in rules:
            rule = rules[key].get("ubuntu", rules[key].get("*"))
            pip = rule["pip"]
            return list(pip["packages"] if isinstance(pip, dict) else pip)
    raise AssertionError(f"no rosdep rule for {key}")


def package_keys(*tags: str) -> set[str]:
    """package.xml's rosdep keys of these tags (all of them without a tag)."""
    root = ET.parse(REPO / "package.xml").getroot()
    return {(e.text or "").strip() for e in root if e.tag.endswith("depend") and (not tags or e.tag in tags)}


def exec_keys() -> set[str]:
    return package_keys("exec_depend")


def pip_keys() -> set[str]:
    """The keys rosdep installs with pip (python3-<name>-pip, rosdistro's convention)."""
    return {key for key in package_keys() if key.endswith("-pip")}


def skipped_keys() -> str:
    """The keys rosdep would install with apt: there is no apt here (the stand-in's "apt" part
    has what the nodes import), so rosdep does the pip part only."""
    return " ".join(sorted(package_keys() - pip_keys()))


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def apt_requirements() -> list[str]:
    """What pip installs into the stand-in for package.xml's apt keys, and the tools."""
    names = [APT[key][0] for key in sorted(exec_keys() & APT.keys())]
    return [f"{name}=={APT_VERSIONS[name]}" if name in APT_VERSIONS else name for name in names] + list(APT_TOOLS)


@pytest.fixture(scope="module")
def ros_install(announce: Callable[[str], None]) -> Path:
    """The stand-in ROS 2 install for this Python version, with its "apt" packages: built once
    (setup-env.sh's stamps, and ours for the apt part), under a lock."""
    stamp = INSTALL / ".ortf-test-apt.stamp"
    with locked(INSTALL.parent / f"{INSTALL.name}.lock"):
        if not stamp.is_file():
            announce(
                f"building {INSTALL.relative_to(REPO)} (ROS 2 Jazzy wheels laid out as an apt install, "
                f"Python {PY}; ~5 minutes) for the workspace test, once"
            )
        env = login_environment() | {
            "ROS_LAYOUT": "system",
            "ROS_WHEELS": "jazzy",
            "PYTHON": f"python{PY}",
            "VENV": str(INSTALL),
        }
        setup = f"bash {shlex.quote(str(REPO / 'scripts' / 'setup-env.sh'))}"
        built = bash(setup, env, REPO, timeout_s=1500)
        if built.returncode != 0 and stamp.is_file():
            # setup-env.sh redid its part (its inputs changed) over the "apt" numpy 1.x, which the
            # wheels' CMake exports do not build against: the stand-in is laid out afresh, as a
            # new apt install would be, and gets its apt part again below.
            shutil.rmtree(INSTALL)
            built = bash(setup, env, REPO, timeout_s=1500)
        if built.returncode != 0 and "no working interpreter" in built.stderr:
            pytest.skip(f"no stand-in ROS install: {built.stderr.strip().splitlines()[-1]}")
        ok(built)
        # The apt part of `rosdep install` (and python3-rosdep): pip into the install's own
        # site-packages, at the versions Ubuntu has, done again whenever setup-env.sh redid its part.
        requirements = apt_requirements()
        setup_stamps = [(INSTALL / name).read_text() for name in (".setup-env-ros.stamp", ".setup-env-project.stamp")]
        want = hashlib.sha256(json.dumps([requirements, setup_stamps]).encode()).hexdigest()
        if not stamp.is_file() or stamp.read_text() != want:
            # (22.04's PyYAML 5.4.1 has no wheel for 3.10, and its sdist builds only with Cython 2)
            build_constraints = INSTALL.parent / "build-constraints.txt"
            build_constraints.write_text("cython<3\n")
            pip = "python3 -m pip install --disable-pip-version-check --no-warn-script-location"
            command = f"{source(INSTALL / 'setup.bash')} && {pip} {shlex.join(requirements)}"
            ok(bash(command, env | {"PIP_CONSTRAINT": str(build_constraints)}, REPO))
            stamp.write_text(want)
    return INSTALL


def rosdep_environment(home: Path) -> dict[str, str]:
    """rosdep's own state in ``home``, as `sudo rosdep init` leaves it, with ros/rosdistro's rules
    read from the copy beside the repository (no network): the user's /etc/ros/rosdep."""
    sources = home / "sources.list.d"
    sources.mkdir(parents=True)
    rules = (ROSDISTRO / "rosdep" / name for name in ("base.yaml", "python.yaml"))
    (sources / "20-default.list").write_text("".join(f"yaml {path.as_uri()}\n" for path in rules))
    return {
        "ROS_HOME": str(home),
        "ROSDEP_SOURCE_PATH": str(sources),
        "ROSDISTRO_INDEX_URL": (ROSDISTRO / "index-v4.yaml").as_uri(),
    }


def system_files(install: Path) -> frozenset[str]:
    """What is in the install's site-packages and bin (a package pip adds or upgrades shows)."""
    return frozenset(
        f"{folder.name}/{name}" for folder in (site_packages(install), install / "bin") for name in os.listdir(folder)
    )


@dataclass(frozen=True)
class UserWorkspace:
    """A workspace as the README makes it: src/ortf_ros, venv/, and what colcon built."""

    root: Path
    install: Path
    """The ROS install (the stand-in for /opt/ros/<distro>)."""
    env: dict[str, str]
    """The user's shell before sourcing anything."""
    system_before: frozenset[str]
    system_after: frozenset[str]
    rosdep_output: str

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def colcon(self) -> Workspace:
        return Workspace(self.root)

    def run(self, command: str, *, venv: bool = True) -> subprocess.CompletedProcess[str]:
        """``command`` in the workspace, the ROS install sourced and (``venv``) the venv activated."""
        return run_in(self.root, self.install, self.env, command, venv=venv)

    def sourced_environment(self) -> dict[str, str]:
        """After `source /opt/ros/<distro>/setup.bash && source install/setup.bash`: what
        `ros2 run`/`ros2 launch` start the nodes with (no venv activated)."""
        script = f"{source(self.install / 'setup.bash', self.root / 'install' / 'setup.bash')} && env -0"
        result = subprocess.run(["bash", "-c", script], env=self.env, cwd=self.root, capture_output=True, check=True)
        return dict(entry.split("=", 1) for entry in result.stdout.decode().split("\0") if "=" in entry)


def run_in(
    root: Path, install: Path, env: dict[str, str], command: str, *, venv: bool
) -> subprocess.CompletedProcess[str]:
    scripts = [install / "setup.bash"] + ([root / "venv" / "bin" / "activate"] if venv else [])
    return bash(f"{source(*scripts)} && {command}", env, root)


@pytest.fixture(scope="module")
def workspace(ros_install: Path, tmp_path_factory: pytest.TempPathFactory) -> UserWorkspace:
    """The README's steps: the workspace, rosdep's pip part into a --system-site-packages venv,
    `python -m colcon build` in that venv."""
    if not (ROSDISTRO / "index-v4.yaml").is_file():
        pytest.skip(f"no copy of ros/rosdistro at {ROSDISTRO} for rosdep")
    assert PIP_CONSTRAINTS.is_file(), f"{PIP_CONSTRAINTS.relative_to(REPO)} is missing: README's rosdep line uses it"
    tmp = tmp_path_factory.mktemp("ros_workspace")
    root = tmp / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / PACKAGE).symlink_to(REPO, target_is_directory=True)
    env = login_environment() | rosdep_environment(tmp / "ros_home")
    before = system_files(ros_install)

    def step(command: str, *, venv: bool = True) -> str:
        return ok(run_in(root, ros_install, env, command, venv=venv))

    # our rosdep rules, registered as the README says (there into /etc/ros/rosdep/sources.list.d)
    own = 'echo "yaml file://$PWD/src/ortf_ros/rosdep/ortf_ros.yaml" > "$ROSDEP_SOURCE_PATH/50-ortf_ros.list"'
    step(f"{own} && rosdep update", venv=False)
    step("python3 -m venv --system-site-packages venv && touch venv/COLCON_IGNORE", venv=False)
    # The README's line (on 22.04, PIP_BREAK_SYSTEM_PACKAGES is not needed: rosdep asks for it
    # from Python 3.11 on, for pip into a system python, not knowing pip3 is the venv's).
    rosdep = step(
        "PIP_BREAK_SYSTEM_PACKAGES=1 PIP_CONSTRAINT=$PWD/src/ortf_ros/rosdep/pip-constraints.txt "
        "rosdep install --from-paths src --ignore-src -y --as-root pip:false "
        f"--os ubuntu:{CODENAME} --skip-keys {shlex.quote(skipped_keys())}"
    )
    extras = VENV_EXTRAS.get(CODENAME, ())
    if extras:
        step(f"pip install {shlex.join(extras)}")
    built = step("python -m colcon build")
    assert f"Finished <<< {PACKAGE}" in built, built
    return UserWorkspace(root, ros_install, env, before, system_files(ros_install), rosdep)


VENV_CHECK = """
import importlib.metadata, importlib.util, json, sys
modules, dists = sys.argv[1].split(","), sys.argv[2].split(",")
print(json.dumps({
    "modules": {name: getattr(importlib.util.find_spec(name), "origin", None) for name in modules},
    "dists": {name: str(importlib.metadata.distribution(name).locate_file("")) for name in dists},
}))
"""


def test_rosdep_puts_the_pip_keys_into_the_venv_and_nothing_into_the_system(workspace: UserWorkspace) -> None:
    apt_python_keys = {key for key in exec_keys() if key.startswith("python") and not key.endswith("-pip")}
    assert sorted(apt_python_keys - APT.keys()) == [], "the stand-in's apt part lacks these"
    expected = sorted({package for key in pip_keys() for package in pip_packages(key)})
    executed = re.findall(r"executing command \[pip3 install -U (\S+)\]", workspace.rosdep_output)
    assert sorted(executed) == expected, workspace.rosdep_output
    assert workspace.system_after == workspace.system_before, "pip changed the ROS install"
    # ROS, colcon and the apt packages come from the install; what rosdep installed, from the venv,
    # and so does what the README adds there (the newer rich on 22.04).
    extras = [Requirement(extra).name for extra in VENV_EXTRAS.get(CODENAME, ())]
    apt_modules = [APT[key][1] for key in sorted(exec_keys() & APT.keys()) if APT[key][0] not in extras]
    modules = ["rclpy", "sensor_msgs", "ament_index_python", "colcon_core", *apt_modules]
    dists = expected + extras
    result = workspace.run(f"python -c {shlex.quote(VENV_CHECK)} {','.join(modules)} {','.join(dists)}")
    found = json.loads(ok(result))
    system = site_packages(workspace.install).resolve()
    for name, origin in found["modules"].items():
        assert origin is not None and Path(origin).resolve().is_relative_to(system), (name, origin)
    venv_site = site_packages(workspace.venv).resolve()
    for name, location in found["dists"].items():
        assert Path(location).resolve() == venv_site, (name, location)


def shebang(script: Path) -> Path:
    first = script.read_text().splitlines()[0]
    assert first.startswith("#!"), (script, first)
    return Path(first[2:].strip())


def test_python_m_colcon_gives_the_nodes_the_venvs_python(workspace: UserWorkspace) -> None:
    scripts = sorted(workspace.colcon.executables.iterdir())
    assert {RECORDER_NODE, "ortf_player", "ortf"} <= {script.name for script in scripts}
    for script in scripts:
        assert shebang(script) == workspace.venv / "bin" / "python", script


def test_a_plain_colcon_would_give_them_the_system_python_without_pyarrow(workspace: UserWorkspace) -> None:
    """Why the README says `python -m colcon build`: the `colcon` command is the install's
    (apt's), run by the system python even with the venv active, and so is what it installs."""
    built = ok(workspace.run("colcon build --build-base build-plain --install-base install-plain"))
    assert f"Finished <<< {PACKAGE}" in built, built
    interpreter = shebang(workspace.root / "install-plain" / PACKAGE / "lib" / PACKAGE / RECORDER_NODE)
    assert interpreter.parent == workspace.install / "bin", interpreter
    missing = workspace.run(f"{shlex.quote(str(interpreter))} -c 'import pyarrow'")
    assert missing.returncode != 0 and "No module named 'pyarrow'" in missing.stderr, missing.stderr


@pytest.fixture(scope="module")
def ros() -> Iterator[None]:
    rclpy.init()
    yield
    rclpy.shutdown()


@dataclass(frozen=True)
class Recorded:
    root: Path
    scene: Scene
    start_ns: int
    """The scene's t = 0 on the header clock."""
    env: dict[str, str]
    """What the recorder ran with."""


@pytest.fixture(scope="module")
def recorded(workspace: UserWorkspace, ros: None, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """One episode by the installed recorder, started as `ros2 launch ortf_ros record.launch.py
    output:=... mapping:=...` starts it: what `ros2 run` finds in install/ortf_ros/lib/ortf_ros, the
    installed config/record.yaml, the two overrides, and the environment of the two setup.bash
    files, no venv activated (the shebang brings the venv's python)."""
    tmp = tmp_path_factory.mktemp("recorded")
    mapping = tmp / "mapping.yaml"
    mapping.write_text(yaml.safe_dump(MAPPING, sort_keys=False))
    root = tmp / "dataset"
    env = workspace.sourced_environment()
    params = workspace.colcon.share / RECORDER_PARAMS
    scene = Scene(compressed=())
    executable = workspace.colcon.executables / RECORDER_NODE
    record_one_episode(
        scene, tmp, mapping, root, EPISODE_S, "--no-depth", executable=executable, params=params, env=env
    )
    start_ns = int(json.loads((tmp / "scene.json").read_text())["start_ns"])
    return Recorded(root, scene, start_ns, env)


def vectors(table: Any, column: str) -> np.ndarray:
    values = table[column].combine_chunks()
    array: np.ndarray = values.flatten().to_numpy().reshape(len(values), -1)
    return array


def test_the_installed_recorder_records_an_episode(recorded: Recorded) -> None:
    root = recorded.root
    report = validate(root, strict=True)
    assert report.ok, "\n".join(finding.line() for finding in report.findings)
    dataset = load_dataset(root)
    assert len(dataset) == 1
    (record,) = dataset.episodes
    assert record.length > EPISODE_S * recorded.scene.fps * 0.8, record
    assert dataset.episode(0).task.instruction == TASK
    steps = pq.read_table(root / layout.steps_path(0))
    assert steps.num_rows == record.length
    frames = steps[layout.image_column("wrist_camera")].to_pylist()
    assert frames == sorted(frames) and frames[-1] > 0
    # The joint states as published, read back from the native stream's Parquet file.
    names = dataset.manifest.native_streams["joint_states"].columns["position"].names or ()
    order = [JOINTS.index(name) for name in names]
    native = pq.read_table(root / dataset.episode(0).stream_file("joint_states"))
    rate = recorded.scene.joint_rate
    assert native.num_rows > EPISODE_S * rate * 0.8
    for stamp, row in zip(native["stamp_ns"].to_numpy(), vectors(native, "position"), strict=True):
        seq = round((int(stamp) - recorded.start_ns) * rate / 1e9)
        expected = joint_positions(seconds(int(stamp), recorded.start_ns))[order].astype(np.float32)
        if seq % FINGERS_ONLY_EVERY == FINGERS_ONLY_EVERY - 1:  # fingers only: the arm keeps its last values
            np.testing.assert_array_equal(row[7:], expected[7:])
        else:
            np.testing.assert_array_equal(row, expected)


def test_the_workspaces_ortf_validates_it(recorded: Recorded, workspace: UserWorkspace) -> None:
    """`ros2 run ortf_ros ortf validate DATASET`: the command-line tools run from the workspace too."""
    command = [str(workspace.colcon.executables / "ortf"), "validate", "--strict", str(recorded.root)]
    validated = subprocess.run(command, env=recorded.env, capture_output=True, text=True)
    assert validated.returncode == 0, validated.stdout + validated.stderr
