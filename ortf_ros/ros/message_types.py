"""Message classes by type name, for nodes that publish or subscribe to serialized CDR.

The player publishes bytes it built without ROS and a recorder keeps the bytes it
receives (``raw=True``); rclpy still needs the class of each topic's type to create the
publisher or subscription.
"""

from __future__ import annotations

import importlib
from typing import Any


def message_class(msgtype: str) -> Any:
    """The rclpy class of ``pkg/msg/Type``; ModuleNotFoundError when ``pkg`` is not installed."""
    package, _, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)
