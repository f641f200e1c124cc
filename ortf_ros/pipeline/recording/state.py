"""What the live recorder's jobs share: its settings, the recorder's state, the open
dataset and session, the episode being recorded and what the operator said of it, the
warnings. One object, held by the warm-up, the commands and the health alike, so that
none needs another."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from datasketches import kll_floats_sketch

from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format.metadata import EpisodeRecord
from ortf_ros.pipeline.assembly.counts import TopicCounts
from ortf_ros.pipeline.describe import Description
from ortf_ros.pipeline.flow import LIVE, Flow
from ortf_ros.pipeline.mapping import TopicMapping
from ortf_ros.pipeline.session import EpisodeSession
from ortf_ros.pipeline.sources.live import LiveSource

State = Literal["waiting", "ready", "recording", "failed", "closed"]
"""waiting: for the warm-up's messages; ready: the dataset is open, no episode; recording:
an episode is open; failed: the pipeline stopped on an error (``error`` says which);
closed: shut down."""

WARNINGS_KEPT = 20  # the latest warnings, in the status (all of them go to the log)
LATENCY_K = 200  # KLL sketch size: quantiles within about 1.3 %, a few kB


@dataclass(frozen=True)
class RecorderSettings:
    output: Path
    mapping: TopicMapping
    writer: WriterConfig
    flow: Flow = LIVE
    # Start waits at most this long (from the first message) for a URDF on the mapped
    # topic and for the cameras' camera_info; then the dataset is opened without them
    # (warnings; the intrinsics from the camera_info_url file, else unknown). Other missing
    # topics keep start refusing: a dataset without its cameras or joint state is no dataset.
    warmup_s: float = 10.0
    name: str = "ortf_recorder dataset"
    urdf: str | None = None  # a URDF given by the user (over /robot_description)
    urdf_source: str = "the urdf parameter"


@dataclass
class Labels:
    """What the operator said of the episode being recorded (or of the next one)."""

    success: bool | None = None
    failure_reason: str | None = None
    operator_notes: str | None = None


@dataclass(frozen=True)
class Reply:
    success: bool
    message: str


@dataclass(frozen=True)
class Counters:
    """A live source's counters per topic, at one moment."""

    received: Counter[str]
    dropped: Counter[str]
    lost: Counter[str]

    @classmethod
    def of(cls, source: LiveSource) -> Counters:
        return cls(Counter(source.received()), Counter(source.dropped()), Counter(source.lost_counts()))


@dataclass
class EpisodeHealth:
    """Numbers of the episode being recorded, from its start."""

    episode_id: str
    started_ns: int
    started_wall: float
    counters: Counters
    latency: kll_floats_sketch = field(default_factory=lambda: kll_floats_sketch(LATENCY_K))


@dataclass
class RecorderState:
    """The recorder's shared state; ``log(level, text)`` its log."""

    settings: RecorderSettings
    config: TopicMapping  # the mapping (its task changed by a command before the dataset opens)
    log: Callable[[str, str], None]
    state: State = "waiting"
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    default_labels: Labels = field(default_factory=Labels)  # what each episode's labels start as
    labels: Labels = field(default_factory=Labels)
    counts: TopicCounts = field(default_factory=TopicCounts)
    records: list[EpisodeRecord] = field(default_factory=list)
    writer: DatasetWriter | None = None
    session: EpisodeSession | None = None
    description: Description | None = None
    episode: EpisodeHealth | None = None
    status_stale: bool = False  # a command ran: the status is rebuilt at the end of this tick

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)
            del self.warnings[:-WARNINGS_KEPT]
            self.log("warn", text)

    def close(self) -> None:
        """Close the dataset (an episode still open stays staged for `ortf recover`)."""
        writer, self.writer, self.session = self.writer, None, None
        if writer is not None:
            writer.close()
