"""``ortf export rerun``: episodes as one Rerun recording (``.rrd``) to open in the Rerun viewer.

What goes where is ``rerun_plan``'s; this module writes it with the Rerun SDK (the
optional extra ``ortf_ros[rerun]``, imported only when an export runs):

- colour cameras: the episode's MP4 as an ``AssetVideo`` (its bytes, not re-encoded) and
  a ``VideoFrameReference`` at each step where the camera's frame changes, pointing at
  that frame's time in the file; depth cameras: the frames decoded (FFV1 ``gray16le`` or
  npz) as ``DepthImage`` with the manifest's ``depth_units`` as the meter scale;
- cameras as pinholes from their intrinsics (none for ``{"unknown": true}``) in a frame
  placed by their extrinsics; TF frames and the URDF's links as named transform frames,
  the joints moved by the recorded joint positions;
- state, action and force-torque as scalar series, sent as columns a row group at a time.

Every episode has its own timeline ``episode_<id>`` (seconds since its start) in one
recording. One recording per episode would need several recordings in one file, which
the SDK does not write (concatenated files do not read back, and merging them takes the
``rerun`` command line tool); on its own timeline an episode shows alone, its entities
at the same paths as every other episode's, with the robot, frames and cameras shared.

Memory: a row group of steps or native samples, ``DEPTH_CHUNK_BYTES`` of decoded depth,
and one camera's MP4 at a time (an ``AssetVideo`` is one blob), each written by the SDK
before the next is read. The file is written beside its target and renamed over it once
it is whole.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ortf_ros.convert import rerun_lidar, rerun_plan
from ortf_ros.convert.rerun_plan import Plan, Source
from ortf_ros.dataset.reader import Dataset, Episode, column_array
from ortf_ros.errors import ExportError, UsageError
from ortf_ros.extras import optional_module
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.sensors import Sensor, Transform
from ortf_ros.io import atomic
from ortf_ros.playback.selection import open_for_playback

APPLICATION_ID = "ortf_ros"
DEPTH_UNITS_PER_METER = {"millimeters": 1000.0, "millimetres": 1000.0, "meters": 1.0, "metres": 1.0}
DEPTH_CHUNK_BYTES = 2 * 1024 * 1024
"""Depth pixels sent to Rerun as one chunk, then written before more are decoded: the SDK's
queue to its file writer does not wait on its own, and its footer keeps an entry per chunk
(a chunk per frame would make that grow with the episode)."""
DEFAULT_DEPTH_UNITS = "millimeters"  # what ORTF's 16-bit depth holds when the manifest does not say


@dataclass
class RerunExport:
    """What an export wrote: the file, the episodes (each on its timeline) and rows per entity."""

    path: Path
    episodes: tuple[str, ...]
    rows: dict[str, int] = field(default_factory=dict)  # entity path -> rows logged (all episodes)

    def count(self, entity: str, rows: int) -> None:
        self.rows[entity] = self.rows.get(entity, 0) + rows


def export_rerun(root: Path, out: Path, episode_ids: Sequence[str] | None = None) -> None:
    """Write the episodes (all when ``episode_ids`` is None or empty) of the dataset at
    ``root`` as the Rerun recording ``out``."""
    write_rerun(root, out, episode_ids)


def write_rerun(root: Path, out: Path, episode_ids: Sequence[str] | None = None) -> RerunExport:
    """``export_rerun``, telling what it wrote."""
    rr = rerun_sdk()
    if Path(out).is_dir():
        raise UsageError(f"{out}: is a directory; expected the path of the .rrd file to write")
    target = atomic.replaceable(Path(out))
    dataset, ids = open_for_playback(root, list(episode_ids or ()))
    manifest = dataset.manifest
    result = RerunExport(target, tuple(ids))
    with atomic.replacing(target) as tmp:
        recording = rr.RecordingStream(APPLICATION_ID, recording_id=manifest.dataset_id or uuid.uuid4().hex)
        plan = rerun_plan.plan(manifest)
        recording.set_sinks(rr.FileSink(str(tmp)), default_blueprint=_layout(rr, manifest, plan))
        # Only the episodes' timelines: no wall-clock time or log tick of the export itself.
        recording.set_log_time_enabled(False)
        recording.set_log_tick_enabled(False)
        try:
            recording.send_recording_name(manifest.name or Path(root).name)
            writer = _Writer(rr, recording, dataset, plan, result)
            writer.robot()
            writer.frames()
            writer.cameras()
            for entity, frame in rerun_lidar.frames(manifest).items():
                writer.static(entity, rr.CoordinateFrame(frame))
            for episode_id in ids:
                with dataset.episode(episode_id) as episode:
                    writer.episode(episode)
            recording.flush()
        except RuntimeError as exc:  # the SDK's file writer failed (its thread only says it stopped)
            raise _write_failure(tmp, target, exc) from None
        finally:
            recording.disconnect()
        _check_whole(rr, tmp, target)
    return result


def _layout(rr: Any, manifest: Manifest, plan: Plan) -> Any:
    """The viewer's default layout: the 3D scene (robot, frames, camera frustums) over the
    cameras, beside the plots (a tab per state component; the action and force-torque under
    it). Without it the viewer makes a view per scalar series: dozens for one arm."""
    rrb = rr.blueprint
    cameras = [rrb.Spatial2DView(origin=rerun_plan.path("cameras", key), name=key) for key in manifest.cameras]
    origins = plan.plots(manifest)
    plots = [rrb.TimeSeriesView(origin=plot, name=plot.strip("/")) for plot in origins]
    state = [p for p, plot in zip(plots, origins, strict=True) if plot.startswith("/state/")]
    others = [p for p in plots if p not in state]
    scene = rrb.Vertical(rrb.Spatial3DView(origin="/", name="scene"), rrb.Grid(*cameras), row_shares=[1, 1])
    return rrb.Blueprint(rrb.Horizontal(scene, rrb.Vertical(rrb.Tabs(*state), rrb.Tabs(*others))), collapse_panels=True)


def _write_failure(written: Path, target: Path, exc: RuntimeError) -> OSError | ExportError:
    """Why the SDK could not write: a byte appended to its file fails with the reason (a full
    disk, a file size limit) where the SDK's error only says its writer stopped."""
    try:
        with open(written, "ab") as handle:
            handle.write(b"\0")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as cause:
        return OSError(cause.errno, cause.strerror, str(target))
    return ExportError(f"{target}: the Rerun SDK could not write the recording: {exc}")


def _check_whole(rr: Any, written: Path, target: Path) -> None:
    """The file ends in its footer (Rerun's index of the chunks, written last): the SDK writes
    in a thread of its own and only logs what fails there (a full disk), so an incomplete
    file must not replace ``target``."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "no footer" is only a warning to the reader
        try:
            whole = bool(rr.chunk.RrdReader(written).recordings())
        except (Warning, RuntimeError, OSError, ValueError) as exc:
            raise ExportError(f"{target}: the Rerun SDK did not write the whole recording: {exc}") from None
    if not whole:
        raise ExportError(f"{target}: the Rerun SDK wrote no recording")


def rerun_sdk() -> Any:
    """The ``rerun`` module; a UsageError with the pip command when the extra is not installed."""
    return optional_module("rerun", "the Rerun export needs the Rerun SDK 0.41, on Python 3.11 or newer", "rerun")


def _durations(seconds: np.ndarray) -> np.ndarray:
    """Seconds since the episode's start as nanoseconds, rounded to the nearest (Rerun's own
    conversion truncates: 2/30 s would land a nanosecond before the step)."""
    return np.round(seconds * 1e9).astype(np.int64).astype("timedelta64[ns]")


def _quaternion_xyzw(transform: Transform) -> list[float]:
    w, x, y, z = transform.rotation
    return [x, y, z, w]


class _Writer:
    """Logs one dataset's static parts, then its episodes, into ``recording``."""

    def __init__(self, rr: Any, recording: Any, dataset: Dataset, plan: Plan, result: RerunExport) -> None:
        self.rr = rr
        self.recording = recording
        self.dataset = dataset
        self.manifest: Manifest = dataset.manifest
        self.plan = plan
        self.result = result
        self.urdf_joints: dict[str, Any] = {}  # joint name -> rerun.urdf.UrdfJoint it moves
        self.urdf_links: set[str] = set()

    # -- shared by every episode (static)

    def static(self, entity: str, *archetypes: Any) -> None:
        self.recording.log(entity, *archetypes, static=True, strict=True)
        self.result.count(entity, 1)

    def robot(self) -> None:
        """The URDF's links and fixed joints; the joints the dataset records move per episode."""
        relative = self.manifest.robot.urdf_path or layout.URDF
        urdf = self.dataset.root / relative
        if not urdf.is_file():
            return
        try:
            tree = self.rr.urdf.UrdfTree.from_file_path(urdf, entity_path_prefix="robot")
        except (RuntimeError, ValueError, OSError) as exc:
            raise ExportError(f"{relative}: Rerun cannot read the URDF: {exc}") from None
        self.recording.send_chunks(tree.stream(include_joint_transforms=False))
        moved = self.plan.moved_joints
        for joint in tree.joints():
            self.urdf_links.add(joint.child_link)
            if joint.joint_type != "fixed" and joint.name in moved:
                self.urdf_joints[joint.name] = joint
            else:  # fixed, or never recorded: where the URDF puts it at 0
                self.static(rerun_plan.path("tf", joint.child_link), joint.compute_transform(0.0, clamp=False))

    def frames(self) -> None:
        """The manifest's fixed frames (where the URDF does not place them already) and its aliases."""
        aliases = rerun_plan.aliases(self.manifest)
        for name, frame in self.manifest.frames.items():
            entity = rerun_plan.path("tf", name)
            if name in aliases:  # the same place as the TF frame it names
                self.static(entity, self.rr.Transform3D(parent_frame=aliases[name], child_frame=name))
            elif frame.parent and frame.transform is not None and name not in self.urdf_links:
                self.static(entity, self._transform(frame.transform, frame.parent, name))

    def _transform(self, transform: Transform, parent: str, child: str) -> Any:
        return self.rr.Transform3D(
            translation=list(transform.translation),
            quaternion=_quaternion_xyzw(transform),
            parent_frame=parent,
            child_frame=child,
        )

    def cameras(self) -> None:
        """Each camera's pose (extrinsics, else its mount link) and pinhole (known intrinsics)."""
        for key, sensor in self.manifest.cameras.items():
            entity = rerun_plan.path("cameras", key)
            camera_frame = sensor.mount_link
            if sensor.extrinsics is not None:
                camera_frame = f"cameras/{key}"
                ext = sensor.extrinsics
                self.static(entity, self._transform(ext.transform, ext.parent_frame, camera_frame))
            pinhole = _pinhole_values(sensor)
            if pinhole is None:
                continue
            focal, principal, resolution = pinhole
            image_frame = f"cameras/{key}/image" if camera_frame else None
            self.static(
                entity,
                self.rr.Pinhole(
                    focal_length=focal,
                    principal_point=principal,
                    resolution=resolution,
                    camera_xyz=self.rr.ViewCoordinates.RDF,  # ROS optical frames: x right, y down, z forward
                    parent_frame=camera_frame,
                    child_frame=image_frame,
                ),
            )
            if image_frame is not None:
                self.static(entity, self.rr.CoordinateFrame(image_frame))

    # -- per episode

    def episode(self, episode: Episode) -> None:
        timeline = rerun_plan.timeline(episode.episode_id)
        cameras = [_Camera(self, episode, timeline, key, sensor) for key, sensor in self.manifest.cameras.items()]
        for camera in cameras:
            camera.open()
        for source in self.plan.sources:
            if source.stream is None:
                batches = episode.step_batches(list(dict.fromkeys(source.columns + self._step_columns(cameras))))
            else:
                batches = episode.stream_batches(source.stream, source.columns)
            for batch in batches:
                seconds = column_array(batch.column("timestamp")).astype(np.float64)
                index = [self.rr.TimeColumn(timeline, duration=_durations(seconds))]
                self._scalars(source, batch, index)
                self._joints(source, batch, index)
                if source.stream is None:
                    self._end_effector(batch, index)
                    for camera in cameras:
                        camera.steps(seconds, column_array(batch.column(camera.column)))
            if source.stream is None:
                for camera in cameras:
                    camera.finish()
        rerun_lidar.log_episode(
            self.rr, episode, lambda entity, second, points: self._log(timeline, entity, second, points)
        )

    def _log(self, timeline: str, entity: str, seconds: float, archetype: Any) -> None:
        self.at(timeline, seconds)
        self.recording.log(entity, archetype, strict=True)
        self.result.count(entity, 1)

    def _step_columns(self, cameras: list[_Camera]) -> list[str]:
        ee = [] if self.plan.end_effector is None else [rerun_plan.EE_POSITION, rerun_plan.EE_ORIENTATION]
        return [c.column for c in cameras] + [layout.state_column(c) for c in ee]

    def at(self, timeline: str, seconds: float) -> None:
        """The time ``log`` puts on what it logs next: on ``timeline`` alone (an episode's
        time must not stay set for the next episode's data)."""
        self.recording.reset_time()
        self.recording.set_time(timeline, duration=_durations(np.array([seconds]))[0])

    def send(self, entity: str, index: list[Any], columns: Any, rows: int) -> None:
        self.recording.send_columns(entity, indexes=index, columns=columns, strict=True)
        self.result.count(entity, rows)

    def _scalars(self, source: Source, batch: pa.RecordBatch, index: list[Any]) -> None:
        for scalars in source.scalars:
            values = column_array(batch.column(scalars.column)).astype(np.float64).reshape(batch.num_rows, -1)
            for element, entity in enumerate(scalars.entities):
                self.send(entity, index, self.rr.Scalars.columns(scalars=values[:, element]), batch.num_rows)

    def _joints(self, source: Source, batch: pa.RecordBatch, index: list[Any]) -> None:
        for column, names in source.joint_positions:
            values = column_array(batch.column(column)).astype(np.float64).reshape(batch.num_rows, -1)
            for element, name in enumerate(names):
                joint = self.urdf_joints.get(name)
                if joint is not None:
                    transforms = joint.compute_transform_columns(values[:, element].tolist(), clamp=False)
                    self.send(rerun_plan.path("tf", joint.child_link), index, transforms, batch.num_rows)

    def _end_effector(self, batch: pa.RecordBatch, index: list[Any]) -> None:
        ee = self.plan.end_effector
        if ee is None:
            return
        position = column_array(batch.column(layout.state_column(rerun_plan.EE_POSITION))).astype(np.float64)
        wxyz = column_array(batch.column(layout.state_column(rerun_plan.EE_ORIENTATION))).astype(np.float64)
        rows = batch.num_rows
        columns = self.rr.Transform3D.columns(
            translation=position,
            quaternion=wxyz[:, [1, 2, 3, 0]],
            parent_frame=[ee.parent] * rows,
            child_frame=[ee.frame] * rows,
        )
        self.send(rerun_plan.path("tf", ee.frame), index, columns, rows)


def _pinhole_values(sensor: Sensor) -> tuple[list[float], list[float], list[float]] | None:
    """(focal length, principal point, resolution) from known intrinsics; None when unknown."""
    intrinsics = sensor.intrinsics
    if intrinsics is None or sensor.intrinsics_unknown or sensor.resolution is None:
        return None
    try:
        fx, fy, cx, cy = (float(intrinsics[k]) for k in ("fx", "fy", "cx", "cy"))
    except (KeyError, TypeError, ValueError):
        return None
    return [fx, fy], [cx, cy], [float(sensor.resolution.width), float(sensor.resolution.height)]


class _Camera:
    """One camera of one episode: its video asset and a frame reference (colour), or a depth
    image (depth), at each step where the frame the step saw changes."""

    def __init__(self, writer: _Writer, episode: Episode, timeline: str, key: str, sensor: Sensor) -> None:
        self.writer = writer
        self.rr = writer.rr
        self.episode = episode
        self.timeline = timeline
        self.key = key
        self.sensor = sensor
        self.entity = rerun_plan.path("cameras", key)
        self.column = layout.image_column(key)
        self.last: int | None = None
        self.frame_times_ns: np.ndarray | None = None  # colour: each frame's time in the MP4
        self.meter = _depth_meter(sensor) if sensor.is_depth else None
        self.pending: list[tuple[float, np.ndarray]] = []  # depth frames decoded, not yet sent
        self.pending_bytes = 0

    def open(self) -> None:
        """Colour: the MP4 logged whole at the episode's start, its frame times read by Rerun."""
        if self.sensor.is_depth:
            return
        video = self.episode.video_path(self.key)
        if not video.is_file():
            raise ExportError(f"{video}: missing (episode {self.episode.episode_id}, camera {self.key})")
        asset = self.rr.AssetVideo(path=video)
        try:
            self.frame_times_ns = np.asarray(asset.read_frame_timestamps_nanos(), dtype=np.int64)
        except RuntimeError as exc:
            raise ExportError(f"{video}: Rerun cannot read the video's frames: {exc}") from None
        first = next(self.episode.step_batches(["timestamp"])).column(0)[0].as_py()
        self.writer.at(self.timeline, float(first))
        self.writer.recording.log(self.entity, asset, strict=True)
        self.writer.recording.flush()  # written before the next camera's file is read
        self.writer.result.count(self.entity, 1)

    def steps(self, seconds: np.ndarray, frames: np.ndarray) -> None:
        """The steps of a batch: a frame logged where it differs from the step before."""
        changed = np.ones(len(frames), dtype=bool)
        changed[1:] = frames[1:] != frames[:-1]
        if self.last is not None and len(frames):
            changed[0] = frames[0] != self.last
        if len(frames):
            self.last = int(frames[-1])
        rows = np.flatnonzero(changed)
        if not len(rows):
            return
        if self.sensor.is_depth:
            for row in rows:
                self._depth(float(seconds[row]), int(frames[row]))
            return
        assert self.frame_times_ns is not None
        indices = frames[rows]
        beyond = indices[(indices < 0) | (indices >= len(self.frame_times_ns))]
        if len(beyond):
            raise ExportError(
                f"{self.episode.video_path(self.key)}: has {len(self.frame_times_ns)} frames; the steps of episode "
                f"{self.episode.episode_id} show frame {int(beyond[0])}"
            )
        index = [self.rr.TimeColumn(self.timeline, duration=_durations(seconds[rows]))]
        columns = self.rr.VideoFrameReference.columns_nanos(self.frame_times_ns[indices])
        self.writer.send(self.entity, index, columns, len(rows))

    def _depth(self, second: float, frame: int) -> None:
        pixels = self.episode.frame(self.key, frame)
        self.pending.append((second, pixels))
        self.pending_bytes += pixels.nbytes
        if self.pending_bytes >= DEPTH_CHUNK_BYTES:
            self.finish()

    def finish(self) -> None:
        """Depth: the frames decoded and not yet sent, as one chunk, written before going on."""
        if not self.pending:
            return
        seconds = np.array([second for second, _ in self.pending])
        images = [pixels for _, pixels in self.pending]
        formats = [
            self.rr.components.ImageFormat(width=p.shape[1], height=p.shape[0], channel_datatype="U16") for p in images
        ]
        columns = self.rr.DepthImage.columns(
            buffer=[p.tobytes() for p in images], format=formats, meter=[self.meter] * len(images)
        )
        index = [self.rr.TimeColumn(self.timeline, duration=_durations(seconds))]
        self.writer.send(self.entity, index, columns, len(images))
        self.pending, self.pending_bytes = [], 0
        self.writer.recording.flush()


def _depth_meter(sensor: Sensor) -> float:
    """Depth units per meter, from the sensor's ``depth_units``."""
    units = sensor.extra.get("depth_units", DEFAULT_DEPTH_UNITS)
    if units not in DEPTH_UNITS_PER_METER:
        raise ExportError(
            f"{layout.MANIFEST}: sensors[{sensor.name!r}].depth_units: expected one of "
            f"{sorted(DEPTH_UNITS_PER_METER)}, got {units!r}"
        )
    return DEPTH_UNITS_PER_METER[units]
