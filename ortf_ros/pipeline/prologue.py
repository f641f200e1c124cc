"""What must be known before the first step is written, accumulated from messages.

The manifest describes the robot (URDF), the coordinate frames (static TF, and which
frames move), each camera's geometry, calibration and frame rate, the joint names and
the action's shape. A bag gives these from its first seconds, read ahead
(``ReadAhead.messages``); a live recorder from a warm-up over its subscriptions. Both
feed one ``PrologueBuilder`` message by message and ask it when it has enough
(``complete``) and, when time runs out, what is still missing (``missing``).

It waits only for what can come: a topic that is not present (not in the bag, no
publisher live) is not waited for, nor the URDF when one was given on the command line.
Otherwise a bag without ``/robot_description`` was read to its end, every camera frame
decoded, before the conversion began. A camera with no ``camera_info_topic`` is not
waited for either: its calibration file (``camera_info_url``), read when the builder is
made, stands in, or its intrinsics are unknown. What a dataset can go without (the
URDF, a camera's CameraInfo) is ``missing`` but not ``missing(optional=False)``: a live
recorder stops waiting for it after a while.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ortf_ros.format.audio import AudioFormat
from ortf_ros.format.units import NS
from ortf_ros.pipeline import samples
from ortf_ros.pipeline.calibration import CalibrationFile, read_calibration
from ortf_ros.pipeline.fastpath import SampleDecoder
from ortf_ros.pipeline.mapping import CameraMapping, TopicMapping
from ortf_ros.pipeline.streams import audio
from ortf_ros.pipeline.streams.h264_camera import ParameterSets, first_image
from ortf_ros.pipeline.tf import TfBuffer

TF_WINDOW_NS = NS  # input read before the prologue is complete: dynamic TF names the moving frames
FPS_MIN_INTERVALS = 5  # frame intervals needed before their median gives a camera's fps
FPS_MAX_FRAMES = 64  # frame times kept per camera: plenty for a median, and the memory stays flat
NAME_LISTS_MAX = 64  # joint name lists remembered as seen; a publisher uses one or two


@dataclass
class Prologue:
    urdf: str | None = None
    tf: TfBuffer = field(default_factory=TfBuffer)
    dynamic_sources: dict[str, str] = field(default_factory=dict)  # child frame -> topic
    images: dict[str, samples.ImageSample] = field(default_factory=dict)  # camera name -> first frame
    camera_info: dict[str, samples.CameraInfoSample] = field(default_factory=dict)  # camera name -> first CameraInfo
    calibration_files: dict[str, CalibrationFile] = field(default_factory=dict)  # camera name -> its camera_info_url
    joint_state: samples.JointStateSample | None = None  # the first with positions
    joint_names: tuple[str, ...] = ()  # every joint the joint states named, in the order first named
    # the first usable action
    action: samples.JointStateSample | samples.VectorSample | samples.ControllerStateSample | None = None
    problems: dict[str, str] = field(default_factory=dict)  # joint state or action topic -> why a message was not
    rates: dict[str, float] = field(default_factory=dict)  # topic -> messages/s
    frame_times: dict[str, list[int]] = field(default_factory=dict)  # camera name -> its first frames' times (ns)
    audio: dict[str, AudioFormat] = field(default_factory=dict)  # microphone name -> its format (``pipeline.audio``)
    scans: dict[str, samples.LaserScanSample] = field(default_factory=dict)  # laser scan name -> its first scan
    clouds: dict[str, samples.PointCloudSample] = field(default_factory=dict)  # point cloud name -> its first cloud
    encoded: dict[str, str] = field(default_factory=dict)  # camera name -> codec it publishes (``h264_camera``)
    # H.264 camera name -> its latest SPS and PPS: the episodes' videos may need them (an encoder
    # that sends them once, at the start of its stream)
    parameter_sets: dict[str, ParameterSets] = field(default_factory=dict)


def prologue_topics(config: TopicMapping) -> set[str]:
    """The topics whose messages the prologue learns from."""
    wanted = {config.robot_description_topic, *config.tf_topics, *config.tf_static_topics}
    wanted |= {c.topic for c in config.cameras}
    wanted |= {c.camera_info_topic for c in config.cameras if c.camera_info_topic is not None}
    wanted |= {s.topic for s in config.laser_scans} | {p.topic for p in config.point_clouds}
    if config.joint_states is not None:
        wanted.add(config.joint_states.topic)
    if config.action.topic is not None:
        wanted.add(config.action.topic)
    return wanted | audio.prologue_topics(config)


class PrologueBuilder:
    """Accumulates a ``Prologue`` from the messages it is given, in receive order.

    ``present``: the topics that can deliver (a bag's recorded topics, a live graph's
    published ones). ``rates``: messages/s per topic when the source knows them (a bag's
    index); otherwise they are measured from the times of the messages accepted, every
    topic's (give it all of them). ``urdf_given``: a URDF came from elsewhere, do not
    wait for one. ``window_ns``: input time the builder wants to have seen before it
    calls itself complete (dynamic TF takes that long to name every moving frame).
    """

    def __init__(
        self,
        config: TopicMapping,
        decoder: SampleDecoder,
        present: Collection[str],
        *,
        rates: Mapping[str, float] | None = None,
        urdf_given: bool = False,
        window_ns: int = TF_WINDOW_NS,
    ) -> None:
        self.config = config
        self.decoder = decoder
        self.present = frozenset(present)
        self.wanted = frozenset(prologue_topics(config) & self.present)
        self.urdf_given = urdf_given
        self.window_ns = window_ns
        files = {c.name: read_calibration(c.camera_info_url) for c in config.cameras if c.camera_info_url}
        self.prologue = Prologue(rates=dict(rates) if rates is not None else {}, calibration_files=files)
        self._measure = rates is None
        self._cameras = {c.topic: c for c in config.cameras}
        self._infos = {c.camera_info_topic: c for c in config.cameras if c.camera_info_topic is not None}
        self._range_sensors = {s.topic: s.name for s in config.laser_scans}
        self._range_sensors |= {p.topic: p.name for p in config.point_clouds}
        self._audio_topics = audio.prologue_topics(config)
        self._first_ns: int | None = None
        self._last_ns: int | None = None
        self._times: dict[str, tuple[int, int, int]] = {}  # topic -> (count, first, last receive ns)
        self._name_lists: set[tuple[str, ...]] = set()  # the joint states' lists of names seen

    def accept(self, raw: samples.RawMessage) -> None:
        """One message; only the prologue's topics are decoded, every topic's time is counted."""
        if self._first_ns is None:
            self._first_ns = raw.receive_ns
        self._last_ns = raw.receive_ns
        if self._measure:
            count, first, _ = self._times.get(raw.topic, (0, raw.receive_ns, raw.receive_ns))
            self._times[raw.topic] = (count + 1, first, raw.receive_ns)
        if raw.topic in self.wanted:
            for sample in self.decoder.samples(raw):
                self._learn(raw.topic, sample)

    def _learn(self, topic: str, sample: samples.Sample) -> None:
        prologue, config = self.prologue, self.config
        if isinstance(sample, samples.RobotDescriptionSample) and topic == config.robot_description_topic:
            prologue.urdf = prologue.urdf or sample.urdf
        elif isinstance(sample, samples.TransformSample):
            if prologue.tf.add(sample) and not sample.static:
                prologue.dynamic_sources.setdefault(sample.child, topic)
        elif isinstance(sample, samples.ImageSample) and topic in self._cameras:
            camera = self._cameras[topic]
            prologue.images.setdefault(camera.name, sample)
            self._frame_time(camera, sample.stamps)
        elif isinstance(sample, samples.EncodedFrameSample) and topic in self._cameras:
            self._learn_encoded(self._cameras[topic], sample)
        elif isinstance(sample, samples.CameraInfoSample) and topic in self._infos:
            prologue.camera_info.setdefault(self._infos[topic].name, sample)
        elif isinstance(sample, (samples.AudioChunkSample, samples.AudioInfoSample)):
            audio.learn_format(prologue.audio, config, topic, sample)
        elif isinstance(sample, samples.LaserScanSample) and topic in self._range_sensors:
            prologue.scans.setdefault(self._range_sensors[topic], sample)
        elif isinstance(sample, samples.PointCloudSample) and topic in self._range_sensors:
            prologue.clouds.setdefault(self._range_sensors[topic], sample)
        elif isinstance(sample, samples.BadMessage) and topic in self._audio_topics:
            self._problem(topic, sample.reason)  # (said where the microphone's format stays unknown)
        else:
            if config.joint_states is not None and topic == config.joint_states.topic:
                self._learn_joint_state(topic, sample)
            if topic == config.action.topic:  # (a controller state may be both)
                self._learn_action(topic, sample)

    def _frame_time(self, camera: CameraMapping, stamps: samples.Stamps) -> None:
        times = self.prologue.frame_times.setdefault(camera.name, [])
        if len(times) < FPS_MAX_FRAMES:
            times.append(samples.stream_time(stamps, camera.time))

    def _learn_encoded(self, camera: CameraMapping, sample: samples.EncodedFrameSample) -> None:
        """A published H.264 frame: its time; the first keyframe, decoded, is the camera's first frame."""
        self._frame_time(camera, sample.stamps)
        facts = sample.facts
        if facts.sps is not None and facts.parameter_sets is not None:
            self.prologue.parameter_sets[camera.name] = ParameterSets(facts.sps, facts.parameter_sets)
        known = self.prologue.parameter_sets.get(camera.name)
        if camera.name in self.prologue.images or not facts.idr or known is None:
            return
        if not facts.keyframe:  # (an IDR frame after parameter sets sent on their own)
            sample = replace(sample, data=known.annex_b + sample.data)
        try:
            self.prologue.images[camera.name] = first_image(sample)
        except ValueError as exc:
            self._problem(camera.topic, str(exc))
            return
        self.prologue.encoded[camera.name] = sample.codec

    def _learn_joint_state(self, topic: str, sample: samples.Sample) -> None:
        state = sample.state if isinstance(sample, samples.ControllerStateSample) else sample
        if isinstance(state, samples.JointStateSample) and state.position.size and state.names not in self._name_lists:
            # (messages may name some joints each: two publishers, an arm's and a gripper's; a
            # message without positions, effort-only say, names no joint the steps can hold)
            if len(self._name_lists) >= NAME_LISTS_MAX:
                self._name_lists.clear()  # (only a shortcut: a list seen again adds nothing)
            self._name_lists.add(state.names)
            self.prologue.joint_names = tuple(dict.fromkeys(self.prologue.joint_names + state.names))
        if self.prologue.joint_state is not None:
            return
        if isinstance(state, samples.JointStateSample) and state.position.size:
            self.prologue.joint_state = state
        elif isinstance(state, samples.JointStateSample):
            self._problem(topic, f"a JointState lists {len(state.names)} joint names but no positions")
        elif isinstance(state, samples.BadMessage):
            self._problem(topic, state.reason)

    def _learn_action(self, topic: str, sample: samples.Sample) -> None:
        if self.prologue.action is not None:
            return
        if isinstance(sample, samples.ControllerStateSample):
            if sample.reference is not None:
                self.prologue.action = sample
            else:
                self._problem(topic, "the controller state holds no reference positions (reference and desired empty)")
        elif isinstance(sample, samples.JointStateSample) and not sample.position.size:
            self._problem(topic, f"a JointState command lists {len(sample.names)} joint names but no positions")
        elif isinstance(sample, (samples.JointStateSample, samples.VectorSample)):
            self.prologue.action = sample
        elif isinstance(sample, samples.BadMessage):
            self._problem(topic, sample.reason)

    def _problem(self, topic: str, problem: str) -> None:
        self.prologue.problems.setdefault(topic, problem)

    def missing(self, *, optional: bool = True) -> list[str]:
        """What a complete prologue still lacks, one phrase each ("no frame yet on /wrist/image_raw");
        without ``optional``, only what a dataset cannot go without (``optional_topics_lacking``
        left out)."""
        prologue, config = self.prologue, self.config
        lacking = []
        for topic in self.optional_topics_lacking() if optional else ():
            what = "URDF" if topic == config.robot_description_topic else "camera_info"
            lacking.append(f"no {what} yet on {topic}")
        for topic, camera in self._cameras.items():
            if topic in self.present and camera.name not in prologue.images:
                lacking.append(f"no frame yet on {topic}")
        for scan in config.laser_scans:
            if scan.topic in self.present and scan.name not in prologue.scans:
                lacking.append(f"no laser scan yet on {scan.topic}")
        for cloud in config.point_clouds:
            if cloud.topic in self.present and cloud.name not in prologue.clouds:
                lacking.append(f"no point cloud yet on {cloud.topic}")
        joints = config.joint_states
        if joints is not None and joints.topic in self.present and prologue.joint_state is None:
            lacking.append(f"no joint state yet on {joints.topic}")
        action = config.action.topic
        if action is not None and action in self.present and prologue.action is None:
            lacking.append(f"no action yet on {action}")
        return lacking + audio.lacking(config, prologue.audio, self.present)

    def optional_topics_lacking(self) -> list[str]:
        """The present topics of what a dataset can go without and has not come yet: the
        URDF (unless given), then each camera_info (the intrinsics fall back to the
        camera's calibration file, else are declared unknown)."""
        prologue, config = self.prologue, self.config
        topics = []
        if not self.urdf_given and prologue.urdf is None and config.robot_description_topic in self.present:
            topics.append(config.robot_description_topic)
        topics += [t for t, c in self._infos.items() if t in self.present and c.name not in prologue.camera_info]
        return topics

    def cameras_without_a_rate(self) -> list[str]:
        """The present cameras with a frame but too few yet for ``camera_fps``'s median
        interval (the live warm-up waits for them; a bag's rate is measured over it all)."""
        prologue = self.prologue
        return [
            topic
            for topic, camera in self._cameras.items()
            if topic in self.present
            and camera.name in prologue.images
            and len(prologue.frame_times.get(camera.name, ())) <= FPS_MIN_INTERVALS
        ]

    def seen_ns(self) -> int:
        """Input time between the first and the last message accepted."""
        return 0 if self._first_ns is None or self._last_ns is None else self._last_ns - self._first_ns

    def complete(self) -> bool:
        return not self.missing() and self.seen_ns() > self.window_ns

    def result(self) -> Prologue:
        """The prologue, with the rates measured over the messages accepted when none were given."""
        if self._measure:
            self.prologue.rates = {
                topic: (count - 1) * NS / (last - first)
                for topic, (count, first, last) in self._times.items()
                if count > 1 and last > first
            }
        return self.prologue


def camera_fps(prologue: Prologue, name: str, topic: str) -> float:
    """The camera's frame rate, from the median interval between its first frames (on
    the camera's clock): a camera that paused during the recording published fewer
    messages per second of it than frames per second. The topic's rate over the whole
    recording only when the prologue saw too few frames to tell."""
    intervals = np.diff(np.asarray(prologue.frame_times.get(name, []), dtype=np.int64))
    intervals = intervals[intervals > 0]
    rate = NS / float(np.median(intervals)) if len(intervals) >= FPS_MIN_INTERVALS else prologue.rates.get(topic, 0.0)
    return float(max(1, round(rate)))
