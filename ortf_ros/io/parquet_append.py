"""Append the row groups of one Parquet file to another in place, undoably.

Why: a chunk's ``steps.parquet`` holds up to a thousand episodes, and rebuilding it for each new
one made a commit cost grow with the chunk (issue 20). A Parquet file is row groups followed by
one footer that lists them with absolute byte offsets, and readers find the footer from the
file's last 8 bytes. So new row groups can be written where the old footer began, followed by a
footer listing old and new: the bytes of every committed episode stay where they are.

The new rows are first written as a complete Parquet file of their own (the *piece*, by pyarrow,
with every setting it allows); its row group bytes are copied after the target's data, and its
footer is moved to the new position (``thrift_compact``) and merged into the target's with
pyarrow (``FileMetaData.append_row_groups``). What an append costs is the piece plus one footer,
and the footer grows by a few kilobytes per row group (``make bench`` measures it at 1000).

Crash safety: before the target is touched, a journal records where its data ended and the
footer bytes that followed (compressed, as footers repeat every column's name in every row group:
an eighth of their size; written atomically and synced). ``cut_back`` puts those back, so an
append interrupted at any byte, or finished for an episode that then never reached the episode
index, is undone exactly; the rows before it are never rewritten.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.errors import FormatError
from ortf_ros.io import atomic
from ortf_ros.io import thrift_compact as thrift

MAGIC = b"PAR1"
TRAILER = 8  # footer length (uint32, little-endian) and the magic
_JOURNAL_MAGIC = b"ORTFAPND"
_CREATED = 2**64 - 1  # the journal's data end when the append created the target
_COPY_BLOCK = 1 << 20

# Field ids of parquet.thrift that hold absolute file offsets.
_FILE_ROW_GROUPS = 4
_ROW_GROUP_COLUMNS, _ROW_GROUP_FILE_OFFSET = 1, 5
_CHUNK_FILE_OFFSET, _CHUNK_META, _CHUNK_OFFSET_INDEX, _CHUNK_COLUMN_INDEX = 2, 3, 4, 6
_META_OFFSETS = (9, 10, 11, 14)  # data page, index page, dictionary page, bloom filter
_FILE_ENCRYPTION = 8


@dataclass(frozen=True)
class Tail:
    """Where a Parquet file's row group data ends and the footer (with its trailer) that follows."""

    data_end: int
    footer: bytes


def read_tail(path: Path) -> Tail:
    """The footer of ``path``; a FormatError naming the file if it is not a plain Parquet file."""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size < len(MAGIC) + TRAILER:
            raise FormatError(f"{path}: too short to be a Parquet file ({size} bytes)")
        handle.seek(size - TRAILER)
        length, magic = struct.unpack("<I4s", handle.read(TRAILER))
        if magic != MAGIC:
            raise FormatError(f"{path}: not a plain Parquet file (ends in {magic!r}, expected {MAGIC!r})")
        data_end = size - TRAILER - length
        if data_end < len(MAGIC):
            raise FormatError(f"{path}: its footer length ({length}) runs past the start of the file")
        handle.seek(data_end)
        return Tail(data_end, handle.read())


def _moved_footer(footer: bytes, shift: int, source: Path) -> bytes:
    """``footer`` (a FileMetaData without trailer) with every file offset moved by ``shift``."""
    try:
        metadata, _ = thrift.decode_struct(footer)
    except thrift.ThriftError as exc:
        raise FormatError(f"{source}: unreadable Parquet footer: {exc}") from None
    if metadata.get(_FILE_ENCRYPTION) is not None:
        raise FormatError(f"{source}: encrypted Parquet files are not appended to")

    def move(struct_: thrift.Struct, field_ids: tuple[int, ...]) -> None:
        for field in struct_.fields:
            if field.id in field_ids and isinstance(field.value, int) and not isinstance(field.value, bool):
                field.value += shift

    groups = metadata.get(_FILE_ROW_GROUPS)
    if groups is None or not isinstance(groups.value, thrift.Container):
        raise FormatError(f"{source}: Parquet footer without row groups")
    for group in groups.value.items:
        assert isinstance(group, thrift.Struct)
        move(group, (_ROW_GROUP_FILE_OFFSET,))
        columns = group.get(_ROW_GROUP_COLUMNS)
        assert columns is not None and isinstance(columns.value, thrift.Container)
        for chunk in columns.value.items:
            assert isinstance(chunk, thrift.Struct)
            move(chunk, (_CHUNK_FILE_OFFSET, _CHUNK_OFFSET_INDEX, _CHUNK_COLUMN_INDEX))
            meta = chunk.get(_CHUNK_META)
            if meta is not None and isinstance(meta.value, thrift.Struct):
                move(meta.value, _META_OFFSETS)
    return thrift.encode_struct(metadata)


def _metadata_of(footer: bytes) -> pq.FileMetaData:
    """pyarrow's view of a footer, read as the metadata-only file it would make."""
    trailer = struct.pack("<I", len(footer)) + MAGIC
    return pq.read_metadata(pa.BufferReader(MAGIC + footer + trailer))


def _serialized(metadata: pq.FileMetaData) -> bytes:
    """Footer and trailer of ``metadata``, as they end a Parquet file."""
    sink = pa.BufferOutputStream()
    metadata.write_metadata_file(sink)
    serialized: bytes = sink.getvalue().to_pybytes()
    return serialized[len(MAGIC) :]


def _write_journal(journal: Path, data_end: int, footer: bytes) -> None:
    def produce(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            handle.write(_JOURNAL_MAGIC + struct.pack("<Q", data_end) + zlib.compress(footer, 1))

    atomic.write_with(journal, produce)


def _read_journal(journal: Path) -> tuple[int, bytes]:
    data = journal.read_bytes()
    if len(data) < 16 or data[:8] != _JOURNAL_MAGIC:
        raise FormatError(f"{journal}: not an append journal")
    (data_end,) = struct.unpack_from("<Q", data, 8)
    try:
        return data_end, zlib.decompress(data[16:])
    except zlib.error as exc:
        raise FormatError(f"{journal}: damaged append journal: {exc}") from None


def append_row_groups(target: Path, piece: Path, journal: Path) -> None:
    """Add every row group of ``piece`` (a Parquet file of the same schema) to the end of ``target``.

    ``journal`` must not exist (an earlier append is cut back or kept first); it is left in place
    for the caller to remove once the rows are committed, or to ``cut_back`` with. A missing
    ``target`` becomes ``piece`` itself (renamed: the piece is consumed)."""
    if journal.exists():
        raise FileExistsError(f"{journal}: an earlier append is not settled")
    if not target.exists():
        _write_journal(journal, _CREATED, b"")
        atomic.fsync_file(piece)
        os.replace(piece, target)
        atomic.fsync_dir(target.parent)
        return
    tail = read_tail(target)
    existing = pq.read_metadata(target)
    piece_tail = read_tail(piece)
    if not existing.schema.equals(pq.read_metadata(piece).schema):
        raise FormatError(f"{target}: its columns differ from the rows to append ({piece.name})")
    footer = piece_tail.footer[:-TRAILER]
    # The piece's row groups start after its leading magic; in the target they start at data_end.
    existing.append_row_groups(_metadata_of(_moved_footer(footer, tail.data_end - len(MAGIC), piece)))
    merged = _serialized(existing)
    _write_journal(journal, tail.data_end, tail.footer)
    with open(target, "r+b") as out, open(piece, "rb") as rows:
        out.truncate(tail.data_end)
        out.seek(tail.data_end)
        rows.seek(len(MAGIC))
        _copy(rows, out, piece_tail.data_end - len(MAGIC))
        out.write(merged)
        out.flush()
        os.fsync(out.fileno())


def _copy(source: BinaryIO, target: BinaryIO, count: int) -> None:
    """``count`` bytes from ``source`` to ``target``, a block at a time (memory: one block)."""
    while count > 0:
        block = source.read(min(count, _COPY_BLOCK))
        if not block:
            raise FormatError(f"{source.name}: shorter than its footer says")
        target.write(block)
        count -= len(block)


def cut_back(target: Path, journal: Path) -> None:
    """Undo the append recorded in ``journal``, complete or interrupted, and remove the journal."""
    data_end, footer = _read_journal(journal)
    if data_end == _CREATED:
        target.unlink(missing_ok=True)
        atomic.fsync_dir(target.parent)
    else:
        with open(target, "r+b") as out:
            if out.seek(0, os.SEEK_END) < data_end:
                raise FormatError(f"{target}: shorter than before the append its journal records ({journal})")
            out.truncate(data_end)
            out.seek(data_end)
            out.write(footer)
            out.flush()
            os.fsync(out.fileno())
    settle(journal)


def settle(journal: Path) -> None:
    """The append in ``journal`` is kept: forget how to undo it."""
    journal.unlink(missing_ok=True)
    atomic.fsync_dir(journal.parent)
