"""QoS as plain values, ROS-free: the policies a stream is published or subscribed with,
and the rule a recorder requests them by.

A subscription only matches a publisher whose offer is at least as strong as its
request: a reliable subscription hears nothing from a best-effort camera driver, and a
transient-local one nothing from a volatile publisher. A recorder that fixed its QoS
would therefore lose whole topics. It asks the graph instead, with the rule rosbag2's
recorder uses (rosbag2_transport ``qos.cpp``, ``adapt_request_to_offers``): request the
strongest policy that every publisher on the topic offers. ``adapt_to_offers`` is that
rule as a pure function.

The player's settings (``playback.settings``) and its MCAP export hold ``QosSettings``
without ROS; ``ros.qos`` makes rclpy profiles of them and applies the rule to a node's
view of the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar, get_args

Reliability = Literal["reliable", "best_effort"]
RELIABILITIES: tuple[Reliability, ...] = get_args(Reliability)
Durability = Literal["volatile", "transient_local"]
DURABILITIES: tuple[Durability, ...] = get_args(Durability)

AUTO = "auto"
"""A reliability or durability left to ``adapt_to_offers`` (any other value overrides it)."""


@dataclass(frozen=True)
class QosSettings:
    """A keep-last history of ``depth`` messages, with these policies."""

    depth: int
    reliability: Reliability
    durability: Durability


_Policy = TypeVar("_Policy", bound=str)
_RELIABILITY_CHOICES: dict[str, Reliability] = {name: name for name in RELIABILITIES}
_DURABILITY_CHOICES: dict[str, Durability] = {name: name for name in DURABILITIES}


def adapt_to_offers(
    offers: Sequence[tuple[Reliability, Durability]],
    *,
    latched: bool,
    reliability: str = AUTO,
    durability: str = AUTO,
) -> tuple[Reliability, Durability]:
    """The reliability and durability to subscribe with, given each publisher's offer.

    Reliable only when every publisher offers reliable: one best-effort publisher would
    never be heard by a reliable request. Transient-local only for a ``latched`` topic
    (``/tf_static``, ``/robot_description``: published once, needed by whoever comes
    later) whose publishers all offer it; for other topics the history a late joiner
    would get is old data. With no publisher yet, reliable (and transient-local when
    latched): what ROS publishes such topics with, so the usual publisher still matches
    when it appears. ``reliability``/``durability`` other than ``"auto"`` override the
    rule, for a publisher that appears late with weaker QoS.
    """
    forced_reliability = _choice("reliability", reliability, _RELIABILITY_CHOICES)
    forced_durability = _choice("durability", durability, _DURABILITY_CHOICES)
    every_reliable = all(offered == "reliable" for offered, _ in offers)
    every_transient_local = all(offered == "transient_local" for _, offered in offers)
    return (
        forced_reliability or ("reliable" if every_reliable else "best_effort"),
        forced_durability or ("transient_local" if latched and every_transient_local else "volatile"),
    )


def _choice(what: str, value: str, choices: dict[str, _Policy]) -> _Policy | None:
    """None for ``"auto"``, else the chosen policy; a ValueError naming the accepted values."""
    if value == AUTO:
        return None
    if value not in choices:
        accepted = ", ".join(repr(name) for name in (AUTO, *choices))
        raise ValueError(f"{what} {value!r}: expected one of {accepted}")
    return choices[value]
