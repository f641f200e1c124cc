"""The nodes' console scripts (``ortf_player``, ``ortf_recorder``, ``ortf_scene_publisher``),
kept free of ROS imports.

``pip install ortf_ros`` on a machine without ROS 2 installs these scripts too. Each one
imports its node module only when it runs, so a missing ROS is one line naming what
cannot be imported and how to get ROS 2, with exit code 2 (what is missing is the
environment, not anything the node did), instead of a traceback; any other import error
is a bug and is raised as it is.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

from ortf_ros.errors import EXIT_INTERRUPTED, EXIT_USAGE, GET_ROS_2

ROS_PACKAGES = (
    "rclpy",
    "rcl_interfaces",
    "builtin_interfaces",
    "std_msgs",
    "std_srvs",
    "rosgraph_msgs",
    "diagnostic_msgs",
)
"""Top-level modules of ROS 2 that the nodes import (message packages included; any other
``*_msgs`` counts as ROS too)."""


def player() -> int:
    """``ortf_player``: ``ortf_ros.ros.player_node``."""
    return _run_node("ortf_player", "ortf_ros.ros.player_node")


def recorder() -> int:
    """``ortf_recorder``: ``ortf_ros.ros.recorder_node``."""
    return _run_node("ortf_recorder", "ortf_ros.ros.recorder_node")


def scene_publisher() -> int:
    """``ortf_scene_publisher``: ``ortf_ros.ros.scene_publisher``."""
    return _run_node("ortf_scene_publisher", "ortf_ros.ros.scene_publisher")


def _run_node(script: str, module_name: str) -> int:
    """Import ``module_name`` and return its ``main()``; 2 with one line on stderr when
    ROS 2 is not importable."""
    try:
        module = importlib.import_module(module_name)
    except KeyboardInterrupt:  # Ctrl-C while the node's libraries load: no traceback of the import
        return EXIT_INTERRUPTED
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in ROS_PACKAGES and not missing.endswith("_msgs"):
            raise
        print(f"{script}: needs ROS 2 ({missing} is not importable): {GET_ROS_2}", file=sys.stderr)
        return EXIT_USAGE
    main: Callable[[], int] = module.main
    return main()
