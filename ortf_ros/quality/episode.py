"""Episode rules: too short, no outcome, and (to come) drops recorded while recording."""

from __future__ import annotations

from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.quality.runs import EpisodeFindings
from ortf_ros.quality.settings import DoctorSettings


def check_outcome(record: EpisodeRecord, report: EpisodeFindings) -> None:
    if record.success is None:
        report.add("episode.unlabelled", None, None, None, "no outcome: success is null (neither success nor failure)")


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
    """``episode.drops``: messages dropped or late per stream, from the per-stream accounting
    of issue 25 §1 once the episode carries it. Nothing to read yet, so nothing is found."""
    del record, report
