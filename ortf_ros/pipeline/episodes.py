"""Where episodes begin and end in a recording (``episodes`` in the mapping).

- ``input``: the whole recording is one episode.
- ``gap``: a new episode begins after ``gap_s`` seconds without any mapped message.
- ``ranges``: each ``(start, end)`` range, in seconds from the recording's start, is an
  episode; messages outside every range belong to none.
- ``topic``: messages on a boundary topic mark the episodes. ``std_msgs/Bool`` true
  begins one and false ends it; ``std_msgs/String`` "start"/"begin" begins and
  "stop"/"end" ends (other text is ignored); ``std_msgs/Empty`` begins one (ending the
  one before). Messages outside an episode belong to none.

Decisions use receive times, the one clock every message has.
"""

from __future__ import annotations

from typing import Literal

from ortf_ros.format.units import NS
from ortf_ros.pipeline.mapping import EpisodeSplit
from ortf_ros.pipeline.samples import RawMessage

Decision = Literal["begin", "end", "keep", "skip"]

BEGIN_WORDS = {"start", "begin"}
END_WORDS = {"stop", "end"}


class Segmenter:
    def __init__(self, split: EpisodeSplit, start_ns: int) -> None:
        self.split = split
        self.start_ns = start_ns
        self.inside = split.mode in ("input", "gap")  # these begin with an episode open
        self._last_ns: int | None = None
        self._range: int | None = None

    def boundary(self, raw: RawMessage, message: object) -> Decision:
        """A message on the boundary topic: begin, end, or nothing ("skip")."""
        if raw.msgtype.endswith("/Empty"):
            return self._begin()
        data = getattr(message, "data", None)
        if isinstance(data, bool):
            return self._begin() if data else self._end()
        if isinstance(data, str):
            word = data.strip().lower()
            if word in BEGIN_WORDS:
                return self._begin()
            if word in END_WORDS:
                return self._end()
        return "skip"

    def data(self, raw: RawMessage) -> Decision:
        """A data message: begins a new episode first ("begin"), belongs to the open one
        ("keep"), or falls outside every episode ("skip")."""
        if self.split.mode == "gap":
            gap_ns = round((self.split.gap_s or 0.0) * NS)
            last, self._last_ns = self._last_ns, raw.receive_ns
            return "begin" if last is not None and raw.receive_ns - last > gap_ns else "keep"
        if self.split.mode == "ranges":
            seconds = (raw.receive_ns - self.start_ns) / NS
            found = next((i for i, (a, b) in enumerate(self.split.ranges) if a <= seconds < b), None)
            if found is None:
                return self._end()
            changed, self._range = found != self._range, found
            self.inside = True
            return "begin" if changed else "keep"
        return "keep" if self.inside else "skip"

    def _begin(self) -> Decision:
        self.inside = True
        return "begin"

    def _end(self) -> Decision:
        was_inside, self.inside = self.inside, False
        return "end" if was_inside else "skip"
