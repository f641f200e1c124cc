"""The floor subscriber of ``bench_live.py``: a bare rclpy process that only counts what it receives.

Its imports are rclpy's and numpy's alone (not the recorder's, nor ``bench_live``'s), so
its memory is what a process subscribed to the scene takes. Run by ``bench_live.py``
only, as ``live_subscriber.py OUT TOPICS_JSON drain|single`` (TOPICS_JSON: topic ->
[type, depth, latched]); it counts until a line on its stdin says the publisher is
done, then a second for what the middleware still holds, and writes its summary (JSON)
to OUT. ``stdin_event`` and ``count_publishers`` serve ``bench_live``'s client too.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

Subscribed = tuple[str, int, bool]  # (type, keep-last depth, latched)


def stdin_event() -> threading.Event:
    """Set when the parent writes a line (or closes stdin): "the publisher is done"."""
    done = threading.Event()

    def wait() -> None:
        sys.stdin.readline()
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    return done


def count_publishers(node: Any, topics: Iterable[str], most: dict[str, int]) -> None:
    """Keep the most publishers seen per topic: more than one means another process
    publishes on this domain, and the counts would not be this scene's."""
    for topic in topics:
        most[topic] = max(most.get(topic, 0), node.count_publishers(topic))


def count_messages(out: Path, topics: dict[str, Subscribed], executor_kind: str) -> None:
    """Subscribe (raw, reliable, each topic's depth) to ``topics`` and count until the
    parent says the publisher is done. Messages are taken as the recorder's ``Receiver``
    takes them: every subscription drained in turn, a millisecond's pause after a pass
    that found nothing (``executor_kind`` "single": a SingleThreadedExecutor running a
    callback per message instead). Keeps publish -> reception and publish -> taken times
    (DDS source timestamp to ``received_timestamp`` / the wall clock when taken), and
    the gaps in each topic's publication sequence numbers (lost in transport)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from ortf_ros.ros.message_types import message_class

    rclpy.init()
    node = rclpy.create_node("ortf_bench_floor")
    counts = dict.fromkeys(topics, 0)
    lost = dict.fromkeys(topics, 0)
    last_sequence: dict[str, int] = {}
    to_taken: dict[str, array[int]] = {topic: array("q") for topic in topics}
    to_reception: dict[str, array[int]] = {topic: array("q") for topic in topics}

    def counter(topic: str) -> Callable[[bytes, dict[str, int]], None]:
        taken_times, reception_times = to_taken[topic], to_reception[topic]

        def count(data: bytes, info: dict[str, int]) -> None:
            now = time.time_ns()
            counts[topic] += 1
            taken_times.append(now - info["source_timestamp"])
            reception_times.append(info["received_timestamp"] - info["source_timestamp"])
            sequence = info.get("publication_sequence_number")
            if sequence:
                before = last_sequence.get(topic)
                if before is not None and sequence > before + 1:
                    lost[topic] += sequence - before - 1
                last_sequence[topic] = sequence

        return count

    subscriptions = []
    for topic, (msgtype, depth, latched) in topics.items():
        qos = QoSProfile(  # type: ignore[no-untyped-call]
            depth=depth,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
        )
        callback = counter(topic)
        subscription = node.create_subscription(message_class(msgtype), topic, callback, qos, raw=True)  # type: ignore[arg-type]
        subscriptions.append((subscription, callback))

    def drain() -> int:
        taken = 0
        for subscription, callback in subscriptions:
            handle, kind = subscription.handle, subscription.msg_type
            while True:
                with handle:
                    got = handle.take_message(kind, True)
                if got is None:
                    break
                callback(*got)
                taken += 1
        return taken

    def serve(until: Callable[[], bool]) -> None:
        if executor_kind == "single":
            while not until():
                executor.spin_once(timeout_sec=0.01)
            return
        while not until():
            if not drain():
                time.sleep(0.001)

    executor = SingleThreadedExecutor()
    executor.add_node(node)
    done = stdin_event()
    serve(done.is_set)
    publishers: dict[str, int] = {}
    count_publishers(node, topics, publishers)
    quiet_until = time.monotonic() + 1.0  # what is still in the middleware's queues
    serve(lambda: time.monotonic() > quiet_until)
    executor.shutdown()
    node.destroy_node()  # type: ignore[no-untyped-call]
    rclpy.shutdown()
    summary = {
        "publishers": publishers,
        "received": counts,
        "lost": lost,
        "taken_ms": _quantiles(to_taken),
        "reception_ms": _quantiles(to_reception),
    }
    out.write_text(json.dumps(summary))


def _quantiles(times: dict[str, array[int]]) -> dict[str, dict[str, float]]:
    """p50/p99/max in ms per topic and over all (``"all"``)."""
    result = {}
    per_topic = {topic: np.frombuffer(t, dtype=np.int64) for topic, t in times.items()}
    every = np.concatenate([np.zeros(0, dtype=np.int64), *per_topic.values()])
    for name, values in [*per_topic.items(), ("all", every)]:
        if len(values):
            p50, p99, worst = np.percentile(values / 1e6, [50, 99, 100])
            result[name] = {"p50": float(p50), "p99": float(p99), "max": float(worst)}
    return result


def main() -> None:
    out, topics, executor_kind = sys.argv[1:]
    count_messages(
        Path(out), {topic: (t, d, latched) for topic, (t, d, latched) in json.loads(topics).items()}, executor_kind
    )


if __name__ == "__main__":
    main()
