"""TFRecord files and ``tf.train.Example`` records, read without TensorFlow.

``ortf import rlds`` reads TFDS datasets through this module so that importing needs
neither TensorFlow nor the ``protobuf`` package: a TFRecord file is a sequence of
``uint64 length | uint32 masked-CRC32C(length) | data | uint32 masked-CRC32C(data)``,
and an ``Example`` is three levels of protobuf messages (``Features`` -> map of
``Feature`` -> one of ``BytesList``/``FloatList``/``Int64List``), so a hand-written
decoder of protobuf's wire format for exactly those messages is short, and it slices
values out of the record without copying them (images stay ``memoryview``s of the
record until decoded).

Integrity: both CRCs of every record are checked, the length's (a torn or foreign file
is reported, never read as garbage lengths) and the data's (a flipped byte in a float
would otherwise be imported as a wrong value). The data's is computed by
``google-crc32c`` or ``crc32c`` when installed, else with numpy (about 10 ms per MB;
a byte-at-a-time Python loop would take seconds per MB). A record is read whole: an
RLDS episode is one record, so memory holds one episode's encoded bytes (twice, while
numpy checks it), however many episodes the file holds.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ortf_ros.errors import ExportError

_MASK_DELTA = 0xA282EAD8
_CRC32C_POLY = 0x82F63B78


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _CRC32C_POLY if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc_table()


def _crc32c_python(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _crc32c_numpy(data: bytes) -> int:
    """CRC32C with numpy, for records of any size (tens of ms per MB): the record is cut
    into lanes whose CRCs are computed in lockstep, a table lookup per byte position
    across all lanes, then combined pairwise. The CRC is linear over GF(2): a lane's
    contribution is its own CRC carried through the zero bytes of the lanes after it,
    and the initial all-ones register is the same as the first four bytes inverted."""
    raw = np.frombuffer(data, np.uint8)
    if raw.size < 4096:  # a Python loop is quicker than the setup
        return _crc32c_python(data)
    lanes = 1 << (raw.size.bit_length() // 2 + 1)  # about 2 * sqrt(size): as many lanes as positions
    length = -(-raw.size // lanes)
    padded = np.zeros(lanes * length, np.uint8)  # zeros in front leave a zero register at zero
    start = padded.size - raw.size
    padded[start:] = raw
    padded[start : start + 4] ^= 0xFF
    rows = np.ascontiguousarray(padded.reshape(lanes, length).T)  # row j: byte j of every lane
    del padded
    table = np.array(_TABLE, np.uint32)
    state = np.zeros(lanes, np.uint32)
    for row in rows:
        state = table[(state ^ row) & 0xFF] ^ (state >> 8)
    carry = _zero_bytes_operator(length)
    while state.size > 1:
        state = _apply(carry, state[0::2]) ^ state[1::2]
        carry = _apply(carry, carry)  # twice the zero bytes: the operator squared
    return int(state[0]) ^ 0xFFFFFFFF


def _apply(operator: np.ndarray, registers: np.ndarray) -> np.ndarray:
    """A linear map of CRC registers, given as the 32 images of its unit vectors."""
    out = np.zeros_like(registers)
    for bit in range(32):
        out ^= np.where((registers >> np.uint32(bit)) & np.uint32(1), operator[bit], np.uint32(0))
    return out


def _zero_bytes_operator(count: int) -> np.ndarray:
    """What feeding ``count`` zero bytes does to a CRC register (square and multiply)."""
    units: np.ndarray = np.uint32(1) << np.arange(32, dtype=np.uint32)
    step = np.array(_TABLE, np.uint32)[units & 0xFF] ^ (units >> np.uint32(8))  # one zero byte
    result: np.ndarray = units.copy()  # the identity
    while count:
        if count & 1:
            result = _apply(step, result)
        step = _apply(step, step)
        count >>= 1
    return result


def _fast_crc32c() -> Callable[[bytes], int] | None:
    try:
        import google_crc32c  # type: ignore[import-not-found,unused-ignore]

        return lambda data: int(google_crc32c.value(bytes(data)))
    except ImportError:
        pass
    try:
        import crc32c  # type: ignore[import-not-found,unused-ignore]

        return lambda data: int(crc32c.crc32c(data))
    except ImportError:
        return None


_DATA_CRC: Callable[[bytes], int] = _fast_crc32c() or _crc32c_numpy


def masked_crc(data: bytes, crc: Callable[[bytes], int] = _crc32c_python) -> int:
    value = crc(data)
    return (((value >> 15) | (value << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def read_records(path: Path) -> Iterator[bytes]:
    """Each record of the TFRecord file at ``path``, one at a time."""
    try:
        stream = path.open("rb")
    except OSError as exc:
        raise ExportError(f"{path}: cannot open the TFRecord shard ({exc.strerror})") from None
    with stream:
        yield from _records(stream, path)


def _records(stream: BinaryIO, path: Path) -> Iterator[bytes]:
    number = 0
    while True:
        header = stream.read(12)
        if not header:
            return
        where = f"{path}: record {number}"
        if len(header) < 12:
            raise ExportError(f"{where}: the file ends inside a record header (truncated TFRecord file)")
        length_bytes, length_crc = header[:8], struct.unpack("<I", header[8:])[0]
        if masked_crc(length_bytes) != length_crc:
            raise ExportError(f"{where}: length checksum mismatch; expected a TFRecord file")
        (length,) = struct.unpack("<Q", length_bytes)
        data = stream.read(length)
        footer = stream.read(4)
        if len(data) < length or len(footer) < 4:
            raise ExportError(f"{where}: the file ends inside the record ({length} bytes announced)")
        if masked_crc(data, _DATA_CRC) != struct.unpack("<I", footer)[0]:
            raise ExportError(f"{where}: data checksum mismatch (corrupt TFRecord file)")
        yield data
        number += 1


# -- tf.train.Example --------------------------------------------------------------

BYTES, FLOATS, INTS = "bytes_list", "float_list", "int64_list"


@dataclass(frozen=True)
class FeatureValues:
    """One ``Feature`` of an Example: its kind and its undecoded list payload."""

    kind: str
    payload: memoryview

    def floats(self) -> np.ndarray:
        return _packed_or_repeated(self.payload, 5, lambda data: np.frombuffer(data, "<f4"))

    def ints(self) -> np.ndarray:
        return _packed_or_repeated(self.payload, 0, _varints)

    def bytes_items(self) -> list[memoryview]:
        return [value for field, _, value in _fields(self.payload) if field == 1 and isinstance(value, memoryview)]

    def count(self) -> int:
        """How many values the list holds (of its own kind)."""
        if self.kind == BYTES:
            return len(self.bytes_items())
        return len(self.floats() if self.kind == FLOATS else self.ints())


class ProtoError(ValueError):
    """The bytes are not the protobuf message they were read as."""


def parse_example(record: bytes) -> dict[str, FeatureValues]:
    """An ``Example``'s features by name, their values left encoded."""
    view = memoryview(record)
    features: dict[str, FeatureValues] = {}
    for field, _, value in _fields(view):
        if field != 1 or not isinstance(value, memoryview):
            continue
        for entry_field, _, entry in _fields(value):
            if entry_field != 1 or not isinstance(entry, memoryview):
                continue
            key, feature = "", None
            for item_field, _, item in _fields(entry):
                if item_field == 1 and isinstance(item, memoryview):
                    key = bytes(item).decode("utf-8")
                elif item_field == 2 and isinstance(item, memoryview):
                    feature = _feature(item)
            features[key] = feature if feature is not None else FeatureValues(BYTES, memoryview(b""))
    return features


def _feature(view: memoryview) -> FeatureValues | None:
    for field, _, value in _fields(view):
        if isinstance(value, memoryview) and field in (1, 2, 3):
            return FeatureValues((BYTES, FLOATS, INTS)[field - 1], value)
    return None


def _fields(view: memoryview) -> Iterator[tuple[int, int, memoryview | int]]:
    """(field number, wire type, value): LEN values as memoryviews, the others as integers."""
    position, end = 0, len(view)
    while position < end:
        key, position = _varint(view, position)
        field, wire = key >> 3, key & 7
        if wire == 0:
            number, position = _varint(view, position)
            yield field, wire, number
        elif wire == 2:
            size, position = _varint(view, position)
            if position + size > end:
                raise ProtoError("a length-delimited field runs past its message")
            yield field, wire, view[position : position + size]
            position += size
        elif wire == 5:
            yield field, wire, int.from_bytes(view[position : position + 4], "little")
            position += 4
        elif wire == 1:
            yield field, wire, int.from_bytes(view[position : position + 8], "little")
            position += 8
        else:
            raise ProtoError(f"unsupported wire type {wire}")
    if position != end:
        raise ProtoError("a field runs past its message")


def _varint(view: memoryview, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(view) or shift > 63:
            raise ProtoError("a varint runs past its message")
        byte = view[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def _varints(data: memoryview) -> np.ndarray:
    """Packed varints decoded with numpy: a uint8 image stored as an int64 list is
    millions of them, which a Python loop would take seconds over."""
    raw = np.frombuffer(data, np.uint8)
    if not (raw & 0x80).any():  # every value below 128 (flags, small counts): one byte each
        return raw.astype(np.int64)
    ends = np.flatnonzero(raw < 0x80)
    if ends.size == 0 or ends[-1] != raw.size - 1:
        raise ProtoError("a varint runs past its message")
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts + 1
    longest = int(np.max(lengths))
    if longest > 10:
        raise ProtoError("a varint longer than 10 bytes")
    values = np.zeros(starts.size, np.uint64)
    for k in range(longest):
        present = lengths > k
        byte = (raw[starts[present] + k] & 0x7F).astype(np.uint64)
        values[present] |= byte << np.uint64(7 * k)
    return values.view(np.int64)  # two's complement, as int64 is encoded


def _packed_or_repeated(payload: memoryview, wire: int, packed: Callable[[memoryview], np.ndarray]) -> np.ndarray:
    """A numeric list's values, whether packed (proto3's default) or one field per value."""
    parts: list[np.ndarray] = []
    loose: list[int] = []
    for field, kind, value in _fields(payload):
        if field != 1:
            continue
        if kind == 2 and isinstance(value, memoryview):
            parts.append(packed(value))
        elif kind == wire and isinstance(value, int):
            loose.append(value)
    if loose:
        if wire == 5:
            parts.append(np.array(loose, np.uint32).view("<f4"))
        else:
            parts.append(np.array(loose, np.uint64).view(np.int64))
    if not parts:
        return packed(memoryview(b""))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
