"""Playing a ``Playlist`` in time: scheduling, pause / step / skip, decode-ahead. No ROS.

Two threads. A producer walks the playlist (reading tables, decoding frames, building
messages) into a queue that holds at most ``lookahead_frames`` decoded frames per
camera and 64 times as many messages: the memory bound, whatever the episode's
length. The publishing thread (``run``) takes each message when it is due, restamps,
serializes and hands it to a ``Sink`` (the ROS node, or a test).

A message is due at ``anchor_wall + (time - anchor_time) / rate`` (at once with rate 0).
The anchor is set when playback starts, once the decode-ahead queue is full, and again
after a resume, a step or a skip, so playback carries on from where it stands instead
of rushing to catch up. The stamp
offset is chosen there too: ``now`` stamps are the message times shifted so that the
anchored message is stamped with the wall clock; ``sim`` stamps are the times
themselves. Between anchors stamps keep the recording's spacing.

A late message is published at once; the achieved rate in the status shows it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from ortf_ros.errors import PlaybackStoppedError
from ortf_ros.playback.messages import Outgoing, Playlist
from ortf_ros.playback.settings import PlayerSettings

ITEMS_PER_FRAME = 64  # queued messages allowed per look-ahead frame (the bound without cameras)
SPIN_NS = 1_000_000  # the last millisecond before a message is due is waited out by polling, not sleeping
CLOCK_PERIOD_NS = 10_000_000  # /clock advances at most every 10 ms of stamps (100 Hz)
RATE_WINDOW_NS = 2_000_000_000  # the achieved rate is measured over the last 2 s of wall time
STEP_TIMEOUT_S = 10.0
PREROLL_TIMEOUT_NS = 3_000_000_000
"""Before a stretch of playback is anchored, the decode-ahead queue fills (at most this
long): opening a video and decoding its first frames takes tens of milliseconds, which
would otherwise make the first steps late."""
KEPT_WHEN_SKIPPING = frozenset({"robot_description", "tf_static", "task", "episode"})
"""Kinds a skipped episode still publishes: latched state, and where episodes begin and end."""

State = Literal["playing", "paused", "finished"]


class Sink(Protocol):
    def publish(self, item: Outgoing, data: bytes) -> None: ...

    def clock(self, stamp_ns: int) -> None: ...


@dataclass(frozen=True)
class Status:
    state: State
    episode_id: str | None
    episode: int  # position in the play (loops counted)
    step: int | None  # last step published in the episode
    time_s: float  # seconds into the episode
    rate: float  # requested (0: as fast as possible)
    achieved_rate: float | None  # playback seconds per wall second, lately
    decoded_ahead: dict[str, int]  # frames decoded and waiting, per camera (at most lookahead_frames)

    def to_dict(self) -> dict[str, object]:
        return {
            "state": self.state,
            "episode_id": self.episode_id,
            "episode": self.episode,
            "step": self.step,
            "time": round(self.time_s, 6),
            "rate": self.rate,
            "achieved_rate": None if self.achieved_rate is None else round(self.achieved_rate, 4),
            "decoded_ahead": self.decoded_ahead,
        }


@dataclass
class _Queued:
    position: int  # episode position in the play
    item: Outgoing | None  # None: the end of the playlist


@dataclass
class _Step:
    done: threading.Event
    time_ns: int | None = None  # the step's time, once its first message is published
    published: str | None = None  # what was published, for the service's answer


class Player:
    """Publishes a playlist through a sink; ``run`` blocks until it is finished or stopped."""

    def __init__(
        self,
        playlist: Playlist,
        settings: PlayerSettings,
        sink: Sink,
        *,
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
        wall_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.playlist = playlist
        self.settings = settings
        self.sink = sink
        self._monotonic_ns = monotonic_ns
        self._wall_ns = wall_ns
        self._cond = threading.Condition()
        self._queue: deque[_Queued] = deque()
        self._frames: Counter[str] = Counter()  # decoded frames queued, per camera
        self._max_items = ITEMS_PER_FRAME * settings.lookahead_frames
        self._paused = settings.start_paused
        self._stopped = False
        self._step: _Step | None = None
        self._skip_below = 0  # episodes before this position are skipped
        self._anchor: tuple[int, int] | None = None  # (monotonic ns, timeline ns)
        self._shift_ns = 0
        self._last_clock: int | None = None
        self._error: BaseException | None = None
        self._finished = False
        self._full_or_done = False  # the producer waits for room, or has put everything
        self._preroll_until: int | None = None
        self._current: Outgoing | None = None  # last published
        self._position = 0
        self._progress: deque[tuple[int, int]] = deque()  # (monotonic ns, timeline ns) since the anchor
        self._producer = threading.Thread(target=self._produce, name="ortf_player decode-ahead", daemon=True)

    # -- control (any thread)

    def pause(self) -> bool:
        with self._cond:
            if self._paused or self._finished:
                return False
            self._paused = True
            self._cond.notify_all()
            return True

    def resume(self) -> bool:
        with self._cond:
            if not self._paused or self._finished:
                return False
            self._paused = False
            self._anchor = None
            self._cond.notify_all()
            return True

    def step(self, timeout_s: float = STEP_TIMEOUT_S) -> str | None:
        """While paused, publish the next step's messages (and the samples before them);
        returns what was published, None if not paused, finished or timed out."""
        with self._cond:
            if not self._paused or self._finished or self._step is not None:
                return None
            request = self._step = _Step(threading.Event())
            self._anchor = None  # stamps of the step are "now" too
            self._cond.notify_all()
        request.done.wait(timeout_s)
        return request.published

    def next_episode(self) -> bool:
        """Skip the rest of the episode being played; False when there is none."""
        with self._cond:
            if self._finished:
                return False
            head = next((q.position for q in self._queue if q.item is not None), None)
            current = self._position if self._current is not None else head
            if current is None:
                return False
            self._skip_below = max(self._skip_below, current + 1)
            self._anchor = None
            self._cond.notify_all()
            return True

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def status(self) -> Status:
        with self._cond:
            item = self._current
            state: State = "finished" if self._finished else "paused" if self._paused else "playing"
            achieved = None
            if len(self._progress) >= 2:
                (w0, t0), (w1, t1) = self._progress[0], self._progress[-1]
                achieved = (t1 - t0) / (w1 - w0) if w1 > w0 else None
            return Status(
                state=state,
                episode_id=item.episode_id if item is not None else None,
                episode=self._position,
                step=item.step if item is not None else None,
                time_s=item.episode_ns / 1e9 if item is not None else 0.0,
                rate=self.settings.rate,
                achieved_rate=achieved,
                decoded_ahead={camera: count for camera, count in sorted(self._frames.items()) if count},
            )

    # -- the publishing thread

    def run(self) -> None:
        """Publish everything (forever with ``loop``) unless stopped; re-raises a producer's error."""
        self._producer.start()
        try:
            while (queued := self._next_due()) is not None:
                self._publish(queued)
        finally:
            with self._cond:
                self._finished = True
                self._stopped = True
                self._cond.notify_all()
                if self._step is not None:
                    self._step.done.set()
            self._producer.join()
        if self._error is not None:
            raise self._error

    def _next_due(self) -> _Queued | None:
        """The next message to publish, when it is due; None at the end or when stopped."""
        spin_until: int | None = None
        with self._cond:
            while True:
                if self._stopped:
                    return None
                if not self._queue:
                    self._cond.wait()
                    continue
                head = self._queue[0]
                if head.item is None:
                    return None
                if head.position < self._skip_below and head.item.kind not in KEPT_WHEN_SKIPPING:
                    self._take()
                    continue
                step = self._step
                if step is not None and step.time_ns is not None and head.item.time_ns != step.time_ns:
                    self._step = None  # everything of that step is out
                    step.done.set()
                    continue
                if self._paused:
                    if step is None:
                        self._cond.wait()
                        continue
                    queued = self._take()  # stepping: no waiting
                    return self._anchored(queued) if self._anchor is None else queued
                if self._anchor is None:
                    if self._prerolling():
                        continue
                    return self._anchored(self._take())
                if self.settings.rate == 0.0:
                    return self._take()
                anchor_wall, anchor_time = self._anchor
                due = anchor_wall + round((head.item.time_ns - anchor_time) / self.settings.rate)
                wait = due - self._monotonic_ns()
                if wait > SPIN_NS:
                    self._cond.wait((wait - SPIN_NS) / 1e9)
                    continue
                spin_until = due
                queued = self._take()
                break
        while self._monotonic_ns() < spin_until:
            time.sleep(0)  # lets other threads run without giving up the time slice to the OS
        return queued

    def _prerolling(self) -> bool:
        """Whether to wait (lock held, the wait done) for the decode-ahead queue to fill first."""
        if self._full_or_done or self.settings.rate == 0.0:
            self._preroll_until = None
            return False
        now = self._monotonic_ns()
        if self._preroll_until is None:
            self._preroll_until = now + PREROLL_TIMEOUT_NS
        if now >= self._preroll_until:
            self._preroll_until = None
            return False
        self._cond.wait((self._preroll_until - now) / 1e9)
        return True

    def _take(self) -> _Queued:
        queued = self._queue.popleft()
        if queued.item is not None and queued.item.camera is not None:
            self._frames[queued.item.camera] -= 1
        self._cond.notify_all()
        return queued

    def _anchored(self, queued: _Queued) -> _Queued:
        """Start a stretch of playback at this message (lock held)."""
        assert queued.item is not None
        self._anchor = (self._monotonic_ns(), queued.item.time_ns)
        if self.settings.stamps == "now":
            self._shift_ns = self._wall_ns() - queued.item.time_ns
        self._progress.clear()
        return queued

    def _publish(self, queued: _Queued) -> None:
        item = queued.item
        assert item is not None
        stamp = item.time_ns + self._shift_ns
        if self.settings.publish_clock and (self._last_clock is None or stamp >= self._last_clock + CLOCK_PERIOD_NS):
            self.sink.clock(stamp)
            self._last_clock = stamp
        ros = self.playlist.ros
        ros.restamp(item.message, self._shift_ns)
        self.sink.publish(item, ros.serialize(item.message, item.msgtype))
        with self._cond:
            self._current, self._position = item, queued.position
            now = self._monotonic_ns()
            self._progress.append((now, item.time_ns))
            while self._progress and self._progress[0][0] < now - RATE_WINDOW_NS:
                self._progress.popleft()
            step = self._step
            if step is not None and step.time_ns is None and item.step is not None:
                step.time_ns = item.time_ns
                step.published = f"episode {item.episode_id} step {item.step}"

    # -- the producer thread

    def _produce(self) -> None:
        try:
            for episode in self.playlist.play(loop=self.settings.loop, start_offset_s=self.settings.start_offset):
                for item in episode.opening():
                    self._put(episode.position, item)
                for item in episode.body():
                    with self._cond:
                        if self._skip_below > episode.position:
                            break
                    self._put(episode.position, item)
                for item in episode.closing():
                    self._put(episode.position, item)
        except PlaybackStoppedError:
            return
        except BaseException as exc:  # handed to the publishing thread, which re-raises it
            self._error = exc
        try:
            self._put(-1, None)
        except PlaybackStoppedError:
            return

    def _put(self, position: int, item: Outgoing | None) -> None:
        with self._cond:
            while not self._stopped and item is not None and self._full(item):
                if not self._full_or_done:
                    self._full_or_done = True
                    self._cond.notify_all()
                self._cond.wait()
            if self._stopped:
                raise PlaybackStoppedError
            self._full_or_done = item is None
            self._queue.append(_Queued(position, item))
            if item is not None and item.camera is not None:
                self._frames[item.camera] += 1
            self._cond.notify_all()

    def _full(self, item: Outgoing) -> bool:
        if len(self._queue) >= self._max_items:
            return True
        return item.camera is not None and self._frames[item.camera] >= self.settings.lookahead_frames
