"""The live recorder's warm-up: messages go to the ``PrologueBuilder`` until it has every
camera's first frame, the joint state, the action, the URDF and the camera_info, and
enough of each camera's frames to tell its rate (these three it stops waiting for after
``warmup_s``; the URDF with a warning); then the dataset is opened,
with its session and its cameras' encoder processes. Its TF tree, static transforms
included, seeds the session's, since those arrive only once."""

from __future__ import annotations

from collections.abc import Callable

from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format.units import NS
from ortf_ros.io.encoder_pool import Prestart
from ortf_ros.pipeline.describe import describe
from ortf_ros.pipeline.fastpath import SampleDecoder
from ortf_ros.pipeline.prologue import PrologueBuilder
from ortf_ros.pipeline.recording.state import RecorderState
from ortf_ros.pipeline.samples import RawMessage
from ortf_ros.pipeline.session import EpisodeSession
from ortf_ros.pipeline.sources.live import LiveSource

COLLECTION = {"operator": "human_teleop", "source": "ortf_recorder"}
DISCOVERY_GRACE_NS = 2 * NS  # from the first message: time for the graph to show every publisher
TF_HISTORY_NS = 2 * NS  # between episodes, dynamic TF older than this is forgotten (memory stays flat)


class Warmup:
    """The prologue accumulated from messages (``accept``), and the dataset opened from it
    once it is complete enough (``open_when_ready``). ``published(topic)``: whether the
    graph has a publisher of the topic."""

    def __init__(
        self,
        shared: RecorderState,
        source: LiveSource,
        decoder: SampleDecoder,
        published: Callable[[str], bool],
    ) -> None:
        self.shared = shared
        self.source = source
        self.decoder = decoder
        # Whether a topic has a publisher in the graph. A URDF topic that nothing
        # publishes is not waited for beyond DISCOVERY_GRACE_NS.
        self.published = published
        config = shared.config
        self.builder = PrologueBuilder(
            config,
            decoder,
            config.topics(),
            urdf_given=shared.settings.urdf is not None,
        )
        self._first_ns: int | None = None
        self._encoders: Prestart | None = None  # encoder processes starting before the first episode

    def accept(self, raw: RawMessage) -> None:
        """A message before the dataset is open: into the prologue."""
        if self._first_ns is None:
            self._first_ns = raw.receive_ns
        self.builder.accept(raw)
        if raw.topic in self.shared.config.tf_topics:
            self.builder.prologue.tf.prune_history(TF_HISTORY_NS)

    def missing(self) -> list[str]:
        """What the recorder still waits for, while its state is waiting."""
        if self.shared.session is not None:
            return ["the video encoders are starting"]
        slow = [f"too few frames yet on {topic} to tell its rate" for topic in self.builder.cameras_without_a_rate()]
        return self.builder.missing() + slow

    def open_when_ready(self) -> None:
        """Open the dataset once the warm-up has what the manifest needs. What it can go
        without (the URDF, a camera's camera_info) is waited for ``warmup_s`` at most, and
        not at all once the graph has had time to show that nothing publishes it (a
        recording made without one is common); ``describe`` then says what stands in."""
        if self.builder.missing(optional=False):
            return
        settings = self.shared.settings
        waited_ns = 0 if self._first_ns is None else self.source.clock() - self._first_ns
        lacking = self.builder.optional_topics_lacking()
        unpublished = {t for t in lacking if waited_ns > DISCOVERY_GRACE_NS and not self.published(t)}
        if lacking and len(unpublished) < len(lacking) and waited_ns <= settings.warmup_s * NS:
            return
        if self.builder.cameras_without_a_rate() and waited_ns <= settings.warmup_s * NS:
            return  # (a camera's fps is its first frames' median interval: a loaded publisher's come late)
        if self.builder.seen_ns() <= self.builder.window_ns:
            return
        topic = self.shared.config.robot_description_topic
        if topic in lacking:
            why = "nothing publishes it" if topic in unpublished else f"none came within {settings.warmup_s:g} s"
            self.shared.warn(
                f"no URDF on {topic} ({why}): the dataset has no robot description, "
                "joints are named from the joint states"
            )
        self._open()

    def _open(self) -> None:
        shared, s = self.shared, self.shared.settings
        prologue = self.builder.result()
        description = describe(
            shared.config, prologue, name=s.name, collection=COLLECTION, urdf=s.urdf, urdf_source=s.urdf_source
        )
        shared.description = description
        for warning in description.warnings:
            shared.warn(warning)
        writer = shared.writer = DatasetWriter(s.output, description.manifest, config=s.writer, urdf=description.urdf)
        writer.open()
        self._encoders = writer.start_encoders()  # (their start-up would hold up the first episode's frames)
        shared.session = EpisodeSession(
            writer,
            shared.config,
            description.steps,
            self.decoder,
            s.flow,
            tf=prologue.tf,
            counts=shared.counts,
            parameter_sets=prologue.parameter_sets,
        )
        manifest = description.manifest
        shared.log(
            "info",
            f"dataset {s.output} open ({writer.episode_count} episode(s) before), starting the video encoders: "
            f"{len(manifest.cameras)} camera(s), {len(description.steps.joints)} joints, "
            f"robot {manifest.robot.name}; {description.tolerance.line()}",
        )

    def encoders_ready(self) -> bool:
        """Whether the encoder processes started when the dataset opened serve yet (the
        dataset is ready for a first episode only then; meanwhile input is taken as ever)."""
        if self._encoders is not None and self._encoders.ready():
            self._encoders = None
            shared = self.shared
            shared.state = "ready" if shared.episode is None else shared.state
            shared.log("info", "video encoders ready")
        return self._encoders is None
