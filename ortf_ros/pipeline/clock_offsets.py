"""Clock offsets between a recording's streams: measured at each episode's start, taken
out where the mapping says so, refused where it does not, and watched for jumps.

A message carries two times, the stamp its publisher wrote and when the recorder received
it. A stream's samples live on the clock of its time (``time: header`` or ``receive``),
while how far input has come, which decides when a step is due (the watermark,
``assembly.step_clock``), is the receive time. Where the two clocks are one, they differ
by latency: milliseconds, their jitter tens. Where they are not, they differ by anything:
a simulation recorded without use_sim_time (stamps from /clock near 0, receive times on
the wall clock), a robot computer whose clock is not synchronised with the recording
laptop's (seconds to hours), a camera driver stamping with its device's clock while the
arm uses the host's. Steps decided by receive time then outrun the data by the offset (a
10 s bag whose receive times were 119,000 s after its stamps became one episode of 3.5
million steps), or streams a second apart are written side by side as if simultaneous.

The rule, per episode (``ClockOffsets``):

- a stream's *lag* is receive time minus its time, the median over its first
  ``MEASURE_MESSAGES`` messages (robust to a late message or two); a ``time: receive``
  stream's is 0;
- two lags *agree* when they differ by at most ``max(max_latency_ms, 100 ms)``: the
  mapping already lets a message arrive ``max_latency_ms`` after its stamp (200 ms by
  default), and 100 ms is well above latency jitter (tens of ms) and a camera's
  exposure-to-receive delay (30-100 ms), and well below any offset worth the name;
- the *step clock* is the clock of the largest group of streams without a
  ``clock_offset_ms`` whose lags agree (a tie: the group with the joint state, then the
  one nearest the receive clock). When its lag is beyond the agreement, it is one offset
  shared by those streams (simulated time, an unsynchronised robot): the episode is made
  on their clock as it is, the watermark takes the offset off the receive times, and the
  summary says so (``note``);
- a stream without ``clock_offset_ms`` whose lag does not agree with the step clock is
  refused (``ClockOffsetError``: the topics, their offsets, the key that fixes it);
  ``clock_offset_ms: auto`` moves its times by its lag minus the step clock's, when that
  is beyond the agreement (within it the difference is latency, and nothing is moved;
  beyond it, auto cannot tell the stream's latency from its offset: it takes out both);
  a number moves them by that many milliseconds, and is not checked;
- afterwards every stream's lag is followed (a slow drift of unsynchronised clocks moves
  it) and watched: one that leaves the agreement for ``JUMP_CONFIRM_NS`` of receive time
  is a jump (an NTP step, a simulation reset), refused with its time, never glued; one
  that comes back within it was a stall (a burst of messages received late).

Until the offsets are decided (every stream measured, or ``MEASURE_WINDOW_NS`` of input
time since the episode's first message), samples wait here in order: memory is at
most that window's. A stream that begins later is measured from its first messages (an
``auto`` one's samples wait meanwhile); while it is, or while a jump is in question, the
watermark waits where the question began, so no step is decided across it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from ortf_ros.errors import ClockOffsetError
from ortf_ros.format.units import NS
from ortf_ros.pipeline.mapping import TimedStream, TimeSource, TopicMapping
from ortf_ros.pipeline.samples import ControllerStateSample, SampleBlock, Stamps, TransformBlock

MEASURE_MESSAGES = 9
"""Messages per stream whose median lag is the stream's: a 30 fps camera's third of a second."""
MEASURE_WINDOW_NS = NS
"""Input time after which the offsets are decided with the streams that came."""
MIN_AGREE_NS = 100_000_000
"""Lags closer than this always agree (see the module docstring)."""
JUMP_CONFIRM_NS = NS
"""Receive time a lag must stay away from its stream's for a jump (a stall drains sooner)."""
DRIFT_DIVISOR = 16
"""A stream's lag follows what its messages within the agreement show by 1/16 each time."""

_T = TypeVar("_T")


@dataclass(frozen=True)
class StreamClock:
    """What an episode's accounting says of a stream's clock: its lag at the start (ms,
    latency and any offset) and what was added to its times (ms; None: nothing)."""

    offset_ms: float
    shift_ms: float | None


class _Stream:
    """One timed stream's measurement and watch."""

    def __init__(self, spec: TimedStream) -> None:
        self.spec = spec
        self.lags: list[int] = []  # the first MEASURE_MESSAGES
        self.first_ns: int | None = None  # receive time of its first message
        self.start_lag_ns: int | None = None  # the median, once measured
        self.lag_ns = 0  # followed from the median on
        self.shift_ns: int | None = None  # added to its times; None: not decided yet
        self.suspect_ns: int | None = None  # receive time of the first message off its lag
        self.normal_ns: int | None = None  # receive time of the last message on it
        self.held: list[Any] = []  # an ``auto`` stream's samples while it is measured late

    def observe(self, receive: np.ndarray, lag: np.ndarray) -> None:
        if self.first_ns is None and len(receive):
            self.first_ns = int(receive[0])
        room = MEASURE_MESSAGES - len(self.lags)
        if room > 0:
            self.lags += lag[:room].tolist()

    def measured(self, input_ns: int) -> bool:
        return len(self.lags) >= MEASURE_MESSAGES or (
            self.first_ns is not None and input_ns - self.first_ns >= MEASURE_WINDOW_NS
        )


def lags(sample: object, source: TimeSource) -> tuple[np.ndarray, np.ndarray]:
    """A sample's (or block's) receive times and lags (receive time minus its time), of the
    messages that have the time ``source`` names (a header-timed message without a stamp has none)."""
    if isinstance(sample, SampleBlock):
        if source == "receive":
            return sample.receive_ns, np.zeros(len(sample), np.int64)
        stamped = sample.header_ns != 0
        return sample.receive_ns[stamped], (sample.receive_ns - sample.header_ns)[stamped]
    stamps = getattr(sample, "stamps", None)
    if not isinstance(stamps, Stamps) or (source == "header" and not stamps.header_ns):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    lag = 0 if source == "receive" else stamps.receive_ns - (stamps.header_ns or 0)
    return np.array([stamps.receive_ns], np.int64), np.array([lag], np.int64)


def shifted(sample: _T, source: TimeSource, shift_ns: int) -> _T:
    """``sample`` with its time (its stamp, or receive time) moved by ``shift_ns``."""
    if not shift_ns:
        return sample
    if isinstance(sample, SampleBlock):
        if source == "receive":
            return replace(sample, receive_ns=sample.receive_ns + shift_ns)
        return replace(sample, header_ns=np.where(sample.header_ns != 0, sample.header_ns + shift_ns, 0))
    if isinstance(sample, ControllerStateSample):
        reference = None if sample.reference is None else shifted(sample.reference, source, shift_ns)
        return replace(sample, state=shifted(sample.state, source, shift_ns), reference=reference)
    stamps = getattr(sample, "stamps", None)
    if not isinstance(stamps, Stamps):
        return sample
    if source == "header" and stamps.header_ns:
        return replace(sample, stamps=replace(stamps, header_ns=stamps.header_ns + shift_ns))  # type: ignore[type-var]
    return replace(sample, stamps=replace(stamps, receive_ns=stamps.receive_ns + shift_ns))  # type: ignore[type-var]


def newest_receive_ns(sample: object) -> int | None:
    """The latest receive time a sample (or block) carries."""
    if isinstance(sample, (SampleBlock, TransformBlock)):
        return int(sample.receive_ns.max()) if len(sample.receive_ns) else None
    stamps = getattr(sample, "stamps", None)
    return stamps.receive_ns if isinstance(stamps, Stamps) else None


def duration(ns: int) -> str:
    """``3.000 s``, ``250.3 ms``: an offset in words."""
    return f"{abs(ns) / NS:.3f} s" if abs(ns) >= NS else f"{abs(ns) / 1e6:.1f} ms"


def _ms(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


class ClockOffsets:
    """One episode's clocks: ``take`` each sample (what is ready comes back, on the step
    clock), ``settle`` as input time moves, ``step_input_ns`` for the watermark, ``finish``
    at the end. ``origin_ns``: the receive time the episode's times are told from (its
    start; None: its first message)."""

    def __init__(self, config: TopicMapping, *, origin_ns: int | None = None) -> None:
        self.agree_ns = max(round(config.max_latency_ms * 1e6), MIN_AGREE_NS)
        self._streams = {s.topic: _Stream(s) for s in config.timed_streams()}
        self._joints = config.joint_states.topic if config.joint_states is not None else None
        self.decided = False
        self.reference_lag_ns = 0  # the step clock's lag
        self.reference_ns = 0  # what the watermark takes off receive times: the lag, beyond the agreement
        self.note: str | None = None  # the summary's line, when there is something to say
        self._origin_ns = origin_ns
        self._first_ns: int | None = None
        self._held: list[tuple[Any, str]] = []

    def take(self, sample: Any, topic: str) -> list[tuple[Any, str]]:
        """The samples ready for the streams after ``sample`` came, in order, their times on
        the step clock: none while the offsets are measured, which they wait for."""
        stream = self._streams.get(topic)
        if not self.decided and self._first_ns is None:
            self._first_ns = newest_receive_ns(sample)
        if stream is None:
            if not self.decided:
                self._held.append((sample, topic))
                return []
            return [(sample, topic)]
        receive, lag = lags(sample, stream.spec.time)
        if not self.decided:
            stream.observe(receive, lag)
            self._held.append((sample, topic))
            if all(len(s.lags) >= MEASURE_MESSAGES for s in self._streams.values()):
                return self._decide()
            return []
        if stream.shift_ns is None:  # a stream that began after the start (decided by ``settle``)
            stream.observe(receive, lag)
            if stream.spec.clock_offset_ms == "auto":
                stream.held.append(sample)
                return []
            return [(shifted(sample, stream.spec.time, self._given_shift(stream)), topic)]
        self._watch(stream, receive, lag)
        return [(shifted(sample, stream.spec.time, stream.shift_ns), topic)]

    def settle(self, input_ns: int) -> list[tuple[Any, str]]:
        """Decide what input time ``input_ns`` decides: the offsets, once the window since
        the first timed message has passed; a late stream's, once its own has. Called
        between batches of input only: a batch's runs come after its single messages
        (``RawBatch``), and must be measured before the window closes on them."""
        if not self.decided:
            if self._first_ns is None:  # (the window runs from the episode's first input time)
                self._first_ns = input_ns
            if input_ns - self._first_ns < MEASURE_WINDOW_NS:
                return []
            return self._decide()
        ready: list[tuple[Any, str]] = []
        for stream in self._streams.values():
            if stream.shift_ns is None and stream.first_ns is not None and stream.measured(input_ns):
                ready += self._decide_late(stream)
        return ready

    def finish(self) -> list[tuple[Any, str]]:
        """The end of input: decide with what came; every sample still waiting."""
        if not self.decided:
            return self._decide()
        ready: list[tuple[Any, str]] = []
        for stream in self._streams.values():
            if stream.shift_ns is None and stream.first_ns is not None:
                ready += self._decide_late(stream)
        return ready

    def step_input_ns(self, input_ns: int) -> int | None:
        """Input time on the step clock, for the watermark: None until the offsets are
        decided; held where a late stream's measurement or a suspected jump began."""
        if not self.decided:
            return None
        held = [s.suspect_ns for s in self._streams.values() if s.suspect_ns is not None]
        held += [s.first_ns for s in self._streams.values() if s.shift_ns is None and s.first_ns is not None]
        return min([input_ns, *held]) - self.reference_ns

    def streams(self) -> dict[str, StreamClock]:
        """Per topic, what the accounting says of its clock (measured streams only)."""
        return {
            topic: StreamClock(s.start_lag_ns / 1e6, s.shift_ns / 1e6 if s.shift_ns else None)
            for topic, s in self._streams.items()
            if s.start_lag_ns is not None
        }

    # -- deciding ---------------------------------------------------------------

    def _decide(self) -> list[tuple[Any, str]]:
        measured = [s for s in self._streams.values() if s.lags]
        for stream in measured:
            stream.start_lag_ns = stream.lag_ns = int(np.median(stream.lags))
        group = self._reference_group([s for s in measured if s.spec.clock_offset_ms is None])
        if group:  # (its least lag: the offset, with the least latency of its streams)
            self.reference_lag_ns = min(s.lag_ns for s in group)
        if abs(self.reference_lag_ns) > self.agree_ns:
            self.reference_ns = self.reference_lag_ns
        self._refuse_disagreeing([s for s in measured if s.spec.clock_offset_ms is None], group)
        for stream in measured:
            stream.shift_ns = self._shift(stream)
        self.decided = True
        self.note = self._note()
        ready = []
        for sample, topic in self._held:
            held = self._streams.get(topic)
            if held is not None and held.shift_ns is not None:
                sample = shifted(sample, held.spec.time, held.shift_ns)
            ready.append((sample, topic))
        self._held = []
        return ready

    def _decide_late(self, stream: _Stream) -> list[tuple[Any, str]]:
        """A stream that began after the offsets were decided, now measured."""
        stream.start_lag_ns = stream.lag_ns = int(np.median(stream.lags)) if stream.lags else 0
        if stream.spec.clock_offset_ms is None:
            self._refuse_disagreeing([stream], [])
        stream.shift_ns = self._shift(stream)
        self.note = self._note()
        held, stream.held = stream.held, []
        return [(shifted(sample, stream.spec.time, stream.shift_ns), stream.spec.topic) for sample in held]

    def _reference_group(self, unkeyed: list[_Stream]) -> list[_Stream]:
        """The largest group of streams whose lags agree with its least (ties: the joint
        state's, then the one nearest the receive clock)."""
        best: list[_Stream] = []
        best_rank: tuple[int, bool, int] | None = None
        for stream in unkeyed:
            group = [s for s in unkeyed if 0 <= s.lag_ns - stream.lag_ns <= self.agree_ns]
            rank = (len(group), any(s.spec.topic == self._joints for s in group), -abs(stream.lag_ns))
            if best_rank is None or rank > best_rank:
                best, best_rank = group, rank
        return best

    def _shift(self, stream: _Stream) -> int:
        offset = stream.spec.clock_offset_ms
        if offset == "auto":
            difference = stream.lag_ns - self.reference_lag_ns
            return difference if abs(difference) > self.agree_ns else 0
        return self._given_shift(stream)

    @staticmethod
    def _given_shift(stream: _Stream) -> int:
        offset = stream.spec.clock_offset_ms
        return round(offset * 1e6) if isinstance(offset, float) else 0

    def _refuse_disagreeing(self, unkeyed: list[_Stream], group: list[_Stream]) -> None:
        off = [s for s in unkeyed if abs(s.lag_ns - self.reference_lag_ns) > self.agree_ns]
        if not off:
            return
        parts = []
        for stream in off:
            relative = stream.lag_ns - self.reference_lag_ns
            where = "behind" if relative > 0 else "ahead of"
            parts.append(
                f"{stream.spec.topic} ({stream.spec.time} time, lag {_ms(stream.lag_ns / 1e6)} ms) is "
                f"{duration(relative)} {where} the step clock: set {stream.spec.key}.clock_offset_ms: auto "
                f"(or {_ms(relative / 1e6)}) to align it"
            )
        clock = f"lag {_ms(self.reference_lag_ns / 1e6)} ms"
        if group:
            clock += " of " + ", ".join(s.spec.topic for s in group[:3]) + (", ..." if len(group) > 3 else "")
        raise ClockOffsetError(
            "the streams' clocks disagree (lag: receive time minus the stream's time, median of its first messages; "
            f"step clock: {clock}; lags more than {_ms(self.agree_ns / 1e6)} ms apart are different clocks): "
            + "; ".join(parts)
            + " (or 0 if its times are right and the delay is latency)"
        )

    def _watch(self, stream: _Stream, receive: np.ndarray, lag: np.ndarray) -> None:
        """Follow the stream's lag; a jump (off it for ``JUMP_CONFIRM_NS``) is refused."""
        if not len(lag):
            return
        off = np.abs(lag - stream.lag_ns) > self.agree_ns
        if not off.any():
            stream.suspect_ns, stream.normal_ns = None, int(receive[-1])
            center = int(lag[0]) if len(lag) == 1 else int(np.median(lag))
            stream.lag_ns += int((center - stream.lag_ns) / DRIFT_DIVISOR)
            return
        for at, value, away in zip(receive.tolist(), lag.tolist(), off.tolist(), strict=True):
            if not away:
                stream.suspect_ns, stream.normal_ns = None, at
            elif stream.suspect_ns is None:
                stream.suspect_ns = at
            elif at - stream.suspect_ns >= JUMP_CONFIRM_NS:
                self._refuse_jump(stream, value)

    def _refuse_jump(self, stream: _Stream, lag: int) -> None:
        at = stream.suspect_ns or 0
        before = stream.normal_ns if stream.normal_ns is not None else stream.first_ns or at
        origin = self._origin_ns if self._origin_ns is not None else (self._first_ns or at)
        raise ClockOffsetError(
            f"{stream.spec.topic}: its clock jumped by {'+' if lag < stream.lag_ns else '-'}"
            f"{duration(lag - stream.lag_ns)} against the receive times (an NTP step or a clock reset) between "
            f"{(before - origin) / NS:.3f} s and {(at - origin) / NS:.3f} s after the episode's start "
            f"(receive times {before / NS:.3f} s and {at / NS:.3f} s): "
            "the data either side of it cannot be put on one clock; end the episode there "
            "(episodes: mode ranges, or topic) to convert each side"
        )

    def _note(self) -> str | None:
        """One line for the summary: the offset the step clock shares, the streams moved."""
        parts = []
        if self.reference_ns:
            where = "behind" if self.reference_ns > 0 else "ahead of"
            parts.append(
                f"the stamps are {duration(self.reference_ns)} {where} the receive times on every stamped stream "
                "(simulated time recorded without use_sim_time, or clocks not synchronised): steps are on the "
                "stamps' clock"
            )
        for stream in self._streams.values():
            if stream.shift_ns:
                parts.append(
                    f"{stream.spec.topic} moved {'+' if stream.shift_ns > 0 else '-'}{duration(stream.shift_ns)} "
                    f"onto the step clock ({stream.spec.key}.clock_offset_ms: {_offset(stream.spec)})"
                )
        return "clock: " + "; ".join(parts) if parts else None


def _offset(spec: TimedStream) -> str:
    value = spec.clock_offset_ms
    return "auto" if value == "auto" else _ms(value or 0.0)
