"""Where each episode's messages lie on the playback timeline, in nanoseconds.

A dataset keeps times as float seconds since each episode's start; messages need
integer nanosecond stamps, and a recording of the player must step on the same times
as the dataset did. Three rules give both:

- An episode's time 0 is placed at its original absolute time (from the raw stamps its
  native-rate tables keep, else ``recorded_at``), unless that is before the previous
  episode ended: then it starts ``GAP_NS`` after it. Episodes of one recording keep
  their original times; the timeline never runs backwards, looping included.
- Samples are at ``round(timestamp * 1e9)`` after time 0.
- Steps that lie on the grid of the action's control rate are put exactly on it
  (first step + k * ``round(1e9 / rate)`` ns, the grid ``ortf-bag2ortf`` lays steps on),
  which float seconds can only approximate to a few hundred nanoseconds. A converter
  that starts its grid at the first step then steps on the very messages published.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ortf_ros.dataset.reader import Episode
from ortf_ros.format.units import NS

GAP_NS = 500_000_000
"""Pause between episodes on the timeline that could not keep their original times."""
GRID_TOLERANCE = 1e-3
"""A step is on the control grid when it is within this fraction of a period of it."""


def original_start_ns(episode: Episode) -> int:
    """The absolute time of the episode's time 0: from the first sample of a native-rate
    table that kept its raw stamp, else ``recorded_at``, else 0."""
    for name in episode.dataset.manifest.native_streams:
        for batch in episode.stream_batches(name, ["timestamp", "stamp_ns", "receive_ns"]):
            first = batch.slice(0, 1).to_pylist()[0]
            raw = first["stamp_ns"] if first["stamp_ns"] is not None else first["receive_ns"]
            if raw is not None:
                return int(raw) - round(float(first["timestamp"]) * NS)
            break
    recorded_at = episode.record.recorded_at
    if recorded_at:
        try:
            return round(datetime.fromisoformat(recorded_at.replace("Z", "+00:00")).timestamp() * NS)
        except ValueError:
            pass  # the validator warns about it; the timeline starts at 0
    return 0


@dataclass(frozen=True)
class EpisodeClock:
    """Timeline nanoseconds of one episode's timestamps."""

    start_ns: int  # where the episode's time 0 lies
    first_step_s: float  # the grid's origin
    rate_hz: float | None  # the control rate steps may lie on

    def sample_ns(self, timestamp: float) -> int:
        return self.start_ns + round(timestamp * NS)

    def step_ns(self, timestamp: float) -> int:
        if self.rate_hz:
            periods = (timestamp - self.first_step_s) * self.rate_hz
            k = round(periods)
            if abs(periods - k) <= GRID_TOLERANCE:
                return self.sample_ns(self.first_step_s) + k * round(NS / self.rate_hz)
        return self.sample_ns(timestamp)
