"""Sampling streams at step times, with the error of every choice kept.

Each stream buffers its recent samples on the clock its configuration picks (header
stamp or receive time) and answers "what is this stream's value at step time t" by a
declared policy:

- ``latest``: the newest sample at or before t (what a controller had at t);
- ``nearest``: the sample closest to t, before or after;
- ``linear``: numeric streams interpolated between the samples around t.

The answer carries ``error_ns``, the distance from t to the sample used (for
``linear``, to the nearer of the two), which becomes the step's alignment column.
Because ``nearest`` and ``linear`` may need a sample that arrives after t, a stream
also says whether it can already answer for t (``ready``), so the assembler holds a
step back only as long as a stream might still deliver something closer.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

import numpy as np

Policy = Literal["latest", "nearest", "linear"]
POLICIES: tuple[Policy, ...] = ("latest", "nearest", "linear")

T = TypeVar("T")


@dataclass(frozen=True)
class Sampled(Generic[T]):
    value: T
    time_ns: int  # time of the sample used (for linear, the nearer one)
    error_ns: int  # |time_ns - step time|
    index: int  # sequence number of that sample in its stream (0 = first ever added)


class StreamSampler(Generic[T]):
    """Recent samples of one stream; memory is bounded by pruning what steps no longer need.

    ``interpolate(a, b, u)`` is required for the ``linear`` policy.
    """

    def __init__(self, name: str, policy: Policy, *, interpolate: Callable[[T, T, float], T] | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"stream {name!r}: unknown sampling policy {policy!r}; use one of {POLICIES}")
        if policy == "linear" and interpolate is None:
            raise ValueError(f"stream {name!r}: linear interpolation needs a numeric stream")
        self.name = name
        self.policy = policy
        self._interpolate = interpolate
        self._times: list[int] = []
        self._values: list[T] = []
        self._first_index = 0  # sequence number of _times[0]
        self.out_of_order = 0

    def __len__(self) -> int:
        return len(self._times)

    @property
    def total(self) -> int:
        """Samples ever added (pruned ones included)."""
        return self._first_index + len(self._times)

    @property
    def newest_ns(self) -> int | None:
        return self._times[-1] if self._times else None

    @property
    def oldest_ns(self) -> int | None:
        """The oldest sample still held (the first ever, until pruning)."""
        return self._times[0] if self._times else None

    def next_time(self, t_ns: int) -> int | None:
        """The time of the first held sample at or after t, if one has arrived."""
        after = bisect.bisect_left(self._times, t_ns)
        return self._times[after] if after < len(self._times) else None

    def add(self, time_ns: int, value: T) -> bool:
        """Append a sample; one older than the newest is refused (counted) and False returned:
        the sequence numbers double as indices into the stream's native-rate table."""
        if self._times and time_ns < self._times[-1]:
            self.out_of_order += 1
            return False
        self._times.append(time_ns)
        self._values.append(value)
        return True

    def accepts(self, times_ns: np.ndarray) -> bool:
        """Whether ``extend`` can take samples at these times: none older than the one before it."""
        if not len(times_ns):
            return True
        if self._times and times_ns[0] < self._times[-1]:
            return False
        return bool((np.diff(times_ns) >= 0).all())

    def extend(self, times_ns: np.ndarray, values: Iterable[T]) -> None:
        """Append consecutive samples at once (``accepts`` them first): a block of a
        high-rate stream costs a call, not one per sample."""
        self._times.extend(times_ns.tolist())
        self._values.extend(values)

    def ready(self, t_ns: int, watermark_ns: int) -> bool:
        """Whether the answer for t can no longer change: ``latest`` needs nothing after t;
        the others need a sample at or after t, or input time past t (``watermark_ns``)."""
        if self.policy == "latest":
            return watermark_ns >= t_ns
        newest = self.newest_ns
        return (newest is not None and newest >= t_ns) or watermark_ns >= t_ns

    def sample(self, t_ns: int) -> Sampled[T] | None:
        """The stream's value at t by its policy; None if it has no usable sample yet."""
        if not self._times:
            return None
        after = bisect.bisect_left(self._times, t_ns)  # first sample at or after t
        before = after - 1 if after == len(self._times) or self._times[after] != t_ns else after
        if self.policy == "latest" or after == len(self._times):
            return self._at(before, t_ns) if before >= 0 else None
        if before < 0:
            return self._at(after, t_ns) if self.policy == "nearest" else None
        if self.policy == "nearest" or before == after:
            closer = after if self._times[after] - t_ns < t_ns - self._times[before] else before
            return self._at(closer, t_ns)
        assert self._interpolate is not None
        t0, t1 = self._times[before], self._times[after]
        u = (t_ns - t0) / (t1 - t0)
        value = self._interpolate(self._values[before], self._values[after], u)
        nearer = before if t_ns - t0 <= t1 - t_ns else after
        return Sampled(value, self._times[nearer], abs(self._times[nearer] - t_ns), self._first_index + nearer)

    def _at(self, position: int, t_ns: int) -> Sampled[T]:
        time_ns = self._times[position]
        return Sampled(self._values[position], time_ns, abs(time_ns - t_ns), self._first_index + position)

    def prune_before(self, t_ns: int) -> None:
        """Forget samples no step at or after t can use (keeps the last one before t)."""
        keep_from = max(bisect.bisect_left(self._times, t_ns) - 1, 0)
        if keep_from:
            del self._times[:keep_from]
            del self._values[:keep_from]
            self._first_index += keep_from


def lerp_array(a: np.ndarray, b: np.ndarray, u: float) -> np.ndarray:
    result: np.ndarray = a + (b - a) * u
    return result


def step_times(start_ns: int, end_ns: int, rate_hz: float) -> range:
    """Step times of a fixed control rate over [start, end]; a range, so never materialised."""
    if rate_hz <= 0:
        raise ValueError(f"step rate must be positive, got {rate_hz}")
    period = round(1e9 / rate_hz)
    return range(start_ns, end_ns + 1, period)
