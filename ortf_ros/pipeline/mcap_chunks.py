"""The messages of an indexed MCAP file, read a chunk at a time.

rosbags parses the file's summary (channels, schemas, the chunk index) and this module
reads the chunks it lists. rosbags' own message loop copies each payload three times
(the chunk, the record, the payload) and merges every chunk of the file through one
heap: on the benchmark's 60 s bag of two raw 640x480 cameras (3.1 GB) it took 0.8 s
against 0.3 s here, a third of the converter's own work beside the encoders
(``bench/bench_bag2ortf.py``, "reading the 60 s bag alone").

``chunk_batches`` takes the messages of chosen channels (1 kHz force-torque, say) out
of a chunk as one array per message length (a ``Run``): a numpy gather, where single
messages cost a bytes object, a tuple and a place in the sort each, and later a Python
step each.

The order is rosbags': log time, then the chunk's place in the file, then the record's
place in its chunk. Chunks are taken by start time, and a chunk's messages go straight
out when no later chunk starts before it ends (a recorder's chunks do not overlap);
only messages of overlapping chunks wait in a heap. Memory is one chunk and its
messages, plus the messages of chunks that overlap.
"""

from __future__ import annotations

import heapq
import itertools
import os
import struct
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter

import numpy as np
from rosbags.rosbag2.storage_mcap import ChunkInfo, decompress

Message = tuple[int, int, bytes]  # log time, the caller's key for the channel, payload

_MESSAGE_OPCODE = 0x05
_RECORD = struct.Struct("<BQ")  # opcode, length of the rest
_MESSAGE = struct.Struct("<HIQ")  # channel id, sequence, log time; then publish time, payload
_MESSAGE_PAYLOAD = _RECORD.size + _MESSAGE.size + 8
_CRC = struct.Struct("<I")
_CHUNK_CRC = 1 + 8 + 3 * 8  # opcode, length, start, end, uncompressed size
_CHUNK_RECORDS = _CHUNK_CRC + 4 + 4  # then the compression name, the records' length, the records


RUN_LENGTHS_MAX = 4  # message lengths a run may mix (an arm's and a gripper's joint states, say)


@dataclass(frozen=True)
class Run:
    """A chunk's messages on one channel, in order: their log times, and their payloads
    as the rows of one array per length."""

    key: int  # the caller's key for the channel
    times: np.ndarray  # (n,) int64
    parts: tuple[tuple[np.ndarray, np.ndarray], ...]  # per length: (the rows it is at, (rows, length) uint8)


@dataclass(frozen=True)
class Batch:
    """A chunk's messages on the wanted channels: ``messages`` in rosbags' order (a run
    channel's there at a tied time after the others); each channel's either all there or
    all in one run."""

    messages: list[Message]
    runs: list[Run]


def chunk_messages(
    path: str | os.PathLike[str], chunks: Sequence[ChunkInfo], wanted: Mapping[int, int]
) -> Iterator[Message]:
    """(log time, ``wanted[channel id]``, payload) of the messages on the ``wanted`` channels,
    in rosbags' order. A damaged chunk raises (ValueError, or rosbags' error for a bad
    checksum or compression)."""
    order = _chunks_in_order(chunks, wanted)
    waiting: list[tuple[int, int, int, int, bytes]] = []  # (time, chunk offset, index, key, payload)
    with open(path, "rb", buffering=0) as file:
        reader = _ChunkReader(file.fileno())
        for number, chunk in enumerate(order):
            while waiting and waiting[0][0] < chunk.message_start_time:
                time, _, _, key, payload = heapq.heappop(waiting)
                yield time, key, payload
            messages = reader.read(chunk, wanted, ()).messages
            following = order[number + 1].message_start_time if number + 1 < len(order) else None
            if not waiting and (following is None or chunk.message_end_time < following):
                yield from messages
                continue
            for index, (time, key, payload) in enumerate(messages):
                heapq.heappush(waiting, (time, chunk.chunk_start_offset, index, key, payload))
    while waiting:
        time, _, _, key, payload = heapq.heappop(waiting)
        yield time, key, payload


def in_sequence(chunks: Sequence[ChunkInfo], wanted: Collection[int]) -> bool:
    """Whether the chunks holding ``wanted`` channels follow one another in time, none
    overlapping the next (a tie at the boundary only in file order, as rosbags breaks it):
    then each can be taken whole, in order (``chunk_batches``)."""
    order = _chunks_in_order(chunks, wanted)
    return all(
        a.message_end_time < b.message_start_time
        or (a.message_end_time == b.message_start_time and a.chunk_start_offset < b.chunk_start_offset)
        for a, b in itertools.pairwise(order)
    )


def chunk_batches(
    path: str | os.PathLike[str], chunks: Sequence[ChunkInfo], wanted: Mapping[int, int], runs: Collection[int]
) -> Iterator[Batch]:
    """Each chunk's messages on the ``wanted`` channels as one ``Batch``, in time order (the
    chunks must be ``in_sequence``). A channel whose key is in ``runs`` comes as one run,
    unless its messages in the chunk have more than ``RUN_LENGTHS_MAX`` lengths."""
    with open(path, "rb", buffering=0) as file:
        reader = _ChunkReader(file.fileno())
        for chunk in _chunks_in_order(chunks, wanted):
            yield reader.read(chunk, wanted, runs)


def _chunks_in_order(chunks: Sequence[ChunkInfo], wanted: Collection[int]) -> list[ChunkInfo]:
    return sorted(
        (chunk for chunk in chunks if any(chunk.channel_count.get(channel) for channel in wanted)),
        key=attrgetter("message_start_time", "chunk_start_offset"),
    )


class _ChunkReader:
    """Reads each chunk into one buffer, reused: a fresh bytes object per chunk (a megabyte
    or two) costs more than the copy in page faults, as glibc maps such sizes anew. Only
    the payloads are copied out."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()

    def read(self, chunk: ChunkInfo, wanted: Mapping[int, int], runs: Collection[int]) -> Batch:
        """The chunk's messages on ``wanted`` channels, sorted by log time (stable); those
        of ``runs`` keys as runs where they can be (else after the others at a tied time)."""
        offset = chunk.chunk_start_offset
        records = self._records(chunk)
        messages = []
        placed: dict[int, list[tuple[int, int, int]]] = {key: [] for key in runs}  # (time, start, end) per key
        position, size = 0, len(records)
        while position < size:
            opcode, length = _RECORD.unpack_from(records, position)
            end = position + _RECORD.size + length
            if end > size:
                raise ValueError(f"chunk at offset {offset}: a record runs past the chunk's end")
            if opcode == _MESSAGE_OPCODE:
                if end < position + _MESSAGE_PAYLOAD:
                    raise ValueError(f"chunk at offset {offset}: a message record of {length} bytes")
                channel, _, time = _MESSAGE.unpack_from(records, position + _RECORD.size)
                key = wanted.get(channel)
                if key is not None:
                    if not chunk.message_start_time <= time <= chunk.message_end_time:
                        raise ValueError(f"chunk at offset {offset}: a message's time {time} is outside its range")
                    found = placed.get(key)
                    if found is not None:
                        found.append((time, position + _MESSAGE_PAYLOAD, end))
                    else:
                        messages.append((time, key, bytes(records[position + _MESSAGE_PAYLOAD : end])))
            position = end
        batch = Batch(messages, [])
        for key, found in placed.items():
            run = _run(key, records, found) if found else None
            if run is not None:
                batch.runs.append(run)
            else:
                messages += [(time, key, bytes(records[start:end])) for time, start, end in found]
        messages.sort(key=itemgetter(0))
        return batch

    def _records(self, chunk: ChunkInfo) -> memoryview | bytes:
        """The chunk's records, decompressed and checked against its CRC (when it has one)."""
        head = _CHUNK_RECORDS - _CHUNK_CRC + len(chunk.compression) + 8  # CRC to the records
        size = head + chunk.compressed_size
        if len(self._buffer) < size:
            self._buffer = bytearray(size)
        view = memoryview(self._buffer)[:size]
        start = chunk.chunk_start_offset + _CHUNK_CRC
        got = os.preadv(self._fd, [view], start)
        if got != size:
            raise ValueError(f"truncated file: {size} bytes expected at offset {start}, {got} there")
        (crc,) = _CRC.unpack_from(view)
        # Any buffer will do: rosbags hands it to lz4 or zstd, or back unchanged.
        records: memoryview | bytes = decompress(view[head:], chunk.compression, chunk.uncompressed_size, crc)  # type: ignore[arg-type]
        return records


def _run(key: int, records: memoryview | bytes, found: list[tuple[int, int, int]]) -> Run | None:
    """The messages at ``found`` (time, payload start, end; in place order) as one run in
    time order, unless they have more than ``RUN_LENGTHS_MAX`` lengths."""
    placed = np.array(found, np.int64)
    placed = placed[np.argsort(placed[:, 0], kind="stable")]
    lengths = placed[:, 2] - placed[:, 1]
    distinct = np.unique(lengths)
    if len(distinct) > RUN_LENGTHS_MAX:
        return None
    data = np.frombuffer(records, np.uint8)
    parts = []
    for length in distinct.tolist():
        rows = np.flatnonzero(lengths == length) if len(distinct) > 1 else np.arange(len(placed))
        # (Rows of a window view: no index array of the run's size.)
        parts.append((rows, np.lib.stride_tricks.sliding_window_view(data, length)[placed[rows, 1]]))
    return Run(key, placed[:, 0], tuple(parts))
