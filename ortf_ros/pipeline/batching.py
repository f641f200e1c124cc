"""Raw messages into an assembler, the high-rate ones a block at a time.

At 1 kHz force-torque and 500 Hz joint states, a Python call per message and stage is
what a conversion spends its time on. So messages the fast path can read
(``SampleDecoder.layout``) wait, per topic, and go to the assembler as one
``SampleBlock`` (TF: ``TransformBlock``); every other message (a camera frame, a
command) goes at once, so frames reach their encoder without delay. Runs of messages
(``RawRun``: a source's chunk of one topic, as arrays) wait too, and are read as one
block, without a Python step per message. The order within each topic is kept, and
among TF topics.

Steps are looked for at the end of a batch of input (``end_batch``) once
``block_messages`` messages came since the last time, after the waiting blocks are in:
a step is never decided while samples that came before it still wait, and a run (not
ordered with the single messages of its batch) is in whole.

The live recorder feeds its subscriptions through the same ``BlockFeed`` (``EpisodeSession``),
and also looks for steps on a clock (``EpisodeSession.flush``), since live input may pause.
"""

from __future__ import annotations

import numpy as np

from ortf_ros.pipeline.assembly.assembler import Assembler
from ortf_ros.pipeline.fastpath import SampleDecoder, carries_tf
from ortf_ros.pipeline.samples import RawMessage, RawRun

# Messages between step decisions, and the most that wait per topic. Each decision sends
# the native-rate samples to the writer and prunes, and each block costs its numpy calls:
# at 256 the converter used about a tenth more CPU of its own on the benchmark's bag.
BLOCK_MESSAGES = 1024


class BlockFeed:
    def __init__(self, decoder: SampleDecoder, block_messages: int = BLOCK_MESSAGES) -> None:
        self.decoder = decoder
        self.block_messages = block_messages
        self._waiting: dict[str, list[RawMessage]] = {}  # per topic, in order
        self._runs: dict[str, list[RawRun]] = {}  # per topic, in order (a topic waits in one of the two)
        self._held = 0  # messages since steps were last looked for
        self._tf_topics: set[str] = set()  # topics TF came on

    def feed(self, raw: RawMessage, assembler: Assembler) -> None:
        if raw.topic in self._runs:
            self._feed_runs(raw.topic, assembler)
        layout = self.decoder.layout(raw)
        if carries_tf(raw.msgtype):
            self._tf_in_order(raw.topic, assembler)
        if layout is None:
            if raw.topic in self._waiting:  # (the order within a topic is kept)
                self._feed_waiting(raw.topic, assembler)
            for sample in self.decoder.samples(raw):
                assembler.feed(sample, raw.topic)
        else:
            self._waiting.setdefault(raw.topic, []).append(raw)
            if len(self._waiting[raw.topic]) >= self.block_messages:
                self._feed_waiting(raw.topic, assembler)
        self._held += 1

    def _tf_in_order(self, topic: str, assembler: Assembler) -> None:
        """Another TF topic's waiting messages go before one of ``topic``: TF is stored in
        the order it came in, whatever the topic (the first transform of a frame decides
        its parent, and whether it is static)."""
        for other in self._tf_topics - {topic}:
            if other in self._waiting:
                self._feed_waiting(other, assembler)
        self._tf_topics.add(topic)

    def feed_run(self, run: RawRun, assembler: Assembler) -> None:
        if run.topic in self._waiting:
            self._feed_waiting(run.topic, assembler)
        runs = self._runs.setdefault(run.topic, [])
        runs.append(run)
        self._held += len(run)
        if sum(map(len, runs)) >= self.block_messages:
            self._feed_runs(run.topic, assembler)

    def end_batch(self, assembler: Assembler) -> None:
        """The end of a batch of input (for a live source, of each message): steps are looked
        for when enough came since the last time. Nothing else emits them, or frees the
        samples they no longer need."""
        if self._held >= self.block_messages:
            self.flush(assembler)

    def flush(self, assembler: Assembler) -> None:
        """Feed what waits, then emit the steps that are ready (before an episode ends, say)."""
        for topic in list(self._waiting):
            self._feed_waiting(topic, assembler)
        for topic in list(self._runs):
            self._feed_runs(topic, assembler)
        self._held = 0
        assembler.emit_ready()

    def _feed_waiting(self, topic: str, assembler: Assembler) -> None:
        for item in self.decoder.block(self._waiting.pop(topic)):
            assembler.feed(item, topic)

    def _feed_runs(self, topic: str, assembler: Assembler) -> None:
        for item in self.decoder.run_samples(joined(self._runs.pop(topic))):
            assembler.feed(item, topic)


def joined(runs: list[RawRun]) -> RawRun:
    """Consecutive runs of one topic as one."""
    if len(runs) == 1:
        return runs[0]
    widths: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {}
    start = 0
    for run in runs:
        for rows, data in run.parts:
            found = widths.setdefault(data.shape[1], ([], []))
            found[0].append(rows + start)
            found[1].append(data)
        start += len(run)
    first = runs[0]
    parts = tuple((np.concatenate(rows), np.concatenate(data)) for rows, data in widths.values())
    receive = np.concatenate([run.receive_ns for run in runs])
    return RawRun(first.topic, first.msgtype, receive, parts, first.serialization)
