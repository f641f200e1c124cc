"""The pipeline's side of an episode's per-stream accounting (``format.accounting``): what
each mapped topic delivered between the episode's begin and end, from the session's counters.

The counters (``TopicCounts``) run over a whole conversion or recording; an episode's own
numbers are their difference between its begin and its end (``EpisodeTally``). Every
message of a mapped data topic the session takes while the episode is open is ``read``
there, and ends in exactly one of undecodable, dropped (with its reason) or kept, which
is what makes ``read == undecodable + dropped + kept`` a check and not a definition. A live
recorder adds the messages its queue had no room for and those lost in transport, which
never reach the session.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ortf_ros.format.accounting import (
    AFTER_LOST_PACKET,
    BEFORE_FIRST_KEYFRAME,
    NO_PICTURE,
    NOT_FOR_ACTION,
    OUT_OF_ORDER,
    QUEUE_FULL,
    ROLE_ACTION,
    ROLE_AUDIO,
    ROLE_CAMERA,
    ROLE_DEPTH,
    ROLE_JOINT_STATES,
    ROLE_LIDAR,
    ROLE_POINT_CLOUD,
    ROLE_TF,
    ROLE_WRENCH,
    StreamAccount,
)
from ortf_ros.pipeline.assembly.counts import TopicCounts
from ortf_ros.pipeline.clock_offsets import StreamClock
from ortf_ros.pipeline.mapping import TopicMapping


@dataclass(frozen=True)
class _Stream:
    name: str
    role: str
    topic: str


def data_streams(config: TopicMapping) -> list[_Stream]:
    """The mapped topics that become data, one row each, in mapping order. A topic that is
    both the joint state and the action (a controller's state) is one row, ``joint_states``."""
    found = [_Stream(c.name, ROLE_DEPTH if c.kind == "depth" else ROLE_CAMERA, c.topic) for c in config.cameras]
    if config.joint_states is not None:
        found.append(_Stream("joint_states", ROLE_JOINT_STATES, config.joint_states.topic))
    found += [_Stream(w.name, ROLE_WRENCH, w.topic) for w in config.wrenches]
    found += [_Stream(a.name, ROLE_AUDIO, a.topic) for a in config.audio]
    found += [_Stream(s.name, ROLE_LIDAR, s.topic) for s in config.laser_scans]
    found += [_Stream(p.name, ROLE_POINT_CLOUD, p.topic) for p in config.point_clouds]
    if config.action.topic is not None:
        found.append(_Stream("action", ROLE_ACTION, config.action.topic))
    for topic in (*config.tf_topics, *config.tf_static_topics):
        found.append(_Stream(topic.strip("/").replace("/", "_") or "tf", ROLE_TF, topic))
    first_by_topic: dict[str, _Stream] = {}
    for stream in found:
        first_by_topic.setdefault(stream.topic, stream)
    return list(first_by_topic.values())


_COUNTERS = (
    "read",
    "used",
    "undecodable",
    "out_of_order",
    "not_for_action",
    "before_first_keyframe",
    "after_lost_packet",
    "no_picture",
    "late",
    "outside_tolerance",
)


class EpisodeTally:
    """The session's counters when an episode began; ``accounts`` gives the episode's own."""

    def __init__(self, counts: TopicCounts) -> None:
        self._counts = counts
        self._start: dict[str, Counter[str]] = {name: Counter(getattr(counts, name)) for name in _COUNTERS}

    def _since(self, counter: str, key: str) -> int:
        now: Counter[str] = getattr(self._counts, counter)
        then = self._start[counter]
        return now[key] - then[key]

    def accounts(
        self,
        config: TopicMapping,
        *,
        queue_full: Mapping[str, int] | None = None,
        lost_in_transport: Mapping[str, int] | None = None,
        clocks: Mapping[str, StreamClock] | None = None,
    ) -> list[StreamAccount]:
        """One row per mapped data topic. ``queue_full`` and ``lost_in_transport`` (per topic):
        a live recorder's, for the episode; None offline, where nothing is received.
        ``clocks``: the episode's clock offsets, per topic (``ClockOffsets.streams``)."""
        live = queue_full is not None
        rows = []
        for stream in data_streams(config):
            topic = stream.topic
            read = self._since("read", topic)
            dropped = {
                OUT_OF_ORDER: self._since("out_of_order", topic),
                NOT_FOR_ACTION: self._since("not_for_action", topic),
                BEFORE_FIRST_KEYFRAME: self._since("before_first_keyframe", topic),
                AFTER_LOST_PACKET: self._since("after_lost_packet", topic),
                NO_PICTURE: self._since("no_picture", topic),
            }
            if live:
                dropped[QUEUE_FULL] = (queue_full or {}).get(topic, 0)
            clock = (clocks or {}).get(topic)
            rows.append(
                StreamAccount(
                    stream=stream.name,
                    role=stream.role,
                    topic=topic,
                    received=read + dropped[QUEUE_FULL] if live else None,
                    lost_in_transport=(lost_in_transport or {}).get(topic, 0) if live else None,
                    read=read,
                    undecodable=self._since("undecodable", topic),
                    dropped={reason: count for reason, count in dropped.items() if count},
                    late=self._since("late", topic),
                    kept=self._since("used", topic),
                    steps_outside_tolerance=self._since("outside_tolerance", stream.name) or None,
                    clock_offset_ms=None if clock is None else clock.offset_ms,
                    clock_shift_ms=None if clock is None else clock.shift_ms,
                )
            )
        return rows
