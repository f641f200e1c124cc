"""The package as ROS users build and run it: `colcon build` in a workspace, the
workspace sourced, and the installed `ortf_player` started from the install space with
the installed parameter file (the one launch/playback.launch.py passes), heard by a real
rclpy subscriber over loopback DDS."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import rclpy
from ament_index_python.packages import get_package_prefix, get_package_share_directory
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState

from ortf_ros.playback.settings import read_parameter_file, settings_from_parameters
from ortf_ros.synthetic.dataset import write_demo_dataset
from ortf_ros.synthetic.demo_arm import DEPTH_CAMERA, JOINTS, RGB_CAMERAS
from support.child_process import kill_if_running
from support.colcon_workspace import PACKAGE, PLAYER_NODE, PLAYER_PARAMS, REPO, Workspace, build_workspace

WIDTH, HEIGHT = 64, 48
JOINT_STATE, IMAGE = "sensor_msgs/msg/JointState", "sensor_msgs/msg/Image"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return build_workspace(tmp_path_factory.mktemp("colcon_ws"))


@pytest.fixture
def sourced(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The sourced workspace's environment; this process's ament index sees it too."""
    environment = workspace.sourced_environment()
    monkeypatch.setenv("AMENT_PREFIX_PATH", environment["AMENT_PREFIX_PATH"])
    return environment


def test_install_space_has_the_executables_launch_and_config_files(workspace: Workspace) -> None:
    for executable in ("ortf_player", "ortf_recorder", "ortf", "ortf-bag2ortf"):
        assert os.access(workspace.executables / executable, os.X_OK), executable
    assert (workspace.prefix / "share/ament_index/resource_index/packages" / PACKAGE).is_file()
    installed = [*REPO.glob("launch/*.launch.py"), *REPO.glob("config/*.yaml"), REPO / "package.xml"]
    assert REPO / "launch/playback.launch.py" in installed and REPO / PLAYER_PARAMS in installed
    for source in installed:
        copy = workspace.share / source.relative_to(REPO)
        assert copy.read_bytes() == source.read_bytes(), copy


def test_sourced_workspace_is_found_by_ament_index_and_imported_from_the_install_space(
    workspace: Workspace, sourced: dict[str, str]
) -> None:
    assert Path(get_package_share_directory(PACKAGE)) == workspace.share
    assert Path(get_package_prefix(PACKAGE)) == workspace.prefix
    where = subprocess.run(
        # ortf: the spec's Python API, installed beside ortf_ros
        [sys.executable, "-c", "import ortf_ros.ros.player_node as m, ortf; print(m.__file__); print(ortf.__file__)"],
        cwd=workspace.root,  # as a user in the workspace; from the repository, '' would find its ortf_ros first
        env=sourced,
        capture_output=True,
        text=True,
        check=True,
    )
    files = where.stdout.split()
    assert len(files) == 2 and all(Path(f).is_relative_to(workspace.prefix) for f in files), "not the source tree's"


def test_installed_player_publishes_the_configured_topics_and_stops_on_sigint(
    workspace: Workspace, sourced: dict[str, str], tmp_path: Path
) -> None:
    dataset = tmp_path / "dataset"
    write_demo_dataset(dataset, episodes=1, steps=12, width=WIDTH, height=HEIGHT)
    share = Path(get_package_share_directory(PACKAGE))
    params = share / PLAYER_PARAMS
    configured = settings_from_parameters(read_parameter_file(params), str(params)).messages
    encodings = {configured.topic("image", key): "rgb8" for key in RGB_CAMERAS}
    encodings[configured.topic("depth", DEPTH_CAMERA[0])] = "16UC1"
    expected = {configured.topic("joint_states"): JOINT_STATE, **dict.fromkeys(encodings, IMAGE)}
    player_exe = Path(get_package_prefix(PACKAGE)) / "lib" / PACKAGE / "ortf_player"
    command = [str(player_exe), "--ros-args", "--params-file", str(params)]
    command += ["-p", f"dataset:={dataset}", "-p", "loop:=true"]  # loop: still publishing when discovered
    log_path = tmp_path / "player.log"

    received: dict[str, list[Any]] = {topic: [] for topic in expected}
    rclpy.init()
    node = rclpy.create_node("ortf_colcon_test")
    try:
        with log_path.open("w") as log_file:
            player = subprocess.Popen(
                command, cwd=workspace.root, env=sourced, stdout=log_file, stderr=subprocess.STDOUT
            )
        try:
            _wait_for_publishers(node, player, log_path, expected)
            for topic, msg_type in expected.items():
                message_class = JointState if msg_type == JOINT_STATE else Image
                node.create_subscription(message_class, topic, received[topic].append, qos_profile_sensor_data)
            deadline = time.monotonic() + 60
            while not all(received.values()) and time.monotonic() < deadline and player.poll() is None:
                rclpy.spin_once(node, timeout_sec=0.1)
            player.send_signal(signal.SIGINT)  # its own pid: the process group would get it twice
            returncode = player.wait(timeout=30)
        finally:
            kill_if_running(player)
    finally:
        node.destroy_node()  # type: ignore[no-untyped-call]
        rclpy.shutdown()

    log = log_path.read_text()
    assert returncode == 0 and "Traceback" not in log, log
    assert all(received.values()), f"topics without a message: {[t for t, m in received.items() if not m]}\n{log}"
    (joint_state, *_) = received[configured.topic("joint_states")]
    assert set(JOINTS) <= set(joint_state.name)
    for topic, encoding in encodings.items():
        image = received[topic][0]
        assert (image.width, image.height, image.encoding) == (WIDTH, HEIGHT, encoding), topic


def _wait_for_publishers(node: Any, player: subprocess.Popen[bytes], log_path: Path, expected: dict[str, str]) -> None:
    """Until the graph shows the player's node publishing every expected topic with its type."""
    published: dict[str, str] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert player.poll() is None, f"ortf_player exited with {player.returncode}:\n{log_path.read_text()}"
        if PLAYER_NODE in node.get_node_names():
            by_node = node.get_publisher_names_and_types_by_node(PLAYER_NODE, "/")
            published = {name: types[0] for name, types in by_node}
            if expected.items() <= published.items():
                return
        rclpy.spin_once(node, timeout_sec=0.1)
    raise AssertionError(f"{PLAYER_NODE} publishes {published}, expected {expected}:\n{log_path.read_text()}")
