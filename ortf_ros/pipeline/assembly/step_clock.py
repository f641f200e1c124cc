"""The step clock: which step times come next, and when each is due.

Steps lie on the mapping's ``step:`` grid (a control rate) or on a driving camera's
frames. A step at t is due once no stream can deliver a sample closer to t any more:
each stream's sampler says so against the watermark, how far input time has come (the
newest receive time, or a live source's clock, less ``max_latency_ms``); the TF between
base and end effector is waited for ``TF_WAIT_NS`` longer. At the end of input, steps go
on while every stream still reaches them within the sync tolerance.

Only this decides when steps are emitted: the assembler asks ``due`` for the step times
now ready and makes a step of each (``steps``).
"""

from __future__ import annotations

from collections.abc import Iterator
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


class StepSchedule:
    """The watermark and the next step time, over the streams' samplers (``samplers``:
    every stream a step samples, by name) and the TF between ``ee_frames``."""

    def __init__(
        self,
        config: TopicMapping,
        samplers: list[tuple[str, StreamSampler[Any]]],
        cameras: dict[str, StreamSampler[int]],
        tf: TfBuffer,
        *,
        ee_frames: tuple[str, str] | None,
        tolerance_ns: int,
    ) -> None:
        # Header stamps precede reception: a stream is taken to deliver nothing stamped
        # more than this before the newest receive time seen (what lets a step be emitted).
        # A message that breaks this may come after a step it precedes was decided, which
        # then depends on when steps were looked for: such messages are counted as late.
        self.latency_ns = round(config.max_latency_ms * 1e6)
        self.tolerance_ns = tolerance_ns
        self.watermark_ns = -(2**62)
        self.next_step_ns: int | None = None
        self.period_ns = round(NS / config.step.rate_hz) if config.step.rate_hz else 0
        self._driving = config.step.camera
        self._cameras = cameras
        self._named = samplers
        self._samplers = [sampler for _, sampler in samplers]
        self._blocking = self._samplers[0]  # the stream that held the last step back: asked first
        self._tf = tf
        self._ee_frames = ee_frames

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
                reach = t_ns - self.tolerance_ns
                if any(s.newest_ns is None or s.newest_ns < reach for s in self._samplers):
                    break
            elif not self._ready(t_ns):
                break
            yield t_ns
            self.next_step_ns = t_ns + (self.period_ns if self._driving is None else 1)

    def prune(self) -> None:
        """Forget the samples and transforms no step still to come can use (after a step:
        only a step moves the point before which samples are no longer needed)."""
        if self.next_step_ns is None:
            return
        keep_from = self.next_step_ns - self.tolerance_ns - NS
        for _, sampler in self._named:
            sampler.prune_before(keep_from)
        self._tf.prune_before(keep_from)

    def _start_ns(self) -> int | None:
        """The first step time: once every stream has delivered its first sample."""
        firsts = []
        for _, sampler in self._named:
            if sampler.oldest_ns is None:
                return None
            firsts.append(sampler.oldest_ns)
        return max(firsts)

    def _next_step_time(self, after_ns: int) -> int | None:
        """The next step time at or after ``after_ns``: on the rate grid, or the driving camera's next frame."""
        if self._driving is None:
            return after_ns
        return self._cameras[self._driving].next_time(after_ns)

    def _ready(self, t_ns: int) -> bool:
        """Whether every stream, and the TF between base and end effector, is ready for a
        step at t. The stream that was not ready last time is asked first."""
        if not self._blocking.ready(t_ns, self.watermark_ns):
            return False
        for sampler in self._samplers:
            if not sampler.ready(t_ns, self.watermark_ns):
                self._blocking = sampler
                return False
        ee_frames = self._ee_frames
        return ee_frames is None or self._tf.settled(*ee_frames, t_ns, self.watermark_ns - TF_WAIT_NS)
