"""Arrow schemas of the step table and the episode index, derived from a manifest.

The step schema is a pure function of the manifest, so every writer of a dataset
(live recorder, converter, recovery) produces byte-compatible Parquet and the
validator can tell exactly which columns and list sizes to expect.
"""

from __future__ import annotations

import pyarrow as pa

from ortf_ros.format import layout
from ortf_ros.format.accounting import ACCOUNTING_COLUMN, ACCOUNTING_TYPE
from ortf_ros.format.manifest import Manifest

STEP_META_FIELDS = (
    pa.field("episode_id", pa.string(), nullable=False),
    pa.field("step_index", pa.int64(), nullable=False),
    pa.field("timestamp", pa.float64(), nullable=False),
    pa.field("is_first", pa.bool_(), nullable=False),
    pa.field("is_last", pa.bool_(), nullable=False),
    pa.field("is_terminal", pa.bool_(), nullable=False),
)


def vector_type(dim: int) -> pa.DataType:
    return pa.list_(pa.float32(), dim)


def step_schema(manifest: Manifest) -> pa.Schema:
    fields = list(STEP_META_FIELDS)
    fields.append(pa.field("action", vector_type(manifest.action_space.dim), nullable=False))
    for name, component in manifest.observation_space.state.items():
        fields.append(pa.field(layout.state_column(name), vector_type(component.dim), nullable=False))
    for camera in manifest.cameras:
        fields.append(pa.field(layout.image_column(camera), pa.int64(), nullable=False))
    # Null until the stream has delivered its first sample in the episode.
    for stream in manifest.native_streams:
        fields.append(pa.field(layout.stream_index_column(stream), pa.int64()))
    for stream in manifest.alignment.streams if manifest.alignment else ():
        fields.append(pa.field(layout.alignment_column(stream), pa.float32()))
    return pa.schema(fields)


def stream_schema(manifest: Manifest, stream: str) -> pa.Schema:
    """A native-rate side table: every sample, its time on the step clock and its raw stamps."""
    fields = [
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("sample_index", pa.int64(), nullable=False),
        pa.field("timestamp", pa.float64(), nullable=False),
        pa.field("stamp_ns", pa.int64()),
        pa.field("receive_ns", pa.int64()),
    ]
    for name, component in manifest.native_streams[stream].columns.items():
        fields.append(pa.field(name, vector_type(component.dim), nullable=False))
    return pa.schema(fields)


def vector_columns(manifest: Manifest) -> dict[str, int]:
    """The fixed-size float vector columns of the step table (action, state) and their sizes."""
    columns = {"action": manifest.action_space.dim}
    for name, component in manifest.observation_space.state.items():
        columns[layout.state_column(name)] = component.dim
    return columns


def stats_features(manifest: Manifest) -> dict[str, int]:
    """The step columns that get statistics: the vectors, and each alignment error (size 1)."""
    features = vector_columns(manifest)
    for stream in manifest.alignment.streams if manifest.alignment else ():
        features[layout.alignment_column(stream)] = 1
    return features


def feature_thresholds(manifest: Manifest) -> dict[str, float]:
    """Alignment columns are counted against their stream's sync tolerance (its own, else
    the manifest's: ``Manifest.stream_tolerance_ms``), when the manifest declares one."""
    thresholds = {}
    for stream in manifest.alignment.streams if manifest.alignment else ():
        tolerance = manifest.stream_tolerance_ms(stream)
        if tolerance is not None:
            thresholds[layout.alignment_column(stream)] = tolerance
    return thresholds


def episode_schema(manifest: Manifest) -> pa.Schema:
    fields = [
        pa.field("episode_id", pa.string(), nullable=False),
        pa.field("task_id", pa.int64(), nullable=False),
        pa.field("start_step", pa.int64(), nullable=False),
        pa.field("end_step", pa.int64(), nullable=False),
        pa.field("length", pa.int64(), nullable=False),
        pa.field("duration_seconds", pa.float64(), nullable=False),
        pa.field("success", pa.bool_()),
        pa.field("failure_reason", pa.string()),
        pa.field("operator_notes", pa.string()),
        pa.field("chunk_id", pa.int64(), nullable=False),
        pa.field("recorded_at", pa.string()),
    ]
    cameras = list(manifest.cameras)
    # Parquet cannot store a struct without children, so a camera-less dataset
    # has no video_files column (the validator expects it only with cameras).
    if cameras:
        fields.append(pa.field("video_files", pa.struct([pa.field(c, pa.string()) for c in cameras])))
    fields.append(pa.field("audio_file", pa.string()))
    fields.append(pa.field(SOURCE_COLUMN, SOURCE_TYPE))
    fields.append(pa.field(ACCOUNTING_COLUMN, ACCOUNTING_TYPE))
    fields.append(pa.field(REVIEW_FLAG_COLUMN, pa.bool_()))
    return pa.schema(fields)


SOURCE_COLUMN = "source"
"""Where a converted episode came from (``metadata.EpisodeSource``): an extension of the
episode index, so a dataset without it (another writer's, an older one) is still valid."""
SOURCE_TYPE = pa.struct(
    [
        pa.field("path", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("mtime_ns", pa.int64()),
        pa.field("fingerprint", pa.string()),
        pa.field("episode", pa.int64()),
        pa.field("episodes", pa.int64()),
    ]
)
REVIEW_FLAG_COLUMN = "review_flag"
"""Whether a person marked the episode for another look (``ortf episodes set --flag``, the
review page); null: not reviewed. An extension like ``source``: absent in other writers' and
older datasets, which stay valid."""
OPTIONAL_EPISODE_COLUMNS = frozenset({SOURCE_COLUMN, ACCOUNTING_COLUMN, REVIEW_FLAG_COLUMN})
"""Extensions of the episode index (``source``; ``accounting``, see ``format.accounting``;
``review_flag``): a dataset without them is still valid."""
