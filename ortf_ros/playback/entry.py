"""``ortf_player``'s console script: a ROS-free module, so that ``pip install ortf_ros``
on a machine without ROS 2 gives one clear line instead of an import traceback."""

from __future__ import annotations

import sys

ROS_PACKAGES = ("rclpy", "rcl_interfaces", "builtin_interfaces", "std_msgs", "std_srvs", "rosgraph_msgs")
"""Top-level modules of ROS 2 that the node imports (message packages included)."""


def main() -> int:
    try:
        from ortf_ros.playback import node
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in ROS_PACKAGES and not missing.endswith("_msgs"):
            raise
        print(
            f"ortf_player: needs ROS 2 ({missing} is not importable): source a ROS 2 install "
            "(Humble or Jazzy) or use a venv with its PyPI wheels (scripts/setup-env.sh)",
            file=sys.stderr,
        )
        return 1
    return node.main()


if __name__ == "__main__":
    sys.exit(main())
