"""What every message builder of the scene (``messages``, ``camera_messages``,
``sensor_messages``) makes its messages with: the typestore of the recording format, and
the parts every message shares (a header, ROS 1's or ROS 2's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ortf_ros.format.units import NS
from ortf_ros.synthetic.scene import TeleopConfig
from ortf_ros.synthetic.typestore import typestore

Build = Callable[[int, int], Any]
"""A topic's message builder: (seq, header stamp) -> the message."""


class MessageFactory:
    """The typestore of a scene's recording format, and its messages' common parts.

    ``config`` is read as each message is built (the live publisher gives it another
    ``start_ns`` once its clock starts, keeping whatever was cached)."""

    def __init__(self, config: TeleopConfig) -> None:
        self.config = config
        self.ros1 = config.fmt == "ros1"
        self.store = typestore(self.ros1, config.controller_layout, config.audio)
        self.types = self.store.types
        self.clock_ns = 0  # added to header stamps (``Messages.serialize``)

    def new(self, msgtype: str, **fields: Any) -> Any:
        """An instance of the typestore's class for ``msgtype``."""
        return self.types[msgtype](**fields)

    def header(self, stamp: int, frame_id: str, seq: int = 0) -> Any:
        stamp += self.clock_ns  # (a publisher on its own clock, while a message is built)
        time = self.new("builtin_interfaces/msg/Time", sec=stamp // NS, nanosec=stamp % NS)
        if self.ros1:
            return self.new("std_msgs/msg/Header", seq=seq, stamp=time, frame_id=frame_id)
        return self.new("std_msgs/msg/Header", stamp=time, frame_id=frame_id)
