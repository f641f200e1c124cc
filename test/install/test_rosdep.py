"""ROS users install ortf_ros's dependencies with `rosdep install --from-paths src --ignore-src -y`,
which fails on the first key of package.xml that no rosdep rule resolves. rosdep itself (from PyPI)
resolves every key here, without a network, for each ROS 2 distribution and Ubuntu release we
support, against a copy of ros/rosdistro (../shared/rosdistro) plus this package's own rules
(rosdep/ortf_ros.yaml, registered the way the README tells users to). The pip packages those
rules install are held to setup.py's requirement names, so package.xml and setup.py cannot drift.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
ROSDISTRO = REPO.parent / "shared" / "rosdistro"
OWN_RULES = REPO / "rosdep" / "ortf_ros.yaml"
ROSDEP = Path(sys.executable).parent / "rosdep"

PAIRS = [("jazzy", "ubuntu:noble"), ("kilted", "ubuntu:noble"), ("humble", "ubuntu:jammy")]
"""(ROS 2 distribution, the Ubuntu release its binaries are built for) that users install on."""

DEPEND_TAGS = ("depend", "build_depend", "build_export_depend", "buildtool_depend", "exec_depend", "test_depend")

APT_KEYS = {
    "python3-numpy": "numpy",
    "python3-opencv": "opencv-python-headless",
    "python3-yaml": "pyyaml",
    "python3-rich": "rich",
    "python3-pytest": "pytest",
    "python3-pytest-timeout": "pytest-timeout",
    "python3-psutil": "psutil",
}
"""rosdistro's keys that install Ubuntu's package (the one ROS itself is built with) rather than
pip's, and the setup.py requirement each stands for."""

Resolution = dict[str, tuple[str, list[str]]]
"""key: (installer, packages), as `rosdep resolve` prints them."""


def package_keys(tags: Iterable[str] = DEPEND_TAGS) -> set[str]:
    root = ET.parse(REPO / "package.xml").getroot()
    return {(element.text or "").strip() for tag in tags for element in root.findall(tag)}


def setup_requirements() -> tuple[set[str], set[str]]:
    """The requirement names of setup.py's install_requires and of its "test" extra, as written."""
    tree = ast.parse((REPO / "setup.py").read_text())
    (call,) = (
        node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup"
    )
    keywords = {keyword.arg: keyword.value for keyword in call.keywords}
    install: list[str] = ast.literal_eval(keywords["install_requires"])
    test: list[str] = ast.literal_eval(keywords["extras_require"])["test"]
    return {Requirement(r).name for r in install}, {Requirement(r).name for r in test}


def released_packages(distro: str) -> set[str]:
    """The ROS package names a distribution releases (the rosdep keys it resolves to ros-<distro>-*)."""
    repositories: dict[str, Any] = yaml.safe_load((ROSDISTRO / distro / "distribution.yaml").read_text())[
        "repositories"
    ]
    names: set[str] = set()
    for name, repository in repositories.items():
        if "release" in repository:
            names.update(repository["release"].get("packages") or [name])
    return names


def run_rosdep(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROSDEP), *args], env=env, capture_output=True, text=True, timeout=120, check=False)


def parse_resolve(stdout: str) -> Resolution:
    """`rosdep resolve A B` prints, for each key it resolves, `#ROSDEP[A]`, `#apt` and the packages."""
    resolved: Resolution = {}
    key = ""
    for line in stdout.splitlines():
        if line.startswith("#ROSDEP[") and line.endswith("]"):
            key = line[len("#ROSDEP[") : -1]
        elif line.startswith("#") and key:
            resolved[key] = (line[1:], [])
        elif line.strip() and key in resolved:
            resolved[key][1].extend(line.split())
    return resolved


@pytest.fixture(scope="module")
def rosdep_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A ROS_HOME of its own whose sources list names rosdistro's rules and ours, updated once
    (every active distribution of the copied index) from files only."""
    if not (ROSDISTRO / "index-v4.yaml").is_file():
        pytest.skip(f"no copy of ros/rosdistro at {ROSDISTRO}")
    if not ROSDEP.is_file():
        pytest.skip(f"rosdep is not installed beside {sys.executable}: pip install -e '.[test]'")
    home = tmp_path_factory.mktemp("ros_home")
    sources = home / "sources.list.d"
    sources.mkdir()
    rosdistro_rules = (ROSDISTRO / "rosdep" / name for name in ("base.yaml", "python.yaml"))
    (sources / "20-default.list").write_text("".join(f"yaml {path.as_uri()}\n" for path in rosdistro_rules))
    (sources / "50-ortf_ros.list").write_text(f"yaml {OWN_RULES.as_uri()}\n")  # the README's line
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ROS", "AMENT_", "COLCON_"))}
    env.update(
        ROS_HOME=str(home),
        ROSDEP_SOURCE_PATH=str(sources),
        ROSDISTRO_INDEX_URL=(ROSDISTRO / "index-v4.yaml").as_uri(),
        # rosdep refuses to list pip commands for a Python that PEP 668 guards; --simulate runs none
        PIP_BREAK_SYSTEM_PACKAGES="1",
    )
    update = run_rosdep(env, "update")
    assert update.returncode == 0 and "ERROR" not in update.stderr, update.stdout + update.stderr
    for distro, _ in PAIRS:
        assert f'Add distro "{distro}"' in update.stdout, update.stdout
    return env


@pytest.fixture(scope="module")
def resolutions(rosdep_env: dict[str, str]) -> dict[tuple[str, str], Resolution]:
    """Every key of package.xml that rosdep resolves, for each pair (a key without a rule is
    left out, and test_every_key_resolves names it)."""
    keys = sorted(package_keys())
    return {
        (distro, os_name): parse_resolve(
            run_rosdep(rosdep_env, "resolve", *keys, "--rosdistro", distro, "--os", os_name).stdout
        )
        for distro, os_name in PAIRS
    }


@pytest.mark.parametrize(("distro", "os_name"), PAIRS)
def test_rosdep_install_resolves_the_package(
    rosdep_env: dict[str, str], resolutions: dict[tuple[str, str], Resolution], distro: str, os_name: str
) -> None:
    """The user's command, given the checkout as a workspace's src/ortf_ros. (--reinstall: every
    package is listed, whatever this machine has, and pip is not asked what it has, which is slow.)
    With --ignore-src, ROS packages on AMENT_PREFIX_PATH count as there: a sourced ROS on a user's
    machine, here the ROS wheels of a venv whose .pth puts it on that path for rosdep too."""
    result = run_rosdep(
        rosdep_env,
        *("install", "--simulate", "--reinstall", "--from-paths", str(REPO), "--ignore-src", "-y"),
        *("--rosdistro", distro, "--os", os_name),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ERROR" not in result.stderr, result.stderr
    installed: set[tuple[str, str]] = set()
    installer = ""
    for line in result.stdout.splitlines():  # "#[pip] Installation commands:", "  pip3 install -U -I av"
        if line.startswith("#[") and "]" in line:
            installer = line[2 : line.index("]")]
        elif line.strip():
            installed.add((installer, line.split()[-1]))
    expected = {
        (installer, package) for installer, packages in resolutions[distro, os_name].values() for package in packages
    }
    assert sorted(installed - expected) == []
    assert sorted(package for _, package in expected - installed if not package.startswith(f"ros-{distro}-")) == []


def test_rosdep_reads_only_this_package_xml(rosdep_env: dict[str, str]) -> None:
    """ros/*/package.xml (interface packages only the tests build) stay out, as rosdep searches
    no further in a folder with a package.xml. Found, they would add keys of their own (their
    build tools and generators)."""
    result = run_rosdep(rosdep_env, "keys", "--from-paths", str(REPO), "--rosdistro", "jazzy")
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == package_keys()


@pytest.mark.parametrize(("distro", "os_name"), PAIRS)
def test_every_key_resolves(resolutions: dict[tuple[str, str], Resolution], distro: str, os_name: str) -> None:
    resolved = resolutions[distro, os_name]
    assert sorted(package_keys() - resolved.keys()) == [], f"no rule on {os_name} for {distro}"
    for key, (installer, packages) in resolved.items():
        assert installer in ("apt", "pip") and packages, (key, installer, packages)


@pytest.mark.parametrize(("distro", "os_name"), PAIRS)
def test_ros_keys_are_packages_of_the_distribution(
    resolutions: dict[tuple[str, str], Resolution], distro: str, os_name: str
) -> None:
    released = released_packages(distro)
    ros_keys = {key for key in package_keys() if not key.startswith("python")}
    assert sorted(ros_keys - released) == [], f"not released in {distro}"
    for key in ros_keys:
        assert resolutions[distro, os_name][key] == ("apt", [f"ros-{distro}-{key.replace('_', '-')}"])


@pytest.mark.parametrize(("distro", "os_name"), PAIRS)
def test_python_keys_install_what_setup_py_requires(
    resolutions: dict[tuple[str, str], Resolution], distro: str, os_name: str
) -> None:
    """Each pip package is spelled as setup.py names it; with the apt keys, the exec keys stand
    for install_requires exactly, and the test keys for requirements of the "test" extra."""
    install_requires, test_extra = setup_requirements()
    resolved = resolutions[distro, os_name]

    def pypi_names(tag: str) -> set[str]:
        names: set[str] = set()
        for key in package_keys([tag]) & resolved.keys():  # (one without a rule: test_every_key_resolves)
            installer, packages = resolved[key]
            if key in APT_KEYS:
                assert (installer, packages) == ("apt", [key]), key
                names.add(APT_KEYS[key])
            elif key.startswith("python"):
                assert installer == "pip", (key, installer, packages)
                names.update(packages)
        return names

    assert pypi_names("exec_depend") == install_requires
    assert pypi_names("test_depend") <= test_extra


def test_own_rules_are_pip_rules_rosdistro_lacks() -> None:
    """Ours add keys, never replace one of rosdistro's (the first source naming a key wins), and
    each is used by package.xml and installs one setup.py requirement the same way everywhere."""
    if not (ROSDISTRO / "rosdep" / "python.yaml").is_file():
        pytest.skip(f"no copy of ros/rosdistro at {ROSDISTRO}")
    rules: dict[str, dict[str, Any]] = yaml.safe_load(OWN_RULES.read_text())
    upstream: set[str] = set()
    for name in ("base.yaml", "python.yaml"):
        upstream.update(yaml.safe_load((ROSDISTRO / "rosdep" / name).read_text()))
    install_requires, test_extra = setup_requirements()
    assert sorted(rules.keys() & upstream) == []
    assert sorted(rules.keys() - package_keys()) == []
    for key, platforms in rules.items():
        assert key.startswith("python3-") and key.endswith("-pip"), key
        assert sorted(platforms) == ["debian", "osx", "ubuntu"], key
        packages = {tuple(platform["pip"]["packages"]) for platform in platforms.values()}
        assert len(packages) == 1, key
        ((name,),) = packages
        assert key == f"python3-{name.lower()}-pip", key
        assert name in install_requires | test_extra, key
