"""Where a synthetic bag's messages are written: a rosbag2 directory (MCAP or SQLite,
optionally split into several storage files) or a ROS 1 bag, through rosbags' writers.

Split files are what ``ros2 bag record --max-bag-duration`` makes; rosbags writes one
storage file per bag, so the split is done here. Both sinks keep memory flat however
long the recording is.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Literal

import yaml
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.rosbag1 import Writer as Rosbag1Writer
from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin
from rosbags.rosbag2 import Writer as Rosbag2Writer
from rosbags.typesys.store import Typestore

from ortf_ros.synthetic.topics import TOPIC_AUDIO_INFO, TOPIC_ROBOT_DESCRIPTION, TOPIC_TF_STATIC

BagCompression = Literal["none", "file", "message", "storage", "bz2", "lz4"]
"""``file``/``message``: rosbag2 zstd per file or per message; ``storage``: MCAP zstd
chunks; ``bz2``/``lz4``: ROS 1 chunks."""

_LATCHED = (TOPIC_ROBOT_DESCRIPTION, TOPIC_TF_STATIC, TOPIC_AUDIO_INFO)
_INFINITE = QosTime(2147483647, 4294967295)


def _qos(latched: bool) -> list[Qos]:
    return [
        Qos(
            history=QosHistory.KEEP_LAST,
            depth=1 if latched else 10,
            reliability=QosReliability.RELIABLE,
            durability=QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE,
            deadline=_INFINITE,
            lifespan=_INFINITE,
            liveliness=QosLiveliness.AUTOMATIC,
            liveliness_lease_duration=_INFINITE,
            avoid_ros_namespace_conventions=False,
        )
    ]


class Rosbag2Sink:
    """A rosbag2 directory, split into ``<name>_<k>`` storage files every ``max_duration_ns``.

    rosbags' writer makes one storage file per bag, so each split file is written as its
    own bag in a subdirectory, moved up when closed, and the metadata merged at the end.
    """

    def __init__(
        self,
        path: Path,
        storage: StoragePlugin,
        compression: BagCompression,
        max_duration_ns: int | None,
        topics: dict[str, str],
        store: Typestore,
    ) -> None:
        self.path, self.storage, self.compression = path, storage, compression
        self.max_duration_ns = max_duration_ns
        self.topics, self.store = topics, store
        self.path.mkdir(parents=True)
        self.segment_meta: list[dict[str, Any]] = []
        self.files: list[Path] = []
        self.writer: Rosbag2Writer | None = None
        self.connections: dict[str, Any] = {}
        self.segment_start = 0

    def _open_segment(self, first_ns: int) -> None:
        index = len(self.segment_meta)
        writer = Rosbag2Writer(self.path / f"{self.path.name}_{index}", version=9, storage_plugin=self.storage)
        if self.compression in ("file", "message"):
            mode = CompressionMode.FILE if self.compression == "file" else CompressionMode.MESSAGE
            writer.set_compression(mode, CompressionFormat.ZSTD)
        elif self.compression == "storage":
            writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        writer.open()
        self.connections = {
            topic: writer.add_connection(
                topic, msgtype, typestore=self.store, offered_qos_profiles=_qos(topic in _LATCHED)
            )
            for topic, msgtype in self.topics.items()
        }
        self.writer = writer
        self.segment_start = first_ns

    def _close_segment(self) -> None:
        writer, self.writer = self.writer, None
        assert writer is not None
        writer.close()
        meta = yaml.safe_load((writer.path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        for name in meta["relative_file_paths"]:
            target = self.path / name
            (writer.path / name).rename(target)
            self.files.append(target)
        shutil.rmtree(writer.path)
        self.segment_meta.append(meta)

    def write(self, topic: str, receive_ns: int, data: bytes) -> None:
        if self.writer is not None and self.max_duration_ns and receive_ns - self.segment_start >= self.max_duration_ns:
            self._close_segment()
        if self.writer is None:
            self._open_segment(receive_ns)
        assert self.writer is not None
        self.writer.write(self.connections[topic], receive_ns, data)

    def close(self) -> None:
        if self.writer is None and not self.segment_meta:
            self._open_segment(0)
        if self.writer is not None:
            self._close_segment()
        metas = self.segment_meta
        starts = [m["starting_time"]["nanoseconds_since_epoch"] for m in metas if m["message_count"]]
        ends = [
            m["starting_time"]["nanoseconds_since_epoch"] + m["duration"]["nanoseconds"]
            for m in metas
            if m["message_count"]
        ]
        merged = dict(metas[0])
        counts: dict[str, int] = {}
        for meta in metas:
            for entry in meta["topics_with_message_count"]:
                name = entry["topic_metadata"]["name"]
                counts[name] = counts.get(name, 0) + entry["message_count"]
        merged["topics_with_message_count"] = [
            {**entry, "message_count": counts[entry["topic_metadata"]["name"]]}
            for entry in metas[0]["topics_with_message_count"]
        ]
        merged["relative_file_paths"] = [f.name for f in self.files]
        merged["files"] = [file for meta in metas for file in meta["files"]]
        merged["message_count"] = sum(m["message_count"] for m in metas)
        merged["starting_time"] = {"nanoseconds_since_epoch": min(starts) if starts else 0}
        merged["duration"] = {"nanoseconds": (max(ends) - min(starts)) if starts else 0}
        text = yaml.safe_dump({"rosbag2_bagfile_information": merged}, sort_keys=False)
        (self.path / "metadata.yaml").write_text(text)

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()


class Rosbag1Sink:
    """A ROS 1 bag file; ``latching`` as ``rosbag record`` marks the latched topics."""

    def __init__(self, path: Path, compression: BagCompression, topics: dict[str, str], store: Typestore) -> None:
        self.writer = Rosbag1Writer(path)
        if compression in ("bz2", "lz4"):
            fmt = Rosbag1Writer.CompressionFormat.BZ2 if compression == "bz2" else Rosbag1Writer.CompressionFormat.LZ4
            self.writer.set_compression(fmt)
        self.writer.open()
        self.connections = {
            topic: self.writer.add_connection(
                topic, msgtype, typestore=store, callerid="/ortf_teleop", latching=1 if topic in _LATCHED else 0
            )
            for topic, msgtype in topics.items()
        }
        self.files = [path]
        self._flushed = 1

    def write(self, topic: str, receive_ns: int, data: bytes) -> None:
        self.writer.write(self.connections[topic], receive_ns, data)
        chunks = self.writer.chunks
        if len(chunks) > self._flushed:
            # rosbags keeps every written chunk's (time, offset) index for the final chunk
            # infos, which only need the counts: keep O(1) stand-ins so memory stays flat.
            for chunk in chunks[self._flushed - 1 : -1]:
                for cid, items in chunk.connections.items():
                    chunk.connections[cid] = range(len(items))  # type: ignore[assignment]
            self._flushed = len(chunks)

    def close(self) -> None:
        self.writer.close()

    def abort(self) -> None:
        self.writer.abort()
