"""``WriterConfig``: the writer's settings, which change how a dataset is written, never what
it means. Light on purpose (no encoder, no Arrow writer): the pipeline and the nodes read and
check these settings before anything is opened.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from typing import Any, TypeVar

import yaml

from ortf_ros import bounds
from ortf_ros.errors import WriterError
from ortf_ros.format import fields, layout
from ortf_ros.format.fields import Fields, JsonDict, Wording
from ortf_ros.format.text import read_text
from ortf_ros.io.video import VideoSettings

_T = TypeVar("_T")


@dataclass(frozen=True)
class RowGroupLimits:
    """A commit's rows go to Parquet in blocks, one row group each, of ``rows`` rows or
    ``bytes`` bytes of Arrow data, whichever comes first (give or take a staged batch):
    what a commit, and a reader, holds at once. Bytes as well as rows: a native stream
    of joint states is 20 times wider a row than one of forces, and a bound in rows alone
    let the commit's memory grow with the episode up to it (by 40 MB from a 1-minute to
    a 10-minute episode, ``bench/bench_bag2ortf.py``)."""

    rows: int
    bytes: int


@dataclass(frozen=True)
class WriterConfig:
    """Knobs that do not change what the data means."""

    chunk_size: int = layout.DEFAULT_CHUNK_SIZE
    video: VideoSettings = field(default_factory=VideoSettings)
    # Rows per Parquet row group when an episode is committed, and bytes (of Arrow data),
    # whichever limit comes first: they bound the memory of a commit and of a reader.
    row_group_steps: int = 65536
    row_group_bytes: int = 4 * 1024 * 1024
    # Frames per camera waiting for its encoder process: bounds memory (a 640x480 colour
    # frame is 0.9 MB). A killed writer loses none of them: its encoder process encodes
    # what it was handed before it exits.
    encoder_queue_frames: int = 8
    # Steps appended to the staging log together: one write instead of one per step
    # (and per native stream). What a killed process can lose of its last steps.
    step_batch: int = 8

    def __post_init__(self) -> None:
        problem = bounds.fields_problem(self, _WRITER_BOUNDS)
        if problem is not None:
            raise WriterError(problem)

    @property
    def row_groups(self) -> RowGroupLimits:
        return RowGroupLimits(self.row_group_steps, self.row_group_bytes)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str) -> WriterConfig:
        """Settings from parsed YAML/parameters; unknown keys and wrong types are errors."""
        top = Fields(data, source, WORDING, keys=_names(cls))
        video_data: JsonDict = top.get("video", fields.mapping, {})
        video = _typed_fields(VideoSettings, top.child(video_data, "video", _names(VideoSettings)))
        return replace(_typed_fields(cls, top, skip="video"), video=video)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> WriterConfig:
        try:
            data = yaml.safe_load(read_text(path)) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise WriterError(f"{path}: cannot read writer settings: {exc}") from None
        if not isinstance(data, Mapping):
            raise WriterError(f"{path}: expected a mapping of settings")
        return cls.from_mapping(data, str(path))


_WRITER_BOUNDS = {
    "chunk_size": bounds.CHUNK_SIZE,
    "row_group_steps": bounds.ROW_GROUP_STEPS,
    "row_group_bytes": bounds.ROW_GROUP_BYTES,
    "encoder_queue_frames": bounds.ENCODER_QUEUE_FRAMES,
    "step_batch": bounds.STEP_BATCH,
}


WORDING = Wording(WriterError, show=repr, unknown="unknown setting")
"""How the writer's setting errors are worded: ``SOURCE: video.crf: expected int, got 'high'``."""


def _names(kind: type[object]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclass_fields(kind))  # type: ignore[arg-type]


def _typed_fields(kind: type[_T], given: Fields, skip: str = "") -> _T:
    """Dataclass ``kind`` from ``given``, each value of its default's type; a value out of
    its bound (the dataclass checks them) is named where it was given."""
    defaults = kind()
    values = {
        key: given.get(key, fields.of_type(type(getattr(defaults, key))), getattr(defaults, key))
        for key in given.data
        if key != skip
    }
    try:
        return replace(defaults, **values)  # type: ignore[type-var]
    except WriterError as exc:  # "NAME: PROBLEM", from the dataclass's own check
        name, _, problem = str(exc).partition(": ")
        raise given.error(name, problem) from None
