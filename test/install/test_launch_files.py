"""The launch files, checked against the colcon install space without running them.

`launch` is not on PyPI, so `ros2 launch` cannot run here (../shared/ROS2-ON-PYPI.md).
Each launch/*.launch.py is read with `ast` instead: every Node(...) it starts must name
an executable the install space has, every file it takes from a package's share
directory must be installed there, and the player must be given the very parameter
file that test_colcon starts the installed player with.
"""

from __future__ import annotations

import ast
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import needs
from support.colcon_workspace import (
    PACKAGE,
    PLAYER_NODE,
    PLAYER_PARAMS,
    RECORDER_NODE,
    RECORDER_PARAMS,
    REPO,
    Workspace,
    build_workspace,
)

LAUNCH_FILES = sorted(REPO.glob("launch/*.launch.py"))
# Calls that give a package's share directory, in Python launch files of Humble and later.
SHARE_DIRECTORY_CALLS = {"get_package_share_directory", "FindPackageShare"}
PATH_JOIN_CALLS = {"join", "PathJoinSubstitution"}


@dataclass(frozen=True)
class ShareFile:
    """A path inside `share/<package>` of an installed package."""

    package: str
    path: str

    def joined(self, parts: list[str]) -> ShareFile:
        return ShareFile(self.package, "/".join(p for p in (self.path, *parts) if p))


@dataclass(frozen=True)
class StartedNode:
    package: str
    executable: str
    name: str | None
    parameter_files: tuple[ShareFile, ...]


class LaunchFile:
    """What a launch file's source says, with names and launch arguments followed to
    the values they were given (assignments, DeclareLaunchArgument default values)."""

    def __init__(self, path: Path) -> None:
        self.tree = ast.parse(path.read_text(), filename=str(path))
        self.assignments = {
            node.targets[0].id: node.value
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        }
        self.argument_defaults = {
            _constant(call.args[0]): _keyword(call, "default_value")
            for call in self._calls("DeclareLaunchArgument")
            if call.args and _constant(call.args[0])
        }

    def functions(self) -> set[str]:
        return {node.name for node in ast.walk(self.tree) if isinstance(node, ast.FunctionDef)}

    def nodes(self) -> list[StartedNode]:
        started = []
        for call in self._calls("Node"):
            parameters = _keyword(call, "parameters")
            entries = parameters.elts if isinstance(parameters, ast.List) else []
            started.append(
                StartedNode(
                    package=_constant(_keyword(call, "package")) or "",
                    executable=_constant(_keyword(call, "executable")) or "",
                    name=_constant(_keyword(call, "name")),
                    parameter_files=tuple(f for f in map(self.resolve, entries) if isinstance(f, ShareFile)),
                )
            )
        return started

    def share_files(self) -> set[ShareFile]:
        """Every path it builds from a share directory (parameter files, URDFs, ...)."""
        resolved = (self.resolve(node) for node in ast.walk(self.tree) if isinstance(node, (ast.Call, ast.BinOp)))
        return {path for path in resolved if isinstance(path, ShareFile) and path.path}

    def resolve(self, node: ast.expr | None) -> str | ShareFile | None:
        if node is None:
            return None
        if isinstance(node, ast.Name) and node.id in self.assignments:
            return self.resolve(self.assignments[node.id])
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):  # pathlib's /
            return self._join([node.left, node.right])
        if not isinstance(node, ast.Call):
            return _constant(node)
        name = _call_name(node)
        if name in SHARE_DIRECTORY_CALLS and node.args and (package := _constant(node.args[0])):
            return ShareFile(package, "")
        if name in PATH_JOIN_CALLS:
            only = node.args[0] if len(node.args) == 1 else None
            return self._join(only.elts if isinstance(only, ast.List) else list(node.args))
        if name in {"LaunchConfiguration", "ParameterFile", "Path"} and node.args:
            first = node.args[0]
            if name == "LaunchConfiguration":
                return self.resolve(self.argument_defaults.get(_constant(first) or ""))
            return self.resolve(first)
        return None

    def _join(self, parts: list[ast.expr]) -> str | ShareFile | None:
        base, *rest = [self.resolve(part) for part in parts]
        tail = [part for part in rest if isinstance(part, str)]
        if not isinstance(base, ShareFile) or len(tail) != len(rest):
            return None
        return base.joined(tail)

    def _calls(self, name: str) -> list[ast.Call]:
        return [node for node in ast.walk(self.tree) if isinstance(node, ast.Call) and _call_name(node) == name]


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _constant(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def exec_depends() -> set[str]:
    return {e.text or "" for e in ET.parse(REPO / "package.xml").getroot().findall("exec_depend")}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    lacking = needs.missing(("colcon_core",))  # (colcon comes with ROS: the rest of this module needs neither)
    if lacking:
        pytest.skip(lacking[0].line())
    return build_workspace(tmp_path_factory.mktemp("colcon_ws"))


def test_the_player_and_the_recorder_have_launch_files() -> None:
    assert REPO / "launch/playback.launch.py" in LAUNCH_FILES
    assert REPO / "launch/record.launch.py" in LAUNCH_FILES


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_nodes_name_executables_the_install_space_has(path: Path, workspace: Workspace) -> None:
    launch_file = LaunchFile(path)
    assert "generate_launch_description" in launch_file.functions(), "ros2 launch calls it"
    nodes = launch_file.nodes()
    assert nodes, "starts no Node"
    for node in nodes:
        if node.package == PACKAGE:
            assert os.access(workspace.executables / node.executable, os.X_OK), f"not installed: {node.executable}"
        else:
            assert node.package in exec_depends(), f"{node.package} (Node {node.executable}) missing in package.xml"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_files_from_share_directories_are_installed(path: Path, workspace: Workspace) -> None:
    for share_file in LaunchFile(path).share_files():
        if share_file.package == PACKAGE:
            assert (workspace.share / share_file.path).exists(), f"not installed: share/{PACKAGE}/{share_file.path}"
        else:
            assert share_file.package in exec_depends(), f"{share_file.package} missing in package.xml"


def test_player_gets_the_parameter_file_test_colcon_runs_it_with() -> None:
    launch_file = LaunchFile(REPO / "launch/playback.launch.py")
    (player,) = [node for node in launch_file.nodes() if node.executable == "ortf_player"]
    assert (player.package, player.name) == (PACKAGE, PLAYER_NODE)
    assert player.parameter_files == (ShareFile(PACKAGE, PLAYER_PARAMS),)
    assert set(launch_file.argument_defaults) == {"dataset", "config", "rate", "loop", "use_sim_time"}


def test_recorder_gets_the_parameter_file_test_recorder_node_runs_it_with() -> None:
    launch_file = LaunchFile(REPO / "launch/record.launch.py")
    (recorder,) = [node for node in launch_file.nodes() if node.executable == "ortf_recorder"]
    assert (recorder.package, recorder.name) == (PACKAGE, RECORDER_NODE)
    assert recorder.parameter_files == (ShareFile(PACKAGE, RECORDER_PARAMS),)
    assert set(launch_file.argument_defaults) == {"output", "config", "mapping", "use_sim_time"}
