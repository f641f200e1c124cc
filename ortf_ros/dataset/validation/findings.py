"""What the validator reports: findings tagged with a stable rule id, and the report.

Every rule has exactly one severity, fixed here rather than at each call site, so the
catalogue below is the single description of what ``ortf validate`` checks: CI
scripts can grep or count a rule id, and the same id always means the same severity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]

RULES: Mapping[str, tuple[Severity, str]] = {
    # meta/manifest.json
    "manifest.missing": ("error", "meta/manifest.json exists"),
    "manifest.unreadable": ("error", "the manifest is JSON with the types of ORTF v0.2"),
    "manifest.required": ("error", "the required top-level fields are present"),
    "manifest.version": ("error", "ortf_version is a version this validator knows (0.2)"),
    "manifest.action_indices": ("error", "action dimension indices are 0..n-1, each once"),
    "manifest.action_type": ("error", "action dimension types are position, rotation, velocity, binary or continuous"),
    "manifest.action_units": ("warning", "action units are meters, radians, rad_per_s, normalized or discrete"),
    "manifest.joint_indices": ("error", "joint indices are 0..n-1, each once"),
    "manifest.joint_type": ("error", "joint types are revolute, prismatic or continuous"),
    "manifest.dof": ("warning", "robot.dof equals the number of joints"),
    "manifest.images": ("error", "observation_space.images names declared camera sensors"),
    "manifest.sensor_names": ("error", "sensor names are unique"),
    "manifest.sensor_fields": ("error", "each sensor has the fields its type requires"),
    "manifest.depth_encoding": ("error", "depth cameras declare a lossless encoding (ffv1 or npz)"),
    "manifest.intrinsics_unknown": ("warning", "cameras' intrinsics are known, not declared unknown"),
    "manifest.quaternion": ("error", "rotations are unit quaternions"),
    "manifest.quaternion_order": ("warning", "rotations look like (w, x, y, z), not (x, y, z, w)"),
    "manifest.frame_parent": ("warning", "frame parents name known frames"),
    "manifest.frame_transform": ("error", "fixed frames with a parent have a transform"),
    "manifest.statistics": ("warning", "statistics agree with episodes.parquet"),
    "manifest.urdf": ("error", "urdf_path names a URDF file under robot/"),
    "manifest.urdf_joints": ("error", "manifest joints are URDF joints"),
    "manifest.urdf_movable": ("warning", "movable URDF joints are manifest joints"),
    "manifest.urdf_undeclared": ("warning", "a robot/robot.urdf is referenced by urdf_path"),
    # meta/episodes.parquet
    "episodes.missing": ("error", "meta/episodes.parquet exists"),
    "episodes.unreadable": ("error", "meta/episodes.parquet is readable Parquet"),
    "episodes.schema": ("error", "episode columns are present with their types and without nulls"),
    "episodes.unique_id": ("error", "episode ids are unique"),
    "episodes.length": ("error", "length equals end_step - start_step"),
    "episodes.empty": ("error", "episodes have at least one step"),
    "episodes.overlap": ("error", "episodes' step ranges do not overlap"),
    "episodes.chunk_id": ("error", "an episode's steps are in its chunk's steps.parquet"),
    "episodes.video_path": ("error", "each camera's video lies under videos/<camera>/<chunk>/"),
    "episodes.video_name": ("warning", "video files have their canonical names"),
    "episodes.audio_file": ("error", "the audio file exists"),
    "episodes.task_id": ("error", "task ids are defined in tasks.jsonl"),
    "episodes.recorded_at": ("warning", "recorded_at is ISO 8601"),
    "episodes.success_reason": ("warning", "successful episodes have no failure reason"),
    "episodes.accounting": ("error", "the accounting column holds per-stream counts"),
    "episodes.accounting_stages": (
        "error",
        "each stream's counts add up from stage to stage; every loss is a counted drop",
    ),
    "episodes.accounting_files": ("error", "the counts of frames, samples and steps agree with the files"),
    # audio/<microphone>/chunk-NNN/episode_NNNNNN.wav and .chunks.parquet
    "audio.file": ("error", "each microphone has a readable WAV file per episode; audio_file is the first's"),
    "audio.format": ("error", "an audio file's rate, channels and sample format are the manifest's"),
    "audio.chunks": ("error", "an audio file's chunk table covers its samples end to end"),
    # laser scans and point clouds (dataset.validation.lidar)
    "lidar.scan_columns": (
        "error",
        "a laser scan stream's columns are as many ranges (and intensities) as its sensor's",
    ),
    "lidar.cloud_declaration": (
        "error",
        "a point cloud's declared fields fit point_step, of known datatypes, for a lidar",
    ),
    "lidar.cloud_file": ("error", "a point cloud file has the declared schema, clouds 0..n-1 in time order, whole"),
    # meta/tasks.jsonl
    "tasks.missing": ("error", "meta/tasks.jsonl exists when there are episodes"),
    "tasks.invalid": ("error", "each line is an object with an integer task_id and a string instruction"),
    "tasks.unique_id": ("error", "task ids are unique"),
    "tasks.task_key": ("warning", "instructions are under 'instruction', not LeRobot's 'task'"),
    # data/chunk-NNN/steps.parquet
    "steps.missing": ("error", "each referenced chunk has a steps.parquet"),
    "steps.unreadable": ("error", "steps.parquet is readable Parquet"),
    "steps.schema": ("error", "step columns are present with the manifest's types"),
    "steps.schema_mismatch": ("error", "all chunks have the same step schema (RLDS INV-R3)"),
    "steps.null": ("error", "step columns hold no nulls"),
    "steps.length": ("error", "an episode has as many rows as its length"),
    "steps.is_first": ("error", "is_first is set exactly once, on the first row (RLDS INV-R1)"),
    "steps.is_last": ("error", "is_last is set exactly once, on the last row (RLDS INV-R2)"),
    "steps.is_terminal": ("error", "is_terminal is set on the last row only"),
    "steps.timestamp": ("error", "timestamps are finite and strictly increasing"),
    "steps.action_finite": ("error", "actions are finite"),
    "steps.state_finite": ("warning", "states are finite"),
    "steps.step_index": ("error", "step_index counts from start_step or from 0"),
    "steps.step_index_convention": ("error", "all episodes count step_index the same way"),
    "steps.frame_index": ("error", "frame indices are >= 0, non-decreasing and within the video"),
    "steps.orphan": ("error", "step rows belong to episodes in episodes.parquet"),
    "steps.stream_index": ("error", "steps point at samples their native-rate stream has"),
    # data/chunk-NNN/streams/<stream>.parquet and the alignment columns
    "manifest.stream_names": ("error", "native and alignment stream names are identifiers"),
    "manifest.stream_files": ("error", "native_stream_files is 'episode' or 'chunk'"),
    "manifest.stream_tolerance": (
        "warning",
        "alignment.tolerance_ms gives aligned streams tolerances within the dataset's sync_tolerance_ms",
    ),
    "streams.missing": ("error", "each declared native-rate stream has its file for every episode (or chunk)"),
    "streams.unreadable": ("error", "stream tables are readable Parquet with their columns"),
    "streams.sample_index": ("error", "an episode's samples are numbered 0..n-1 in order"),
    "streams.timestamp": ("error", "an episode's samples do not go back in time"),
    "streams.orphan": ("error", "stream samples belong to episodes in episodes.parquet"),
    "alignment.tolerance": (
        "warning",
        "steps used samples within their stream's sync tolerance (alignment.tolerance_ms, else sync_tolerance_ms)",
    ),
    "steps.pending_commit": ("info", "step rows of an interrupted commit or deletion"),
    # videos/
    "videos.missing": ("error", "referenced videos exist"),
    "videos.unreadable": ("error", "videos decode to their last frame"),
    "videos.resolution": ("error", "videos have their sensor's resolution"),
    "videos.depth_lossless": ("error", "depth is stored losslessly (FFV1 gray16le or npz)"),
    "videos.fps": ("warning", "videos have their sensor's frame rate (strict mode only)"),
    # meta/stats.json, annotations/, .staging/
    "stats.missing": ("warning", "meta/stats.json exists"),
    "stats.invalid": ("warning", "stats.json has mean/std/min/max/q01/q99 of each feature's size"),
    "annotations.scene_objects": (
        "warning",
        "scene_objects.json has the spec's shape (objects with label, class, bounding_box, color '#rrggbb') "
        "and its boxes fit the annotated camera's frame",
    ),
    "annotations.pictures": ("warning", "first_frame.jpg and depth_colorized.jpg decode"),
    "staging.unfinished": ("info", "an episode was being recorded"),
    "staging.interrupted_commit": ("info", "an episode's commit was interrupted"),
    "staging.interrupted_delete": ("info", "a deletion of episodes was interrupted"),
    # the --episode argument
    "episode.not_found": ("error", "the requested episode is in episodes.parquet"),
}


@dataclass(frozen=True)
class Finding:
    severity: Severity
    rule: str
    file: str
    message: str
    episode: str | None = None
    field: str | None = None

    def line(self) -> str:
        """One grep-able line: severity, where, what, and the rule id to look it up by."""
        where = [self.file]
        if self.episode is not None:
            where.append(f"episode={self.episode}")
        if self.field is not None:
            where.append(f"field={self.field}")
        return f"{self.severity.upper()} {' '.join(where)}: {self.message} [{self.rule}]"

    def field_message(self) -> str:
        """The message after the field it is about: the finding in an error line of its own
        (the writer refusing a manifest), where the report's file and rule id would be noise."""
        return f"{self.field}: {self.message}" if self.field is not None else self.message

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def finding(rule: str, file: str, message: str, *, episode: str | None = None, field: str | None = None) -> Finding:
    """A finding of ``rule`` with the rule's catalogued severity."""
    return Finding(RULES[rule][0], rule, file, message, episode, field)


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]
    strict: bool = False

    def fails(self, item: Finding) -> bool:
        """Whether ``item`` makes the dataset invalid: errors, and warnings in strict mode."""
        return item.severity == "error" or (self.strict and item.severity == "warning")

    @property
    def failures(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if self.fails(f))

    @property
    def ok(self) -> bool:
        return not self.failures

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def summary(self) -> str:
        verdict = "valid" if self.ok else "INVALID"
        mode = " (strict)" if self.strict else ""
        counts = ", ".join(f"{self.count(s)} {s}(s)" for s in ("error", "warning", "info"))
        return f"{verdict}{mode}: {counts}"

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "strict": self.strict, "findings": [f.to_dict() for f in self.findings]}
