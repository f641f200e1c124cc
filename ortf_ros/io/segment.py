"""A run of frames cut out of an encoded video without re-encoding it.

A multi-episode video (a LeRobot shard) holds each episode as a time range. When that
range begins at a keyframe and the frame after it is a keyframe too (or the file
ends), its packets decode on their own: they are copied into the episode's staged
video with their timestamps moved to start at zero, and every frame decodes
bit-exactly as in the source. Any other cut would leave frames whose references lie
outside the range, so ``segment_packets`` refuses it and the caller re-encodes.

Only the packets of the range are read (a seek to the keyframe at its start), and
what is remembered of them is bounded by the codec's frame reordering, not by the
length of the range.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import av
from av.container import InputContainer, OutputContainer
from av.video.stream import VideoStream

from ortf_ros.errors import SegmentError, WriterError, describe
from ortf_ros.io.video import STAGING_MUX_OPTIONS, open_video, probe


@dataclass(frozen=True)
class VideoSegment:
    """Frames ``first .. first + count - 1`` of ``path`` (frame ``i`` shown ``i / fps`` s
    after the stream's start, as ``VideoReader`` counts them)."""

    path: Path
    first: int
    count: int


def whole_video(path: Path) -> VideoSegment:
    """Every frame of ``path``."""
    return VideoSegment(path, 0, probe(path).frames)


def segment_packets(container: InputContainer, segment: VideoSegment) -> Iterator[av.Packet[VideoStream]]:
    """The segment's packets in decode order; raises SegmentError when the cut is not clean,
    or when the source cannot be read (the segment is refused, not the target broken)."""
    try:
        yield from _checked_packets(container, segment)
    except (av.error.FFmpegError, OSError) as exc:
        last = segment.first + segment.count - 1
        raise SegmentError(f"{segment.path}: cannot read frames {segment.first}..{last}: {describe(exc)}") from None


def _checked_packets(container: InputContainer, segment: VideoSegment) -> Iterator[av.Packet[VideoStream]]:
    stream = container.streams.video[0]
    rate = stream.average_rate or stream.base_rate
    if not rate or not stream.time_base:
        raise SegmentError(f"{segment.path}: video stream has no frame rate or time base")
    ticks_per_frame = 1 / (float(stream.time_base) * float(rate))
    start = stream.start_time or 0
    end = segment.first + segment.count
    where = f"{segment.path}: frames {segment.first}..{end - 1}"
    container.seek(start + round(segment.first * ticks_per_frame), stream=stream, backward=True, any_frame=False)
    complete = segment.first  # frames first..complete-1 have all been seen
    ahead: set[int] = set()  # seen past the gap: bounded by the codec's reordering
    for packet in container.demux(stream):
        if packet.pts is None or packet.dts is None:
            continue  # the demuxer's end-of-stream marker
        index = round((packet.pts - start) / ticks_per_frame)
        if complete == segment.first and not ahead:
            if index != segment.first or not packet.is_keyframe:
                raise SegmentError(f"{where}: frame {segment.first} is not a keyframe")
        elif not segment.first <= index < end:
            if complete == end and packet.is_keyframe:
                return
            raise SegmentError(f"{where}: the frame after them is not a keyframe (frame {index} is mixed in)")
        if index < complete or index in ahead:
            raise SegmentError(f"{where}: frame {index} appears twice")
        if packet.is_corrupt:  # e.g. the last packet of a file cut short: copied, it would not decode as it should
            raise SegmentError(f"{where}: frame {index} is damaged in the file")
        ahead.add(index)
        while complete in ahead:
            ahead.remove(complete)
            complete += 1
        yield packet
    if complete != end or ahead:
        raise SegmentError(f"{where}: the file holds frames {segment.first}..{complete - 1} of them")


def stage_segment(segment: VideoSegment, target: Path) -> None:
    """Copy the segment's packets into a staged (fragmented) episode video, frame ``first``
    at time zero; ``video.finalize`` turns it into the committed file like any other.

    Whatever stops the copy leaves nothing at ``target``. A cut that is not clean is a
    ``SegmentError``; any other failure (a full disk, a file-size limit) is a
    ``WriterError`` naming the files and the cause, which the command-line tools print
    as one line, where FFmpeg's own error would be a traceback.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with (
            open_video(segment.path) as src,
            av.open(str(target), "w", format="mp4", options=STAGING_MUX_OPTIONS) as dst,
        ):
            _copy_packets(src, segment, dst)
    except (av.error.FFmpegError, OSError) as exc:
        target.unlink(missing_ok=True)
        last = segment.first + segment.count - 1
        raise WriterError(
            f"{target}: staging frames {segment.first}..{last} of {segment.path} failed: {describe(exc)}"
        ) from exc
    except BaseException:
        target.unlink(missing_ok=True)
        raise


def _copy_packets(src: InputContainer, segment: VideoSegment, dst: OutputContainer) -> None:
    in_stream = src.streams.video[0]
    out_stream = dst.add_stream_from_template(in_stream)
    out_stream.time_base = in_stream.time_base
    origin: int | None = None
    for packet in segment_packets(src, segment):
        if origin is None:
            origin = packet.pts  # the keyframe: the segment's first frame
        assert packet.pts is not None and packet.dts is not None and origin is not None
        packet.pts -= origin
        packet.dts -= origin
        packet.stream = out_stream
        dst.mux(packet)
