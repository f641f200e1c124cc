"""What a test module needs beyond the core, found by reading it, so that a machine
without ROS 2 (or without an optional extra) skips it with one line instead of failing
to import it.

The dataset engine is ROS-free and `pip install ortf_ros` users have no rclpy; the suite
must run there too (`make test-core`). A test module needs what it imports at module
level, directly or through the modules it imports from this repository (ortf_ros, ortf,
the helpers in test/support and other test modules, by their names under test/), read with
``ast`` and never imported. A module may add
what it uses only in a child process with a module-level ``NEEDS = ("rclpy", ...)``.

Each optional root module maps to a marker (``-m ros`` selects the tests of the ROS nodes,
as the Kilted and Python 3.10 runs of the Makefile do) and to the line a skip prints.
Anything else a module imports is a hard dependency: its absence is an error, as it
should be.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

TEST_DIR = Path(__file__).resolve().parents[1]
REPO = TEST_DIR.parent
FIRST_PARTY = ("ortf_ros", "ortf")


@dataclass(frozen=True)
class Need:
    marker: str
    what: str
    how: str

    def line(self) -> str:
        return f"needs {self.what}: {self.how}"


ROS = Need("ros", "ROS 2 (rclpy)", "a sourced ROS 2 install, or a venv with its wheels (scripts/setup-env.sh)")
OPTIONAL: dict[str, Need] = {
    "rclpy": ROS,
    "ament_index_python": ROS,
    "builtin_interfaces": ROS,
    "rcl_interfaces": ROS,
    "std_srvs": ROS,
    "rerun": Need("rerun", "rerun-sdk", "pip install 'ortf_ros[rerun]'"),
    "ray": Need("ray", "Ray", "pip install 'ortf_ros[ray]'"),
    "selenium": Need("browser", "selenium", "pip install 'ortf_ros[test]'"),
    "starlette": Need("review", "Starlette", "pip install 'ortf_ros[review]'"),
    "uvicorn": Need("review", "uvicorn", "pip install 'ortf_ros[review]'"),
    "httpx": Need("review", "httpx", "pip install 'ortf_ros[test]'"),
    "deltalake": Need("lake", "deltalake", "pip install 'ortf_ros[lake]'"),
    "pyiceberg": Need("lake", "pyiceberg", "pip install 'ortf_ros[lake]'"),
    "duckdb_extension_ducklake": Need("lake", "duckdb-extension-ducklake", "pip install 'ortf_ros[lake]'"),
    "tensorflow_datasets": Need("rlds", "TensorFlow Datasets", "pip install 'ortf_ros[rlds]'"),
    "duckdb": Need("duckdb", "DuckDB", "pip install 'ortf_ros[test]'"),
    "mcap_ros2": Need("mcap_ros2", "mcap-ros2-support", "pip install 'ortf_ros[test]'"),
    "psutil": Need("psutil", "psutil", "pip install 'ortf_ros[test]'"),
    # the CPU build, in a venv of its own: `make test-torch` runs the tests marked torch there
    "torch": Need("torch", "PyTorch", "pip install 'ortf_ros[torch]', or `make test-torch` (scripts/torch-env.sh)"),
    "moto": Need("s3", "moto's S3 server", "pip install 'ortf_ros[test]'"),
    "boto3": Need("s3", "boto3 (with moto)", "pip install 'ortf_ros[test]'"),
    "colcon_core": Need("ros", "colcon", "it comes with ROS 2 (scripts/setup-env.sh installs it with the ROS wheels)"),
}
MARKERS = sorted({need.marker for need in OPTIONAL.values()})
MARKER_ROOT = {need.marker: root for root, need in reversed(OPTIONAL.items())}
"""The module each marker stands for: a test marked ``ros`` by hand (one that needs ROS
only in a child process) is skipped where rclpy is missing."""


def need_of(root: str) -> Need | None:
    """The optional dependency a top-level module name stands for: any ROS 2 message
    package (``*_msgs``) is ROS."""
    if root in OPTIONAL:
        return OPTIONAL[root]
    return ROS if root.endswith("_msgs") else None


def module_needs(path: Path) -> tuple[str, ...]:
    """The optional root modules importing the test module at ``path`` imports, in name order."""
    return tuple(sorted(_needs_of_file(path.resolve())))


def missing(roots: tuple[str, ...]) -> list[Need]:
    """The needs among ``roots`` that this interpreter cannot import, one per what."""
    found: dict[str, Need] = {}
    for root in roots:
        need = need_of(root)
        if need is not None and need.what not in found and not _importable(root):
            found[need.what] = need
    return list(found.values())


def markers(roots: tuple[str, ...]) -> list[str]:
    return sorted({need.marker for root in roots if (need := need_of(root)) is not None})


@functools.cache
def _importable(root: str) -> bool:
    return root in sys.modules or importlib.util.find_spec(root) is not None


@functools.cache
def _needs_of_file(path: Path) -> frozenset[str]:
    return frozenset(_walk(path, set()))


def _walk(path: Path, seen: set[Path]) -> set[str]:
    if path in seen:
        return set()
    seen.add(path)
    roots: set[str] = set()
    for name in _imports(path):
        root = name.split(".")[0]
        if need_of(root) is not None:
            roots.add(root)
        for local in _local_files(name):
            roots |= _walk(local, seen)
    return roots


@functools.cache
def _imports(path: Path) -> tuple[str, ...]:
    """The absolute module names ``path`` imports when it loads (typing-only blocks and
    function bodies left out), and its ``NEEDS``; ``from a import b`` gives ``a.b`` too,
    for when ``b`` is a module."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except SyntaxError:  # pytest's own import of the module reports it, in that module alone
        return ()
    names: list[str] = []
    for node in _module_level(tree.body):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "NEEDS" for t in node.targets):
            value = ast.literal_eval(node.value)
            names.extend(value if isinstance(value, tuple) else ())
    return tuple(names)


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements that run on import: into try/if blocks, except ``if TYPE_CHECKING``."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                found.extend(_module_level(node.body) + _module_level(node.orelse))
        elif isinstance(node, ast.Try):
            found.extend(_module_level(node.body))
            for handler in node.handlers:
                found.extend(_module_level(handler.body))
            found.extend(_module_level(node.orelse) + _module_level(node.finalbody))
        else:
            found.append(node)
    return found


def _local_files(name: str) -> list[Path]:
    """The files of this repository that importing ``name`` runs: each package's
    ``__init__`` on the way and the module itself (ortf_ros and ortf from the repository's
    root; anything else from test/, where ``support.fleet_data`` or ``dataset.test_append`` is)."""
    parts = name.split(".")
    files: list[Path] = []
    base = REPO if parts[0] in FIRST_PARTY else TEST_DIR
    for part in parts:
        base = base / part
        if (base / "__init__.py").is_file():
            files.append(base / "__init__.py")
        elif base.with_suffix(".py").is_file():
            files.append(base.with_suffix(".py"))
            break
        else:
            break
    return files
