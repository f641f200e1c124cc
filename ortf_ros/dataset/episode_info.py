"""``ortf info DATASET --episode ID``: one episode's labels, where it came from, and what each
of its streams delivered at every stage (``format.accounting``), from the episode index alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ortf_ros.dataset.reader import Dataset
from ortf_ros.format.accounting import StreamAccount
from ortf_ros.format.metadata import EpisodeRecord

# The table's columns: heading, and the count it shows (None: the stage does not apply).
_COLUMNS: tuple[tuple[str, str], ...] = (
    ("received", "received"),
    ("lost", "lost_in_transport"),
    ("read", "read"),
    ("undecodable", "undecodable"),
    ("dropped", "dropped_total"),
    ("late", "late"),
    ("kept", "kept"),
    ("encoded", "frames_encoded"),
    ("in video", "frames_in_video"),
    ("native", "native_samples"),
    ("steps", "steps_referencing"),
)


@dataclass(frozen=True)
class EpisodeInfo:
    record: EpisodeRecord
    task: str

    def to_dict(self) -> dict[str, Any]:
        r = self.record
        return {
            "episode_id": r.episode_id,
            "task": self.task,
            "length": r.length,
            "duration_seconds": r.duration_seconds,
            "success": r.success,
            "failure_reason": r.failure_reason,
            "operator_notes": r.operator_notes,
            "review_flag": r.review_flag,
            "recorded_at": r.recorded_at,
            "source": None if r.source is None else r.source.to_dict(),
            "accounting": None if r.accounting is None else [a.to_dict() for a in r.accounting],
        }

    def lines(self) -> list[str]:
        r = self.record
        outcome = {True: "success", False: "failure", None: "not evaluated"}[r.success]
        if r.failure_reason:
            outcome += f" ({r.failure_reason})"
        out = [
            f"episode   {r.episode_id}",
            f"task      {self.task}",
            f"steps     {r.length}",
            f"duration  {r.duration_seconds:.2f} s",
            f"outcome   {outcome}",
        ]
        if r.operator_notes:
            out.append(f"notes     {r.operator_notes}")
        if r.review_flag is not None:
            out.append(f"review    {'flagged' if r.review_flag else 'not flagged'}")
        if r.recorded_at:
            out.append(f"recorded  {r.recorded_at}")
        if r.source is not None:
            out.append(f"source    {r.source.path}")
        if r.accounting is None:
            out.append("streams   not counted (written by a writer that does not keep per-stream accounting)")
            return out
        out.append("streams")
        out += _table(r.accounting)
        out += [f"  {line}" for line in _drops(r.accounting)]
        return out


def _cell(account: StreamAccount, attribute: str) -> str:
    value = getattr(account, attribute)
    if attribute == "dropped_total" and account.read is None and not account.dropped:
        return "-"
    return "-" if value is None else str(value)


def _table(accounts: Sequence[StreamAccount]) -> list[str]:
    rows = [["stream", *(heading for heading, _ in _COLUMNS)]]
    rows += [[a.stream, *(_cell(a, attribute) for _, attribute in _COLUMNS)] for a in accounts]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  "
        + "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]


def _drops(accounts: Sequence[StreamAccount]) -> list[str]:
    """Why messages were dropped, per stream and reason."""
    return [f"{a.stream}: {count} dropped ({reason})" for a in accounts for reason, count in sorted(a.dropped.items())]


def episode_info(dataset: Dataset, episode_id: str) -> EpisodeInfo:
    episode = dataset.episode(episode_id)
    return EpisodeInfo(episode.record, episode.task.instruction)
