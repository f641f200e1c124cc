"""The messages of an indexed MCAP file, read a chunk at a time.

rosbags parses the file's summary (channels, schemas, the chunk index) and this module
reads the chunks it lists, through a map of the file (``io.mapped_file``). rosbags' own
message loop copies each payload three times (the chunk, the record, the payload) and
merges every chunk of the file through one heap: on the benchmark's 60 s bag of two raw
640x480 cameras (3.1 GB) it took 0.8 s against 0.22 s here (0.45 s when chunks were
still copied into a buffer), a large part of the converter's own work beside the
encoders (``bench/bench_bag2ortf.py``, "reading the 60 s bag alone"). A camera frame in
an uncompressed chunk is not copied at all: its payload is a view of the map, and the
encoder process reads the frame from the file.

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
import mmap
import os
import struct
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter

import numpy as np
from rosbags.rosbag2.storage_mcap import ChunkInfo, decompress

from ortf_ros.io.mapped_file import MappedFile
from ortf_ros.pipeline.samples import Payload

Message = tuple[int, int, Payload]  # log time, the caller's key for the channel, payload

_MESSAGE_OPCODE = 0x05
_RECORD = struct.Struct("<BQ")  # opcode, length of the rest
_MESSAGE = struct.Struct("<HIQ")  # channel id, sequence, log time; then publish time, payload
_MESSAGE_PAYLOAD = _RECORD.size + _MESSAGE.size + 8
_CRC = struct.Struct("<I")
_CHUNK_CRC = 1 + 8 + 3 * 8  # opcode, length, start, end, uncompressed size
_CHUNK_RECORDS = _CHUNK_CRC + 4 + 4  # then the compression name, the records' length, the records


VIEW_PAYLOAD_MIN = 64 * 1024  # payloads handed out as views (camera frames), not copied
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
    waiting: list[tuple[int, int, int, int, Payload]] = []  # (time, chunk offset, index, key, payload)
    reader = _ChunkReader(path)
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
            # Copied: a view would read its pages back in after the chunk's were let go of,
            # and nothing would let go of them again (overlapping chunks are the rare case).
            heapq.heappush(waiting, (time, chunk.chunk_start_offset, index, key, bytes(payload)))
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
    reader = _ChunkReader(path)
    for chunk in _chunks_in_order(chunks, wanted):
        yield reader.read(chunk, wanted, runs)


def _chunks_in_order(chunks: Sequence[ChunkInfo], wanted: Collection[int]) -> list[ChunkInfo]:
    return sorted(
        (chunk for chunk in chunks if any(chunk.channel_count.get(channel) for channel in wanted)),
        key=attrgetter("message_start_time", "chunk_start_offset"),
    )


class _ChunkReader:
    """Reads chunks through a map of the file (``MappedFile``): an uncompressed chunk is
    read where it lies, and a large payload in it (a camera frame) is handed out as a
    view of the map, never copied (the encoder process reads it there too); a large
    payload of a compressed chunk is a view of the decompressed chunk, which it keeps
    alive. Smaller payloads are copied out, so a message held a while (in a block, say)
    pins no decompressed chunk.

    The pages of a chunk are let go of (``MADV_DONTNEED``) when the next is read: they
    stay in the page cache, but would otherwise count in this process's RSS until the
    whole file did. A view still held of them reads them back in."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._map = MappedFile(path)
        self._touched = (0, 0)  # (start, length) of the pages the last chunk was read from

    def read(self, chunk: ChunkInfo, wanted: Mapping[int, int], runs: Collection[int]) -> Batch:
        """The chunk's messages on ``wanted`` channels, sorted by log time (stable); those
        of ``runs`` keys as runs where they can be (else after the others at a tied time)."""
        offset = chunk.chunk_start_offset
        records = self._records(chunk)
        messages: list[Message] = []
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
                        messages.append((time, key, _payload(records, position + _MESSAGE_PAYLOAD, end)))
            position = end
        batch = Batch(messages, [])
        for key, found in placed.items():
            run = _run(key, records, found) if found else None
            if run is not None:
                batch.runs.append(run)
            else:
                messages += [(time, key, _payload(records, start, end)) for time, start, end in found]
        messages.sort(key=itemgetter(0))
        return batch

    def _records(self, chunk: ChunkInfo) -> memoryview:
        """The chunk's records, decompressed and checked against its CRC (when it has one)."""
        head = _CHUNK_RECORDS - _CHUNK_CRC + len(chunk.compression) + 8  # CRC to the records
        size = head + chunk.compressed_size
        start = chunk.chunk_start_offset + _CHUNK_CRC
        view = memoryview(self._map)[start : start + size]
        # (The file's size now: a file cut short since it was mapped would be a SIGBUS to read.)
        there = min(len(view), max(0, self._map.size() - start))
        if there != size:
            raise ValueError(f"truncated file: {size} bytes expected at offset {start}, {there} there")
        self._let_go()
        page = start - start % mmap.PAGESIZE
        self._touched = (page, start + size - page)
        (crc,) = _CRC.unpack_from(view)
        # rosbags hands the view to lz4 or zstd, or back unchanged (its type says bytes; any buffer will do).
        return memoryview(decompress(view[head:], chunk.compression, chunk.uncompressed_size, crc))  # type: ignore[arg-type]

    def _let_go(self) -> None:
        start, length = self._touched
        if length:
            self._map.madvise(mmap.MADV_DONTNEED, start, length)


def _payload(records: memoryview, start: int, end: int) -> Payload:
    """A message's payload: a view of the records from ``VIEW_PAYLOAD_MIN`` bytes, else a copy."""
    view = records[start:end]
    return view if end - start >= VIEW_PAYLOAD_MIN else bytes(view)


def _run(key: int, records: memoryview, found: list[tuple[int, int, int]]) -> Run | None:
    """The messages at ``found`` (time, payload start, end; in place order) as one run in
    time order, unless they have more than ``RUN_LENGTHS_MAX`` lengths. (Called twice a
    chunk or so: the common case, one length in time order, takes the fewest numpy calls.)"""
    placed = np.array(found, np.int64)
    times = placed[:, 0]
    if len(placed) > 1 and (times[1:] < times[:-1]).any():
        placed = placed[np.argsort(times, kind="stable")]
        times = placed[:, 0]
    lengths = placed[:, 2] - placed[:, 1]
    shortest, longest = int(np.min(lengths)), int(np.max(lengths))
    distinct = [shortest] if shortest == longest else np.unique(lengths).tolist()
    if len(distinct) > RUN_LENGTHS_MAX:
        return None
    parts = []
    for length in distinct:
        rows = np.flatnonzero(lengths == length) if len(distinct) > 1 else np.arange(len(placed))
        # Rows of a window view (every ``length`` bytes from each place): no index array of the run's size.
        windows = np.ndarray((len(records) - length + 1, length), np.uint8, records, 0, (1, 1))
        parts.append((rows, windows[placed[rows, 1]]))
    return Run(key, times, tuple(parts))
