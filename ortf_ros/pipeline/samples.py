"""Typed samples: what ``extract`` makes of a ROS message, and all the assembler sees.

Times are integer nanoseconds, as ROS keeps them (float seconds lose sub-microsecond
precision at epoch scale). Every sample carries both clocks, the header stamp (None
for messages without a header) and the receive time, because the stream's time
policy chooses between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ortf_ros.format.audio import AudioFormat
from ortf_ros.io.h264 import PacketFacts

Serialization = Literal["cdr", "ros1"]
DefinitionFormat = Literal["ros2msg", "ros2idl", "ros1msg"]
"""How a recording carries a type's definition (the names MCAP uses for schema encodings):
``ros2msg``/``ros2idl`` for rosbag2 and MCAP connections, ``ros1msg`` for a ROS 1 bag's
connection header. ``ros1msg`` and ``ros2msg`` both parse with rosbags'
``get_types_from_msg``, ``ros2idl`` with ``get_types_from_idl``."""
TimeSource = Literal["header", "receive"]
"""Which of a sample's clocks a stream's time is: its header stamp, or when it was received."""
# A serialized message: a large one (a camera frame) may be a view of the recording's
# map, which its decoded image then is too (``io.mapped_file``).
Payload = bytes | memoryview


@dataclass(frozen=True)
class RawMessage:
    """One serialized message as a source delivers it."""

    topic: str
    msgtype: str  # ROS 2 style name, e.g. "sensor_msgs/msg/Image"
    receive_ns: int
    data: Payload
    serialization: Serialization = "cdr"


@dataclass(frozen=True)
class RawRun:
    """Consecutive messages of one topic: their receive times, and the serialized messages
    as the rows of one array per length. Sources give these where storage keeps a topic's
    messages together (an MCAP chunk), so that 1 kHz messages of a fixed layout take
    numpy calls and no Python call each (``BlockFeed.feed_run``)."""

    topic: str
    msgtype: str
    receive_ns: np.ndarray  # (n,) int64
    parts: tuple[tuple[np.ndarray, np.ndarray], ...]  # per length: (the rows it is at, (rows, length) uint8)
    serialization: Serialization = "cdr"

    def __len__(self) -> int:
        return len(self.receive_ns)

    @classmethod
    def of(cls, messages: list[RawMessage]) -> RawRun:
        """Consecutive messages of one topic as a run."""
        first = messages[0]
        lengths = np.fromiter((len(raw.data) for raw in messages), np.intp, len(messages))
        parts = []
        for length in np.unique(lengths).tolist():
            rows = np.flatnonzero(lengths == length)
            data = b"".join(messages[row].data for row in rows.tolist())
            parts.append((rows, np.frombuffer(data, np.uint8).reshape(len(rows), length)))
        receive = np.fromiter((raw.receive_ns for raw in messages), np.int64, len(messages))
        return cls(first.topic, first.msgtype, receive, tuple(parts), first.serialization)

    def messages(self) -> list[RawMessage]:
        """The run as single messages (for what only the per-message way reads)."""
        data: list[bytes] = [b""] * len(self)
        for rows, rows_data in self.parts:
            for row, message in zip(rows.tolist(), rows_data, strict=True):
                data[row] = message.tobytes()
        return [
            RawMessage(self.topic, self.msgtype, receive, message, self.serialization)
            for receive, message in zip(self.receive_ns.tolist(), data, strict=True)
        ]


@dataclass(frozen=True)
class RawBatch:
    """What a source reads at once (an MCAP chunk, say): its single messages in receive
    time order, and its runs, each run's topic in no single message. Everything in a
    batch precedes everything in the next, but a run is not ordered with the messages
    beside it: steps are decided between batches."""

    messages: list[RawMessage]
    runs: list[RawRun]


@dataclass(frozen=True)
class Stamps:
    receive_ns: int
    header_ns: int | None = None
    frame_id: str = ""


def stream_time(stamps: Stamps, source: TimeSource) -> int:
    """The time a stream's policy works on; receive time where the message has no stamp."""
    if source == "header" and stamps.header_ns:
        return stamps.header_ns
    return stamps.receive_ns


@dataclass(frozen=True)
class ImageSample:
    """A decoded frame: HxWx3 uint8 RGB, or HxW uint16 depth in millimetres."""

    topic: str
    stamps: Stamps
    kind: Literal["rgb", "depth"]
    pixels: np.ndarray


@dataclass(frozen=True)
class EncodedFrameSample:
    """A frame a camera published encoded (H.264, Annex B; ``io.h264``): its packet as
    published, stored without decoding it."""

    topic: str
    stamps: Stamps
    codec: str  # "h264"
    data: bytes
    facts: PacketFacts


@dataclass(frozen=True)
class PinholeCalibration:
    """A camera's calibration as a ``CameraInfo`` carries it, and the YAML file that
    ``camera_calibration`` writes (``calibration.CalibrationFile``): the manifest's
    intrinsics and distortion come from either alike."""

    width: int
    height: int
    k: tuple[float, ...]  # 3x3 row-major
    d: tuple[float, ...]
    distortion_model: str


@dataclass(frozen=True)
class CameraInfoSample(PinholeCalibration):
    topic: str
    stamps: Stamps


@dataclass(frozen=True)
class JointStateSample:
    """Joint vectors keyed by name (messages may list joints in any order, or only some).
    ``names`` is empty for a message that lists none (drivers that publish positions
    only): its vectors are in an order the step layout names (``StepLayout.unnamed_joints``)."""

    topic: str
    stamps: Stamps
    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray  # empty when the message has none
    effort: np.ndarray  # empty when the message has none


CONTROLLER_STATE_TYPE = "control_msgs/msg/JointTrajectoryControllerState"
"""The ros_control message a ``ControllerStateSample`` comes from (ROS 1 and ROS 2 alike)."""


@dataclass(frozen=True)
class ControllerStateSample:
    """A ros_control controller's state (``control_msgs/JointTrajectoryControllerState``):
    what its joints did, as the joint state they feed (``state``, from ``actual`` in ROS 1
    and ``feedback`` in ROS 2), and where the controller was taking them (``reference``,
    the ``desired`` / ``reference`` positions; None when the message holds none), which
    is the action when the mapping takes it from this topic. The fields they came from
    are named, for the manifest and the summary to say so."""

    state: JointStateSample
    reference: JointStateSample | None
    state_field: str  # "actual" or "feedback"
    reference_field: str | None  # "desired" or "reference"; None with no reference

    @property
    def topic(self) -> str:
        return self.state.topic

    @property
    def stamps(self) -> Stamps:
        return self.state.stamps


@dataclass(frozen=True)
class WrenchSample:
    topic: str
    stamps: Stamps
    force: np.ndarray  # (3,)
    torque: np.ndarray  # (3,)


@dataclass(frozen=True)
class LaserScanSample:
    """A ``sensor_msgs/LaserScan``: its geometry as the message gives it, and its ranges and
    intensities (float32, as sent: REP 117's +inf, -inf and NaN kept; intensities empty
    when the scanner gives none)."""

    topic: str
    stamps: Stamps
    angle_min: float
    angle_max: float
    angle_increment: float
    time_increment: float
    scan_time: float
    range_min: float
    range_max: float
    ranges: np.ndarray  # (samples,) float32
    intensities: np.ndarray  # (samples,) or (0,) float32


@dataclass(frozen=True)
class PointField:
    """One ``sensor_msgs/PointField``: ``datatype`` is its ROS code (1 INT8 .. 8 FLOAT64)."""

    name: str
    offset: int
    datatype: int
    count: int


@dataclass(frozen=True)
class PointCloudSample:
    """A ``sensor_msgs/PointCloud2``, decoded: per field, its values for the ``height x
    width`` points in row-major order (``(n,)``, or ``(n, count)`` for a field of several
    elements), little-endian, the padding between fields and rows left out. The layout it
    came in (``fields``, ``point_step``) is kept to rebuild the message."""

    topic: str
    stamps: Stamps
    height: int
    width: int
    fields: tuple[PointField, ...]
    point_step: int
    is_dense: bool
    values: dict[str, np.ndarray]


SampleBlockKind = Literal["joint_state", "wrench"]
BlockKind = SampleBlockKind | Literal["transform"]  # (a block of TF messages is a ``TransformBlock``)


@dataclass(frozen=True)
class BlockPart:
    """The messages of a block that share one layout (one joint list, one frame id)."""

    rows: np.ndarray  # (n,) their places in the block, ascending
    frame_id: str
    names: tuple[str, ...]  # JointState: the joints listed, in their order; wrench: ()
    runs: tuple[np.ndarray, ...]  # a row per message: position, velocity, effort | force and torque (n, 6)


@dataclass(frozen=True)
class SampleBlock:
    """Consecutive messages of one high-rate topic, read at once by the fast path: what
    they are one by one, as arrays with a row per message, so that 1 kHz costs numpy
    calls per block and not Python calls per message. A topic may interleave layouts (an
    arm's and a gripper's joint states, say); each is a part."""

    topic: str
    kind: SampleBlockKind
    receive_ns: np.ndarray  # (N,) int64
    header_ns: np.ndarray  # (N,) int64
    parts: tuple[BlockPart, ...]

    def __len__(self) -> int:
        return len(self.receive_ns)

    def times(self, source: TimeSource) -> np.ndarray:
        """``stream_time`` of each row."""
        if source == "header":
            return np.where(self.header_ns != 0, self.header_ns, self.receive_ns)
        return self.receive_ns

    def stacked(self, run: int) -> np.ndarray:
        """One run of every message, a row each in block order (the parts' runs must be as wide)."""
        if len(self.parts) == 1:
            return self.parts[0].runs[run]
        values = np.empty((len(self), self.parts[0].runs[run].shape[1]))
        for part in self.parts:
            values[part.rows] = part.runs[run]
        return values

    def samples(self) -> list[Sample]:
        """The block as the messages one by one (for what only the per-sample way handles)."""
        ordered: dict[int, Sample] = {}
        receive, header = self.receive_ns.tolist(), self.header_ns.tolist()
        for part in self.parts:
            for i, row in enumerate(part.rows.tolist()):
                stamps = Stamps(receive[row], header[row], part.frame_id)
                ordered[row] = block_sample(self.kind, self.topic, stamps, part.names, [run[i] for run in part.runs])
        return [ordered[row] for row in range(len(self))]


def block_sample(
    kind: SampleBlockKind, topic: str, stamps: Stamps, names: tuple[str, ...], runs: list[np.ndarray]
) -> JointStateSample | WrenchSample:
    """One message of a kind that has blocks, from its float64 runs: what the fast path
    makes of a message read alone and what ``SampleBlock.samples`` makes of a block's rows."""
    if kind == "wrench":
        return WrenchSample(topic, stamps, runs[0][:3], runs[0][3:])
    return JointStateSample(topic, stamps, names, runs[0], runs[1], runs[2])


@dataclass(frozen=True)
class TransformSample:
    """``child`` in ``parent``: p_parent = T * p_child; rotation (w, x, y, z)."""

    parent: str
    child: str
    stamps: Stamps
    translation: np.ndarray  # (3,)
    rotation: np.ndarray  # (4,) w, x, y, z
    static: bool


def ros_rotations(xyzw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ROS quaternions (rows of x, y, z, w) as unit rows of w, x, y, z, and which rows are
    rotations at all (finite, norm at least 1e-12; the others are zeros). The one place
    TF rotations are read, so that the fast path gives the full way's bits."""
    x, y, z, w = xyzw.T
    norm = np.sqrt(x * x + y * y + z * z + w * w)
    valid = (norm >= 1e-12) & np.isfinite(norm)
    wxyz = np.stack([w, x, y, z], axis=1)
    unit: np.ndarray = np.divide(wxyz, norm[:, np.newaxis], out=np.zeros_like(wxyz), where=valid[:, np.newaxis])
    return unit, valid


@dataclass(frozen=True)
class TransformRun:
    """One edge's transforms in a block of TF messages, in message order: what
    ``TransformSample`` says of each, as arrays with a row per transform."""

    parent: str
    child: str
    static: bool
    header_ns: np.ndarray  # (n,) int64
    translation: np.ndarray  # (n, 3)
    rotation: np.ndarray  # (n, 4) w, x, y, z, unit


@dataclass(frozen=True)
class TransformBlock:
    """Consecutive TF messages of one topic, read at once by the fast path: each edge's
    transforms as one run (a robot's TF at 100 Hz and more, several transforms a message,
    would otherwise cost a Python call per transform). Edges come in the order in which
    their first transform appears, which is what decides a frame's parent when two
    publishers disagree (``TfBuffer.add``)."""

    topic: str
    receive_ns: np.ndarray  # (N,) int64, a row per message
    edges: tuple[TransformRun, ...]


@dataclass(frozen=True)
class VectorSample:
    """A numeric command (action) flattened to a vector, with its element names."""

    topic: str
    stamps: Stamps
    names: tuple[str, ...]
    values: np.ndarray


@dataclass(frozen=True)
class RobotDescriptionSample:
    topic: str
    stamps: Stamps
    urdf: str


@dataclass(frozen=True)
class AudioChunkSample:
    """One audio message: its samples as published, interleaved, in order (``samples``:
    a flat array of the format's dtype, ``frames * channels`` long). ``format`` None: the
    older layout's bytes, which only the ``AudioInfo`` topic describes (``raw`` bytes then)."""

    topic: str
    stamps: Stamps
    samples: np.ndarray
    format: AudioFormat | None


@dataclass(frozen=True)
class AudioInfoSample:
    """The older layout's ``AudioInfo``: the format of the ``AudioData`` beside it."""

    topic: str
    stamps: Stamps
    format: AudioFormat


@dataclass(frozen=True)
class DetectedBox:
    """One ``vision_msgs/Detection2D``: its best hypothesis's class id and score (``""``, 0
    without one), its tracking ``id``, and its box's centre and size in pixels."""

    class_id: str
    score: float
    object_id: str
    center_x: float
    center_y: float
    size_x: float
    size_y: float


@dataclass(frozen=True)
class DetectionsSample:
    """A ``vision_msgs/Detection2DArray``: the boxes a detector found in one image."""

    topic: str
    stamps: Stamps
    boxes: tuple[DetectedBox, ...]


@dataclass(frozen=True)
class BadMessage:
    """A message that could not be decoded or did not hold what it claimed: counted, never written."""

    topic: str
    receive_ns: int
    reason: str


Sample = (
    ImageSample
    | EncodedFrameSample
    | CameraInfoSample
    | JointStateSample
    | ControllerStateSample
    | WrenchSample
    | LaserScanSample
    | PointCloudSample
    | TransformSample
    | VectorSample
    | RobotDescriptionSample
    | AudioChunkSample
    | AudioInfoSample
    | DetectionsSample
    | BadMessage
)
