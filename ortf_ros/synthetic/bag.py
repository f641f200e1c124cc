"""The bag writer: a synthetic teleop recording with analytically known content, in every
bag format, with rosbags and no ROS install.

``write_teleop_bag`` writes the scene its arguments describe (``scene.TeleopConfig``) as
rosbag2 (MCAP or sqlite3) or ROS 1; ``write_scene_bag`` writes the scene of a config the
live publisher (``ortf_scene_publisher``) was given too, so a bag written with the same
options and ``start_ns`` holds the very bytes that were published. Tests, ``make demo``
and the benchmarks convert these bags; ``cut_recording`` makes what a recorder killed
mid-write leaves.

Messages are generated, serialized and written one at a time in receive-time order
(``schedule``), so a 10-minute bag takes no more memory than a 10-second one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rosbags.rosbag2 import StoragePlugin

from ortf_ros.errors import ConversionError
from ortf_ros.pipeline.streams.audio_definitions import AudioLayout
from ortf_ros.synthetic.bag_sinks import BagCompression, Rosbag1Sink, Rosbag2Sink
from ortf_ros.synthetic.images import check_size
from ortf_ros.synthetic.messages import Messages
from ortf_ros.synthetic.scene import START_NS, BagFormat, TeleopConfig, UnnamedJoints
from ortf_ros.synthetic.schedule import schedule
from ortf_ros.synthetic.typestore import ControllerLayout


@dataclass(frozen=True)
class TeleopBagInfo:
    """What ``write_teleop_bag`` wrote."""

    path: Path  # the rosbag2 directory or the ROS 1 .bag file
    files: tuple[Path, ...]  # the storage files
    config: TeleopConfig
    counts: dict[str, int]  # topic -> messages written
    msgtypes: dict[str, str]  # topic -> ROS 2 type name, as BagSource reports it
    start_ns: int  # stamp of t = 0
    first_receive_ns: int
    last_receive_ns: int
    urdf: str = field(repr=False)

    @property
    def fmt(self) -> BagFormat:
        return self.config.fmt

    @property
    def message_count(self) -> int:
        return sum(self.counts.values())


def write_teleop_bag(
    path: Path,
    fmt: BagFormat,
    *,
    duration_s: float = 2.0,
    width: int = 64,
    height: int = 48,
    fps: int = 30,
    joint_rate_hz: int = 100,
    command_rate_hz: int = 50,
    wrench_rate_hz: int = 1000,
    tf_rate_hz: int = 100,
    with_depth: bool = True,
    compressed: bool = False,
    legacy_tf: bool = False,
    bag_compression: BagCompression = "none",
    max_bagfile_duration_s: float | None = None,
    start_ns: int = START_NS,
    compressed_cameras: tuple[str, ...] = (),
    side_camera: bool = False,
    controller_state: bool = False,
    controller_layout: ControllerLayout = "jazzy",
    with_command: bool | None = None,
    unnamed_joints: UnnamedJoints | None = None,
    without_camera_info: tuple[str, ...] = (),
    lidar: bool = False,
    detections: bool = False,
    audio: AudioLayout | None = None,
) -> TeleopBagInfo:
    """Write a synthetic teleop recording to ``path`` (a new rosbag2 directory, or a ROS 1 .bag).

    ``compressed``: the cameras publish ``sensor_msgs/CompressedImage`` JPEG on
    ``<image topic>/compressed`` (depth stays raw); ``compressed_cameras``: only these
    cameras do (raw image topics, e.g. ``(TOPIC_OVERHEAD_IMAGE,)``). ``side_camera``: a
    third RGB camera, ``TOPIC_SIDE_IMAGE`` with ``TOPIC_SIDE_CAMERA_INFO``, its frame in
    ``/tf_static`` and the URDF. ``legacy_tf`` (ROS 1 only): ``/tf`` is
    ``tf/tfMessage`` as in old bags. ``bag_compression``: see ``BagCompression``.
    ``max_bagfile_duration_s`` (rosbag2 only): start a new storage file after this much
    recording time, as ``ros2 bag record --max-bag-duration`` does. ``controller_state``:
    the arm's state as a ros_control controller's on ``TOPIC_CONTROLLER_STATE`` (of
    ``controller_layout`` in a rosbag2 bag), no ``/joint_states``, and no ``/joint_command``
    unless ``with_command``; ``unnamed_joints``: joint states without names (see the
    docstring of ``scene``).
    ``without_camera_info``: these cameras (raw image topics, depth's too) record no
    camera_info; everything else is as without it. ``lidar``: a LaserScan on ``TOPIC_SCAN``
    and a PointCloud2 on ``TOPIC_POINTS`` (``scan_ranges``, ``cloud_values``), in
    ``LIDAR_FRAME``, whose transform goes to ``/tf_static``. ``detections``: a
    ``vision_msgs/Detection2DArray`` per wrist frame on ``TOPIC_DETECTIONS`` (``detections``).
    ``audio``: a microphone on ``TOPIC_AUDIO`` in that layout (``TeleopConfig.audio``'s defaults).
    """
    config = TeleopConfig(
        fmt=fmt,
        duration_s=duration_s,
        width=width,
        height=height,
        fps=fps,
        joint_rate_hz=joint_rate_hz,
        command_rate_hz=command_rate_hz,
        wrench_rate_hz=wrench_rate_hz,
        tf_rate_hz=tf_rate_hz,
        with_depth=with_depth,
        compressed=compressed,
        legacy_tf=legacy_tf,
        start_ns=start_ns,
        compressed_cameras=tuple(compressed_cameras),
        side_camera=side_camera,
        controller_state=controller_state,
        controller_layout=controller_layout,
        with_command=with_command,
        unnamed_joints=unnamed_joints,
        without_camera_info=tuple(without_camera_info),
        lidar=lidar,
        detections=detections,
        audio=audio,
    )
    return write_scene_bag(path, config, bag_compression=bag_compression, max_bagfile_duration_s=max_bagfile_duration_s)


def write_scene_bag(
    path: Path,
    config: TeleopConfig,
    *,
    bag_compression: BagCompression = "none",
    max_bagfile_duration_s: float | None = None,
) -> TeleopBagInfo:
    """Write the scene ``config`` describes (as ``write_teleop_bag`` does from its
    arguments): the scene a live publisher published, as a bag, from the same config."""
    path = Path(path)
    fmt = config.fmt
    if path.exists():
        raise ConversionError(f"{path}: exists already, not overwriting")
    if fmt not in ("mcap", "sqlite3", "ros1"):
        raise ValueError(f"bag format {fmt!r}: expected mcap, sqlite3 or ros1")
    allowed = {"mcap": ("none", "file", "message", "storage"), "sqlite3": ("none", "file", "message")}
    if bag_compression not in allowed.get(fmt, ("none", "bz2", "lz4")):
        raise ValueError(f"bag_compression {bag_compression!r} does not apply to {fmt} bags")
    if config.legacy_tf and fmt != "ros1":
        raise ValueError("legacy_tf (tf/tfMessage) exists only in ROS 1 bags")
    if config.controller_layout != "jazzy" and fmt == "ros1":
        raise ValueError("controller_layout chooses a ROS 2 definition; a ROS 1 bag has ROS 1's")
    if max_bagfile_duration_s is not None and fmt == "ros1":
        raise ValueError("max_bagfile_duration_s splits rosbag2 directories; ROS 1 bags are one file")
    check_size(config.width, config.height)
    messages = Messages(config)
    topics = {topic: messages.msgtype(topic) for topic in config.rates()}
    sink: Rosbag2Sink | Rosbag1Sink
    if fmt == "ros1":
        sink = Rosbag1Sink(path, bag_compression, topics, messages.store)
    else:
        storage = StoragePlugin.MCAP if fmt == "mcap" else StoragePlugin.SQLITE3
        max_ns = None if max_bagfile_duration_s is None else round(max_bagfile_duration_s * 1e9)
        sink = Rosbag2Sink(path, storage, bag_compression, max_ns, topics, messages.store)
    counts = dict.fromkeys(topics, 0)
    first = last = 0
    try:
        for event in schedule(config):
            sink.write(
                event.topic,
                event.receive_ns,
                messages.serialize(event.topic, event.seq, event.stamp_ns, event.clock_ns),
            )
            counts[event.topic] += 1
            first = first or event.receive_ns
            last = event.receive_ns
        sink.close()
    except BaseException:
        sink.abort()
        raise
    return TeleopBagInfo(
        path=path,
        files=tuple(sink.files),
        config=config,
        counts=counts,
        msgtypes=config.msgtypes(),
        start_ns=config.start_ns,
        first_receive_ns=first,
        last_receive_ns=last,
        urdf=messages.urdf,
    )


def cut_recording(info: TeleopBagInfo, at_byte: int, dest: Path, *, unclosed: bool = False) -> Path:
    """A copy of the recording's (first) storage file, cut after ``at_byte`` bytes: what a
    recorder killed mid-write, or a copy interrupted, leaves. ``unclosed`` (ROS 1): also
    zero the header's ``index_pos``, as ``rosbag record`` leaves a bag it did not close.
    Returns the file written (``dest``)."""
    source = info.files[0]
    with source.open("rb") as f:
        data = bytearray(f.read(at_byte))
    if unclosed:
        if info.fmt != "ros1":
            raise ValueError("unclosed: a ROS 1 bag's index_pos; an MCAP cut short has no footer anyway")
        field = data.find(b"index_pos=")
        if field < 0 or field + 18 > len(data):
            raise ValueError(f"cut at byte {at_byte}: before the bag header's index_pos")
        data[field + 10 : field + 18] = bytes(8)
    dest.write_bytes(bytes(data))
    return dest
