"""``DatasetWriter``: stream episodes into an ORTF v0.2 dataset as they happen.

Usage::

    with DatasetWriter(path, manifest) as writer:
        writer.begin_episode("Pick up the red box")
        for t, state, action, images in teleop:
            writer.add_step(t, state, action, images)
        writer.end_episode(success=True)

Steps and frames go to the staging area as they arrive (see ``ortf_ros.dataset.staging``):
frames through a bounded ring of shared memory to each camera's encoder process
(``ortf_ros.io.encoder_process``), steps and native-rate
samples in small batches. Nothing of an episode is held in memory beyond those bounds
(``WriterConfig``), so memory does not grow with episode length. ``end_episode``
commits through ``ortf_ros.dataset.commit``, the same code ``ortf recover`` runs after a crash.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import IO, Any, cast

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike

from ortf_ros.dataset.accounting import with_frames_encoded
from ortf_ros.dataset.catalog import Catalog, load_manifest, new_manifest_identity, utc_now_iso
from ortf_ros.dataset.commit import commit_staged
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.deletion import finish_pending_deletion, pending_deletion
from ortf_ros.dataset.depth_preview import stage_depth_preview
from ortf_ros.dataset.reader import Episode
from ortf_ros.dataset.recording import CopiedVideo, Recording
from ortf_ros.dataset.staging import (
    EpisodeHeader,
    EpisodeOutcome,
    StagedEpisode,
    lock_dataset,
    staged_episode_dirs,
    unlock_dataset,
)
from ortf_ros.dataset.validation import check_manifest
from ortf_ros.errors import OrtfError, ReaderError, VideoRefusedError, WriterError
from ortf_ros.format import layout, point_clouds
from ortf_ros.format.accounting import StreamAccount, accounts_to_rows
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.metadata import EpisodeRecord, EpisodeSource
from ortf_ros.format.schema import step_schema
from ortf_ros.format.sensors import Sensor
from ortf_ros.io import atomic
from ortf_ros.io.encoder_process import Prestart, StagedVideoWriter, wait_for_processes_let_go
from ortf_ros.io.h264 import PUBLISHED_ENCODING_KEY
from ortf_ros.io.packet_video import StagedPacketVideo
from ortf_ros.io.segment import VideoSegment, stage_segment
from ortf_ros.io.video import (
    LOSSLESS_DEPTH_ENCODING,
    RGB_ENCODING,
    frame_kind,
    probe,
    storage_format,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Annotations:
    """Episode annotations: ``scene_objects.json`` content, a JPEG of the first frame, and
    ``recording.json``: how the episode was recorded (a live recorder's messages received
    and dropped per topic), kept with the episode so a lossy take can be told later."""

    scene_objects: Mapping[str, Any] | None = None
    first_frame_jpeg: bytes | None = None
    recording: Mapping[str, Any] | None = None


class DatasetWriter:
    """Creates a dataset or appends episodes to one; one episode at a time.

    ``urdf`` is the robot description's XML text (as published on /robot_description);
    ``meshes`` a directory copied to robot/meshes.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        manifest: Manifest | None = None,
        *,
        config: WriterConfig | None = None,
        urdf: str | None = None,
        meshes: str | os.PathLike[str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.config = config or WriterConfig()
        self._manifest = manifest
        self._urdf = urdf
        self._meshes = Path(meshes) if meshes is not None else None
        self._catalog: Catalog | None = None
        self._lock: IO[bytes] | None = None
        self._recording: Recording | None = None

    # -- lifetime ---------------------------------------------------------------

    def open(self) -> DatasetWriter:
        if self._catalog is not None:
            raise WriterError(f"{self.root}: writer is already open")
        existing = check_target(self.root)
        created_root = not self.root.exists()
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = lock_dataset(self.root)
        try:
            self._catalog = self._open_existing() if existing else self._create()
        except BaseException:
            unlock_dataset(self.root, self._lock)
            self._lock = None
            if created_root and not any(self.root.iterdir()):
                self.root.rmdir()
            raise
        return self

    def close(self) -> None:
        """Release the dataset. An episode still open stays staged for ``ortf recover``."""
        recording, self._recording = self._recording, None
        try:
            if recording is not None:
                log.warning(
                    "%s: episode %s was not ended; it stays staged, run `ortf recover %s`",
                    self.root,
                    recording.header.episode_id,
                    self.root,
                )
                recording.close_files()
        finally:
            self._catalog = None
            if self._lock is not None:
                unlock_dataset(self.root, self._lock)
                self._lock = None

    def __enter__(self) -> DatasetWriter:
        return self.open()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def episode_count(self) -> int:
        return len(self._open_catalog().episodes)

    @property
    def manifest(self) -> Manifest:
        return self._open_catalog().manifest

    @property
    def episode_origin(self) -> float | None:
        """The timestamp the open episode's clock counts from (its first step's or sample's,
        as given); None before it has one."""
        return self._current().origin

    def _held_lock(self) -> int:
        """The writer lock's file descriptor, for an encoder process to hold as well."""
        if self._lock is None:
            raise WriterError(f"{self.root}: writer is not open")
        return self._lock.fileno()

    def _open_catalog(self) -> Catalog:
        if self._catalog is None:
            raise WriterError(f"{self.root}: writer is not open")
        return self._catalog

    def _create(self) -> Catalog:
        if self._manifest is None:
            raise WriterError(f"{self.root}: a manifest is needed to create a new dataset")
        manifest = new_manifest_identity(self._manifest)
        # Native-rate streams get a file per episode: a commit never rewrites another's samples.
        files = {"chunk_size": self.config.chunk_size, layout.STREAM_FILES_KEY: layout.STREAM_FILES_PER_EPISODE}
        manifest = replace(manifest, extra={**manifest.extra, **files})
        manifest = replace(manifest, sensors=tuple(_with_storage_encoding(s) for s in manifest.sensors))
        if self._urdf is not None:
            manifest = replace(manifest, robot=replace(manifest.robot, urdf_path=layout.URDF))
        _check_writable(manifest)
        if self._urdf is not None:
            atomic.write_text(self.root / layout.URDF, self._urdf)
        if self._meshes is not None:
            shutil.copytree(self._meshes, self.root / layout.MESHES_DIR, dirs_exist_ok=True)
        return Catalog.create(self.root, manifest)

    def _open_existing(self) -> Catalog:
        staged = staged_episode_dirs(self.root)
        if staged:
            raise WriterError(
                f"{self.root}: has an unfinished episode ({staged[0].name}); "
                f"run `ortf recover {self.root}` (or `--discard`) first"
            )
        catalog = Catalog.load(self.root)
        if pending_deletion(self.root) is not None:  # an interrupted delete is finished before anything is added
            finish_pending_deletion(catalog)
        if self._manifest is not None:
            differences = manifest_differences(catalog.manifest, self._manifest)
            if differences:
                raise WriterError(f"{self.root}: cannot append: " + "; ".join(differences))
        return catalog

    # -- episodes ---------------------------------------------------------------

    def begin_episode(
        self,
        task: str,
        *,
        task_type: str | None = None,
        task_description: str | None = None,
        recorded_at: str | None = None,
        source: EpisodeSource | None = None,
    ) -> str:
        """Start an episode for the task instruction ``task``; returns its episode id.
        ``source``: the recording it is converted from (``EpisodeSource``)."""
        catalog = self._open_catalog()
        if self._recording is not None:
            raise WriterError(f"episode {self._recording.header.episode_id} is still open; end or discard it first")
        if not task.strip():
            raise WriterError("task instruction must not be empty")
        index = catalog.next_episode_index
        # An episode whose commit failed stays staged for `ortf recover`: its number is taken too.
        while catalog.record(layout.episode_id_for(index)) is not None or StagedEpisode.exists(self.root, index):
            index += 1
        header = EpisodeHeader(
            episode_index=index,
            episode_id=layout.episode_id_for(index),
            task=task,
            recorded_at=recorded_at or utc_now_iso(),
            task_type=task_type,
            task_description=task_description,
            source=source,
        )
        wait_for_processes_let_go()  # before the episode's directory may be made anew
        staged = StagedEpisode.create(self.root, header)
        self._recording = Recording(staged, header, catalog.manifest)
        return header.episode_id

    def start_encoders(self) -> Prestart:
        """Start an encoder process for each camera now rather than at its first frame, for
        a live recorder before its first episode; ``ready()`` of the result says when they
        serve (``encoder_process.Prestart``)."""
        videos = []
        for sensor in self.manifest.cameras.values():
            assert sensor.resolution is not None  # checked at open
            if PUBLISHED_ENCODING_KEY in sensor.extra:
                continue  # (its published packets are muxed as they are: no encoder)
            videos.append((sensor.resolution.width, sensor.resolution.height, frame_kind(sensor)))
        return Prestart(videos, self.config.encoder_queue_frames)

    def set_task(self, task: str) -> None:
        """Change the open episode's task instruction (it may be announced after the episode began)."""
        recording = self._current()
        if not task.strip():
            raise WriterError("task instruction must not be empty")
        recording.header = replace(recording.header, task=task)
        recording.staged.write_header(recording.header)

    def _current(self) -> Recording:
        if self._recording is None:
            raise WriterError("no episode in progress: call begin_episode first")
        return self._recording

    def add_frame(self, camera: str, image: np.ndarray) -> int:
        """Hand one camera frame to its encoder (copied, or for a view of a read-only
        ``MappedFile`` its place in the file: either way the caller may reuse the array);
        returns its frame index in the episode's video."""
        recording = self._current()
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
        recording = self._current()
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
        recording = self._current()
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

    def add_sample(
        self,
        stream: str,
        timestamp: float,
        values: Mapping[str, ArrayLike],
        *,
        stamp_ns: int | None = None,
        receive_ns: int | None = None,
    ) -> int:
        """Record one sample of a native-rate stream; returns its index for ``add_step(samples=...)``.

        ``timestamp`` is on the steps' clock; ``stamp_ns``/``receive_ns`` keep the raw
        header stamp and receive time of the message it came from.
        """
        rows = {name: cast("ArrayLike", [value]) for name, value in values.items()}
        return self.add_samples(stream, [timestamp], rows, stamp_ns=[stamp_ns], receive_ns=[receive_ns])

    def add_samples(
        self,
        stream: str,
        timestamps: ArrayLike,
        values: Mapping[str, ArrayLike],
        *,
        stamp_ns: Sequence[int | None] | None = None,
        receive_ns: Sequence[int | None] | None = None,
    ) -> int:
        """Record consecutive samples of a native-rate stream in one call, as ``add_sample``
        would one by one (``values[column]`` has a row per sample); all are checked before
        any is kept, and if writing them fails (WriterError) none is. Returns the index of
        the first. A stream at kHz costs a call per batch instead of one per sample.
        """
        recording = self._current()
        log = recording.stream_log(self.manifest, stream)
        times = np.asarray(timestamps, dtype=np.float64).reshape(-1)
        count = len(times)
        if values.keys() != log.dims.keys():
            _check_keys(f"stream {stream!r}", "column", values, log.dims)
        columns = [_rows(f"stream {stream!r} {name}", values[name], count, dim) for name, dim in log.dims.items()]
        stamps = [None] * count if stamp_ns is None else list(stamp_ns)
        receives = [None] * count if receive_ns is None else list(receive_ns)
        if len(stamps) != count or len(receives) != count:
            raise WriterError(
                f"stream {stream!r}: {count} timestamps, {len(stamps)} stamp_ns, {len(receives)} receive_ns"
            )
        if not count:
            return log.count
        rows = columns[0] if len(columns) == 1 else np.concatenate(columns, axis=1)
        start = float(times[0])
        first = log.add(times, rows, stamps, receives, recording.origin if recording.origin is not None else start)
        recording.clock(start)  # only samples kept may start the episode's clock
        return first

    def add_audio(
        self,
        microphone: str,
        samples: np.ndarray,
        timestamp: float,
        *,
        time_ns: int,
        stamp_ns: int | None = None,
        receive_ns: int,
    ) -> int:
        """Append one audio message's samples (interleaved, in the microphone's sample
        format) to its file; returns the index of its first frame there. ``timestamp``: its
        time on the steps' clock (audio does not start the episode's clock)."""
        files = self._current().audio
        audio = files.get(microphone)
        if audio is None:
            raise WriterError(f"unknown microphone {microphone!r}; the manifest declares {sorted(files)}")
        return audio.add(samples, timestamp, time_ns=time_ns, stamp_ns=stamp_ns, receive_ns=receive_ns)

    def add_point_cloud(
        self,
        name: str,
        timestamp: float,
        values: Mapping[str, np.ndarray],
        *,
        height: int,
        width: int,
        is_dense: bool,
        frame_id: str | None = None,
        stamp_ns: int | None = None,
        receive_ns: int | None = None,
    ) -> int:
        """Record one cloud of point cloud stream ``name`` (``dataset.point_clouds``):
        ``values`` per declared field, the ``height x width`` points row-major. ``timestamp``
        is on the steps' clock, and may start the episode's clock. Returns its index."""
        recording = self._current()
        log = recording.cloud_log(self.manifest, name)
        relative = timestamp - (recording.origin if recording.origin is not None else timestamp)
        index = log.add(
            relative,
            values,
            height=height,
            width=width,
            is_dense=is_dense,
            frame_id=frame_id,
            stamp_ns=stamp_ns,
            receive_ns=receive_ns,
        )
        recording.clock(timestamp)
        return index

    def add_audio_file(self, microphone: str, audio: Path, table: Path) -> None:
        """Stage an audio file and its chunk table written elsewhere (another dataset's
        episode, an export's copy) as the microphone's in this episode, unchanged."""
        files = self._current().audio
        if microphone not in files:
            raise WriterError(f"unknown microphone {microphone!r}; the manifest declares {sorted(files)}")
        files[microphone].copy_from(audio, table)

    def add_step(
        self,
        timestamp: float,
        state: Mapping[str, ArrayLike],
        action: ArrayLike,
        images: Mapping[str, np.ndarray] | None = None,
        *,
        samples: Mapping[str, int] | None = None,
        alignment_ms: Mapping[str, float] | None = None,
        frames: Mapping[str, int] | None = None,
    ) -> None:
        """Record one step.

        ``timestamp`` is in seconds on any clock (stored relative to the episode's first
        step or sample). ``images`` are new frames for this step; each camera uses its
        newest frame unless ``frames`` names another (the one nearest the step time,
        say). ``samples`` names, per native-rate stream, the sample this step used;
        ``alignment_ms`` how far from the step time each aligned stream's sample was.
        Everything is checked before anything is written: a step refused (WriterError)
        is not recorded. Once checked, the step is recorded, and steps go to the staging
        log ``step_batch`` at a time; when that append fails (a full disk), the WriterError
        says so and the steps stay held for the next append: record the next step, not
        this one again.
        """
        recording = self._current()
        rows = recording.rows
        timestamp = float(timestamp)
        if not np.isfinite(timestamp) or timestamp <= recording.last_timestamp:
            raise WriterError(
                f"step {recording.steps}: timestamp {timestamp} must be finite and after the previous step's "
                f"({recording.last_timestamp})"
            )
        vectors = np.empty(rows.width, np.float32)
        _fill_vector(vectors, rows.action, "action", action)
        if state.keys() != rows.state.keys():
            _check_keys(f"step {recording.steps} state", "state component", state, rows.state)
        for name, part in rows.state.items():
            _fill_vector(vectors, part, f"state {name}", state[name])
        sample_indices, alignment = self._stream_columns(recording, samples or {}, alignment_ms or {})
        checked = {camera: self._checked_image(camera, image) for camera, image in (images or {}).items()}
        for camera, image in checked.items():
            self.add_frame(camera, image)
        frames = frames or {}
        if not frames.keys() <= rows.camera_set:
            _check_keys(f"step {recording.steps} frames", "camera", frames, rows.cameras, partial=True)
        frame_indices = []
        for camera in rows.cameras:
            writer = recording.videos.get(camera)
            written = writer.frames_written if writer is not None else 0
            index = frames.get(camera, written - 1)
            if not 0 <= index < written:
                raise WriterError(f"step {recording.steps}: camera {camera!r} has no frame {index} ({written} written)")
            frame_indices.append(index)
        rows.add(recording.steps, recording.relative(timestamp), vectors, frame_indices, sample_indices, alignment)
        recording.steps += 1
        recording.last_timestamp = timestamp
        if len(rows) >= self.config.step_batch:
            recording.append_steps()

    def _stream_columns(
        self, recording: Recording, samples: Mapping[str, int], alignment_ms: Mapping[str, float]
    ) -> tuple[list[int | None], list[float | None]]:
        """Per native stream the sample index (None: none used), per aligned stream the error in ms."""
        rows = recording.rows
        if not samples.keys() <= rows.stream_set:
            _check_keys(f"step {recording.steps} samples", "stream", samples, rows.streams, partial=True)
        if not alignment_ms.keys() <= rows.aligned_set:
            _check_keys(f"step {recording.steps} alignment_ms", "stream", alignment_ms, rows.aligned, partial=True)
        indices: list[int | None] = []
        for stream in rows.streams:
            index = samples.get(stream)
            if index is not None:
                log = recording.stream_logs.get(stream)
                recorded = log.count if log is not None else 0
                if log is None or not 0 <= index < log.count:
                    raise WriterError(
                        f"step {recording.steps}: stream {stream!r} has no sample {index} ({recorded} recorded)"
                    )
            indices.append(index)
        errors: list[float | None] = []
        for stream in rows.aligned:
            error = alignment_ms.get(stream)
            if error is not None and not (math.isfinite(error) and error >= 0):
                raise WriterError(f"step {recording.steps}: alignment of {stream!r} must be >= 0 ms, got {error}")
            errors.append(error)
        return indices, errors

    def end_episode(
        self,
        success: bool | None = None,
        failure_reason: str | None = None,
        operator_notes: str | None = None,
        *,
        terminal: bool | None = None,
        annotations: Annotations | None = None,
        accounting: Sequence[StreamAccount] | None = None,
    ) -> EpisodeRecord:
        """Commit the episode. ``terminal`` defaults to whether it was evaluated (success not None).
        ``accounting``: what each stream delivered up to the writer (the pipeline's counts);
        the writer adds the frames it handed each encoder, the commit what the files hold."""
        recording = self._current()
        if recording.steps == 0:
            raise WriterError(f"episode {recording.header.episode_id} has no steps; add steps or discard it")
        if annotations is not None:
            _stage_annotations(recording.staged, annotations)
        frames = {camera: video.frames_written for camera, video in recording.videos.items()}
        outcome = EpisodeOutcome(
            success=success,
            failure_reason=failure_reason,
            operator_notes=operator_notes,
            terminal=success is not None if terminal is None else terminal,
            accounting=accounts_to_rows(with_frames_encoded(accounting, self.manifest, frames)),
        )
        return self._commit(recording, outcome)

    def _commit(self, recording: Recording, outcome: EpisodeOutcome) -> EpisodeRecord:
        recording.close_files()
        self._recording = None
        try:
            return commit_staged(self._open_catalog(), recording.staged, outcome, row_groups=self.config.row_groups)
        except OrtfError:
            raise
        except (OSError, pa.ArrowException) as exc:
            raise WriterError(
                f"episode {recording.header.episode_id}: commit failed ({exc}); it stays staged for `ortf recover`"
            ) from exc

    def import_episode(self, episode: Episode) -> EpisodeRecord:
        """Append a committed episode of another dataset laid out like this one, its videos
        copied as they are (no re-encode). Parallel conversion writes each recording to a
        dataset of its own and imports them in order, since a dataset has one writer."""
        source = episode.dataset
        differences = manifest_differences(self.manifest, source.manifest)
        if differences:
            raise WriterError(f"{source.root}: cannot import episode {episode.episode_id}: " + "; ".join(differences))
        record = episode.record
        task = episode.task
        self.begin_episode(task.instruction, task_type=task.type, recorded_at=record.recorded_at, source=record.source)
        recording = self._current()
        try:
            terminal = False
            for batch in episode.step_batches():
                relabelled = _relabel(batch, recording.schema, recording.header.episode_id, recording.steps)
                recording.step_log.append(relabelled)
                recording.steps += batch.num_rows
                terminal = bool(batch.column("is_terminal")[-1].as_py())
            for stream in self.manifest.native_streams:
                log = recording.stream_log(self.manifest, stream)
                for batch in episode.stream_batches(stream):
                    log.append(_relabel(batch, log.schema, recording.header.episode_id, None))
            for microphone in recording.audio:
                self.add_audio_file(microphone, *episode.audio_files(microphone))
            for name in point_clouds.declarations(self.manifest):
                chunk, index = episode.record.chunk_id, source.file_index(episode.record)
                recording.cloud_log(self.manifest, name).append_file(
                    source.root / point_clouds.cloud_path(name, chunk, index)
                )
            for camera in self.manifest.cameras:
                target = recording.staged.video_file(camera)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(episode.video_path(camera), target)
            if episode.annotations_dir.is_dir():
                shutil.copytree(episode.annotations_dir, recording.staged.annotations_dir)
        except BaseException:
            self.discard_episode()
            raise
        outcome = EpisodeOutcome(
            record.success, record.failure_reason, record.operator_notes, terminal, accounts_to_rows(record.accounting)
        )
        return self._commit(recording, outcome)

    def complete_source(self, episode_ids: Sequence[str], count: int) -> None:
        """After the last episode converted from a recording: how many it gave, written on
        each of its episodes (``EpisodeSource.episodes``), so a rerun knows it is whole."""
        if self._recording is not None:
            raise WriterError(f"episode {self._recording.header.episode_id} is still open; end or discard it first")
        self._open_catalog().complete_source(episode_ids, count)

    def discard_episode(self) -> None:
        """Drop the episode in progress, also after a failure (an encoder's, a full disk):
        what did not reach its files does not matter once they are removed."""
        recording = self._current()
        with contextlib.suppress(WriterError):
            recording.close_files()
        wait_for_processes_let_go()  # or one would make the directory again, to open its video
        recording.staged.remove()
        self._recording = None


def check_target(root: Path) -> bool:
    """Whether ``root`` is a dataset to append to (False: one to create), refusing, before
    anything leaves a trace there (a lock, a directory), a directory that is not empty and
    not a dataset, or a dataset whose manifest does not read."""
    existing = (root / layout.MANIFEST).exists()
    if not existing and root.exists() and any(root.iterdir()):
        raise WriterError(f"{root}: refusing to write into a non-empty directory that is not an ORTF dataset")
    if existing:
        load_manifest(root)
    return existing


def _relabel(batch: pa.RecordBatch, schema: pa.Schema, episode_id: str, first_step: int | None) -> pa.RecordBatch:
    """Rows of another dataset under this episode's id (and, for steps, staged step indices)."""
    columns = {name: batch.column(name) for name in schema.names}
    columns["episode_id"] = pa.array([episode_id] * batch.num_rows, pa.string())
    if first_step is not None:
        columns["step_index"] = pa.array(range(first_step, first_step + batch.num_rows), pa.int64())
    return pa.RecordBatch.from_arrays([columns[n].cast(schema.field(n).type) for n in schema.names], schema=schema)


def manifest_differences(dataset: Manifest, given: Manifest) -> list[str]:
    """What makes episodes described by ``given`` unfit for a dataset described by ``dataset``."""
    found = []

    def compare(what: str, theirs: object, ours: object) -> None:
        if theirs != ours:
            found.append(f"{what} differ (dataset: {theirs}; new: {ours})")

    compare("cameras", sorted(dataset.cameras), sorted(given.cameras))
    for key in sorted(set(dataset.cameras) & set(given.cameras)):
        a, b = dataset.cameras[key], given.cameras[key]
        compare(f"camera {key!r} resolution and type", (a.resolution, a.type), (b.resolution, b.type))
    compare("joints", [j.name for j in dataset.robot.joints], [j.name for j in given.robot.joints])
    compare("action dimensions", [d.name for d in dataset.action_space.dimensions],
            [d.name for d in given.action_space.dimensions])  # fmt: skip
    if not found and step_schema(dataset) != step_schema(given):
        found.append(f"step columns differ (dataset: {step_schema(dataset).names}; new: {step_schema(given).names})")
    return found


def _check_keys(
    what: str, kind: str, given: Mapping[str, Any], declared: Collection[str], *, partial: bool = False
) -> None:
    unknown = set(given) - set(declared)
    missing = set() if partial else set(declared) - set(given)
    if unknown or missing:
        raise WriterError(
            f"{what}: unknown {kind}(s) {sorted(unknown)}, missing {sorted(missing)}; declared: {sorted(declared)}"
        )


def _rows(what: str, value: ArrayLike, count: int, dim: int) -> np.ndarray:
    """``value`` as ``count`` rows of ``dim`` real numbers, float64 (not yet checked to be finite)."""
    try:
        array = np.asarray(value)
    except ValueError:  # ragged
        raise WriterError(f"{what}: expected {count} rows of {dim} values") from None
    if array.shape != (count, dim):
        got = array.shape[1:] if array.ndim and array.shape[0] == count else array.shape
        raise WriterError(f"{what}: expected {dim} values, got shape {got}")
    if array.dtype.kind not in "iuf":
        raise WriterError(f"{what}: expected real numbers, got dtype {array.dtype}")
    return array.astype(np.float64, copy=False)


def _fill_vector(buffer: np.ndarray, part: slice, what: str, value: ArrayLike) -> None:
    """Check ``value`` (size, real, finite) and store it in ``buffer[part]`` as float32."""
    dim = part.stop - part.start
    array = np.asarray(value, dtype=np.float64) if not isinstance(value, np.ndarray) else value
    if array.shape != (dim,):
        raise WriterError(f"{what}: expected {dim} values, got shape {array.shape}")
    if array.dtype.kind not in "iuf":  # dtype.kind: cheap on the per-step path
        raise WriterError(f"{what}: expected real numbers, got dtype {array.dtype}")
    if not np.isfinite(array).all():
        raise WriterError(f"{what}: values must be finite, got {array.tolist()}")
    buffer[part] = array


def _with_storage_encoding(sensor: Sensor) -> Sensor:
    """Record in the manifest how this writer stores each camera."""
    if not sensor.is_camera:
        return sensor
    return replace(sensor, encoding=LOSSLESS_DEPTH_ENCODING if sensor.is_depth else RGB_ENCODING)


def _check_writable(manifest: Manifest) -> None:
    errors = [f for f in check_manifest(manifest) if f.severity == "error"]
    if errors:
        raise WriterError("manifest is not valid ORTF: " + "; ".join(f.field_message() for f in errors))
    for key, sensor in manifest.cameras.items():
        res = sensor.resolution
        if res is None or res.width % 2 or res.height % 2:
            raise WriterError(f"camera {key!r}: resolution must be given with even width and height")


def _stage_annotations(staged: StagedEpisode, annotations: Annotations) -> None:
    target = staged.annotations_dir
    target.mkdir(parents=True, exist_ok=True)
    if annotations.scene_objects is not None:
        atomic.write_json(target / "scene_objects.json", dict(annotations.scene_objects))
    if annotations.first_frame_jpeg is not None:
        atomic.write_bytes(target / "first_frame.jpg", annotations.first_frame_jpeg)
    if annotations.recording is not None:
        atomic.write_json(target / "recording.json", dict(annotations.recording))
