"""The ``episodes.accounting_files`` rule: an episode's per-stream counts (``format.accounting``)
against the files they describe.

The counts inside a row are checked with the row (``tables.check_episode``); these need the
files, so they are checked where each file is read anyway: the videos' frame counts where
the videos are probed, the native-rate tables' rows and the steps' sample indices where
those are scanned. A count that disagrees with its file is an error, as a count nobody
can trust is worse than none.
"""

from __future__ import annotations

from collections.abc import Mapping

from ortf_ros.dataset.validation.findings import Finding, finding
from ortf_ros.dataset.validation.tables import Episode
from ortf_ros.format import layout
from ortf_ros.format.accounting import (
    ACCOUNTING_COLUMN,
    FRAME_ROLES,
    ROLE_AUDIO,
    ROLE_POINT_CLOUD,
    ROLE_TF,
    StreamAccount,
)


def _mismatch(episode: Episode, account: StreamAccount, stage: str, stored: int | None, actual: int) -> list[Finding]:
    if stored is None or stored == actual:
        return []
    message = f"stream {account.stream}: {stage} is {stored}, but the files hold {actual}"
    return [finding("episodes.accounting_files", layout.EPISODES, message, episode=episode.id, field=ACCOUNTING_COLUMN)]


def check_frames_and_steps(episode: Episode, frame_counts: Mapping[str, int], native: frozenset[str]) -> list[Finding]:
    """Frames in each camera's video, as probed; steps taking a camera's frame or a stream's
    state or action (every step; native-rate streams are checked with their tables)."""
    found: list[Finding] = []
    for account in episode.record.accounting or ():
        if account.role in FRAME_ROLES and account.stream in frame_counts:
            found += _mismatch(
                episode, account, "frames_in_video", account.frames_in_video, frame_counts[account.stream]
            )
        if account.role not in (ROLE_TF, ROLE_AUDIO, ROLE_POINT_CLOUD) and account.stream not in native:
            found += _mismatch(episode, account, "steps_referencing", account.steps_referencing, episode.record.length)
    return found


def check_native_stream(episode: Episode, stream: str, samples: int, referencing: int | None) -> list[Finding]:
    """A native-rate stream's rows in its table, and the steps whose sample index points into it
    (None: the step table could not tell)."""
    account = next((a for a in episode.record.accounting or () if a.stream == stream), None)
    if account is None:
        return []
    found = _mismatch(episode, account, "native_samples", account.native_samples, samples)
    if referencing is not None:
        found += _mismatch(episode, account, "steps_referencing", account.steps_referencing, referencing)
    return found
