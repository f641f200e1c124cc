"""Episode videos: streaming encode to a crash-safe staging file, remux, seeking decode.

While an episode records, frames go straight into a *fragmented* MP4 with every packet
flushed, so a killed process leaves a file that still decodes up to the last frame
the encoder had emitted (a plain MP4 has no index until it is closed and is
unreadable after a kill). The committed video is a plain MP4 with its index in front,
which every player, PyAV and LeRobot seek in cheaply: the encoder muxes each packet
into one beside the staged file as well, so an episode that ends normally has it
ready; only after a crash are the staged file's packets copied into one (remuxed).

Frames are stored at a constant rate (pts = frame index), so frame ``i`` is found by
time without an index; real capture times live in the step table.
"""

from __future__ import annotations

import contextlib
import gc
import io
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Literal

import av
import numpy as np
from av.container import InputContainer, OutputContainer
from av.video.plane import VideoPlane
from av.video.reformatter import ColorRange
from av.video.stream import VideoStream

from ortf_ros import bounds
from ortf_ros.errors import ReaderError, WriterError
from ortf_ros.format.sensors import Sensor
from ortf_ros.io import atomic
from ortf_ros.io.cpus import usable_cpus

FrameKind = Literal["rgb", "depth"]

# A fragment per frame and a flush per packet: what survives a SIGKILL is every
# packet the encoder has produced, not every frame up to the last keyframe.
STAGING_MUX_OPTIONS = {"movflags": "frag_every_frame+empty_moov+default_base_moof", "flush_packets": "1"}
FINAL_MUX_OPTIONS = {"movflags": "+faststart"}

LOSSLESS_DEPTH_ENCODING = "ffv1"
COLOUR_MATRIX = 6  # AVCOL_SPC_SMPTE170M, BT.601 (PyAV's Colorspace enum holds swscale's numbers, not these)
RGB_ENCODING = "h264"


X264_CODECS = ("libx264", "libx265")
X264_PRESETS = (
    "ultrafast",
    "superfast",
    "veryfast",
    "faster",
    "fast",
    "medium",
    "slow",
    "slower",
    "veryslow",
    "placebo",
)


@dataclass(frozen=True)
class VideoSettings:
    """How colour video is encoded. H.264 yuv420p decodes everywhere LeRobot runs."""

    codec: str = "libx264"
    crf: int = 23
    preset: str = "veryfast"
    gop: int = 10
    pix_fmt: str = "yuv420p"
    # Encoder threads per video; 0 lets the writer share this machine's cores among the
    # videos it encodes at once (``with_threads``). x264's own default, 1.5 threads per
    # core for every video, oversubscribes a machine that encodes several cameras: on two
    # cores with two cameras it cost 10-20 % more CPU and 3 % larger files than one thread
    # each (bench/bench_bag2ortf.py).
    threads: int = 0

    def __post_init__(self) -> None:
        limits = {"crf": bounds.VIDEO_CRF, "gop": bounds.VIDEO_GOP, "threads": bounds.VIDEO_THREADS}
        problem = bounds.fields_problem(self, limits) or self._encoder_problem()
        if problem is not None:
            raise WriterError(problem)

    def _encoder_problem(self) -> str | None:
        """Codec, pixel format and preset checked now: an encoder process refusing them at
        the first frame would print its own lines and leave an episode half made."""
        try:
            codec = av.codec.Codec(self.codec, "w")
        except ValueError:
            return f"codec: expected a video encoder FFmpeg has (libx264...), got {self.codec!r}"
        formats = [f.name for f in codec.video_formats or ()]
        if formats and self.pix_fmt not in formats:
            return f"pix_fmt: expected one of {', '.join(formats)} for {self.codec}, got {self.pix_fmt!r}"
        if self.codec in X264_CODECS and self.preset not in X264_PRESETS:
            return f"preset: expected one of {', '.join(X264_PRESETS)}, got {self.preset!r}"
        return None

    def with_threads(self, videos: int) -> VideoSettings:
        """These settings with ``threads`` decided: the CPUs this process can keep busy
        (``cpus.usable_cpus``), shared among ``videos`` encoded at once (at least one each)."""
        if self.threads:
            return self
        return replace(self, threads=max(1, usable_cpus() // max(1, videos)))


def frame_kind(sensor: Sensor) -> FrameKind:
    return "depth" if sensor.is_depth else "rgb"


def _kind_format(kind: FrameKind) -> tuple[str, str]:
    """(ndarray format given to/returned by PyAV, pixel format stored)."""
    return ("gray16le", "gray16le") if kind == "depth" else ("rgb24", "")


def storage_format(kind: FrameKind, settings: VideoSettings) -> tuple[str, str]:
    """(codec, pixel format) of the files ``StagedVideoWriter`` writes for ``kind``: what an
    already-encoded video must be to stand in for them."""
    return (LOSSLESS_DEPTH_ENCODING, _kind_format(kind)[1]) if kind == "depth" else (RGB_ENCODING, settings.pix_fmt)


class StagingEncoder:
    """Encodes one camera's frames into a fragmented MP4, in the process that calls it
    (``encoder_process`` runs one per camera beside the writer), and into the plain MP4
    that ``finalize`` takes when ``close`` put it in place (``plain_copy``). Muxing a
    packet twice costs the encoder well under 1 % more; remuxing at the end cost the
    converter's commit about 0.05 s of a 2-3 s conversion, on the critical path.

    A colour frame is read in place: the encoder is handed a converted copy (RGB to YUV)
    and is done with the frame when ``encode`` returns, so the caller may overwrite it
    then. A frame stored as it is (depth) is copied first, because FFmpeg may keep it.
    """

    def __init__(self, path: Path, width: int, height: int, fps: int, kind: FrameKind, settings: VideoSettings) -> None:
        self.frames = 0
        self._array_format = _kind_format(kind)[0]
        if kind == "depth":
            codec, options, pix_fmt = LOSSLESS_DEPTH_ENCODING, {}, "gray16le"
        else:
            codec, options, pix_fmt = (
                settings.codec,
                {"crf": str(settings.crf), "preset": settings.preset},
                settings.pix_fmt,
            )
        self._in_place = pix_fmt != self._array_format
        # RGB to yuv420p by OpenCV rather than by swscale inside PyAV's encode: about half the
        # cost. Imported here: only encoder processes encode, and OpenCV costs every other
        # process that imports this module (the writer's, every `ortf` command) 16 MB and 20 ms.
        from ortf_ros.io.colour import I420Converter

        self._to_yuv420p = I420Converter(width, height) if (kind, pix_fmt) == ("rgb", "yuv420p") else None
        path.parent.mkdir(parents=True, exist_ok=True)
        plain = plain_copy(path)
        self._plain_name, self._plain_tmp_name = plain.name, atomic.temporary_for(plain).name
        # The copy is put in place and cleaned up through the directory as it is now: an
        # encoder process let go of (an interrupted close) may finish after its episode's
        # directory was removed and made anew for another, whose files it must not touch.
        self._directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        self._container: OutputContainer | None = None
        self._plain: OutputContainer | None = None
        with contextlib.suppress(FileNotFoundError):  # an earlier video's copy: never taken for this one
            os.unlink(self._plain_name, dir_fd=self._directory)
        try:
            self._container = av.open(str(path), "w", format="mp4", options=STAGING_MUX_OPTIONS)
            self._plain = av.open(str(path.parent / self._plain_tmp_name), "w", format="mp4", options=FINAL_MUX_OPTIONS)
        except BaseException:
            self.abandon()
            raise
        try:
            stream = self._container.add_stream(codec, rate=fps, options=options)
            assert isinstance(stream, VideoStream)
            stream.pix_fmt = pix_fmt
            if kind != "depth":
                stream.gop_size = settings.gop
                stream.codec_context.thread_count = settings.threads  # (0: x264 decides)
                # What RGB is converted with (io.colour, or swscale): BT.601, limited range
                # (full for a yuvj format). Tagged, so that a player does not guess BT.709
                # for an HD camera.
                stream.codec_context.colorspace = COLOUR_MATRIX
                full = pix_fmt.startswith("yuvj")
                stream.codec_context.color_range = ColorRange.JPEG if full else ColorRange.MPEG
            stream.width = width
            stream.height = height
        except BaseException:
            self.abandon()
            raise
        # The muxer replaces the stream's time base with its own once the header is
        # written, so frames keep this one.
        self._frame_time_base = Fraction(1, fps)
        stream.time_base = self._frame_time_base
        self._stream: VideoStream = stream
        # Made from the encoder's stream at the first packet, when the encoder is open and
        # its codec parameters (H.264's SPS/PPS) exist to copy.
        self._plain_stream: VideoStream | None = None

    def encode(self, image: np.ndarray) -> None:
        """Encode and mux one frame; ``image`` (H x W [x 3], C-contiguous) is not read after the call."""
        if self._to_yuv420p is not None:
            frame = av.VideoFrame(image.shape[1], image.shape[0], "yuv420p")
            for plane, pixels in zip(frame.planes, self._to_yuv420p.convert(image), strict=True):
                _copy_into(plane, pixels)
        elif self._in_place:
            frame = av.VideoFrame.from_numpy_buffer(image, format=self._array_format)
        else:
            frame = av.VideoFrame(image.shape[1], image.shape[0], self._array_format)
            _copy_into(frame.planes[0], image)
        frame.pts = self.frames
        frame.time_base = self._frame_time_base
        self._mux(self._stream.encode(frame))
        self.frames += 1

    def _mux(self, packets: list[av.Packet[VideoStream]]) -> None:
        assert self._container is not None and self._plain is not None  # (set unless __init__ failed)
        for packet in packets:
            if not packet.duration and packet.time_base:
                # One frame long. Some encoders (PyAV 17's libx264 and FFV1, the last PyAV for
                # Python 3.10) leave it 0, and then the MP4 track ends at the last frame's start:
                # its average rate reads 12 frames in 11 periods (32.7 fps for 30).
                packet.duration = max(1, round(self._frame_time_base / packet.time_base))
            self._container.mux_one(packet)
            if self._plain_stream is None:
                self._plain_stream = self._plain.add_stream_from_template(self._stream)
            packet.stream = self._plain_stream
            self._plain.mux_one(packet)

    def close(self) -> None:
        """Flush the frames the encoder holds, close the file and put the plain copy in place."""
        try:
            self._mux(self._stream.encode(None))
            assert self._container is not None and self._plain is not None
            self._container.close()
            self._plain.close()
            if self._plain_stream is not None:  # (no frames: no copy, and finalize finds none)
                atomic.install_in(self._directory, self._plain_tmp_name, self._plain_name)
        finally:
            self.abandon()  # after a failure; otherwise it finds both files closed and no copy left

    def abandon(self) -> None:
        """Close the files after a failure, keeping what reached the staged one; no plain copy."""
        if self._directory < 0:
            return
        for container in (self._container, self._plain):
            if container is not None:
                with contextlib.suppress(Exception):
                    container.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._plain_tmp_name, dir_fd=self._directory)
        os.close(self._directory)
        self._directory = -1


def _copy_into(plane: VideoPlane, image: np.ndarray) -> None:
    """One copy into a frame's plane (from_ndarray makes two), minding FFmpeg's row padding."""
    if plane.buffer_size == image.nbytes:
        plane.update(image)  # type: ignore[arg-type]  # (PyAV's stub says bytes; any buffer will do)
    else:
        strides = (plane.line_size, *image.strides[1:])
        np.ndarray(image.shape, image.dtype, buffer=memoryview(plane), strides=strides)[...] = image


def as_frame_rate(fps: float) -> int:
    """Videos are stored at a constant integer rate (pts = frame index)."""
    rate = round(fps)
    if rate < 1 or not math.isclose(rate, fps, abs_tol=1e-6):
        raise WriterError(f"video frame rate must be a positive integer, got {fps}")
    return rate


def plain_copy(staged: Path) -> Path:
    """Where ``StagingEncoder`` leaves the plain MP4 of ``staged`` once it closed it cleanly:
    a name no staged video takes (they end in .mp4), whatever the cameras are called."""
    return staged.with_name(f"{staged.name}.plain")


def finalize(staged: Path, target: Path) -> int:
    """Make ``target`` the plain MP4 of a staged (possibly truncated) fragmented MP4: its
    ``plain_copy`` moved into place when the encoder left one, else its packets copied.

    Returns how many frames, counted from frame 0 without a gap, the copy holds; that
    is what steps may reference. A plain copy holds every frame: the encoder was
    closed cleanly. After a crash the count can be less than the packets
    copied: with B-frames, a reference frame is stored before the frames shown ahead
    of it, so a cut can keep frame 30 and lose 28 and 29. Every packet is copied all
    the same, because the frames before the gap may need it to decode. A staged file
    with no complete packet (killed before the encoder emitted one) gives 0 frames and
    no target.
    """
    plain = plain_copy(staged)
    if plain.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic.install(plain, target)
        return probe(target).frames
    try:
        with av.open(str(staged)) as src:
            assert isinstance(src, InputContainer)
            if not src.streams.video or next(_packets(src), None) is None:
                return 0
    except (av.error.FFmpegError, EOFError):
        return 0
    frames = 0

    def remux(tmp: Path) -> None:
        nonlocal frames
        with av.open(str(staged)) as src, av.open(str(tmp), "w", format="mp4", options=FINAL_MUX_OPTIONS) as dst:
            assert isinstance(src, InputContainer)
            in_stream = src.streams.video[0]
            out_stream = dst.add_stream_from_template(in_stream)
            seconds_per_tick = float(in_stream.time_base or 0)
            # (the nominal rate first: an average over a track whose last frame has no
            # duration is a frame short)
            rate = float(in_stream.base_rate or in_stream.average_rate or 0) or 1.0
            # B-frames delay the first pts in the fragmented file; the copy starts at 0, as the
            # encoder's own plain copy does, so that frame i is at i/fps in both.
            start = in_stream.start_time or 0
            ahead: set[int] = set()  # frames seen past the gap-free prefix: bounded by B-frame reordering
            for packet in _packets(src):
                packet.pts = (packet.pts or 0) - start
                packet.dts = (packet.dts or 0) - start
                ahead.add(round(packet.pts * seconds_per_tick * rate))
                while frames in ahead:
                    ahead.remove(frames)
                    frames += 1
                packet.stream = out_stream
                dst.mux(packet)

    atomic.write_with(target, remux)
    return frames


def _packets(container: InputContainer) -> Iterator[av.Packet[VideoStream]]:
    """The video packets that are complete on disk; a torn last fragment ends them."""
    try:
        for packet in container.demux(container.streams.video[0]):
            if packet.dts is not None:
                yield packet
    except (av.error.FFmpegError, EOFError):
        return


@dataclass(frozen=True)
class VideoInfo:
    codec: str
    width: int
    height: int
    fps: float
    frames: int
    pix_fmt: str


def pixel_format(stream: VideoStream) -> str:
    """The stream's pixel format; "" when its parameters are missing (a file cut short).
    Read from the stream, not its codec context: PyAV 17 (the last for Python 3.10)
    crashes the process reading a context's ``pix_fmt`` that has none."""
    return stream.format.name if stream.format is not None else ""


def probe(path: Path) -> VideoInfo:
    """Stream facts; the frame count comes from the index, demuxing only if it is absent."""
    try:
        with av.open(str(path)) as container:
            assert isinstance(container, InputContainer)
            stream = container.streams.video[0]
            frames = stream.frames or sum(1 for p in container.demux(stream) if p.dts is not None)
            rate = stream.average_rate or stream.base_rate
            return VideoInfo(
                codec=stream.codec_context.name,
                width=stream.codec_context.width,
                height=stream.codec_context.height,
                fps=float(rate) if rate else 0.0,
                frames=frames,
                pix_fmt=pixel_format(stream),
            )
    except (av.error.FFmpegError, IndexError) as exc:
        raise ReaderError(f"{path}: not a readable video: {exc}") from None


def open_video(path: Path | str, file: io.IOBase | None = None) -> InputContainer:
    """``path`` opened for reading (or ``file``, an opened random-access file that ``path``
    names in errors: an object in object storage, read by ranges); ReaderError unless it is
    a video file with a video stream."""
    try:
        container = av.open(file if file is not None else str(path))
    except (av.error.FFmpegError, OSError) as exc:
        raise ReaderError(f"{path}: not a readable video: {exc}") from None
    assert isinstance(container, InputContainer)
    if not container.streams.video:
        container.close()
        raise ReaderError(f"{path}: has no video stream")
    return container


def _inherit_without_collecting() -> None:
    """In a forked child (a DataLoader worker), never collect what the parent left.

    A PyAV container is a reference cycle (its streams point back at it), so one that was
    dropped without ``close()`` waits for the cyclic collector. Collected in a forked child,
    its destructor frees the decoder's slice threads, joining threads that exist only in the
    parent, and the child hangs for ever (seen: a worker stuck in ``avpriv_slicethread_free``
    under ``gc_collect``). ``gc.freeze`` right after the fork puts everything inherited out of
    the collector's reach; what the child makes itself is collected as usual.
    """
    gc.freeze()


os.register_at_fork(after_in_child=_inherit_without_collecting)


class VideoReader:
    """Random access to frames by index, seeking to the nearest keyframe before it.

    Consecutive or nearby forward reads continue decoding instead of seeking, so a
    sequential pass costs one decode per frame and a random access at most one GOP.
    ``file``, when given, is what is read (``open_video``), and the reader closes it.
    """

    def __init__(
        self, path: Path | str, kind: FrameKind, forward_window: int = 30, *, file: io.IOBase | None = None
    ) -> None:
        self.path = path
        self.kind = kind
        self._file = file
        self._array_format = _kind_format(kind)[0]
        self._forward_window = forward_window
        try:
            container = self._container = open_video(path, file)
        except BaseException:
            self._close_file()
            raise
        self._stream = container.streams.video[0]
        rate = self._stream.average_rate or self._stream.base_rate
        if not rate:
            self.close()
            raise ReaderError(f"{path}: video stream has no frame rate")
        self.fps = float(rate)
        self._time_base = float(self._stream.time_base or 0)
        self._start = self._stream.start_time or 0
        self._decoder: object = None
        self._last_index = -1

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._container.close()
        self._close_file()

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()

    def _index_of(self, frame: av.VideoFrame) -> int:
        pts = frame.pts if frame.pts is not None else 0
        return round((pts - self._start) * self._time_base * self.fps)

    def _seek(self, index: int) -> None:
        target = self._start + round(index / self.fps / self._time_base)
        self._container.seek(target, stream=self._stream, backward=True, any_frame=False)
        self._decoder = self._container.decode(self._stream)
        self._last_index = -1

    def read(self, index: int, *, channels_first: bool = False) -> np.ndarray:
        """Frame ``index``: HxWx3 uint8 RGB (3xHxW with ``channels_first``, what a training
        loader wants), or HxW uint16 depth (1xHxW)."""
        frame = self._frame(index)
        # One conversion thread: PyAV keeps a thread's swscale context (with its pool of
        # threads, by default) for reuse, and a DataLoader worker forked after its parent
        # decoded a frame would wait forever on the parent's pool, whose threads a fork does
        # not copy. A worker per core is the parallelism anyway.
        if not channels_first:
            array: np.ndarray = frame.to_ndarray(format=self._array_format, threads=1)
            return array
        if self.kind == "depth":
            depth: np.ndarray = frame.to_ndarray(format=self._array_format, threads=1)
            return depth[np.newaxis]
        # Planar RGB from swscale (its G, B, R planes), copied plane by plane: the values of
        # rgb24, without a strided transposition of every pixel.
        planar = frame.reformat(format="gbrp", threads=1)
        green, blue, red = (
            np.frombuffer(memoryview(plane), np.uint8).reshape(plane.height, plane.line_size)[:, : plane.width]
            for plane in planar.planes
        )
        out = np.empty((3, frame.height, frame.width), np.uint8)
        out[0], out[1], out[2] = red, green, blue
        return out

    def _frame(self, index: int) -> av.VideoFrame:
        if index < 0:
            raise ReaderError(f"{self.path}: frame index {index} is negative")
        if self._decoder is None or not (self._last_index < index <= self._last_index + self._forward_window):
            self._seek(index)
        assert self._decoder is not None
        try:
            for frame in self._decoder:  # type: ignore[attr-defined]
                current = self._index_of(frame)
                self._last_index = current
                if current == index:
                    return frame  # type: ignore[no-any-return]
                if current > index:
                    break
        except av.error.FFmpegError as exc:
            raise ReaderError(f"{self.path}: frame {index} cannot be decoded: {exc}") from None
        self._decoder = None
        raise ReaderError(f"{self.path}: has no frame {index}")
