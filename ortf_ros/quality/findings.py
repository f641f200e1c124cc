"""What ``ortf doctor`` reports: findings with a stable rule id, a severity, the episode, the
stream and the time range they are about.

As with the validator's catalogue (``ortf_ros.dataset.validation.findings``), every rule has
one severity fixed here, so a CI script can count a rule id and it always weighs the same,
and this table is the one description of what the doctor looks for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ortf_ros.dataset.validation.findings import Severity

__all__ = ["RULES", "SEVERITY_RANK", "QualityFinding", "Severity", "quality_finding"]

SEVERITY_RANK: Mapping[Severity, int] = {"info": 0, "warning": 1, "error": 2}

RULES: Mapping[str, tuple[Severity, str]] = {
    # streams and time (steps, native-rate streams, camera frame times)
    "stream.gap": ("warning", "no stream is silent for more than --gap-periods of its periods inside an episode"),
    "time.non_monotonic": ("error", "timestamps increase"),
    "time.duplicate": ("error", "no two consecutive samples or frames have the same timestamp"),
    "time.rate_mismatch": ("error", "steps and native streams come at their declared rate (within --rate-tolerance)"),
    "steps.alignment": ("warning", "the samples and frames a step uses are within their stream's sync tolerance"),
    # cameras
    "camera.unreadable": ("error", "each camera's video is there and decodes to its end"),
    "camera.frozen": ("warning", "a camera does not repeat the same picture for --frozen-frames frames or more"),
    "camera.fps_mismatch": (
        "error",
        "a camera's frame interval agrees with its declared fps (within --rate-tolerance)",
    ),
    # robot
    "robot.position_limit": ("error", "joint positions are within the URDF's limits"),
    "robot.velocity_limit": ("error", "joint speed between consecutive samples is within the URDF's velocity limit"),
    # values
    "value.non_finite": ("error", "numeric columns hold no NaN or infinity"),
    # episodes
    "episode.too_short": ("warning", "episodes last at least --min-duration seconds"),
    "episode.unlabelled": ("warning", "episodes have an outcome (success or failure)"),
    "episode.drops": ("warning", "no messages were dropped or late while recording (per-stream accounting)"),
    # more of a rule than --max-per-rule says
    "doctor.truncated": (
        "info",
        "findings of one rule, stream and episode beyond --max-per-rule are counted, not listed",
    ),
}


@dataclass(frozen=True)
class QualityFinding:
    """One thing found: ``start_s``/``end_s`` are on the episode's clock (the steps'
    ``timestamp``), None when the finding is not about a moment (an unlabelled episode)."""

    rule: str
    severity: Severity
    episode_id: str
    stream: str | None
    start_s: float | None
    end_s: float | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """One grep-able line: severity, episode, stream, time range, what, and the rule id."""
        where = [f"episode={self.episode_id}"]
        if self.stream is not None:
            where.append(f"stream={self.stream}")
        if self.start_s is not None:
            end = self.end_s if self.end_s is not None else self.start_s
            where.append(f"t={self.start_s:.3f}..{end:.3f}s")
        return f"{self.severity.upper()} {' '.join(where)}: {self.message} [{self.rule}]"


def quality_finding(
    rule: str,
    episode_id: str,
    stream: str | None,
    start_s: float | None,
    end_s: float | None,
    message: str,
) -> QualityFinding:
    """A finding of ``rule`` with the rule's catalogued severity."""
    return QualityFinding(rule, RULES[rule][0], episode_id, stream, start_s, end_s, message)
