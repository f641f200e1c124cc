"""An MCAP file without its summary: a ``ros2 bag record`` killed mid-write leaves the
data section and nothing after it (no summary, no footer), and rosbags cannot open it.

Foxglove's ``mcap`` reader walks such a file in order (``StreamReader``) and stops where
the bytes stop; this module keeps what the summary would have said: the schemas and
channels (rosbag2 writes them inside chunks), and for each complete chunk its place,
time range and messages per channel, the chunk index ``mcap_chunks`` reads by. The
messages are then read as from an indexed file, a chunk at a time. A chunk cut off by
the end of the file gives the messages whose records it holds whole (decompressed as far
as the bytes go); messages outside chunks (an unchunked writer's) are read back a few
megabytes at a time. Memory: one chunk, and the index (an entry per chunk, as a summary).
"""

from __future__ import annotations

import heapq
import io
import itertools
import struct
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import BinaryIO, Literal

import lz4.frame  # type: ignore[import-untyped]
import yaml
from backports import zstd
from mcap.data_stream import ReadDataStream
from mcap.exceptions import EndOfFile, RecordLengthLimitExceeded
from mcap.records import Channel, Chunk, DataEnd, Footer, McapRecord, Message, Schema
from mcap.stream_reader import StreamReader, breakup_chunk
from rosbags.rosbag2.storage_mcap import ChunkInfo

from ortf_ros.errors import UnsupportedSerializationError, describe
from ortf_ros.pipeline.decode import canonical_msgtype
from ortf_ros.pipeline.samples import DefinitionFormat
from ortf_ros.pipeline.sources.base import Message as StoredMessage
from ortf_ros.pipeline.sources.base import (
    MessageCompression,
    Salvage,
    StoredConnection,
    fail,
    guarded,
)
from ortf_ros.pipeline.sources.compression import decompressed_batch, decompressed_messages
from ortf_ros.pipeline.sources.mcap_chunks import Batch, chunk_batches, chunk_messages, in_sequence
from ortf_ros.pipeline.sources.mcap_file import MCAP_MAGIC

LOOSE_REGION_BYTES = 4 << 20  # messages outside chunks are read back this much at a time
_DEFINITION_FORMATS: dict[str, DefinitionFormat] = {"ros2msg": "ros2msg", "ros2idl": "ros2idl", "ros1msg": "ros1msg"}
_CHUNK_HEAD = struct.Struct("<BQQQQI")  # opcode, length, start, end, uncompressed size, CRC
_SENTINEL = -1  # key of a region's start marker in the merge (never yielded)


@dataclass
class _Loose:
    """Message records outside chunks, between ``start`` and ``end`` in the file."""

    start: int
    end: int = 0
    first_ns: int = 2**63
    counts: dict[int, int] = field(default_factory=dict)


def _latched(profiles: str) -> bool:
    """Whether rosbag2's QoS YAML offers transient-local durability (Humble writes it as 1,
    Jazzy by name)."""
    try:
        offered = yaml.safe_load(profiles or "[]")
    except yaml.YAMLError:
        return False
    return isinstance(offered, list) and any(
        isinstance(p, dict) and p.get("durability") in (1, "transient_local") for p in offered
    )


def _whole_records(data: bytes) -> Iterator[McapRecord]:
    """The schema, channel and message records ``data`` holds whole (a chunk's records,
    perhaps cut off: what follows the last whole record is left out)."""
    stream = ReadDataStream(io.BytesIO(data))
    while stream.count + 9 <= len(data):
        opcode, length = stream.read1(), stream.read8()
        if stream.count + length > len(data):
            return
        body = ReadDataStream(io.BytesIO(stream.read(length)))
        if opcode == 0x03:
            yield Schema.read(body)
        elif opcode == 0x04:
            yield Channel.read(body)
        elif opcode == 0x05:
            yield Message.read(body, length)


def _partial_chunk(file: BinaryIO, pos: int, size: int) -> tuple[int, list[McapRecord]]:
    """The whole records of the chunk at ``pos``, which the end of the file cuts off; and
    its start time. A compressed chunk is decompressed as far as its bytes go."""
    file.seek(pos)
    head = file.read(_CHUNK_HEAD.size + 4)
    if len(head) < _CHUNK_HEAD.size + 4:
        return 0, []
    _, _, start, _, _, _ = _CHUNK_HEAD.unpack_from(head)
    (name_length,) = struct.unpack_from("<I", head, _CHUNK_HEAD.size)
    if name_length > 16:  # (no compression has a longer name: a damaged header)
        return start, []
    compression = file.read(name_length).decode(errors="replace")
    file.read(8)  # (the records' length, which the cut made a promise)
    data = file.read(max(0, size - file.tell()))
    try:
        if compression == "zstd":
            data = zstd.ZstdDecompressor().decompress(data)
        elif compression == "lz4":
            data = lz4.frame.LZ4FrameDecompressor().decompress(data)
        elif compression:
            return start, []
    except Exception:
        return start, []  # (a stream damaged, not cut: nothing of it can be trusted)
    return start, list(_whole_records(data))


class SalvagedMcap:
    """An MCAP file cut short, read as far as its records are whole (see the module)."""

    def __init__(self, name: str, path: Path, compression: MessageCompression, first_key: int, problem: str) -> None:
        self.name = name
        self.path = path
        self.compression = compression
        self._first_key = first_key
        self._schemas: dict[int, Schema] = {}
        self._channels: dict[int, Channel] = {}
        self._counts: dict[int, int] = {}
        self._times: dict[int, tuple[int, int]] = {}
        self.chunks: list[ChunkInfo] = []
        self._loose: list[_Loose] = []
        self._tail: list[tuple[int, int, bytes]] = []  # (time, channel, payload) of a chunk cut off
        try:
            with path.open("rb") as file:
                self.size = path.stat().st_size
                stop, readable = self._scan(file)
                if stop.startswith("a chunk cut short"):
                    try:
                        self._salvage_cut_chunk(file, readable)
                    except Exception as err:  # (its records damaged, not just cut: none of them is kept)
                        self._tail = []
                        stop += f" (unreadable: {describe(err)})"
        except OSError as err:
            raise fail(name, f"cannot read ({err.strerror})") from err
        self.keys = {cid: first_key + offset for offset, cid in enumerate(self._channels)}
        self.conns = [self._connection(channel) for channel in self._channels.values()]
        last = max((t for _, t in self._times.values()), default=None)
        messages = sum(self._counts.values())
        self.salvage: Salvage | None = Salvage(
            name, f"{problem}; {stop}" if stop else problem, self.size, readable, messages, last
        )

    # -- the scan

    def _scan(self, file: BinaryIO) -> tuple[str, int]:
        """Walk the records; what stopped the walk ("" at the data section's end) and where."""
        records = StreamReader(file, emit_chunks=True, record_size_limit=self.size).records
        position = len(MCAP_MAGIC)
        loose: _Loose | None = None
        while True:
            try:
                record = next(records)
            except StopIteration:
                return "", position
            except (EndOfFile, RecordLengthLimitExceeded):  # (a length beyond the file's end: cut there)
                file.seek(position)
                opcode = file.read(1)
                if not opcode:
                    return "", position  # (the file ends after a whole record)
                kind = "chunk" if opcode == b"\x06" else "record"
                return f"a {kind} cut short at byte {position:,}", position
            except Exception as err:
                return f"a damaged record ({describe(err)})", position
            end = file.tell()
            if isinstance(record, Message):
                if record.channel_id not in self._channels:
                    return f"a message on channel {record.channel_id} before its channel record", position
                if loose is None or end - loose.start > LOOSE_REGION_BYTES:
                    loose = _Loose(position)
                    self._loose.append(loose)
                self._count(record)
                loose.counts[record.channel_id] = loose.counts.get(record.channel_id, 0) + 1
                loose.first_ns, loose.end = min(loose.first_ns, record.log_time), end
            else:
                loose = None
                if isinstance(record, Chunk):
                    try:
                        self.chunks.append(self._chunk(record, position, end))
                    except Exception as err:
                        return f"a damaged chunk ({describe(err)})", position
                elif isinstance(record, (Schema, Channel)):
                    self._register(record)
                elif isinstance(record, (DataEnd, Footer)):
                    return "", position
            position = end

    def _register(self, record: McapRecord) -> None:
        if isinstance(record, Schema):
            self._schemas.setdefault(record.id, record)
        elif isinstance(record, Channel):
            self._channels.setdefault(record.id, record)

    def _count(self, message: Message) -> None:
        channel, time = message.channel_id, message.log_time
        if channel not in self._channels:
            raise ValueError(f"a message on channel {channel} before its channel record")
        self._counts[channel] = self._counts.get(channel, 0) + 1
        first, last = self._times.get(channel, (time, time))
        self._times[channel] = (min(first, time), max(last, time))

    def _chunk(self, chunk: Chunk, position: int, end: int) -> ChunkInfo:
        counts: dict[int, int] = {}
        for record in breakup_chunk(chunk, validate_crc=True):
            if isinstance(record, Message):
                self._count(record)
                counts[record.channel_id] = counts.get(record.channel_id, 0) + 1
            else:
                self._register(record)
        return ChunkInfo(
            message_start_time=chunk.message_start_time,
            message_end_time=chunk.message_end_time,
            chunk_start_offset=position,
            chunk_length=end - position,
            message_index_offsets={},
            message_index_length=0,
            compression=chunk.compression,
            compressed_size=len(chunk.data),
            uncompressed_size=chunk.uncompressed_size,
            channel_count=counts,
        )

    def _salvage_cut_chunk(self, file: BinaryIO, position: int) -> None:
        """Keep the whole messages of the chunk the end of the file cut off (one chunk in memory)."""
        _, records = _partial_chunk(file, position, self.size)
        for record in records:
            if isinstance(record, Message):
                if record.channel_id in self._channels:
                    self._count(record)
                    self._tail.append((record.log_time, record.channel_id, record.data))
            else:
                self._register(record)
        self._tail.sort(key=itemgetter(0))

    def _connection(self, channel: Channel) -> StoredConnection:
        schema = self._schemas.get(channel.schema_id)
        if channel.message_encoding != "cdr":
            raise UnsupportedSerializationError(
                f"{self.name}: topic {channel.topic}: serialization {channel.message_encoding!r}, expected 'cdr'"
            )
        if schema is None:
            raise fail(self.name, f"topic {channel.topic}: its schema record is missing")
        fmt: DefinitionFormat | Literal[""] = _DEFINITION_FORMATS.get(schema.encoding, "")
        return StoredConnection(
            key=self.keys[channel.id],
            topic=channel.topic,
            msgtype=canonical_msgtype(schema.name),
            original_msgtype=schema.name,
            definition=schema.data.decode(errors="replace") if fmt else "",
            definition_format=fmt,
            serialization="cdr",
            digest=channel.metadata.get("topic_type_hash", ""),
            latched=_latched(channel.metadata.get("offered_qos_profiles", "")),
            count=self._counts.get(channel.id, 0),
        )

    # -- reading

    def time_range(self) -> tuple[int, int] | None:
        if not self._times:
            return None
        return min(f for f, _ in self._times.values()), max(t for _, t in self._times.values())

    def topic_times(self) -> dict[int, tuple[int, int]]:
        return {self.keys[channel]: span for channel, span in self._times.items()}

    def _wanted(self, keys: Collection[int]) -> dict[int, int]:
        return {channel: key for channel, key in self.keys.items() if key in keys}

    def messages(self, keys: Collection[int]) -> Iterator[StoredMessage]:
        wanted = self._wanted(keys)
        streams: list[Iterator[StoredMessage]] = [chunk_messages(self.path, self.chunks, wanted)]
        streams += [self._loose_messages(loose, wanted) for loose in self._loose if wanted.keys() & loose.counts.keys()]
        streams.append((time, wanted[channel], data) for time, channel, data in self._tail if channel in wanted)
        merged = (m for m in heapq.merge(*streams, key=itemgetter(0)) if m[1] != _SENTINEL)
        return guarded(self.name, "damaged message data", decompressed_messages(merged, self.compression))

    def _loose_messages(self, loose: _Loose, wanted: dict[int, int]) -> Iterator[StoredMessage]:
        """A region's wanted messages in time order, read only when the merge reaches its start."""
        yield loose.first_ns, _SENTINEL, b""
        with self.path.open("rb") as file:
            file.seek(loose.start)
            data = file.read(loose.end - loose.start)
        found = [
            (record.log_time, wanted[record.channel_id], record.data)
            for record in _whole_records(data)
            if isinstance(record, Message) and record.channel_id in wanted
        ]
        found.sort(key=itemgetter(0))
        yield from found

    def batches(self, keys: Collection[int], runs: Collection[int]) -> Iterator[Batch] | None:
        """The complete chunks a batch each, then the cut one's messages; None when there are
        messages outside chunks, or the chunks overlap in time."""
        wanted = self._wanted(keys)
        if self._loose or not in_sequence(self.chunks, wanted):
            return None
        tail = [(time, wanted[channel], data) for time, channel, data in self._tail if channel in wanted]
        ends = [c.message_end_time for c in self.chunks if any(c.channel_count.get(ch) for ch in wanted)]
        if tail and ends and tail[0][0] <= max(ends):
            return None
        batches = chunk_batches(self.path, self.chunks, wanted, () if self.compression == "message" else runs)
        batches = itertools.chain(batches, [Batch(list(tail), [])] if tail else [])
        return guarded(self.name, "damaged message data", (decompressed_batch(b, self.compression) for b in batches))

    def close(self) -> None:
        pass
