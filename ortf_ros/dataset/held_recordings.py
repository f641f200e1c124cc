"""Which recordings a dataset's episodes were converted from, and which of those episodes
were deleted: one answer for the converter, which skips what a dataset holds
(``fleet.ledger``), and for ``ortf info``, which lists it, so nothing the converter
remembers is hidden from the user.

A recording is known by its fingerprint (``EpisodeSource``). Its episodes are those of the
index whose ``source`` has that fingerprint; more than one at a place once it was
converted again (``ortf-bag2ortf --again``). Its deleted episodes are remembered in the
manifest (``catalog.DELETED_SOURCES_KEY``): a deletion is a decision, so a rerun does not
bring them back, but it must be visible, and undone on request (``--again``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ortf_ros.dataset.catalog import DELETED_ID_KEY, DELETED_SOURCES_KEY
from ortf_ros.format.metadata import EpisodeSource


@dataclass(frozen=True)
class DeletedEpisode:
    """An episode deleted from the dataset, by the recording it was converted from."""

    episode_id: str | None  # None: deleted before ids were remembered
    source: EpisodeSource

    @classmethod
    def from_dict(cls, data: object) -> DeletedEpisode | None:
        """From a ``DELETED_SOURCES_KEY`` entry; None for one not of its shape."""
        if not isinstance(data, Mapping) or (source := EpisodeSource.from_dict(data)) is None:
            return None
        episode_id = data.get(DELETED_ID_KEY)
        return cls(episode_id if isinstance(episode_id, str) else None, source)


def deleted_episodes(extra: Mapping[str, Any]) -> list[DeletedEpisode]:
    """The deleted episodes a manifest's extra keys remember, in the order they were deleted."""
    listed = extra.get(DELETED_SOURCES_KEY)
    found = [DeletedEpisode.from_dict(item) for item in listed] if isinstance(listed, list) else []
    return [deleted for deleted in found if deleted is not None]


@dataclass
class HeldRecording:
    """What a dataset holds of one recording: its episodes (``episodes``: the latest by place
    in the recording; ``converted``: every one, in index order), how many it gives (None
    while no conversion of it ran to its end), and its deleted episodes."""

    path: str  # where it was when last converted (or when its deleted episode was)
    episodes: dict[int, str] = field(default_factory=dict)
    converted: list[tuple[int, str]] = field(default_factory=list)
    count: int | None = None
    deleted: list[DeletedEpisode] = field(default_factory=list)

    @property
    def whole(self) -> bool:
        """Every place of the recording is in the dataset, or was and was deleted (a deleted
        episode is a decision, not a gap: it is not converted again unless asked)."""
        return self.count is not None and all(self.has(position) for position in range(self.count))

    def has(self, position: int) -> bool:
        return position in self.episodes or any(d.source.episode == position for d in self.deleted)

    def ids(self) -> list[str]:
        """Every episode of it in the dataset, by place (conversions of one place in the order made)."""
        return [episode_id for _, episode_id in sorted(self.converted, key=lambda pair: pair[0])]

    def deleted_ids(self) -> list[str]:
        """Its deleted episodes' ids, where remembered."""
        return [d.episode_id for d in self.deleted if d.episode_id is not None]

    def describe_deleted(self) -> str:
        """Its deleted episodes, for people: ``episode 000004, 000007 deleted``."""
        known = self.deleted_ids()
        unknown = len(self.deleted) - len(known)
        parts = [f"episode {', '.join(known)}"] if known else []
        parts += [f"{unknown} episode(s)"] if unknown else []
        return f"{' and '.join(parts)} deleted"

    def describe(self) -> str:
        """Why a whole recording is skipped."""
        if not self.episodes:
            return (
                f"already converted; {self.describe_deleted()} from the dataset "
                "(not converted again: --again converts it again)"
            )
        deleted = f"; {self.describe_deleted()}" if self.deleted else ""
        return f"already in the dataset (episode {', '.join(self.ids())}{deleted})"


def held_recordings(
    sources: Iterable[tuple[str, EpisodeSource]], deleted: Iterable[DeletedEpisode]
) -> dict[str, HeldRecording]:
    """The recordings of a dataset by fingerprint, from its episodes' ids and sources (in
    index order) and its deleted episodes: first those it holds episodes of, in the order
    of their first episode, then those whose every episode was deleted."""
    held: dict[str, HeldRecording] = {}
    for episode_id, source in sources:
        found = held.setdefault(source.fingerprint, HeldRecording(source.path))
        found.path = source.path
        found.episodes[source.episode] = episode_id
        found.converted.append((source.episode, episode_id))
        if source.episodes is not None:  # (the latest conversion's: another mapping may split it otherwise)
            found.count = source.episodes
    for episode in deleted:
        found = held.setdefault(episode.source.fingerprint, HeldRecording(episode.source.path))
        found.deleted.append(episode)
        if found.count is None:
            found.count = episode.source.episodes
    return held
