"""QoS profiles: the player's from its settings, a recorder's adapted to what publishers offer.

The settings and the rule are ROS-free (``ortf_ros.qos``: the player's settings and its
MCAP export hold them without rclpy); here they become rclpy profiles, and
``subscription_qos`` applies ``adapt_to_offers`` to a node's view of the graph.
"""

from __future__ import annotations

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from ortf_ros.qos import AUTO, Durability, QosSettings, Reliability, adapt_to_offers


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
