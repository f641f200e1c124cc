"""Which modules may import ROS, read from the source with ``ast`` (nothing is imported).

``pip install ortf_ros`` must work where ROS 2 is not installed, so rclpy and the ROS
message packages are imported only under ``ortf_ros/ros/``, in function bodies too (a
lazy import still fails when it runs). The console scripts start in
``ortf_ros/ros/entry.py``, which must not import ROS when it is loaded, or a missing ROS
would be a traceback instead of its one line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "ortf_ros"
ROS_SIDE = PACKAGE / "ros"
ROS_ONLY = frozenset(
    {
        "rclpy",
        "rcl_interfaces",
        "builtin_interfaces",
        "std_msgs",
        "std_srvs",
        "sensor_msgs",
        "geometry_msgs",
        "rosgraph_msgs",
        "diagnostic_msgs",
        "tf2_msgs",
        "foxglove_msgs",
        "ament_index_python",
        "launch",
        "launch_ros",
    }
)
"""Top-level packages that exist only in a ROS 2 install (or its PyPI wheels)."""
ROS_FREE_ENTRY_MODULES = (ROS_SIDE / "__init__.py", ROS_SIDE / "entry.py")
"""Loaded by the console scripts before they know whether ROS is there."""

MODULES = sorted([*PACKAGE.rglob("*.py"), *(REPO / "ortf").rglob("*.py")])
"""ortf_ros and ``ortf``, the spec's API over it (ROS-free as the rest of the core)."""


def module_name(path: Path, root: Path = REPO) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(nodes: Iterable[ast.AST], path: Path, root: Path = REPO) -> Iterator[tuple[int, str]]:
    """(line, absolute name) of every import among ``nodes``, relative ones resolved. A
    ``from M import N`` gives ``M`` and ``M.N``: N may be a module (``from ortf_ros import ros``)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{node.module}" if node.module else parent
            yield node.lineno, base
            yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)


def all_imports(tree: ast.Module, path: Path, root: Path = REPO) -> list[tuple[int, str]]:
    """Every import in the module, function and class bodies included."""
    return list(imported(ast.walk(tree), path, root))


def module_level_imports(tree: ast.Module, path: Path) -> list[tuple[int, str]]:
    """The imports run when the module is loaded: its top-level statements, including those
    nested in top-level ``if``/``try``/``with`` blocks, but not in functions or classes."""

    def loaded(statements: list[ast.stmt]) -> Iterator[ast.stmt]:
        for statement in statements:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            yield statement
            for field in ("body", "orelse", "finalbody"):
                nested = getattr(statement, field, None)
                if isinstance(nested, list):
                    yield from loaded([s for s in nested if isinstance(s, ast.stmt)])
            for handler in getattr(statement, "handlers", []):
                yield from loaded(handler.body)

    return list(imported(loaded(tree.body), path))


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def is_ros(module: str) -> bool:
    return module.split(".")[0] in ROS_ONLY


def is_ros_side(module: str) -> bool:
    return module == "ortf_ros.ros" or module.startswith("ortf_ros.ros.")


def test_the_rules_see_every_kind_of_import() -> None:
    """The checks below are only as good as ``imported``: lazy, relative and from-imports."""
    assert ROS_SIDE / "player_node.py" in MODULES and ROS_SIDE / "entry.py" in MODULES
    assert any(
        module.startswith("rclpy.")
        for _, module in all_imports(parse(ROS_SIDE / "player_node.py"), ROS_SIDE / "player_node.py")
    )
    source = (
        "import numpy\n"
        "from ortf_ros import ros\n"
        "from ..ros.qos import qos_profile\n"
        "try:\n    import yaml\nexcept ImportError:\n    import json\n"
        "def lazy() -> None:\n    from rclpy.node import Node\n"
    )
    tree = ast.parse(source)
    somewhere = PACKAGE / "pipeline" / "somewhere.py"
    everything = {module for _, module in all_imports(tree, somewhere)}
    assert {"numpy", "ortf_ros.ros", "ortf_ros.ros.qos", "rclpy.node", "yaml", "json"} <= everything
    when_loaded = {module for _, module in module_level_imports(tree, somewhere)}
    assert "rclpy.node" not in when_loaded and {"numpy", "ortf_ros.ros", "yaml", "json"} <= when_loaded


@pytest.mark.parametrize(
    "path", [p for p in MODULES if not p.is_relative_to(ROS_SIDE)], ids=lambda p: str(p.relative_to(REPO))
)
def test_ros_packages_are_imported_only_under_ortf_ros_ros(path: Path) -> None:
    offending = [f"line {line}: {module}" for line, module in all_imports(parse(path), path) if is_ros(module)]
    assert not offending, f"{path.relative_to(REPO)} imports ROS outside ortf_ros/ros/: {offending}"


@pytest.mark.parametrize(
    "path", [p for p in MODULES if not p.is_relative_to(ROS_SIDE)], ids=lambda p: str(p.relative_to(REPO))
)
def test_the_ros_free_core_does_not_import_ortf_ros_ros(path: Path) -> None:
    """Importing a node module or the ROS plumbing would bring rclpy in through the back door."""
    offending = [f"line {line}: {module}" for line, module in all_imports(parse(path), path) if is_ros_side(module)]
    assert not offending, f"{path.relative_to(REPO)} imports ortf_ros.ros: {offending}"


@pytest.mark.parametrize("path", ROS_FREE_ENTRY_MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_console_script_modules_import_no_ros_when_loaded(path: Path) -> None:
    offending = [
        f"line {line}: {module}"
        for line, module in module_level_imports(parse(path), path)
        if is_ros(module) or (is_ros_side(module) and module not in ("ortf_ros.ros", "ortf_ros.ros.entry"))
    ]
    assert not offending, f"{path.relative_to(REPO)} imports ROS when loaded: {offending}"


DATASET = PACKAGE / "dataset"
ABOVE_THE_ENGINE = ("ortf_ros.pipeline", "ortf_ros.playback", "ortf_ros.convert", "ortf_ros.cli", "ortf_ros.ros")
"""The dataset engine sits below these: the converters, the player, the exports, the CLI and the
nodes all share it, so it must not import any of them (a cycle, and the ROS-free install, would
break first)."""


@pytest.mark.parametrize("path", sorted(DATASET.rglob("*.py")), ids=lambda p: str(p.relative_to(REPO)))
def test_the_dataset_engine_imports_nothing_above_it(path: Path) -> None:
    offending = [
        f"line {line}: {module}"
        for line, module in all_imports(parse(path), path)
        if any(module == layer or module.startswith(f"{layer}.") for layer in ABOVE_THE_ENGINE)
    ]
    assert not offending, f"{path.relative_to(REPO)} imports a layer above the dataset engine: {offending}"


def test_the_engine_folder_holds_the_engine() -> None:
    """Writer, reader, commit, staging, catalog, statistics, recovery, info and validation live
    in ``ortf_ros/dataset/`` (and nowhere else: no stray copy at the package's top level)."""
    engine = {"writer", "reader", "commit", "staging", "catalog", "stats", "recover", "info"}
    assert engine <= {p.stem for p in DATASET.glob("*.py")}
    assert (DATASET / "validation" / "__init__.py").is_file()
    assert not engine & {p.stem for p in PACKAGE.glob("*.py")}


def import_graph(paths: Iterable[Path], root: Path = REPO) -> dict[str, set[str]]:
    """Each module -> the ``ortf_ros`` modules it imports, in function bodies too: an import
    moved into a function to dodge a cycle at load time leaves the cycle in the design."""
    modules = {module_name(path, root): path for path in paths}
    return {
        name: {module for _, module in all_imports(parse(path), path, root) if module in modules and module != name}
        for name, path in modules.items()
    }


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or through others."""

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo.extend(graph[module])
        return seen

    reach = {module: reachable(module) for module in graph}
    groups = {frozenset(m for m in reach[module] if module in reach[m]) for module in graph if module in reach[module]}
    return sorted(sorted(group) for group in groups)


def test_the_cycle_check_sees_a_cycle_through_a_function_body(tmp_path: Path) -> None:
    """The check below is only as good as ``import_cycles``: two modules that import each
    other, one of them lazily, and a third that only imports one of them."""
    package = tmp_path / "ortf_ros"
    package.mkdir()
    (package / "a.py").write_text("from ortf_ros.b import thing\n")
    (package / "b.py").write_text("def thing() -> None:\n    from ortf_ros import a\n")
    (package / "c.py").write_text("from ortf_ros import a\n")
    graph = import_graph(sorted(package.glob("*.py")), tmp_path)
    assert graph == {"ortf_ros.a": {"ortf_ros.b"}, "ortf_ros.b": {"ortf_ros.a"}, "ortf_ros.c": {"ortf_ros.a"}}
    assert import_cycles(graph) == [["ortf_ros.a", "ortf_ros.b"]]


def test_no_module_is_part_of_an_import_cycle() -> None:
    """A cycle makes the load order matter (a name not yet defined when the other module
    runs) and the two modules one design; shared names belong in a module both import."""
    cycles = import_cycles(import_graph(MODULES))
    assert not cycles, f"modules that import each other: {cycles}"
