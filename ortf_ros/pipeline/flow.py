"""Every batch size and clock of the pipeline, in one object.

A bag is read as fast as the machine goes and never waits for input, so it is fed in
large blocks and steps are decided whenever a block is in. A live recorder's input
comes in real time and may pause altogether (every topic at once, between two
demonstrations), so its steps are decided by the clock as well, and it holds only small
queues per topic, which are the recorder's memory bound: a recorder that falls behind
counts drops, it does not grow.
"""

from __future__ import annotations

from dataclasses import dataclass

from ortf_ros.errors import ConversionError
from ortf_ros.pipeline.assembly.native import NATIVE_BATCH_MAX
from ortf_ros.pipeline.batching import BLOCK_MESSAGES


@dataclass(frozen=True)
class Flow:
    # Messages between step decisions, and the most that wait per topic for the fast path
    # (``BlockFeed``). Each decision sends native-rate samples to the writer and prunes.
    block_messages: int = BLOCK_MESSAGES
    # Native-rate samples held per stream before they go to the writer (``Assembler``).
    native_batch: int = NATIVE_BATCH_MAX
    # Steps appended to the staging log at once (``WriterConfig.step_batch``): what a
    # killed process may lose of its last steps. A recording on disk can be converted
    # again, a live one cannot: the recorder's is small.
    step_batch: int = 64
    # Steps are also looked for every this many milliseconds of wall time; None: only
    # when enough messages came (a bag).
    flush_every_ms: float | None = None
    # Live only: messages queued per topic between the subscription callbacks and the
    # pipeline thread, and per camera topic (a 640x480 frame is 0.9 MB). A full queue
    # refuses the message and counts it as dropped.
    queue_messages: int = 1024
    queue_frames: int = 16
    # Messages between progress reports of a conversion.
    progress_every: int = 500

    def __post_init__(self) -> None:
        for name in ("block_messages", "native_batch", "step_batch", "queue_messages", "queue_frames"):
            if getattr(self, name) < 1:
                raise ConversionError(f"flow: {name} must be at least 1, got {getattr(self, name)}")
        if self.flush_every_ms is not None and not self.flush_every_ms > 0:
            raise ConversionError(f"flow: flush_every_ms must be positive, got {self.flush_every_ms}")


OFFLINE = Flow()
"""A conversion: blocks of 1024 messages, 64 steps per staging append, no clock."""

LIVE = Flow(block_messages=256, step_batch=8, flush_every_ms=10.0)
"""A live recorder: smaller blocks, steps decided at least every 10 ms (bench_live: the
pipeline's tick is most of the latency from publication to staging; at 50 ms, p99 126 ms,
at 10 ms 74 ms, for about 0.1 CPU more), 8 steps per staging append (about a quarter of
a second at 30 Hz is what a kill can lose)."""
