"""``DoctorSettings``: the thresholds of ``ortf doctor``, each with its range (``Bound``) so a
flag out of range is one line naming it, as every other setting of the package."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ortf_ros.bounds import Bound, fields_problem
from ortf_ros.errors import UsageError

GAP_PERIODS = Bound(1, 1_000_000)
MIN_GAP_S = Bound(0, 86_400)
MIN_DURATION_S = Bound(0, 86_400)
FROZEN_FRAMES = Bound(2, 1_000_000, integer=True)
RATE_TOLERANCE = Bound(0, 10, positive=True)
VELOCITY_MARGIN = Bound(0, 100)
POSITION_TOLERANCE = Bound(0, 1000)
MAX_PER_RULE = Bound(1, 1_000_000, integer=True)
LUMA_DIFFERENCE = Bound(0, 65_535)
THUMBNAIL_STRIDE = Bound(1, 64, integer=True)


@dataclass(frozen=True)
class DoctorSettings:
    """What counts as a finding.

    A gap is a silence longer than ``gap_periods`` periods of the stream and than
    ``min_gap_s``: a live recording over DDS loses a few milliseconds of a 1 kHz sensor
    now and then (the demo's live episode has a 9 ms hole in its force-torque stream),
    which no step notices; five periods of a 30 fps camera are 167 ms.

    ``frozen_frames``: 10 identical frames in a row (a third of a second at 30 fps) is a
    camera that stopped: a real camera's sensor noise makes no two frames identical, and a
    synthetic scene that moves (the demo's, the generated bags') changes every frame; a
    scene rendered perfectly still would be flagged, and should be. Frames are compared on
    a luma thumbnail (every ``thumbnail_stride``-th pixel of the Y plane) within what
    H.264 leaves of one picture encoded twice: a keyframe re-encodes a frozen picture with
    other noise, up to ``frozen_max_difference`` levels at a pixel and
    ``frozen_mean_difference`` on average (lossless depth must match exactly).
    """

    gap_periods: float = 5
    min_gap_s: float = 0.05
    min_duration_s: float = 1.0
    frozen_frames: int = 10
    rate_tolerance: float = 0.10
    velocity_margin: float = 0.10
    position_tolerance: float = 1e-4
    max_per_rule: int = 20
    frozen_max_difference: float = 6
    frozen_mean_difference: float = 0.75
    thumbnail_stride: int = 4

    def gap_s(self, period_s: float) -> float:
        """The longest silence that is not a gap, in a stream of period ``period_s``."""
        return max(self.gap_periods * period_s, self.min_gap_s)

    def __post_init__(self) -> None:
        limits = {
            "gap_periods": GAP_PERIODS,
            "min_gap_s": MIN_GAP_S,
            "min_duration_s": MIN_DURATION_S,
            "frozen_frames": FROZEN_FRAMES,
            "rate_tolerance": RATE_TOLERANCE,
            "velocity_margin": VELOCITY_MARGIN,
            "position_tolerance": POSITION_TOLERANCE,
            "max_per_rule": MAX_PER_RULE,
            "frozen_max_difference": LUMA_DIFFERENCE,
            "frozen_mean_difference": LUMA_DIFFERENCE,
            "thumbnail_stride": THUMBNAIL_STRIDE,
        }
        assert set(limits) == {f.name for f in fields(self)}
        problem = fields_problem(self, limits)
        if problem is not None:
            raise UsageError(f"doctor settings: {problem}")
