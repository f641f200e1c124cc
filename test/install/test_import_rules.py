"""Which modules may import what, read from the source with ``ast`` (nothing is imported):
ROS only under ``ortf_ros/ros/``, and each room only the rooms below it (``ROOMS``).

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

REPO = Path(__file__).resolve().parents[2]
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


def imports_torch(path: Path) -> bool:
    """Only modules named for it import torch (``ortf/torch.py``, ``torch_*.py``): the core
    installs and runs without it, and the main venv type-checks everything else."""
    return path == REPO / "ortf" / "torch.py" or path.name.startswith("torch_")


@pytest.mark.parametrize("path", [p for p in MODULES if not imports_torch(p)], ids=lambda p: str(p.relative_to(REPO)))
def test_only_the_modules_named_for_torch_import_it(path: Path) -> None:
    offending = [
        f"line {line}: {module}" for line, module in all_imports(parse(path), path) if module.split(".")[0] == "torch"
    ]
    assert not offending, f"{path.relative_to(REPO)} imports torch; only ortf/torch.py and torch_*.py may: {offending}"


@pytest.mark.parametrize("path", ROS_FREE_ENTRY_MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_console_script_modules_import_no_ros_when_loaded(path: Path) -> None:
    offending = [
        f"line {line}: {module}"
        for line, module in module_level_imports(parse(path), path)
        if is_ros(module) or (is_ros_side(module) and module not in ("ortf_ros.ros", "ortf_ros.ros.entry"))
    ]
    assert not offending, f"{path.relative_to(REPO)} imports ROS when loaded: {offending}"


DATASET = PACKAGE / "dataset"
ABOVE_THE_ENGINE = ("pipeline", "playback", "convert", "cli", "ros")
"""The dataset engine sits below these: the converters, the player, the exports, the CLI and the
nodes all share it, so it must not import any of them (a cycle, and the ROS-free install, would
break first)."""

BASE = frozenset({"errors", "bounds"})
"""Below every room: the exception hierarchy and the ranges of settings."""
ROOMS: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "bounds": frozenset(),
    "qos": frozenset(),
    "extras": frozenset({"errors"}),
    "format": BASE,
    "io": BASE | {"format"},
    "dataset": BASE | {"format", "io"},
    "pipeline": BASE | {"format", "io", "dataset"},
    "fleet": BASE | {"format", "io", "dataset", "pipeline"},
    "quality": BASE | {"format", "io", "dataset", "pipeline"},
    "playback": BASE | {"format", "io", "dataset", "pipeline", "qos"},
    "convert": BASE | {"extras", "format", "io", "dataset", "playback"},
    "review": BASE | {"extras", "format", "io", "dataset", "quality", "convert"},
    "synthetic": BASE | {"format", "io", "dataset", "pipeline", "quality"},
    "cli": BASE
    | {"extras", "format", "io", "dataset", "pipeline", "fleet", "quality", "playback", "convert", "review"}
    | {"synthetic"},
    "ros": BASE | {"format", "io", "dataset", "pipeline", "playback", "qos", "cli", "synthetic"},
    "train": BASE | {"format", "io", "dataset"},
    "ortf": BASE | {"format", "io", "dataset", "convert", "train"},
}
"""The layering as a table: each room (a subpackage of ortf_ros, a top-level module, or the
``ortf`` package) and the rooms it may import, in function bodies too. Its own room it may
always import, and the package root (which holds only ``__version__``). Bottom to top:
errors and bounds; format (the ORTF files and the one reader of settings); io (files,
video, audio); the dataset engine; the pipeline (recordings to episodes); the fleet, the
quality checks, the player; the exports; the review pages; the synthetic scenes; the
command line; the ROS nodes."""


def room(module: str) -> str | None:
    """``ortf_ros.pipeline.mapping.parse`` -> ``pipeline``, ``ortf_ros.bounds`` -> ``bounds``,
    ``ortf.convert`` -> ``ortf``; None for the package root and for modules not ours."""
    parts = module.split(".")
    if parts[0] == "ortf":
        return "ortf"
    return parts[1] if parts[0] == "ortf_ros" and len(parts) > 1 else None


def rooms_below(name: str) -> set[str]:
    """Every room ``name`` reaches through the table (what it may import, directly or not)."""
    seen: set[str] = set()
    todo = list(ROOMS[name])
    while todo:
        below = todo.pop()
        if below not in seen:
            seen.add(below)
            todo.extend(ROOMS[below])
    return seen


def test_the_rooms_table_is_a_layering() -> None:
    """Every room it names has a row, and no room reaches itself: rooms that import each
    other are one design, and would be one room."""
    named = set().union(*ROOMS.values())
    assert named <= set(ROOMS), f"rooms without a row: {sorted(named - set(ROOMS))}"
    circular = sorted(name for name in ROOMS if name in rooms_below(name))
    assert not circular, f"rooms that reach themselves through the table: {circular}"


def test_every_room_has_a_row() -> None:
    found = {name for path in MODULES if (name := room(module_name(path))) is not None}
    assert found <= set(ROOMS), (
        f"rooms without a row in ROOMS (add one, with the rooms it may import): {sorted(found - set(ROOMS))}"
    )


def test_the_room_of_a_module() -> None:
    assert room("ortf_ros.pipeline.mapping.parse") == "pipeline"
    assert room("ortf_ros.bounds") == "bounds" and room("ortf_ros.format.fields.Fields") == "format"
    assert room("ortf.convert") == "ortf" and room("ortf_ros") is None and room("numpy") is None


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_each_room_imports_only_the_rooms_below_it(path: Path) -> None:
    """The package root (``ortf_ros/__init__.py``, its version) belongs to no room and imports none."""
    own = room(module_name(path))
    allowed: frozenset[str]
    if own is None:
        allowed, rule = frozenset(), "the package root may import no room"
    else:
        assert own in ROOMS, f"{path.relative_to(REPO)}: room {own!r} has no row in ROOMS"
        allowed = ROOMS[own] | {own}
        rule = f"room {own!r} may import only {', '.join(sorted(ROOMS[own])) or 'no other room'}"
    offending = [
        f"line {line}: {module} (room {room(module)})"
        for line, module in all_imports(parse(path), path)
        if room(module) is not None and room(module) not in allowed
    ]
    assert not offending, f"{path.relative_to(REPO)} imports a room it may not ({rule}; see ROOMS): {offending}"


def test_the_dataset_engine_imports_nothing_above_it() -> None:
    """The table keeps the engine below the converters, the player, the exports, the CLI and
    the nodes (``test_each_room_imports_only_the_rooms_below_it`` checks every module of it)."""
    assert not rooms_below("dataset") & set(ABOVE_THE_ENGINE)
    assert {path for path in MODULES if room(module_name(path)) == "dataset"} == set(DATASET.rglob("*.py"))


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
