"""A LeRobotDataset v3.0's metadata, read and checked before anything is written.

Follows what ``lerobot`` 0.4.4 itself reads: ``meta/info.json`` (features, fps, path
templates), ``meta/episodes/chunk-*/file-*.parquet`` (one row per episode: its rows in
the data shards and its time span in each video shard), ``meta/tasks.parquet`` (task
strings, written by pandas as the frame's index) and, from GR00T's flavour,
``meta/modality.json``. Every problem is one ``ConversionError`` naming the file and
field, raised before the destination is touched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ortf_ros.errors import ConversionError

CODEBASE_VERSION = "v3.0"
INFO = "meta/info.json"
TASKS = "meta/tasks.parquet"
EPISODES_DIR = "meta/episodes"
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
        raise ConversionError(
            f"{INFO}: features.{self.key}.shape: expected (height, width, channels), got {self.shape}"
        )


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
    first_row: int  # dataset-wide ``index`` of the episode's first frame
    videos: Mapping[str, VideoSpan]
    # What LeRobot has no column for, from the ``ortf/...`` columns ``ortf export lerobot`` adds.
    success: bool | None = None
    failure_reason: str | None = None
    operator_notes: str | None = None
    recorded_at: str | None = None


@dataclass(frozen=True)
class LeRobotMeta:
    root: Path
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


def read_meta(root: Path) -> LeRobotMeta:
    """Everything the import needs to know before it writes a byte."""
    info = _info(root)
    fps = info.get("fps")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or fps <= 0:
        raise ConversionError(f"{root / INFO}: fps: expected a positive number, got {fps!r}")
    features = _features(root, info)
    for template in (
        ("data_path", "video_path") if any(f.dtype == "video" for f in features.values()) else ("data_path",)
    ):
        if not isinstance(info.get(template), str):
            raise ConversionError(f"{root / INFO}: {template}: expected a path template, got {info.get(template)!r}")
    robot_type = info.get("robot_type")
    return LeRobotMeta(
        root=root,
        fps=float(fps),
        robot_type=robot_type if isinstance(robot_type, str) and robot_type else None,
        features=features,
        episodes=_episodes(root, info, features),
        tasks=_tasks(root),
        modality=_modality(root),
        ortf=info["ortf"] if isinstance(info.get("ortf"), dict) else {},
    )


def _info(root: Path) -> dict[str, Any]:
    path = root / INFO
    if not path.is_file():
        if (root / "meta" / "manifest.json").is_file():
            raise ConversionError(f"{path}: missing; {root} is an ORTF dataset, not a LeRobot one")
        raise ConversionError(f"{path}: missing; is {root} a LeRobot dataset?")
    info = _json_object(path)
    version = info.get("codebase_version")
    if version != CODEBASE_VERSION:
        hint = " (convert it with lerobot's convert_dataset_v21_to_v30 first)" if version in ("v2.0", "v2.1") else ""
        raise ConversionError(f"{path}: codebase_version: expected {CODEBASE_VERSION!r}, got {version!r}{hint}")
    return info


def _features(root: Path, info: Mapping[str, Any]) -> dict[str, Feature]:
    raw = info.get("features")
    if not isinstance(raw, dict) or not raw:
        raise ConversionError(f"{root / INFO}: features: expected a non-empty object")
    features = {}
    for key, spec in raw.items():
        where = f"{root / INFO}: features.{key}"
        if not isinstance(spec, dict):
            raise ConversionError(f"{where}: expected an object")
        dtype, shape, names = spec.get("dtype"), spec.get("shape"), spec.get("names")
        if dtype not in NUMERIC_DTYPES | CAMERA_DTYPES | TEXT_DTYPES:
            known = ", ".join(sorted(NUMERIC_DTYPES | CAMERA_DTYPES | TEXT_DTYPES))
            raise ConversionError(f"{where}.dtype: unknown dtype {dtype!r}; expected one of {known}")
        if not isinstance(shape, list) or not all(isinstance(n, int) and n > 0 for n in shape):
            raise ConversionError(f"{where}.shape: expected a list of positive integers, got {shape!r}")
        if isinstance(names, dict):  # LeRobot's older {"motors": [...]} form
            names = next(iter(names.values()), None) if len(names) == 1 else None
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise ConversionError(f"{where}.names: expected a list of strings, got {names!r}")
        feature_info: dict[str, Any] = spec["info"] if isinstance(spec.get("info"), dict) else {}
        features[key] = Feature(key, dtype, tuple(shape), tuple(names) if names else None, feature_info)
    for key in ("timestamp", "episode_index", "index"):
        if key not in features:
            raise ConversionError(f"{root / INFO}: features.{key}: required LeRobot feature is missing")
    return features


def _episodes(root: Path, info: Mapping[str, Any], features: Mapping[str, Feature]) -> tuple[EpisodeMeta, ...]:
    directory = root / EPISODES_DIR
    files = sorted(directory.glob("chunk-*/file-*.parquet"))
    if not files:
        legacy = root / "meta" / "episodes.jsonl"
        detail = f" ({legacy.name} is LeRobot v2.x metadata)" if legacy.exists() else ""
        raise ConversionError(f"{directory}: no chunk-*/file-*.parquet episode files{detail}")
    videos = [f.key for f in features.values() if f.dtype == "video"]
    wanted = ["episode_index", "length", "tasks", "data/chunk_index", "data/file_index", "dataset_from_index"]
    for key in videos:
        wanted += [f"videos/{key}/chunk_index", f"videos/{key}/file_index", f"videos/{key}/from_timestamp"]
    episodes = []
    for file in files:
        try:
            names = pq.read_schema(file).names
            missing = [c for c in wanted if c not in names]
            if missing:
                raise ConversionError(f"{file}: columns {missing} are missing (LeRobot v3.0 episode metadata)")
            optional = [*OUTCOME_COLUMNS, *(f"videos/{key}/to_timestamp" for key in videos)]
            table = pq.read_table(file, columns=wanted + [c for c in optional if c in names])
        except (OSError, pa.ArrowException) as exc:
            raise ConversionError(f"{file}: not readable Parquet: {exc}") from None
        for row in table.to_pylist():
            episodes.append(_episode(root, info, row, videos, file))
    episodes.sort(key=lambda e: e.index)
    return tuple(episodes)


def _episode(
    root: Path, info: Mapping[str, Any], row: Mapping[str, Any], videos: Sequence[str], file: Path
) -> EpisodeMeta:
    if any(v is None for k, v in row.items() if k not in OUTCOME_COLUMNS and not k.endswith("/to_timestamp")):
        raise ConversionError(f"{file}: episode {row.get('episode_index')}: null in {sorted(row)}")
    try:
        data_path = root / info["data_path"].format(
            chunk_index=row["data/chunk_index"], file_index=row["data/file_index"]
        )
        spans = {
            key: VideoSpan(
                root
                / info["video_path"].format(
                    video_key=key,
                    chunk_index=row[f"videos/{key}/chunk_index"],
                    file_index=row[f"videos/{key}/file_index"],
                ),
                float(row[f"videos/{key}/from_timestamp"]),
                _optional_float(row.get(f"videos/{key}/to_timestamp")),
            )
            for key in videos
        }
    except (KeyError, IndexError, ValueError) as exc:
        raise ConversionError(f"{root / INFO}: data_path/video_path: cannot fill the template: {exc}") from None
    success = row.get("ortf/success")
    return EpisodeMeta(
        index=int(row["episode_index"]),
        length=int(row["length"]),
        tasks=tuple(row["tasks"]),
        data_path=data_path,
        first_row=int(row["dataset_from_index"]),
        videos=spans,
        success=None if success is None else bool(success),
        failure_reason=row.get("ortf/failure_reason"),
        operator_notes=row.get("ortf/operator_notes"),
        recorded_at=row.get("ortf/recorded_at"),
    )


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _tasks(root: Path) -> dict[int, str]:
    """task_index -> task; pandas stores the task strings as the frame's index column."""
    path = root / TASKS
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise ConversionError(f"{path}: not readable Parquet: {exc}") from None
    text = "task" if "task" in table.column_names else "__index_level_0__"
    if "task_index" not in table.column_names or text not in table.column_names:
        raise ConversionError(f"{path}: expected columns task_index and task (or the task as the index)")
    return dict(zip(table.column("task_index").to_pylist(), table.column(text).to_pylist(), strict=True))


def _modality(root: Path) -> dict[str, Any] | None:
    path = root / MODALITY
    if not path.exists():
        return None
    return _json_object(path)


def _json_object(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConversionError(f"{path}: not readable JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConversionError(f"{path}: expected a JSON object")
    return value
