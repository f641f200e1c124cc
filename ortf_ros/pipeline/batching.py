"""Raw messages into an assembler, the high-rate ones a block at a time.

At 1 kHz force-torque and 500 Hz joint states, a Python call per message and stage is
what a conversion spends its time on. So messages the fast path can read
(``SampleDecoder.layout``) wait, per topic, and go to the assembler as one
``SampleBlock``; every other message (a camera frame, TF, a command) goes at once, so
frames reach their encoder without delay. Steps are looked for once per
``block_messages`` messages, after the waiting blocks are in: a step is never decided
while samples that came before it still wait, and the order within each topic is kept.

The live recorder is to feed its subscriptions through the same ``BlockFeed``.
"""

from __future__ import annotations

from ortf_ros.pipeline.assemble import Assembler
from ortf_ros.pipeline.fastpath import Layout, SampleDecoder
from ortf_ros.pipeline.samples import RawMessage

BLOCK_MESSAGES = 256  # messages between step decisions, and the most that wait


class BlockFeed:
    def __init__(self, decoder: SampleDecoder, block_messages: int = BLOCK_MESSAGES) -> None:
        self.decoder = decoder
        self.block_messages = block_messages
        self._waiting: dict[str, list[tuple[Layout, RawMessage]]] = {}  # per topic, in order
        self._held = 0  # messages since steps were last looked for

    def feed(self, raw: RawMessage, assembler: Assembler) -> None:
        layout = self.decoder.layout(raw)
        if layout is None or layout.kind is None:
            if raw.topic in self._waiting:  # (the order within a topic is kept)
                self._feed_waiting(raw.topic, assembler)
            for sample in self.decoder.samples(raw):
                assembler.feed(sample, raw.topic)
        else:
            self._waiting.setdefault(raw.topic, []).append((layout, raw))
        self._held += 1
        if self._held >= self.block_messages:
            self.flush(assembler)

    def flush(self, assembler: Assembler) -> None:
        """Feed what waits, then emit the steps that are ready (before an episode ends, say)."""
        for topic in list(self._waiting):
            self._feed_waiting(topic, assembler)
        self._held = 0
        assembler.emit_ready()

    def _feed_waiting(self, topic: str, assembler: Assembler) -> None:
        for item in self.decoder.block(self._waiting.pop(topic)):
            assembler.feed(item, topic)
