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
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa

from ortf_ros.dataset.accounting import with_frames_encoded
from ortf_ros.dataset.catalog import Catalog, load_manifest, new_manifest_identity, utc_now_iso
from ortf_ros.dataset.commit import commit_staged
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.deletion import finish_pending_deletion, pending_deletion
from ortf_ros.dataset.recording import Recording
from ortf_ros.dataset.sample_input import SampleInput
from ortf_ros.dataset.staging import (
    DatasetLock,
    EpisodeHeader,
    EpisodeOutcome,
    StagedEpisode,
    lock_dataset,
    staged_episode_dirs,
    unlock_dataset,
)
from ortf_ros.dataset.step_input import StepInput
from ortf_ros.dataset.validation import check_manifest
from ortf_ros.errors import OrtfError, WriterError
from ortf_ros.format import layout
from ortf_ros.format.accounting import StreamAccount, accounts_to_rows
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.metadata import EpisodeRecord, EpisodeSource
from ortf_ros.format.schema import step_schema
from ortf_ros.format.sensors import Sensor
from ortf_ros.io import atomic
from ortf_ros.io.encoder_pool import wait_for_processes_let_go
from ortf_ros.io.video import LOSSLESS_DEPTH_ENCODING, RGB_ENCODING

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Annotations:
    """Episode annotations: ``scene_objects.json`` content, a JPEG of the first frame, and
    ``recording.json``: how the episode was recorded (a live recorder's messages received
    and dropped per topic), kept with the episode so a lossy take can be told later."""

    scene_objects: Mapping[str, Any] | None = None
    first_frame_jpeg: bytes | None = None
    recording: Mapping[str, Any] | None = None


class DatasetWriter(StepInput, SampleInput):
    """Creates a dataset or appends episodes to one; one episode at a time.

    ``urdf`` is the robot description's XML text (as published on /robot_description);
    ``meshes`` a directory copied to robot/meshes.

    Here: the dataset's lifetime and each episode's (begin, end, commit, discard). What an
    episode takes in has a module per kind, the classes this one is made of: frames,
    packets and videos (``video_input``), native-rate samples, audio and clouds
    (``sample_input``), steps (``step_input``).
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
        self._lock: DatasetLock | None = None
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
    def episode_origin(self) -> float | None:
        """The timestamp the open episode's clock counts from (its first step's or sample's,
        as given); None before it has one."""
        return self.recording.origin

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

    def set_task(self, task: str) -> None:
        """Change the open episode's task instruction (it may be announced after the episode began)."""
        recording = self.recording
        if not task.strip():
            raise WriterError("task instruction must not be empty")
        recording.header = replace(recording.header, task=task)
        recording.staged.write_header(recording.header)

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
        recording = self.recording
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
        return self.commit_episode(outcome)

    def commit_episode(self, outcome: EpisodeOutcome) -> EpisodeRecord:
        """Commit the episode in progress with ``outcome`` as it is (``end_episode`` makes
        it from the labels, ``importing.import_episode`` takes another dataset's)."""
        recording = self.recording
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

    def complete_source(self, episode_ids: Sequence[str], count: int) -> None:
        """After the last episode converted from a recording: how many it gave, written on
        each of its episodes (``EpisodeSource.episodes``), so a rerun knows it is whole."""
        if self._recording is not None:
            raise WriterError(f"episode {self._recording.header.episode_id} is still open; end or discard it first")
        self._open_catalog().complete_source(episode_ids, count)

    def discard_episode(self) -> None:
        """Drop the episode in progress, also after a failure (an encoder's, a full disk):
        what did not reach its files does not matter once they are removed."""
        recording = self.recording
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
