"""What every recording of one ``ortf-bag2ortf`` run is converted with.

Picklable and small: a process pool's worker or a Ray task on another node receives it
with each recording, and there opens the recording and decides its mapping (a detected
one depends on the recording's topics), so the driver never reads ten thousand
recordings' summaries before the first conversion starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ortf_ros.dataset.config import WriterConfig
from ortf_ros.pipeline.mapping import EpisodeLabels, StepClock, TopicMapping, detect_mapping
from ortf_ros.pipeline.offline import converter_writer_config
from ortf_ros.pipeline.sources.bag import BagSource


@dataclass(frozen=True)
class ConversionSettings:
    """``mapping``: the mapping file's (None: detected from each recording), with
    ``rate_hz`` and the labels (``task`` ... ``operator_notes``; None: the mapping's) over
    it; ``urdf``: the URDF's text (None: the recording's ``/robot_description``);
    ``mesh_path``: where ``package://`` meshes are found."""

    mapping: TopicMapping | None = None
    rate_hz: float | None = None
    labels: EpisodeLabels = field(default_factory=lambda: EpisodeLabels(task=""))  # ("" and None: the mapping's)
    urdf: str | None = None
    mesh_path: tuple[Path, ...] = ()

    def mapping_for(self, source: BagSource) -> TopicMapping:
        """The mapping ``source`` is converted with: the file's, or the one detected from
        its topics, with the command line's step rate and labels over it."""
        mapping = self.mapping if self.mapping is not None else detect_mapping(source.topics())
        if self.rate_hz is not None:
            mapping = replace(mapping, step=StepClock(rate_hz=self.rate_hz))
        given, labels = self.labels, mapping.labels
        labels = replace(
            labels,
            task=given.task or labels.task,
            success=labels.success if given.success is None else given.success,
            failure_reason=given.failure_reason or labels.failure_reason,
            operator_notes=given.operator_notes or labels.operator_notes,
        )
        return replace(mapping, labels=labels)

    def writer_config(self, mapping: TopicMapping, conversions_at_once: int = 1) -> WriterConfig:
        """The writer settings of a conversion with ``mapping``, its video encoders' threads
        decided for ``conversions_at_once`` sharing the machine's cores (each conversion's
        writer would otherwise share every core among its own cameras alone)."""
        writer = converter_writer_config(mapping)
        if conversions_at_once <= 1:
            return writer
        colour = sum(camera.kind != "depth" for camera in mapping.cameras)  # (depth is FFV1, as it comes)
        return replace(writer, video=writer.video.with_threads(conversions_at_once * max(1, colour)))
