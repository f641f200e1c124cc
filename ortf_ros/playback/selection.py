"""Which dataset and episodes to play, refused before anything is published when they
cannot be: not a dataset, fails validation (a missing video is a finding), or an
episode that does not exist."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.errors import ReaderError, UnknownEpisodeError

SHOWN_FINDINGS = 3


def open_for_playback(path: str | Path, episodes: Sequence[str]) -> tuple[Dataset, list[str]]:
    """The dataset and the ids of the episodes to play, in order (all of them when none
    are named). An episode is named by id, or by position in the index (``0``, ``-1``)."""
    root = Path(path)
    if not str(path).strip():
        raise ReaderError("no dataset given")
    if not (root / "meta").is_dir():
        raise ReaderError(f"{root}: not an ORTF dataset (no meta/ directory)")
    dataset = load_dataset(root)
    # An episode named twice (by id and by position) is played once, where it was first named.
    ids = list(dict.fromkeys(_resolve(dataset, key) for key in episodes)) or [e.episode_id for e in dataset.episodes]
    if not ids:
        raise ReaderError(f"{root}: the dataset has no episodes")
    for episode_id in dict.fromkeys(ids) if episodes else [None]:
        report = validate(root, episode=episode_id)
        if not report.ok:
            errors = [f for f in report.findings if f.severity == "error"]
            shown = "; ".join(f.line() for f in errors[:SHOWN_FINDINGS])
            more = f" (and {len(errors) - SHOWN_FINDINGS} more)" if len(errors) > SHOWN_FINDINGS else ""
            raise ReaderError(f"{root}: fails validation: {shown}{more}; `ortf validate {root}` lists them")
    return dataset, ids


def _resolve(dataset: Dataset, key: str) -> str:
    known = {e.episode_id for e in dataset.episodes}
    if key in known:
        return key
    try:
        position = int(key)
    except ValueError:
        position = None
    if position is not None and -len(dataset.episodes) <= position < len(dataset.episodes):
        return dataset.episodes[position].episode_id
    listed = ", ".join(sorted(known)[:5]) + (", ..." if len(known) > 5 else "")
    raise UnknownEpisodeError(f"{dataset.root}: no episode {key!r} (ids: {listed}; or a position 0..{len(known) - 1})")
