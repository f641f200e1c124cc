"""rosbag2's per-message zstd (``compression_mode: message``), undone message by message.

A bare ``.mcap`` or ``.db3`` comes without the ``metadata.yaml`` that says whether its
messages are compressed: CDR starts with a zero byte and a zstd frame never does, so
each payload's magic number tells (``detect``).
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import itemgetter

import numpy as np
from backports import zstd

from ortf_ros.pipeline.sources.base import ZSTD_MAGIC, Message, MessageCompression
from ortf_ros.pipeline.sources.mcap_chunks import Batch


def decompressed_messages(messages: Iterator[Message], compression: MessageCompression) -> Iterator[Message]:
    if compression == "none":
        yield from messages
        return
    always = compression == "message"
    for stamp, key, data in messages:
        if always or data[:4] == ZSTD_MAGIC:
            data = zstd.decompress(data)
        yield stamp, key, data


def decompressed_batch(batch: Batch, compression: MessageCompression) -> Batch:
    """The batch with messages compressed one by one (zstd) decompressed; a run of them
    (or of messages too short to tell) becomes single messages (in time order; a tie
    keeps the single message first)."""
    if compression == "none":
        return batch
    always = compression == "message"
    magic = np.frombuffer(ZSTD_MAGIC, np.uint8)
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
        (time, key, zstd.decompress(data) if always or data[:4] == ZSTD_MAGIC else data)
        for time, key, data in [*batch.messages, *loose]
    ]
    if loose:
        messages.sort(key=itemgetter(0))
    return Batch(messages, runs)
