"""A ``DatasetWriter``'s camera input: frames handed to each camera's encoder process
(``io.encoder_process``), published H.264 packets muxed as they are (``io.packet_video``),
and already-encoded videos copied whole (``io.segment``), each checked against how the
manifest declares the camera."""

from __future__ import annotations

import numpy as np

from ortf_ros.dataset.depth_preview import stage_depth_preview
from ortf_ros.dataset.recording import CopiedVideo
from ortf_ros.dataset.writer_core import WriterCore
from ortf_ros.errors import ReaderError, VideoRefusedError, WriterError
from ortf_ros.io.encoder_pool import Prestart
from ortf_ros.io.h264 import PUBLISHED_ENCODING_KEY
from ortf_ros.io.packet_video import StagedPacketVideo
from ortf_ros.io.segment import VideoSegment, stage_segment
from ortf_ros.io.staged_video import StagedVideoWriter
from ortf_ros.io.video import frame_kind, probe, storage_format


class VideoInput(WriterCore):
    """Frames, packets and whole videos of the episode in progress."""

    def start_encoders(self) -> Prestart:
        """Start an encoder process for each camera now rather than at its first frame, for
        a live recorder before its first episode; ``ready()`` of the result says when they
        serve (``encoder_pool.Prestart``)."""
        videos = []
        for sensor in self.manifest.cameras.values():
            assert sensor.resolution is not None  # checked at open
            if PUBLISHED_ENCODING_KEY in sensor.extra:
                continue  # (its published packets are muxed as they are: no encoder)
            videos.append((sensor.resolution.width, sensor.resolution.height, frame_kind(sensor)))
        return Prestart(videos, self.config.encoder_queue_frames)

    def add_frame(self, camera: str, image: np.ndarray) -> int:
        """Hand one camera frame to its encoder (copied, or for a view of a read-only
        ``MappedFile`` its place in the file: either way the caller may reuse the array);
        returns its frame index in the episode's video."""
        recording = self.recording
        image = self._checked_image(camera, image)
        writer = recording.videos.get(camera)
        if isinstance(writer, (CopiedVideo, StagedPacketVideo)):
            raise WriterError(f"camera {camera!r}: this episode's video was added encoded; it takes no more frames")
        if writer is None:
            sensor = self.manifest.cameras[camera]
            assert sensor.resolution is not None and sensor.fps is not None  # checked at open
            writer = StagedVideoWriter(
                recording.staged.video_file(camera),
                sensor.resolution.width,
                sensor.resolution.height,
                sensor.fps,
                frame_kind(sensor),
                self.config.video.with_threads(sum(not c.is_depth for c in self.manifest.cameras.values())),
                camera=camera,
                queue_frames=self.config.encoder_queue_frames,
                hold=self._held_lock(),  # the dataset stays locked until the video is complete
            )
            recording.videos[camera] = writer
            if sensor.is_depth:  # its first frame, kept as a picture now (not decoded back at the commit)
                stage_depth_preview(recording.staged.annotations_dir, self.manifest, camera, image)
        return writer.write(image)

    def add_packet(self, camera: str, data: bytes, keyframe: bool) -> int:
        """Mux one published H.264 packet (Annex B, a frame) as the camera's next frame,
        unchanged (``io.packet_video``); returns its frame index. The episode's first
        packet of a camera must be a ``keyframe`` (an IDR with its SPS and PPS)."""
        recording = self.recording
        if camera not in self.manifest.cameras:
            raise WriterError(f"unknown camera {camera!r}; the manifest declares {sorted(self.manifest.cameras)}")
        if self.manifest.cameras[camera].is_depth:
            raise WriterError(f"camera {camera!r}: a depth camera is stored losslessly; it takes no H.264 packets")
        writer = recording.videos.get(camera)
        if writer is None:
            fps = self.manifest.cameras[camera].fps
            assert fps is not None  # checked at open
            writer = StagedPacketVideo(recording.staged.video_file(camera), fps, camera=camera)
            recording.videos[camera] = writer
        if not isinstance(writer, StagedPacketVideo):
            raise WriterError(f"camera {camera!r}: this episode's video is encoded from frames; it takes no packets")
        return writer.write(data, keyframe)

    def add_encoded_video(self, camera: str, segment: VideoSegment) -> int:
        """Stage ``segment`` of an already-encoded video as the camera's whole video in this
        episode, its packets copied unchanged: no re-encode, so every frame decodes
        bit-exactly as in the source. Returns its frame count; steps name their frame of it
        with ``add_step(frames=...)``. Refused (WriterError naming why, nothing staged) when
        it is not stored as this writer stores the camera (codec, pixel format, size, frame
        rate), is not cut at keyframes so that its packets decode on their own, or when the
        camera already has frames (``VideoRefusedError``): a caller falls back to adding
        decoded frames. A copy that cannot be written is a plain WriterError naming the
        file, and stages nothing too."""
        recording = self.recording
        if camera in recording.videos:
            raise VideoRefusedError(f"camera {camera!r} already has frames in episode {recording.header.episode_id}")
        problem = self._format_problem(camera, segment)
        if problem is not None:
            raise VideoRefusedError(problem)
        target = recording.staged.video_file(camera)
        try:
            stage_segment(segment, target)  # checks the cut as it copies; nothing is left if it fails
        except ReaderError as exc:  # (a cut that is not clean, a source that does not decode)
            raise VideoRefusedError(str(exc)) from None
        recording.videos[camera] = CopiedVideo(segment.count)
        return segment.count

    def _format_problem(self, camera: str, segment: VideoSegment) -> str | None:
        sensor = self.manifest.cameras.get(camera)
        if sensor is None:
            return f"unknown camera {camera!r}; the manifest declares {sorted(self.manifest.cameras)}"
        assert sensor.resolution is not None and sensor.fps is not None  # checked at open
        expected = storage_format(frame_kind(sensor), self.config.video)
        try:
            info = probe(segment.path)
        except ReaderError as exc:
            return str(exc)
        found = (info.codec, info.pix_fmt, info.width, info.height, round(info.fps))
        if found == (*expected, sensor.resolution.width, sensor.resolution.height, round(sensor.fps)):
            return None
        return (
            f"{segment.path}: is {info.codec}/{info.pix_fmt} {info.width}x{info.height} at {info.fps:g} fps; "
            f"camera {camera!r} is stored as {expected[0]}/{expected[1]} "
            f"{sensor.resolution.width}x{sensor.resolution.height} at {sensor.fps:g} fps"
        )

    def _checked_image(self, camera: str, image: np.ndarray) -> np.ndarray:
        sensor = self.manifest.cameras.get(camera)
        if sensor is None:
            raise WriterError(f"unknown camera {camera!r}; the manifest declares {sorted(self.manifest.cameras)}")
        assert sensor.resolution is not None  # checked at open
        res = sensor.resolution
        shape = (res.height, res.width) if sensor.is_depth else (res.height, res.width, 3)
        expected_dtype = np.uint16 if sensor.is_depth else np.uint8
        image = np.asarray(image)
        if image.shape != shape or image.dtype != expected_dtype:
            raise WriterError(
                f"camera {camera!r}: expected a {np.dtype(expected_dtype).name} image of shape {shape}, "
                f"got {image.dtype.name} {image.shape}"
            )
        return image
