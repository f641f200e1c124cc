"""ROS 1 bags (v2.0; plain, bz2 or lz4 chunks), read here: rosbags' ROS 1 reader keeps an
index entry per message in memory, which grows with the bag, while this one holds one
decompressed chunk at a time.

A bag is read from its index (the connection and chunk info records at ``index_pos``).
A ``rosbag record`` that was killed never wrote one (``index_pos`` is 0), and a copy cut
short lost it: then the file is scanned from the start, record by record, as ``rosbag
reindex`` does, and what is there is read: every complete chunk, the message records an
unclosed chunk left in the open (rosbag writes a chunk's header with sizes of 0 and
fills them in when it closes the chunk), and the complete messages of a chunk cut off
by the end of the file (``Salvage`` says where the file stopped making sense).
"""

from __future__ import annotations

import bz2
import heapq
import os
import struct
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import BinaryIO, Literal

import numpy as np
from lz4.frame import LZ4FrameDecompressor  # type: ignore[import-untyped]
from lz4.frame import decompress as lz4_decompress

from ortf_ros.errors import ConversionError, describe
from ortf_ros.format.units import NS
from ortf_ros.pipeline.decode import canonical_msgtype
from ortf_ros.pipeline.sources.base import Message, Salvage, StoredConnection, fail, guarded
from ortf_ros.pipeline.sources.mcap_chunks import Batch

ROS1_MAGIC = b"#ROSBAG V"
_SENTINEL = -1  # connection key of a region's start marker in the merge (never yielded)
_OP_MSG, _OP_BAG, _OP_INDEX, _OP_CHUNK, _OP_CHUNK_INFO, _OP_CONN = 0x02, 0x03, 0x04, 0x05, 0x06, 0x07
_DECOMPRESS: dict[bytes, Callable[[bytes], bytes]] = {
    b"none": lambda data: data,
    b"bz2": bz2.decompress,
    b"lz4": lz4_decompress,
}
_INDEX_DTYPE = np.dtype([("sec", "<u4"), ("nsec", "<u4"), ("offset", "<u4")])
LOOSE_REGION_BYTES = 4 << 20  # message records outside chunks are read back this much at a time


@dataclass
class _Region:
    """Where some of the bag's messages lie: a ``chunk`` record at ``pos``; a chunk cut
    off by the end of the file (``partial``: its bytes from ``data`` to ``end``,
    decompressed as far as they go); or message records outside any chunk (``loose``,
    from ``pos`` to ``end``)."""

    kind: Literal["chunk", "partial", "loose"]
    pos: int
    start_ns: int
    end_ns: int
    counts: dict[int, int] = field(default_factory=dict)  # connection id -> messages
    data: int = 0
    end: int = 0
    compression: bytes = b"none"

    def add(self, cid: int, stamp: int) -> None:
        self.counts[cid] = self.counts.get(cid, 0) + 1
        self.start_ns, self.end_ns = min(self.start_ns, stamp), max(self.end_ns, stamp)


def _header_fields(buf: bytes | memoryview, start: int, end: int) -> dict[str, bytes]:
    """The ``name=value`` fields of a ROS 1 record header."""
    fields: dict[str, bytes] = {}
    pos = start
    while pos < end:
        (size,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if pos + size > end:
            raise ValueError("record header field runs past its header")
        field_ = bytes(buf[pos : pos + size])
        name, sep, value = field_.partition(b"=")
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
    return int(sec) * NS + int(nsec)


def _records(buf: memoryview, where: str, *, cut: bool = False) -> Iterator[tuple[dict[str, bytes], memoryview]]:
    """The records in ``buf`` (a chunk's data, or loose records): header fields and data.
    ``cut``: the buffer may end inside a record, which is then left out."""
    pos, end = 0, len(buf)
    while pos < end:
        if cut and pos + 4 > end:
            return
        (header_len,) = struct.unpack_from("<I", buf, pos)
        if cut and pos + 8 + header_len > end:
            return
        fields = _header_fields(buf, pos + 4, pos + 4 + header_len)
        pos += 4 + header_len
        (size,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if pos + size > end:
            if cut:
                return
            raise ValueError(f"record in {where} runs past its end")
        yield fields, buf[pos : pos + size]
        pos += size


def _partial_decompress(compression: bytes, data: bytes) -> bytes:
    """As much of a cut compressed stream as decompresses."""
    if compression == b"none":
        return data
    if compression == b"bz2":
        decompressor = bz2.BZ2Decompressor()
        try:
            return decompressor.decompress(data)
        except (OSError, EOFError):
            return b""
    out = LZ4FrameDecompressor()
    try:
        return bytes(out.decompress(data))
    except RuntimeError:
        return b""


def _connection(cid: int, topic: bytes, info: dict[str, bytes], key: int, count: int) -> StoredConnection:
    original = info["type"].decode()
    name = topic.decode()
    return StoredConnection(
        key=key,
        topic=name if name.startswith("/") else f"/{name}",
        msgtype=canonical_msgtype(original),
        original_msgtype=original,
        definition=info.get("message_definition", b"").decode(),
        definition_format="ros1msg" if info.get("message_definition") else "",
        serialization="ros1",
        digest=info.get("md5sum", b"").decode(),
        latched=info.get("latching", b"0") == b"1",
        count=count,
    )


class Ros1Bag:
    """A ROS 1 bag v2.0: one chunk in memory at a time."""

    def __init__(self, name: str, path: Path, first_key: int) -> None:
        self.name = name
        self.path = path
        self.salvage: Salvage | None = None
        self._times: dict[int, tuple[int, int]] | None = None  # known from a scan
        try:
            self.file: BinaryIO = path.open("rb")
        except OSError as err:
            raise fail(name, f"cannot open ({err.strerror})") from err
        try:
            self.size = os.fstat(self.file.fileno()).st_size
            self._open(first_key)
        except ConversionError:
            self.file.close()
            raise
        except Exception as err:
            self.file.close()
            raise fail(name, f"damaged ROS 1 bag ({describe(err)})") from err

    def _read(self, size: int) -> bytes:
        data = self.file.read(size)
        if len(data) != size:
            raise fail(self.name, f"truncated ROS 1 bag (record at byte {self.file.tell() - len(data)} cut short)")
        return data

    def _record(self) -> tuple[dict[str, bytes], int]:
        """Read a record header at the current position; returns its fields and data length."""
        (header_len,) = struct.unpack("<I", self._read(4))
        header = self._read(header_len)
        (data_len,) = struct.unpack("<I", self._read(4))
        return _header_fields(header, 0, header_len), int(data_len)

    def _open(self, first_key: int) -> None:
        magic = self.file.readline(32)
        if not magic.startswith(ROS1_MAGIC):
            raise fail(self.name, "not a ROS 1 bag")
        if magic.strip() != b"#ROSBAG V2.0":
            raise fail(self.name, f"ROS 1 bag format {magic.strip()[9:].decode(errors='replace')}, expected 2.0")
        header = self._header_at(self.file.tell())
        if header is None:
            raise fail(
                self.name, f"cut short inside the bag's header record ({self.size:,} bytes); no whole message in it"
            )
        fields, data_start, data_len = header
        if fields.get("op") != bytes([_OP_BAG]):
            raise fail(self.name, "ROS 1 bag without a bag header record")
        if fields.get("encryptor"):
            raise fail(self.name, f"encrypted ROS 1 bag ({fields['encryptor'].decode(errors='replace')})")
        index_pos, conn_count = _u64(fields, "index_pos"), _u32(fields, "conn_count")
        chunk_count = _u32(fields, "chunk_count")
        data_start += data_len
        if index_pos == 0:
            self._scan(first_key, data_start, "no index (the recorder did not close the bag)")
        elif index_pos >= self.size:
            self._scan(first_key, data_start, "cut short (its index lies past the end of the file)")
        else:
            try:
                self._read_index(first_key, index_pos, conn_count, chunk_count)
            except Exception as err:
                self._scan(first_key, data_start, f"damaged index ({describe(err)})")

    def _read_index(self, first_key: int, index_pos: int, conn_count: int, chunk_count: int) -> None:
        self.file.seek(index_pos)
        raw: list[tuple[int, bytes, dict[str, bytes]]] = []
        for _ in range(conn_count):
            fields, data_len = self._record()
            if fields.get("op") != bytes([_OP_CONN]):
                raise ValueError("expected a connection record")
            body = self._read(data_len)
            raw.append((_u32(fields, "conn"), fields["topic"], _header_fields(body, 0, data_len)))
        regions: list[_Region] = []
        for _ in range(chunk_count):
            fields, data_len = self._record()
            if fields.get("op") != bytes([_OP_CHUNK_INFO]) or _u32(fields, "ver") != 1:
                raise ValueError("expected a version 1 chunk info record")
            counts = dict(struct.iter_unpack("<II", self._read(data_len)))
            start, end = _time(fields, "start_time"), _time(fields, "end_time")
            regions.append(_Region("chunk", _u64(fields, "chunk_pos"), start, end, counts))
        self._adopt(first_key, raw, regions)

    def _adopt(self, first_key: int, raw: list[tuple[int, bytes, dict[str, bytes]]], regions: list[_Region]) -> None:
        self.chunks = sorted(regions, key=lambda c: (c.start_ns, c.pos))
        totals: dict[int, int] = {}
        for chunk in regions:
            for cid, count in chunk.counts.items():
                totals[cid] = totals.get(cid, 0) + count
        self.keys: dict[int, int] = {}  # connection id -> key
        self.conns: list[StoredConnection] = []
        for offset, (cid, topic, info) in enumerate(raw):
            self.keys[cid] = first_key + offset
            self.conns.append(_connection(cid, topic, info, first_key + offset, totals.get(cid, 0)))

    # -- a bag without its index

    def _scan(self, first_key: int, pos: int, problem: str) -> None:
        """Read the bag record by record from ``pos`` (``rosbag reindex``'s walk), as far as
        its records are whole: connections, chunks, and messages outside chunks."""
        raw: dict[int, tuple[bytes, dict[str, bytes]]] = {}
        regions: list[_Region] = []
        times: dict[int, tuple[int, int]] = {}

        def message(region: _Region, fields: dict[str, bytes]) -> None:
            cid, stamp = _u32(fields, "conn"), _time(fields, "time")
            if cid not in raw:
                raise ValueError(f"a message on connection {cid} before its connection record")
            region.add(cid, stamp)
            first, last = times.get(cid, (stamp, stamp))
            times[cid] = (min(first, stamp), max(last, stamp))

        def contents(region: _Region, data: bytes, cut: bool) -> None:
            for fields, body in _records(memoryview(data), f"the chunk at byte {region.pos}", cut=cut):
                op = fields.get("op")
                if op == bytes([_OP_CONN]):
                    raw.setdefault(_u32(fields, "conn"), (fields["topic"], _header_fields(body, 0, len(body))))
                elif op == bytes([_OP_MSG]):
                    message(region, fields)
            if region.counts:
                regions.append(region)

        loose: _Region | None = None
        stop = ""
        while pos < self.size and not stop:
            try:
                found = self._header_at(pos)
                if found is None:
                    stop = f"a record cut short at byte {pos:,}"
                    break
                fields, data, data_len = found
                data_end = data + data_len
                op = fields.get("op")
                if op == bytes([_OP_MSG]) and data_end <= self.size:
                    if loose is None or data_end - loose.pos > LOOSE_REGION_BYTES:
                        loose = _Region("loose", pos, _time(fields, "time"), _time(fields, "time"))
                    message(loose, fields)
                    if loose.end == 0:
                        regions.append(loose)
                    loose.end = data_end
                elif op == bytes([_OP_CHUNK]):
                    loose = None
                    compression = fields.get("compression", b"none")
                    unclosed = data_len == 0 and _u32(fields, "size") == 0
                    if unclosed and compression == b"none":
                        data_end = data  # (its records follow in the open)
                    elif unclosed or data_end > self.size:
                        if compression not in _DECOMPRESS:
                            raise ValueError(f"chunk compression {compression.decode(errors='replace')!r}")
                        region = _Region("partial", pos, 2**63, -1, data=data, end=self.size, compression=compression)
                        contents(region, _partial_decompress(compression, self.file.read()), True)
                        stop = f"{'an unclosed' if unclosed else 'a'} chunk cut short at byte {pos:,}"
                    else:
                        contents(_Region("chunk", pos, 2**63, -1), self._chunk_data(fields, data_len, pos), False)
                elif op == bytes([_OP_CONN]) and data_end <= self.size:
                    loose = None
                    body = self._read(data_len)
                    raw.setdefault(_u32(fields, "conn"), (fields["topic"], _header_fields(body, 0, data_len)))
                elif op in (bytes([_OP_INDEX]), bytes([_OP_CHUNK_INFO])) and data_end <= self.size:
                    loose = None
                else:
                    cut = data_end > self.size
                    stop = f"a record cut short at byte {pos:,}" if cut else f"no record at byte {pos:,}"
            except Exception as err:
                stop = f"a damaged record at byte {pos:,} ({describe(err)})"
            if not stop:
                pos = data_end
        self._times = times
        self._adopt(first_key, [(cid, topic, info) for cid, (topic, info) in raw.items()], regions)
        messages = sum(sum(r.counts.values()) for r in regions)
        last = max((r.end_ns for r in regions), default=None)
        self.salvage = Salvage(self.name, f"{problem}; {stop}" if stop else problem, self.size, pos, messages, last)

    def _header_at(self, pos: int) -> tuple[dict[str, bytes], int, int] | None:
        """The record header at ``pos``: its fields, where its data starts and how long it
        is; None when the file ends inside the header."""
        self.file.seek(pos)
        head = self.file.read(4)
        if len(head) < 4:
            return None
        (header_len,) = struct.unpack("<I", head)
        if pos + 8 + header_len > self.size:
            return None
        fields = _header_fields(self.file.read(header_len), 0, header_len)
        (data_len,) = struct.unpack("<I", self.file.read(4))
        return fields, pos + 8 + header_len, int(data_len)

    def _chunk_data(self, fields: dict[str, bytes], data_len: int, pos: int) -> bytes:
        """A chunk record's data (the file at its data), decompressed and checked against its size."""
        compression = fields.get("compression", b"none")
        if compression not in _DECOMPRESS:
            raise fail(self.name, f"chunk compression {compression.decode(errors='replace')!r} not supported")
        data = _DECOMPRESS[compression](self._read(data_len))
        if len(data) != _u32(fields, "size"):
            raise ValueError(f"chunk at byte {pos} decompresses to {len(data)} bytes, not {_u32(fields, 'size')}")
        return data

    # -- reading

    def time_range(self) -> tuple[int, int] | None:
        spans = [(c.start_ns, c.end_ns) for c in self.chunks if sum(c.counts.values())]
        if not spans:
            return None
        return min(s for s, _ in spans), max(e for _, e in spans)

    def topic_times(self) -> dict[int, tuple[int, int]]:
        """First/last time per connection: from the index records after each chunk, or the scan's."""
        if self._times is not None:
            return {self.keys[cid]: span for cid, span in self._times.items() if cid in self.keys}
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
                    stamps = entries["sec"].astype(np.int64) * NS + entries["nsec"]
                    key = self.keys[_u32(fields, "conn")]
                    first, last = int(stamps.min()), int(stamps.max())
                    if key in times:
                        first, last = min(first, times[key][0]), max(last, times[key][1])
                    times[key] = (first, last)
        except ConversionError:
            raise
        except Exception as err:
            raise fail(self.name, f"damaged ROS 1 bag index ({describe(err)})") from err
        return times

    def _region_records(self, region: _Region) -> Iterator[tuple[dict[str, bytes], memoryview]]:
        if region.kind == "loose":
            self.file.seek(region.pos)
            return _records(memoryview(self._read(region.end - region.pos)), f"the records at byte {region.pos}")
        if region.kind == "partial":
            self.file.seek(region.data)
            data = _partial_decompress(region.compression, self._read(region.end - region.data))
            return _records(memoryview(data), f"the chunk at byte {region.pos}", cut=True)
        self.file.seek(region.pos)
        fields, data_len = self._record()
        if fields.get("op") != bytes([_OP_CHUNK]):
            raise ValueError(f"no chunk record at byte {region.pos}")
        return _records(memoryview(self._chunk_data(fields, data_len, region.pos)), f"the chunk at byte {region.pos}")

    def _chunk(self, region: _Region, wanted: dict[int, int]) -> Iterator[Message]:
        """A region's wanted messages in time order, read only when the merge reaches its start."""
        yield region.start_ns, _SENTINEL, b""
        found: list[tuple[int, int, bytes]] = []
        for fields, body in self._region_records(region):
            if fields.get("op") == bytes([_OP_MSG]):
                key = wanted.get(_u32(fields, "conn"))
                if key is not None:
                    found.append((_time(fields, "time"), key, bytes(body)))
        found.sort(key=itemgetter(0))
        yield from found

    def messages(self, keys: Collection[int]) -> Iterator[Message]:
        wanted = {cid: key for cid, key in self.keys.items() if key in keys}
        streams = [self._chunk(c, wanted) for c in self.chunks if any(cid in wanted for cid in c.counts)]
        merged = heapq.merge(*streams, key=itemgetter(0))
        return guarded(self.name, "damaged ROS 1 chunk", (m for m in merged if m[1] != _SENTINEL))

    def batches(self, keys: Collection[int], runs: Collection[int]) -> Iterator[Batch] | None:
        return None  # (a ROS 1 chunk holds its messages' headers between them: no runs to cut out)

    def close(self) -> None:
        self.file.close()
