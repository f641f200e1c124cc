"""The live recorder's health: a status snapshot that other threads read at any time (a
node's ``~/status`` and ``/diagnostics``), rebuilt by the pipeline thread: per stream what
was received, its rate, drops, losses and whether it went silent; the episode being
recorded, with the latency from a message's arrival to its taking."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ortf_ros.format.units import NS
from ortf_ros.pipeline.recording.state import RecorderState
from ortf_ros.pipeline.sources.live import LiveSource, Queued

STATUS_REFRESH_S = 0.1
"""The status snapshot is rebuilt this often (and after every command), not every tick:
readers take it at about 1 Hz, and at a 10 ms tick it was most of an idle tick's work."""
SILENT_PERIODS = 5  # a stream silent this many of its periods (at least 1 s) is reported stale


class Health:
    """The status of ``shared``'s recorder over ``source``; ``missing()`` says what the
    warm-up still waits for."""

    def __init__(self, shared: RecorderState, source: LiveSource, missing: Callable[[], list[str]]) -> None:
        self.shared = shared
        self.source = source
        self.missing = missing
        self._status: dict[str, Any] = {}
        self._status_lock = threading.Lock()
        self._status_due = 0.0  # (monotonic) when the status is rebuilt anyway
        self._rates: dict[str, tuple[int, int]] = {}  # topic -> (received, at ns) when the rate was last measured
        self._rate_hz: dict[str, float] = {}
        self._silent: set[str] = set()  # streams said to have stopped

    def status(self) -> dict[str, Any]:
        """The latest snapshot (a copy)."""
        with self._status_lock:
            return dict(self._status)

    def refresh(self, tick: float) -> None:
        """Rebuild the snapshot if a command ran (``shared.status_stale``) or it is due (at
        monotonic time ``tick``); an error is logged, never raised."""
        shared = self.shared
        if shared.status_stale or tick >= self._status_due:
            shared.status_stale, self._status_due = False, tick + STATUS_REFRESH_S
            try:
                self.publish()
            except Exception as exc:  # (health is no reason to stop recording)
                shared.log("error", f"status: {type(exc).__name__}: {exc}")

    def took(self, taken: Iterable[Queued]) -> None:
        """Messages taken during an episode: their latency since they arrived."""
        episode = self.shared.episode
        if episode is not None:
            now = time.time_ns()
            for item in taken:
                episode.latency.update((now - item.origin_ns) / 1e6)

    def publish(self) -> None:
        """Rebuild the snapshot now."""
        shared = self.shared
        now = self.source.clock()
        health = self.source.health()
        streams = {}
        latched = {*shared.config.tf_static_topics, shared.config.robot_description_topic}
        for topic, numbers in sorted(health.items()):
            rate = self._measure_rate(topic, numbers.received, now)
            silent_s = None if numbers.last_receive_ns is None else (now - numbers.last_receive_ns) / NS
            stale = topic not in latched and (
                silent_s is None or silent_s > max(1.0, SILENT_PERIODS / rate if rate else 1.0)
            )
            self._report_silence(topic, stale, silent_s)
            streams[topic] = {
                "received": numbers.received,
                "rate_hz": round(rate, 2),
                "dropped": numbers.dropped,
                "lost_in_transport": numbers.lost,
                "late": shared.counts.late[topic],
                "undecodable": shared.counts.undecodable[topic],
                "queued": numbers.queued,
                "queue_capacity": numbers.capacity,
                "used": shared.counts.used[topic],
                "stale": stale,
            }
        status: dict[str, Any] = {
            "state": shared.state,
            "output": str(shared.settings.output),
            "episodes_committed": len(shared.records),
            "task": shared.session.task if shared.session is not None else shared.config.labels.task,
            "streams": streams,
            "warnings": list(shared.warnings),
        }
        if shared.error is not None:
            status["error"] = shared.error
        if shared.state == "waiting":
            status["missing"] = self.missing()
        episode = shared.episode
        if episode is not None and shared.session is not None:
            latency = episode.latency
            status["episode"] = {
                "id": episode.episode_id,
                "task": shared.session.task,
                "elapsed_s": round(time.time() - episode.started_wall, 3),
                "steps": shared.session.steps_written,
                "success": shared.labels.success,
                "failure_reason": shared.labels.failure_reason,
                "operator_notes": shared.labels.operator_notes,
                "latency_ms": {
                    "p50": round(latency.get_quantile(0.5), 3) if not latency.is_empty() else None,
                    "p99": round(latency.get_quantile(0.99), 3) if not latency.is_empty() else None,
                },
            }
        with self._status_lock:
            self._status = status

    def _report_silence(self, topic: str, stale: bool, silent_s: float | None) -> None:
        """A stream that stops while an episode is recorded is said once in the log (steps
        go on with its last sample, their alignment error growing), and again when it resumes."""
        episode = self.shared.episode
        if stale and episode is not None and topic not in self._silent:
            self._silent.add(topic)
            since = "never delivered" if silent_s is None else f"silent for {silent_s:.1f} s"
            self.shared.log("warn", f"{topic}: {since} while recording episode {episode.episode_id}")
        elif not stale and topic in self._silent:
            self._silent.discard(topic)
            self.shared.log("info", f"{topic}: delivering again")

    def _measure_rate(self, topic: str, received: int, now_ns: int) -> float:
        """Messages/s over the last second or so (updated once a second per topic)."""
        before = self._rates.get(topic)
        if before is None:
            self._rates[topic] = (received, now_ns)
            return 0.0
        count, at = before
        if now_ns - at >= NS:
            self._rate_hz[topic] = (received - count) * NS / (now_ns - at)
            self._rates[topic] = (received, now_ns)
        rate = self._rate_hz.get(topic, 0.0)
        return rate if math.isfinite(rate) else 0.0
