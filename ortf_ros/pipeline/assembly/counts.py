"""Per topic, what the assembler made data of and what it did not, and why: the numbers
behind the conversion summary, a live recorder's status and each episode's accounting.
Apart from the assembler, since all of those read them and none needs the assembler."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class TopicCounts:
    """Per topic: what became data, and what did not and why (the conversion summary)."""

    read: Counter[str] = field(default_factory=Counter)  # messages of an episode handed to the assembler
    used: Counter[str] = field(default_factory=Counter)
    undecodable: Counter[str] = field(default_factory=Counter)
    out_of_order: Counter[str] = field(default_factory=Counter)
    # a command that names none of the action's joints, or gives no positions (a velocity command)
    not_for_action: Counter[str] = field(default_factory=Counter)
    outside_tolerance: Counter[str] = field(default_factory=Counter)
    skipped_steps: Counter[str] = field(default_factory=Counter)  # reason -> steps not written
    outside_episodes: Counter[str] = field(default_factory=Counter)  # messages between episodes
    late: Counter[str] = field(default_factory=Counter)  # stamped more than max_latency_ms before recorded
    before_first_keyframe: Counter[str] = field(default_factory=Counter)  # H.264: before the episode's video starts
    after_lost_packet: Counter[str] = field(default_factory=Counter)  # H.264: after a lost one, until a keyframe
    no_picture: Counter[str] = field(default_factory=Counter)  # H.264: parameter sets (or SEI) alone: no frame
    reasons: dict[str, str] = field(default_factory=dict)  # topic -> first undecodable reason
