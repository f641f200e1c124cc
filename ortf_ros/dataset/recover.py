"""``ortf recover``: finish or discard what a crash left in the staging area.

An episode whose commit had started is rolled forward with the outcome it was being
committed with. An episode that was still recording becomes a normal episode with
every step whose frames reached the disk, ``success`` null and a note that says so;
``discard=True`` drops it instead. A delete that was interrupted (``ortf_ros.dataset.deletion``)
is finished, after the staged episodes, whose commits may have appended to the tables it
rewrites. Either way the dataset's derived metadata (statistics, manifest totals) is brought
up to date.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ortf_ros.dataset.catalog import Catalog, load_manifest
from ortf_ros.dataset.commit import commit_staged, discard_staged
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.deletion import finish_pending_deletion, pending_deletion
from ortf_ros.dataset.staging import (
    HEADER_FILE,
    EpisodeOutcome,
    StagedEpisode,
    lock_dataset,
    staged_episode_dirs,
    unlock_dataset,
)
from ortf_ros.errors import EmptyEpisodeError

RECOVERED_NOTE = "Recovered by `ortf recover` after the recording was interrupted; success not evaluated."


@dataclass(frozen=True)
class RecoveryResult:
    episode_id: str
    action: Literal["recovered", "completed", "discarded", "deleted", "kept"]
    steps: int = 0
    reason: str = ""

    def line(self) -> str:
        if self.action == "deleted":
            return f"episode {self.episode_id}: deletion completed"
        if self.action == "kept":
            return f"episode {self.episode_id}: kept (its deletion was interrupted before it took effect)"
        if self.action == "discarded":
            return f"episode {self.episode_id}: discarded{f' ({self.reason})' if self.reason else ''}"
        what = "commit completed" if self.action == "completed" else "recovered"
        return f"episode {self.episode_id}: {what}, {self.steps} steps"


def recover(root: Path, *, discard: bool = False, config: WriterConfig | None = None) -> list[RecoveryResult]:
    config = config or WriterConfig()
    load_manifest(root)  # not a dataset: say so before the lock creates anything in it
    if not staged_episode_dirs(root) and pending_deletion(root) is None:
        return []  # nothing to do, and nothing rewritten (listed again under the lock below)
    lock = lock_dataset(root)
    try:
        catalog = Catalog.load(root)
        results = [_recover_one(catalog, StagedEpisode(d), discard, config) for d in staged_episode_dirs(root)]
        planned = [p.episode_id for p in pending_deletion(root) or []]
        deleted = finish_pending_deletion(catalog)
        results += [RecoveryResult(i, "deleted" if i in deleted else "kept") for i in planned]
        catalog.refresh_derived()
        return results
    finally:
        unlock_dataset(root, lock)


def _recover_one(catalog: Catalog, staged: StagedEpisode, discard: bool, config: WriterConfig) -> RecoveryResult:
    if not (staged.directory / HEADER_FILE).exists():
        # Made, then the process died (or the disk was full) before its header, the first
        # thing an episode writes: nothing of it was recorded.
        staged.remove()
        return RecoveryResult(staged.directory.name.removeprefix("episode_"), "discarded", reason="nothing recorded")
    header = staged.header()
    outcome = staged.outcome()
    committing = outcome is not None or catalog.record(header.episode_id) is not None
    if discard and not committing:
        discard_staged(catalog, staged)
        return RecoveryResult(header.episode_id, "discarded", reason="--discard")
    if outcome is None:
        outcome = EpisodeOutcome(success=None, operator_notes=RECOVERED_NOTE, terminal=False)
    try:
        record = commit_staged(catalog, staged, outcome, row_groups=config.row_groups)
    except EmptyEpisodeError as exc:
        discard_staged(catalog, staged)
        return RecoveryResult(header.episode_id, "discarded", reason=str(exc))
    return RecoveryResult(header.episode_id, "completed" if committing else "recovered", record.length)
