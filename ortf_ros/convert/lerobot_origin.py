"""The ORTF manifest and robot description a LeRobot dataset was exported from, if any.

``ortf export lerobot`` keeps them under ``ortf/`` (info.json's ``ortf.manifest`` names
the file), because LeRobot has no place for a URDF, joint limits, units, calibration
or coordinate frames. When that manifest still describes the data (the same state
components, action size and colour cameras), the import restores it rather than
declaring those fields unknown. Depth, which is no LeRobot feature, comes back from
the FFV1 files the export kept under ``ortf/depth`` with their step -> frame column
(info.json's ``ortf.depth``), copied as they are. What the import does not bring back is
taken out of it: other cameras that are no LeRobot feature (NPZ depth), native-rate
streams and alignment columns, which have no LeRobot column. A kept manifest the writer
would refuse (one an earlier version wrote with a value the validator now rules out, such
as an action dimension of type "unknown") is not used, with a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ortf_ros.convert.lerobot_meta import LeRobotMeta
from ortf_ros.dataset.validation import check_manifest
from ortf_ros.errors import FormatError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest, Statistics
from ortf_ros.format.text import read_text
from ortf_ros.io.video import LOSSLESS_DEPTH_ENCODING


@dataclass(frozen=True)
class DepthFiles:
    """Where the export kept a depth camera: one file per episode, and the data column
    naming each step's frame of it."""

    path: str  # relative to the LeRobot root, with {episode_index:06d} and {suffix}
    frame_column: str

    def episode_path(self, root: Path, episode_index: int) -> Path:
        return root / self.path.format(episode_index=episode_index, suffix=".mp4")


@dataclass(frozen=True)
class Origin:
    manifest: Manifest
    urdf: str | None
    meshes: Path | None
    depth: Mapping[str, DepthFiles] = field(default_factory=dict)


def exported_origin(meta: LeRobotMeta, imported: Manifest, warn: Callable[[str], None]) -> Origin | None:
    """The source's manifest fitted to what was imported, or None (with a warning if stale)."""
    relative = meta.ortf.get("manifest")
    if not isinstance(relative, str):
        return None
    kept = Path(relative).parent.parent  # the manifest is <kept>/meta/manifest.json
    base = meta.root / kept
    try:
        original = Manifest.from_json(read_text(meta.root / relative), relative)
    except (OSError, FormatError) as exc:
        warn(f"{relative}: not used ({exc}); the manifest is built from LeRobot's metadata")
        return None
    mismatch = manifest_mismatch(original, imported)
    if mismatch:
        warn(f"{relative}: no longer describes the data ({mismatch}); the manifest is built from LeRobot's metadata")
        return None
    depth = _kept_depth(meta, original)
    dropped = sorted(set(original.cameras) - set(imported.cameras) - set(depth))
    if dropped:
        warn(f"cameras {dropped} are neither LeRobot features nor FFV1 depth under {base.name}/depth; not imported")
    images = {k: v for k, v in original.observation_space.images.items() if k in imported.cameras or k in depth}
    unused = {original.observation_space.images[k] for k in dropped}
    meshes = base / layout.MESHES_DIR
    manifest = replace(
        original,
        robot=replace(original.robot, urdf_path=None),  # the writer sets it when it copies the URDF
        observation_space=replace(original.observation_space, images=images),
        sensors=tuple(s for s in original.sensors if s.name not in unused),
        native_streams=imported.native_streams,
        alignment=None,
        statistics=Statistics(),
        collection={**original.collection, **imported.collection},
    )
    errors = [f.field_message() for f in check_manifest(manifest) if f.severity == "error"]
    if errors:
        warn(
            f"{relative}: not used (not valid ORTF: {'; '.join(errors)}); the manifest is built from LeRobot's metadata"
        )
        return None
    urdf = _kept_urdf(meta.root, kept / layout.URDF, warn)
    return Origin(manifest, urdf, meshes if meshes.is_dir() else None, depth)


def _kept_urdf(root: Path, relative: Path, warn: Callable[[str], None]) -> str | None:
    """The robot description the export kept at ``root / relative``, if any; one that cannot
    be read is warned about and left out, like a manifest: the import does not need it."""
    path = root / relative
    if not path.exists():
        return None
    try:
        return read_text(path)
    except (OSError, FormatError) as exc:
        warn(f"{relative}: not used ({exc}); the dataset is imported without a robot description")
        return None


def _kept_depth(meta: LeRobotMeta, original: Manifest) -> dict[str, DepthFiles]:
    """The depth cameras the export kept as FFV1 files (the writer stores depth so; an NPZ
    stack would need re-encoding), each with its frame column in the data."""
    entries: Any = meta.ortf.get("depth")
    kept = {}
    for camera, entry in (entries if isinstance(entries, dict) else {}).items():
        sensor = original.cameras.get(camera)
        if sensor is None or not sensor.is_depth or sensor.encoding != LOSSLESS_DEPTH_ENCODING:
            continue
        path, column = (entry.get("path"), entry.get("frame_index_column")) if isinstance(entry, dict) else (None, None)
        if isinstance(path, str) and isinstance(column, str) and column in meta.features:
            kept[camera] = DepthFiles(path, column)
    return kept


def manifest_mismatch(original: Manifest, imported: Manifest) -> str | None:
    def dims(m: Manifest) -> list[tuple[str, int]]:
        return [(name, c.dim) for name, c in m.observation_space.state.items()]

    if dims(original) != dims(imported):
        return f"state components {dims(original)}, data {dims(imported)}"
    if original.action_space.dim != imported.action_space.dim:
        return f"action size {original.action_space.dim}, data {imported.action_space.dim}"
    for key, sensor in imported.cameras.items():
        theirs = original.cameras.get(key)
        if theirs is None or theirs.resolution != sensor.resolution:
            return f"camera {key!r}: {theirs.resolution if theirs else 'not declared'}, data {sensor.resolution}"
    return None
