"""package.xml as colcon and rosdep read it. (The wheel and the sdist, built and installed
without ROS as ML users get them, are test_wheel's; rosdep's resolution test_rosdep's.)"""

from __future__ import annotations

import ast
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


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
    for rosdep_key in ("python3-numpy", "python3-pyarrow-pip", "python3-av-pip", "python3-opencv", "python3-yaml"):
        assert rosdep_key in exec_depends
    assert root.findtext("export/build_type") == "ament_python"
    assert (REPO / "resource/ortf_ros").exists()
    assert "script_dir=$base/lib/ortf_ros" in (REPO / "setup.cfg").read_text()


def test_package_xml_and_setup_py_release_the_same_version() -> None:
    """bloom releases package.xml's version, PyPI setup.py's: one release, one number."""
    calls = [node for node in ast.walk(ast.parse((REPO / "setup.py").read_text())) if isinstance(node, ast.Call)]
    versions = [k.value for c in calls for k in c.keywords if k.arg == "version" and isinstance(k.value, ast.Constant)]
    assert [v.value for v in versions] == [ET.parse(REPO / "package.xml").getroot().findtext("version")]
