"""The package as users get it: `pip install .` on a machine without ROS gives the
library and the `ortf` tool; the wheel carries what colcon/ament expect."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
from test_spec_api import spec_snippets, staged

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(out)],
        check=True,
        env=dict(os.environ),
    )
    (built,) = out.glob("ortf_ros-*.whl")
    return built


def test_wheel_has_ament_resources_config_and_cli(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    data = "ortf_ros-0.1.0.data/data/share/"
    assert f"{data}ament_index/resource_index/packages/ortf_ros" in names
    assert f"{data}ortf_ros/package.xml" in names
    for installed in ("config/writer.yaml", "config/playback.yaml", "launch/playback.launch.py"):
        assert f"{data}ortf_ros/{installed}" in names, installed
    assert "ortf_ros/py.typed" in names
    for module in ("__init__.py", "convert.py", "py.typed"):  # the spec's own API: `from ortf import load_dataset`
        assert f"ortf/{module}" in names, module
    assert "ortf_ros/ros/player_node.py" in names
    for asset in ("episode.js", "list.js", "review.css"):  # the review page's, served from the package
        assert f"ortf_ros/review/static/{asset}" in names, asset
    entry_points = zipfile.ZipFile(wheel).read("ortf_ros-0.1.0.dist-info/entry_points.txt").decode()
    assert "ortf = ortf_ros.cli.entry:ortf" in entry_points
    assert "ortf-bag2ortf = ortf_ros.cli.entry:bag2ortf" in entry_points
    assert "ortf_player = ortf_ros.ros.entry:player" in entry_points
    assert "ortf_recorder = ortf_ros.ros.entry:recorder" in entry_points


def test_package_xml_declares_ros_and_python_dependencies() -> None:
    root = ET.parse(REPO / "package.xml").getroot()
    assert root.get("format") == "3"
    assert root.findtext("name") == "ortf_ros"
    exec_depends = {e.text for e in root.findall("exec_depend")}
    ros_packages = ("rclpy", "sensor_msgs", "geometry_msgs", "tf2_msgs", "std_msgs", "std_srvs", "rosgraph_msgs")
    for ros_package in (*ros_packages, "diagnostic_msgs", "trajectory_msgs"):
        assert ros_package in exec_depends
    for launch_package in ("launch", "launch_ros", "ros2launch", "ament_index_python"):  # launch/*.launch.py
        assert launch_package in exec_depends
    for rosdep_key in ("python3-numpy", "python3-pyarrow", "python3-av", "python3-opencv", "python3-yaml"):
        assert rosdep_key in exec_depends
    assert root.findtext("export/build_type") == "ament_python"
    assert (REPO / "resource/ortf_ros").exists()
    assert "script_dir=$base/lib/ortf_ros" in (REPO / "setup.cfg").read_text()


def test_pip_install_without_ros_gives_a_working_ortf(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # (PYTHONPATH too: a source tree on it would be taken for an installed ortf_ros, through its egg-info)
    clean_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ROS_", "AMENT_", "_ROS_", "LD_LIBRARY")) and k not in ("PYTHONPATH", "PYTHONHOME")
    }
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, env=clean_env)
    assert subprocess.run([str(python), "-c", "import rclpy"], env=clean_env, capture_output=True).returncode != 0
    demo = ["demo", str(tmp_path / "demo"), "--episodes", "1", "--seconds", "0.5", "--width", "64", "--height", "48"]
    result = subprocess.run(
        [str(env_dir / "bin" / "ortf"), *demo],
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid (strict)" in result.stdout and "episodes  1" in result.stdout
    # The spec's LeRobot snippet, as the spec prints it, against the installed `ortf` package.
    snippet = spec_snippets()["to_lerobot"]
    dataset, out = staged(snippet, tmp_path / "demo" / "dataset", tmp_path / "snippet")
    ran = subprocess.run([str(python), "-c", snippet], cwd=tmp_path / "snippet", env=clean_env, capture_output=True)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert (out / "meta" / "info.json").is_file() and dataset.is_dir()
    # An optional extra not installed (the Rerun SDK): the pip command in one line, exit 2.
    rerun = subprocess.run(
        [str(env_dir / "bin" / "ortf"), "export", "rerun", str(tmp_path / "demo" / "dataset"), str(tmp_path / "x.rrd")],
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert rerun.returncode == 2 and rerun.stderr.count("\n") == 1, rerun.stderr
    assert "pip install 'ortf_ros[rerun]'" in rerun.stderr and not (tmp_path / "x.rrd").exists()
    review = subprocess.run(  # the same for `ortf review` without its extra
        [str(env_dir / "bin" / "ortf"), "review", str(tmp_path / "demo" / "dataset")],
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert review.returncode == 2 and review.stderr.count("\n") == 1, review.stderr
    assert "pip install 'ortf_ros[review]'" in review.stderr
    player = subprocess.run(
        [str(env_dir / "bin" / "ortf_player"), "--ros-args", "-p", f"dataset:={tmp_path / 'demo'}"],
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert player.returncode == 1 and "Traceback" not in player.stderr
    # (whichever ROS package the node module imports first is the one named)
    needs = r"ortf_player: needs ROS 2 \((rclpy|\w+_interfaces|\w+_msgs|\w+_srvs) is not importable\)"
    assert re.match(needs, player.stderr), player.stderr
