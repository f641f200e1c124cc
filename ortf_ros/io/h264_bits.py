"""The few H.264 syntax elements read without decoding (ITU-T H.264 7.3.2.1 and 7.3.3).

From a slice header: ``slice_type`` (a B slice means reordered frames) and ``frame_num``,
which counts reference frames: each picture's is the previous reference picture's plus one
(modulo ``MaxFrameNum``), so a gap shows that a reference frame was lost and the pictures
after it, until the next IDR, decode wrong. From the SPS: how many bits ``frame_num`` has,
and whether the stream allows gaps in it (then a gap says nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

_HIGH_PROFILES = frozenset({100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135})


class _Bits:
    """Exp-Golomb and fixed-width reads from an RBSP; IndexError past its end."""

    def __init__(self, rbsp: bytes) -> None:
        self._bits = "".join(f"{byte:08b}" for byte in rbsp)
        self._at = 0

    def u(self, width: int) -> int:
        if self._at + width > len(self._bits):
            raise IndexError("past the end")
        value = int(self._bits[self._at : self._at + width] or "0", 2)
        self._at += width
        return value

    def ue(self) -> int:
        zeros = self._bits.find("1", self._at) - self._at
        if zeros < 0:
            raise IndexError("past the end")
        self._at += zeros
        return self.u(zeros + 1) - 1

    def se(self) -> int:
        code = self.ue()
        return (code + 1) // 2 if code % 2 else -(code // 2)


def rbsp(unit: bytes, limit: int | None = None) -> bytes:
    """A NAL unit's payload without its header byte and emulation prevention bytes
    (``00 00 03`` -> ``00 00``); the first ``limit`` bytes of the unit only, if given."""
    return unit[1:limit].replace(b"\x00\x00\x03", b"\x00\x00")


@dataclass(frozen=True)
class SequenceFacts:
    frame_num_bits: int
    gaps_allowed: bool  # gaps_in_frame_num_value_allowed_flag
    separate_colour_planes: bool


def sequence_facts(sps: bytes) -> SequenceFacts | None:
    """What a slice header's ``frame_num`` needs of its SPS NAL unit; None when it does not parse."""
    try:
        bits = _Bits(rbsp(sps))
        profile = bits.u(8)
        bits.u(16)  # constraint flags, level_idc
        bits.ue()  # seq_parameter_set_id
        separate = False
        if profile in _HIGH_PROFILES:
            chroma = bits.ue()
            if chroma == 3:
                separate = bool(bits.u(1))
            bits.ue()  # bit_depth_luma_minus8
            bits.ue()  # bit_depth_chroma_minus8
            bits.u(1)  # qpprime_y_zero_transform_bypass_flag
            if bits.u(1):  # seq_scaling_matrix_present_flag
                for index in range(8 if chroma != 3 else 12):
                    if bits.u(1):
                        _skip_scaling_list(bits, 16 if index < 6 else 64)
        frame_num_bits = bits.ue() + 4
        poc_type = bits.ue()
        if poc_type == 0:
            bits.ue()  # log2_max_pic_order_cnt_lsb_minus4
        elif poc_type == 1:
            bits.u(1)
            bits.se()
            bits.se()
            for _ in range(bits.ue()):
                bits.se()
        bits.ue()  # max_num_ref_frames
        gaps = bool(bits.u(1))
    except IndexError:
        return None
    return SequenceFacts(frame_num_bits, gaps, separate)


def _skip_scaling_list(bits: _Bits, size: int) -> None:
    last = following = 8
    for _ in range(size):
        if following:
            following = (last + bits.se() + 256) % 256
        last = following or last


SLICE_HEADER_BYTES = 24
"""Enough of a slice NAL unit for the header fields read here, whatever the stream."""


def slice_type(unit: bytes) -> int:
    """``slice_type`` of a slice NAL unit (-1 when its header does not parse)."""
    try:
        bits = _Bits(rbsp(unit, SLICE_HEADER_BYTES))
        bits.ue()  # first_mb_in_slice
        return bits.ue()
    except IndexError:
        return -1


def frame_num(unit: bytes, sequence: SequenceFacts) -> int | None:
    """``frame_num`` of a slice NAL unit of the sequence (None when its header does not parse)."""
    try:
        bits = _Bits(rbsp(unit, SLICE_HEADER_BYTES))
        bits.ue()  # first_mb_in_slice
        bits.ue()  # slice_type
        bits.ue()  # pic_parameter_set_id
        if sequence.separate_colour_planes:
            bits.u(2)  # colour_plane_id
        return bits.u(sequence.frame_num_bits)
    except IndexError:
        return None
