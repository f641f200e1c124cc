"""What every storage format's reader gives ``BagSource``: its connections, their times,
and their messages (``StorageFile``); and what a reader of a file cut short salvaged
(``Salvage``).

One module per format implements the protocol: ``mcap_file`` (indexed MCAP, through
rosbags), ``mcap_salvage`` (an MCAP without its summary, scanned), ``sqlite_file``
(rosbag2's sqlite3), ``ros1_bag`` (ROS 1, from its index or scanned). ``bag.BagSource``
picks one by magic number and merges their messages by time.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from ortf_ros.errors import ConversionError, SourceError, describe
from ortf_ros.pipeline.samples import DefinitionFormat, Payload, Serialization
from ortf_ros.pipeline.sources.mcap_chunks import Batch

MessageCompression = Literal["none", "message", "detect"]
"""rosbag2's per-message zstd: never, always, or told by each payload's magic number."""

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

Message = tuple[int, int, Payload]  # receive time, the connection's key, payload


@dataclass(frozen=True)
class TopicInfo:
    """One topic of a recording (one entry per topic and type; a topic recorded with
    two types, which no converter can map, is listed twice)."""

    topic: str
    msgtype: str  # ROS 2 style, e.g. "tf2_msgs/msg/TFMessage"
    original_msgtype: str  # as the bag names it, e.g. "tf/tfMessage" in a ROS 1 bag
    count: int
    first_ns: int | None  # receive time of the first message; None when count == 0
    last_ns: int | None
    definition: str  # message definition text as stored in the bag ("" if none)
    definition_format: DefinitionFormat | Literal[""]  # "" when the bag holds none
    serialization: Serialization
    digest: str = ""  # ROS 1 md5sum or ROS 2 RIHS01 hash, when the bag has one
    latched: bool = False  # ROS 1 latching, or a rosbag2 transient-local publisher

    @property
    def duration_ns(self) -> int:
        return 0 if self.first_ns is None or self.last_ns is None else self.last_ns - self.first_ns

    @property
    def rate_hz(self) -> float | None:
        """Mean message rate; None for fewer than two messages or no time span."""
        if self.count < 2 or self.duration_ns <= 0:
            return None
        return (self.count - 1) * 1e9 / self.duration_ns


@dataclass(frozen=True)
class StoredConnection:
    """A connection of one storage file, with a key unique within the source."""

    key: int
    topic: str
    msgtype: str
    original_msgtype: str
    definition: str
    definition_format: DefinitionFormat | Literal[""]  # "" when the bag holds none
    serialization: Serialization
    digest: str
    latched: bool
    count: int


@dataclass(frozen=True)
class Salvage:
    """What a reader made of a storage file cut short (a recorder killed mid-write, a
    copy interrupted): the messages of its complete records, up to ``readable`` bytes."""

    name: str
    problem: str  # why the file cannot be read whole, e.g. "no summary or footer"
    size: int  # bytes in the file
    readable: int  # bytes from the start that hold the salvaged records
    messages: int  # messages salvaged
    last_ns: int | None  # receive time of the last one


class StorageFile(Protocol):
    """One storage file of the recording."""

    name: str
    conns: list[StoredConnection]
    salvage: Salvage | None  # None: the file was read whole

    def time_range(self) -> tuple[int, int] | None: ...

    def topic_times(self) -> dict[int, tuple[int, int]]: ...

    def messages(self, keys: Collection[int]) -> Iterator[Message]:
        """The messages of the connections ``keys``, in receive-time order."""

    def batches(self, keys: Collection[int], runs: Collection[int]) -> Iterator[Batch] | None:
        """The messages a chunk at a time, ``runs`` keys' as runs; None where the storage has no such chunks."""

    def close(self) -> None: ...


def fail(name: str, problem: str) -> SourceError:
    """The one-line error of a storage file that cannot be read: ``NAME: problem``."""
    return SourceError(f"{name}: {problem}")


_Item = TypeVar("_Item")


def guarded(name: str, what: str, stream: Iterator[_Item]) -> Iterator[_Item]:
    """Re-raise anything a reader throws on bad data as a one-line SourceError."""
    try:
        yield from stream
    except ConversionError:
        raise
    except Exception as err:
        raise fail(name, f"{what} ({describe(err)})") from err
