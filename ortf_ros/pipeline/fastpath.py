"""Raw message -> samples, with a fast path for high-rate messages of a fixed layout.

A robot publishes JointState at 500 Hz, WrenchStamped at 1 kHz and TF at 100 Hz or
more, and from one message to the next only the stamps and the numbers change: the
frame ids, the joint names and the array lengths, and so every byte offset, stay the
same. Decoding each one with rosbags and extracting it costs tens of microseconds. So
once a message of a topic has gone the full way (``decode`` -> ``extract``), its layout
is kept: which bytes must not change (all but the stamps and the float64 values) and
where the stamps and float64 runs are. A later message of the same topic, type and length whose fixed
bytes match is read with numpy at those offsets. The stamp and numbers are the only
bytes that differ, so this gives the sample the full way would give (tests compare
them). Even that costs a few microseconds a message in Python, so consecutive messages
of one layout are read as a block (``SampleDecoder.block``): the fixed bytes of all of
them checked, and their stamps and numbers taken, by one numpy call each. A block of TF
messages is read as a run per edge (``TransformBlock``).

Anything else goes the full way, which reports what is malformed, and teaches the
layout anew: another length, other names or frame id, a big-endian or ROS 1 message,
or a type whose definition a recording replaced (``Decoder.has_jazzy_layout``). A
layout is learned only after reading the message it came from back at its offsets
and getting the same sample as the full way.

The live recorder feeds its subscriptions' raw CDR through the same ``SampleDecoder``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from ortf_ros.format.units import NS
from ortf_ros.pipeline.decode import Decoder, canonical_msgtype
from ortf_ros.pipeline.extract import extract
from ortf_ros.pipeline.samples import (
    BadMessage,
    BlockKind,
    BlockPart,
    JointStateSample,
    Payload,
    RawMessage,
    RawRun,
    Sample,
    SampleBlock,
    Stamps,
    TransformBlock,
    TransformRun,
    TransformSample,
    block_sample,
    ros_rotations,
)

_CDR_LE = b"\x00\x01"  # the encapsulation of little-endian plain CDR
_STAMP = struct.Struct("<iI")  # a header's stamp: sec, nanosec
_PAYLOAD_AT = 4  # after the encapsulation; CDR alignment counts from here
_U32 = struct.Struct("<I")
_TRAILING_MAX = 3  # padding rosbags accepts after the last field
_LAYOUTS_MAX = 64  # per SampleDecoder: topics x lengths seen; cleared when exceeded

_Runs = list[tuple[int, int]]  # (offset, count) of each float64 run
# (the message, the stamps of its headers, its float64 runs) -> its samples, or None when the
# numbers are ones only the full way reports (a transform that is not a rotation, say)
_Make = Callable[[RawMessage, list[Stamps], list[np.ndarray]], list[Sample] | None]


class _Cursor:
    """Walks little-endian CDR the way rosbags reads it, noting where headers' stamps and
    float64 runs are."""

    def __init__(self, data: Payload) -> None:
        self.data = data
        self.pos = _PAYLOAD_AT
        self.stamps: list[int] = []  # offsets of each header's (sec, nanosec)
        self.runs: _Runs = []

    def _align(self, size: int) -> None:
        self.pos += -(self.pos - _PAYLOAD_AT) % size

    def u32(self) -> int:
        self._align(4)
        (value,) = _U32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def header(self) -> None:
        """A std_msgs/Header: the stamp (noted), then the frame id."""
        self._align(4)
        _STAMP.unpack_from(self.data, self.pos)  # (there are 8 bytes to read)
        self.stamps.append(self.pos)
        self.pos += _STAMP.size
        self.skip_string()

    def skip_string(self) -> None:
        length = self.u32()  # (not `self.pos += self.u32()`: that adds to the position before the length)
        self.pos += length

    def float64s(self, count: int) -> None:
        if count:  # rosbags aligns only a sequence that has elements
            self._align(8)
        self.runs.append((self.pos, count))
        self.pos += 8 * count


def _joint_state_fields(cursor: _Cursor) -> None:
    """header, name[], then position[], velocity[], effort[]."""
    cursor.header()
    for _ in range(cursor.u32()):
        cursor.skip_string()
    for _ in range(3):
        cursor.float64s(cursor.u32())


def _wrench_fields(cursor: _Cursor) -> None:
    """header, then force and torque: six float64 in a row."""
    cursor.header()
    cursor.float64s(6)


def _transform_fields(cursor: _Cursor) -> None:
    """TransformStamped[]: each a header, child_frame_id, then translation and rotation: seven float64."""
    for _ in range(cursor.u32()):
        cursor.header()
        cursor.skip_string()
        cursor.float64s(7)


def _joint_state_maker(samples: list[Sample]) -> _Make:
    learned = samples[0]
    assert isinstance(learned, JointStateSample)
    names = learned.names

    def make(raw: RawMessage, stamps: list[Stamps], runs: list[np.ndarray]) -> list[Sample]:
        return [block_sample("joint_state", raw.topic, stamps[0], names, runs)]

    return make


def _wrench_maker(samples: list[Sample]) -> _Make:
    def make(raw: RawMessage, stamps: list[Stamps], runs: list[np.ndarray]) -> list[Sample]:
        return [block_sample("wrench", raw.topic, stamps[0], (), runs)]

    return make


def _transform_maker(samples: list[Sample]) -> _Make:
    """Each transform as ``extract`` makes it: the rotation normalised and turned to w, x, y, z;
    anything ``extract`` would refuse is left to it."""
    learned = [s for s in samples if isinstance(s, TransformSample)]
    assert len(learned) == len(samples)

    def make(raw: RawMessage, stamps: list[Stamps], runs: list[np.ndarray]) -> list[Sample] | None:
        values = np.array(runs)
        rotations, valid = ros_rotations(values[:, 3:])
        if not valid.all() or not np.isfinite(values[:, :3]).all():
            return None
        return [
            TransformSample(known.parent, known.child, stamp, run[:3], rotation, known.static)
            for known, stamp, run, rotation in zip(learned, stamps, runs, rotations, strict=True)
        ]

    return make


@dataclass(frozen=True)
class _Kind:
    """What the fast path knows of one message type."""

    find_fields: Callable[[_Cursor], None]  # where its stamps and float64 runs are
    maker: Callable[[list[Sample]], _Make]  # how its samples are made of them, given the learned ones
    block_kind: BlockKind  # what a block of them is


_TYPES: dict[str, _Kind] = {
    "sensor_msgs/msg/JointState": _Kind(_joint_state_fields, _joint_state_maker, "joint_state"),
    "geometry_msgs/msg/WrenchStamped": _Kind(_wrench_fields, _wrench_maker, "wrench"),
    "tf2_msgs/msg/TFMessage": _Kind(_transform_fields, _transform_maker, "transform"),
}


def has_blocks(msgtype: str) -> bool:
    """Whether messages of the type are read a block at a time (``SampleBlock``,
    ``TransformBlock``), once one of a topic has taught the fast path its layout."""
    return _TYPES.get(canonical_msgtype(msgtype)) is not None


def carries_tf(msgtype: str) -> bool:
    """Whether messages of the type are TF (``TransformBlock`` once read a block at a time)."""
    kind = _TYPES.get(canonical_msgtype(msgtype))
    return kind is not None and kind.block_kind == "transform"


class Layout:
    """One topic's messages of one length: the bytes that must match, where the stamps and
    the float64 runs are."""

    def __init__(
        self,
        fixed: list[tuple[int, int, bytes]],  # (start, end, bytes)
        cursor: _Cursor,  # what walking the message found
        samples: list[Sample],  # what the full way made of the message this layout was learned from
        kind: _Kind,
    ) -> None:
        self.fixed = fixed
        self.stamps = cursor.stamps
        self.runs = cursor.runs
        self.frame_ids = [s.stamps.frame_id if not isinstance(s, BadMessage) else "" for s in samples]
        self.make = kind.maker(samples)
        self.kind = kind.block_kind
        self.names = samples[0].names if isinstance(samples[0], JointStateSample) else ()
        self.edges = [(s.parent, s.child, s.static) for s in samples if isinstance(s, TransformSample)]
        # The fixed bytes as one gather for a whole block.
        self._fixed_at = np.concatenate([np.arange(start, end) for start, end, _ in fixed] or [np.arange(0)])
        self._fixed_bytes = np.frombuffer(b"".join(expected for _, _, expected in fixed), np.uint8)

    def read(self, raw: RawMessage) -> list[Sample] | None:
        """The message's samples, or None when it is laid out otherwise."""
        data = raw.data
        for start, end, expected in self.fixed:
            if data[start:end] != expected:
                return None
        stamps = []
        for offset, frame_id in zip(self.stamps, self.frame_ids, strict=True):
            sec, nanosec = _STAMP.unpack_from(data, offset)
            stamps.append(Stamps(raw.receive_ns, sec * NS + nanosec, frame_id))
        return self.make(raw, stamps, [np.frombuffer(data, "<f8", count, offset) for offset, count in self.runs])

    def read_part(self, data: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, BlockPart] | None:
        """Messages of this layout's key (joint states or wrenches), a row each of ``data``
        (uint8, C-contiguous), at ``rows`` of a block: their header stamps and the part they
        are, the same numbers ``read`` gives one by one; None when one of them is laid out
        otherwise."""
        if not self._fits(data):
            return None
        [stamp_at] = self.stamps
        runs = tuple(_column(data, "<f8", offset, width).astype(np.float64) for offset, width in self.runs)
        return _header_ns(data, stamp_at), BlockPart(rows, self.frame_ids[0], self.names, runs)

    def read_transforms(self, data: np.ndarray) -> list[TransformRun] | None:
        """TF messages of this layout's key, a row each of ``data`` (as ``read_part``): each
        transform of the layout as a run of its edge, the numbers ``read`` gives one by
        one; None when one of them is laid out otherwise or has numbers only the full way
        reports (a zero quaternion, say)."""
        if not self._fits(data):
            return None
        found = []
        for (parent, child, static), stamp_at, (offset, _) in zip(self.edges, self.stamps, self.runs, strict=True):
            values = _column(data, "<f8", offset, 7)
            translation = values[:, :3].copy()
            rotation, valid = ros_rotations(values[:, 3:])
            if not valid.all() or not np.isfinite(translation).all():
                return None
            found.append(TransformRun(parent, child, static, _header_ns(data, stamp_at), translation, rotation))
        return found

    def _fits(self, data: np.ndarray) -> bool:
        return bool((data[:, self._fixed_at] == self._fixed_bytes).all())


def _column(data: np.ndarray, dtype: str, offset: int, width: int = 1) -> np.ndarray:
    """(messages, width) values at ``offset`` of each row of ``data``: a view."""
    count, length = data.shape
    view: np.ndarray = np.ndarray((count, width), dtype, data, offset, (length, np.dtype(dtype).itemsize))
    return view


def _header_ns(data: np.ndarray, stamp_at: int) -> np.ndarray:
    """The header stamp at ``stamp_at`` of each row, in nanoseconds."""
    seconds = _column(data, "<i4", stamp_at)[:, 0].astype(np.int64)
    header: np.ndarray = seconds * NS + _column(data, "<u4", stamp_at + 4)[:, 0]
    return header


def _layout(raw: RawMessage, samples: list[Sample]) -> Layout | None:
    """The layout of ``raw`` (which the full way turned into ``samples``), if the fast path can read it."""
    kind = _TYPES.get(canonical_msgtype(raw.msgtype))
    data = raw.data
    if kind is None or raw.serialization != "cdr" or data[:2] != _CDR_LE:
        return None
    if not samples or any(isinstance(s, BadMessage) for s in samples):
        return None
    cursor = _Cursor(data)
    try:
        kind.find_fields(cursor)
    except struct.error:
        return None
    if not 0 <= len(data) - cursor.pos <= _TRAILING_MAX or len(cursor.stamps) != len(samples):
        return None
    fixed, start = [], 0
    variable = [*((o, o + _STAMP.size) for o in cursor.stamps), *((o, o + 8 * n) for o, n in cursor.runs if n)]
    for offset, end in [*sorted(variable), (len(data), len(data))]:
        if offset > start:
            fixed.append((start, offset, bytes(data[start:offset])))
        start = max(start, end)
    layout = Layout(fixed, cursor, samples, kind)
    read = layout.read(raw)
    return layout if read is not None and len(read) == len(samples) and all(map(_same, read, samples)) else None


def _same(a: object, b: object) -> bool:
    """Samples equal field by field, arrays bit for bit (NaN payloads included)."""
    if type(a) is not type(b):
        return False
    for field in fields(a):  # type: ignore[arg-type]
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                return False
        elif x != y:
            return False
    return True


class SampleDecoder:
    """``decode`` -> ``extract`` for any message; the fast path for the ones it can read."""

    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder
        self.fast_reads = 0  # messages the fast path read (the rest went the full way)
        self._layouts: dict[tuple[str, str, str, int], Layout] = {}

    def layout(self, raw: RawMessage) -> Layout | None:
        """The layout learned for messages like ``raw`` (same topic, type and length), if any:
        such messages can be read as a block (``block``)."""
        return self._layouts.get(_key(raw, len(raw.data)))

    def block(self, messages: list[RawMessage]) -> list[Sample | SampleBlock | TransformBlock]:
        """Consecutive messages of one topic: one block (``run_block``), or (when one of them
        is laid out otherwise) their samples one by one, the way ``samples`` gives them."""
        return self.run_samples(RawRun.of(messages))

    def run_samples(self, run: RawRun) -> list[Sample | SampleBlock | TransformBlock]:
        """A run as one block (``run_block``), or its messages' samples one by one (which
        teaches the fast path a layout it does not know yet)."""
        block = self.run_block(run)
        if block is None:
            return [sample for raw in run.messages() for sample in self.samples(raw)]
        return [block]

    def run_block(self, run: RawRun) -> SampleBlock | TransformBlock | None:
        """A run of messages as one block; None unless a layout of a kind that has blocks
        was learned for each of its lengths (``layout``) and fits."""
        layouts = []
        for _, data in run.parts:
            layout = self._layouts.get(_key(run, data.shape[1]))
            if layout is None:
                return None
            layouts.append(layout)
        kinds = {layout.kind for layout in layouts}
        if len(kinds) != 1:
            return None
        block = (_transform_block if kinds == {"transform"} else _sample_block)(run, layouts)
        if block is not None:
            self.fast_reads += len(run)
        return block

    def samples(self, raw: RawMessage) -> list[Sample]:
        """The message's samples; one that cannot be decoded is its own ``BadMessage``."""
        layout = self.layout(raw)
        if layout is not None:
            read = layout.read(raw)
            if read is not None:
                self.fast_reads += 1
                return read
        message = self.decoder.decode(raw)
        if isinstance(message, BadMessage):
            return [message]
        samples = extract(message, raw)
        if self.decoder.has_jazzy_layout(raw.msgtype):
            learned = _layout(raw, samples)
            if learned is not None:
                if len(self._layouts) >= _LAYOUTS_MAX:
                    self._layouts.clear()
                self._layouts[_key(raw, len(raw.data))] = learned
        return samples


def _sample_block(run: RawRun, layouts: list[Layout]) -> SampleBlock | None:
    """Joint states' or wrenches' parts as one block, a header stamp per message."""
    header = np.empty(len(run), np.int64)
    parts = []
    for (rows, data), layout in zip(run.parts, layouts, strict=True):
        read = layout.read_part(data, rows)
        if read is None:
            return None
        header[rows] = read[0]
        parts.append(read[1])
    kind = layouts[0].kind
    assert kind != "transform"
    return SampleBlock(run.topic, kind, run.receive_ns, header, tuple(parts))


def _transform_block(run: RawRun, layouts: list[Layout]) -> TransformBlock | None:
    """Each edge's transforms of every part as one run in message order (a message may
    hold an edge twice, and parts may share edges); edges in the order their first
    transform appears."""
    by_edge: dict[tuple[str, str, bool], list[tuple[np.ndarray, int, TransformRun]]] = {}
    for (rows, data), layout in zip(run.parts, layouts, strict=True):
        read = layout.read_transforms(data)
        if read is None:
            return None
        for place, edge in enumerate(read):
            by_edge.setdefault((edge.parent, edge.child, edge.static), []).append((rows, place, edge))
    if len({child for _, child, _ in by_edge}) < len(by_edge):
        return None  # a frame under two parents: which refusal each gets depends on the order (one by one)
    edges = []
    for found in sorted(by_edge.values(), key=lambda runs: min((int(r[0]), place) for r, place, _ in runs)):
        if len(found) == 1:
            edges.append(found[0][2])
            continue
        rows = np.concatenate([r for r, _, _ in found])
        places = np.concatenate([np.full(len(r), place) for r, place, _ in found])
        order = np.lexsort((places, rows))
        edge_runs = [edge for *_, edge in found]
        header, translation, rotation = (
            np.concatenate([getattr(edge, name) for edge in edge_runs])[order]
            for name in ("header_ns", "translation", "rotation")
        )
        first = found[0][2]
        edges.append(TransformRun(first.parent, first.child, first.static, header, translation, rotation))
    return TransformBlock(run.topic, run.receive_ns, tuple(edges))


def _key(raw: RawMessage | RawRun, length: int) -> tuple[str, str, str, int]:
    return (raw.topic, raw.msgtype, raw.serialization, length)
