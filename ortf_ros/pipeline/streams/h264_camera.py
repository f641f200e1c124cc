"""Cameras that publish H.264: their messages as samples, and what an episode keeps of them.

Two message types carry H.264 as robots publish it: Foxglove's
``foxglove_msgs/msg/CompressedVideo`` (``format`` ``h264``; Isaac ROS's recorder, the
Foxglove bridge) and ``sensor_msgs/msg/CompressedImage`` whose ``format`` is ``h264``
(Isaac ROS's H.264 encoder; also ``h264; ...`` with anything after a ``;``, the way
image_transport plugins append details). Either becomes an ``EncodedFrameSample``, its
packet kept as published; the camera's video is made of those packets
(``io.packet_video``), never decoded and encoded again.

What the episode keeps (``EncodedCameraGate``, one per episode):
- its video starts at a keyframe (an IDR frame carrying its SPS and PPS): packets before
  the first one are dropped and counted (``BEFORE_FIRST_KEYFRAME``, a trim), as are those
  after a packet that was lost, until the next keyframe (``AFTER_LOST_PACKET``), since
  they refer to it: one the pipeline drops (out of order, undecodable), or one that never
  came (a gap in ``frame_num``, the count of reference frames: a live queue that
  overflowed, DDS that lost it, a recording that lacks it);
- a stream that reorders frames (a B slice) is refused: the episode video holds one time
  per frame, in the order the frames are shown, which a copied stream with B-frames
  does not have;
- a new SPS that changes the frame size is refused, as for a raw camera.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ortf_ros.errors import SourceError
from ortf_ros.format.sensors import Resolution
from ortf_ros.format.units import NS
from ortf_ros.io.h264 import H264_FORMAT, decode_keyframe, is_annex_b, packet_facts
from ortf_ros.io.h264_bits import SequenceFacts, frame_num, sequence_facts
from ortf_ros.pipeline.samples import BadMessage, EncodedFrameSample, ImageSample, RawMessage, Sample, Stamps

COMPRESSED_VIDEO_TYPE = "foxglove_msgs/msg/CompressedVideo"
ACCEPTED_PIXEL_FORMATS = ("yuv420p", "yuvj420p")
"""How a published stream may store its pixels: what the episode videos of other cameras
hold, and what decodes everywhere (LeRobot, browsers)."""


def is_h264_format(fmt: str) -> bool:
    """Whether a ``format`` field says H.264: ``h264`` (any case), alone or before a ``;``."""
    return fmt.partition(";")[0].strip().lower() == H264_FORMAT


def encoded_frame(raw: RawMessage, stamps: Stamps, data: bytes) -> Sample:
    """A published H.264 packet as a sample, or a BadMessage saying why it is not one."""
    where = f"{raw.topic} ({raw.msgtype})"
    if not is_annex_b(data):
        start = data[:4].hex(" ")
        return BadMessage(raw.topic, raw.receive_ns, f"{where}: H.264 data must be Annex B (00 00 01), starts {start}")
    try:
        facts = packet_facts(data)
    except ValueError as exc:
        return BadMessage(raw.topic, raw.receive_ns, f"{where}: {exc}")
    return EncodedFrameSample(raw.topic, stamps, H264_FORMAT, data, facts)


def compressed_video(msg: Any, raw: RawMessage, static_tf: bool | None) -> list[Sample]:
    """``foxglove_msgs/msg/CompressedVideo``: its ``timestamp`` is the frame's stamp."""
    fmt = str(msg.format)
    if not is_h264_format(fmt):
        reason = f"{raw.topic} ({raw.msgtype}): format {fmt!r} is not supported (supported: h264)"
        return [BadMessage(raw.topic, raw.receive_ns, reason)]
    stamp = msg.timestamp
    stamps = Stamps(raw.receive_ns, int(stamp.sec) * NS + int(stamp.nanosec), str(msg.frame_id).lstrip("/"))
    return [encoded_frame(raw, stamps, bytes(msg.data))]


def first_image(sample: EncodedFrameSample) -> ImageSample:
    """A keyframe decoded: the camera's size and first frame for the manifest (ValueError
    when it does not decode, or stores its pixels in a way not accepted)."""
    decoded = decode_keyframe(sample.data)
    if decoded.pix_fmt not in ACCEPTED_PIXEL_FORMATS:
        raise ValueError(
            f"the H.264 stream stores its pixels as {decoded.pix_fmt}; expected {' or '.join(ACCEPTED_PIXEL_FORMATS)}"
        )
    return ImageSample(sample.topic, sample.stamps, "rgb", decoded.rgb)


Refusal = Literal["before_first_keyframe", "after_lost_packet", "no_picture"]
"""Why ``EncodedCameraGate.admit`` leaves a packet out (the counter of ``TopicCounts``)."""


@dataclass
class _CameraState:
    waiting: bool = True  # no keyframe yet, or a packet was lost since the last one
    started: bool = False  # the episode's video has its first keyframe
    sps: bytes | None = None  # the last SPS whose size was checked
    sequence: SequenceFacts | None = None  # what frame_num needs of it (None: not checked)
    last: tuple[int, bool] | None = None  # the last packet kept: its frame_num, whether a reference


@dataclass(frozen=True)
class ParameterSets:
    """A camera's latest SPS and PPS: its SPS unit, and both as Annex B."""

    sps: bytes
    annex_b: bytes


@dataclass
class EncodedCameraGate:
    """Which of an episode's H.264 packets its cameras' videos take (see the module).

    ``parameter_sets``: each camera's latest SPS and PPS, from whatever packet carried them
    (an IDR frame, or a packet of them alone): the session keeps the dict from the prologue
    on, across episodes, since encoders may send them once, at the start of the stream."""

    resolutions: dict[str, Resolution | None]  # camera -> its size in the manifest
    parameter_sets: dict[str, ParameterSets] = field(default_factory=dict)
    _states: dict[str, _CameraState] = field(default_factory=dict)

    def admit(self, camera: str, sample: EncodedFrameSample) -> Refusal | bytes:
        """What the video takes of the packet: the packet, or, for an IDR frame that starts
        the episode's video without its SPS and PPS, the camera's last ones in front of it
        (the video's description is read from them); else why it is left out. A packet
        without a picture (its parameter sets alone, say) is never a frame. SourceError
        for a stream the video cannot hold as it is."""
        facts = sample.facts
        at = f"{sample.topic} at {sample.stamps.receive_ns / NS:.6f} s"
        if facts.b_slice:
            raise SourceError(
                f"{at}: the H.264 stream has B-frames (frames reordered); published H.264 is stored as it is, "
                "one frame per packet in the order shown, so the camera must publish without B-frames "
                "(x264 bframes=0, NVENC's default)"
            )
        state = self._states.setdefault(camera, _CameraState())
        if facts.sps is not None and facts.parameter_sets is not None:
            self.parameter_sets[camera] = ParameterSets(facts.sps, facts.parameter_sets)
        if not facts.picture:
            return "no_picture"
        known = self.parameter_sets.get(camera)
        data = sample.data
        if facts.idr and known is not None:
            if not facts.keyframe and not state.started:
                data = known.annex_b + data
            if known.sps != state.sps:
                self._check_size(camera, data if facts.keyframe or not state.started else known.annex_b + data, at)
                state.sps = known.sps
                found = sequence_facts(known.sps)
                state.sequence = found if found is not None and not found.gaps_allowed else None
        number = None
        if state.sequence is not None and facts.first_slice is not None:
            number = frame_num(facts.first_slice, state.sequence)
        if facts.idr and known is not None:
            state.waiting, state.started = False, True
        elif state.waiting or (not facts.idr and _gap(state, number)):
            state.waiting = True
            return "after_lost_packet" if state.started else "before_first_keyframe"
        state.last = None if number is None else (number, facts.reference)
        return data

    def lost(self, camera: str) -> None:
        """A packet of the camera was lost: the next ones need a keyframe first."""
        self._states.setdefault(camera, _CameraState()).waiting = True

    def _check_size(self, camera: str, keyframe: bytes, at: str) -> None:
        expected = self.resolutions.get(camera)
        try:
            height, width = decode_keyframe(keyframe).rgb.shape[:2]
        except ValueError as exc:
            raise SourceError(f"{at}: {exc}") from None
        if expected is not None and (width, height) != (expected.width, expected.height):
            raise SourceError(
                f"{at}: the camera's resolution changed from {expected.width}x{expected.height} "
                f"to {width}x{height} mid-recording"
            )


def _gap(state: _CameraState, number: int | None) -> bool:
    """Whether a reference frame is missing before the packet whose ``frame_num`` is
    ``number``: it is not the one after the last reference frame kept. (A non-reference
    frame lost is no gap: nothing refers to it.)"""
    if state.sequence is None or state.last is None or number is None:
        return False
    last, reference = state.last
    expected = (last + 1) % (1 << state.sequence.frame_num_bits) if reference else last
    return number != expected
