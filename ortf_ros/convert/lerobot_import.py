"""``ortf import lerobot``: a LeRobotDataset (v3.0, or v2.0 / v2.1 as GR00T reads it) into a new ORTF dataset.

The versions differ only in their metadata (``lerobot_meta``): where the episode index
and the tasks are, and which file and rows hold an episode (a range of a shared shard in
v3.0, a file of its own in v2.x). Everything after that, here and in the modules it
uses (``lerobot_spaces``, ``lerobot_manifest``, ``lerobot_origin``, ``lerobot_frames``),
is one code path, so both versions get the same state split, cameras and video reuse.

Every LeRobot episode becomes one ORTF episode written through ``DatasetWriter``, so
the result has the writer's staging, statistics and checks; the dataset is built in
a scratch directory beside the destination and renamed onto it only when complete
(``output_dir.staged_directory``), so a bad input leaves the destination untouched.

A video camera's frames are copied without re-encoding when the episode's range of
its shard (in v2.x its whole file) is cut at keyframes and stored as the writer stores
the camera (H.264 in the writer's pixel format: what ``ortf export lerobot`` writes
when it reuses ORTF's files), so such frames come back bit-exact; any other range (AV1,
another pixel format, a cut inside a group of pictures) is decoded and re-encoded.
Depth that ``ortf export lerobot`` kept beside LeRobot's files is copied back the same
way (``lerobot_origin``).

Rows are streamed from the data files one Parquet batch at a time and frames decoded
as they are needed, so memory does not grow with episode length. Step times are
ORTF's real capture times when the dataset came from ``ortf export lerobot``
(``REAL_TIME_COLUMN``), else LeRobot's ``timestamp``; video frames are always found
by ``timestamp``, which is their time in the shard.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from ortf_ros.convert.export_audio import import_lerobot_audio
from ortf_ros.convert.gr00t_export import VALIDITY, VALIDITY_ANNOTATION
from ortf_ros.convert.lerobot_frames import ShardFrames, decode_still, episode_segment, shard_frame
from ortf_ros.convert.lerobot_manifest import camera_key, lerobot_manifest
from ortf_ros.convert.lerobot_meta import EpisodeMeta, LeRobotMeta, read_meta
from ortf_ros.convert.lerobot_origin import DepthFiles, exported_origin
from ortf_ros.convert.lerobot_spaces import ACTION, EXTRAS_STREAM, Part, Spaces, split_spaces
from ortf_ros.convert.output_dir import staged_directory
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ExportError, ReaderError, VideoRefusedError, WriterError
from ortf_ros.io.segment import whole_video

# The extra column ``ortf export lerobot`` keeps ORTF's step times in (LeRobot's own
# ``timestamp`` must be frame_index / fps).
REAL_TIME_COLUMN = "ortf.timestamp"
# Rows decoded at a time: with image cameras a row holds its encoded stills, so this (with
# the shard's row groups) is what bounds memory, never the episode's length.
BATCH_ROWS = 256
Progress = Callable[[int, int], None]  # (steps written, steps in the dataset)
# Per-frame flags some LeRobot datasets carry; their last values are the episode's.
SUCCESS_FEATURE = "next.success"
DONE_FEATURE = "next.done"
# GR00T's validity annotation (a task index per row) back to the success the GR00T
# export wrote it from: "valid" / "invalid" / "unknown".
VALIDITY_OUTCOMES = {text: outcome for outcome, text in VALIDITY.items()}


@dataclass(frozen=True)
class ImportResult:
    path: Path
    episodes: int
    steps: int
    cameras: tuple[str, ...]
    videos_reused: int = 0  # episode videos copied without re-encoding
    videos_reencoded: int = 0


def from_lerobot(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    config: WriterConfig | None = None,
    warn: Callable[[str], None] = lambda _: None,
    progress: Progress | None = None,
) -> ImportResult:
    """Import the LeRobot dataset (v3.0, v2.1 or v2.0) at ``src`` as a new ORTF dataset at ``dst``."""
    meta = read_meta(Path(src))
    spaces = split_spaces(meta)
    manifest = lerobot_manifest(meta, spaces)
    origin = exported_origin(meta, manifest, warn)
    urdf, meshes = (origin.urdf, origin.meshes) if origin is not None else (None, None)
    manifest = origin.manifest if origin is not None else manifest
    steps = 0
    with (
        staged_directory(dst) as scratch,
        DatasetWriter(scratch, manifest, config=config, urdf=urdf, meshes=meshes) as writer,
    ):
        depth = origin.depth if origin is not None else {}
        importer = _EpisodeImporter(meta, spaces, writer, depth, warn, progress)
        try:
            for episode in meta.episodes:
                steps += importer.run(episode)
        finally:
            importer.close()
    cameras = tuple(manifest.cameras)
    return ImportResult(
        Path(dst), len(meta.episodes), steps, cameras, importer.videos_reused, importer.videos_reencoded
    )


class _EpisodeImporter:
    def __init__(
        self,
        meta: LeRobotMeta,
        spaces: Spaces,
        writer: DatasetWriter,
        depth: Mapping[str, DepthFiles],
        warn: Callable[[str], None],
        progress: Progress | None,
    ) -> None:
        self.meta = meta
        self.spaces = spaces
        self.writer = writer
        self.depth = depth
        self.warn = warn
        self.camera = {f.key: camera_key(f) for f in meta.cameras}  # LeRobot feature -> ORTF camera
        self.videos = {f.key: ShardFrames(f) for f in meta.cameras if f.dtype == "video"}
        self.images = [f.key for f in meta.cameras if f.dtype == "image"]
        self.fps = {f.key: writer.manifest.cameras[self.camera[f.key]].fps or meta.fps for f in meta.cameras}
        self.copied: dict[str, int] = {}  # video feature -> shard frame the episode's copy starts at
        self.videos_reused = self.videos_reencoded = 0
        self.episode_open = False
        self.progress = progress
        self.done, self.total = 0, sum(e.length for e in meta.episodes)

    def close(self) -> None:
        for frames in self.videos.values():
            frames.close()

    def run(self, episode: EpisodeMeta) -> int:
        """Write one episode; on failure nothing of it stays staged."""
        try:
            return self._write(episode)
        except BaseException:
            if self.episode_open:
                self.writer.discard_episode()
                self.episode_open = False
            raise

    def _write(self, episode: EpisodeMeta) -> int:
        steps, task = 0, ""
        success, done = episode.success, None
        task_indices: set[int] = set()
        for batch in self._rows(episode):
            where = f"{episode.data_path}: episode {episode.index}"
            names = batch.schema.names
            if steps == 0:
                task = self._begin(episode, batch, where)
            if "task_index" in names:
                task_indices.update(i for i in pc.unique(batch.column("task_index")).to_pylist() if i is not None)
            times = _column(batch, REAL_TIME_COLUMN if REAL_TIME_COLUMN in names else "timestamp", where)
            lerobot_times = _column(batch, "timestamp", where)
            state = {p.name: _matrix(batch, p, where) for p in self.spaces.state_parts}
            action = _matrix(batch, Part(ACTION, 0, self.spaces.action.dim, ACTION), where)
            extras = {p.name: _matrix(batch, p, where) for p in self.spaces.extra_parts}
            images = {key: batch.column(key).to_pylist() for key in self.images}
            depth = {camera: _column(batch, files.frame_column, where) for camera, files in self.depth.items()}
            for row in range(batch.num_rows):
                frames, copied = {}, {}
                for key, span in episode.videos.items():
                    camera, time = self.camera[key], float(lerobot_times[row])
                    if key in self.copied:
                        copied[camera] = shard_frame(span, time, self.fps[key]) - self.copied[key]
                    else:
                        frames[camera] = self.videos[key].frame(span, time)
                copied.update((camera, int(indices[row])) for camera, indices in depth.items())
                for key, cells in images.items():
                    frames[self.camera[key]] = decode_still(cells[row], f"{where} {key}")
                samples = {}
                if extras:
                    values = {name: matrix[row] for name, matrix in extras.items()}
                    samples[EXTRAS_STREAM] = self.writer.add_sample(EXTRAS_STREAM, float(times[row]), values)
                self.writer.add_step(
                    float(times[row]),
                    {name: matrix[row] for name, matrix in state.items()},
                    action[row],
                    frames,
                    samples=samples,
                    frames=copied,
                )
            if episode.success is None and SUCCESS_FEATURE in names:
                success = bool(batch.column(SUCCESS_FEATURE)[-1].as_py())
            elif episode.success is None and VALIDITY_ANNOTATION in names:
                success = VALIDITY_OUTCOMES.get(self.meta.tasks.get(batch.column(VALIDITY_ANNOTATION)[-1].as_py(), ""))
            if DONE_FEATURE in names:
                done = bool(batch.column(DONE_FEATURE)[-1].as_py())
            steps += batch.num_rows
            self.done += batch.num_rows
            if self.progress is not None:
                self.progress(self.done, self.total)
        if steps != episode.length:
            raise ExportError(
                f"{episode.data_path}: episode {episode.index}: {steps} rows, but its metadata says {episode.length}"
            )
        # The tasks its rows name: GR00T's episodes.jsonl also lists the episode's annotation
        # strings ("valid"), which are no second task.
        tasks = len(task_indices) if task_indices else len(episode.tasks)
        if tasks > 1:
            self.warn(f"episode {episode.index} has {tasks} tasks; ORTF keeps one: {task!r}")
        self.episode_open = False  # committed or, if the commit fails, left to the scratch directory's removal
        self.writer.end_episode(success, episode.failure_reason, episode.operator_notes, terminal=done)
        return steps

    def _begin(self, episode: EpisodeMeta, batch: pa.RecordBatch, where: str) -> str:
        """Open the episode under the task of its first row; returns that task."""
        task_index = batch.column("task_index")[0].as_py() if "task_index" in batch.schema.names else None
        task = self.meta.tasks.get(task_index) if task_index is not None else None
        task = task or (episode.tasks[0] if episode.tasks else None)
        if task is None:
            raise ExportError(f"{where}: task_index {task_index} is not in {self.meta.tasks_file}")
        self.writer.begin_episode(task, recorded_at=episode.recorded_at)
        self.episode_open = True
        import_lerobot_audio(self.writer, self.meta.root, episode.index)  # (what the export kept beside it)
        self._copy_videos(episode)
        for camera, files in self.depth.items():
            self._copy_depth(camera, files.episode_path(self.meta.root, episode.index))
        return task

    def _copy_videos(self, episode: EpisodeMeta) -> None:
        """Copy each video camera's range of its shard that the writer takes as it is; the
        others are decoded row by row."""
        self.copied = {}
        for key, span in episode.videos.items():
            segment = episode_segment(span, self.fps[key])
            camera = self.camera[key]
            if segment is not None:
                try:  # one pass: the writer checks the cut while it copies, and stages nothing if refused
                    self.writer.add_encoded_video(camera, segment)
                except VideoRefusedError:  # (a copy that cannot be written is an error, not a reason to re-encode)
                    pass
                else:
                    self.copied[key] = segment.first
                    self.videos_reused += 1
                    continue
            self.videos_reencoded += 1

    def _copy_depth(self, camera: str, path: Path) -> None:
        """The episode's depth file as the export kept it (no fallback: it is the writer's own format)."""
        try:
            segment = whole_video(path)
        except ReaderError as exc:
            raise ExportError(f"{exc} (depth camera {camera!r}, kept by ortf export lerobot)") from None
        try:
            self.writer.add_encoded_video(camera, segment)
        except WriterError as exc:
            raise ExportError(f"{exc} (depth camera {camera!r}, kept by ortf export lerobot)") from None

    def _rows(self, episode: EpisodeMeta) -> Iterator[pa.RecordBatch]:
        """The episode's rows of its data shard, by LeRobot's dataset-wide ``index`` (v3.0),
        or all of its own file's (v2.x: LeRobot's v2 loader takes the file as the episode;
        ``index`` need not run on from the previous file's)."""
        first = episode.first_row
        wanted = None if first is None else (pc.field("index") >= first) & (pc.field("index") < first + episode.length)
        try:
            dataset = pads.dataset(episode.data_path, format="parquet")
            batches = dataset.to_batches(filter=wanted, batch_size=BATCH_ROWS, batch_readahead=0, fragment_readahead=0)
            yield from (batch for batch in batches if batch.num_rows)  # the filter leaves empty batches
        except (FileNotFoundError, pa.ArrowException) as exc:
            raise ExportError(f"{episode.data_path}: cannot read episode {episode.index}: {exc}") from None


def _column(batch: pa.RecordBatch, name: str, where: str) -> np.ndarray:
    if name not in batch.schema.names:
        raise ExportError(f"{where}: column {name!r} is missing")
    return np.asarray(batch.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)


def _matrix(batch: pa.RecordBatch, part: Part, where: str) -> np.ndarray:
    """Elements ``start:end`` of a feature, one row per step; the feature may be stored as a
    scalar, a fixed-size list (``Sequence``/``List`` with a length) or a variable list."""
    if part.feature not in batch.schema.names:
        raise ExportError(f"{where}: column {part.feature!r} is missing")
    column = batch.column(part.feature)
    kind = column.type
    nested = pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    values = pc.list_flatten(column) if nested else column
    if values.null_count:
        raise ExportError(f"{where}: column {part.feature!r} holds nulls")
    flat = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)
    if flat.size % max(batch.num_rows, 1) or (batch.num_rows and flat.size // batch.num_rows < part.end):
        raise ExportError(f"{where}: column {part.feature!r}: rows are not vectors of at least {part.end} values")
    return flat.reshape(batch.num_rows, -1)[:, part.start : part.end]
