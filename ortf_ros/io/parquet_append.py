"""Append the row groups of one Parquet file to another in place, undoably.

Why: a chunk's ``steps.parquet`` holds up to a thousand episodes, and rebuilding it for each new
one made a commit cost grow with the chunk (issue 20). A Parquet file is row groups followed by
one footer that lists them with absolute byte offsets, and readers find the footer from the
file's last 8 bytes. So new row groups can be written where the old footer began, followed by a
footer listing old and new: the bytes of every committed episode stay where they are.

The new rows are first written as a complete Parquet file of their own (the *piece*, by pyarrow,
with every setting it allows); its row group bytes are copied after the target's data. The
piece's row groups, their offsets moved to where they landed (``thrift_compact``: pyarrow's
writer refuses to start anywhere but 0), are spliced as bytes into the target's footer after its
own, which are never decoded. What an append costs is the piece plus one footer, and the footer
grows by a couple of kilobytes per row group (``make bench`` measures it at 1000).

Crash safety: before the target is touched, a journal records where its data ended and the
footer bytes that followed (zstd, as footers repeat every column's name in every row group: a
tenth of their size, in a millisecond a megabyte; written atomically and synced). ``cut_back`` puts those back, so an
append interrupted at any byte, or finished for an episode that then never reached the episode
index, is undone exactly; the rows before it are never rewritten.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
from backports import zstd

from ortf_ros.errors import FormatError, ThriftError
from ortf_ros.io import atomic
from ortf_ros.io import thrift_compact as thrift

MAGIC = b"PAR1"
TRAILER = 8  # footer length (uint32, little-endian) and the magic
_JOURNAL_MAGIC = b"ORTFAPND"
_CREATED = 2**64 - 1  # the journal's data end when the append created the target
_COPY_BLOCK = 1 << 20

# Field ids of parquet.thrift: FileMetaData, RowGroup, ColumnChunk and ColumnMetaData (its offsets).
_FILE_NUM_ROWS, _FILE_ROW_GROUPS = 3, 4
_ROW_GROUP_COLUMNS, _ROW_GROUP_NUM_ROWS, _ROW_GROUP_FILE_OFFSET, _ROW_GROUP_ORDINAL = 1, 3, 5, 7
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


@dataclass(frozen=True)
class _Footer:
    """A FileMetaData cut around its list of row groups, as bytes: what is before it (version and
    schema, then ``num_rows``), the row group structs back to back, and what follows (key-value
    metadata, created_by, column orders). Appending is then a byte concatenation: the committed
    row groups are never decoded into objects (1000 of them would take tens of MB and a second
    in Python; pyarrow's own parse of them kept RSS growing by 0.3 MB a commit)."""

    head: bytes
    num_rows_header: bytes
    num_rows: int
    between: bytes
    groups_header: bytes
    group_count: int
    groups: bytes
    tail: bytes
    decoded: tuple[thrift.Struct, ...] = ()  # the row groups, when they had to be read (the piece's)

    def with_groups(self, groups: bytes, count: int, rows: int) -> bytes:
        """This footer listing ``groups`` (encoded row group structs, ``count`` of them holding
        ``rows`` rows) after its own."""
        return self._listing(self.groups + groups, self.group_count + count, self.num_rows + rows)

    def without_groups(self) -> bytes:
        """This footer listing no row group: its schema and the rest, for pyarrow to read."""
        return self._listing(b"", 0, 0)

    def _listing(self, groups: bytes, count: int, rows: int) -> bytes:
        parts = [
            self.head,
            self.num_rows_header,
            thrift.zigzag_varint(rows),
            self.between,
            self.groups_header,
            thrift.list_header(thrift.STRUCT, count),
            groups,
            self.tail,
        ]
        return b"".join(parts)


def _cut(footer: bytes, source: Path, known_tail: bytes | None = None) -> _Footer:
    """``footer`` cut around its row groups. ``known_tail``: what follows them in footers this
    writer makes; when ``footer`` ends with it, the row groups are not read at all, else they
    are skipped one by one (a footer another writer made: once, since the merged one ends so)."""
    fields = thrift.FieldReader(footer)
    num_rows: tuple[int, int, int, int] | None = None  # header start, value start, value, value end
    try:
        while True:
            start = fields.position
            header = fields.header()
            if header is None:
                break
            field_id, kind = header
            if field_id == _FILE_ENCRYPTION:
                raise FormatError(f"{source}: encrypted Parquet files are not appended to")
            if field_id == _FILE_NUM_ROWS and kind == thrift.I64:
                value_start = fields.position
                value = fields.value(kind)
                assert isinstance(value, int)
                num_rows = (start, value_start, value, fields.position)
            elif field_id == _FILE_ROW_GROUPS and kind == thrift.LIST and num_rows is not None:
                groups_header = footer[start : fields.position]
                element, count = fields.list()
                if element != thrift.STRUCT:
                    raise FormatError(f"{source}: Parquet footer whose row groups are not structs")
                first = fields.position
                # The fields after the row groups come in ascending order from 5, so a footer that
                # ends with this writer's own tail has exactly that tail after its row groups.
                if known_tail is not None and footer.endswith(known_tail) and len(footer) - len(known_tail) >= first:
                    end = len(footer) - len(known_tail)
                    decoded: tuple[thrift.Struct, ...] = ()
                else:
                    read = [_struct(fields.value(thrift.STRUCT)) for _ in range(count)]
                    # Kept for the piece, whose row groups are moved; another writer's footer is
                    # only read through to find where its row groups end.
                    decoded = tuple(read) if known_tail is None else ()
                    end = fields.position
                return _Footer(
                    head=footer[: num_rows[0]],
                    num_rows_header=footer[num_rows[0] : num_rows[1]],
                    num_rows=num_rows[2],
                    between=footer[num_rows[3] : start],
                    groups_header=groups_header,
                    group_count=count,
                    groups=footer[first:end],
                    tail=footer[end:],
                    decoded=decoded,
                )
            elif kind not in (thrift.TRUE, thrift.FALSE):
                fields.value(kind)
    except ThriftError as exc:
        raise FormatError(f"{source}: unreadable Parquet footer: {exc}") from None
    raise FormatError(f"{source}: Parquet footer without num_rows before its row groups")


def _struct(value: thrift.Value) -> thrift.Struct:
    if not isinstance(value, thrift.Struct):
        raise ThriftError(f"expected a struct, got {type(value).__name__}")
    return value


def _moved_groups(groups: tuple[thrift.Struct, ...], shift: int, first_ordinal: int) -> tuple[bytes, int]:
    """``groups`` (the piece's row groups) encoded back to back, every file offset moved by
    ``shift`` and their ordinals counted on from ``first_ordinal``; with the rows they hold."""

    def move(struct_: thrift.Struct, field_ids: tuple[int, ...]) -> None:
        for field in struct_.fields:
            if field.id in field_ids and isinstance(field.value, int) and not isinstance(field.value, bool):
                field.value += shift

    encoded, rows = [], 0
    for number, group in enumerate(groups):
        move(group, (_ROW_GROUP_FILE_OFFSET,))
        columns = group.get(_ROW_GROUP_COLUMNS)
        for chunk in columns.value.items if columns is not None and isinstance(columns.value, thrift.Container) else ():
            if not isinstance(chunk, thrift.Struct):
                continue
            move(chunk, (_CHUNK_FILE_OFFSET, _CHUNK_OFFSET_INDEX, _CHUNK_COLUMN_INDEX))
            meta = chunk.get(_CHUNK_META)
            if meta is not None and isinstance(meta.value, thrift.Struct):
                move(meta.value, _META_OFFSETS)
        ordinal = group.get(_ROW_GROUP_ORDINAL)
        if ordinal is not None:  # an i16: past 32767 row groups a file cannot say it
            if first_ordinal + number <= 0x7FFF:
                ordinal.value = first_ordinal + number
            else:
                group.fields.remove(ordinal)
        count = group.get(_ROW_GROUP_NUM_ROWS)
        rows += count.value if count is not None and isinstance(count.value, int) else 0
        encoded.append(thrift.encode_value(thrift.STRUCT, group))
    return b"".join(encoded), rows


def _schema_of(footer: _Footer) -> pq.ParquetSchema:
    """The schema a footer declares, read by pyarrow from the footer without its row groups."""
    bare = footer.without_groups()
    trailer = struct.pack("<I", len(bare)) + MAGIC
    return pq.read_metadata(pa.BufferReader(MAGIC + bare + trailer)).schema


def _write_journal(journal: Path, data_end: int, footer: bytes) -> None:
    def produce(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            handle.write(_JOURNAL_MAGIC + struct.pack("<Q", data_end) + zstd.compress(footer, 1))

    atomic.write_with(journal, produce)


def _read_journal(journal: Path) -> tuple[int, bytes]:
    data = journal.read_bytes()
    if len(data) < 16 or data[:8] != _JOURNAL_MAGIC:
        raise FormatError(f"{journal}: not an append journal")
    (data_end,) = struct.unpack_from("<Q", data, 8)
    try:
        return data_end, zstd.decompress(data[16:])
    except zstd.ZstdError as exc:
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
    piece_tail = read_tail(piece)
    piece_footer = _cut(piece_tail.footer[:-TRAILER], piece)
    existing = _cut(tail.footer[:-TRAILER], target, known_tail=piece_footer.tail)
    if not _schema_of(existing).equals(_schema_of(piece_footer)):
        raise FormatError(f"{target}: its columns differ from the rows to append ({piece.name})")
    # The piece's row groups start after its leading magic; in the target they start at data_end.
    groups, added_rows = _moved_groups(piece_footer.decoded, tail.data_end - len(MAGIC), existing.group_count)
    footer = existing.with_groups(groups, len(piece_footer.decoded), added_rows)
    merged = footer + struct.pack("<I", len(footer)) + MAGIC
    _write_journal(journal, tail.data_end, tail.footer)
    with open(target, "r+b") as out, open(piece, "rb") as new_rows:
        out.truncate(tail.data_end)
        out.seek(tail.data_end)
        new_rows.seek(len(MAGIC))
        _copy(new_rows, out, piece_tail.data_end - len(MAGIC))
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
