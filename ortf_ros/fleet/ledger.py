"""Which recordings a dataset already holds, from the ``source`` of its episodes.

A run that was killed (its driver, a node), that failed for some recordings, or that is
given new recordings, is run again as it was: what the dataset holds whole is skipped,
what it holds in part (a run cut off between two episodes of one recording) is
converted again and only its missing episodes imported, the rest converted. (What to do
with each is the driver's to decide, ``--again`` included: ``FleetConversion._plan``.)
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.dataset.catalog import load_manifest
from ortf_ros.dataset.held_recordings import DeletedEpisode, HeldRecording, deleted_episodes, held_recordings
from ortf_ros.errors import FormatError
from ortf_ros.format import layout
from ortf_ros.format.metadata import EpisodeSource
from ortf_ros.format.schema import SOURCE_COLUMN, SOURCE_TYPE
from ortf_ros.pipeline.sources.identity import RecordingIdentity


class Ledger:
    """The recordings of the dataset at ``root`` (none when it does not exist yet), and
    those taken on in this run, by fingerprint."""

    def __init__(self, root: Path) -> None:
        self._this_run: dict[str, str] = {}
        sources, self.unsourced = _sources(root)
        self.held: dict[str, HeldRecording] = held_recordings(sources, _deleted(root))
        self._by_path = {source.path: source.fingerprint for _, source in sources}

    def holds(self, identity: RecordingIdentity) -> HeldRecording | None:
        """What the dataset holds of this recording, or held before its episodes were deleted
        (None: nothing)."""
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


def _deleted(root: Path) -> list[DeletedEpisode]:
    """The episodes deleted from the dataset, with their sources (``held_recordings``)."""
    if not (root / layout.MANIFEST).is_file():
        return []
    return deleted_episodes(load_manifest(root).extra)
