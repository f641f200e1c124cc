"""decode + extract: messages built with rosbags' typestores, serialized (CDR and ROS 1),
decoded and extracted; and the real third-party bags in test/resources."""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, TypeVar

import av
import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.interfaces import MessageDefinitionFormat
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from ortf_ros.io.mapped_file import MappedFile, locate
from ortf_ros.pipeline.decode import Decoder, canonical_msgtype, normalize_msgtype
from ortf_ros.pipeline.extract import SUPPORTED_TYPES, extract, supports
from ortf_ros.pipeline.fastpath import SampleDecoder
from ortf_ros.pipeline.samples import (
    BadMessage,
    CameraInfoSample,
    ImageSample,
    JointStateSample,
    RawMessage,
    RobotDescriptionSample,
    Sample,
    Serialization,
    Stamps,
    TransformSample,
    VectorSample,
    WrenchSample,
)
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.scene import BagFormat

RESOURCES = Path(__file__).parent / "resources"
GEOCAM = RESOURCES / "geocamxyz__rosbags-rs" / "tests" / "test_bags"
CRUISE = RESOURCES / "cruise-automation__rosbag.js" / "fixtures"
UBIQUITY = RESOURCES / "UbiquityRobotics__fiducials" / "fiducial_slam" / "test" / "aruco_images.bag"

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


# --- raw images ---------------------------------------------------------------------

RNG = np.random.default_rng(7)
H, W = 5, 7
RGB = RNG.integers(0, 256, (H, W, 3), dtype=np.uint8)
GRAY = RNG.integers(0, 256, (H, W), dtype=np.uint8)
ALPHA = RNG.integers(0, 256, (H, W, 1), dtype=np.uint8)


def image(ser: Serialization, encoding: str, rows: np.ndarray, *, pad: int = 0, big: bool = False) -> Any:
    """An Image whose rows are ``rows`` (H x row bytes) followed by ``pad`` junk bytes each."""
    rows = rows.reshape(rows.shape[0], -1).view(np.uint8)
    padded = np.hstack([rows, np.full((rows.shape[0], pad), 0xEE, np.uint8)])
    return build(
        ser,
        "sensor_msgs/msg/Image",
        header=header(ser),
        height=rows.shape[0],
        width=W,
        encoding=encoding,
        is_bigendian=int(big),
        step=padded.shape[1],
        data=padded.reshape(-1),
    )


COLOUR_CASES: dict[str, tuple[np.ndarray, np.ndarray]] = {  # encoding -> (rows as sent, RGB expected)
    "rgb8": (RGB, RGB),
    "bgr8": (RGB[:, :, ::-1], RGB),
    "rgba8": (np.concatenate([RGB, ALPHA], axis=2), RGB),
    "bgra8": (np.concatenate([RGB[:, :, ::-1], ALPHA], axis=2), RGB),
    "mono8": (GRAY, np.repeat(GRAY[:, :, None], 3, axis=2)),
}


@pytest.mark.parametrize("ser", SERIALIZATIONS)
@pytest.mark.parametrize("pad", [0, 3])
@pytest.mark.parametrize("encoding", list(COLOUR_CASES))
def test_colour_encodings_give_rgb(encoding: str, pad: int, ser: Serialization) -> None:
    rows, expected = COLOUR_CASES[encoding]
    sample = one(
        run(image(ser, encoding, np.ascontiguousarray(rows), pad=pad), "sensor_msgs/msg/Image", ser), ImageSample
    )
    assert sample.kind == "rgb"
    assert sample.pixels.dtype == np.uint8
    assert sample.pixels.shape == (H, W, 3)
    np.testing.assert_array_equal(sample.pixels, expected)
    check_header_stamps(sample.stamps)


def test_bgr_swaps_channels() -> None:
    red_bgr = np.zeros((H, W, 3), np.uint8)
    red_bgr[:, :, 2] = 255  # red, in B, G, R order
    sample = one(run(image("cdr", "bgr8", red_bgr), "sensor_msgs/msg/Image"), ImageSample)
    assert (sample.pixels[:, :, 0] == 255).all()
    assert (sample.pixels[:, :, 1:] == 0).all()


@pytest.mark.parametrize(
    ("encoding", "rows", "pad", "in_place"),
    [("rgb8", RGB, 0, True), ("16UC1", None, 0, True), ("rgb8", RGB, 3, False), ("bgr8", RGB[:, :, ::-1], 0, False)],
)
def test_an_image_in_a_mapped_file_stays_where_it_lies(
    tmp_path: Path, encoding: str, rows: np.ndarray | None, pad: int, in_place: bool
) -> None:
    """A message that is a view of a mapped recording (``mcap_chunks``) gives pixels that
    are a view of it too, which the writer hands to the encoder by their place in the file;
    where the pixels must be rearranged (row padding, BGR), they are a copy."""
    pixels = DEPTH_MM if rows is None else rows
    data = serialize(image("cdr", encoding, np.ascontiguousarray(pixels), pad=pad), "sensor_msgs/msg/Image", "cdr")
    file = tmp_path / "recording"
    file.write_bytes(b"x" * 100 + data)
    payload = memoryview(MappedFile(file))[100:]
    raw = RawMessage("/topic", "sensor_msgs/msg/Image", RECEIVE_NS, payload)
    decoded = DECODER.decode(raw)
    assert not isinstance(decoded, BadMessage)
    sample = one(extract(decoded, raw, static_tf=None), ImageSample)
    np.testing.assert_array_equal(sample.pixels, DEPTH_MM if rows is None else RGB)
    found = locate(sample.pixels)
    if not in_place:
        assert found is None
        return
    assert found is not None and found[1] == 100 + len(data) - pixels.nbytes  # (the pixels end the message)


DEPTH_MM = RNG.integers(0, 65536, (H, W), dtype=np.uint16)


@pytest.mark.parametrize("ser", SERIALIZATIONS)
@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("pad", [0, 2])
@pytest.mark.parametrize("encoding", ["mono16", "16UC1"])
def test_16bit_depth_is_exact(encoding: str, pad: int, big: bool, ser: Serialization) -> None:
    rows = DEPTH_MM.astype(">u2" if big else "<u2")
    sample = one(run(image(ser, encoding, rows, pad=pad, big=big), "sensor_msgs/msg/Image", ser), ImageSample)
    assert sample.kind == "depth"
    assert sample.pixels.dtype == np.uint16
    np.testing.assert_array_equal(sample.pixels, DEPTH_MM)


def test_big_endian_flag_is_honoured() -> None:
    """The same bytes read with the other byte order must give other values."""
    rows = DEPTH_MM.astype("<u2")
    sample = one(run(image("cdr", "16UC1", rows, big=True), "sensor_msgs/msg/Image"), ImageSample)
    np.testing.assert_array_equal(sample.pixels, DEPTH_MM.byteswap())


@pytest.mark.parametrize("big", [False, True])
def test_32fc1_metres_become_rounded_millimetres(big: bool) -> None:
    metres = np.array([[1.2346, 0.5, np.nan, np.inf, -np.inf, -1.0, 0.0, 0.0004, 65.535, 70.0, 0.0016]], np.float32)
    expected = np.array([[1235, 500, 0, 0, 0, 0, 0, 0, 65535, 65535, 2]], np.uint16)
    rows = metres.astype(">f4" if big else "<f4")
    msg = image("cdr", "32FC1", rows, pad=4, big=big)
    msg.width = metres.shape[1]
    sample = one(run(msg, "sensor_msgs/msg/Image"), ImageSample)
    assert sample.kind == "depth"
    np.testing.assert_array_equal(sample.pixels, expected)


def test_short_payload_is_bad() -> None:
    msg = image("cdr", "rgb8", RGB)
    msg.data = msg.data[:-1]
    bad(
        run(msg, "sensor_msgs/msg/Image", topic="/cam/image_raw"),
        "/cam/image_raw",
        "sensor_msgs/msg/Image",
        "104 bytes",
    )


def test_step_smaller_than_row_is_bad() -> None:
    msg = image("cdr", "rgb8", RGB)
    msg.step = W * 3 - 1
    bad(run(msg, "sensor_msgs/msg/Image"), "step 20", "21 bytes")


def test_unsupported_encoding_is_named() -> None:
    msg = image("cdr", "yuv422", np.zeros((H, W * 2), np.uint8))
    bad(run(msg, "sensor_msgs/msg/Image"), "'yuv422'", "unsupported image encoding")


def test_empty_image_is_bad() -> None:
    msg = image("cdr", "rgb8", RGB)
    msg.height = 0
    bad(run(msg, "sensor_msgs/msg/Image"), "empty image")


# --- compressed images --------------------------------------------------------------


def smooth_rgb(h: int = 48, w: int = 64) -> np.ndarray:
    """A gradient with a different pattern per channel, so a channel swap shows."""
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([x * 255 // (w - 1), y * 255 // (h - 1), np.full_like(x, 200)], axis=2).astype(np.uint8)


def encode_still(codec: Literal["mjpeg", "png"], array: np.ndarray, array_format: str, pix_fmt: str) -> bytes:
    ctx = av.CodecContext.create(codec, "w")
    ctx.width, ctx.height = array.shape[1], array.shape[0]
    ctx.pix_fmt = pix_fmt
    ctx.time_base = Fraction(1, 30)
    frame = av.VideoFrame.from_ndarray(array, format=array_format).reformat(format=pix_fmt)
    return b"".join(bytes(packet) for packet in [*ctx.encode(frame), *ctx.encode(None)])


def jpeg(array: np.ndarray) -> bytes:
    return encode_still("mjpeg", array, "rgb24", "yuvj444p")


def png16(depth: np.ndarray) -> bytes:
    return encode_still("png", depth, "gray16le", "gray16be")


def compressed(fmt: str, data: bytes) -> Any:
    payload = np.frombuffer(data, np.uint8)
    return build("cdr", "sensor_msgs/msg/CompressedImage", header=header("cdr"), format=fmt, data=payload)


@pytest.mark.parametrize("fmt", ["jpeg", "jpg", "rgb8; jpeg compressed bgr8", ""])
def test_jpeg_round_trip(fmt: str) -> None:
    rgb = smooth_rgb()
    sample = one(run(compressed(fmt, jpeg(rgb)), "sensor_msgs/msg/CompressedImage"), ImageSample)
    assert sample.kind == "rgb"
    assert sample.pixels.shape == rgb.shape
    assert sample.pixels.dtype == np.uint8
    error = np.abs(sample.pixels.astype(int) - rgb.astype(int))
    assert error.mean() < 2.0
    assert error.max() < 24
    check_header_stamps(sample.stamps)


@pytest.mark.parametrize("fmt", ["png", "bgr8; png compressed bgr8"])
def test_png_round_trip_is_exact(fmt: str) -> None:
    rgb = RNG.integers(0, 256, (9, 11, 3), dtype=np.uint8)
    data = encode_still("png", rgb, "rgb24", "rgb24")
    sample = one(run(compressed(fmt, data), "sensor_msgs/msg/CompressedImage"), ImageSample)
    assert sample.kind == "rgb"
    np.testing.assert_array_equal(sample.pixels, rgb)


def test_16bit_grey_png_is_depth() -> None:
    sample = one(
        run(compressed("16UC1; png compressed", png16(DEPTH_MM)), "sensor_msgs/msg/CompressedImage"), ImageSample
    )
    assert sample.kind == "depth"
    np.testing.assert_array_equal(sample.pixels, DEPTH_MM)


@pytest.mark.parametrize("fmt", ["16UC1; compressedDepth", "16UC1; compressedDepth png", "mono16; compressedDepth png"])
def test_compressed_depth_16bit_is_exact(fmt: str) -> None:
    data = struct.pack("<iff", 0, 0.0, 0.0) + png16(DEPTH_MM)
    sample = one(run(compressed(fmt, data), "sensor_msgs/msg/CompressedImage"), ImageSample)
    assert sample.kind == "depth"
    assert sample.pixels.dtype == np.uint16
    np.testing.assert_array_equal(sample.pixels, DEPTH_MM)


def test_compressed_depth_32f_inverse_depth() -> None:
    """compressed_depth_image_transport's quantisation with depth_max 10 m, quantization 100."""
    metres = np.array([[0.5, 1.0, 2.5, 9.0, np.nan, 20.0]], np.float32)
    quant_a = np.float32(100.0 * 101.0)
    quant_b = np.float32(1.0 - quant_a / 10.0)
    with np.errstate(invalid="ignore"):
        inverse = np.where(metres < 10.0, quant_a / metres + quant_b, 0).astype(np.uint16)
    data = struct.pack("<iff", 0, quant_a, quant_b) + png16(inverse)
    sample = one(run(compressed("32FC1; compressedDepth png", data), "sensor_msgs/msg/CompressedImage"), ImageSample)
    assert sample.kind == "depth"
    np.testing.assert_array_equal(sample.pixels, [[500, 1000, 2500, 9002, 0, 0]])


def test_compressed_depth_rvl_is_rejected() -> None:
    data = struct.pack("<iff", 0, 0.0, 0.0) + struct.pack("<II", W, H) + bytes(16)
    bad(run(compressed("16UC1; compressedDepth rvl", data), "sensor_msgs/msg/CompressedImage"), "RVL")


def test_compressed_depth_of_8bit_png_is_bad() -> None:
    data = struct.pack("<iff", 0, 0.0, 0.0) + encode_still("png", RGB, "rgb24", "rgb24")
    bad(run(compressed("16UC1; compressedDepth png", data), "sensor_msgs/msg/CompressedImage"), "16-bit grey")


def test_truncated_jpeg_is_bad_not_a_half_grey_frame() -> None:
    data = jpeg(smooth_rgb(96, 128))
    bad(run(compressed("jpeg", data[: len(data) // 2]), "sensor_msgs/msg/CompressedImage"), "do not decode as JPEG")


@pytest.mark.parametrize(
    ("fmt", "data", "words"),
    [
        ("jpeg", b"\xff\xd8\xff\xe0\x00\x10JFIF", ("10 bytes", "JPEG")),
        ("png", b"\xff\xd8\xff\xe0\x00\x10JFIF", ("do not start like a PNG",)),
        ("jpeg", b"GIF89a......", ("do not start like a JPEG",)),
        ("tiff", b"II*\x00", ("unsupported compressed format 'tiff'",)),
        ("", b"\x00\x01\x02", ("neither JPEG nor PNG",)),
        ("16UC1; compressedDepth", b"\x00" * 12, ("no image after its 12-byte header",)),
    ],
)
def test_undecodable_compressed_images_are_bad(fmt: str, data: bytes, words: tuple[str, ...]) -> None:
    bad(
        run(compressed(fmt, data), "sensor_msgs/msg/CompressedImage", topic="/cam/compressed"),
        "/cam/compressed",
        *words,
    )


# --- camera info, joints, wrench ----------------------------------------------------


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_camera_info(ser: Serialization) -> None:
    k = np.array([500.0, 0, 320, 0, 505.0, 240, 0, 0, 1])
    d = np.array([0.1, -0.2, 0.001, 0.002, 0.0])
    fields = {"K": k, "D": d} if ser == "ros1" else {"k": k, "d": d}
    msg = build(
        ser,
        "sensor_msgs/msg/CameraInfo",
        header=header(ser),
        width=640,
        height=480,
        distortion_model="plumb_bob",
        **fields,
    )
    sample = one(run(msg, "sensor_msgs/msg/CameraInfo", ser), CameraInfoSample)
    assert (sample.width, sample.height, sample.distortion_model) == (640, 480, "plumb_bob")
    assert sample.k == tuple(k)
    assert sample.d == tuple(d)
    check_header_stamps(sample.stamps)


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_joint_state_keeps_names_in_message_order(ser: Serialization) -> None:
    msg = build(
        ser,
        "sensor_msgs/msg/JointState",
        header=header(ser, "base_link"),
        name=["elbow", "shoulder", "wrist"],
        position=np.array([0.3, 0.1, 0.5]),
        velocity=np.array([-1.0, 2.0, 0.25]),
    )
    sample = one(run(msg, "sensor_msgs/msg/JointState", ser), JointStateSample)
    assert sample.names == ("elbow", "shoulder", "wrist")
    assert sample.position.dtype == np.float64
    np.testing.assert_array_equal(sample.position, [0.3, 0.1, 0.5])
    np.testing.assert_array_equal(sample.velocity, [-1.0, 2.0, 0.25])
    assert sample.effort.shape == (0,)
    check_header_stamps(sample.stamps, "base_link")
    # reorder-ready: index by name
    order = ["shoulder", "elbow", "wrist"]
    by_name = dict(zip(sample.names, sample.position, strict=True))
    assert [by_name[n] for n in order] == [0.1, 0.3, 0.5]


@pytest.mark.parametrize(
    ("names", "position", "effort", "words"),
    [
        (["a", "b", "c"], [1.0, 2.0], [], ("position has 2 values for 3 joint names",)),
        (["a", "b"], [1.0, 2.0], [1.0, 2.0, 3.0], ("effort has 3 values for 2 joint names",)),
        (["a", "b", "a"], [1.0, 2.0, 3.0], [], ("joint names repeat: a",)),
        ([], [1.0], [1.0, 2.0], ("effort has 2 values for 1 position (the message lists no joint names)",)),
        ([], [], [1.0], ("lists no joint names and no position",)),
    ],
)
def test_joint_state_lengths_must_agree(
    names: list[str], position: list[float], effort: list[float], words: tuple[str, ...]
) -> None:
    msg = build(
        "cdr",
        "sensor_msgs/msg/JointState",
        header=header("cdr"),
        name=names,
        position=np.array(position),
        effort=np.array(effort),
    )
    bad(run(msg, "sensor_msgs/msg/JointState", topic="/joint_states"), "/joint_states", *words)


def test_joint_state_without_positions_is_kept() -> None:
    msg = build("cdr", "sensor_msgs/msg/JointState", name=["a"], effort=np.array([4.0]))
    sample = one(run(msg, "sensor_msgs/msg/JointState"), JointStateSample)
    assert sample.position.shape == (0,)
    np.testing.assert_array_equal(sample.effort, [4.0])


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_joint_state_without_names_keeps_its_values_for_the_layout_to_name(ser: Serialization) -> None:
    msg = build(ser, "sensor_msgs/msg/JointState", header=header(ser), position=np.array([0.1, 0.2, 0.3]))
    sample = one(run(msg, "sensor_msgs/msg/JointState", ser), JointStateSample)
    assert sample.names == ()
    np.testing.assert_array_equal(sample.position, [0.1, 0.2, 0.3])
    assert sample.velocity.shape == sample.effort.shape == (0,)


def vector3(ser: Serialization, x: float, y: float, z: float) -> Any:
    return build(ser, "geometry_msgs/msg/Vector3", x=x, y=y, z=z)


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_wrench_stamped_and_bare(ser: Serialization) -> None:
    wrench = build(
        ser, "geometry_msgs/msg/Wrench", force=vector3(ser, 1.5, -2.0, 9.81), torque=vector3(ser, 0.1, 0.2, -0.3)
    )
    stamped = build(ser, "geometry_msgs/msg/WrenchStamped", header=header(ser, "ft_sensor"), wrench=wrench)
    sample = one(run(stamped, "geometry_msgs/msg/WrenchStamped", ser), WrenchSample)
    np.testing.assert_array_equal(sample.force, [1.5, -2.0, 9.81])
    np.testing.assert_array_equal(sample.torque, [0.1, 0.2, -0.3])
    check_header_stamps(sample.stamps, "ft_sensor")
    bare = one(run(wrench, "geometry_msgs/msg/Wrench", ser), WrenchSample)
    np.testing.assert_array_equal(bare.force, [1.5, -2.0, 9.81])
    assert bare.stamps.header_ns is None
    assert bare.stamps.receive_ns == RECEIVE_NS


# --- TF -----------------------------------------------------------------------------


def transform(ser: Serialization, parent: str, child: str, xyz: tuple[float, ...], xyzw: tuple[float, ...]) -> Any:
    quaternion = build(ser, "geometry_msgs/msg/Quaternion", x=xyzw[0], y=xyzw[1], z=xyzw[2], w=xyzw[3])
    pose = build(ser, "geometry_msgs/msg/Transform", translation=vector3(ser, *xyz), rotation=quaternion)
    return build(
        ser, "geometry_msgs/msg/TransformStamped", header=header(ser, parent), child_frame_id=child, transform=pose
    )


def tf_message(ser: Serialization, *transforms: Any, typename: str = "tf2_msgs/msg/TFMessage") -> Any:
    return build(ser, typename, transforms=list(transforms))


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_tf_quaternion_becomes_wxyz(ser: Serialization) -> None:
    msg = tf_message(ser, transform(ser, "world", "base", (1.0, 2.0, 3.0), (0.0, 0.0, 0.7071, 0.7071)))
    sample = one(run(msg, "tf2_msgs/msg/TFMessage", ser, topic="/tf"), TransformSample)
    assert (sample.parent, sample.child) == ("world", "base")
    np.testing.assert_allclose(sample.rotation, [0.70710678, 0.0, 0.0, 0.70710678], atol=1e-8)
    np.testing.assert_array_equal(sample.translation, [1.0, 2.0, 3.0])
    assert sample.static is False
    check_header_stamps(sample.stamps, "world")
    # the rotation really is +90 degrees about z: it takes x to y
    w, x, y, z = sample.rotation
    rotated_x = np.array([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)])
    np.testing.assert_allclose(rotated_x, [0.0, 1.0, 0.0], atol=1e-8)


def test_tf_keeps_good_transforms_and_flags_bad_ones() -> None:
    msg = tf_message(
        "cdr",
        transform("cdr", "/world", "/base", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 2.0)),
        transform("cdr", "world", "arm", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)),
        transform("cdr", "world", "cam", (0.0, 0.0, 0.0), (np.nan, 0.0, 0.0, 1.0)),
        transform("cdr", "world", "tool", (np.inf, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)),
        transform("cdr", "", "gripper", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)),
        transform("cdr", "base", "flange", (0.5, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)),
    )
    samples = run(msg, "tf2_msgs/msg/TFMessage", topic="/tf")
    assert [type(s).__name__ for s in samples] == [
        "TransformSample",
        "BadMessage",
        "BadMessage",
        "BadMessage",
        "BadMessage",
        "TransformSample",
    ]
    first, last = samples[0], samples[-1]
    assert isinstance(first, TransformSample) and isinstance(last, TransformSample)
    assert (first.parent, first.child) == ("world", "base")  # leading "/" dropped, as tf2 does
    np.testing.assert_array_equal(first.rotation, [1.0, 0.0, 0.0, 0.0])  # normalised
    np.testing.assert_array_equal(last.rotation, [0.0, 1.0, 0.0, 0.0])  # xyzw (1,0,0,0) -> wxyz (0,1,0,0)
    reasons = [s.reason for s in samples if isinstance(s, BadMessage)]
    assert "'world' -> 'arm'" in reasons[0] and "not a rotation" in reasons[0]
    assert "'world' -> 'cam'" in reasons[1] and "not a rotation" in reasons[1]
    assert "non-finite translation" in reasons[2]
    assert "empty frame id" in reasons[3]
    assert all(r.startswith("/tf (tf2_msgs/msg/TFMessage): ") for r in reasons)


@pytest.mark.parametrize(
    ("topic", "static_tf", "expected"),
    [
        ("/tf", None, False),
        ("/tf_static", None, True),
        ("/robot1/tf_static", None, True),
        ("/tf", True, True),
        ("/tf_static", False, False),
    ],
)
def test_static_flag(topic: str, static_tf: bool | None, expected: bool) -> None:
    msg = tf_message("cdr", transform("cdr", "world", "base", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
    sample = one(run(msg, "tf2_msgs/msg/TFMessage", topic=topic, static_tf=static_tf), TransformSample)
    assert sample.static is expected


@pytest.mark.parametrize("ser", SERIALIZATIONS)
@pytest.mark.parametrize("msgtype", ["tf/tfMessage", "tf/msg/tfMessage"])
def test_legacy_tf_message_decodes_like_tf2(msgtype: str, ser: Serialization) -> None:
    """No registration: the decoder knows ROS 1's tf/tfMessage by itself."""
    msg = tf_message(ser, transform(ser, "/odom", "/base_footprint", (1.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
    samples = run(msg, "tf/msg/tfMessage", ser, topic="/tf", msgtype=msgtype)
    sample = one(samples, TransformSample)
    assert (sample.parent, sample.child) == ("odom", "base_footprint")


# --- robot description and actions --------------------------------------------------


def test_string_becomes_robot_description() -> None:
    urdf = '<robot name="r"><link name="base"/></robot>'
    sample = one(run(build("cdr", "std_msgs/msg/String", data=urdf), "std_msgs/msg/String"), RobotDescriptionSample)
    assert sample.urdf == urdf
    assert sample.stamps.header_ns is None


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_joint_trajectory_first_point(ser: Serialization) -> None:
    points = [
        build(ser, "trajectory_msgs/msg/JointTrajectoryPoint", positions=np.array([0.5, -0.5])),
        build(ser, "trajectory_msgs/msg/JointTrajectoryPoint", positions=np.array([9.0, 9.0])),
    ]
    msg = build(ser, "trajectory_msgs/msg/JointTrajectory", header=header(ser), joint_names=["j2", "j1"], points=points)
    sample = one(run(msg, "trajectory_msgs/msg/JointTrajectory", ser), VectorSample)
    assert sample.names == ("j2", "j1")
    np.testing.assert_array_equal(sample.values, [0.5, -0.5])
    check_header_stamps(sample.stamps)


def test_joint_trajectory_without_points_or_with_wrong_length_is_bad() -> None:
    empty = build("cdr", "trajectory_msgs/msg/JointTrajectory", joint_names=["a"])
    bad(run(empty, "trajectory_msgs/msg/JointTrajectory"), "no points")
    point = build("cdr", "trajectory_msgs/msg/JointTrajectoryPoint", positions=np.array([1.0, 2.0]))
    wrong = build("cdr", "trajectory_msgs/msg/JointTrajectory", joint_names=["a"], points=[point])
    bad(run(wrong, "trajectory_msgs/msg/JointTrajectory"), "2 positions for 1 joint names")


def multi_array(labels: list[str], data: list[float], offset: int = 0) -> Any:
    dims = [build("cdr", "std_msgs/msg/MultiArrayDimension", label=label, size=1, stride=1) for label in labels]
    layout = build("cdr", "std_msgs/msg/MultiArrayLayout", dim=dims, data_offset=offset)
    return build("cdr", "std_msgs/msg/Float64MultiArray", layout=layout, data=np.array(data))


@pytest.mark.parametrize(
    ("labels", "data", "offset", "names", "values"),
    [
        ([], [1.0, 2.0, 3.0], 0, ("0", "1", "2"), [1.0, 2.0, 3.0]),
        (["x", "y"], [1.0, 2.0], 0, ("x", "y"), [1.0, 2.0]),
        (["joints"], [4.0, 5.0], 0, ("joints_0", "joints_1"), [4.0, 5.0]),
        ([], [0.0, 7.0, 8.0], 1, ("0", "1"), [7.0, 8.0]),
    ],
)
def test_float64_multi_array(
    labels: list[str], data: list[float], offset: int, names: tuple[str, ...], values: list[float]
) -> None:
    sample = one(run(multi_array(labels, data, offset), "std_msgs/msg/Float64MultiArray"), VectorSample)
    assert sample.names == names
    np.testing.assert_array_equal(sample.values, values)


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_twist_and_twist_stamped(ser: Serialization) -> None:
    twist = build(ser, "geometry_msgs/msg/Twist", linear=vector3(ser, 1, 2, 3), angular=vector3(ser, 4, 5, 6))
    names = ("linear_x", "linear_y", "linear_z", "angular_x", "angular_y", "angular_z")
    sample = one(run(twist, "geometry_msgs/msg/Twist", ser), VectorSample)
    assert sample.names == names
    np.testing.assert_array_equal(sample.values, [1, 2, 3, 4, 5, 6])
    assert sample.stamps.header_ns is None
    stamped = build(ser, "geometry_msgs/msg/TwistStamped", header=header(ser), twist=twist)
    sample = one(run(stamped, "geometry_msgs/msg/TwistStamped", ser), VectorSample)
    np.testing.assert_array_equal(sample.values, [1, 2, 3, 4, 5, 6])
    check_header_stamps(sample.stamps)


def test_pose_stamped_is_xyz_wxyz() -> None:
    position = build("cdr", "geometry_msgs/msg/Point", x=0.1, y=0.2, z=0.3)
    orientation = build("cdr", "geometry_msgs/msg/Quaternion", x=0.0, y=0.0, z=0.7071, w=0.7071)
    pose = build("cdr", "geometry_msgs/msg/Pose", position=position, orientation=orientation)
    msg = build("cdr", "geometry_msgs/msg/PoseStamped", header=header("cdr", "base"), pose=pose)
    sample = one(run(msg, "geometry_msgs/msg/PoseStamped"), VectorSample)
    assert sample.names == ("x", "y", "z", "qw", "qx", "qy", "qz")
    np.testing.assert_array_equal(sample.values, [0.1, 0.2, 0.3, 0.7071, 0.0, 0.0, 0.7071])
    check_header_stamps(sample.stamps, "base")


@pytest.mark.parametrize(
    ("typename", "value", "expected"),
    [("std_msgs/msg/Float64", 0.042, 0.042), ("std_msgs/msg/Bool", True, 1.0), ("std_msgs/msg/Bool", False, 0.0)],
)
def test_gripper_commands(typename: str, value: float | bool, expected: float) -> None:
    sample = one(run(build("cdr", typename, data=value), typename), VectorSample)
    assert sample.names == ("gripper",)
    np.testing.assert_array_equal(sample.values, [expected])


def test_other_types_are_ignored() -> None:
    imu = build("cdr", "sensor_msgs/msg/Imu", header=header("cdr"))
    assert run(imu, "sensor_msgs/msg/Imu") == []
    assert not supports("sensor_msgs/msg/Imu")
    assert supports("sensor_msgs/Image")
    assert supports("tf/tfMessage")
    assert "tf2_msgs/msg/TFMessage" in SUPPORTED_TYPES


# --- decode -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "normalized", "canonical"),
    [
        ("sensor_msgs/Image", "sensor_msgs/msg/Image", "sensor_msgs/msg/Image"),
        ("sensor_msgs/msg/Image", "sensor_msgs/msg/Image", "sensor_msgs/msg/Image"),
        ("tf/tfMessage", "tf/msg/tfMessage", "tf2_msgs/msg/TFMessage"),
        ("tf2_msgs/TFMessage", "tf2_msgs/msg/TFMessage", "tf2_msgs/msg/TFMessage"),
    ],
)
def test_type_names_are_normalised(name: str, normalized: str, canonical: str) -> None:
    assert normalize_msgtype(name) == normalized
    assert canonical_msgtype(name) == canonical


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_legacy_short_type_names_decode(ser: Serialization) -> None:
    """Old .db3 files and ROS 1 name types pkg/Type."""
    msg = build(ser, "sensor_msgs/msg/JointState", name=["a"], position=np.array([1.0]))
    sample = one(run(msg, "sensor_msgs/msg/JointState", ser, msgtype="sensor_msgs/JointState"), JointStateSample)
    assert sample.names == ("a",)


def joint_state_bytes(ser: Serialization) -> bytes:
    msg = build(ser, "sensor_msgs/msg/JointState", header=header(ser), name=["shoulder"], position=np.array([1.0]))
    return serialize(msg, "sensor_msgs/msg/JointState", ser)


@pytest.mark.parametrize("ser", SERIALIZATIONS)
@pytest.mark.parametrize("cut", [1, 9, 30])
def test_truncated_bytes_are_bad_messages(cut: int, ser: Serialization) -> None:
    data = joint_state_bytes(ser)
    raw = RawMessage("/joint_states", "sensor_msgs/msg/JointState", RECEIVE_NS, data[:-cut], ser)
    result = DECODER.decode(raw)
    assert isinstance(result, BadMessage)
    assert result.topic == "/joint_states"
    assert result.receive_ns == RECEIVE_NS
    assert result.reason.startswith("/joint_states (sensor_msgs/msg/JointState): cannot decode")
    assert extract(result, raw) == [result]


def test_garbage_cdr_header_is_bad() -> None:
    raw = RawMessage("/x", "std_msgs/msg/String", RECEIVE_NS, b"\x07\x07\x00\x00abcd")
    result = DECODER.decode(raw)
    assert isinstance(result, BadMessage)
    assert "encapsulation" in result.reason


def test_sequence_length_beyond_the_payload_is_bad() -> None:
    data = bytearray(joint_state_bytes("cdr"))
    # the name sequence's length (after encapsulation, stamp and frame id) claims 2**31 entries
    offset = 4 + 8 + 4 + len(b"/camera_optical\x00")
    offset += -offset % 4
    assert struct.unpack_from("<I", data, offset)[0] == 1
    struct.pack_into("<I", data, offset, 2**31)
    result = DECODER.decode(RawMessage("/j", "sensor_msgs/msg/JointState", RECEIVE_NS, bytes(data)))
    assert isinstance(result, BadMessage)


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_unknown_type_is_bad(ser: Serialization) -> None:
    result = DECODER.decode(RawMessage("/gadget", "my_pkg/msg/Gadget", RECEIVE_NS, b"\x00\x01\x00\x00", ser))
    assert isinstance(result, BadMessage)
    assert result.reason.startswith("/gadget (my_pkg/msg/Gadget): unknown message type")


GRIP_MSG = "float64 width\nstring tool\n"
GRIP_IDL = """
module my_pkg {
  module msg {
    struct Grip {
      double width;
      string tool;
    };
  };
};
"""


def grip_bytes(definition: str, ser: Serialization, **fields: Any) -> bytes:
    store = get_typestore(Stores.EMPTY)
    store.register(get_types_from_msg(definition, "my_pkg/msg/Grip"))
    msg = store.types["my_pkg/msg/Grip"](**fields)
    if ser == "ros1":
        return bytes(store.serialize_ros1(msg, "my_pkg/msg/Grip"))
    return bytes(store.serialize_cdr(msg, "my_pkg/msg/Grip"))


@pytest.mark.parametrize(
    ("ser", "fmt", "definition"),
    [("cdr", "ros2msg", GRIP_MSG), ("cdr", "ros2idl", GRIP_IDL), ("ros1", "ros1msg", GRIP_MSG)],
)
def test_register_a_recordings_type(ser: Serialization, fmt: Any, definition: str) -> None:
    decoder = Decoder()
    raw = RawMessage("/grip", "my_pkg/Grip", RECEIVE_NS, grip_bytes(GRIP_MSG, ser, width=0.08, tool="pinch"), ser)
    assert isinstance(decoder.decode(raw), BadMessage)
    decoder.register("my_pkg/Grip", definition, fmt)
    message = decoder.decode(raw)
    assert not isinstance(message, BadMessage), message.reason
    assert (getattr(message, "width", None), getattr(message, "tool", None)) == (0.08, "pinch")


def test_register_concatenated_idl_as_rosbag2_stores_it() -> None:
    separator = "=" * 80 + "\n"
    decoder = Decoder()
    decoder.register("my_pkg/msg/Grip", f"{separator}IDL: my_pkg/msg/Grip\n{GRIP_IDL}", "ros2idl")
    raw = RawMessage("/grip", "my_pkg/msg/Grip", RECEIVE_NS, grip_bytes(GRIP_MSG, "cdr", width=1.0, tool="t"))
    assert getattr(decoder.decode(raw), "width", None) == 1.0
    assert get_types_from_idl(GRIP_IDL)  # the same IDL parses on its own


def test_a_recordings_definition_replaces_a_different_one() -> None:
    decoder = Decoder()
    decoder.register("my_pkg/msg/Grip", GRIP_MSG, "ros2msg")
    changed = "float32 width\nuint8 mode\nstring tool\n"
    decoder.register("my_pkg/msg/Grip", changed, "ros2msg")
    data = grip_bytes(changed, "cdr", width=0.5, mode=3, tool="x")
    message = decoder.decode(RawMessage("/grip", "my_pkg/msg/Grip", RECEIVE_NS, data))
    assert (getattr(message, "width", None), getattr(message, "mode", None)) == (0.5, 3)
    # the built-in types are still there
    assert not isinstance(
        decoder.decode(RawMessage("/j", "sensor_msgs/msg/JointState", 0, joint_state_bytes("cdr"))), BadMessage
    )


@pytest.mark.parametrize(
    ("definition", "words"),
    [
        ("float64[ width", "its ros2msg definition does not parse: Could not parse:"),
        ("this is { not a msg", "its ros2msg definition uses types it does not define: my_pkg/msg/this"),
    ],
)
def test_broken_definition_is_reported_per_message(definition: str, words: str) -> None:
    decoder = Decoder()
    decoder.register("my_pkg/msg/Grip", definition, "ros2msg")
    result = decoder.decode(RawMessage("/grip", "my_pkg/msg/Grip", RECEIVE_NS, b"\x00\x01\x00\x00"))
    assert isinstance(result, BadMessage)
    assert result.reason.startswith(f"/grip (my_pkg/msg/Grip): {words}")
    assert "\n" not in result.reason
    # a later, sound definition of the type replaces the complaint
    decoder.register("my_pkg/msg/Grip", GRIP_MSG, "ros2msg")
    data = grip_bytes(GRIP_MSG, "cdr", width=2.0, tool="t")
    assert getattr(decoder.decode(RawMessage("/grip", "my_pkg/msg/Grip", RECEIVE_NS, data)), "width", None) == 2.0


# --- real recordings ----------------------------------------------------------------


def read_recording(
    path: Path, decoder: Decoder, topics: set[str] | None = None, *, register: bool = True
) -> Iterator[RawMessage]:
    """What a bag source does: raw bytes with receive time, definitions registered first."""
    with AnyReader([path], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        ser: Serialization = "cdr" if reader.is2 else "ros1"
        connections = [c for c in reader.connections if topics is None or c.topic in topics]
        for connection in connections if register else []:
            if connection.msgdef.format == MessageDefinitionFormat.MSG:
                decoder.register(connection.msgtype, connection.msgdef.data, "ros2msg" if reader.is2 else "ros1msg")
            elif connection.msgdef.format == MessageDefinitionFormat.IDL:
                decoder.register(connection.msgtype, connection.msgdef.data, "ros2idl")
        for connection, receive_ns, data in reader.messages(connections=connections):
            yield RawMessage(connection.topic, connection.msgtype, receive_ns, bytes(data), ser)


def decode_and_extract(raws: Iterator[RawMessage], decoder: Decoder) -> list[tuple[RawMessage, list[Sample]]]:
    out: list[tuple[RawMessage, list[Sample]]] = []
    for raw in raws:
        decoded = decoder.decode(raw)
        samples: list[Sample] = [decoded] if isinstance(decoded, BadMessage) else extract(decoded, raw)
        out.append((raw, samples))
    return out


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_geocamxyz_bag_extracts_or_rejects_every_message(storage: str) -> None:
    decoder = Decoder()
    results = decode_and_extract(read_recording(GEOCAM / f"test_bag_{storage}", decoder), decoder)
    assert len(results) == 188

    bad_by_topic = Counter(s.topic for _, samples in results for s in samples if isinstance(s, BadMessage))
    assert bad_by_topic == {"/test/sensor_msgs/image": 2, "/test/sensor_msgs/compressed_image": 2}
    reasons = sorted({s.reason for _, samples in results for s in samples if isinstance(s, BadMessage)})
    assert len(reasons) == 2
    assert reasons[0].startswith("/test/sensor_msgs/compressed_image (sensor_msgs/msg/CompressedImage): ")
    assert "10 bytes do not decode as JPEG" in reasons[0]
    assert reasons[1] == (
        "/test/sensor_msgs/image (sensor_msgs/msg/Image): data holds 30 bytes, 640x480 rgb8 with step 1920 needs 921600"
    )

    def samples_of(topic: str) -> list[Sample]:
        return [s for raw, samples in results if raw.topic == topic for s in samples]

    joints = samples_of("/test/sensor_msgs/joint_state")
    assert len(joints) == 2
    for joint in joints:
        assert isinstance(joint, JointStateSample)
        assert joint.names == ("joint1", "joint2", "joint3")
        np.testing.assert_array_equal(joint.position, [0.1, 0.2, 0.3])
        np.testing.assert_array_equal(joint.velocity, [0.01, 0.02, 0.03])
        np.testing.assert_array_equal(joint.effort, [1.0, 2.0, 3.0])
        assert joint.stamps.frame_id == "test_frame"
        assert joint.stamps.header_ns is not None and joint.stamps.header_ns > 1_700_000_000 * 10**9

    for topic in ("/test/geometry_msgs/wrench_stamped", "/test/geometry_msgs/wrench"):
        wrenches = samples_of(topic)
        assert len(wrenches) == 2
        for wrench in wrenches:
            assert isinstance(wrench, WrenchSample)
            np.testing.assert_array_equal(wrench.force, [10.0, 5.0, 2.0])
            np.testing.assert_array_equal(wrench.torque, [0.1, 0.2, 0.3])

    transforms = samples_of("/test/tf2_msgs/tf_message")
    assert len(transforms) == 2
    for sample in transforms:
        assert isinstance(sample, TransformSample)
        assert (sample.parent, sample.child, sample.static) == ("test_frame", "child_frame", False)
        np.testing.assert_array_equal(sample.translation, [1.0, 2.0, 3.0])
        np.testing.assert_array_equal(sample.rotation, [1.0, 0.0, 0.0, 0.0])  # identity: xyzw (0, 0, 0, 1)

    infos = samples_of("/test/sensor_msgs/camera_info")
    assert len(infos) == 2 and all(isinstance(s, CameraInfoSample) for s in infos)
    kinds = Counter(type(s).__name__ for _, samples in results for s in samples)
    assert kinds["VectorSample"] == 2 * 7  # Twist(Stamped), Pose(Stamped), Float64, Bool, Float64MultiArray
    ignored = sum(1 for raw, samples in results if not samples)
    assert ignored == 188 - sum(1 for raw, _ in results if supports(raw.msgtype))


CRUISE_TF_MESSAGES = 2688


@pytest.mark.parametrize("register", [True, False])
@pytest.mark.parametrize("name", ["example.bag", "example-lz4.bag", "example-bz2.bag"])
def test_cruise_legacy_tf_in_every_compression(name: str, register: bool) -> None:
    decoder = Decoder()
    raws = read_recording(CRUISE / name, decoder, {"/tf", "/tf_static"}, register=register)
    results = decode_and_extract(raws, decoder)
    tf = [(raw, samples) for raw, samples in results if raw.topic == "/tf"]
    assert len(tf) == CRUISE_TF_MESSAGES
    assert {raw.msgtype for raw, _ in tf} == {"tf/msg/tfMessage"}
    assert {raw.serialization for raw, _ in tf} == {"ros1"}
    transforms = [s for _, samples in tf for s in samples]
    assert len(transforms) == CRUISE_TF_MESSAGES
    assert all(isinstance(s, TransformSample) and not s.static for s in transforms)
    pairs = Counter((s.parent, s.child) for s in transforms if isinstance(s, TransformSample))
    assert set(pairs) == {("world", "turtle1"), ("world", "turtle2")}
    static = [s for raw, samples in results if raw.topic == "/tf_static" for s in samples]
    assert static and all(isinstance(s, TransformSample) and s.static for s in static)


def test_ubiquity_jpeg_matches_its_camera_info() -> None:
    decoder = Decoder()
    results = decode_and_extract(read_recording(UBIQUITY, decoder), decoder)
    samples = [s for _, samples in results for s in samples]
    images = [s for s in samples if isinstance(s, ImageSample)]
    infos = [s for s in samples if isinstance(s, CameraInfoSample)]
    assert len(images) == 1 and len(infos) == 15 and len(samples) == 16
    frame = images[0]
    assert frame.kind == "rgb"
    assert frame.pixels.shape == (infos[0].height, infos[0].width, 3) == (960, 1280, 3)
    assert frame.pixels.dtype == np.uint8
    assert frame.pixels.std() > 10  # a real picture, not a flat concealment fill
    assert frame.stamps.header_ns == 1_491_682_360_314_066_469
    assert frame.stamps.frame_id == "raspicam"
    assert infos[0].k[0] == pytest.approx(1014.3431, abs=1e-3)
    assert infos[0].distortion_model == "plumb_bob"
    assert len(infos[0].d) == 5


# --- the fast path: fixed-layout messages read straight from their CDR bytes --------------


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


@pytest.mark.parametrize("fmt", ["mcap", "sqlite3", "ros1"])
def test_fast_path_equals_the_full_decode_on_an_analytic_bag(tmp_path: Path, fmt: BagFormat) -> None:
    write_teleop_bag(tmp_path / "bag", fmt, duration_s=0.5, with_depth=False)
    with BagSource(tmp_path / "bag") as source:
        kinds = ("/JointState", "/WrenchStamped", "/TFMessage", "/tfMessage")
        topics = {t.topic for t in source.topics() if t.msgtype.endswith(kinds)}
        decoder = SampleDecoder(Decoder())
        count = 0
        for raw in source.messages(topics):
            assert_same_samples(decoder.samples(raw), full_way(raw))
            count += 1
    assert count > 500
    if fmt == "ros1":
        assert decoder.fast_reads == 0  # ROS 1 serialization always goes the full way
    else:
        # All but each topic's first message, and the first of the finger-only joint states (a layout of their own).
        assert decoder.fast_reads == count - len(topics) - 1


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


def test_fast_path_follows_a_layout_that_changes_mid_topic() -> None:
    a, b = ["shoulder", "elbow"], ["shoulder", "elbaw"]  # same lengths, other bytes
    good = joint_state_raw(a, [0.1, 0.2], [1.0, 2.0])
    messages = [
        good,
        joint_state_raw(a, [0.3, np.nan], [-1.0, np.inf], sec=HEADER_SEC + 1),  # same layout: fast
        joint_state_raw(b, [0.5, 0.6], [3.0, 4.0]),  # other names, same length
        joint_state_raw(a, [0.5, 0.6], [3.0, 4.0], frame="base_lonk"),  # other frame id, same length
        joint_state_raw(a, [0.5, 0.6]),  # no velocities: shorter
        joint_state_raw([*a, "wrist"], [0.5, 0.6, 0.7], [1.0, 2.0, 3.0]),  # a joint more
        joint_state_raw(a, [0.5], [1.0, 2.0]),  # position count disagrees: bad, same length as none other
        RawMessage(good.topic, good.msgtype, good.receive_ns, good.data[:-8]),  # truncated: bad
        joint_state_raw(a, [0.7, 0.8], [5.0, 6.0], little_endian=False),  # big-endian CDR: full way
        joint_state_raw(a, [0.9, 1.0], [7.0, 8.0], sec=HEADER_SEC + 2),  # back to the first layout: learned again
        joint_state_raw(a, [1.1, 1.2], [9.0, 9.5], sec=HEADER_SEC + 3),  # and then fast
    ]
    decoder = SampleDecoder(Decoder())
    for raw in messages:
        assert_same_samples(decoder.samples(raw), full_way(raw))
    assert decoder.fast_reads == 2
    assert isinstance(decoder.samples(messages[7])[0], BadMessage)  # still counted as undecodable


def test_fast_path_skips_a_type_the_recording_defines_its_own_way() -> None:
    plain = Decoder()
    plain.register("std_msgs/msg/Header", "builtin_interfaces/Time stamp\nstring frame_id\n", "ros2msg")
    assert plain.has_jazzy_layout("sensor_msgs/msg/JointState")  # the same definition changes nothing
    changed = Decoder()
    changed.register("std_msgs/msg/Header", "builtin_interfaces/Time stamp\nstring frame_id\nuint32 seq\n", "ros2msg")
    assert not changed.has_jazzy_layout("sensor_msgs/msg/JointState")
    assert changed.has_jazzy_layout("std_msgs/msg/String")
    decoder = SampleDecoder(changed)
    for sec in range(3):
        decoder.samples(joint_state_raw(["a"], [1.0], sec=sec))
    assert decoder.fast_reads == 0


def test_fast_path_reads_wrenches_and_still_reports_a_cut_one() -> None:
    def wrench_raw(force: float, frame: str = "ft_sensor") -> RawMessage:
        wrench = build(
            "cdr", "geometry_msgs/msg/Wrench", force=vector3("cdr", force, 2.0, 3.0), torque=vector3("cdr", 4, 5, 6)
        )
        msg = build("cdr", "geometry_msgs/msg/WrenchStamped", header=header("cdr", frame), wrench=wrench)
        data = serialize(msg, "geometry_msgs/msg/WrenchStamped", "cdr")
        return RawMessage("/ft", "geometry_msgs/msg/WrenchStamped", RECEIVE_NS, data)

    first = wrench_raw(1.0)
    # ft_sensor_2 pads to the same length as ft_sensor: a layout that changes at one length.
    messages = [first, wrench_raw(-1.5), wrench_raw(2.5, "ft_sensor_2"), wrench_raw(3.5), wrench_raw(4.5)]
    messages.append(RawMessage(first.topic, first.msgtype, first.receive_ns, first.data[:30]))
    decoder = SampleDecoder(Decoder())
    for raw in messages:
        assert_same_samples(decoder.samples(raw), full_way(raw))
    assert decoder.fast_reads == 2
    wrench = one(decoder.samples(wrench_raw(7.0)), WrenchSample)
    np.testing.assert_array_equal(wrench.force, [7.0, 2.0, 3.0])
    np.testing.assert_array_equal(wrench.torque, [4.0, 5.0, 6.0])
    check_header_stamps(wrench.stamps, "ft_sensor")


def test_fast_path_reads_transforms_and_leaves_the_bad_ones_to_the_full_way() -> None:
    def tf_raw(*transforms: Any, sec: int = 0) -> RawMessage:
        data = serialize(tf_message("cdr", *transforms), "tf2_msgs/msg/TFMessage", "cdr")
        return RawMessage("/tf", "tf2_msgs/msg/TFMessage", RECEIVE_NS + sec, data)

    def arm(x: float, xyzw: tuple[float, ...] = (0.0, 0.0, 0.6, 0.8), child: str = "flange") -> list[Any]:
        return [
            transform("cdr", "world", "base", (x, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)),
            transform("cdr", "base", child, (0.1, 0.2, x), xyzw),
        ]

    messages = [
        tf_raw(*arm(0.0)),
        tf_raw(*arm(0.5), sec=1),  # fast
        tf_raw(*arm(1.0, (0.0, 0.0, 3.0, 4.0)), sec=2),  # fast: normalised as extract does
        tf_raw(*arm(1.5, (0.0, 0.0, 0.0, 0.0))),  # not a rotation: the full way reports it
        tf_raw(*arm(np.nan)),  # a NaN translation: the full way
        tf_raw(*arm(2.0, child="flango")),  # other child, same length: learned anew
        tf_raw(*arm(2.5, child="flango"), sec=3),  # and then fast
        tf_raw(*arm(3.0)[:1]),  # one transform: shorter, a layout of its own
        tf_raw(),  # no transform at all
    ]
    decoder = SampleDecoder(Decoder())
    for raw in messages:
        assert_same_samples(decoder.samples(raw), full_way(raw))
    assert decoder.fast_reads == 3
    assert [type(s) for s in decoder.samples(messages[3])] == [TransformSample, BadMessage]
    flange = decoder.samples(messages[2])[1]
    assert isinstance(flange, TransformSample)
    np.testing.assert_array_equal(flange.rotation, [0.8, 0.0, 0.0, 0.6])  # (x, y, z, w) = (0, 0, 3, 4) / 5
    assert flange.stamps == Stamps(RECEIVE_NS + 2, HEADER_SEC * 1_000_000_000 + HEADER_NSEC, "base")
