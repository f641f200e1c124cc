"""``load_dataset``: read an ORTF dataset written by us or by any other writer.

The reader trusts only what the spec fixes: the episode index says which steps and
videos belong to an episode (``video_files``, not our file-naming pattern), rows are
found by ``episode_id``, and both ``step_index`` conventions are understood.

Every file is read through the dataset's ``Storage`` (``format/stored_files``): a directory,
whose files are opened by path as they always were, or an ``s3://bucket/prefix`` URL,
whose tables and videos are read by ranges, optionally through a local cache directory.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ortf_ros.dataset.audio_files import episode_audio
from ortf_ros.dataset.catalog import load_manifest
from ortf_ros.errors import FormatError, ReaderError, UnknownEpisodeError
from ortf_ros.format import layout, point_clouds
from ortf_ros.format.audio import AUDIO_SENSOR_TYPE, audio_sensors
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.metadata import EpisodeRecord, Task, read_episodes, read_tasks
from ortf_ros.format.scene_objects import SceneObjects, read_scene_objects
from ortf_ros.format.stored_files import Storage, as_storage
from ortf_ros.io.npz import NpzDepthReader
from ortf_ros.io.object_storage import ObjectStorage
from ortf_ros.io.paths import is_url
from ortf_ros.io.video import VideoReader, frame_kind

StepIndexConvention = Literal["global", "episode"]


def load_dataset(path: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """The dataset at ``path``: a directory, or an ``s3://bucket/prefix`` URL read by ranges
    with the AWS SDK's environment variables (``S3Settings``), its blocks kept in
    ``cache_dir`` when given (shared safely by several processes; unused for a directory)."""
    if is_url(path):
        storage = ObjectStorage(str(path), Path(cache_dir) if cache_dir is not None else None)
        storage.check(layout.MANIFEST)
        return Dataset(storage)
    root = Path(path)
    if not root.is_dir():
        raise ReaderError(f"{root}: not a directory")
    return Dataset(root)


class Dataset:
    """An opened dataset: manifest, episode index, tasks and statistics."""

    def __init__(self, root: Path | Storage) -> None:
        self.storage = as_storage(root)
        self.location = self.storage.location
        self.manifest: Manifest = load_manifest(self.storage)
        self.episodes: list[EpisodeRecord] = read_episodes(self.storage)
        self.tasks: dict[int, Task] = {t.task_id: t for t in read_tasks(self.storage)}
        self._by_id = {e.episode_id: e for e in self.episodes}
        self._positions = {e.episode_id: position for position, e in enumerate(self.episodes)}
        self._tables: OrderedDict[str, _EpisodeRows] = OrderedDict()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (for a spawned DataLoader worker) without its open tables: the worker opens its own."""
        return {**self.__dict__, "_tables": OrderedDict()}

    @property
    def root(self) -> Path:
        """The dataset's directory; a dataset in object storage has none (what needs one, an
        export or a review, is refused in one line naming the URL)."""
        root = self.storage.local_root
        if root is None:
            raise ReaderError(f"{self.location}: in object storage; this needs the dataset on local disk")
        return root

    def rows_index(self, relative: str) -> _EpisodeRows:
        """The step or stream table ``relative``, its footer read once (``OPEN_TABLES`` kept)."""
        table = self._tables.pop(relative, None)
        if table is None or not table.current():  # a file replaced or appended to is read anew
            table = _EpisodeRows(self.storage, relative)
        self._tables[relative] = table
        while len(self._tables) > OPEN_TABLES:
            self._tables.popitem(last=False)
        return table

    def file_index(self, record: EpisodeRecord) -> int:
        """The number the episode's own files are named after (``layout.file_index``)."""
        return layout.file_index(record.episode_id, self._positions[record.episode_id])

    def __len__(self) -> int:
        return len(self.episodes)

    def __iter__(self) -> Iterator[Episode]:
        for record in self.episodes:
            yield Episode(self, record)

    @property
    def total_steps(self) -> int:
        return sum(e.length for e in self.episodes)

    @cached_property
    def stats(self) -> dict[str, Any]:
        try:
            text = self.storage.read_text(layout.STATS)
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{layout.STATS}: not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise FormatError(f"{layout.STATS}: expected an object")
        return data

    def episode(self, key: str | int) -> Episode:
        """An episode by id (``"000042"``) or by position in the index (``42``)."""
        if isinstance(key, int):
            if not -len(self.episodes) <= key < len(self.episodes):
                raise UnknownEpisodeError(
                    f"{self.location}: no episode at position {key} ({len(self.episodes)} episodes)"
                )
            return Episode(self, self.episodes[key])
        record = self._by_id.get(key)
        if record is None:
            raise UnknownEpisodeError(f"{self.location}: no episode with id {key!r}")
        return Episode(self, record)

    def task(self, task_id: int) -> Task:
        try:
            return self.tasks[task_id]
        except KeyError:
            raise ReaderError(f"{layout.TASKS}: no task {task_id}") from None

    @cached_property
    def step_index_convention(self) -> StepIndexConvention:
        """Whether ``step_index`` counts across the data files or restarts per episode.

        Only an episode that does not start at step 0 tells the two apart; a dataset
        without one satisfies both, and "global" is reported.
        """
        for record in self.episodes:
            if record.start_step != 0:
                first = Episode(self, record).steps(["step_index"])["step_index"][0].as_py()
                return "episode" if first == 0 else "global"
        return "global"


class Episode:
    """One episode's steps (Arrow / numpy) and camera frames, decoded on demand."""

    def __init__(self, dataset: Dataset, record: EpisodeRecord) -> None:
        self.dataset = dataset
        self.record = record
        self._videos: dict[str, VideoReader | NpzDepthReader] = {}

    def __enter__(self) -> Episode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for reader in self._videos.values():
            reader.close()
        self._videos.clear()

    @property
    def episode_id(self) -> str:
        return self.record.episode_id

    @property
    def task(self) -> Task:
        return self.dataset.task(self.record.task_id)

    @property
    def annotations_dir(self) -> Path:
        return self.dataset.root / layout.annotations_dir(self.dataset.file_index(self.record))

    def scene_objects(self) -> SceneObjects | None:
        """The episode's labelled objects (``annotations/.../scene_objects.json``; None without
        one), FormatError if the file is not the spec's shape. Their picture is ``first_frame.jpg``
        beside it, the depth picture ``depth_colorized.jpg``, both in ``annotations_dir``."""
        return read_scene_objects(self.annotations_dir)

    def stream_file(self, name: str) -> str:
        """Where this episode's samples of ``name`` are: a file of its own, or the chunk's
        table of the stream in datasets written before per-episode files."""
        self._check_stream(name)
        manifest = self.dataset.manifest
        return layout.stream_file(
            manifest.stream_files, self.record.chunk_id, name, self.dataset.file_index(self.record)
        )

    @property
    def steps_file(self) -> str:
        return layout.steps_path(self.record.chunk_id)

    def steps(self, columns: Sequence[str] | None = None) -> pa.Table:
        """This episode's rows in step order (memory: one episode's selected columns)."""
        return self._rows(self.steps_file, "step_index", columns)

    def stream(self, name: str, columns: Sequence[str] | None = None) -> pa.Table:
        """Every sample of a native-rate stream in this episode, in order, with its stamps."""
        return self._rows(self.stream_file(name), "sample_index", columns)

    def step_batches(self, columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
        """This episode's rows in step order, one Parquet row group at a time.

        Memory is a row group (bounded by the writer's ``row_group_steps`` and
        ``row_group_bytes``), not the episode: what a player streaming an hour-long episode
        needs. Rows must be stored in step order, as every ortf_ros writer stores them.
        """
        return self._batches(self.steps_file, "step_index", columns)

    def stream_batches(self, name: str, columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
        """``stream`` a row group at a time (see ``step_batches``)."""
        return self._batches(self.stream_file(name), "sample_index", columns)

    def cloud_file(self, name: str) -> str:
        """Where this episode's clouds of point cloud stream ``name`` are (``format.point_clouds``;
        no file when the episode has none)."""
        declared = point_clouds.declarations(self.dataset.manifest)
        if name not in declared:
            raise ReaderError(f"unknown point cloud stream {name!r}; the manifest declares {sorted(declared)}")
        return point_clouds.cloud_path(name, self.record.chunk_id, self.dataset.file_index(self.record))

    def cloud_batches(self, name: str, columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
        """A point cloud stream's clouds in order, a row group (a cloud, as ortf_ros writes
        them) at a time; none when the episode has no cloud file."""
        relative = self.cloud_file(name)
        if not self.dataset.storage.exists(relative):
            return iter(())
        return self._batches(relative, "cloud_index", columns)

    def _check_stream(self, name: str) -> None:
        if name not in self.dataset.manifest.native_streams:
            raise ReaderError(
                f"unknown stream {name!r}; the manifest declares {sorted(self.dataset.manifest.native_streams)}"
            )

    def rows_table(self, relative: str) -> _EpisodeRows:
        """The step or stream table ``relative`` this episode's rows are in (its footer read
        once per dataset); ReaderError naming it and the episode when it is missing or broken."""
        try:
            return self.dataset.rows_index(relative)
        except FileNotFoundError:
            raise ReaderError(f"{relative}: missing (episode {self.episode_id})") from None
        except (pa.ArrowException, OSError) as exc:
            raise ReaderError(f"{relative}: unreadable Parquet: {exc}") from None

    def _batches(self, relative: str, order: str, columns: Sequence[str] | None) -> Iterator[pa.RecordBatch]:
        table = self.rows_table(relative)
        names = list(columns) if columns is not None else table.metadata.schema.to_arrow_schema().names
        wanted = list(dict.fromkeys([*names, order, "episode_id"]))
        last: int | None = None
        for group in table.read_groups(self.episode_id, wanted):
            group = group.filter(pc.equal(group["episode_id"], self.episode_id))
            if group.num_rows == 0:
                continue
            positions = group[order].to_numpy()
            if (last is not None and positions[0] <= last) or bool(np.any(np.diff(positions) <= 0)):
                raise ReaderError(
                    f"{relative}: rows of episode {self.episode_id} are not stored in {order} order "
                    "(read them whole with steps()/stream())"
                )
            last = int(positions[-1])
            yield from group.select(names).to_batches()
        if last is None and order == "step_index":
            raise ReaderError(f"{relative}: no rows for episode {self.episode_id}")

    def _rows(self, relative: str, order: str, columns: Sequence[str] | None) -> pa.Table:
        table = self.rows_table(relative)
        names = table.metadata.schema.to_arrow_schema().names if columns is None else list(columns)
        wanted = list(dict.fromkeys([*names, order, "episode_id"]))
        groups = [
            g.filter(pc.equal(g["episode_id"], self.episode_id)) for g in table.read_groups(self.episode_id, wanted)
        ]
        rows = pa.concat_tables(groups) if groups else table.empty(wanted)
        if rows.num_rows == 0 and order == "step_index":
            raise ReaderError(f"{relative}: no rows for episode {self.episode_id}")
        return rows.sort_by(order).select(names)

    def array(self, column: str) -> np.ndarray:
        """A column as numpy: (steps, dim) for vectors, (steps,) for scalars."""
        return column_array(self.steps([column])[column].combine_chunks())

    def audio_files(self, microphone: str) -> tuple[Path, Path]:
        """The episode's audio file (WAV; MP4 for FLAC and AAC) and chunk table of ``microphone``."""
        sensor = self.dataset.manifest.sensor(microphone)
        if sensor is None or sensor.type != AUDIO_SENSOR_TYPE:
            known = [s.name for s in audio_sensors(self.dataset.manifest)]
            raise ReaderError(f"unknown microphone {microphone!r}; the manifest declares {known}")
        return episode_audio(self.dataset.root, self.record.chunk_id, self.dataset.file_index(self.record), sensor)

    def video_file(self, camera: str) -> str:
        """The camera's video in this episode, relative to the dataset root (the index's ``video_files``)."""
        if camera not in self.dataset.manifest.cameras:
            raise ReaderError(
                f"unknown camera {camera!r}; the manifest declares {sorted(self.dataset.manifest.cameras)}"
            )
        relative = self.record.video_files.get(camera)
        if not relative:
            raise ReaderError(f"{layout.EPISODES}: episode {self.episode_id} has no video for camera {camera!r}")
        return relative

    def video_path(self, camera: str) -> Path:
        return self.dataset.root / self.video_file(camera)

    def frame(self, camera: str, frame_index: int, *, channels_first: bool = False) -> np.ndarray:
        """Frame ``frame_index`` of a camera: HxWx3 uint8 RGB, or HxW uint16 depth in millimetres;
        3xHxW and 1xHxW with ``channels_first`` (a training loader's layout, made without a
        transposing copy)."""
        reader = self._videos.get(camera)
        if reader is None:
            reader = self._videos[camera] = self._open_video(camera)
        return reader.read(frame_index, channels_first=channels_first)

    def _open_video(self, camera: str) -> VideoReader | NpzDepthReader:
        relative = self.video_file(camera)
        storage = self.dataset.storage
        try:
            source = storage.source(relative)
            if isinstance(source, Path) and not source.exists():
                raise FileNotFoundError(relative)
        except FileNotFoundError:
            raise ReaderError(f"{relative}: missing (episode {self.episode_id})") from None
        name = source if isinstance(source, Path) else storage.name(relative)
        file = None if isinstance(source, Path) else source
        sensor = self.dataset.manifest.cameras[camera]
        if relative.endswith(".npz") and sensor.is_depth:
            return NpzDepthReader(name, file=file)
        return VideoReader(name, frame_kind(sensor), file=file)

    def step_frames(self, camera: str) -> Iterator[np.ndarray]:
        """The frame each step saw, in step order."""
        for index in self.array(layout.image_column(camera)):
            yield self.frame(camera, int(index))


def column_array(values: pa.Array) -> np.ndarray:
    """A step or stream column as numpy: (rows, dim) for vectors, (rows,) for scalars."""
    if pa.types.is_fixed_size_list(values.type):
        flat = values.flatten().to_numpy(zero_copy_only=False)
        array: np.ndarray = flat.reshape(-1, values.type.list_size)
    else:
        array = values.to_numpy(zero_copy_only=False)
    return array


OPEN_TABLES = 8
"""Step and stream tables a dataset keeps open (their footers parsed, their row groups indexed
by episode): a chunk's tables, while its episodes are read one after another. The bound on what
a reader holds, whatever the number of chunks."""


class _EpisodeRows:
    """A step or stream table read by episode: its footer parsed once, and for each episode the
    row groups that may hold its rows, from their ``episode_id`` statistics. A chunk's table holds
    up to a thousand episodes, so without this every episode read would parse the footer of all
    of them and look at every row group (a reader going through the chunk: quadratic)."""

    def __init__(self, storage: Storage, relative: str) -> None:
        self.relative = relative
        self.storage = storage
        self.identity = storage.identity(relative)
        self.file = pq.ParquetFile(storage.source(relative))  # the episode being read names the errors
        self.metadata = self.file.metadata
        self._exact: dict[str, list[int]] = {}
        self._ranges: list[tuple[str, str, int]] = []  # row groups holding several episodes
        self._unknown: list[int] = []  # row groups without statistics: read for every episode
        names = self.metadata.schema.names
        column = names.index("episode_id") if "episode_id" in names else None
        self.has_episode_ids = column is not None
        for group in range(self.metadata.num_row_groups):
            stats = None if column is None else self.metadata.row_group(group).column(column).statistics
            if stats is None or not stats.has_min_max:
                self._unknown.append(group)
            elif stats.min == stats.max:
                self._exact.setdefault(str(stats.min), []).append(group)
            else:
                self._ranges.append((str(stats.min), str(stats.max), group))

    def current(self) -> bool:
        try:
            return self.storage.identity(self.relative) == self.identity
        except OSError:
            return False

    def groups(self, episode_id: str) -> list[int]:
        found = self._exact.get(episode_id, []) + self._unknown
        found += [group for low, high, group in self._ranges if low <= episode_id <= high]
        return sorted(found)

    def only_episode(self, group: int, episode_id: str) -> bool:
        """Whether row group ``group`` holds this episode's rows alone (by its statistics; a
        table without episode ids holds one episode)."""
        return not self.has_episode_ids or group in self._exact.get(episode_id, ())

    def read_group(self, group: int, columns: list[str]) -> pa.Table:
        try:
            return self.file.read_row_group(group, columns=columns)
        except (pa.ArrowException, OSError, KeyError) as exc:
            raise ReaderError(f"{self.relative}: unreadable Parquet: {exc}") from None

    def read_groups(self, episode_id: str, columns: list[str]) -> Iterator[pa.Table]:
        """The row groups that may hold the episode's rows, in file order, one at a time."""
        for group in self.groups(episode_id):
            yield self.read_group(group, columns)

    def empty(self, columns: list[str]) -> pa.Table:
        return self.metadata.schema.to_arrow_schema().empty_table().select(columns)
