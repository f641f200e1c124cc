"""What every numeric setting accepts, defined once for a mapping key, a command-line flag
and a ROS parameter alike.

A rate, a tolerance or a count reaches the package three ways: a mapping file, a flag that
overrides it, a parameter of a node. Each used to check it on its own, and a flag that
skipped the check made a converter loop forever on ``--rate -5``. Here each setting has
one ``Bound``: its range (finite, and an upper limit, so no loop over time or steps and
no buffer sized by it can be made unbounded by a bad value) and the words of the one
message every caller prints, ``expected a positive number up to 1000, got -5``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


def show(value: object) -> str:
    """A value as the user wrote it (YAML spelling for null and booleans), short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value) if not isinstance(value, float) else f"{value:g}"
    return text if len(text) <= 80 else text[:77] + "..."


def _plain(limit: float) -> str:
    """A limit as people write it: ``1000000000``, ``0.5``."""
    return str(int(limit)) if limit == int(limit) else f"{limit:g}"


@dataclass(frozen=True)
class Bound:
    """A closed range ``[low, high]`` (``(low, high]`` when ``positive``) of finite
    numbers, or of integers when ``integer``."""

    low: float
    high: float
    positive: bool = False
    integer: bool = False

    def expected(self) -> str:
        """``a positive number up to 1000``, ``an integer from 1 to 1024``..."""
        kind = "integer" if self.integer else "number"
        low, high = _plain(self.low), _plain(self.high)
        if self.positive and self.low == 0:
            return f"a positive {kind} up to {high}"
        article = "an" if kind == "integer" else "a"
        return f"{article} {kind} from {low} to {high}"

    def problem(self, value: object) -> str | None:
        """None when ``value`` is in range, else ``expected ..., got ...``."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"expected {self.expected()}, got {show(value)}"
        if self.integer and not isinstance(value, int):
            return f"expected {self.expected()}, got {show(value)}"
        if not math.isfinite(value) or value < self.low or value > self.high or (self.positive and value <= self.low):
            return f"expected {self.expected()}, got {show(value)}"
        return None

    def check(self, value: object) -> float:
        """``value`` as a float; ValueError with the one message when out of range."""
        problem = self.problem(value)
        if problem is not None:
            raise ValueError(problem)
        return float(value)  # type: ignore[arg-type]

    def check_int(self, value: object) -> int:
        self.check(value)
        return int(value)  # type: ignore[call-overload, no-any-return]

    def parse(self, text: str) -> float | int:
        """A command-line word: parsed as the number it must be, then checked."""
        try:
            value: float | int = int(text) if self.integer else float(text)
        except ValueError:
            raise ValueError(f"expected {self.expected()}, got {text!r}") from None
        self.check(value)
        return value


def fields_problem(settings: object, limits: Mapping[str, Bound], prefix: str = "") -> str | None:
    """The first field of ``settings`` outside its bound, as ``name: expected ...``; None
    when all are within."""
    for name, bound in limits.items():
        problem = bound.problem(getattr(settings, name))
        if problem is not None:
            return f"{prefix}{name}: {problem}"
    return None


# The mapping (ortf-bag2ortf --config, the recorder's parameters)
STEP_RATE_HZ = Bound(0, 1000, positive=True)
"""Steps per second; 1 kHz is the fastest control loop a dataset steps at."""
SYNC_TOLERANCE_MS = Bound(0, 10_000)
CLOCK_OFFSET_MS = Bound(-1e12, 1e12)
"""A stream's clock offset (``clock_offset_ms``): up to about 30 years either way (a
simulation's clock starts near 0, a wall clock is decades after 1970)."""
MAX_LATENCY_MS = Bound(0, 10_000)
"""Samples wait this long at most for their step (memory grows with it)."""
GAP_S = Bound(0, 86_400, positive=True)
RANGE_S = Bound(0, 1e9)
"""Seconds from a recording's start (an episode range)."""
RATED_RANGE = Bound(0, 1e9, positive=True)
"""A force-torque sensor's rated range, N or N m."""

# The writer (the mapping's writer: section, config/writer.yaml)
CHUNK_SIZE = Bound(1, 1_000_000, integer=True)
ROW_GROUP_STEPS = Bound(1, 10_000_000, integer=True)
ROW_GROUP_BYTES = Bound(1, 2**31, integer=True)
ENCODER_QUEUE_FRAMES = Bound(1, 1024, integer=True)
STEP_BATCH = Bound(1, 100_000, integer=True)
VIDEO_CRF = Bound(0, 63, integer=True)
VIDEO_GOP = Bound(1, 10_000, integer=True)
VIDEO_THREADS = Bound(0, 256, integer=True)

# The command line
JOBS = Bound(1, 1024, integer=True)
DEMO_EPISODES = Bound(1, 100, integer=True)
DEMO_SECONDS = Bound(0.5, 3600)
"""A demo recording holds at least one joint state and a few frames (its first messages
come a little after its start), and ends within the hour."""
DEMO_SIDE = Bound(16, 4096, integer=True)

# The nodes' own parameters
PLAYBACK_RATE = Bound(0, 1000)
"""A playback speed factor; 0 plays as fast as possible."""
START_OFFSET_S = Bound(0, 1e9)
LOOKAHEAD_FRAMES = Bound(1, 1024, integer=True)
QOS_DEPTH = Bound(1, 100_000, integer=True)
WARMUP_S = Bound(0, 3600, positive=True)
FLUSH_EVERY_MS = Bound(0, 10_000, positive=True)
QUEUE_MESSAGES = Bound(1, 1_000_000, integer=True)
QUEUE_FRAMES = Bound(1, 1024, integer=True)
STATUS_PERIOD_S = Bound(0, 3600, positive=True)
