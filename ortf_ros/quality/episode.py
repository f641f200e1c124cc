"""Episode rules: too short, no outcome, messages lost or late while recording."""

from __future__ import annotations

from collections.abc import Sequence

from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.quality.runs import EpisodeFindings
from ortf_ros.quality.settings import DoctorSettings


def check_outcome(record: EpisodeRecord, report: EpisodeFindings, *, dataset_labelled: bool) -> None:
    """An episode left without an outcome in a dataset whose episodes are labelled: one the
    operator forgot. In a dataset where no episode is labelled (a fleet converted without
    labels) a finding per episode would bury the rest; ``unlabelled_note`` says it once."""
    if record.success is None and dataset_labelled:
        report.add("episode.unlabelled", None, None, None, "no outcome: success is null (neither success nor failure)")


def unlabelled_note(records: Sequence[EpisodeRecord]) -> str | None:
    """The one line for a dataset none of whose episodes has an outcome; None otherwise."""
    if not records or any(r.success is not None for r in records):
        return None
    return (
        f"no episode has an outcome label ({len(records)} unlabelled): "
        "label them with `ortf episodes set` or `ortf review` to find the unlabelled ones"
    )


def check_duration(
    first_s: float | None, last_s: float | None, settings: DoctorSettings, report: EpisodeFindings
) -> None:
    """The span of the step timestamps against ``min_duration_s``."""
    if first_s is None or last_s is None:
        return
    span = last_s - first_s
    if span < settings.min_duration_s:
        report.add(
            "episode.too_short",
            None,
            first_s,
            last_s,
            f"lasts {span:.3f} s, shorter than the minimum {settings.min_duration_s:g} s (--min-duration)",
        )


def check_drops(record: EpisodeRecord, report: EpisodeFindings) -> None:
    """``episode.drops``: per stream, the messages the episode's accounting (``format.accounting``)
    says were lost (undecodable, dropped, lost in transport) or arrived late. Nothing when the
    episode was not counted (another writer's dataset)."""
    for account in record.accounting or ():
        what = account.loss_phrases() + ([f"{account.late} late"] if account.late else [])
        if what:
            of = f" of {account.read} read" if account.read is not None else ""
            report.add("episode.drops", account.stream, None, None, f"{', '.join(what)}{of} (`ortf info --episode`)")
