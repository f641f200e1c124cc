"""The joint state stream: messages that may list any subset of the joints, in any order
(or none, ``StepLayout.unnamed_joints``), merged into full vectors of every joint
(``JointMerger``), which go to the joint state sampler and, when kept at their own rate,
to the native-rate table (``JointRoute``). A block of messages is merged with a few numpy
calls and gives what its messages one by one would."""

from __future__ import annotations

import math

import numpy as np

from ortf_ros.pipeline.assembly.counts import TopicCounts
from ortf_ros.pipeline.assembly.native import NativeBatching
from ortf_ros.pipeline.assembly.steps import StepLayout
from ortf_ros.pipeline.mapping import TopicMapping
from ortf_ros.pipeline.samples import JointStateSample, SampleBlock, stream_time
from ortf_ros.pipeline.sync import StreamSampler, lerp_array


def native_joint_rows(full: np.ndarray) -> np.ndarray:
    """(N, 3, joints) vectors as native-rate rows: position, velocity, effort side by side,
    a velocity or effort a joint never had stored as 0."""
    rows = full.reshape(len(full), -1)
    joints = full.shape[2]
    if not np.isfinite(rows[:, joints:]).all():
        rows = np.concatenate([rows[:, :joints], np.nan_to_num(rows[:, joints:])], axis=1)
    return rows


class JointMerger:
    """Full joint vectors from messages that may list any subset of joints in any order.

    ``merge`` takes one message and works on Python lists: the vectors are short, and a
    numpy call per message costs more than the merge. ``merge_block`` takes a block of
    them with a few numpy calls for the lot.
    """

    _PLACEMENTS_MAX = 64  # name lists remembered; a publisher uses one or two

    def __init__(self, joints: tuple[str, ...], unnamed: tuple[str, ...] = ()) -> None:
        self.index = {name: i for i, name in enumerate(joints)}
        self.unnamed = unnamed  # what a message that lists no names lists (``StepLayout.unnamed_joints``)
        self.current = [[math.nan] * len(joints) for _ in range(3)]
        self._placements: dict[tuple[str, ...], list[tuple[int, int]]] = {}

    def merge_block(self, block: SampleBlock) -> np.ndarray:
        """(N, 3, joints): the full vectors after each message of a joint state block, as
        ``merge`` would make them one by one (a joint a message does not give keeps its value
        from before); NaN where a joint was not seen yet. Nothing changes until ``settle``."""
        count, joints = len(block), len(self.index)
        full = np.empty((count + 1, 3, joints))
        given = np.zeros((count + 1, 3, joints), bool)
        full[0], given[0] = self.current, True
        for part in block.parts:
            names = part.names or self.unnamed
            pairs = self._placement(names)
            sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
            rows = part.rows[:, np.newaxis] + 1
            for kind, values in enumerate(part.runs):
                if values.shape[1] == len(names):
                    full[rows, kind, targets] = values[:, sources]
                    given[rows, kind, targets] = True
        latest = np.where(given, np.arange(count + 1)[:, np.newaxis, np.newaxis], 0)
        np.maximum.accumulate(latest, axis=0, out=latest)
        return np.take_along_axis(full, latest, axis=0)[1:]

    def settle(self, full: np.ndarray) -> None:
        """Keep the last vectors of a merged block as the current ones."""
        self.current = full[-1].tolist()

    def merge(self, sample: JointStateSample) -> np.ndarray | None:
        """The full (position, velocity, effort) after this message; None until every joint was seen."""
        names = sample.names or self.unnamed
        pairs = self._placement(names)
        for row, values in zip(self.current, (sample.position, sample.velocity, sample.effort), strict=True):
            if len(values) == len(names):
                given = values.tolist()
                for source, target in pairs:
                    row[target] = given[source]
        if any(position != position for position in self.current[0]):  # NaN: a joint not seen yet
            return None
        return np.array(self.current)

    def fits(self, names: tuple[str, ...], positions: int) -> bool:
        """Whether a message listing ``names`` (none: ``unnamed``) with this many positions can be merged."""
        return bool(names) or positions == len(self.unnamed)

    def _placement(self, names: tuple[str, ...]) -> list[tuple[int, int]]:
        """(place in the message, place in the full vectors) of each joint the message names that we know."""
        pairs = self._placements.get(names)
        if pairs is None:
            pairs = [(i, self.index[name]) for i, name in enumerate(names) if name in self.index]
            if len(self._placements) >= self._PLACEMENTS_MAX:
                self._placements.clear()
            self._placements[names] = pairs
        return pairs


class JointRoute:
    """The joint state topic's messages (one by one, or a block) into full vectors for
    the sampler (``sampler``) and, when native, the native-rate table."""

    def __init__(self, config: TopicMapping, layout: StepLayout, counts: TopicCounts, native: NativeBatching) -> None:
        self.mapping = config.joint_states
        self.topic = self.mapping.topic if self.mapping else None
        self.layout = layout
        self.counts = counts
        self.native = native
        self.merger = JointMerger(layout.joints, layout.unnamed_joints)
        self.sampler: StreamSampler[np.ndarray] = StreamSampler(
            "joint_states", self.mapping.policy if self.mapping else "latest", interpolate=lerp_array
        )

    def take(self, sample: JointStateSample) -> bool:
        """Whether the message was used (merged; a vector once every joint was seen)."""
        assert self.mapping is not None
        if not self.merger.fits(sample.names, len(sample.position)):
            self._unnamed_misfit(sample.topic, len(sample.position))
            return False
        full = self.merger.merge(sample)
        if full is None:
            return True  # folded in; the vector is not complete yet
        time_ns = stream_time(sample.stamps, self.mapping.time)
        if not self.sampler.add(time_ns, full):
            self.counts.out_of_order[self.mapping.topic] += 1
            return False
        if self.mapping.native:
            self.native.hold("joint_states", time_ns, native_joint_rows(full[np.newaxis])[0], sample.stamps)
        return True

    def take_block(self, block: SampleBlock) -> bool:
        """Whether the block was taken whole; if not, nothing of it was, and the caller
        takes its messages one by one (which counts those that do not fit)."""
        mapping = self.mapping
        assert mapping is not None
        if not all(self.merger.fits(part.names, part.runs[0].shape[1]) for part in block.parts):
            return False  # (one by one, which counts the misfits)
        full = self.merger.merge_block(block)
        complete = ~np.isnan(full[:, 0]).any(axis=1)  # as ``merge``: a vector only once every joint was seen
        times = block.times(mapping.time)[complete]
        if not self.sampler.accepts(times):
            return False
        self.merger.settle(full)
        if not complete.any():
            return True  # folded in; no vector is complete yet
        full = full[complete]
        self.sampler.extend(times, full)
        if mapping.native:
            stamps = block.header_ns[complete].tolist(), block.receive_ns[complete].tolist()
            self.native.queue("joint_states", times, native_joint_rows(full), *stamps)
        return True

    def _unnamed_misfit(self, topic: str, positions: int) -> None:
        """A joint state that lists no names and is not like the first one: counted, with why."""
        unnamed = self.layout.unnamed_joints
        if unnamed:
            reason = (
                f"lists no joint names and has {positions} positions, where the first joint state had {len(unnamed)}"
            )
        else:
            reason = f"lists no joint names ({positions} positions), where the first joint state named its joints"
        self.counts.undecodable[topic] += 1
        self.counts.reasons.setdefault(topic, f"{topic}: a joint state {reason}")
