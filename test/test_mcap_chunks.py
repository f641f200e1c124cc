"""``chunk_messages`` against rosbags' own MCAP message loop, on files rosbags writes:
the same messages in the same order, also when chunks overlap in time and times tie,
and one clear error for a damaged chunk."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import pytest
from rosbags.rosbag2 import CompressionFormat, CompressionMode, Reader, StoragePlugin, Writer
from rosbags.rosbag2.storage_mcap import ChunkInfo

from ortf_ros.pipeline.mcap_chunks import chunk_messages

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


Message = tuple[int, str, bytes]


def read_both(file: Path, topics: set[str] | None = None) -> tuple[list[Message], list[Message], list[ChunkInfo]]:
    """(rosbags' messages, chunk_messages', the chunks)."""
    with Reader(file) as reader:
        chosen = [c for c in reader.connections if topics is None or c.topic in topics]
        theirs = [(time, conn.topic, bytes(data)) for conn, time, data in reader.messages(connections=chosen)]
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


def test_a_damaged_record_is_an_error(tmp_path: Path) -> None:
    file = write_bag(tmp_path / "bag", [("/a", 1000 + i, b"x" * 100) for i in range(10)], zstd_chunks=False)
    with Reader(file) as reader:
        [chunk] = reader.storage.chunks  # type: ignore[attr-defined]
        wanted = {c.id: c.id for c in reader.connections}
    records = chunk.chunk_start_offset + 9 + 40 + len(chunk.compression)
    data = bytearray(file.read_bytes())
    first_length = records + 1
    data[first_length : first_length + 8] = struct.pack("<Q", 1 << 40)  # a record longer than the chunk
    file.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"chunk at offset {chunk.chunk_start_offset}: a record runs past"):
        list(chunk_messages(file, [chunk], wanted))
    file.write_bytes(bytes(data[: records + 50]))
    with pytest.raises(ValueError, match="truncated file"):
        list(chunk_messages(file, [chunk], wanted))
