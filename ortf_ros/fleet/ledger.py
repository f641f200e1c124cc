"""Which recordings a dataset already holds, from the ``source`` of its episodes.

A run that was killed (its driver, a node), that failed for some recordings, or that is
given new recordings, is run again as it was: what the dataset holds whole is skipped,
what it holds in part (a run cut off between two episodes of one recording) is
converted again and only its missing episodes imported, the rest converted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.dataset.catalog import DELETED_SOURCES_KEY, load_manifest
from ortf_ros.errors import FormatError
from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeSource
from ortf_ros.format.schema import SOURCE_COLUMN, SOURCE_TYPE
from ortf_ros.pipeline.sources.identity import RecordingIdentity


@dataclass
class Held:
    """The episodes a dataset holds of one recording: episode id by place in the recording,
    and how many the recording gives (None while no conversion of it ran to its end)."""

    episodes: dict[int, str] = field(default_factory=dict)
    count: int | None = None
    deleted: set[int] = field(default_factory=set)  # places whose episode was deleted from the dataset

    @property
    def whole(self) -> bool:
        """Every place of the recording is in the dataset, or was and was deleted (a deleted
        episode is a decision, not a gap: it is not converted again)."""
        return self.count is not None and all(self.has(position) for position in range(self.count))

    def has(self, position: int) -> bool:
        return position in self.episodes or position in self.deleted

    def ids(self) -> list[str]:
        return [self.episodes[position] for position in sorted(self.episodes)]

    def describe(self) -> str:
        """Why a whole recording is skipped."""
        deleted = f"{len(self.deleted)} of its episode(s) deleted from it" if self.deleted else ""
        if not self.episodes:
            return f"already converted, and {deleted} (not converted again)"
        return f"already in the dataset (episode {', '.join(self.ids())}" + (f"; {deleted})" if deleted else ")")


class Ledger:
    """The recordings of the dataset at ``root`` (none when it does not exist yet), and
    those taken on in this run, by fingerprint."""

    def __init__(self, root: Path) -> None:
        self.held: dict[str, Held] = {}
        self._by_path: dict[str, str] = {}
        self._this_run: dict[str, str] = {}
        sources, self.unsourced = _sources(root)
        for episode_id, source in sources:
            held = self._held(source)
            held.episodes[source.episode] = episode_id
            self._by_path[source.path] = source.fingerprint
        for source in _deleted_sources(root):
            self._held(source).deleted.add(source.episode)

    def _held(self, source: EpisodeSource) -> Held:
        held = self.held.setdefault(source.fingerprint, Held())
        if source.episodes is not None:
            held.count = source.episodes
        return held

    def holds(self, identity: RecordingIdentity) -> Held | None:
        """What the dataset holds of this recording (None: nothing)."""
        return self.held.get(identity.fingerprint)

    def changed(self, identity: RecordingIdentity) -> bool:
        """Whether the dataset holds episodes of another recording once at this path (the
        file was replaced, or grew: it is converted again, and said so)."""
        before = self._by_path.get(identity.path)
        return before is not None and before != identity.fingerprint

    def taken(self, identity: RecordingIdentity, name: str) -> str | None:
        """The input of this run that is the same recording (None: the first), noted."""
        first = self._this_run.setdefault(identity.fingerprint, name)
        return None if first == name else first


def _sources(root: Path) -> tuple[list[tuple[str, EpisodeSource]], int]:
    """The episodes that say their source, and how many do not."""
    path = root / layout.EPISODES
    if not path.is_file():
        return [], 0
    try:
        schema = pq.read_schema(path)
        if SOURCE_COLUMN not in schema.names or schema.field(SOURCE_COLUMN).type != SOURCE_TYPE:
            # another writer's dataset, or one made before episodes said their source
            return [], pq.read_metadata(path).num_rows
        table: pa.Table = pq.read_table(path, columns=["episode_id", SOURCE_COLUMN])
    except (pa.ArrowException, OSError) as exc:
        raise FormatError(f"{path}: unreadable Parquet: {exc}") from None
    found = []
    for episode_id, data in zip(
        table.column("episode_id").to_pylist(), table.column(SOURCE_COLUMN).to_pylist(), strict=True
    ):
        source = EpisodeSource.from_dict(data)
        if source is not None:
            found.append((str(episode_id), source))
    return found, 0


def _deleted_sources(root: Path) -> list[EpisodeSource]:
    """The sources of episodes deleted from the dataset (``catalog.DELETED_SOURCES_KEY``)."""
    if not (root / layout.MANIFEST).is_file():
        return []
    listed = load_manifest(root).extra.get(DELETED_SOURCES_KEY)
    found = [EpisodeSource.from_dict(item) for item in listed] if isinstance(listed, list) else []
    return [source for source in found if source is not None]
