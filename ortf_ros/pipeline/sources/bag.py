"""The offline source: one recording on disk as a time-ordered stream of ``RawMessage``.

``BagSource`` reads every recording layout a ROS user has, with no ROS install:

- a rosbag2 directory (``metadata.yaml`` + sqlite3 ``.db3`` or ``.mcap`` files), also
  split into several files and compressed per file or per message (zstd);
- a standalone ``.db3`` or ``.mcap`` file, with no ``metadata.yaml`` (also zstd
  compressed, ``.db3.zstd``), and old ones with legacy ``pkg/Type`` names;
- a ROS 1 ``.bag`` (v2.0; plain, bz2 or lz4 chunks), also the legacy ``tf/tfMessage``.

Several paths are one recording split over files (``rosbag record --split``): their
messages are merged by receive time.

rosbags reads the rosbag2 storage files (its unified ``Reader`` opens bare ``.db3`` and
``.mcap`` files). The directory layer (metadata, split files, compression) is done here,
so the files of a split recording are merged by time rather than concatenated. ROS 1 is
read here too: rosbags' ROS 1 reader keeps an index entry per message in memory, which
grows with the bag, while this one holds one decompressed chunk at a time.

Memory is bounded by the storage's chunk size (about 1 MB for rosbags' writers), never by
the length of the recording: messages are read lazily, chunk by chunk or row by row.

Every problem with the input (missing path, unknown format, truncated or damaged file,
missing split file) is a ``ConversionError`` whose one-line message names the file.
"""

from __future__ import annotations

import bz2
import heapq
import itertools
import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path, PurePath
from types import TracebackType
from typing import Any, BinaryIO, Literal, Protocol, TypeVar

import numpy as np
import yaml
from backports import zstd
from lz4.frame import decompress as lz4_decompress  # type: ignore[import-untyped]
from rosbags.interfaces import Connection, ConnectionExtRosbag2, MessageDefinitionFormat, QosDurability
from rosbags.rosbag2 import Reader as Rosbag2Reader

from ortf_ros.errors import ConversionError, describe
from ortf_ros.io.text import read_text
from ortf_ros.pipeline.decode import canonical_msgtype
from ortf_ros.pipeline.samples import Payload, RawBatch, RawMessage, RawRun, Serialization
from ortf_ros.pipeline.sources.mcap_chunks import Batch, chunk_batches, chunk_messages, in_sequence

DefinitionFormat = Literal["ros1msg", "ros2msg", "ros2idl", ""]
_Compression = Literal["none", "message", "detect"]  # per-message zstd: never, always, by magic number
"""How ``TopicInfo.definition`` is written (MCAP's schema encoding names); "" when the
bag holds no definition. ``ros1msg`` and ``ros2msg`` both parse with rosbags'
``get_types_from_msg``, ``ros2idl`` with ``get_types_from_idl``."""

# Types whose name changed between ROS 1 and ROS 2 but whose wire format did not.

_ROS1_MAGIC = b"#ROSBAG V"
_MCAP_MAGIC = b"\x89MCAP0\r\n"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BATCH_MESSAGES = 256  # messages per ``BagSource.batches`` batch, where the storage has no chunks to follow
_SENTINEL = -1  # connection key of a chunk's start marker in the merge (never yielded)


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
    definition_format: DefinitionFormat
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
class _Conn:
    """A connection of one storage file, with a key unique within the source."""

    key: int
    topic: str
    msgtype: str
    original_msgtype: str
    definition: str
    definition_format: DefinitionFormat
    serialization: Serialization
    digest: str
    latched: bool
    count: int


class _Part(Protocol):
    """One storage file of the recording."""

    name: str
    conns: list[_Conn]

    def time_range(self) -> tuple[int, int] | None: ...

    def topic_times(self) -> dict[int, tuple[int, int]]: ...

    def messages(self, keys: Collection[int]) -> Iterator[tuple[int, int, Payload]]: ...

    def batches(self, keys: Collection[int], runs: Collection[int]) -> Iterator[Batch] | None:
        """The messages a chunk at a time, ``runs`` keys' as runs; None where the storage has no such chunks."""

    def close(self) -> None: ...


def _fail(name: str, problem: str) -> ConversionError:
    return ConversionError(f"{name}: {problem}")


_Item = TypeVar("_Item")


def _guarded(name: str, what: str, stream: Iterator[_Item]) -> Iterator[_Item]:
    """Re-raise anything a reader throws on bad data as a one-line ConversionError."""
    try:
        yield from stream
    except ConversionError:
        raise
    except Exception as err:
        raise _fail(name, f"{what} ({describe(err)})") from err


# ---------------------------------------------------------------- rosbag2 storage files


_ROS2_DEFINITION_FORMATS: dict[MessageDefinitionFormat, DefinitionFormat] = {
    MessageDefinitionFormat.MSG: "ros2msg",
    MessageDefinitionFormat.IDL: "ros2idl",
}


_INDEX_TIMES: dict[tuple[str, int, int], dict[int, tuple[int, int]]] = {}  # see _mcap_index_times
_INDEX_TIMES_MAX = 64


class _Rosbag2File:
    """A ``.db3`` or ``.mcap`` file read with rosbags' Reader."""

    def __init__(
        self, name: str, path: Path, kind: Literal["sqlite3", "mcap"], compression: _Compression, first_key: int
    ) -> None:
        self.name = name
        self.path = path
        self.kind = kind
        self.compression = compression
        try:
            self.reader = Rosbag2Reader(path)
            self.reader.open()
        except Exception as err:
            raise _fail(name, f"unreadable {'MCAP' if kind == 'mcap' else 'sqlite3'} bag ({describe(err)})") from err
        self.rosbags_conns: dict[int, Connection] = {}
        self.conns: list[_Conn] = []
        for offset, conn in enumerate(self.reader.connections):
            ext = conn.ext
            assert isinstance(ext, ConnectionExtRosbag2)
            if ext.serialization_format != "cdr":
                self.reader.close()
                raise _fail(name, f"topic {conn.topic}: serialization {ext.serialization_format!r}, expected 'cdr'")
            fmt = _ROS2_DEFINITION_FORMATS.get(conn.msgdef.format, "")
            key = first_key + offset
            self.rosbags_conns[key] = conn
            self.conns.append(
                _Conn(
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
            times = self._sqlite_times() if self.kind == "sqlite3" else self._mcap_index_times()
        except Exception as err:
            raise _fail(self.name, f"damaged message index ({describe(err)})") from err
        if times is None:  # no index to read: one pass over the messages
            times = {}
            for stamp, key, _ in self.messages(list(self.rosbags_conns)):
                first, last = times.get(key, (stamp, stamp))
                times[key] = (min(first, stamp), max(last, stamp))
            return times
        return {by_id[cid]: span for cid, span in times.items() if cid in by_id}

    def _sqlite_times(self) -> dict[int, tuple[int, int]]:
        import apsw

        db = apsw.Connection(f"file:{self.path}?immutable=1", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        try:
            rows = db.execute("SELECT topic_id, MIN(timestamp), MAX(timestamp) FROM messages GROUP BY topic_id")
            return {int(cid): (int(first), int(last)) for cid, first, last in rows}
        finally:
            db.close()

    def _mcap_index_times(self) -> dict[int, tuple[int, int]] | None:
        """Per-channel first/last log time from the MCAP message index records (no chunk is read).

        ``ortf-bag2ortf`` opens a recording twice in one process (for its mapping, then to
        convert it; with ``--jobs``, the conversion is another process), and the records
        are spread over the whole file: what they say is kept per file and version.
        """
        chunks = getattr(self.reader.storage, "chunks", None)
        if not chunks or any(not getattr(chunk, "message_index_offsets", None) for chunk in chunks):
            return None
        stat = self.path.stat()
        version = (str(self.path.resolve()), stat.st_size, stat.st_mtime_ns)
        known = _INDEX_TIMES.get(version)
        if known is None:
            if len(_INDEX_TIMES) >= _INDEX_TIMES_MAX:
                _INDEX_TIMES.clear()
            known = _INDEX_TIMES[version] = self._read_index_times(chunks)
        return dict(known)

    def _read_index_times(self, chunks: list[Any]) -> dict[int, tuple[int, int]]:
        times: dict[int, tuple[int, int]] = {}
        with self.path.open("rb") as f:
            for chunk in chunks:
                for offset in chunk.message_index_offsets.values():
                    f.seek(offset)
                    head = f.read(15)
                    op, length, channel, size = struct.unpack("<BQHI", head)
                    if op != 0x07 or size > length:
                        raise ValueError(f"no message index record at offset {offset}")
                    stamps = np.frombuffer(f.read(size), dtype="<u8").reshape(-1, 2)[:, 0]
                    if stamps.size:
                        first, last = int(stamps.min()), int(stamps.max())
                        if channel in times:
                            first, last = min(first, times[channel][0]), max(last, times[channel][1])
                        times[channel] = (first, last)
        return times

    def messages(self, keys: Collection[int]) -> Iterator[tuple[int, int, Payload]]:
        wanted = {self.rosbags_conns[key].id: key for key in keys if key in self.rosbags_conns}
        if not wanted:
            return iter(())
        connections = [conn for conn in self.reader.connections if conn.id in wanted]
        return _guarded(self.name, "damaged message data", self._messages(connections, wanted))

    def _messages(self, connections: list[Connection], wanted: dict[int, int]) -> Iterator[tuple[int, int, Payload]]:
        always, detect = self.compression == "message", self.compression == "detect"
        for stamp, key, data in self._stored(connections, wanted):
            # CDR starts with a zero byte, a zstd frame never does: bare files need no metadata.
            if always or (detect and data[:4] == _ZSTD_MAGIC):
                data = zstd.decompress(data)
            yield stamp, key, data

    def batches(self, keys: Collection[int], runs: Collection[int]) -> Iterator[Batch] | None:
        """An indexed MCAP file's chunks, one batch each (``chunk_batches``); None for sqlite3
        and for chunks that overlap in time."""
        wanted = {self.rosbags_conns[key].id: key for key in keys if key in self.rosbags_conns}
        chunks = getattr(self.reader.storage, "chunks", None) if self.kind == "mcap" else None
        if not chunks or not in_sequence(chunks, wanted):
            return None
        if not wanted:
            return iter(())
        batches = chunk_batches(self.path, chunks, wanted, () if self.compression == "message" else runs)
        if self.compression != "none":
            batches = map(self._decompressed, batches)
        return _guarded(self.name, "damaged message data", batches)

    def _decompressed(self, batch: Batch) -> Batch:
        """The batch with messages compressed one by one (zstd) decompressed; a run of them
        (or of messages too short to tell) becomes single messages (in time order; a tie
        keeps the single message first)."""
        always = self.compression == "message"
        magic = np.frombuffer(_ZSTD_MAGIC, np.uint8)
        runs, loose = [], []
        for run in batch.runs:
            if any(len(data[0]) < len(magic) or (data[:, : len(magic)] == magic).all(1).any() for _, data in run.parts):
                times = run.times.tolist()
                loose += [
                    (times[row], run.key, message.tobytes())
                    for rows, data in run.parts
                    for row, message in zip(rows.tolist(), data, strict=True)
                ]
            else:
                runs.append(run)
        messages = [
            (time, key, zstd.decompress(data) if always or data[:4] == _ZSTD_MAGIC else data)
            for time, key, data in [*batch.messages, *loose]
        ]
        if loose:
            messages.sort(key=itemgetter(0))
        return Batch(messages, runs)

    def _stored(self, connections: list[Connection], wanted: dict[int, int]) -> Iterator[tuple[int, int, Payload]]:
        """The messages as the file stores them: an indexed MCAP file's read by ``chunk_messages``."""
        chunks = getattr(self.reader.storage, "chunks", None) if self.kind == "mcap" else None
        if chunks:
            return chunk_messages(self.path, chunks, wanted)
        return ((stamp, wanted[conn.id], data) for conn, stamp, data in self.reader.messages(connections=connections))

    def close(self) -> None:
        self.reader.close()


# ---------------------------------------------------------------- ROS 1 bags


@dataclass(frozen=True)
class _ChunkInfo:
    pos: int
    start_ns: int
    end_ns: int
    counts: dict[int, int]  # connection id -> messages in the chunk


def _header_fields(buf: bytes | memoryview, start: int, end: int) -> dict[str, bytes]:
    """The ``name=value`` fields of a ROS 1 record header."""
    fields: dict[str, bytes] = {}
    pos = start
    while pos < end:
        (size,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if pos + size > end:
            raise ValueError("record header field runs past its header")
        field = bytes(buf[pos : pos + size])
        name, sep, value = field.partition(b"=")
        if not sep:
            raise ValueError("record header field without '='")
        fields[name.decode("ascii")] = value
        pos += size
    return fields


def _u32(fields: dict[str, bytes], name: str) -> int:
    return int(struct.unpack("<I", fields[name])[0])


def _u64(fields: dict[str, bytes], name: str) -> int:
    return int(struct.unpack("<Q", fields[name])[0])


def _time(fields: dict[str, bytes], name: str) -> int:
    sec, nsec = struct.unpack("<II", fields[name])
    return int(sec) * 1_000_000_000 + int(nsec)


_OP_MSG, _OP_BAG, _OP_INDEX, _OP_CHUNK, _OP_CHUNK_INFO, _OP_CONN = 0x02, 0x03, 0x04, 0x05, 0x06, 0x07
_ROS1_DECOMPRESS: dict[bytes, Callable[[bytes], bytes]] = {
    b"none": lambda data: data,
    b"bz2": bz2.decompress,
    b"lz4": lz4_decompress,
}
_INDEX_DTYPE = np.dtype([("sec", "<u4"), ("nsec", "<u4"), ("offset", "<u4")])


class _Ros1Bag:
    """A ROS 1 bag v2.0, read from its index: one chunk in memory at a time."""

    def __init__(self, name: str, path: Path, first_key: int) -> None:
        self.name = name
        self.path = path
        try:
            self.file: BinaryIO = path.open("rb")
        except OSError as err:
            raise _fail(name, f"cannot open ({err.strerror})") from err
        try:
            self.size = os.fstat(self.file.fileno()).st_size
            self._read_index(first_key)
        except ConversionError:
            self.file.close()
            raise
        except Exception as err:
            self.file.close()
            raise _fail(name, f"damaged ROS 1 bag index ({describe(err)})") from err

    def _read(self, size: int) -> bytes:
        data = self.file.read(size)
        if len(data) != size:
            raise _fail(self.name, f"truncated ROS 1 bag (record at byte {self.file.tell() - len(data)} cut short)")
        return data

    def _record(self) -> tuple[dict[str, bytes], int]:
        """Read a record header at the current position; returns its fields and data length."""
        (header_len,) = struct.unpack("<I", self._read(4))
        header = self._read(header_len)
        (data_len,) = struct.unpack("<I", self._read(4))
        return _header_fields(header, 0, header_len), int(data_len)

    def _read_index(self, first_key: int) -> None:
        magic = self.file.readline(32)
        if not magic.startswith(_ROS1_MAGIC):
            raise _fail(self.name, "not a ROS 1 bag")
        if magic.strip() != b"#ROSBAG V2.0":
            raise _fail(self.name, f"ROS 1 bag format {magic.strip()[9:].decode(errors='replace')}, expected 2.0")
        fields, data_len = self._record()
        if fields.get("op") != bytes([_OP_BAG]):
            raise _fail(self.name, "ROS 1 bag without a bag header record")
        index_pos, conn_count = _u64(fields, "index_pos"), _u32(fields, "conn_count")
        chunk_count = _u32(fields, "chunk_count")
        if fields.get("encryptor"):
            raise _fail(self.name, f"encrypted ROS 1 bag ({fields['encryptor'].decode(errors='replace')})")
        if index_pos == 0:
            raise _fail(self.name, "ROS 1 bag has no index (recording not closed?); `rosbag reindex` rebuilds it")
        if index_pos >= self.size:
            raise _fail(self.name, "truncated ROS 1 bag (its index lies past the end of the file)")
        self.file.seek(index_pos)
        raw: list[tuple[int, str, dict[str, bytes]]] = []
        for _ in range(conn_count):
            fields, data_len = self._record()
            if fields.get("op") != bytes([_OP_CONN]):
                raise _fail(self.name, "damaged ROS 1 bag index (expected a connection record)")
            body = self._read(data_len)
            raw.append((_u32(fields, "conn"), fields["topic"].decode(), _header_fields(body, 0, data_len)))
        chunks: list[_ChunkInfo] = []
        for _ in range(chunk_count):
            fields, data_len = self._record()
            if fields.get("op") != bytes([_OP_CHUNK_INFO]) or _u32(fields, "ver") != 1:
                raise _fail(self.name, "damaged ROS 1 bag index (expected a version 1 chunk info record)")
            data = self._read(data_len)
            counts = dict(struct.iter_unpack("<II", data))
            chunks.append(
                _ChunkInfo(_u64(fields, "chunk_pos"), _time(fields, "start_time"), _time(fields, "end_time"), counts)
            )
        self.chunks = sorted(chunks, key=lambda c: (c.start_ns, c.pos))
        totals: dict[int, int] = {}
        for chunk in chunks:
            for cid, count in chunk.counts.items():
                totals[cid] = totals.get(cid, 0) + count
        self.keys: dict[int, int] = {}  # connection id -> key
        self.conns = []
        for offset, (cid, topic, info) in enumerate(raw):
            original = info["type"].decode()
            key = first_key + offset
            self.keys[cid] = key
            self.conns.append(
                _Conn(
                    key=key,
                    topic=topic if topic.startswith("/") else f"/{topic}",
                    msgtype=canonical_msgtype(original),
                    original_msgtype=original,
                    definition=info.get("message_definition", b"").decode(),
                    definition_format="ros1msg" if info.get("message_definition") else "",
                    serialization="ros1",
                    digest=info.get("md5sum", b"").decode(),
                    latched=info.get("latching", b"0") == b"1",
                    count=totals.get(cid, 0),
                )
            )

    def time_range(self) -> tuple[int, int] | None:
        spans = [(c.start_ns, c.end_ns) for c in self.chunks if sum(c.counts.values())]
        if not spans:
            return None
        return min(s for s, _ in spans), max(e for _, e in spans)

    def topic_times(self) -> dict[int, tuple[int, int]]:
        """First/last time per connection from the index records after each chunk."""
        times: dict[int, tuple[int, int]] = {}
        try:
            for chunk in self.chunks:
                self.file.seek(chunk.pos)
                fields, data_len = self._record()
                self.file.seek(data_len, os.SEEK_CUR)
                for _ in range(len(chunk.counts)):
                    fields, data_len = self._record()
                    if fields.get("op") != bytes([_OP_INDEX]):
                        raise ValueError(f"expected an index data record after the chunk at byte {chunk.pos}")
                    entries = np.frombuffer(self._read(data_len), dtype=_INDEX_DTYPE)
                    if not entries.size:
                        continue
                    stamps = entries["sec"].astype(np.int64) * 1_000_000_000 + entries["nsec"]
                    key = self.keys[_u32(fields, "conn")]
                    first, last = int(stamps.min()), int(stamps.max())
                    if key in times:
                        first, last = min(first, times[key][0]), max(last, times[key][1])
                    times[key] = (first, last)
        except ConversionError:
            raise
        except Exception as err:
            raise _fail(self.name, f"damaged ROS 1 bag index ({describe(err)})") from err
        return times

    def _chunk(self, chunk: _ChunkInfo, wanted: dict[int, int]) -> Iterator[tuple[int, int, Payload]]:
        """A chunk's wanted messages in time order, read only when the merge reaches its start."""
        yield chunk.start_ns, _SENTINEL, b""
        self.file.seek(chunk.pos)
        fields, data_len = self._record()
        if fields.get("op") != bytes([_OP_CHUNK]):
            raise ValueError(f"no chunk record at byte {chunk.pos}")
        compression = fields.get("compression", b"none")
        if compression not in _ROS1_DECOMPRESS:
            raise _fail(self.name, f"chunk compression {compression.decode(errors='replace')!r} not supported")
        data = _ROS1_DECOMPRESS[compression](self._read(data_len))
        if len(data) != _u32(fields, "size"):
            raise ValueError(f"chunk at byte {chunk.pos} decompresses to {len(data)} bytes, not {_u32(fields, 'size')}")
        buf = memoryview(data)
        found: list[tuple[int, int, bytes]] = []
        pos, end = 0, len(buf)
        while pos < end:
            (header_len,) = struct.unpack_from("<I", buf, pos)
            record = _header_fields(buf, pos + 4, pos + 4 + header_len)
            pos += 4 + header_len
            (size,) = struct.unpack_from("<I", buf, pos)
            pos += 4
            if pos + size > end:
                raise ValueError(f"record in chunk at byte {chunk.pos} runs past the chunk")
            if record.get("op") == bytes([_OP_MSG]):
                key = wanted.get(_u32(record, "conn"))
                if key is not None:
                    found.append((_time(record, "time"), key, bytes(buf[pos : pos + size])))
            pos += size
        found.sort(key=itemgetter(0))
        yield from found

    def messages(self, keys: Collection[int]) -> Iterator[tuple[int, int, Payload]]:
        wanted = {cid: key for cid, key in self.keys.items() if key in keys}
        streams = [self._chunk(c, wanted) for c in self.chunks if any(cid in wanted for cid in c.counts)]
        merged = heapq.merge(*streams, key=itemgetter(0))
        return _guarded(self.name, "damaged ROS 1 chunk", (m for m in merged if m[1] != _SENTINEL))

    def batches(self, keys: Collection[int], runs: Collection[int]) -> Iterator[Batch] | None:
        return None  # (a ROS 1 chunk holds its messages' headers between them: no runs to cut out)

    def close(self) -> None:
        self.file.close()


# ---------------------------------------------------------------- the source


def _sniff(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(16)


def _not_a_recording(path: Path, head: bytes) -> str:
    """Why a file is no recording, in the words of what its name promised and what it holds
    (a text file named ``.mcap`` is not "an unknown format", it is not MCAP)."""
    promised = {".mcap": "MCAP", ".db3": "SQLite 3", ".bag": "ROS 1 bag", ".zstd": "zstd"}.get(path.suffix.lower())
    holds = "text" if all(32 <= byte < 127 or byte in b"\t\n\r" for byte in head) else "data of another format"
    if promised:
        article = "an" if promised[0] in "AEIOUMS" else "a"
        return f"not {article} {promised} file (it holds {holds}, without the {promised} signature at its start)"
    return f"not a recording (it holds {holds}); expected a rosbag2 directory, an .mcap, .db3 or ROS 1 .bag file"


class BagSource:
    """One recording as a stream of ``RawMessage`` in receive-time order.

    ``paths``: a rosbag2 directory, ``.mcap``/``.db3`` files, or ROS 1 ``.bag`` files; several
    paths are parts of one recording and are merged by time. Use as a context manager::

        with BagSource([Path("run.mcap")]) as bag:
            for info in bag.topics(): ...
            for msg in bag.messages({"/joint_states"}): ...
    """

    def __init__(self, paths: Path | str | Sequence[Path | str]) -> None:
        items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        if not items:
            raise ConversionError("no input given: expected a bag file or a rosbag2 directory")
        self.paths = tuple(Path(p) for p in items)
        for path in self.paths:
            if not path.exists():
                raise _fail(str(path), "no such file or directory")
        self._stack: ExitStack | None = None
        self._parts: list[_Part] = []
        self._topics: list[TopicInfo] | None = None
        self._tmp: Path | None = None

    # -- lifecycle

    def open(self) -> None:
        if self._stack is not None:
            raise ConversionError(f"{self.paths[0]}: bag source is already open")
        self._stack = ExitStack()
        try:
            for path in self.paths:
                self._open_path(path)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        stack, self._stack = self._stack, None
        self._parts = []
        self._topics = None
        self._tmp = None
        if stack is not None:
            stack.close()

    def __enter__(self) -> BagSource:
        self.open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _add(self, part: _Part) -> None:
        assert self._stack is not None
        self._stack.callback(part.close)
        self._parts.append(part)

    def _next_key(self) -> int:
        return sum(len(p.conns) for p in self._parts)

    def _tempdir(self) -> Path:
        if self._tmp is None:
            assert self._stack is not None
            self._tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="ortf-bag-")))
        return self._tmp

    def _open_path(self, path: Path) -> None:
        if path.name == "metadata.yaml" and path.is_file():
            path = path.parent
        if path.is_dir():
            self._open_rosbag2_dir(path)
        else:
            self._open_file(path, str(path), compression="detect")

    def _open_file(self, path: Path, name: str, compression: _Compression) -> None:
        try:
            head = _sniff(path)
        except OSError as err:
            raise _fail(name, f"cannot read ({err.strerror})") from err
        if not head:
            raise _fail(name, "empty file")
        if head.startswith(_ROS1_MAGIC):
            self._add(_Ros1Bag(name, path, self._next_key()))
        elif head.startswith(_ZSTD_MAGIC):
            self._open_file(self._decompressed(path, name), name, compression)
        elif head.startswith(_MCAP_MAGIC) or head.startswith(_SQLITE_MAGIC):
            kind: Literal["sqlite3", "mcap"] = "mcap" if head.startswith(_MCAP_MAGIC) else "sqlite3"
            if kind == "mcap":
                self._check_mcap_footer(path, name)
            suffix = ".mcap" if kind == "mcap" else ".db3"
            if path.suffix != suffix:  # rosbags picks its storage plugin by file suffix
                link = self._tempdir() / f"{len(self._parts)}_{path.stem}{suffix}"
                link.symlink_to(path.resolve())
                path = link
            self._add(_Rosbag2File(name, path, kind, compression, self._next_key()))
        else:
            raise _fail(name, _not_a_recording(path, head))

    @staticmethod
    def _check_mcap_footer(path: Path, name: str) -> None:
        size = path.stat().st_size
        with path.open("rb") as f:
            f.seek(max(0, size - len(_MCAP_MAGIC)))
            tail = f.read()
        if size < 2 * len(_MCAP_MAGIC) + 37 or tail != _MCAP_MAGIC:
            raise _fail(
                name,
                "truncated MCAP: no footer or summary (recording interrupted?); `mcap recover` rebuilds the file",
            )

    def _decompressed(self, path: Path, name: str) -> Path:
        stem = path.name[: -len(".zstd")] if path.name.endswith(".zstd") else path.name + ".raw"
        out = self._tempdir() / f"{len(self._parts)}_{stem}"
        try:
            with path.open("rb") as src, zstd.open(src, "rb") as infile, out.open("wb") as outfile:
                shutil.copyfileobj(infile, outfile, 1 << 20)
        except Exception as err:
            raise _fail(name, f"zstd-compressed file cannot be decompressed ({describe(err)})") from err
        return out

    def _open_rosbag2_dir(self, path: Path) -> None:
        meta_path = path / "metadata.yaml"
        if not meta_path.exists():
            files = sorted(
                p
                for p in path.iterdir()
                if p.is_file() and p.name.endswith((".db3", ".mcap", ".db3.zstd", ".mcap.zstd"))
            )
            if not files:
                raise _fail(str(path), "not a rosbag2 directory: no metadata.yaml and no .db3 or .mcap file")
            for file in files:
                self._open_file(file, str(file), compression="detect")
            return
        try:
            # libyaml's loader where PyYAML has it: a split recording's metadata lists every
            # file and topic, and the pure-Python loader takes tens of milliseconds on it.
            doc = yaml.load(read_text(meta_path), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            info = doc["rosbag2_bagfile_information"]
            names = [PurePath(str(x)).name for x in info["relative_file_paths"]]
            storage = str(info.get("storage_identifier", "") or "")
            mode = str(info.get("compression_mode", "") or "").lower()
            fmt = str(info.get("compression_format", "") or "").lower()
        except (OSError, yaml.YAMLError, KeyError, TypeError) as err:
            raise _fail(str(meta_path), f"not valid rosbag2 metadata ({describe(err)})") from err
        if storage not in ("sqlite3", "mcap", ""):
            raise _fail(str(meta_path), f"storage {storage!r} not supported, expected sqlite3 or mcap")
        if mode in ("", "none"):
            mode = ""
        elif mode not in ("file", "message"):
            raise _fail(str(meta_path), f"compression mode {mode!r} not supported, expected file or message")
        elif fmt != "zstd":
            raise _fail(str(meta_path), f"compression format {fmt!r} not supported, expected zstd")
        if not names:
            raise _fail(str(meta_path), "lists no storage files")
        missing = [n for n in names if not (path / n).is_file()]
        if missing:
            raise _fail(str(path / missing[0]), f"file missing ({meta_path.name} lists it as part of the bag)")
        for file_name in names:
            # (In file mode each file is zstd as a whole, found by its magic number.)
            self._open_file(path / file_name, str(path / file_name), "message" if mode == "message" else "none")

    # -- queries

    def _check_open(self) -> None:
        if self._stack is None:
            raise ConversionError(f"{self.paths[0]}: bag source is not open (use it as a context manager)")

    def topics(self) -> list[TopicInfo]:
        """Every topic, sorted by name; first/last times come from the storage indexes."""
        self._check_open()
        if self._topics is None:
            grouped: dict[tuple[str, str], list[tuple[_Conn, tuple[int, int] | None]]] = {}
            for part in self._parts:
                times = part.topic_times()
                for conn in part.conns:
                    grouped.setdefault((conn.topic, conn.msgtype), []).append((conn, times.get(conn.key)))
            infos = []
            for (topic, msgtype), members in sorted(grouped.items()):
                spans = [span for _, span in members if span is not None]
                with_def = [c for c, _ in members if c.definition] or [members[0][0]]
                head = with_def[0]
                infos.append(
                    TopicInfo(
                        topic=topic,
                        msgtype=msgtype,
                        original_msgtype=head.original_msgtype,
                        count=sum(c.count for c, _ in members),
                        first_ns=min(s for s, _ in spans) if spans else None,
                        last_ns=max(e for _, e in spans) if spans else None,
                        definition=head.definition,
                        definition_format=head.definition_format,
                        serialization=head.serialization,
                        digest=head.digest,
                        latched=any(c.latched for c, _ in members),
                    )
                )
            self._topics = infos
        return list(self._topics)

    def _span(self) -> tuple[int, int] | None:
        self._check_open()
        spans = [s for p in self._parts if (s := p.time_range()) is not None]
        if not spans:
            return None
        return min(s for s, _ in spans), max(e for _, e in spans)

    @property
    def message_count(self) -> int:
        self._check_open()
        return sum(c.count for p in self._parts for c in p.conns)

    @property
    def start_ns(self) -> int:
        """Receive time of the first message (0 for an empty recording)."""
        span = self._span()
        return span[0] if span else 0

    @property
    def end_ns(self) -> int:
        """Receive time of the last message (0 for an empty recording)."""
        span = self._span()
        return span[1] if span else 0

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def duration(self) -> float:
        """Seconds from the first message to the last."""
        return self.duration_ns / 1e9

    def messages(self, topics: Collection[str] | None = None) -> Iterator[RawMessage]:
        """Messages of ``topics`` (all when None) in receive-time order, read lazily.

        Messages with equal receive times keep their storage order. A topic that the
        recording does not have is a ConversionError.
        """
        return self._messages(self._conns(topics))

    def batches(self, topics: Collection[str] | None = None, runs: Collection[str] = ()) -> Iterator[RawBatch]:
        """The messages ``messages`` gives, a batch at a time: an MCAP file's chunk by chunk,
        where the messages of ``runs`` topics come as runs (``RawRun``); other storage
        ``BATCH_MESSAGES`` at a time, without runs."""
        conns = self._conns(topics)
        # (A topic on two connections of a file, with other QoS say, would be two runs whose times interleave.)
        alone = {c.key for p in self._parts for c in p.conns if [o.topic for o in p.conns].count(c.topic) == 1}
        chunked = self._chunked(conns, {key for key in alone & conns.keys() if conns[key].topic in runs})
        if chunked is not None:
            return chunked
        messages = self._messages(conns)
        return (RawBatch(group, []) for group in iter(lambda: list(itertools.islice(messages, BATCH_MESSAGES)), []))

    def _chunked(self, conns: dict[int, _Conn], runs: set[int]) -> Iterator[RawBatch] | None:
        """Each part's chunks in turn, when every part has them and the parts follow one
        another in time; else None."""
        parts = sorted(
            ((span, part) for part in self._parts if (span := part.time_range()) is not None), key=itemgetter(0)
        )
        if any(a[1] >= b[0] for (a, _), (b, _) in itertools.pairwise(parts)):
            return None
        chunked = [part.batches(conns.keys(), runs) for _, part in parts]
        if any(batches is None for batches in chunked):
            return None

        def raw(batch: Batch) -> RawBatch:
            messages = []
            for stamp, key, data in batch.messages:
                conn = conns[key]
                messages.append(RawMessage(conn.topic, conn.msgtype, stamp, data, conn.serialization))
            return RawBatch(
                messages,
                [
                    RawRun(conns[r.key].topic, conns[r.key].msgtype, r.times, r.parts, conns[r.key].serialization)
                    for r in batch.runs
                ],
            )

        return (raw(batch) for batches in chunked if batches is not None for batch in batches)

    def _conns(self, topics: Collection[str] | None) -> dict[int, _Conn]:
        self._check_open()
        conns = {c.key: c for p in self._parts for c in p.conns}
        if topics is not None:
            unknown = sorted(set(topics) - {c.topic for c in conns.values()})
            if unknown:
                raise _fail(str(self.paths[0]), f"no topic {', '.join(unknown)} in the recording")
            conns = {k: c for k, c in conns.items() if c.topic in topics}
        return conns

    def _messages(self, conns: dict[int, _Conn]) -> Iterator[RawMessage]:
        streams = [part.messages(conns.keys()) for part in self._parts]
        merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=itemgetter(0))
        for stamp, key, data in merged:
            conn = conns[key]
            yield RawMessage(conn.topic, conn.msgtype, stamp, data, conn.serialization)
