"""One episode's rows of a step or stream table, read a row group at a time.

A sample needs a few steps around its own and a short span of a native stream, not the
episode: reading an hour-long episode's 1 kHz force-torque stream whole would put ~90 MB
in every worker for each episode it has open. Here a worker reads the row groups that
hold the rows asked for and keeps the last ``KEPT_GROUPS`` of them, so its memory is
bounded by the writer's row-group limits (``row_group_steps``, ``row_group_bytes``), not
by the length of an episode.

Where an episode's rows lie is found from the Parquet footer: a row group holding only
this episode (our writers' layout) is counted by its row count, and its time span read
from its ``timestamp`` statistics; a group shared with other episodes (another writer's)
is counted by reading its ``episode_id`` column once. Rows must be stored in order, as
every ortf_ros writer stores them (``Episode.step_batches`` asks the same).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ortf_ros.dataset.reader import Episode, column_array
from ortf_ros.errors import ReaderError

KEPT_GROUPS = 3
"""Row groups a table keeps read: a window that crosses a group boundary needs two."""


class GroupedRows:
    """Rows of episode ``episode_id`` in table ``relative`` (columns ``columns``), by position
    within the episode or by time."""

    def __init__(self, episode: Episode, relative: str, order: str, columns: Sequence[str]) -> None:
        self.relative = relative
        self.episode_id = episode.episode_id
        self.order = order
        self.columns = list(dict.fromkeys([*columns, order]))
        self._table = episode.rows_table(relative)
        metadata = self._table.metadata
        names = metadata.schema.names
        self._time_column = names.index("timestamp") if "timestamp" in names else None
        self.groups: list[int] = []
        counts: list[int] = []
        self._spans: list[tuple[float, float] | None] = []
        for group in self._table.groups(self.episode_id):
            own = self._table.only_episode(group, self.episode_id)
            count = metadata.row_group(group).num_rows if own else self._count(group)
            if count:
                self.groups.append(group)
                counts.append(count)
                self._spans.append(self._time_span(group) if own else None)
        self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._kept: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _count(self, group: int) -> int:
        ids = self._table.read_group(group, ["episode_id"])["episode_id"]
        return int(pc.sum(pc.equal(ids, self.episode_id)).as_py() or 0)

    def _time_span(self, group: int) -> tuple[float, float] | None:
        if self._time_column is None:
            return None
        stats = self._table.metadata.row_group(group).column(self._time_column).statistics
        if stats is None or not stats.has_min_max:
            return None
        return float(stats.min), float(stats.max)

    def group_rows(self, which: int) -> dict[str, np.ndarray]:
        """The episode's rows in its ``which``-th row group, as arrays (read, or kept)."""
        rows = self._kept.pop(which, None)
        if rows is None:
            ids = ["episode_id"] if self._table.has_episode_ids else []
            table = self._table.read_group(self.groups[which], [*self.columns, *ids])
            if ids:
                table = table.filter(pc.equal(table["episode_id"], self.episode_id))
            positions = table[self.order].to_numpy()
            if bool(np.any(np.diff(positions) <= 0)):
                raise ReaderError(
                    f"{self.relative}: rows of episode {self.episode_id} are not stored in {self.order} order"
                )
            rows = {name: as_array(table[name].combine_chunks()) for name in self.columns}
        self._kept[which] = rows
        while len(self._kept) > KEPT_GROUPS:
            self._kept.popitem(last=False)
        return rows

    def at(self, column: str, positions: np.ndarray) -> np.ndarray:
        """``column`` at ``positions`` (within the episode, each in range)."""
        which = np.searchsorted(self.starts, positions, side="right") - 1
        if len(set(which.tolist())) == 1:
            group = int(which[0])
            values: np.ndarray = self.group_rows(group)[column][positions - self.starts[group]]
            return values
        return np.stack(
            [self.group_rows(int(w))[column][p - self.starts[w]] for w, p in zip(which, positions, strict=True)]
        )

    def between(self, start: float, end: float, columns: Sequence[str]) -> dict[str, np.ndarray]:
        """Every row whose ``timestamp`` lies in [start, end], with ``columns`` and its time."""
        chosen = [
            w
            for w, span in enumerate(self._spans)
            if span is None or (span[1] >= start - 1e-9 and span[0] <= end + 1e-9)
        ]
        parts = [self.group_rows(w) for w in chosen]
        names = ["timestamp", *columns]
        if not parts:
            return {name: np.zeros((0,), np.float64) for name in names}
        merged = {name: np.concatenate([p[name] for p in parts]) for name in names}
        times = merged["timestamp"]
        first = int(np.searchsorted(times, start - 1e-9, side="left"))
        last = int(np.searchsorted(times, end + 1e-9, side="right"))
        return {name: values[first:last] for name, values in merged.items()}


def as_array(values: pa.Array) -> np.ndarray:
    """A column as numpy (``column_array``), nulls as NaN (floats) or -1 (integers: a step
    without a sample)."""
    if values.null_count:
        if pa.types.is_integer(values.type):
            values = values.fill_null(-1)
        elif pa.types.is_floating(values.type):
            values = values.fill_null(float("nan"))
    return column_array(values)
