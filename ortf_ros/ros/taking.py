"""Messages taken from a subscription that no executor serves.

The recorder drains its data subscriptions and /clock on its receiving thread
(``subscriptions.Receiver``, ``sim_clock.SimClock``): each message is taken with the
middleware's message info (its reception stamp, its publication sequence number), which
an executor's callback would not give.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rclpy.subscription import Subscription


def waiting(subscription: Subscription, *, raw: bool) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Every message waiting on ``subscription`` (serialized bytes when ``raw``), with its
    message info, taken one at a time until none is left."""
    handle, kind = subscription.handle, subscription.msg_type
    while True:
        with handle:
            got = handle.take_message(kind, raw)
        if got is None:
            return
        yield got
