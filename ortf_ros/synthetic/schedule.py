"""When each message of a scene is stamped and received: the schedule both the bag writer
and the live publisher follow.

Every stream publishes at ``t = seq / rate`` for ``seq = 0 .. count - 1`` (``count =
round(duration_s * rate)``); the header stamp is ``start_ns + stamp offset`` and the
receive (bag) time adds ``receive_latency_ns(topic, seq)`` (and the clock offsets a scene
may have: ``TeleopConfig.receive_offset_at``, ``stamp_offset_ns``,
``topic_receive_offset_ns``); analytic values are taken at ``t = (stamp_ns - start_ns) / 1e9``
(``seconds``). Messages are generated lazily in receive-time order (``schedule``), so a
10-minute bag takes no more memory than a 10-second one, and the live scene can go on
without end.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from ortf_ros.format.units import NS
from ortf_ros.synthetic.scene import START_NS, TeleopConfig
from ortf_ros.synthetic.topics import (
    COMPRESSED_SUFFIX,
    H264_SUFFIX,
    TOPIC_AUDIO,
    TOPIC_AUDIO_INFO,
    TOPIC_CONTROLLER_STATE,
    TOPIC_DEPTH_CAMERA_INFO,
    TOPIC_DEPTH_IMAGE,
    TOPIC_DETECTIONS,
    TOPIC_JOINT_COMMAND,
    TOPIC_JOINT_STATES,
    TOPIC_OVERHEAD_CAMERA_INFO,
    TOPIC_OVERHEAD_IMAGE,
    TOPIC_POINTS,
    TOPIC_ROBOT_DESCRIPTION,
    TOPIC_SCAN,
    TOPIC_SIDE_CAMERA_INFO,
    TOPIC_SIDE_IMAGE,
    TOPIC_TF,
    TOPIC_TF_STATIC,
    TOPIC_WRENCH,
    TOPIC_WRIST_CAMERA_INFO,
    TOPIC_WRIST_IMAGE,
)

# Fixed part of each topic's receive latency (publish -> bag), nanoseconds.
BASE_LATENCY_NS = {
    TOPIC_ROBOT_DESCRIPTION: 3_000_000,
    TOPIC_TF_STATIC: 2_000_000,
    TOPIC_TF: 1_000_000,
    TOPIC_JOINT_STATES: 500_000,
    TOPIC_JOINT_COMMAND: 300_000,
    TOPIC_WRIST_IMAGE: 8_000_000,
    TOPIC_OVERHEAD_IMAGE: 9_000_000,
    TOPIC_SIDE_IMAGE: 10_000_000,
    TOPIC_WRIST_CAMERA_INFO: 8_000_000,
    TOPIC_OVERHEAD_CAMERA_INFO: 9_000_000,
    TOPIC_SIDE_CAMERA_INFO: 10_000_000,
    TOPIC_DEPTH_CAMERA_INFO: 12_000_000,
    TOPIC_DEPTH_IMAGE: 12_000_000,
    TOPIC_WRENCH: 200_000,
    TOPIC_CONTROLLER_STATE: 500_000,
    TOPIC_AUDIO: 2_000_000,
    TOPIC_AUDIO_INFO: 2_000_000,
    TOPIC_SCAN: 4_000_000,
    TOPIC_POINTS: 6_000_000,
    TOPIC_DETECTIONS: 20_000_000,  # a detector runs on the wrist frames after they are published
}
JITTER_STEP_NS = 40_000  # latency jitter: 0..10 steps, a deterministic function of seq


def stamp_ns(seq: int, rate_hz: float, start_ns: int = START_NS) -> int:
    """Header stamp of message ``seq`` of a stream published at ``rate_hz``."""
    return start_ns + round(seq * NS / rate_hz)


def receive_latency_ns(topic: str, seq: int) -> int:
    """Receive time minus header stamp: a fixed per-topic latency plus 0..0.4 ms of jitter."""
    base = BASE_LATENCY_NS[topic.removesuffix(COMPRESSED_SUFFIX).removesuffix(H264_SUFFIX)]
    return base + ((seq * 7919) % 11) * JITTER_STEP_NS


def seconds(stamp: int, start_ns: int = START_NS) -> float:
    """The ``t`` of the analytic functions for a header stamp."""
    return (stamp - start_ns) / 1e9


@dataclass(frozen=True, order=True)
class Event:
    """One message of the schedule: ``topic``'s message ``seq``, stamped and received."""

    receive_ns: int
    order: int  # tie-break between topics received at the same instant
    topic: str
    seq: int
    stamp_ns: int  # the true time of its content
    clock_ns: int = 0  # how much later its header stamp is (``TeleopConfig.stamp_offsets``)


def schedule(config: TeleopConfig, *, endless: bool = False) -> Iterator[Event]:
    """Every message of the recording in receive-time order, generated lazily.

    ``endless``: ignore ``duration_s`` and never end; every stream goes on with the same
    formulas (``seq`` 0, 1, 2, ..., ``stamp_ns(seq)``), so the schedule of any ``duration_s``
    (of whole periods of every rate) is this one's events stamped before ``duration_s``.
    """

    def stream(order: int, topic: str, rate: float | None) -> Iterator[Event]:
        n = 1 if rate is None else round(config.duration_s * rate)
        dropped = config.dropped(topic)
        clock = config.stamp_offset_ns(topic)
        offset, silences = config.topic_receive_offset_ns(topic), config.silences(topic)
        for seq in itertools.count() if endless and rate is not None else range(n):
            stamp = config.start_ns if rate is None else stamp_ns(seq, rate, config.start_ns)
            after = stamp - config.start_ns
            if any(a <= after < b for a, b in silences):
                if any(a <= after and b == math.inf for a, b in silences):
                    return  # (stopped for good: an endless schedule would look forever)
                continue
            if seq in dropped:
                continue
            receive = stamp + receive_latency_ns(topic, seq) + offset + config.receive_offset_at(stamp)
            yield Event(receive, order, topic, seq, stamp, clock)

    streams = [stream(i, topic, rate) for i, (topic, rate) in enumerate(config.rates().items())]
    return heapq.merge(*streams)
