"""``chunk_messages`` and ``chunk_batches`` against rosbags' own MCAP message loop, on
files rosbags writes: the same messages in the same order, also when chunks overlap in
time and times tie, and one clear error for a damaged chunk or message index."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import CompressionFormat, CompressionMode, Reader, StoragePlugin, Writer
from rosbags.rosbag2.storage_mcap import ChunkInfo

from ortf_ros.io.mapped_file import locate
from ortf_ros.pipeline.samples import Payload
from ortf_ros.pipeline.sources.mcap_chunks import (
    RUN_LENGTHS_MAX,
    VIEW_PAYLOAD_MIN,
    chunk_batches,
    chunk_messages,
    in_sequence,
)

BIG = 300_000  # bytes: rosbags closes a chunk past 1 MiB, so after every four big messages


def write_bag(root: Path, messages: list[tuple[str, int, bytes]], zstd_chunks: bool) -> Path:
    """An MCAP rosbag2 of raw payloads (never decoded here), written in the order given."""
    writer = Writer(root, version=9, storage_plugin=StoragePlugin.MCAP)
    if zstd_chunks:
        writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    with writer:
        connections = {
            topic: writer.add_connection(
                topic, "std_msgs/msg/String", msgdef="string data", rihs01="RIHS01_" + "0" * 64
            )
            for topic in sorted({topic for topic, _, _ in messages})
        }
        for topic, time, payload in messages:
            writer.write(connections[topic], time, payload)
    [file] = root.glob("*.mcap")
    return file


def out_of_order_messages() -> list[tuple[str, int, bytes]]:
    """Big messages on /a, small ones on /b at the same times and on /c late by up to 1.5
    chunks: chunks overlap in time, and /a and /b tie at every time."""
    messages = []
    for i in range(40):
        messages.append(("/a", 1000 + 10 * i, bytes([i]) * BIG))
        messages.append(("/b", 1000 + 10 * i, b"b%d" % i))
        if i % 3 == 2:
            messages.append(("/c", 1000 + 10 * (i - 6), b"c%d" % i))
    return messages


Message = tuple[int, str, Payload]


def read_both(file: Path, topics: set[str] | None = None) -> tuple[list[Message], list[Message], list[ChunkInfo]]:
    """(rosbags' messages, chunk_messages', the chunks)."""
    with Reader(file) as reader:
        chosen = [c for c in reader.connections if topics is None or c.topic in topics]
        theirs: list[Message] = [
            (time, conn.topic, bytes(data)) for conn, time, data in reader.messages(connections=chosen)
        ]
        topic_of = {c.id: c.topic for c in chosen}
        chunks = list(reader.storage.chunks)  # type: ignore[attr-defined]  # (close clears it)
        ours = [
            (time, topic_of[key], data) for time, key, data in chunk_messages(file, chunks, {c: c for c in topic_of})
        ]
    return theirs, ours, chunks


@pytest.mark.parametrize("zstd_chunks", [False, True])
def test_overlapping_chunks_come_out_in_rosbags_order(tmp_path: Path, zstd_chunks: bool) -> None:
    file = write_bag(tmp_path / "bag", out_of_order_messages(), zstd_chunks)
    theirs, ours, chunks = read_both(file)
    starts = sorted((c.message_start_time, c.message_end_time) for c in chunks)
    assert len(chunks) >= 8 and any(end >= later for (_, end), (later, _) in itertools.pairwise(starts))
    assert len(theirs) == len(out_of_order_messages())
    assert ours == theirs
    assert [t for t, _, _ in ours] == sorted(t for t, _, _ in ours)


def test_only_the_wanted_channels(tmp_path: Path) -> None:
    file = write_bag(tmp_path / "bag", out_of_order_messages(), zstd_chunks=False)
    theirs, ours, _ = read_both(file, {"/b", "/c"})
    assert ours == theirs and {topic for _, topic, _ in ours} == {"/b", "/c"}


def one_chunk(file: Path) -> tuple[ChunkInfo, dict[int, int], int]:
    """The file's only chunk, its channels, and where its first message record starts."""
    with Reader(file) as reader:
        [chunk] = reader.storage.chunks  # type: ignore[attr-defined]
        wanted = {c.id: c.id for c in reader.connections}
    data = file.read_bytes()
    position = chunk.chunk_start_offset + 9 + 40 + len(chunk.compression)  # the first record
    while data[position] != 0x05:  # (schema and channel records come first)
        position += 9 + struct.unpack_from("<Q", data, position + 1)[0]
    return chunk, wanted, position


def test_a_damaged_record_is_an_error(tmp_path: Path) -> None:
    file = write_bag(tmp_path / "bag", [("/a", 1000 + i, b"x" * 100) for i in range(10)], zstd_chunks=False)
    chunk, wanted, first = one_chunk(file)
    data = bytearray(file.read_bytes())
    data[first + 1 : first + 9] = struct.pack("<Q", 1 << 40)  # a record longer than the chunk
    file.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"chunk at offset {chunk.chunk_start_offset}: a record runs past"):
        list(chunk_messages(file, [chunk], wanted))
    file.write_bytes(bytes(data[: first + 50]))
    with pytest.raises(ValueError, match="truncated file"):
        list(chunk_messages(file, [chunk], wanted))


def test_batches_hold_the_same_messages_with_runs_per_channel(tmp_path: Path) -> None:
    """A chunk's messages of a run channel come as one array per length (one by one when
    they have too many lengths); with the rest they are rosbags' messages, each channel
    in its order."""
    messages = []
    for i in range(60):
        messages.append(("/frames", 1000 + 10 * i, bytes([i]) * BIG))
        messages.append(("/fixed", 1000 + 10 * i + 3, b"f%03d" % i))
        messages.append(("/two", 1000 + 10 * i + 4, b"t" * (1 + i % 2) + bytes([i])))
        for j in range(3):  # (each chunk of four frames holds 12, of more than RUN_LENGTHS_MAX lengths)
            messages.append(("/many", 1000 + 10 * i + 5 + j, b"m" * ((3 * i + j) % (RUN_LENGTHS_MAX + 3))))
    file = write_bag(tmp_path / "bag", messages, zstd_chunks=False)
    theirs, _, chunks = read_both(file)
    with Reader(file) as reader:
        keys = {c.id: c.topic for c in reader.connections}
    wanted = {channel: channel for channel in keys}
    runs = {channel for channel, topic in keys.items() if topic != "/frames"}
    assert in_sequence(chunks, wanted)
    batches = list(chunk_batches(file, chunks, wanted, runs))
    assert len(batches) == len(chunks) >= 8
    seen: list[Message] = []
    for batch in batches[:-1]:  # (the last chunk may hold too few messages to tell)
        shapes = {keys[run.key]: [data.shape[1] for _, data in run.parts] for run in batch.runs}
        assert shapes["/fixed"] == [4] and sorted(shapes["/two"]) == [2, 3] and set(shapes) == {"/fixed", "/two"}
    for batch in batches:
        run_topics = {keys[run.key] for run in batch.runs}
        assert not {keys[key] for _, key, _ in batch.messages} & run_topics
        assert [t for t, _, _ in batch.messages] == sorted(t for t, _, _ in batch.messages)
        seen += [(time, keys[key], data) for time, key, data in batch.messages]
        for run in batch.runs:
            rows = np.sort(np.concatenate([rows for rows, _ in run.parts]))
            assert rows.tolist() == list(range(len(run.times)))
            seen += [
                (int(run.times[row]), keys[run.key], message.tobytes())
                for rows, data in run.parts
                for row, message in zip(rows, data, strict=True)
            ]
    assert sorted(seen) == sorted(theirs)
    for topic in keys.values():  # each channel in its order
        assert sorted((m for m in seen if m[1] == topic), key=lambda m: m[0]) == [m for m in theirs if m[1] == topic]


def test_overlapping_chunks_are_not_in_sequence(tmp_path: Path) -> None:
    file = write_bag(tmp_path / "bag", out_of_order_messages(), zstd_chunks=False)
    _, _, chunks = read_both(file)
    with Reader(file) as reader:
        wanted = {c.id: c.id for c in reader.connections}
    assert not in_sequence(chunks, wanted)


def chunk_at(start: int, end: int, offset: int) -> ChunkInfo:
    return ChunkInfo(start, end, offset, 100, {1: 0}, 0, "", 50, 50, {1: 1})


def test_chunks_that_touch_are_in_sequence_in_file_order() -> None:
    """rosbags breaks a tie in time by the chunks' places in the file: chunks that share a
    boundary time can be taken whole only when the earlier one comes first in the file."""
    assert in_sequence([chunk_at(0, 10, 100), chunk_at(10, 20, 200)], {1: 1})
    assert not in_sequence([chunk_at(0, 10, 200), chunk_at(10, 20, 100)], {1: 1})
    assert in_sequence([chunk_at(0, 10, 200), chunk_at(11, 20, 100)], {1: 1})
    assert not in_sequence([chunk_at(0, 10, 100), chunk_at(9, 20, 200)], {1: 1})


def mapping_rss(path: Path) -> int | None:
    """Bytes of ``path`` mapped into this process's memory now (its maps' Rss), None when unmapped."""
    total, ours = None, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and ":" not in fields[0]:  # a mapping's first line: range, perms, offset, dev, inode, path
            ours = len(fields) >= 6 and fields[5] == str(path)
        elif ours and fields[0] == "Rss:":
            total = (total or 0) + int(fields[1]) * 1024
    return total


@pytest.mark.parametrize("zstd_chunks", [False, True])
def test_large_payloads_are_views_where_they_lie(tmp_path: Path, zstd_chunks: bool) -> None:
    """A payload of ``VIEW_PAYLOAD_MIN`` bytes or more is not copied: in an uncompressed
    chunk it is a view of the mapped file that ``locate`` finds the file offset of (where
    an encoder process reads it); in a compressed one, a view of the decompressed chunk.
    Payloads of chunks that overlap wait in a heap, copied (a view would read pages back
    in after they were let go of)."""
    assert BIG >= VIEW_PAYLOAD_MIN
    in_order = [
        (topic, time + 5 * (topic == "/b"), data) for topic, time, data in out_of_order_messages() if topic != "/c"
    ]
    for name, messages in (("in-order", in_order), ("overlapping", out_of_order_messages())):
        file = write_bag(tmp_path / name, messages, zstd_chunks)
        theirs, ours, chunks = read_both(file)
        assert ours == theirs and in_sequence(chunks, {1: 1, 2: 2, 3: 3}) == (name == "in-order")
        content = file.read_bytes()
        large = [payload for _, _, payload in ours if len(payload) >= VIEW_PAYLOAD_MIN]
        assert len(large) == 40 and all(isinstance(p, bytes) for _, _, p in ours if len(p) < VIEW_PAYLOAD_MIN)
        if name == "overlapping":
            assert all(isinstance(payload, bytes) for payload in large)
            continue
        for payload in large:
            assert isinstance(payload, memoryview)
            found = locate(np.frombuffer(payload, np.uint8))
            if zstd_chunks:
                assert found is None
                continue
            assert found is not None
            mapped, offset = found
            assert mapped.path == str(file) and content[offset : offset + len(payload)] == payload


def test_a_file_cut_short_after_it_was_mapped_is_an_error(tmp_path: Path) -> None:
    """Reading a page past the end of a mapped file would be a SIGBUS: a chunk beyond the
    file's end now is the truncated-file error."""
    file = write_bag(tmp_path / "bag", [("/a", 1000 + i, bytes([i]) * BIG) for i in range(20)], zstd_chunks=False)
    with Reader(file) as reader:
        chunks = list(reader.storage.chunks)  # type: ignore[attr-defined]
        wanted = {c.id: c.id for c in reader.connections}
    batches = chunk_batches(file, chunks, wanted, ())
    next(batches)
    with file.open("r+b") as cut:
        cut.truncate(chunks[2].chunk_start_offset + 100)
    next(batches)  # (the second chunk is still whole)
    with pytest.raises(ValueError, match="truncated file"):
        next(batches)


def test_a_chunk_s_pages_are_let_go_of_when_the_next_is_read(tmp_path: Path) -> None:
    """Reading through the map keeps only about a chunk of the file in this process's
    RSS, however long the file (the pages stay in the page cache)."""
    file = write_bag(tmp_path / "bag", [("/a", 1000 + i, bytes([i]) * BIG) for i in range(80)], zstd_chunks=False)
    with Reader(file) as reader:
        chunks = list(reader.storage.chunks)  # type: ignore[attr-defined]
        wanted = {c.id: c.id for c in reader.connections}
    largest = max(chunk.compressed_size for chunk in chunks)
    assert file.stat().st_size > 10 * largest
    batches = chunk_batches(file, chunks, wanted, ())
    sums = [sum(bytes(payload[::4096]).count(0) for _, _, payload in next(batches).messages) for _ in chunks[:-1]]
    assert len(sums) == len(chunks) - 1  # (every page of the payloads read; the generator still open)
    rss = mapping_rss(file)
    assert rss is not None and rss <= 2 * largest
