"""The messages the player publishes, built from a dataset: one code path for the node
and ``ortf export mcap``.

A ``Playlist`` turns the episodes to play into ``Outgoing`` items in time order: each
a rosbags message object with its topic, type and time on the playback timeline
(``timeline``), stamped with that time. Per episode:

- opening: the task instruction (``std_msgs/String``) and ``true`` on the episode
  topic (``std_msgs/Bool``, what ``ortf-bag2ortf``'s boundary splitting reads), just
  before the first message; the first episode of a play also brings the latched state
  first: ``/robot_description`` (the URDF) and ``/tf_static`` (fixed frames and sensor
  extrinsics);
- at each step's time: ``JointState`` from the state columns (arm, then gripper;
  velocity and effort NaN for joints the state has none of), the end-effector pose on
  ``/tf``, a force-torque sensor's ``WrenchStamped`` when the dataset has no native
  table for it, the action, and per camera ``CameraInfo`` and the frame the step saw
  (``rgb8``, ``16UC1`` depth, or JPEG ``CompressedImage``);
- at each sample's time: ``WrenchStamped`` from native-rate force-torque tables;
- at each audio chunk's time: ``AudioStamped`` of its samples (``playback.audio``);
- closing: ``false`` on the episode topic, just after the last message.

Items come from generators that read the step and native tables a row group at a
time and decode frames as they are reached, so memory does not grow with the episode;
the node bounds how far ahead it lets them run.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ortf_ros.dataset.reader import Dataset, Episode, column_array
from ortf_ros.format import layout
from ortf_ros.format.text import read_text
from ortf_ros.io.jpeg import JpegEncoder
from ortf_ros.pipeline.extract import POSE_NAMES, TWIST_NAMES
from ortf_ros.pipeline.streams.audio_definitions import AUDIO_STAMPED
from ortf_ros.pipeline.tf import wxyz_to_xyzw
from ortf_ros.playback.audio import audio_chunks
from ortf_ros.playback.frames import StepFrames
from ortf_ros.playback.lidar import cloud_items, scan_items
from ortf_ros.playback.publication import ActionOut, AudioOut, CameraOut, Publication, step_columns
from ortf_ros.playback.rosmsg import RosMessages
from ortf_ros.playback.settings import MessageSettings, StreamKind
from ortf_ros.playback.timeline import GAP_NS, EpisodeClock, original_start_ns

START_SLACK_S = 1e-6
"""How far before ``start_offset_s`` a step or sample may lie and still be played: the
nanosecond rounding of a step grid, never a real sample's distance."""

Warn = Callable[[str], None]


@dataclass
class Outgoing:
    """One message to publish; its header stamps are ``time_ns`` until restamped."""

    time_ns: int  # on the playback timeline: `sim` stamps and MCAP log times
    kind: StreamKind
    topic: str
    msgtype: str
    message: Any
    episode_id: str | None = None
    episode_ns: int = 0  # time since the episode's time 0
    step: int | None = None  # the episode's step this message belongs to (0-based)
    camera: str | None = None  # the camera whose decoded frame it carries


class Playlist:
    """The episodes to play, in order, and what is published for them."""

    def __init__(self, dataset: Dataset, episode_ids: Sequence[str], settings: MessageSettings, warn: Warn) -> None:
        self.dataset = dataset
        self.episode_ids = tuple(episode_ids)
        self.warn = warn
        self.publication = Publication.of(dataset.manifest, settings)
        self.ros = RosMessages()
        self.columns = step_columns(self.publication, dataset.manifest)
        self._jpeg: dict[str, JpegEncoder] = {}

    def play(self, *, loop: bool = False, start_offset_s: float = 0.0) -> Iterator[EpisodeMessages]:
        """Each episode's messages in turn (forever with ``loop``); ``start_offset_s`` skips
        the first seconds of the first one."""
        previous: EpisodeMessages | None = None
        for position in itertools.count():
            if not self.episode_ids or (position >= len(self.episode_ids) and not loop):
                return
            episode = self.dataset.episode(self.episode_ids[position % len(self.episode_ids)])
            start = original_start_ns(episode)
            if previous is not None:
                start = max(start, previous.end_ns + GAP_NS)
            current = EpisodeMessages(self, episode, start, position, start_offset_s if position == 0 else 0.0)
            try:
                yield current
            finally:
                current.close()
            previous = current

    def latched(self, time_ns: int) -> list[Outgoing]:
        """``/robot_description`` and ``/tf_static``: published once, transient-local."""
        pub, ros = self.publication, self.ros
        items = []
        urdf = self.dataset.root / (self.dataset.manifest.robot.urdf_path or layout.URDF)
        if pub.enabled("robot_description") and urdf.is_file():
            items.append(self.item(time_ns, "robot_description", "std_msgs/msg/String", ros.string(read_text(urdf))))
        if pub.enabled("tf_static") and pub.static_transforms:
            transforms = [
                ros.transform(time_ns, t.parent, t.child, t.translation, wxyz_to_xyzw(t.rotation))
                for t in pub.static_transforms
            ]
            items.append(self.item(time_ns, "tf_static", "tf2_msgs/msg/TFMessage", ros.tf(transforms)))
        return items

    def item(self, time_ns: int, kind: StreamKind, msgtype: str, message: Any, topic: str | None = None) -> Outgoing:
        return Outgoing(time_ns, kind, topic or self.publication.settings.topic(kind), msgtype, message)

    def jpeg(self, camera: str, pixels: np.ndarray) -> bytes:
        encoder = self._jpeg.get(camera)
        if encoder is None:
            encoder = self._jpeg[camera] = JpegEncoder(pixels.shape[1], pixels.shape[0])
        return encoder.encode(pixels)


class EpisodeMessages:
    """One episode's items: ``opening()``, then ``body()`` (lazily), then ``closing()``."""

    def __init__(
        self, playlist: Playlist, episode: Episode, start_ns: int, position: int, start_offset_s: float
    ) -> None:
        self.playlist = playlist
        self.episode = episode
        self.position = position  # in the play, loops counted
        # (A step grid is whole nanoseconds: 6 steps at 30 Hz are 0.199999998 s, which
        # someone who asks for 0.2 s means.)
        self.plays_from_s = start_offset_s - START_SLACK_S
        self.frames = StepFrames(episode, playlist.warn)
        batches = episode.step_batches(playlist.columns)
        first = next(batches)
        rate = episode.dataset.manifest.action_space.control_frequency_hz
        self.clock = EpisodeClock(start_ns, float(first.column("timestamp")[0].as_py()), rate)
        steps = self._steps(itertools.chain([first], batches))
        pub = playlist.publication
        natives = [self._native_wrench(w.name, w.topic, w.frame_id) for w in pub.wrenches if w.native]
        natives = natives if pub.enabled("wrench") else []  # (not published: streams without wrench)
        natives += [self._audio(microphone) for microphone in pub.audio if pub.enabled("audio")]
        natives += self._lidar_items()
        self._merged = heapq.merge(steps, *natives, key=lambda item: item.time_ns)
        self._next: Outgoing | None = next(self._merged, None)
        self.end_ns = self._next.time_ns if self._next is not None else start_ns

    @property
    def episode_id(self) -> str:
        return self.episode.episode_id

    def items(self) -> Iterator[Outgoing]:
        yield from self.opening()
        yield from self.body()
        yield from self.closing()

    def opening(self) -> list[Outgoing]:
        """Latched state (first episode of the play), task and begin, just before the first message."""
        pl, ros = self.playlist, self.playlist.ros
        first = self.end_ns
        items = pl.latched(first - 3) if self.position == 0 else []
        if pl.publication.enabled("task"):
            items.append(pl.item(first - 2, "task", "std_msgs/msg/String", ros.string(self.episode.task.instruction)))
        if pl.publication.enabled("episode"):
            items.append(pl.item(first - 1, "episode", "std_msgs/msg/Bool", ros.boolean(True)))
        return [self._own(item) for item in items]

    def body(self) -> Iterator[Outgoing]:
        while self._next is not None:
            item, self._next = self._next, None
            self.end_ns = item.time_ns
            yield item
            self._next = next(self._merged, None)

    def closing(self) -> list[Outgoing]:
        pl = self.playlist
        if not pl.publication.enabled("episode"):
            return []
        return [self._own(pl.item(self.end_ns + 1, "episode", "std_msgs/msg/Bool", pl.ros.boolean(False)))]

    def close(self) -> None:
        self.frames.close()

    def _own(self, item: Outgoing, step: int | None = None) -> Outgoing:
        item.episode_id, item.episode_ns, item.step = self.episode_id, item.time_ns - self.clock.start_ns, step
        return item

    # -- per step

    def _steps(self, batches: Iterator[pa.RecordBatch]) -> Iterator[Outgoing]:
        step = 0
        for batch in batches:
            columns = {name: column_array(batch.column(name)) for name in self.playlist.columns}
            for row in range(batch.num_rows):
                timestamp = float(columns["timestamp"][row])
                if timestamp >= self.plays_from_s:
                    values = {name: array[row] for name, array in columns.items()}
                    yield from self._step_items(self.clock.step_ns(timestamp), step, values)
                step += 1

    def _step_items(self, t: int, step: int, values: dict[str, Any]) -> Iterator[Outgoing]:
        pub, ros = self.playlist.publication, self.playlist.ros
        state = self.episode.dataset.manifest.observation_space.state

        def out(kind: StreamKind, msgtype: str, message: Any, topic: str | None = None) -> Outgoing:
            return self._own(self.playlist.item(t, kind, msgtype, message, topic), step)

        def vector(component: str) -> np.ndarray:
            return np.asarray(values[layout.state_column(component)], dtype=np.float64)

        if pub.enabled("joint_states") and pub.joints:
            positions = np.concatenate([vector(c) for c in ("joint_positions", "gripper_position") if c in state])
            unknown = np.full(len(pub.gripper_joints), np.nan)
            rates = [np.concatenate([vector(c), unknown]) if c in state else np.zeros(0) for c in _RATES]
            yield out("joint_states", "sensor_msgs/msg/JointState", ros.joint_state(t, pub.joints, positions, *rates))
        if pub.enabled("tf") and pub.ee_frames is not None:
            rotation = wxyz_to_xyzw(vector("ee_orientation"))
            transform = ros.transform(t, *pub.ee_frames, vector("ee_position"), rotation)
            yield out("tf", "tf2_msgs/msg/TFMessage", ros.tf([transform]))
        for w in pub.wrenches if pub.enabled("wrench") else ():
            if not w.native:
                force, torque = vector(w.name).reshape(2, 3)
                wrench = ros.wrench(t, w.frame_id, force, torque)
                yield out("wrench", "geometry_msgs/msg/WrenchStamped", wrench, w.topic)
        if pub.enabled("action") and pub.action is not None:
            action = pub.action
            yield out("action", action.msgtype, _action_message(ros, t, action, values["action"]), action.topic)
        for camera in pub.cameras:
            yield from self._camera_items(camera, t, step, int(values[layout.image_column(camera.key)]), out)

    def _camera_items(
        self, camera: CameraOut, t: int, step: int, index: int, out: Callable[..., Outgoing]
    ) -> Iterator[Outgoing]:
        pub, ros = self.playlist.publication, self.playlist.ros
        sensor = camera.sensor
        if pub.enabled("camera_info") and camera.info_topic is not None:
            assert sensor.resolution is not None and sensor.intrinsics is not None
            res = sensor.resolution
            info = ros.camera_info(t, camera.frame_id, res.width, res.height, sensor.intrinsics, sensor.distortion)
            yield out("camera_info", "sensor_msgs/msg/CameraInfo", info, camera.info_topic)
        if not pub.enabled(camera.kind):
            return
        pixels = self.frames.frame(camera.key, index, step)
        if pixels is None:
            return
        if camera.msgtype == "sensor_msgs/msg/CompressedImage":
            message = ros.compressed_image(t, camera.frame_id, self.playlist.jpeg(camera.key, pixels))
        else:
            message = ros.image(t, camera.frame_id, pixels)
        item = out(camera.kind, camera.msgtype, message, camera.topic)
        item.camera = camera.key
        yield item

    # -- native-rate samples

    def _lidar_items(self) -> list[Iterator[Outgoing]]:
        """Each lidar's scans and each point cloud stream's clouds (``playback.lidar``)."""
        pub, ros, at = self.playlist.publication, self.playlist.ros, self.clock.sample_ns

        def emit(kind: StreamKind) -> Callable[[int, str, str, Any], Outgoing]:
            return lambda t, topic, msgtype, message: self._own(Outgoing(t, kind, topic, msgtype, message))

        found = []
        if pub.enabled("laser_scan"):
            found += [scan_items(self.episode, s, ros, at, self.plays_from_s, emit("laser_scan")) for s in pub.scans]
        if pub.enabled("point_cloud"):
            found += [cloud_items(self.episode, c, ros, at, self.plays_from_s, emit("point_cloud")) for c in pub.clouds]
        return found

    def _native_wrench(self, name: str, topic: str, frame_id: str) -> Iterator[Outgoing]:
        ros = self.playlist.ros
        for batch in self.episode.stream_batches(name, ["timestamp", "force", "torque"]):
            timestamps = column_array(batch.column("timestamp"))
            forces = column_array(batch.column("force")).astype(np.float64)
            torques = column_array(batch.column("torque")).astype(np.float64)
            for timestamp, force, torque in zip(timestamps, forces, torques, strict=True):
                if timestamp >= self.plays_from_s:
                    t = self.clock.sample_ns(float(timestamp))
                    message = ros.wrench(t, frame_id, force, torque)
                    yield self._own(Outgoing(t, "wrench", topic, "geometry_msgs/msg/WrenchStamped", message))

    def _audio(self, microphone: AudioOut) -> Iterator[Outgoing]:
        ros = self.playlist.ros
        for t, message in audio_chunks(self.episode, microphone.sensor, ros, self.clock.sample_ns, self.plays_from_s):
            yield self._own(Outgoing(t, "audio", microphone.topic, AUDIO_STAMPED, message))


_RATES = ("joint_velocities", "joint_torques")  # JointState velocity and effort, in this order


def _action_message(ros: RosMessages, t: int, action: ActionOut, values: np.ndarray) -> Any:
    values = np.asarray(values, dtype=np.float64)
    by_name = dict(zip(action.names, values, strict=True))
    if action.form == "joint_state":
        return ros.joint_state(t, action.names, values, np.zeros(0), np.zeros(0))
    if action.form == "twist":
        twist = [by_name[n] for n in TWIST_NAMES]
        return ros.twist(t, action.frame_id, twist[:3], twist[3:])
    if action.form == "pose":
        x, y, z, qw, qx, qy, qz = (by_name[n] for n in POSE_NAMES)
        return ros.pose(t, action.frame_id, (x, y, z), (qx, qy, qz, qw))
    return ros.multi_array(action.names, values)
