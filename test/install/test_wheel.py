"""The wheel an ML user without ROS installs, built as a release builds it and run where
that user runs it.

Such a user never sees this tree: they get the wheel, and ``pip install`` it into a venv of
whatever Python they have, with no ROS 2. So the test builds what a release uploads
(``python -m build``: the sdist, then the wheel built *from the sdist*, which fails when
MANIFEST.in leaves out a file setup.py needs), checks both as PyPI does (``twine check
--strict``), and then, in a fresh venv of the Python that runs the suite (`make test` runs
it on 3.12 and on 3.10, the oldest declared), installs the wheel alone and runs the ROS-free
commands on a bag of the synthetic scene: ``ortf-bag2ortf``, ``ortf validate``, ``ortf
info``, ``ortf export lerobot``, ``from ortf import load_dataset``. The ROS-only ones must
say in one line what they need, not fail: ``ortf_recorder``, ``ortf_player`` and
``ortf_scene_publisher`` exit 2, ``ortf demo`` runs its offline part and skips the live one.
Nothing of this repository or of
the ROS 2 in the test's own venv may leak into those venvs (sys.path, PYTHONPATH, the ROS
wheels' library path), or the test would pass where a user's install fails.

The venv is made once per session (pip fetches the dependencies from PyPI).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import av
import pyarrow.parquet as pq
import pytest

from cli.test_spec_api import spec_snippets, staged
from ortf_ros.dataset.validation import validate
from ortf_ros.errors import GET_ROS_2
from ortf_ros.synthetic.bag import TeleopBagInfo, write_teleop_bag
from ortf_ros.synthetic.schedule import stamp_ns
from ortf_ros.synthetic.topics import TOPIC_JOINT_STATES, TOPIC_WRENCH, TOPIC_WRIST_IMAGE

REPO = Path(__file__).resolve().parents[2]
VERSION = "0.1.0"
PYTHONS = (f"{sys.version_info.major}.{sys.version_info.minor}",)
"""The interpreter that runs the suite: `make test` runs it on 3.12 and again on 3.10 (the
oldest setup.py declares), so the wheel is installed and run on both, each once."""
BAG_SECONDS = (1.0, 0.5)
"""One bag per episode, of different lengths (30 and 15 steps at the cameras' 30 fps)."""
DROPPED_ENV = (
    "PYTHONPATH",
    "PYTHONHOME",
    "AMENT_PREFIX_PATH",
    "LD_LIBRARY_PATH",
    "_ROS_WHEELS_BOOTSTRAP_COMPLETE",
    "VIRTUAL_ENV",
)
"""What this process's environment has of its own venv and ROS 2 (the ROS wheels'
bootstrapper sets most of it), which a user's fresh venv does not."""
NEEDS_ROS = re.compile(
    r"(ortf_player|ortf_recorder|ortf_scene_publisher): needs ROS 2 \((rclpy|\w+_interfaces|\w+_msgs|\w+_srvs) is not "
)
PIP_TIMEOUT_S = 900  # a cold pip cache downloads pyarrow, PyAV and OpenCV
COMMAND_TIMEOUT_S = 300

pytestmark = pytest.mark.timeout(PIP_TIMEOUT_S + 300)  # (a fixture's set-up counts in its first test's time)


def clean_env(bin_dir: Path | None = None) -> dict[str, str]:
    """This process's environment without ``DROPPED_ENV``; ``bin_dir`` first on PATH, as a
    user's activated venv has it."""
    env = {key: value for key, value in os.environ.items() if key not in DROPPED_ENV}
    if bin_dir is not None:
        env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    return env


def run(
    arguments: Sequence[str | Path], *, cwd: Path, env: dict[str, str], timeout: float = COMMAND_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in arguments], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def output(result: subprocess.CompletedProcess[str]) -> str:
    """The child's exit code and output, for an assertion's message."""
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}"


# ---------------------------------------------------------------- interpreters


def python_version(python: Path) -> str | None:
    """``X.Y`` of the interpreter at ``python``; None when it does not run (a pyenv shim of
    a version that is not selected prints an error and exits 127)."""
    try:
        result = subprocess.run(
            [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(),
            check=False,
        )
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def release(path: Path) -> tuple[int, ...]:
    """The version of a pyenv directory (``3.10.13``), numerically: 3.10.13 after 3.10.9."""
    return tuple(int(part) if part.isdigit() else -1 for part in re.split(r"[.-]", path.name))


def find_python(version: str) -> Path | None:
    """``pythonX.Y`` on PATH, else pyenv's newest ``X.Y.*`` (its shim runs only the versions
    pyenv has selected); whichever first really is that version."""
    candidates: list[Path] = []
    if on_path := shutil.which(f"python{version}"):
        candidates.append(Path(on_path))
    roots = [Path(os.environ["PYENV_ROOT"])] if "PYENV_ROOT" in os.environ else []
    if pyenv := shutil.which("pyenv"):
        found = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=60, check=False)
        if found.returncode == 0 and found.stdout.strip():
            roots.append(Path(found.stdout.strip()))
    roots.append(Path.home() / ".pyenv")
    for root in roots:
        installed = (root / "versions").glob(f"{version}.*")
        for directory in sorted(installed, key=release, reverse=True):
            candidates.append(directory / "bin" / f"python{version}")
    return next((python for python in candidates if python_version(python) == version), None)


# ---------------------------------------------------------------- the release


@dataclass(frozen=True)
class Dist:
    sdist: Path
    wheel: Path

    def sdist_names(self) -> list[str]:
        with tarfile.open(self.sdist) as archive:
            return [name.removeprefix(f"ortf_ros-{VERSION}/") for name in archive.getnames()]

    def wheel_names(self) -> list[str]:
        with zipfile.ZipFile(self.wheel) as archive:
            return archive.namelist()


def working_tree(dest: Path) -> Path:
    """The files of this checkout a commit would hold (tracked, and new ones not ignored),
    copied to ``dest``: a build here would write build/ and egg-info into the tree, and
    setuptools would read a stale egg-info's SOURCES.txt into the sdist."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=60,
    )
    for name in sorted(set(listed.stdout.decode().split("\0")) - {""}):
        source, target = REPO / name, dest / name
        if not (source.exists() or source.is_symlink()):
            continue  # deleted, not yet committed
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    return dest


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """``python -m build``: the sdist, and the wheel built from it (build's default)."""
    tree = working_tree(tmp_path_factory.mktemp("tree"))
    out = tmp_path_factory.mktemp("dist")
    result = run(
        [sys.executable, "-m", "build", "--outdir", out, tree], cwd=out, env=clean_env(), timeout=PIP_TIMEOUT_S
    )
    assert result.returncode == 0, output(result)
    assert "Successfully built" in result.stdout, output(result)
    (sdist,) = out.glob("ortf_ros-*.tar.gz")
    (wheel,) = out.glob("ortf_ros-*.whl")
    assert sdist.name == f"ortf_ros-{VERSION}.tar.gz" and wheel.name == f"ortf_ros-{VERSION}-py3-none-any.whl"
    return Dist(sdist, wheel)


def test_twine_check_passes_on_the_sdist_and_the_wheel(dist: Dist) -> None:
    result = run(
        [sys.executable, "-m", "twine", "check", "--strict", dist.sdist, dist.wheel],
        cwd=dist.wheel.parent,
        env=clean_env(),
    )
    assert result.returncode == 0, output(result)
    assert result.stdout.count("PASSED") == 2, output(result)


def test_the_sdist_holds_what_colcon_and_the_wheel_are_built_from(dist: Dist) -> None:
    names = set(dist.sdist_names())
    built_from = {
        "setup.py",
        "setup.cfg",  # colcon's install_scripts: lib/ortf_ros, where `ros2 run` looks
        "pyproject.toml",
        "MANIFEST.in",
        "README.md",  # the long description
        "package.xml",
        "resource/ortf_ros",
        "launch/playback.launch.py",
        "launch/record.launch.py",
        "config/playback.yaml",
        "config/record.yaml",
        "config/writer.yaml",
        "rosdep/ortf_ros.yaml",
        "ortf_ros/py.typed",
        "ortf/py.typed",
        "ortf/__init__.py",
        "ortf_ros/ros/entry.py",
    }
    assert built_from <= names, sorted(built_from - names)
    for asset in ("episode.js", "list.js", "review.css"):
        assert f"ortf_ros/review/static/{asset}" in names, asset
    strays = [n for n in names if n.split("/")[0] in ("test", "bench", "ros", "docs", ".venv", ".cache", "build")]
    assert not strays, strays[:10]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_wheel_holds_both_packages_their_assets_and_no_tests(dist: Dist) -> None:
    names = dist.wheel_names()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"ortf_ros", "ortf", f"ortf_ros-{VERSION}.dist-info", f"ortf_ros-{VERSION}.data"}, tops
    for typed in ("ortf_ros/py.typed", "ortf/py.typed", "ortf/__init__.py", "ortf/convert.py"):
        assert typed in names, typed
    for asset in ("episode.js", "list.js", "review.css"):
        assert f"ortf_ros/review/static/{asset}" in names, asset
    share = f"ortf_ros-{VERSION}.data/data/share/"
    for data in ("ament_index/resource_index/packages/ortf_ros", "ortf_ros/package.xml", "ortf_ros/config/writer.yaml"):
        assert f"{share}{data}" in names, data  # in the wheel only if the sdist had it
    assert f"{share}ortf_ros/launch/playback.launch.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    with zipfile.ZipFile(dist.wheel) as archive:
        metadata = archive.read(f"ortf_ros-{VERSION}.dist-info/METADATA").decode()
        entry_points = archive.read(f"ortf_ros-{VERSION}.dist-info/entry_points.txt").decode()
    for script in (
        "ortf = ortf_ros.cli.entry:ortf",
        "ortf-bag2ortf = ortf_ros.cli.entry:bag2ortf",
        "ortf_player = ortf_ros.ros.entry:player",
        "ortf_recorder = ortf_ros.ros.entry:recorder",
        "ortf_scene_publisher = ortf_ros.ros.entry:scene_publisher",
    ):
        assert script in entry_points, script
    assert "Requires-Python: >=3.10" in metadata
    assert "Description-Content-Type: text/markdown" in metadata and "\n# ortf_ros\n" in metadata
    for python in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Classifier: Programming Language :: Python :: {python}\n" in metadata, python


# ---------------------------------------------------------------- a user's venv


@dataclass(frozen=True)
class Venv:
    version: str
    root: Path
    cwd: Path  # where the commands run: an empty directory, so nothing of the repository is on sys.path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def env(self) -> dict[str, str]:
        return clean_env(self.bin)

    def run(
        self, command: str, *arguments: str | Path, timeout: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """``bin/COMMAND ARGUMENTS`` of this venv."""
        return run([self.bin / command, *arguments], cwd=self.cwd, env=self.env, timeout=timeout)

    def python(self, program: str, *arguments: str | Path) -> subprocess.CompletedProcess[str]:
        return self.run("python", "-c", program, *arguments)


@pytest.fixture(scope="module", params=PYTHONS, ids=lambda v: f"py{v}")
def venv(
    request: pytest.FixtureRequest,
    dist: Dist,
    tmp_path_factory: pytest.TempPathFactory,
    announce: Callable[[str], None],
) -> Venv:
    """A fresh venv (no system site-packages) of one interpreter, with the wheel installed
    from its file and its dependencies from PyPI; once per interpreter."""
    version: str = request.param
    python = find_python(version)
    if python is None:
        pytest.skip(f"needs python{version}: not on PATH nor among pyenv's versions")
    base = tmp_path_factory.mktemp(f"py{version}")
    cwd = base / "work"
    cwd.mkdir()
    root = base / "venv"
    made = run([python, "-m", "venv", root], cwd=cwd, env=clean_env())
    assert made.returncode == 0, output(made)
    announce(f"test_wheel: pip install of the wheel into a fresh python{version} venv ({python})")
    installed = run(
        [root / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", "-q", dist.wheel],
        cwd=cwd,
        env=clean_env(root / "bin"),
        timeout=PIP_TIMEOUT_S,
    )
    assert installed.returncode == 0, output(installed)
    return Venv(version, root, cwd)


def test_the_venv_has_the_wheel_and_no_ros(venv: Venv) -> None:
    program = (
        "import json, sys, sysconfig, importlib.metadata, ortf, ortf_ros\n"
        "print(json.dumps({'version': '%d.%d' % sys.version_info[:2], 'purelib': sysconfig.get_paths()['purelib'],\n"
        "    'ortf_ros': ortf_ros.__file__, 'ortf': ortf.__file__, 'dist': importlib.metadata.version('ortf_ros'),\n"
        "    'path': sys.path}))"
    )
    result = venv.python(program)
    assert result.returncode == 0, output(result)
    found = json.loads(result.stdout)
    purelib = Path(found["purelib"])
    assert found["version"] == venv.version and found["dist"] == VERSION
    assert purelib.is_relative_to(venv.root), purelib
    for package in ("ortf_ros", "ortf"):
        assert Path(found[package]).is_relative_to(purelib), found[package]  # not this repository's
    assert not [entry for entry in found["path"] if entry and Path(entry).resolve().is_relative_to(REPO)]
    no_ros = venv.python("import rclpy")
    assert no_ros.returncode == 1 and "ModuleNotFoundError: No module named 'rclpy'" in no_ros.stderr, output(no_ros)


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory) -> list[TeleopBagInfo]:
    """The synthetic scene's bags, written by this process (the venvs only read them)."""
    out = tmp_path_factory.mktemp("bags")
    return [write_teleop_bag(out / f"teleop_{n}", "mcap", duration_s=s) for n, s in enumerate(BAG_SECONDS)]


@dataclass(frozen=True)
class Converted:
    venv: Venv
    dataset: Path
    result: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def converted(venv: Venv, bags: list[TeleopBagInfo]) -> Converted:
    """``ortf-bag2ortf BAG... -o DATASET`` in the venv: one episode per bag."""
    dataset = venv.cwd / "dataset"
    return Converted(venv, dataset, venv.run("ortf-bag2ortf", *(b.path for b in bags), "-o", dataset))


def test_bag2ortf_converts_the_bags(converted: Converted, bags: list[TeleopBagInfo]) -> None:
    assert converted.result.returncode == 0, output(converted.result)
    steps = pq.read_table(converted.dataset / "data" / "chunk-000" / "steps.parquet", columns=["episode_id"])
    per_episode = [steps["episode_id"].to_pylist().count(f"{n:06d}") for n in range(len(bags))]
    expected = [bag.counts[TOPIC_WRIST_IMAGE] for bag in bags]  # a step per camera frame: 30, 15
    assert per_episode == expected, output(converted.result)
    for n, bag in enumerate(bags):
        streams = converted.dataset / "data" / "chunk-000" / "streams"
        joints = pq.read_table(streams / "joint_states" / f"episode_{n:06d}.parquet")
        assert joints["stamp_ns"].to_pylist() == [stamp_ns(seq, 100) for seq in range(bag.counts[TOPIC_JOINT_STATES])]
        wrench = pq.read_table(streams / "ft_sensor" / f"episode_{n:06d}.parquet", columns=["stamp_ns"])
        assert wrench.num_rows == bag.counts[TOPIC_WRENCH]  # every 1 kHz sample kept


def test_validate_and_info(converted: Converted, bags: list[TeleopBagInfo]) -> None:
    venv = converted.venv
    valid = venv.run("ortf", "validate", "--strict", converted.dataset)
    assert valid.returncode == 0 and "valid" in valid.stdout, output(valid)
    info = venv.run("ortf", "info", "--json", converted.dataset)
    assert info.returncode == 0, output(info)
    shown = json.loads(info.stdout)
    assert shown["episodes"] == len(bags)
    assert shown["steps"] == sum(bag.counts[TOPIC_WRIST_IMAGE] for bag in bags)
    assert {camera["key"] for camera in shown["cameras"]} == {"wrist_camera", "overhead_camera", "depth_camera"}
    text = venv.run("ortf", "info", converted.dataset)
    assert text.returncode == 0 and "episodes" in text.stdout, output(text)
    report = validate(converted.dataset, strict=True)  # and this tree's validator agrees
    assert report.ok, "\n".join(finding.line() for finding in report.findings)


def test_export_lerobot(converted: Converted, bags: list[TeleopBagInfo]) -> None:
    out = converted.venv.cwd / "lerobot"
    result = converted.venv.run("ortf", "export", "lerobot", converted.dataset, out)
    assert result.returncode == 0, output(result)
    frames = sum(bag.counts[TOPIC_WRIST_IMAGE] for bag in bags)
    info = json.loads((out / "meta" / "info.json").read_text())
    assert (info["total_episodes"], info["total_frames"]) == (len(bags), frames)
    table = pq.read_table(out / "data" / "chunk-000" / "file-000.parquet", columns=["episode_index", "frame_index"])
    assert table["episode_index"].to_pylist() == [
        n for n, bag in enumerate(bags) for _ in range(bag.counts[TOPIC_WRIST_IMAGE])
    ]
    assert table["frame_index"].to_pylist() == [i for bag in bags for i in range(bag.counts[TOPIC_WRIST_IMAGE])]
    video = out / "videos" / "observation.images.wrist_camera" / "chunk-000" / "file-000.mp4"
    with av.open(str(video)) as container:
        assert sum(1 for _ in container.decode(video=0)) == frames


def test_load_dataset_reads_the_steps(converted: Converted, bags: list[TeleopBagInfo]) -> None:
    program = (
        "import json, sys\n"
        "import ortf\n"
        "from ortf import load_dataset\n"
        "dataset = load_dataset(sys.argv[1])\n"
        "steps = [dataset.episode(i).steps() for i in range(len(dataset.episodes))]\n"
        "print(json.dumps({'ortf': ortf.__file__, 'rows': [s.num_rows for s in steps],\n"
        "    'first': [s['observation.state.joint_positions'][0].as_py() for s in steps]}))"
    )
    result = converted.venv.python(program, converted.dataset)
    assert result.returncode == 0, output(result)
    read = json.loads(result.stdout)
    assert Path(read["ortf"]).is_relative_to(converted.venv.root)
    assert read["rows"] == [bag.counts[TOPIC_WRIST_IMAGE] for bag in bags]
    expected = pq.read_table(converted.dataset / "data" / "chunk-000" / "steps.parquet")
    firsts = [
        row
        for row, first in zip(
            expected["observation.state.joint_positions"].to_pylist(), expected["is_first"].to_pylist(), strict=True
        )
        if first
    ]
    assert read["first"] == firsts and len(firsts[0]) == 7


@pytest.mark.parametrize("node", ["ortf_recorder", "ortf_player", "ortf_scene_publisher"])
def test_the_nodes_say_they_need_ros_2_and_exit_2(venv: Venv, node: str) -> None:
    result = venv.run(node)
    assert result.returncode == 2, output(result)
    assert result.stdout == "" and result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), output(result)
    line = result.stderr.strip()
    assert NEEDS_ROS.match(line) and line.startswith(f"{node}: "), line
    assert line.endswith(GET_ROS_2), line  # and how to get it


def test_demo_runs_offline_and_skips_the_live_part(venv: Venv) -> None:
    out = venv.cwd / "demo"
    small = ("--episodes", "1", "--seconds", "0.5", "--width", "64", "--height", "48")
    result = venv.run("ortf", "demo", out, *small)
    assert result.returncode == 0 and not result.stderr, output(result)
    lines = result.stdout.splitlines()
    assert f"ortf validate --strict {out / 'dataset'}: valid (strict)" in result.stdout, output(result)
    skipped = [line for line in lines if "ROS 2" in line]
    assert skipped == [f"live recording skipped: it needs ROS 2 (rclpy is not importable): {GET_ROS_2}"], skipped
    assert lines[-1] == skipped[0]  # the last thing the demo says
    assert not (out / "live").exists() and not (out / "live-logs").exists()
    report = validate(out / "dataset", strict=True)
    assert report.ok, "\n".join(finding.line() for finding in report.findings)


def test_the_specs_lerobot_snippet_runs_as_printed(venv: Venv) -> None:
    """The spec's Python API against the installed ``ortf`` package, on the demo's dataset."""
    demo_out = venv.cwd / "snippet-demo"
    small = ("--episodes", "1", "--seconds", "0.5", "--width", "64", "--height", "48", "--no-live")
    made = venv.run("ortf", "demo", demo_out, *small)
    assert made.returncode == 0, output(made)
    snippet = spec_snippets()["to_lerobot"]
    dataset, out = staged(snippet, demo_out / "dataset", venv.cwd / "snippet")
    ran = run([venv.bin / "python", "-c", snippet], cwd=venv.cwd / "snippet", env=venv.env)
    assert ran.returncode == 0, output(ran)
    assert (out / "meta" / "info.json").is_file() and dataset.is_dir()


@pytest.mark.parametrize(
    ("command", "extra"), [(("export", "rerun"), "rerun"), (("review",), "review")], ids=["rerun", "review"]
)
def test_an_extra_not_installed_is_one_line_with_its_pip_command(
    venv: Venv, converted: Converted, command: tuple[str, ...], extra: str
) -> None:
    target = venv.cwd / f"{extra}.out"
    result = venv.run("ortf", *command, converted.dataset, *((target,) if extra == "rerun" else ()))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, output(result)
    assert f"pip install 'ortf_ros[{extra}]'" in result.stderr and not target.exists()
