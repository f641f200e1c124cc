"""Extract: a decoded ROS message -> the typed samples of ``samples``.

``extract`` dispatches on the (normalised) type name and never raises on what a
message holds: a payload that does not match its own header, an unsupported image
encoding or an undecodable JPEG becomes a ``BadMessage`` whose reason names the
topic, the type and what was expected. Types it does not handle give ``[]`` (the
caller counts them as ignored); ``supports`` tells which ones it handles, so a caller
can skip decoding the others.

Conventions:
- images: colour -> HxWx3 uint8 RGB, depth -> HxW uint16 millimetres (``32FC1`` metres
  are rounded to mm; NaN, inf and values <= 0 become 0, the depth convention for "no
  reading"; values beyond 65.535 m clip to 65535). A frame may be a read-only view of
  the message's buffer.
- compressed images are decoded with PyAV (no OpenCV): JPEG and PNG, plus
  ``compressedDepth`` PNG from ROS image_transport_plugins. A 16-bit grey PNG is depth.
- quaternions: ROS orders them (x, y, z, w); samples and ORTF use (w, x, y, z).
- frame ids lose a leading ``/`` (ROS 1 tf allowed ``/base_link``; tf2 strips it too).
- stamps: the header stamp in ns when the message has a header (a zero stamp stays 0),
  always the receive time.
- joint states: a message that lists no joint names keeps ``names`` empty (its positions
  are named by the step layout). A ros_control ``JointTrajectoryControllerState`` (ROS 1's
  layout, Humble's or Jazzy's: its fields are read by name) is a ``ControllerStateSample``:
  the joint state from ``feedback`` (else ``actual``), the reference from ``reference``
  (else ``desired``), positions, velocities and efforts where present.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, Literal

import av
import numpy as np

from ortf_ros.errors import InvalidMessageError
from ortf_ros.format.units import NS
from ortf_ros.io.still import decode_alone
from ortf_ros.pipeline.decode import canonical_msgtype
from ortf_ros.pipeline.samples import (
    CONTROLLER_STATE_TYPE,
    BadMessage,
    CameraInfoSample,
    ControllerStateSample,
    DetectedBox,
    DetectionsSample,
    ImageSample,
    JointStateSample,
    RawMessage,
    RobotDescriptionSample,
    Sample,
    Stamps,
    TransformSample,
    VectorSample,
    WrenchSample,
    ros_rotations,
)
from ortf_ros.pipeline.streams import audio, range_sensors
from ortf_ros.pipeline.streams.h264_camera import COMPRESSED_VIDEO_TYPE, compressed_video, encoded_frame, is_h264_format

_MAX_MM = 65535
_JPEG_MAGIC = b"\xff\xd8\xff"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_COMPRESSED_DEPTH_HEADER = struct.Struct("<iff")  # compressionFormat, depthQuantA, depthQuantB

# encoding -> (bytes per pixel, channel indices giving R, G, B)
_COLOUR_ENCODINGS: dict[str, tuple[int, tuple[int, int, int]]] = {
    "rgb8": (3, (0, 1, 2)),
    "bgr8": (3, (2, 1, 0)),
    "rgba8": (4, (0, 1, 2)),
    "bgra8": (4, (2, 1, 0)),
    "mono8": (1, (0, 0, 0)),
}
_DEPTH16_ENCODINGS = frozenset({"mono16", "16uc1"})
_DEPTH32F_ENCODINGS = frozenset({"32fc1"})


Handler = Callable[[Any, RawMessage, bool | None], list[Sample]]


# --- helpers -----------------------------------------------------------------------


def _frame_id(value: object) -> str:
    return str(value).lstrip("/")


def _stamp_ns(stamp: Any) -> int:
    sec = getattr(stamp, "sec", None)
    if sec is None:
        sec = stamp.secs  # ROS 1 names, should a recording define them itself
    nanosec = getattr(stamp, "nanosec", None)
    if nanosec is None:
        nanosec = stamp.nsecs
    return int(sec) * NS + int(nanosec)


def _stamps(raw: RawMessage, header: Any = None) -> Stamps:
    if header is None:
        return Stamps(receive_ns=raw.receive_ns)
    return Stamps(receive_ns=raw.receive_ns, header_ns=_stamp_ns(header.stamp), frame_id=_frame_id(header.frame_id))


def _u8(data: object) -> np.ndarray:
    """A ``uint8[]`` field as a flat uint8 array (rosbags gives a view of the message buffer)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(data, dtype=np.uint8)
    return np.asarray(data, dtype=np.uint8).reshape(-1)


def _floats(values: object) -> np.ndarray:
    return np.array(values, dtype=np.float64).reshape(-1)


def _vec3(v: Any) -> np.ndarray:
    return np.array([v.x, v.y, v.z], dtype=np.float64)


def _check_names(names: Sequence[str], what: str) -> None:
    if len(set(names)) != len(names):
        repeated = sorted({n for n in names if names.count(n) > 1})
        raise InvalidMessageError(f"{what} repeat: {', '.join(repeated)}")


def _metres_to_mm(metres: np.ndarray) -> np.ndarray:
    """Metres (any float) -> uint16 mm: rounded, invalid (NaN, inf, <= 0) -> 0, clipped at 65535."""
    with np.errstate(invalid="ignore", over="ignore"):
        mm = np.rint(metres.astype(np.float64) * 1000.0)
        mm[~(np.isfinite(mm) & (mm > 0))] = 0.0
    np.minimum(mm, _MAX_MM, out=mm)
    return mm.astype(np.uint16)


# --- images ------------------------------------------------------------------------


def _rows(msg: Any, bytes_per_pixel: int, encoding: str) -> np.ndarray:
    """The image's pixel bytes as (height, width * bytes_per_pixel), padding dropped."""
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    size = f"{width}x{height} {encoding}"
    if height == 0 or width == 0:
        raise InvalidMessageError(f"empty image ({size})")
    row = width * bytes_per_pixel
    if step < row:
        raise InvalidMessageError(
            f"step {step} is smaller than a {size} row ({width} x {bytes_per_pixel} = {row} bytes)"
        )
    data = _u8(msg.data)
    need = step * height
    if data.size < need:
        raise InvalidMessageError(f"data holds {data.size} bytes, {size} with step {step} needs {need}")
    return data[:need].reshape(height, step)[:, :row]


def _image(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    encoding = str(msg.encoding)
    key = encoding.lower()
    stamps = _stamps(raw, msg.header)
    height, width = int(msg.height), int(msg.width)
    if key in _COLOUR_ENCODINGS:
        bpp, (r, g, b) = _COLOUR_ENCODINGS[key]
        pixels = _rows(msg, bpp, encoding).reshape(height, width, bpp)
        if key == "rgb8":
            return [ImageSample(raw.topic, stamps, "rgb", np.ascontiguousarray(pixels))]
        # Channel by channel into a C-ordered array: fancy indexing leaves a layout that costs a second copy.
        rgb = np.empty((height, width, 3), dtype=np.uint8)
        for channel, source in enumerate((r, g, b)):
            rgb[:, :, channel] = pixels[:, :, source]
        return [ImageSample(raw.topic, stamps, "rgb", rgb)]
    big = bool(msg.is_bigendian)
    if key in _DEPTH16_ENCODINGS:
        rows = np.ascontiguousarray(_rows(msg, 2, encoding))
        depth = rows.view(">u2" if big else "<u2").reshape(height, width).astype(np.uint16, copy=False)
        return [ImageSample(raw.topic, stamps, "depth", depth)]
    if key in _DEPTH32F_ENCODINGS:
        rows = np.ascontiguousarray(_rows(msg, 4, encoding))
        metres = rows.view(">f4" if big else "<f4").reshape(height, width)
        return [ImageSample(raw.topic, stamps, "depth", _metres_to_mm(metres))]
    supported = ", ".join([*_COLOUR_ENCODINGS, "mono16", "16UC1", "32FC1"])
    raise InvalidMessageError(f"unsupported image encoding {encoding!r} (supported: {supported})")


def _decode_still(codec: Literal["mjpeg", "png"], data: bytes) -> av.VideoFrame:
    try:
        return decode_alone(codec, data, "JPEG" if codec == "mjpeg" else "PNG")
    except ValueError as exc:
        raise InvalidMessageError(str(exc)) from None


def _is_gray16(frame: av.VideoFrame) -> bool:
    return frame.format.name in ("gray16be", "gray16le")


def _compressed_depth(fmt: str, data: bytes) -> tuple[Literal["depth"], np.ndarray]:
    encoding, _, transport = fmt.partition(";")
    encoding = encoding.strip()
    if "compresseddepth rvl" in transport.lower():
        raise InvalidMessageError(f"compressedDepth RVL is not supported, only PNG (format {fmt!r})")
    if len(data) <= _COMPRESSED_DEPTH_HEADER.size:
        raise InvalidMessageError(f"compressedDepth payload of {len(data)} bytes has no image after its 12-byte header")
    _, quant_a, quant_b = _COMPRESSED_DEPTH_HEADER.unpack_from(data)
    frame = _decode_still("png", data[_COMPRESSED_DEPTH_HEADER.size :])
    if not _is_gray16(frame):
        raise InvalidMessageError(f"compressedDepth PNG is {frame.format.name}, expected 16-bit grey")
    values = frame.to_ndarray(format="gray16le")
    key = encoding.lower()
    if key in _DEPTH16_ENCODINGS:
        return "depth", np.ascontiguousarray(values, dtype=np.uint16)
    if key in _DEPTH32F_ENCODINGS:
        # Inverse-depth quantisation (compressed_depth_image_transport): 0 means no reading.
        with np.errstate(divide="ignore", invalid="ignore"):
            metres = np.float32(quant_a) / (values.astype(np.float32) - np.float32(quant_b))
        metres[values == 0] = np.nan
        return "depth", _metres_to_mm(metres)
    raise InvalidMessageError(f"compressedDepth of encoding {encoding!r} is not supported (16UC1, 32FC1)")


def _compressed_image(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    fmt = str(msg.format)
    key = fmt.lower()
    data = _u8(msg.data).tobytes()
    stamps = _stamps(raw, msg.header)
    if is_h264_format(fmt):
        return [encoded_frame(raw, stamps, data)]
    if "compresseddepth" in key:
        kind, pixels = _compressed_depth(fmt, data)
        return [ImageSample(raw.topic, stamps, kind, pixels)]
    sniffed = "png" if data.startswith(_PNG_MAGIC) else "jpeg" if data.startswith(_JPEG_MAGIC) else None
    declared = "png" if "png" in key else "jpeg" if ("jpeg" in key or "jpg" in key) else None
    if declared is None and key.strip():
        raise InvalidMessageError(f"unsupported compressed format {fmt!r} (supported: jpeg, png, compressedDepth)")
    codec = declared or sniffed
    if codec is None:
        raise InvalidMessageError(f"no format given and the {len(data)} bytes are neither JPEG nor PNG")
    if sniffed != codec:
        raise InvalidMessageError(f"format {fmt!r} but the {len(data)} bytes do not start like a {codec.upper()}")
    frame = _decode_still("mjpeg" if codec == "jpeg" else "png", data)
    if codec == "png" and _is_gray16(frame):
        depth = np.ascontiguousarray(frame.to_ndarray(format="gray16le"), dtype=np.uint16)
        return [ImageSample(raw.topic, stamps, "depth", depth)]
    rgb = np.ascontiguousarray(frame.to_ndarray(format="rgb24"), dtype=np.uint8)
    return [ImageSample(raw.topic, stamps, "rgb", rgb)]


# --- sensors -----------------------------------------------------------------------


def _camera_info(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    k = getattr(msg, "k", None)
    d = getattr(msg, "d", None)
    k = msg.K if k is None else k  # ROS 1 field names
    d = msg.D if d is None else d
    k_values = tuple(float(v) for v in k)
    if len(k_values) != 9:
        raise InvalidMessageError(f"K has {len(k_values)} values, expected 9 (3x3)")
    return [
        CameraInfoSample(
            topic=raw.topic,
            stamps=_stamps(raw, msg.header),
            width=int(msg.width),
            height=int(msg.height),
            k=k_values,
            d=tuple(float(v) for v in d),
            distortion_model=str(msg.distortion_model),
        )
    ]


def _joint_vectors(
    raw: RawMessage, header: Any, names: Sequence[str], fields: Sequence[tuple[str, object]]
) -> JointStateSample:
    """A joint state from its names and fields: (field name, values) of its positions, then
    of its velocities and efforts where it has such fields (empty values: none given).
    Without names, the positions say how many joints there are (the step layout names them)."""
    names = tuple(str(n) for n in names)
    _check_names(names, "joint names")
    arrays = [(field, _floats(values)) for field, values in fields]
    position_field, position = arrays[0]
    if not names and position.size == 0:
        raise InvalidMessageError(f"lists no joint names and no {position_field}")
    count = len(names) or position.size
    counted = f"{count} joint names" if names else f"{count} {position_field} (the message lists no joint names)"
    for field, values in arrays:
        if values.size not in (0, count):
            raise InvalidMessageError(f"{field} has {values.size} values for {counted}")
    velocity, effort = (arrays[i][1] if i < len(arrays) else np.zeros(0) for i in (1, 2))
    return JointStateSample(raw.topic, _stamps(raw, header), names, position, velocity, effort)


def _joint_state(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    fields = [(field, getattr(msg, field)) for field in ("position", "velocity", "effort")]
    return [_joint_vectors(raw, msg.header, msg.name, fields)]


CONTROLLER_STATE_FIELDS = ("feedback", "actual")
"""Where a controller state message holds what the joints did, best first: ROS 2's
``feedback``, then ``actual`` (ROS 1's, and ROS 2 Humble's deprecated one, which drivers
written before ``feedback`` existed still fill)."""
CONTROLLER_REFERENCE_FIELDS = ("reference", "desired")
"""Where it holds where the controller was taking them: ROS 2's ``reference``, then ``desired``."""


def _trajectory_point(msg: Any, fields: Sequence[str]) -> tuple[str, Any] | None:
    """The first of ``fields`` (``JointTrajectoryPoint``s) the message has that holds
    positions; None when none does. By name: a recording brings its own definition, of
    ROS 1's layout, Humble's or Jazzy's."""
    for field in fields:
        point = getattr(msg, field, None)
        if point is not None and len(point.positions):
            return field, point
    return None


def _point_fields(field: str, point: Any) -> list[tuple[str, object]]:
    # (``effort`` came late to JointTrajectoryPoint: an old recording's definition may lack it)
    return [
        (f"{field}.positions", point.positions),
        (f"{field}.velocities", point.velocities),
        (f"{field}.effort", getattr(point, "effort", ())),
    ]


def _controller_state(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    state_point = _trajectory_point(msg, CONTROLLER_STATE_FIELDS)
    if state_point is None:
        present = [f for f in CONTROLLER_STATE_FIELDS if hasattr(msg, f)]
        raise InvalidMessageError(
            f"no joint positions in {' or '.join(present) or 'feedback or actual (no such fields)'}"
        )
    state_field, point = state_point
    state = _joint_vectors(raw, msg.header, msg.joint_names, _point_fields(state_field, point))
    reference_point = _trajectory_point(msg, CONTROLLER_REFERENCE_FIELDS)
    if reference_point is None:
        return [ControllerStateSample(state, None, state_field, None)]
    reference_field, point = reference_point
    reference = _joint_vectors(raw, msg.header, msg.joint_names, [(f"{reference_field}.positions", point.positions)])
    if reference.position.size != state.position.size:
        raise InvalidMessageError(
            f"{reference_field}.positions has {reference.position.size} values, "
            f"{state_field}.positions {state.position.size}"
        )
    return [ControllerStateSample(state, reference, state_field, reference_field)]


def _wrench(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    header = getattr(msg, "header", None)
    wrench = msg.wrench if header is not None else msg
    return [WrenchSample(raw.topic, _stamps(raw, header), _vec3(wrench.force), _vec3(wrench.torque))]


def _laser_scan(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    return [range_sensors.laser_scan(msg, raw.topic, _stamps(raw, msg.header))]


def _point_cloud(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    return [range_sensors.point_cloud(msg, raw.topic, _stamps(raw, msg.header))]


def _transforms(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    static = static_tf if static_tf is not None else raw.topic.rsplit("/", 1)[-1] == "tf_static"
    where = f"{raw.topic} ({raw.msgtype})"
    out: list[Sample] = []
    for transform in msg.transforms:
        parent = _frame_id(transform.header.frame_id)
        child = _frame_id(transform.child_frame_id)
        stamps = _stamps(raw, transform.header)
        translation = _vec3(transform.transform.translation)
        q = transform.transform.rotation
        xyzw = np.array([q.x, q.y, q.z, q.w], dtype=np.float64)
        rotations, valid = ros_rotations(xyzw[np.newaxis])
        problem = None
        if not parent or not child:
            problem = "has an empty frame id"
        elif parent == child:
            problem = "is a frame's transform to itself"
        elif not np.all(np.isfinite(translation)):
            problem = f"has a non-finite translation {tuple(translation.tolist())}"
        elif not valid[0]:
            problem = f"has quaternion (x, y, z, w) = {tuple(xyzw.tolist())}, which is not a rotation"
        if problem is not None:
            at = f"{stamps.header_ns / NS:.9f} s" if stamps.header_ns is not None else "?"
            reason = f"{where}: transform {parent!r} -> {child!r} at {at} {problem}"
            out.append(BadMessage(raw.topic, raw.receive_ns, reason))
            continue
        out.append(TransformSample(parent, child, stamps, translation, rotations[0], static))
    return out


def _robot_description(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    return [RobotDescriptionSample(raw.topic, _stamps(raw), str(msg.data))]


# --- actions -----------------------------------------------------------------------


def _vector(raw: RawMessage, header: Any, names: Sequence[str], values: np.ndarray) -> list[Sample]:
    return [VectorSample(raw.topic, _stamps(raw, header), tuple(names), values)]


def _joint_trajectory(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    names = tuple(str(n) for n in msg.joint_names)
    _check_names(names, "joint names")
    if len(msg.points) == 0:
        raise InvalidMessageError("trajectory has no points")
    positions = _floats(msg.points[0].positions)
    if positions.size != len(names):
        raise InvalidMessageError(f"first point has {positions.size} positions for {len(names)} joint names")
    return _vector(raw, msg.header, names, positions)


def _multi_array(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    offset = int(msg.layout.data_offset)
    values = _floats(msg.data)[offset:]
    labels = [str(dim.label) for dim in msg.layout.dim]
    if len(labels) == values.size and all(labels) and len(set(labels)) == len(labels):
        names = labels  # one labelled dimension per element: the labels name the elements
    elif len(labels) == 1 and labels[0]:
        names = [f"{labels[0]}_{i}" for i in range(values.size)]
    else:
        names = [str(i) for i in range(values.size)]
    return _vector(raw, None, names, values)


TWIST_NAMES = ("linear_x", "linear_y", "linear_z", "angular_x", "angular_y", "angular_z")
"""The action elements a Twist(Stamped) becomes (and the player turns back into one)."""
POSE_NAMES = ("x", "y", "z", "qw", "qx", "qy", "qz")
"""The action elements a Pose(Stamped) becomes; the orientation in ORTF's (w, x, y, z) order."""


def _twist(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    header = getattr(msg, "header", None)
    twist = msg.twist if header is not None else msg
    return _vector(raw, header, TWIST_NAMES, np.concatenate([_vec3(twist.linear), _vec3(twist.angular)]))


def _pose(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    header = getattr(msg, "header", None)
    pose = msg.pose if header is not None else msg
    q = pose.orientation
    values = np.concatenate([_vec3(pose.position), np.array([q.w, q.x, q.y, q.z], dtype=np.float64)])
    return _vector(raw, header, POSE_NAMES, values)


def _gripper(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    return _vector(raw, None, ("gripper",), np.array([float(msg.data)], dtype=np.float64))


def _audio(handler: audio.AudioHandler) -> Handler:
    """An ``audio_common_msgs`` message (``pipeline.streams.audio``), its stamps read as every header's are."""

    def extract_audio(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
        return handler(msg, raw.topic, _stamps(raw, getattr(msg, "header", None)))

    return extract_audio


def _detections(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    """vision_msgs 4 (Humble, Jazzy: the box's centre a ``vision_msgs/Pose2D`` with a
    ``position``) or older (a ``geometry_msgs/Pose2D``, ``x`` and ``y`` on it; a hypothesis's
    ``id`` and ``score`` on the result itself); each box with its best hypothesis."""
    boxes = []
    for detection in msg.detections:
        hypotheses = [getattr(r, "hypothesis", r) for r in detection.results]
        best = max(hypotheses, key=lambda h: float(h.score), default=None)
        center = detection.bbox.center
        point = getattr(center, "position", center)
        boxes.append(
            DetectedBox(
                class_id="" if best is None else str(getattr(best, "class_id", None) or getattr(best, "id", "")),
                score=0.0 if best is None else float(best.score),
                object_id=str(getattr(detection, "id", "")),
                center_x=float(point.x),
                center_y=float(point.y),
                size_x=float(detection.bbox.size_x),
                size_y=float(detection.bbox.size_y),
            )
        )
    return [DetectionsSample(raw.topic, _stamps(raw, msg.header), tuple(boxes))]


_HANDLERS: dict[str, Handler] = {
    "sensor_msgs/msg/Image": _image,
    "sensor_msgs/msg/CompressedImage": _compressed_image,
    COMPRESSED_VIDEO_TYPE: compressed_video,
    "sensor_msgs/msg/CameraInfo": _camera_info,
    "sensor_msgs/msg/JointState": _joint_state,
    CONTROLLER_STATE_TYPE: _controller_state,
    "geometry_msgs/msg/WrenchStamped": _wrench,
    "geometry_msgs/msg/Wrench": _wrench,
    "tf2_msgs/msg/TFMessage": _transforms,
    "sensor_msgs/msg/LaserScan": _laser_scan,
    "sensor_msgs/msg/PointCloud2": _point_cloud,
    "std_msgs/msg/String": _robot_description,
    "trajectory_msgs/msg/JointTrajectory": _joint_trajectory,
    "std_msgs/msg/Float64MultiArray": _multi_array,
    "geometry_msgs/msg/Twist": _twist,
    "geometry_msgs/msg/TwistStamped": _twist,
    "geometry_msgs/msg/PoseStamped": _pose,
    "geometry_msgs/msg/Pose": _pose,
    "std_msgs/msg/Float64": _gripper,
    "std_msgs/msg/Bool": _gripper,
    "audio_common_msgs/msg/AudioStamped": _audio(audio.stamped_audio),
    "audio_common_msgs/msg/Audio": _audio(audio.stamped_audio),
    "audio_common_msgs/msg/AudioData": _audio(audio.audio_bytes),
    "audio_common_msgs/msg/AudioDataStamped": _audio(audio.audio_bytes),
    "audio_common_msgs/msg/AudioInfo": _audio(audio.audio_info),
    "vision_msgs/msg/Detection2DArray": _detections,
}

SUPPORTED_TYPES: frozenset[str] = frozenset(_HANDLERS)
"""Canonical names of the types ``extract`` turns into samples."""


def supports(msgtype: str) -> bool:
    """Whether ``extract`` makes samples of this type (any spelling ``decode`` accepts)."""
    return canonical_msgtype(msgtype) in _HANDLERS


def extract(message: object, raw: RawMessage, *, static_tf: bool | None = None) -> list[Sample]:
    """The samples ``message`` (decoded from ``raw``) holds; ``[]`` for a type not handled.

    ``static_tf`` forces the static flag of transforms; by default transforms on a topic
    named ``tf_static`` (``/tf_static``, ``/robot1/tf_static``) are static.
    """
    if isinstance(message, BadMessage):
        return [message]
    handler = _HANDLERS.get(canonical_msgtype(raw.msgtype))
    if handler is None:
        return []
    where = f"{raw.topic} ({raw.msgtype})"
    try:
        return handler(message, raw, static_tf)
    except InvalidMessageError as exc:  # (audio and range data too)
        return [BadMessage(raw.topic, raw.receive_ns, f"{where}: {exc}")]
    except (AttributeError, TypeError, ValueError, IndexError, OverflowError) as exc:
        # A recording's own definition of a standard type may lack fields or hold odd values.
        return [BadMessage(raw.topic, raw.receive_ns, f"{where}: unexpected content ({type(exc).__name__}: {exc})")]
