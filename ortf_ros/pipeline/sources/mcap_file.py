"""An indexed MCAP file: rosbags parses its summary (channels, schemas, the chunk index)
and ``mcap_chunks`` reads the chunks it lists. A file without a summary is
``mcap_salvage``'s."""

from __future__ import annotations

import struct
from collections.abc import Collection, Iterator
from typing import Any

import numpy as np

from ortf_ros.pipeline.sources.base import Message, guarded
from ortf_ros.pipeline.sources.compression import decompressed_batch
from ortf_ros.pipeline.sources.mcap_chunks import Batch, chunk_batches, chunk_messages, in_sequence
from ortf_ros.pipeline.sources.rosbags_file import RosbagsFile

MCAP_MAGIC = b"\x89MCAP0\r\n"
_FOOTER_SIZE = 37  # opcode, length, summary start, summary offset start, CRC

_INDEX_TIMES: dict[tuple[str, int, int], dict[int, tuple[int, int]]] = {}  # see _index_times
_INDEX_TIMES_MAX = 64


def has_footer(size: int, tail: bytes) -> bool:
    """Whether a file of ``size`` bytes ending in ``tail`` was closed: it ends in a footer
    record and the magic. A recorder killed mid-write leaves neither."""
    return size >= 2 * len(MCAP_MAGIC) + _FOOTER_SIZE and tail.endswith(MCAP_MAGIC)


class McapFile(RosbagsFile):
    format_name = "MCAP"

    def _chunks(self) -> list[Any] | None:
        chunks = getattr(self.reader.storage, "chunks", None)
        return list(chunks) if chunks else None

    def _index_times(self) -> dict[int, tuple[int, int]] | None:
        """Per-channel first/last log time from the MCAP message index records (no chunk is read).

        ``ortf-bag2ortf`` opens a recording twice in one process (for its mapping, then to
        convert it; with ``--jobs``, the conversion is another process), and the records
        are spread over the whole file: what they say is kept per file and version.
        """
        chunks = self._chunks()
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

    def batches(self, keys: Collection[int], runs: Collection[int]) -> Iterator[Batch] | None:
        """The chunks, one batch each (``chunk_batches``); None for chunks that overlap in time."""
        wanted = self.wanted(keys)
        chunks = self._chunks()
        if not chunks or not in_sequence(chunks, wanted):
            return None
        if not wanted:
            return iter(())
        batches = chunk_batches(self.path, chunks, wanted, () if self.compression == "message" else runs)
        return guarded(self.name, "damaged message data", (decompressed_batch(b, self.compression) for b in batches))

    def _stored(self, wanted: dict[int, int]) -> Iterator[Message]:
        """The messages as the file stores them: read by ``chunk_messages`` where the file has chunks."""
        chunks = self._chunks()
        return chunk_messages(self.path, chunks, wanted) if chunks else super()._stored(wanted)
