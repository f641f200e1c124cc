"""Messages built with rosbags' typestores (ROS 2 Jazzy's, ROS 1 Noetic's), serialized (CDR and
ROS 1) as a recording holds them, and decoded and extracted as the pipeline does them: shared by
the tests of decode, extract and the fast path (pipeline/test_extract_*.py, test_decode.py,
test_fastpath.py) and test_blocks.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.extract import extract
from ortf_ros.pipeline.samples import (
    BadMessage,
    RawMessage,
    Sample,
    Serialization,
)

RECEIVE_NS = 1_700_000_001_500_000_000
HEADER_SEC, HEADER_NSEC = 1_700_000_000, 123_456_789
HEADER_NS = HEADER_SEC * 1_000_000_000 + HEADER_NSEC

TF_DEFINITION = "geometry_msgs/TransformStamped[] transforms\n"


def _stores() -> dict[Serialization, Typestore]:
    stores: dict[Serialization, Typestore] = {
        "cdr": get_typestore(Stores.ROS2_JAZZY),
        "ros1": get_typestore(Stores.ROS1_NOETIC),
    }
    for store in stores.values():
        for name in ("tf2_msgs/msg/TFMessage", "tf/msg/tfMessage"):
            if name not in store.types:
                store.register(get_types_from_msg(TF_DEFINITION, name))
    return stores


STORES = _stores()
DECODER = Decoder()
SERIALIZATIONS: list[Serialization] = ["cdr", "ros1"]

_DTYPES = {"bool": np.bool_, "byte": np.uint8, "char": np.uint8}

S = TypeVar("S")


def build(ser: Serialization, typename: str, **fields: Any) -> Any:
    """A message of ``typename`` with zero/empty defaults, ``fields`` overriding them."""
    store = STORES[ser]
    values: dict[str, Any] = {}
    fielddefs: list[tuple[str, tuple[Any, Any]]] = list(store.fielddefs[typename][1])
    for name, (kind, desc) in fielddefs:
        if name in fields:
            values[name] = fields[name]
        elif kind == 1:  # BASE
            base = desc[0]
            values[name] = "" if base == "string" else False if base == "bool" else 0
        elif kind == 2:  # NAME
            values[name] = build(ser, desc)
        else:  # ARRAY (fixed) or SEQUENCE
            (inner_kind, inner), length = desc
            if inner_kind == 1 and inner[0] != "string":
                values[name] = np.zeros(length if kind == 3 else 0, dtype=_DTYPES.get(inner[0], inner[0]))
            elif kind == 3:
                values[name] = [build(ser, inner) if inner_kind == 2 else "" for _ in range(length)]
            else:
                values[name] = []
    return store.types[typename](**values)


def header(ser: Serialization, frame_id: str = "/camera_optical") -> Any:
    stamp = build(ser, "builtin_interfaces/msg/Time", sec=HEADER_SEC, nanosec=HEADER_NSEC)
    return build(ser, "std_msgs/msg/Header", stamp=stamp, frame_id=frame_id)


def serialize(message: Any, typename: str, ser: Serialization) -> bytes:
    store = STORES[ser]
    return bytes(store.serialize_ros1(message, typename) if ser == "ros1" else store.serialize_cdr(message, typename))


def run(
    message: Any,
    typename: str,
    ser: Serialization = "cdr",
    *,
    topic: str = "/topic",
    msgtype: str | None = None,
    static_tf: bool | None = None,
) -> list[Sample]:
    """Serialize, decode from bytes as a source would hand them over, extract."""
    raw = RawMessage(topic, msgtype or typename, RECEIVE_NS, serialize(message, typename, ser), ser)
    decoded = DECODER.decode(raw)
    assert not isinstance(decoded, BadMessage), decoded.reason
    return extract(decoded, raw, static_tf=static_tf)


def one(samples: list[Sample], cls: type[S]) -> S:
    assert len(samples) == 1, samples
    sample = samples[0]
    assert isinstance(sample, cls), sample
    return sample


def bad(samples: list[Sample], *words: str) -> BadMessage:
    sample = one(samples, BadMessage)
    for word in words:
        assert word in sample.reason, sample.reason
    return sample


def check_header_stamps(stamps: Any, frame_id: str = "camera_optical") -> None:
    assert stamps.receive_ns == RECEIVE_NS
    assert stamps.header_ns == HEADER_NS
    assert stamps.frame_id == frame_id


def assert_same_samples(got: list[Sample], expected: list[Sample]) -> None:
    """Field by field, arrays bit for bit (NaN payloads too) and of the same dtype."""
    assert [type(s) for s in got] == [type(s) for s in expected]
    for a, b in zip(got, expected, strict=True):
        for name in vars(b):
            x, y = getattr(a, name), getattr(b, name)
            if isinstance(y, np.ndarray):
                assert isinstance(x, np.ndarray), name
                assert (x.dtype, x.shape, x.tobytes()) == (y.dtype, y.shape, y.tobytes()), name
            else:
                assert x == y, name


def full_way(raw: RawMessage) -> list[Sample]:
    decoded = DECODER.decode(raw)
    return [decoded] if isinstance(decoded, BadMessage) else extract(decoded, raw)


def joint_state_raw(
    names: list[str],
    position: list[float],
    velocity: Sequence[float] = (),
    *,
    frame: str = "base_link",
    sec: int = HEADER_SEC,
    little_endian: bool = True,
) -> RawMessage:
    stamp = build("cdr", "builtin_interfaces/msg/Time", sec=sec, nanosec=HEADER_NSEC)
    msg = build(
        "cdr",
        "sensor_msgs/msg/JointState",
        header=build("cdr", "std_msgs/msg/Header", stamp=stamp, frame_id=frame),
        name=names,
        position=np.array(position, dtype=np.float64),
        velocity=np.array(velocity, dtype=np.float64),
    )
    data = bytes(STORES["cdr"].serialize_cdr(msg, "sensor_msgs/msg/JointState", little_endian=little_endian))
    return RawMessage("/joint_states", "sensor_msgs/msg/JointState", RECEIVE_NS + sec, data)


def vector3(ser: Serialization, x: float, y: float, z: float) -> Any:
    return build(ser, "geometry_msgs/msg/Vector3", x=x, y=y, z=z)


def transform(ser: Serialization, parent: str, child: str, xyz: tuple[float, ...], xyzw: tuple[float, ...]) -> Any:
    quaternion = build(ser, "geometry_msgs/msg/Quaternion", x=xyzw[0], y=xyzw[1], z=xyzw[2], w=xyzw[3])
    pose = build(ser, "geometry_msgs/msg/Transform", translation=vector3(ser, *xyz), rotation=quaternion)
    return build(
        ser, "geometry_msgs/msg/TransformStamped", header=header(ser, parent), child_frame_id=child, transform=pose
    )


def tf_message(ser: Serialization, *transforms: Any, typename: str = "tf2_msgs/msg/TFMessage") -> Any:
    return build(ser, typename, transforms=list(transforms))
