"""A LeRobotDataset's metadata (v3.0, or v2.0 / v2.1), read and checked before anything is written.

Both layouts share ``meta/info.json`` (features, fps, the ``data_path`` and
``video_path`` templates) and, in GR00T's flavour, ``meta/modality.json``; the rows and
frames are read the same way once an episode's files are known. They differ only in
where the episode index and the tasks are, and in what the templates are filled with:

- v3.0, what ``lerobot`` 0.4.4 reads: ``meta/episodes/chunk-*/file-*.parquet`` (one row
  per episode: its data shard and first dataset-wide ``index`` in it, its shard and time
  span in each video) and ``meta/tasks.parquet`` (task strings, written by pandas as the
  frame's index). Shards hold several episodes.
- v2.0 / v2.1, what GR00T reads and ``lerobot`` < 0.3 wrote: ``meta/episodes.jsonl``
  (``episode_index``, ``tasks``, ``length``) and ``meta/tasks.jsonl``; every episode has
  a data file and a video per camera of its own, found by filling the templates with
  ``episode_index`` and ``episode_chunk = episode_index // chunks_size``, as LeRobot's v2
  loader does. v2.1's ``meta/episodes_stats.jsonl`` is not read: the writer computes
  ORTF's statistics from the rows.

Every problem is one ``ExportError`` naming the file and field, raised before the
destination is touched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.errors import ExportError, FormatError
from ortf_ros.format.text import read_text

V3 = "v3.0"
# The ``codebase_version`` values read; v2.1 differs from v2.0 only by statistics files.
VERSIONS = ("v2.0", "v2.1", V3)
INFO = "meta/info.json"
TASKS = "meta/tasks.parquet"  # v3.0
EPISODES_DIR = "meta/episodes"  # v3.0
TASKS_JSONL = "meta/tasks.jsonl"  # v2.x
EPISODES_JSONL = "meta/episodes.jsonl"  # v2.x
# LeRobot's default when a v2.x info.json gives none: episode_chunk = episode_index // 1000.
CHUNKS_SIZE = 1000
MODALITY = "meta/modality.json"
# Episode columns ``ortf export lerobot`` adds for the ORTF fields LeRobot lacks.
OUTCOME_COLUMNS = ("ortf/success", "ortf/failure_reason", "ortf/operator_notes", "ortf/recorded_at")
# LeRobot's bookkeeping columns: consumed by the import, never data.
INDEX_FEATURES = ("timestamp", "frame_index", "episode_index", "index", "task_index")
NUMERIC_DTYPES = frozenset(
    {"bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
)
CAMERA_DTYPES = frozenset({"image", "video"})
# Features a trainer reads as text; LeRobot keeps the task this way in some datasets.
TEXT_DTYPES = frozenset({"string"})


@dataclass(frozen=True)
class Feature:
    key: str
    dtype: str
    shape: tuple[int, ...]
    names: tuple[str, ...] | None
    info: Mapping[str, Any]

    @property
    def is_camera(self) -> bool:
        return self.dtype in CAMERA_DTYPES

    @property
    def size(self) -> int:
        """Elements of a numeric vector feature (a scalar is a vector of one)."""
        size = 1
        for n in self.shape:
            size *= n
        return size

    def resolution(self) -> tuple[int, int]:
        """(width, height) of a camera feature, whichever order its shape is in."""
        if "video.width" in self.info and "video.height" in self.info:
            return int(self.info["video.width"]), int(self.info["video.height"])
        order = self.names or ("height", "width", "channels")
        if len(self.shape) == 3 and {"height", "width"} <= set(order):
            return self.shape[order.index("width")], self.shape[order.index("height")]
        raise ExportError(f"{INFO}: features.{self.key}.shape: expected (height, width, channels), got {self.shape}")


@dataclass(frozen=True)
class VideoSpan:
    """Where an episode's frames of one camera lie: a shard and a time range in it (its end
    is optional: LeRobot's loader needs only the start, and the import its end only to
    copy the range without re-encoding it)."""

    path: Path
    from_timestamp: float
    to_timestamp: float | None = None


@dataclass(frozen=True)
class EpisodeMeta:
    index: int
    length: int
    tasks: tuple[str, ...]
    data_path: Path
    # v3.0: dataset-wide ``index`` of the episode's first frame in its shared shard;
    # None (v2.x): the data file is the episode's own, every row of it is the episode's.
    first_row: int | None
    videos: Mapping[str, VideoSpan]
    # What LeRobot has no column for, from the ``ortf/...`` columns ``ortf export lerobot`` adds.
    success: bool | None = None
    failure_reason: str | None = None
    operator_notes: str | None = None
    recorded_at: str | None = None


@dataclass(frozen=True)
class LeRobotMeta:
    root: Path
    version: str  # info.json's codebase_version, one of VERSIONS
    fps: float
    robot_type: str | None
    features: Mapping[str, Feature]
    episodes: tuple[EpisodeMeta, ...]
    tasks: Mapping[int, str]
    modality: Mapping[str, Any] | None
    ortf: Mapping[str, Any]  # info.json's ``ortf`` entry, which ``ortf export lerobot`` writes

    @property
    def cameras(self) -> list[Feature]:
        return [f for f in self.features.values() if f.is_camera]

    @property
    def tasks_file(self) -> str:
        """Where ``tasks`` came from, for messages about them."""
        return TASKS if self.version == V3 else TASKS_JSONL


def read_meta(root: Path) -> LeRobotMeta:
    """Everything the import needs to know before it writes a byte."""
    info = _info(root)
    fps = info.get("fps")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or fps <= 0:
        raise ExportError(f"{root / INFO}: fps: expected a positive number, got {fps!r}")
    features = _features(root, info)
    for template in (
        ("data_path", "video_path") if any(f.dtype == "video" for f in features.values()) else ("data_path",)
    ):
        if not isinstance(info.get(template), str):
            raise ExportError(f"{root / INFO}: {template}: expected a path template, got {info.get(template)!r}")
    robot_type = info.get("robot_type")
    version = info["codebase_version"]
    videos = [f.key for f in features.values() if f.dtype == "video"]
    if version == V3:
        episodes, tasks = _v3_episodes(root, info, videos), _v3_tasks(root)
    else:
        episodes, tasks = _v2_episodes(root, info, videos, float(fps)), _v2_tasks(root)
    _check_files(root, episodes)
    return LeRobotMeta(
        root=root,
        version=version,
        fps=float(fps),
        robot_type=robot_type if isinstance(robot_type, str) and robot_type else None,
        features=features,
        episodes=episodes,
        tasks=tasks,
        modality=_modality(root),
        ortf=info["ortf"] if isinstance(info.get("ortf"), dict) else {},
    )


def _info(root: Path) -> dict[str, Any]:
    path = root / INFO
    if not path.is_file():
        if (root / "meta" / "manifest.json").is_file():
            raise ExportError(f"{path}: missing; {root} is an ORTF dataset, not a LeRobot one")
        raise ExportError(f"{path}: missing; is {root} a LeRobot dataset?")
    info = _json_object(path)
    version = info.get("codebase_version")
    if version not in VERSIONS:
        raise ExportError(f"{path}: codebase_version: expected one of {', '.join(VERSIONS)}, got {version!r}")
    return info


def _features(root: Path, info: Mapping[str, Any]) -> dict[str, Feature]:
    raw = info.get("features")
    if not isinstance(raw, dict) or not raw:
        raise ExportError(f"{root / INFO}: features: expected a non-empty object")
    features = {}
    for key, spec in raw.items():
        where = f"{root / INFO}: features.{key}"
        if not isinstance(spec, dict):
            raise ExportError(f"{where}: expected an object")
        dtype, shape, names = spec.get("dtype"), spec.get("shape"), spec.get("names")
        if dtype not in NUMERIC_DTYPES | CAMERA_DTYPES | TEXT_DTYPES:
            known = ", ".join(sorted(NUMERIC_DTYPES | CAMERA_DTYPES | TEXT_DTYPES))
            raise ExportError(f"{where}.dtype: unknown dtype {dtype!r}; expected one of {known}")
        if not isinstance(shape, list) or not all(isinstance(n, int) and n > 0 for n in shape):
            raise ExportError(f"{where}.shape: expected a list of positive integers, got {shape!r}")
        if isinstance(names, dict):  # LeRobot's older {"motors": [...]} form
            names = next(iter(names.values()), None) if len(names) == 1 else None
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise ExportError(f"{where}.names: expected a list of strings, got {names!r}")
        feature_info: dict[str, Any] = spec["info"] if isinstance(spec.get("info"), dict) else {}
        features[key] = Feature(key, dtype, tuple(shape), tuple(names) if names else None, feature_info)
    for key in ("timestamp", "episode_index", "index"):
        if key not in features:
            raise ExportError(f"{root / INFO}: features.{key}: required LeRobot feature is missing")
    return features


def _v3_episodes(root: Path, info: Mapping[str, Any], videos: Sequence[str]) -> tuple[EpisodeMeta, ...]:
    directory = root / EPISODES_DIR
    files = sorted(directory.glob("chunk-*/file-*.parquet"))
    if not files:
        legacy = root / EPISODES_JSONL
        detail = f" ({legacy.name} is LeRobot v2.x metadata, but {INFO} says {V3})" if legacy.exists() else ""
        raise ExportError(f"{directory}: no chunk-*/file-*.parquet episode files{detail}")
    wanted = ["episode_index", "length", "tasks", "data/chunk_index", "data/file_index", "dataset_from_index"]
    for key in videos:
        wanted += [f"videos/{key}/chunk_index", f"videos/{key}/file_index", f"videos/{key}/from_timestamp"]
    episodes = []
    for file in files:
        try:
            names = pq.read_schema(file).names
            missing = [c for c in wanted if c not in names]
            if missing:
                raise ExportError(f"{file}: columns {missing} are missing (LeRobot v3.0 episode metadata)")
            optional = [*OUTCOME_COLUMNS, *(f"videos/{key}/to_timestamp" for key in videos)]
            table = pq.read_table(file, columns=wanted + [c for c in optional if c in names])
        except (OSError, pa.ArrowException) as exc:
            raise ExportError(f"{file}: not readable Parquet: {exc}") from None
        for row in table.to_pylist():
            episodes.append(_v3_episode(root, info, row, videos, file))
    episodes.sort(key=lambda e: e.index)
    return tuple(episodes)


def _v3_episode(
    root: Path, info: Mapping[str, Any], row: Mapping[str, Any], videos: Sequence[str], file: Path
) -> EpisodeMeta:
    if any(v is None for k, v in row.items() if k not in OUTCOME_COLUMNS and not k.endswith("/to_timestamp")):
        raise ExportError(f"{file}: episode {row.get('episode_index')}: null in {sorted(row)}")
    data_path = _fill(root, info, "data_path", chunk_index=row["data/chunk_index"], file_index=row["data/file_index"])
    spans = {
        key: VideoSpan(
            _fill(
                root,
                info,
                "video_path",
                video_key=key,
                chunk_index=row[f"videos/{key}/chunk_index"],
                file_index=row[f"videos/{key}/file_index"],
            ),
            float(row[f"videos/{key}/from_timestamp"]),
            _optional_float(row.get(f"videos/{key}/to_timestamp")),
        )
        for key in videos
    }
    return EpisodeMeta(
        index=int(row["episode_index"]),
        length=int(row["length"]),
        tasks=tuple(row["tasks"]),
        data_path=data_path,
        first_row=int(row["dataset_from_index"]),
        videos=spans,
        **_outcome(row),
    )


def _v2_episodes(root: Path, info: Mapping[str, Any], videos: Sequence[str], fps: float) -> tuple[EpisodeMeta, ...]:
    """One episode per line of ``meta/episodes.jsonl``; its data file and videos are its own,
    so each video's span is the whole file from timestamp 0, ending where its rows' time
    does (``length / fps``: one frame per row, as LeRobot v2 encodes them)."""
    chunks_size = info.get("chunks_size", CHUNKS_SIZE)
    if isinstance(chunks_size, bool) or not isinstance(chunks_size, int) or chunks_size <= 0:
        raise ExportError(f"{root / INFO}: chunks_size: expected a positive integer, got {chunks_size!r}")
    path = root / EPISODES_JSONL
    episodes: dict[int, EpisodeMeta] = {}
    for where, line in _jsonl(path):
        index, length, tasks = line.get("episode_index"), line.get("length"), line.get("tasks")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ExportError(f"{where}: episode_index: expected a non-negative integer, got {index!r}")
        if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
            raise ExportError(f"{where}: length: expected a positive integer, got {length!r}")
        if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
            raise ExportError(f"{where}: tasks: expected a list of strings, got {tasks!r}")
        if index in episodes:
            raise ExportError(f"{where}: episode_index: episode {index} appears twice")
        chunk = index // chunks_size
        episodes[index] = EpisodeMeta(
            index=index,
            length=length,
            tasks=tuple(tasks),
            data_path=_fill(root, info, "data_path", episode_chunk=chunk, episode_index=index),
            first_row=None,
            videos={
                key: VideoSpan(
                    _fill(root, info, "video_path", episode_chunk=chunk, video_key=key, episode_index=index),
                    0.0,
                    length / fps,
                )
                for key in videos
            },
            **_outcome(line),
        )
    if not episodes:
        raise ExportError(f"{path}: lists no episodes")
    return tuple(episodes[index] for index in sorted(episodes))


def _check_files(root: Path, episodes: Sequence[EpisodeMeta]) -> None:
    """Every file the episodes name is there, found out before the first episode is
    imported rather than after all those before it (a stat per file, each once)."""
    seen: set[Path] = set()
    for episode in episodes:
        named = [(episode.data_path, "data_path"), *((span.path, "video_path") for span in episode.videos.values())]
        for path, template in named:
            if path not in seen:
                seen.add(path)
                if not path.is_file():
                    raise ExportError(f"{path}: missing (episode {episode.index}, by {root / INFO}'s {template})")


def _fill(root: Path, info: Mapping[str, Any], template: str, **fields: Any) -> Path:
    """An info.json path template filled in: the dataset's own layout, whatever it is,
    rather than the paths LeRobot writes by default."""
    try:
        return root / str(info[template]).format(**fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise ExportError(
            f"{root / INFO}: {template}: cannot fill {info[template]!r} with {sorted(fields)}: {exc!r}"
        ) from None


def _outcome(row: Mapping[str, Any]) -> dict[str, Any]:
    """The EpisodeMeta fields LeRobot has no place for, from the ``ortf/...`` entries
    ``ortf export lerobot`` adds to an episode's metadata row (absent: None)."""
    success = row.get("ortf/success")
    texts = {field: row.get(f"ortf/{field}") for field in ("failure_reason", "operator_notes", "recorded_at")}
    return {
        "success": None if success is None else bool(success),
        **{field: value if isinstance(value, str) else None for field, value in texts.items()},
    }


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _v3_tasks(root: Path) -> dict[int, str]:
    """task_index -> task; pandas stores the task strings as the frame's index column."""
    path = root / TASKS
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise ExportError(f"{path}: not readable Parquet: {exc}") from None
    text = "task" if "task" in table.column_names else "__index_level_0__"
    if "task_index" not in table.column_names or text not in table.column_names:
        raise ExportError(f"{path}: expected columns task_index and task (or the task as the index)")
    return dict(zip(table.column("task_index").to_pylist(), table.column(text).to_pylist(), strict=True))


def _v2_tasks(root: Path) -> dict[int, str]:
    """task_index -> task, one ``{"task_index", "task"}`` object per line. GR00T lists its
    annotation strings (``valid``, ...) here too: they are tasks by index like the others."""
    tasks: dict[int, str] = {}
    for where, line in _jsonl(root / TASKS_JSONL):
        index, task = line.get("task_index"), line.get("task")
        if isinstance(index, bool) or not isinstance(index, int) or not isinstance(task, str):
            raise ExportError(f"{where}: expected an integer task_index and a string task, got {line!r}")
        tasks[index] = task
    return tasks


def _jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """("path:line", object) for each non-blank line, read one line at a time."""
    try:
        with path.open(encoding="utf-8") as lines:
            for number, text in enumerate(lines, 1):
                if not text.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ExportError(f"{where}: not readable JSON: {exc}") from None
                if not isinstance(value, dict):
                    raise ExportError(f"{where}: expected a JSON object")
                yield where, value
    except FileNotFoundError:
        raise ExportError(f"{path}: missing (LeRobot v2.x metadata)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ExportError(f"{path}: not readable: {exc}") from None


def _modality(root: Path) -> dict[str, Any] | None:
    path = root / MODALITY
    if not path.exists():
        return None
    return _json_object(path)


def _json_object(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(read_text(path))
    except (OSError, FormatError, json.JSONDecodeError) as exc:
        raise ExportError(f"{path}: not readable JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ExportError(f"{path}: expected a JSON object")
    return value
