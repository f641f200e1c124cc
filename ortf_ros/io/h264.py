"""H.264 as cameras publish it: Annex B packets, one frame each, read without decoding them.

A camera that compresses on board (Isaac ROS's encoder, Foxglove's ``CompressedVideo``,
ffmpeg's libx264) publishes each frame as an Annex B access unit: NAL units behind
``00 00 01`` start codes, the SPS and PPS in front of every IDR frame. What the recorder
must know of a packet, without decoding it, is read from its NAL headers and its first
slice header (``PacketFacts``, ``h264_bits``): whether a clean episode can start there (an
IDR frame carrying its SPS and PPS), which SPS it refers to (a new one may change the
size), whether the stream reorders frames (a B slice), which the episode video's one
timestamp per frame cannot hold, and its ``frame_num`` (a gap: a reference frame lost).

MP4 keeps the same NAL units with a 4-byte length in front of each instead of a start
code (and the SPS/PPS once more in its ``avcC`` box): ``length_prefixed_units`` reads
them back, which is how "the MP4's packets are the published ones" is checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import av
import numpy as np

from ortf_ros.io.h264_bits import SLICE_HEADER_BYTES, slice_type
from ortf_ros.io.still import decode_alone

H264_FORMAT = "h264"
PUBLISHED_ENCODING_KEY = "published_encoding"
"""Manifest sensor ``extra`` key of a camera whose video holds the packets it published
(value: their codec, ``h264``): no encoder runs for it."""

NAL_SLICE = 1
NAL_IDR = 5
NAL_SPS = 7
NAL_PPS = 8
_B_SLICE = 1  # slice_type % 5


@dataclass(frozen=True)
class PacketFacts:
    """What a published H.264 packet is, read from its NAL units."""

    keyframe: bool  # an IDR frame with its SPS and PPS: a video can start here
    idr: bool  # an IDR frame (with or without parameter sets)
    sps: bytes | None  # its SPS NAL unit, if it carries one
    b_slice: bool  # its first slice is a B slice: the stream reorders frames
    first_slice: bytes | None  # the start of its first slice NAL unit (``h264_bits.frame_num`` reads it)
    reference: bool  # other frames may refer to it (its nal_ref_idc is not 0)
    parameter_sets: bytes | None = None  # its SPS and PPS units as Annex B, when it carries both

    @property
    def picture(self) -> bool:
        """Whether it holds a frame (a slice): a packet of parameter sets or SEI alone does not."""
        return self.first_slice is not None


def is_annex_b(data: bytes) -> bool:
    return data.startswith(b"\x00\x00\x01") or data.startswith(b"\x00\x00\x00\x01")


def nal_units(data: bytes) -> list[bytes]:
    """The NAL units of an Annex B byte stream, without start codes or the zero bytes
    between them (``trailing_zero_8bits`` and the leading zero of 4-byte start codes)."""
    units = []
    start = data.find(b"\x00\x00\x01")
    while start >= 0:
        begin = start + 3
        end = data.find(b"\x00\x00\x01", begin)
        unit = data[begin : end if end >= 0 else len(data)].rstrip(b"\x00")
        if unit:
            units.append(unit)
        start = end
    return units


def length_prefixed_units(sample: bytes, length_size: int = 4) -> list[bytes]:
    """The NAL units of an MP4 sample (each behind a big-endian length of ``length_size`` bytes)."""
    units, at = [], 0
    while at + length_size <= len(sample):
        size = int.from_bytes(sample[at : at + length_size], "big")
        at += length_size
        units.append(sample[at : at + size])
        at += size
    return units


def packet_facts(data: bytes) -> PacketFacts:
    """``PacketFacts`` of one Annex B packet (ValueError when it holds no NAL unit)."""
    units = nal_units(data)
    if not units:
        raise ValueError(f"{len(data)} bytes hold no H.264 NAL unit (no 00 00 01 start code)")
    types = [unit[0] & 0x1F for unit in units]
    sps = next((unit for unit, kind in zip(units, types, strict=True) if kind == NAL_SPS), None)
    idr = NAL_IDR in types
    first_slice = next((unit for unit, kind in zip(units, types, strict=True) if kind in (NAL_SLICE, NAL_IDR)), None)
    b_slice = first_slice is not None and slice_type(first_slice) % 5 == _B_SLICE
    sets = [unit for unit, kind in zip(units, types, strict=True) if kind in (NAL_SPS, NAL_PPS)]
    return PacketFacts(
        parameter_sets=b"".join(b"\x00\x00\x00\x01" + unit for unit in sets) if sps and NAL_PPS in types else None,
        keyframe=idr and sps is not None and NAL_PPS in types,
        idr=idr,
        sps=sps,
        b_slice=b_slice,
        first_slice=None if first_slice is None else first_slice[:SLICE_HEADER_BYTES],
        reference=first_slice is not None and bool(first_slice[0] & 0x60),
    )


@dataclass(frozen=True)
class DecodedKeyframe:
    """A keyframe decoded alone: its pixels (RGB) and how the stream stores them."""

    rgb: np.ndarray  # H x W x 3 uint8
    pix_fmt: str


def decode_keyframe(data: bytes) -> DecodedKeyframe:
    """Decode one IDR packet on its own (ValueError naming why it does not decode): what
    tells a camera's size and first frame without decoding its stream."""
    frame = decode_alone("h264", data, "an H.264 keyframe")
    return DecodedKeyframe(np.ascontiguousarray(frame.to_ndarray(format="rgb24")), frame.format.name)


class AnnexBEncoder:
    """Frames to H.264 packets as an on-board encoder publishes them (libx264): Annex B,
    one packet per frame as soon as it is given (no B-frames, no lookahead), the SPS and
    PPS in front of every IDR frame, an IDR frame every ``gop`` frames. What the synthetic
    recordings and the live scene publish for an H.264 camera. With ``bframes`` it makes a
    stream that reorders frames instead, which comes out later than its frames
    (``encode_all``): what a camera that must be refused publishes."""

    def __init__(self, width: int, height: int, gop: int = 10, bframes: int = 0) -> None:
        context = av.CodecContext.create("libx264", "w")
        assert isinstance(context, av.VideoCodecContext)
        context.width, context.height, context.pix_fmt = width, height, "yuv420p"
        context.time_base = Fraction(1, 30)
        context.gop_size = gop
        context.thread_count = 1  # (one slice per frame, and the same bytes on every run)
        context.options = {
            "preset": "ultrafast",
            "tune": "zerolatency",
            "bframes": "0",
            "x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0",
        }
        context.max_b_frames = bframes
        self._context = context
        self._frames = 0

    def encode(self, rgb: np.ndarray) -> bytes:
        """The packet of one H x W x 3 uint8 RGB frame."""
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        frame.pts = self._frames
        self._frames += 1
        packets = self._context.encode(frame)
        return b"".join(bytes(packet) for packet in packets)

    def encode_all(self, frames: list[np.ndarray]) -> list[bytes]:
        """The packets of these frames and of the ones held before, in decode order, one a frame."""
        packets = [self.encode(rgb) for rgb in frames]
        packets += [bytes(packet) for packet in self._context.encode(None)]
        return [packet for packet in packets if packet]
