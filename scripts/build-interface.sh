#!/usr/bin/env bash
# Build one ROS 2 interface package (msg/srv definitions and a CMakeLists.txt calling
# rosidl_generate_interfaces) and install it into a prefix that holds the ROS 2 Jazzy
# wheels (the venv scripts/setup-env.sh makes):
#
#   bash scripts/build-interface.sh PREFIX ros/PACKAGE
#
# Its build tree is kept in $CACHE (default .cache/ of this checkout) as
# <package>-build, so a second build only regenerates what changed. setup-env.sh
# runs it for every package under ros/; run it by hand after adding one.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="$(cd "$1" && pwd)"
SRC="$(cd "$2" && pwd)"
CACHE="${CACHE:-$ROOT/.cache}"
BUILD="$CACHE/$(basename "$SRC")-build"
mkdir -p "$CACHE"
# A build tree configured for another source dir (moved checkout) is useless.
if [[ -f "$BUILD/CMakeCache.txt" ]] \
  && ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$SRC" "$BUILD/CMakeCache.txt"; then
  rm -rf "$BUILD"
fi
CMAKE_PREFIX_PATH="$PREFIX" AMENT_PREFIX_PATH="$PREFIX" cmake -S "$SRC" -B "$BUILD" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -DPython3_EXECUTABLE="$PREFIX/bin/python" \
  -DBUILD_TESTING=OFF
cmake --build "$BUILD" -j "$(nproc)"
cmake --install "$BUILD"
