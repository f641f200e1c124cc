"""Decisions a person takes after recording, written back into the dataset: an episode's
outcome, failure reason, notes and review flag, or its deletion. The public face of the
edits, shared by ``ortf episodes`` and the review page.

Every edit holds the dataset's writer lock (``staging.lock_dataset``), so a recorder or a
conversion cannot begin writing halfway through it, and one that is writing makes the edit
fail with ``DatasetBusyError``. The crash guarantees are a commit's: ``meta/episodes.parquet``,
replaced atomically, is the commit point. A label is that file rewritten and nothing else
(the statistics do not depend on labels). A delete touches many files and is journalled:
``ortf_ros.dataset.deletion`` says how an interrupted one is finished. Before either, a
delete an earlier run left unfinished is finished: the next edit cleans up after the last.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Final, Literal, TypeAlias

from ortf_ros.dataset import deletion
from ortf_ros.dataset.catalog import Catalog, load_manifest, write_episode_index
from ortf_ros.dataset.run_lock import run_lock
from ortf_ros.dataset.staging import LOCK_WAIT_S, lock_dataset, staged_episode_dirs, unlock_dataset
from ortf_ros.errors import UnknownEpisodeError, UsageError, WriterError
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.metadata import EpisodeRecord, episodes_table, read_episodes


class _Unchanged(enum.Enum):
    """The type of ``UNCHANGED``: an enum of one member, so mypy narrows ``is UNCHANGED``."""

    UNCHANGED = "unchanged"

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Final = _Unchanged.UNCHANGED
"""A label argument's default: leave this field as it is (None would mean "clear it")."""
Unchanged: TypeAlias = Literal[_Unchanged.UNCHANGED]

EDIT_LOCK_WAIT_S = LOCK_WAIT_S
"""How long an edit waits for a writer to let the dataset go before it is refused as busy."""


@contextlib.contextmanager
def _editing(root: Path) -> Iterator[Manifest]:
    """The dataset locked for an edit, any unfinished delete finished first; its manifest."""
    manifest = load_manifest(root)  # not a dataset: said before the lock makes anything in it
    # An ``ortf-bag2ortf`` run decided at its start which recordings the dataset holds, and
    # holds its run lock until it ends: an edit waits for no run (and no run starts meanwhile).
    with run_lock(root):
        lock = lock_dataset(root, EDIT_LOCK_WAIT_S)
        try:
            # (After the staged episodes, which `ortf recover` settles first: their commits may
            # have journalled appends to the tables a delete rewrites.)
            if deletion.pending_deletion(root) is not None and not staged_episode_dirs(root):
                deletion.finish_pending_deletion(Catalog.load(root))
            yield manifest
        finally:
            unlock_dataset(root, lock)


editing = _editing
"""``with editing(root) as manifest:``: the lock and clean-up every edit of a committed dataset
takes, for edits kept in modules of their own (``ortf_ros.dataset.annotate``)."""


def set_episode_labels(
    root: Path,
    episode_id: str,
    *,
    success: bool | Unchanged | None = UNCHANGED,
    failure_reason: str | Unchanged | None = UNCHANGED,
    operator_notes: str | Unchanged | None = UNCHANGED,
    review_flag: bool | Unchanged = UNCHANGED,
) -> EpisodeRecord:
    """Change the labels given (the others stay as they are) and return the episode's record
    as committed. ``success``: True, False, or None (not evaluated). An outcome other than
    False clears ``failure_reason``, and giving one with it is a UsageError (the spec's
    failure_reason is null unless the episode failed). Empty or blank text is stored as
    null, as a form's empty field means. An unknown ``episode_id`` is a UsageError naming it.

    Only the index changes: the steps' ``is_terminal`` stays as the commit set it (true on the
    last step of an episode evaluated when it was recorded). It says how the episode ended,
    which a label given later does not change, and rewriting a chunk's step table for a label
    would make a label cost as much as a delete."""
    _check_types(success=success, review_flag=review_flag)
    _check_text(failure_reason=failure_reason, operator_notes=operator_notes)
    root = Path(root)
    with _editing(root) as manifest:
        records = read_episodes(root)
        position = next((i for i, r in enumerate(records) if r.episode_id == episode_id), None)
        if position is None:
            raise UnknownEpisodeError(f"{root}: no episode with id {episode_id!r}")
        record = records[position]
        outcome = record.success if success is UNCHANGED else success
        reason = record.failure_reason if failure_reason is UNCHANGED else _text(failure_reason)
        if outcome is not False:
            if failure_reason is not UNCHANGED and reason is not None:
                raise UsageError(
                    f"episode {episode_id}: a failure reason is for a failed episode; its outcome is "
                    f"{_outcome_word(outcome)} (set success to false with it)"
                )
            reason = None
        updated = replace(
            record,
            success=outcome,
            failure_reason=reason,
            operator_notes=record.operator_notes if operator_notes is UNCHANGED else _text(operator_notes),
            review_flag=record.review_flag if review_flag is UNCHANGED else review_flag,
        )
        if updated != record:
            records[position] = updated
            write_episode_index(root, episodes_table(records, manifest))  # the commit point
        return updated


def delete_episodes(root: Path, episode_ids: Sequence[str]) -> None:
    """Delete these episodes and every file of theirs; the others keep their ids, steps and
    files. Refused whole (nothing deleted) if an id is unknown (a UsageError naming it) or
    if an episode is staged (``ortf recover`` it first)."""
    if isinstance(episode_ids, str) or not all(isinstance(i, str) for i in episode_ids):
        raise UsageError(f"episode ids: expected a sequence of strings, got {episode_ids!r}")
    if not episode_ids:
        raise UsageError("no episode named to delete")
    root = Path(root)
    with _editing(root):
        staged = staged_episode_dirs(root)
        if staged:
            raise WriterError(
                f"{root}: has an unfinished episode ({staged[0].name}); run `ortf recover {root}` "
                f"(or `--discard`) before deleting episodes"
            )
        deletion.delete_committed(Catalog.load(root), episode_ids)


def _check_types(*, success: object, review_flag: object) -> None:
    if not (success is UNCHANGED or success is None or isinstance(success, bool)):
        raise UsageError(f"success: expected true, false or null, got {success!r}")
    if not (review_flag is UNCHANGED or isinstance(review_flag, bool)):
        raise UsageError(f"review_flag: expected true or false, got {review_flag!r}")


def _check_text(**fields: object) -> None:
    for name, value in fields.items():
        if not (value is UNCHANGED or value is None or isinstance(value, str)):
            raise UsageError(f"{name}: expected text or null, got {value!r}")


def _text(value: str | None) -> str | None:
    return value if value is not None and value.strip() else None


def _outcome_word(success: bool | None) -> str:
    return {True: "success", False: "failure", None: "not evaluated"}[success]
