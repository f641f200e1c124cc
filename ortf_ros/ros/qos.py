"""QoS profiles: the player's from its settings, a recorder's adapted to what publishers offer.

A subscription only matches a publisher whose offer is at least as strong as its
request: a reliable subscription hears nothing from a best-effort camera driver, and a
transient-local one nothing from a volatile publisher. A recorder that fixed its QoS
would therefore lose whole topics. It asks the graph instead, with the rule rosbag2's
recorder uses (rosbag2_transport ``qos.cpp``, ``adapt_request_to_offers``): request the
strongest policy that every publisher on the topic offers. ``adapt_to_offers`` is that
rule as a pure function; ``subscription_qos`` applies it to a node's view of the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from ortf_ros.playback.settings import DURABILITIES, RELIABILITIES, Durability, QosSettings, Reliability

AUTO = "auto"
"""A reliability or durability left to ``adapt_to_offers`` (any other value overrides it)."""

_Policy = TypeVar("_Policy", bound=str)
_RELIABILITY_CHOICES: dict[str, Reliability] = {name: name for name in RELIABILITIES}
_DURABILITY_CHOICES: dict[str, Durability] = {name: name for name in DURABILITIES}


def qos_profile(qos: QosSettings) -> QoSProfile:
    """A keep-last profile of ``qos.depth`` with the given reliability and durability."""
    return QoSProfile(  # type: ignore[no-untyped-call]
        history=HistoryPolicy.KEEP_LAST,
        depth=qos.depth,
        reliability=ReliabilityPolicy.RELIABLE if qos.reliability == "reliable" else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL
        if qos.durability == "transient_local"
        else DurabilityPolicy.VOLATILE,
    )


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


def subscription_qos(
    node: Node,
    topic: str,
    *,
    latched: bool,
    depth: int,
    reliability: str = AUTO,
    durability: str = AUTO,
) -> QoSProfile:
    """A keep-last profile of ``depth`` for ``topic``, adapted to the publishers ``node`` sees now
    (``adapt_to_offers``). Call it after discovery has had a moment: a publisher that is
    not in the graph yet is not asked."""
    offers = [_offer(endpoint.qos_profile) for endpoint in node.get_publishers_info_by_topic(topic)]
    chosen_reliability, chosen_durability = adapt_to_offers(
        offers, latched=latched, reliability=reliability, durability=durability
    )
    return qos_profile(QosSettings(depth, chosen_reliability, chosen_durability))


def _offer(profile: QoSProfile) -> tuple[Reliability, Durability]:
    """A publisher's profile as the two policies that decide matching. Anything but
    reliable counts as best effort, anything but transient-local as volatile: the weaker
    reading never asks for more than is offered."""
    offered_reliability: Reliability = (
        "reliable" if profile.reliability == ReliabilityPolicy.RELIABLE else "best_effort"
    )
    offered_durability: Durability = (
        "transient_local" if profile.durability == DurabilityPolicy.TRANSIENT_LOCAL else "volatile"
    )
    return offered_reliability, offered_durability


def _choice(what: str, value: str, choices: dict[str, _Policy]) -> _Policy | None:
    """None for ``"auto"``, else the chosen policy; a ValueError naming the accepted values."""
    if value == AUTO:
        return None
    if value not in choices:
        accepted = ", ".join(repr(name) for name in (AUTO, *choices))
        raise ValueError(f"{what} {value!r}: expected one of {accepted}")
    return choices[value]
