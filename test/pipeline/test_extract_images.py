"""decode + extract of images: raw ones in every encoding (padded rows, either endianness,
16-bit and float depth) and compressed ones (JPEG, PNG, compressedDepth), and what makes one bad."""

from __future__ import annotations

import struct
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import av
import numpy as np
import pytest

from ortf_ros.io.mapped_file import MappedFile, locate
from ortf_ros.pipeline.extract import extract
from ortf_ros.pipeline.samples import (
    BadMessage,
    ImageSample,
    RawMessage,
    Serialization,
)
from support.messages import (
    DECODER,
    RECEIVE_NS,
    SERIALIZATIONS,
    bad,
    build,
    check_header_stamps,
    header,
    one,
    run,
    serialize,
)

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
