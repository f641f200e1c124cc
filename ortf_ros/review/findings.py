"""The doctor's findings for the pages, computed in the background one episode at a time.

Examining an episode decodes its videos (seconds each), so nothing waits for it: the
list asks for every episode and shows counts as they come, an episode page moves its own
episode to the front. One worker thread; the findings of the last ``CACHED_EPISODES``
episodes are kept whole, the counts of all (an integer per episode). A save or a delete
forgets what was found for that episode (an outcome label is one of the checks).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ortf_ros.dataset.reader import load_dataset
from ortf_ros.errors import OrtfError
from ortf_ros.quality.doctor import examine

CACHED_EPISODES = 64


class Findings:
    """Per episode: ``pending`` (queued or running), ``done`` with its findings, or
    ``failed`` with the reason."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Condition()
        self._queue: list[str] = []
        self._counts: dict[str, dict[str, int]] = {}
        self._failed: dict[str, str] = {}
        self._found: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._changes: dict[str, int] = {}  # episode -> times forgotten (an examination from before is stale)

    def request(self, episode_ids: Iterable[str], *, first: bool = False) -> None:
        """Queue the episodes not known yet; ``first`` (an episode page): ahead of the
        others, and again if its findings were counted but have left the cache."""
        with self._lock:
            if first:
                wanted = [e for e in episode_ids if e not in self._found and e not in self._failed]
                self._queue = wanted + [e for e in self._queue if e not in wanted]
            else:
                known = {*self._queue, *self._counts, *self._failed}
                self._queue.extend(e for e in episode_ids if e not in known)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="ortf-review-doctor", daemon=True)
                self._thread.start()
            self._lock.notify()

    def forget(self, episode_id: str) -> None:
        """What was found for the episode is stale (it was saved, or deleted); an examination
        of it under way when it changed is not kept either."""
        with self._lock:
            self._forget(episode_id)

    def forget_all(self) -> None:
        """Everything found is stale (a change that decides a rule of every episode)."""
        with self._lock:
            for episode_id in {*self._counts, *self._failed, *self._found}:
                self._forget(episode_id)

    def _forget(self, episode_id: str) -> None:
        self._counts.pop(episode_id, None)
        self._failed.pop(episode_id, None)
        self._found.pop(episode_id, None)
        self._changes[episode_id] = self._changes.get(episode_id, 0) + 1

    def state(self, episode_id: str) -> dict[str, Any]:
        """What is known of one episode, for the page (``findings`` only while cached)."""
        with self._lock:
            if episode_id in self._failed:
                return {"state": "failed", "reason": self._failed[episode_id]}
            found = self._found.get(episode_id)
            if found is None:  # not examined yet, or counted and pushed out of the cache since
                return {"state": "pending"}
            return {"state": "done", "counts": self._counts[episode_id], "findings": found}

    def counts(self) -> dict[str, dict[str, int]]:
        """Findings by severity of the episodes examined so far."""
        with self._lock:
            return dict(self._counts)

    def failures(self) -> dict[str, str]:
        """Why the doctor could not examine these episodes."""
        with self._lock:
            return dict(self._failed)

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            self._lock.notify()

    def _next(self) -> str | None:
        with self._lock:
            while not self._queue and not self._stopping:
                self._lock.wait()
            return None if self._stopping else self._queue.pop(0)

    def _work(self) -> None:
        while (episode_id := self._next()) is not None:
            with self._lock:
                changes = self._changes.get(episode_id, 0)
            try:
                found = [f.to_dict() for f in examine(load_dataset(self.root), [episode_id])]
            except Exception as exc:  # (a bug too: the worker goes on, and the page says why)
                with self._lock:
                    if self._changes.get(episode_id, 0) == changes:
                        self._failed[episode_id] = (
                            str(exc) if isinstance(exc, OrtfError) else f"{type(exc).__name__}: {exc}"
                        )
                continue
            counts: dict[str, int] = {}
            for finding in found:
                counts[finding["severity"]] = counts.get(finding["severity"], 0) + 1
            with self._lock:
                if self._changes.get(episode_id, 0) != changes:  # saved meanwhile: examined again when asked
                    continue
                self._counts[episode_id] = counts
                self._found[episode_id] = found
                while len(self._found) > CACHED_EPISODES:
                    self._found.popitem(last=False)
