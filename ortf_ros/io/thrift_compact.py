"""Thrift's compact protocol, decoded into a plain tree and encoded back byte for byte.

A Parquet footer is a Thrift ``FileMetaData`` in this protocol. Appending row groups to a
Parquet file means moving their byte offsets, and neither pyarrow (its writer refuses a sink
that does not start at 0: "Appending to file not implemented") nor any light library can
rewrite them: fastparquet can, but brings pandas. Only the wire format is handled here, with no
knowledge of Parquet: ``ortf_ros.io.parquet_append`` says which fields are offsets.

The encoder makes the same choices as Apache Thrift's own (short field headers for id deltas of
1-15, booleans in the field header, short list headers below 15 elements), so decoding and
encoding a footer written by Arrow gives back the same bytes; the tests check that.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, TypeAlias

from ortf_ros.errors import ThriftError

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
_INTEGERS = (BYTE, I16, I32, I64)


@dataclass
class Field:
    """One field of a struct: its id, its wire type and its value."""

    id: int
    type: int
    value: Value


@dataclass
class Struct:
    fields: list[Field]

    def get(self, field_id: int) -> Field | None:
        return next((f for f in self.fields if f.id == field_id), None)


@dataclass
class Container:
    """A list or set: the element type and the elements."""

    kind: int
    element_type: int
    items: list[Value]


@dataclass
class Map:
    key_type: int
    value_type: int
    items: list[tuple[Value, Value]]


Value: TypeAlias = "bool | int | float | bytes | Struct | Container | Map"


def decode_struct(data: bytes) -> tuple[Struct, int]:
    """The struct at the start of ``data`` and how many bytes it took."""
    reader = _Reader(memoryview(data))
    try:
        value = reader.struct()
    except (IndexError, struct.error):
        raise ThriftError("truncated Thrift struct") from None
    return value, reader.position


_Args = ParamSpec("_Args")


def _written(write: Callable[Concatenate[bytearray, _Args], None], *args: _Args.args, **kwargs: _Args.kwargs) -> bytes:
    """What ``write`` puts in a fresh buffer."""
    out = bytearray()
    write(out, *args, **kwargs)
    return bytes(out)


def encode_struct(value: Struct) -> bytes:
    return _written(_write_struct, value)


def encode_value(kind: int, value: Value) -> bytes:
    """One value without a field header (a list element, say)."""
    return _written(_write_value, kind, value)


def zigzag_varint(value: int) -> bytes:
    """An integer as the compact protocol writes i16, i32 and i64 values."""
    return _written(_zigzag, value)


def list_header(element_type: int, size: int) -> bytes:
    return _written(_write_list_header, element_type, size)


class FieldReader:
    """A struct's fields one at a time, each value read or left unread: a caller that needs
    the fields around a long list can find them without building the list's objects."""

    def __init__(self, data: bytes | memoryview) -> None:
        self._reader = _Reader(memoryview(data))
        self._last = 0

    @property
    def position(self) -> int:
        return self._reader.position

    def header(self) -> tuple[int, int] | None:
        """The next field's (id, type), or None at the struct's end. A boolean's value is in
        its type (``TRUE``/``FALSE``); any other value must be read next (``value`` or ``list``)."""
        try:
            header = self._reader.field_header(self._last)
        except IndexError:
            raise ThriftError("truncated Thrift struct") from None
        if header is not None:
            self._last = header[0]
        return header

    def value(self, kind: int) -> Value:
        try:
            return self._reader.value(kind)
        except (IndexError, struct.error):
            raise ThriftError("truncated Thrift struct") from None

    def list(self) -> tuple[int, int]:
        """A list's header: (element type, size); the elements follow."""
        try:
            return self._reader.list_header()
        except IndexError:
            raise ThriftError("truncated Thrift list") from None


class _Reader:
    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.position = 0

    def byte(self) -> int:
        value = self.data[self.position]
        self.position += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self.byte()
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ThriftError("varint longer than 64 bits")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def field_header(self, last: int) -> tuple[int, int] | None:
        """(id, type) of the next field of a struct whose previous field was ``last``; None at STOP."""
        header = self.byte()
        kind = header & 0x0F
        if kind == STOP:
            return None
        delta = header >> 4
        return (last + delta if delta else self.zigzag()), kind

    def list_header(self) -> tuple[int, int]:
        """(element type, size) of a list or set."""
        header = self.byte()
        size = header >> 4
        if size == 15:
            size = self.varint()
        return header & 0x0F, size

    def value(self, kind: int) -> Value:
        if kind in (TRUE, FALSE):
            return self.byte() == TRUE  # inside a container a boolean is a byte of its own
        if kind == BYTE:
            raw = self.byte()
            return raw - 256 if raw > 127 else raw
        if kind in (I16, I32, I64):
            return self.zigzag()
        if kind == DOUBLE:
            (number,) = struct.unpack_from("<d", self.data, self.position)
            self.position += 8
            return float(number)
        if kind == BINARY:
            length = self.varint()
            if self.position + length > len(self.data):
                raise ThriftError("binary field runs past the end")
            blob = bytes(self.data[self.position : self.position + length])
            self.position += length
            return blob
        if kind in (LIST, SET):
            element, size = self.list_header()
            return Container(kind, element, [self.value(element) for _ in range(size)])
        if kind == MAP:
            size = self.varint()
            if size == 0:
                return Map(0, 0, [])
            types = self.byte()
            key, item = types >> 4, types & 0x0F
            return Map(key, item, [(self.value(key), self.value(item)) for _ in range(size)])
        if kind == STRUCT:
            return self.struct()
        raise ThriftError(f"unknown compact type {kind}")

    def struct(self) -> Struct:
        fields: list[Field] = []
        last = 0
        while True:
            header = self.field_header(last)
            if header is None:
                return Struct(fields)
            field_id, kind = header
            if kind in (TRUE, FALSE):
                value: Value = kind == TRUE
            else:
                value = self.value(kind)
            fields.append(Field(field_id, kind, value))
            last = field_id


def _varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _write_list_header(out: bytearray, element_type: int, size: int) -> None:
    if size < 15:
        out.append(size << 4 | element_type)
    else:
        out.append(0xF0 | element_type)
        _varint(out, size)


def _zigzag(out: bytearray, value: int) -> None:
    _varint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _write_value(out: bytearray, kind: int, value: Value) -> None:
    if kind in (TRUE, FALSE):
        out.append(TRUE if value else FALSE)
    elif kind == BYTE:
        assert isinstance(value, int)
        out.append(value & 0xFF)
    elif kind in _INTEGERS:
        assert isinstance(value, int)
        _zigzag(out, value)
    elif kind == DOUBLE:
        assert isinstance(value, float)
        out += struct.pack("<d", value)
    elif kind == BINARY:
        assert isinstance(value, bytes)
        _varint(out, len(value))
        out += value
    elif kind in (LIST, SET):
        assert isinstance(value, Container)
        _write_list_header(out, value.element_type, len(value.items))
        for item in value.items:
            _write_value(out, value.element_type, item)
    elif kind == MAP:
        assert isinstance(value, Map)
        _varint(out, len(value.items))
        if value.items:
            out.append(value.key_type << 4 | value.value_type)
            for key, item in value.items:
                _write_value(out, value.key_type, key)
                _write_value(out, value.value_type, item)
    elif kind == STRUCT:
        assert isinstance(value, Struct)
        _write_struct(out, value)
    else:
        raise ThriftError(f"unknown compact type {kind}")


def _write_struct(out: bytearray, value: Struct) -> None:
    last = 0
    for field in value.fields:
        kind = field.type
        if kind in (TRUE, FALSE):
            kind = TRUE if field.value else FALSE
        delta = field.id - last
        if 0 < delta <= 15:
            out.append(delta << 4 | kind)
        else:
            out.append(kind)
            _zigzag(out, field.id)
        if kind not in (TRUE, FALSE):
            _write_value(out, kind, field.value)
        last = field.id
    out.append(STOP)
