"""A rosbag2 storage file (``.db3`` or ``.mcap``) opened with rosbags' Reader: what the
sqlite3 and the indexed MCAP readers share (connections, per-message compression, and
rosbags' own message loop where nothing faster applies)."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Literal

from rosbags.interfaces import Connection, ConnectionExtRosbag2, MessageDefinitionFormat, QosDurability
from rosbags.rosbag2 import Reader as Rosbag2Reader

from ortf_ros.errors import UnsupportedSerializationError, describe
from ortf_ros.pipeline.decode import canonical_msgtype
from ortf_ros.pipeline.samples import DefinitionFormat
from ortf_ros.pipeline.sources.base import (
    Message,
    MessageCompression,
    Salvage,
    StoredConnection,
    fail,
    guarded,
)
from ortf_ros.pipeline.sources.compression import decompressed_messages

_ROS2_DEFINITION_FORMATS: dict[MessageDefinitionFormat, DefinitionFormat] = {
    MessageDefinitionFormat.MSG: "ros2msg",
    MessageDefinitionFormat.IDL: "ros2idl",
}


class RosbagsFile:
    """A storage file rosbags' Reader opened; subclasses read faster where their format lets them."""

    format_name = "rosbag2"

    def __init__(self, name: str, path: Path, compression: MessageCompression, first_key: int) -> None:
        self.name = name
        self.path = path
        self.compression = compression
        self.salvage: Salvage | None = None
        try:
            self.reader = Rosbag2Reader(path)
            self.reader.open()
        except Exception as err:
            raise fail(name, f"unreadable {self.format_name} bag ({describe(err)})") from err
        self.rosbags_conns: dict[int, Connection] = {}
        self.conns: list[StoredConnection] = []
        for offset, conn in enumerate(self.reader.connections):
            ext = conn.ext
            assert isinstance(ext, ConnectionExtRosbag2)
            if ext.serialization_format != "cdr":
                self.reader.close()
                raise UnsupportedSerializationError(
                    f"{name}: topic {conn.topic}: serialization {ext.serialization_format!r}, expected 'cdr'"
                )
            fmt: DefinitionFormat | Literal[""] = _ROS2_DEFINITION_FORMATS.get(conn.msgdef.format, "")
            key = first_key + offset
            self.rosbags_conns[key] = conn
            self.conns.append(
                StoredConnection(
                    key=key,
                    topic=conn.topic,
                    msgtype=canonical_msgtype(conn.msgtype),
                    original_msgtype=conn.msgtype,
                    definition=conn.msgdef.data if fmt else "",
                    definition_format=fmt,
                    serialization="cdr",
                    digest=conn.digest,
                    latched=any(q.durability == QosDurability.TRANSIENT_LOCAL for q in ext.offered_qos_profiles),
                    count=conn.msgcount,
                )
            )

    def time_range(self) -> tuple[int, int] | None:
        if not self.reader.message_count:
            return None
        return self.reader.start_time, self.reader.end_time - 1

    def topic_times(self) -> dict[int, tuple[int, int]]:
        by_id = {conn.id: key for key, conn in self.rosbags_conns.items()}
        try:
            times = self._index_times()
        except Exception as err:
            raise fail(self.name, f"damaged message index ({describe(err)})") from err
        if times is None:  # no index to read: one pass over the messages
            times = {}
            for stamp, key, _ in self.messages(list(self.rosbags_conns)):
                first, last = times.get(key, (stamp, stamp))
                times[key] = (min(first, stamp), max(last, stamp))
            return times
        return {by_id[cid]: span for cid, span in times.items() if cid in by_id}

    def _index_times(self) -> dict[int, tuple[int, int]] | None:
        """First/last receive time per rosbags connection id from the storage's index; None without one."""
        return None

    def wanted(self, keys: Collection[int]) -> dict[int, int]:
        """rosbags connection id -> key, of the connections ``keys``."""
        return {self.rosbags_conns[key].id: key for key in keys if key in self.rosbags_conns}

    def messages(self, keys: Collection[int]) -> Iterator[Message]:
        wanted = self.wanted(keys)
        if not wanted:
            return iter(())
        return guarded(self.name, "damaged message data", decompressed_messages(self._stored(wanted), self.compression))

    def _stored(self, wanted: dict[int, int]) -> Iterator[Message]:
        """The messages as the file stores them (compressed, if they are), by rosbags' loop."""
        connections = [conn for conn in self.reader.connections if conn.id in wanted]
        return ((stamp, wanted[conn.id], data) for conn, stamp, data in self.reader.messages(connections=connections))

    def close(self) -> None:
        self.reader.close()
