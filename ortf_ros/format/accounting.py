"""Per-stream accounting of an episode: what each stream delivered at every stage from the
wire to the file, stored with the episode (the ``accounting`` column of meta/episodes.parquet).

Users of every recorder report data that is quietly wrong rather than crashes: an encoder
that lost 2 frames of 72,649 and said nothing, a bag that kept 92.5 % of a camera's frames.
Counting each stage makes every loss either explained (a counted drop, with its reason) or
visible (an inconsistency between two stages, which ``ortf validate`` reports).

The stages of one stream (one row; a count is None where the stage does not apply or was
not seen, e.g. ``received`` offline, or every pipeline count of an episode recovered after
its writer died before ending it):

- ``received``: live only: messages the subscription took from the middleware during the
  episode, ``read`` plus those the recorder's queue had no room for (``QUEUE_FULL``);
- ``lost_in_transport``: live only: messages the publisher sent that never arrived
  (sequence gaps the middleware reports); not part of ``received``;
- ``read``: messages handed to the pipeline (offline: read from the recording);
- ``undecodable``: of those, messages that could not be decoded;
- ``dropped``: of those, messages decoded but not used, by reason (``Drop``);
- ``late``: messages stamped more than ``max_latency_ms`` before they arrived, whether kept
  or not (for information: a late message is still used when it is in order);
- ``kept``: messages that became data: frames, samples, transforms (TF counts transforms);
- ``frames_encoded``: cameras: frames handed to the video encoder (each kept frame is);
- ``frames_in_video``: cameras: frames the committed video holds;
- ``native_samples``: streams kept at their own rate: rows of the episode's side table;
- ``steps_referencing``: steps that point at this stream's data (a frame, a sample) or
  take their state or action from it;
- ``steps_outside_tolerance``: steps this stream was further than the sync tolerance from
  (dropped or kept as the mapping says; for information).

And of the stream's clock (``pipeline.clock_offsets``; None for a stream without a time of
its own, TF, or without messages):

- ``clock_offset_ms``: receive time minus the stream's time (its stamp, or receive time:
  0), the median over the episode's first messages: its latency, plus the offset of its
  clock from the recorder's when they are not one (a simulation's, an unsynchronised robot's);
- ``clock_shift_ms``: what was added to the stream's times to put them on the episode's
  step clock (``clock_offset_ms`` in the mapping); None: nothing.

Both were added after the first datasets were written: a row without them (and an index
whose column lacks them, ``LEGACY_ACCOUNTING_TYPES``) reads as None.

``inconsistencies`` gives what does not add up within a row; the validator also compares
the dataset-side counts with the files.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import pyarrow as pa

from ortf_ros.errors import FormatError
from ortf_ros.format import layout

ACCOUNTING_COLUMN = "accounting"

QUEUE_FULL = "queue full"
"""The reason of a message the live recorder's bounded queue had no room for."""
OUT_OF_ORDER = "out of order"
"""The reason of a message older than one already used from the same stream."""
NOT_FOR_ACTION = "not for the action's joints"
"""The reason of a command that gives no position of the action's joints (a velocity
command, another arm's command on a shared topic)."""

BEFORE_FIRST_KEYFRAME = "before the first keyframe"
"""The reason of an H.264 camera's packet before the episode's first keyframe, where its
video starts: a trim, not a loss (``TRIMS``)."""
AFTER_LOST_PACKET = "after a lost packet"
"""The reason of an H.264 camera's packet after one that was lost, until the next
keyframe: it refers to a frame the episode video does not hold."""
NO_PICTURE = "parameter sets alone"
"""The reason of an H.264 camera's packet that holds no frame (its SPS and PPS, or SEI,
alone): the video takes its parameter sets, and nothing is lost (``TRIMS``)."""
TRIMS = frozenset({BEFORE_FIRST_KEYFRAME, NO_PICTURE})
"""Reasons of messages dropped where the data could not begin yet: counted, and in the
summary, but not among an episode's ``losses``."""

ROLE_CAMERA = "camera"
ROLE_DEPTH = "depth"
ROLE_JOINT_STATES = "joint_states"
ROLE_WRENCH = "wrench"
ROLE_ACTION = "action"
ROLE_TF = "tf"
ROLE_AUDIO = "audio"  # native_samples: the messages (chunks) in its chunk table; no step points at one
ROLE_LIDAR = "lidar"  # a LaserScan: a native-rate table steps point into
ROLE_POINT_CLOUD = "point_cloud"  # a PointCloud2: the episode's cloud file (no step points at a cloud)
FRAME_ROLES = frozenset({ROLE_CAMERA, ROLE_DEPTH})

ACCOUNTING_TYPE = pa.list_(
    pa.struct(
        [
            pa.field("stream", pa.string()),
            pa.field("topic", pa.string()),
            pa.field("role", pa.string()),
            pa.field("received", pa.int64()),
            pa.field("lost_in_transport", pa.int64()),
            pa.field("read", pa.int64()),
            pa.field("undecodable", pa.int64()),
            pa.field("dropped", pa.list_(pa.struct([pa.field("reason", pa.string()), pa.field("count", pa.int64())]))),
            pa.field("late", pa.int64()),
            pa.field("kept", pa.int64()),
            pa.field("frames_encoded", pa.int64()),
            pa.field("frames_in_video", pa.int64()),
            pa.field("native_samples", pa.int64()),
            pa.field("steps_referencing", pa.int64()),
            pa.field("steps_outside_tolerance", pa.int64()),
            pa.field("clock_offset_ms", pa.float64()),
            pa.field("clock_shift_ms", pa.float64()),
        ]
    )
)
LEGACY_ACCOUNTING_TYPES = (
    pa.list_(pa.struct(list(ACCOUNTING_TYPE.value_type)[:-2])),  # before the clock fields
)
"""Earlier types of the column, which datasets written then still have: valid as they are."""
_CLOCKS = ("clock_offset_ms", "clock_shift_ms")

_COUNTS = (
    "received",
    "lost_in_transport",
    "read",
    "undecodable",
    "late",
    "kept",
    "frames_encoded",
    "frames_in_video",
    "native_samples",
    "steps_referencing",
    "steps_outside_tolerance",
)


@dataclass(frozen=True)
class StreamAccount:
    """One stream's counts in one episode (see the module docstring for each stage)."""

    stream: str  # the dataset's name: a camera, ``joint_states``, a wrench, ``action``, ``tf``
    role: str  # ROLE_*
    topic: str | None = None  # the ROS topic it came from
    received: int | None = None
    lost_in_transport: int | None = None
    read: int | None = None
    undecodable: int | None = None
    dropped: Mapping[str, int] = field(default_factory=dict)  # reason -> messages
    late: int | None = None
    kept: int | None = None
    frames_encoded: int | None = None
    frames_in_video: int | None = None
    native_samples: int | None = None
    steps_referencing: int | None = None
    steps_outside_tolerance: int | None = None
    clock_offset_ms: float | None = None
    clock_shift_ms: float | None = None

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    @property
    def losses(self) -> int:
        """Messages that did not become data: undecodable, dropped (but for ``TRIMS``) and lost on the way."""
        trimmed = sum(count for reason, count in self.dropped.items() if reason in TRIMS)
        return (self.undecodable or 0) + self.dropped_total - trimmed + (self.lost_in_transport or 0)

    def trim_phrases(self) -> list[str]:
        """The ``TRIMS`` said part by part (``3 dropped (before the first keyframe)``)."""
        return [f"{count} dropped ({reason})" for reason, count in sorted(self.dropped.items()) if reason in TRIMS]

    def loss_phrases(self) -> list[str]:
        """``losses`` said part by part (``2 dropped (queue full)``, ``1 undecodable``, ...)."""
        phrases = [
            f"{count} dropped ({reason})" for reason, count in sorted(self.dropped.items()) if reason not in TRIMS
        ]
        phrases += [f"{self.undecodable} undecodable"] if self.undecodable else []
        phrases += [f"{self.lost_in_transport} lost in transport"] if self.lost_in_transport else []
        return phrases

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"stream": self.stream, "topic": self.topic, "role": self.role}
        for name in (*_COUNTS, *_CLOCKS):
            data[name] = getattr(self, name)
        data["dropped"] = [{"reason": reason, "count": count} for reason, count in sorted(self.dropped.items())]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StreamAccount:
        """From a row's struct or staged JSON; raises ValueError/TypeError on a malformed one."""
        counts: dict[str, Any] = {name: _count(data.get(name), name) for name in _COUNTS}
        counts |= {name: _milliseconds(data.get(name), name) for name in _CLOCKS}
        dropped: dict[str, int] = {}
        for item in data.get("dropped") or ():
            reason, count = item["reason"], _count(item["count"], "dropped.count")
            if not isinstance(reason, str) or count is None:
                raise ValueError(f"dropped: {item!r} is not a reason and a count")
            dropped[reason] = dropped.get(reason, 0) + count
        stream, role, topic = data.get("stream"), data.get("role"), data.get("topic")
        if not isinstance(stream, str) or not isinstance(role, str) or not (topic is None or isinstance(topic, str)):
            raise ValueError(f"stream {stream!r}, role {role!r}, topic {topic!r}: expected strings")
        return cls(stream=stream, role=role, topic=topic, dropped=dropped, **counts)


def _count(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name}: {value!r} is not a count")
    return value


def _milliseconds(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}: {value!r} is not a number of milliseconds")
    return float(value)


def accounts_to_rows(accounts: Sequence[StreamAccount] | None) -> list[dict[str, Any]] | None:
    return None if accounts is None else [a.to_dict() for a in accounts]


def accounts_from_rows(rows: Iterable[Mapping[str, Any]] | None) -> tuple[StreamAccount, ...] | None:
    return None if rows is None else tuple(StreamAccount.from_dict(row) for row in rows)


def inconsistencies(account: StreamAccount) -> list[str]:
    """What does not add up between the stages of one row, each as a phrase; [] when every
    loss is a counted one. Stages not seen (None) are not compared."""
    problems = []
    a = account
    if a.received is not None and a.read is not None:
        queued_out = a.dropped.get(QUEUE_FULL, 0)
        if a.received != a.read + queued_out:
            problems.append(f"received {a.received} != read {a.read} + dropped ({QUEUE_FULL}) {queued_out}")
    if a.read is not None and a.kept is not None and a.role != ROLE_TF:
        after_read = a.dropped_total - a.dropped.get(QUEUE_FULL, 0)
        undecodable = a.undecodable or 0
        if a.read != undecodable + after_read + a.kept:
            problems.append(
                f"read {a.read} != undecodable {undecodable} + dropped {after_read} + kept {a.kept} "
                f"({a.read - undecodable - after_read - a.kept:+d} unexplained)"
            )
    if a.late is not None and a.read is not None and a.late > a.read:
        problems.append(f"late {a.late} > read {a.read}")
    if a.role in FRAME_ROLES:
        if a.kept is not None and a.frames_encoded is not None and a.kept != a.frames_encoded:
            problems.append(f"kept {a.kept} frames but {a.frames_encoded} were encoded")
        if a.frames_encoded is not None and a.frames_in_video is not None and a.frames_encoded != a.frames_in_video:
            problems.append(f"{a.frames_encoded} frames encoded but the video holds {a.frames_in_video}")
    if a.native_samples is not None and a.kept is not None and a.native_samples > a.kept:
        problems.append(f"{a.native_samples} native samples from {a.kept} kept messages")
    return problems


def accounted(accounts: Iterable[StreamAccount]) -> str:
    """One line on an episode's streams: their losses, and whether every stage adds up."""
    rows = list(accounts)
    problems = [f"{a.stream}: {problem}" for a in rows for problem in inconsistencies(a)]
    frames = sum(a.frames_in_video or 0 for a in rows)
    samples = sum(a.native_samples or 0 for a in rows)
    losses = [f"{a.stream} {what}" for a in rows for what in a.loss_phrases() + a.trim_phrases()]
    line = f"{len(rows)} streams, {frames} frames in videos, {samples} native samples; "
    line += ", ".join(losses) if losses else "nothing lost"
    return line + ("; DOES NOT ADD UP: " + "; ".join(problems) if problems else "; every stage adds up")


class StoredAccounts(Sequence[StreamAccount]):
    """An episode's accounting as the episode index holds it, decoded when first read.

    Reading the index must not cost in proportion to the streams of every episode: a
    10,000-episode index of 8 streams each took 1.2 s to decode whole (nested structs to
    Python, then checked) against 0.05 s without the column, and every ``load_dataset``,
    ``ortf info`` and writer opening paid it. Most readers never look at the accounting,
    so a record keeps its row of the Arrow column and decodes it on first use. A malformed
    row then raises ``FormatError`` where it is read (the validator checks every row).
    Pickled, it is the decoded tuple: a record sent to another process carries no Arrow array.
    """

    __slots__ = ("_column", "_decoded", "_episode_id", "_row")

    def __init__(self, column: pa.ListArray, row: int, episode_id: str) -> None:
        self._column = column
        self._row = row
        self._episode_id = episode_id
        self._decoded: tuple[StreamAccount, ...] | None = None

    def _accounts(self) -> tuple[StreamAccount, ...]:
        if self._decoded is None:
            try:
                decoded = accounts_from_rows(self._column[self._row].as_py())
            except (KeyError, TypeError, ValueError) as exc:
                raise FormatError(
                    f"{layout.EPISODES}: episode {self._episode_id!r}: {ACCOUNTING_COLUMN}: bad value: {exc}"
                ) from None
            self._decoded = decoded or ()
        return self._decoded

    def __len__(self) -> int:
        return len(self._accounts())

    @overload
    def __getitem__(self, index: int) -> StreamAccount: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[StreamAccount]: ...

    def __getitem__(self, index: int | slice) -> StreamAccount | Sequence[StreamAccount]:
        return self._accounts()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self._accounts() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._accounts())

    def __repr__(self) -> str:
        return repr(self._accounts())

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (self._accounts(),))


def stored_accounts(table: pa.Table, episode_ids: Sequence[str]) -> list[StoredAccounts | None]:
    """Each row's accounting of an episode index table, undecoded (``StoredAccounts``);
    None for a row without (another writer's episode) and for every row of a table without
    the column."""
    if ACCOUNTING_COLUMN not in table.column_names:
        return [None] * table.num_rows
    column = table.column(ACCOUNTING_COLUMN).combine_chunks()
    if isinstance(column, pa.ExtensionArray) or not isinstance(column, pa.ListArray):
        raise FormatError(f"{layout.EPISODES}: {ACCOUNTING_COLUMN}: expected a list of structs, got {column.type}")
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    return [
        StoredAccounts(column, row, episode_id) if present else None
        for row, (present, episode_id) in enumerate(zip(valid.tolist(), episode_ids, strict=True))
    ]
