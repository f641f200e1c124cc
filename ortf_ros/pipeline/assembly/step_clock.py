"""The step clock: which step times come next, and when each is due.

Steps lie on the mapping's ``step:`` grid (a control rate) or on a driving camera's
frames, on the clock the mapping chose for the streams (header stamps or receive times).
The first is where every stream has delivered its first sample. Two things hold a step
at t back:

- **Input time.** No stream may deliver a sample closer to t any more: each stream's
  sampler says so against the watermark, how far input time has come (the newest receive
  time, or a live source's clock, less ``max_latency_ms``); the TF between base and end
  effector is waited for ``TF_WAIT_NS`` longer.
- **Data.** Every stream has a sample within its own sync tolerance of t or beyond it
  (its newest at ``t - tolerance`` or later), so a step is made only where the streams
  have data. The watermark alone does not bound the steps: it is on the receive clock,
  the samples on theirs, and a recording whose receive times are hours after its stamps
  (or a live recorder stopped a while after its last message) would otherwise get steps
  far past its data, every value held.

The rule for gaps, and why memory stays bounded:

- A stream with a gap, while the others go on: the steps in the gap wait until the
  stream delivers again, and are made then from the samples on both sides (counted
  outside the tolerance, as any step beyond it).
- A stream that stops for good must not hold the others' samples forever, nor may the
  steps run ahead of the data: a step waits for a stream with nothing near it only until
  another stream's data is ``GAP_WAIT_NS`` past it, and is made then with what the stream
  had (counted likewise). Only a stream that is silent, or whose samples come later than
  ``max_latency_ms`` (counted as late), makes a step stop waiting so: any other has
  delivered past t by the time the watermark has.
- Before the episode's first step, such a step is not made but skipped (counted in the
  steps not written): the episode begins where every stream has data. A stream that has
  delivered nothing at all holds the first step back; meanwhile the others keep only
  their last ``GAP_WAIT_NS`` (or ``max_latency_ms``, if longer: a stream may deliver that
  late).
- At the end of input, steps go on while every stream has a sample within its tolerance
  of them: the episode ends where its data does.

So a silent stream holds the steps back no more than ``GAP_WAIT_NS`` behind the furthest
data, the steps never run ahead of the data by more than the loosest tolerance, and the
samplers, which keep only what the next step can use (``prune``), hold ``GAP_WAIT_NS``
of each stream at most (or what ``max_latency_ms`` and the TF wait hold a step back for,
if longer): memory is bounded by configuration, not by how long a stream is silent.

Only this decides when steps are emitted: the assembler asks ``due`` for the step times
now ready and makes a step of each (``steps``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from ortf_ros.format.units import NS
from ortf_ros.pipeline.mapping import TopicMapping
from ortf_ros.pipeline.sync import StreamSampler
from ortf_ros.pipeline.tf import TfBuffer

# A step waits for the TF after its time this much input time longer than for other
# streams: TF often comes at a few Hz, and a pose interpolated between the transforms
# around the step, rather than the last one held, should not depend on when steps are
# looked for. A TF that stops is held after that.
TF_WAIT_NS = NS

# How far another stream's data may go past a step before the step stops waiting for a
# stream that has nothing within its tolerance of it (see the module's docstring): the
# longest gap whose steps are made from the samples on both sides, and what a stream that
# stops for good makes the others' samplers hold.
GAP_WAIT_NS = 2 * NS


class StepSchedule:
    """The watermark and the next step time, over the streams' samplers (``samplers``:
    every stream a step samples, by name, each with its sync tolerance in ``tolerances_ns``)
    and the TF between ``ee_frames``. ``skipped`` counts the steps not made, by reason."""

    def __init__(
        self,
        config: TopicMapping,
        samplers: list[tuple[str, StreamSampler[Any]]],
        cameras: dict[str, StreamSampler[int]],
        tf: TfBuffer,
        *,
        ee_frames: tuple[str, str] | None,
        tolerances_ns: Mapping[str, int],
        skipped: Counter[str],
    ) -> None:
        # Header stamps precede reception: a stream is taken to deliver nothing stamped
        # more than this before the newest receive time seen (what lets a step be emitted).
        # A message that breaks this may come after a step it precedes was decided, which
        # then depends on when steps were looked for: such messages are counted as late.
        self.latency_ns = round(config.max_latency_ms * 1e6)
        self.watermark_ns = -(2**62)
        self.next_step_ns: int | None = None
        self.period_ns = round(NS / config.step.rate_hz) if config.step.rate_hz else 0
        self._driving = config.step.camera
        self._cameras = cameras
        # Every stream with its name and tolerance; the one that held the last step back first.
        self._streams = [(name, sampler, tolerances_ns[name]) for name, sampler in samplers]
        self._blocking = self._streams[0]
        self._keep_ns = max(t for _, _, t in self._streams) + NS  # what a step before the next may use
        self._tf = tf
        self._ee_frames = ee_frames
        self._skipped = skipped
        self._begun = False  # whether a step was made (until then, steps without data are skipped)
        self._pruned_ns: int | None = None

    def advance(self, receive_ns: int) -> None:
        """Nothing received before ``receive_ns`` is still to come."""
        watermark = receive_ns - self.latency_ns
        if watermark > self.watermark_ns:
            self.watermark_ns = watermark

    def due(self, final: bool) -> Iterator[int]:
        """The step times now due, in order; the next is looked for once the caller has
        made the step of the last (``final``: the end of input)."""
        if self.next_step_ns is None:
            self.next_step_ns = self._start_ns()
        while self.next_step_ns is not None:
            t_ns = self._next_step_time(self.next_step_ns)
            if t_ns is None:
                break
            if final:
                # At the end of input, steps continue while every stream still reaches them.
                if self._uncovered(t_ns) is not None:
                    break
            elif not self._ready(t_ns):
                break
            lacking = None if self._begun else self._uncovered(t_ns)
            if lacking is not None:  # (made only once the episode has begun: see the module's docstring)
                self._skipped[f"before {lacking} had a sample within its sync tolerance"] += 1
            else:
                self._begun = True
                yield t_ns
            self.next_step_ns = t_ns + (self.period_ns if self._driving is None else 1)

    def prune(self) -> None:
        """Forget the samples and transforms no step still to come can use (after steps are
        looked for: only the next step's time, or before the first the streams' data, moves
        the point before which samples are no longer needed)."""
        if self.next_step_ns is not None:
            keep_from = self.next_step_ns - self._keep_ns
        else:  # (a stream has delivered nothing yet: the others keep their last GAP_WAIT_NS,
            # and what a stream within max_latency_ms may still need)
            furthest = self._furthest_ns()
            if furthest is None:
                return
            keep_from = min(furthest - GAP_WAIT_NS, self.watermark_ns) - self._keep_ns
        if self._pruned_ns is not None and keep_from <= self._pruned_ns:
            return
        self._pruned_ns = keep_from
        for _, sampler, _ in self._streams:
            sampler.prune_before(keep_from)
        if self.next_step_ns is not None:
            self._tf.prune_before(keep_from)

    def _start_ns(self) -> int | None:
        """The first step time: once every stream has delivered its first sample."""
        firsts = []
        for _, sampler, _ in self._streams:
            if sampler.oldest_ns is None:
                return None
            firsts.append(sampler.oldest_ns)
        return max(firsts)

    def _next_step_time(self, after_ns: int) -> int | None:
        """The next step time at or after ``after_ns``: on the rate grid, or the driving camera's next frame."""
        if self._driving is None:
            return after_ns
        return self._cameras[self._driving].next_time(after_ns)

    def _furthest_ns(self) -> int | None:
        """The newest sample of any stream: how far the data has come."""
        newest = [sampler.newest_ns for _, sampler, _ in self._streams if sampler.newest_ns is not None]
        return max(newest) if newest else None

    def _uncovered(self, t_ns: int) -> str | None:
        """A stream with no sample within its tolerance of t or after (its name), if any."""
        for name, sampler, tolerance_ns in self._streams:
            newest = sampler.newest_ns
            if newest is None or newest < t_ns - tolerance_ns:
                return name
        return None

    def _decided(self, stream: tuple[str, StreamSampler[Any], int], t_ns: int) -> bool:
        """Whether a stream's answer for a step at t can no longer change, and it has data
        there, or has had none for ``GAP_WAIT_NS`` of the other streams' data."""
        _, sampler, tolerance_ns = stream
        if not sampler.ready(t_ns, self.watermark_ns):
            return False
        newest = sampler.newest_ns
        if newest is not None and newest >= t_ns - tolerance_ns:
            return True
        furthest = self._furthest_ns()
        return furthest is not None and furthest >= t_ns + GAP_WAIT_NS

    def _ready(self, t_ns: int) -> bool:
        """Whether every stream, and the TF between base and end effector, is ready for a
        step at t. The stream that was not ready last time is asked first."""
        if not self._decided(self._blocking, t_ns):
            return False
        for stream in self._streams:
            if not self._decided(stream, t_ns):
                self._blocking = stream
                return False
        ee_frames = self._ee_frames
        return ee_frames is None or self._tf.settled(*ee_frames, t_ns, self.watermark_ns - TF_WAIT_NS)
