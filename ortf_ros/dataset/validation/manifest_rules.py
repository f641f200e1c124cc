"""Rules on meta/manifest.json.

``check_manifest`` is pure so that the writer can refuse a bad manifest before it
creates anything on disk; the rules that need files (URDF, episode totals) take what
they need as arguments.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

from ortf_ros.dataset.validation.files import read_json
from ortf_ros.dataset.validation.findings import Finding, finding
from ortf_ros.errors import FormatError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.sensors import Transform
from ortf_ros.format.urdf import MOVABLE_JOINT_TYPES

# The ORTF versions whose rules this validator knows; it cannot check a format it does not know.
KNOWN_VERSIONS = (layout.ORTF_VERSION,)
REQUIRED_FIELDS = ("ortf_version", "dataset_id", "robot", "action_space", "observation_space", "sensors", "frames")
# The spec's closed lists for an action dimension (its section 9). The type says how a learner
# must treat the value (a binary gripper command is not a continuous position), so a type the
# spec does not list is an error. Units are a fact about the source, not a defect: one the spec
# does not list ("unknown" when the source did not say) is a warning, and the values stay usable.
# State components have no type, and the spec leaves their units open (its own state example
# uses "quaternion", its state table "Nm"), so state units are not checked against this list.
ACTION_DIMENSION_TYPES = ("position", "rotation", "velocity", "binary", "continuous")
ACTION_DIMENSION_UNITS = ("meters", "radians", "rad_per_s", "normalized", "discrete")
# A finding names at most this many dimensions (an imported arm may have dozens).
NAMED_DIMENSIONS = 6
REQUIRED_SENSOR_FIELDS = {
    "camera": ("resolution", "fps", "intrinsics"),
    "depth_camera": ("resolution", "fps", "depth_units", "depth_range"),
    "force_torque": ("rate_hz", "range_force", "range_torque"),
    "lidar": ("scan_rate", "range", "channels"),
    "audio": ("sample_rate", "channels"),
}
LOSSLESS_DEPTH_ENCODINGS = ("ffv1", "npz")
# The spec's global frame; datasets commonly leave it implicit.
IMPLICIT_FRAMES = ("world",)
QUATERNION_TOLERANCE = 1e-3
STATISTICS_TOLERANCE = 1e-6

_FILE = layout.MANIFEST


def load_manifest(root: Path) -> tuple[Manifest | None, list[Finding]]:
    """The parsed manifest, or None with the reason; all missing top-level fields at once."""
    try:
        data = read_json(root, _FILE)
    except FileNotFoundError:
        return None, [finding("manifest.missing", _FILE, f"no manifest: is {root} an ORTF dataset?")]
    except ValueError as exc:
        return None, [finding("manifest.unreadable", _FILE, str(exc))]
    if isinstance(data, dict):
        missing = [key for key in REQUIRED_FIELDS if data.get(key) is None]
        if missing:
            return None, [finding("manifest.required", _FILE, "required field is missing", field=k) for k in missing]
        version = data["ortf_version"]
        if isinstance(version, str) and version not in KNOWN_VERSIONS:
            return None, _version(version)  # the other rules are this version's, not that one's
    try:
        return Manifest.from_dict(data), []
    except FormatError as exc:
        return None, [finding("manifest.unreadable", _FILE, str(exc).removeprefix(f"{_FILE}: "))]


def check_manifest(manifest: Manifest, *, known_links: Collection[str] = ()) -> list[Finding]:
    """Every rule on the manifest alone; ``known_links`` are extra valid frame parents (URDF links)."""
    action_indices = [d.index for d in manifest.action_space.dimensions]
    return [
        *_version(manifest.ortf_version),
        *_indices("manifest.action_indices", "action_space.dimensions", action_indices),
        *_action_dimensions(manifest),
        *_indices("manifest.joint_indices", "robot.joints", [j.index for j in manifest.robot.joints]),
        *_joints(manifest),
        *_images(manifest),
        *_sensors(manifest),
        *_rotations(manifest),
        *_frames(manifest, known_links),
        *_stream_names(manifest),
        *_stream_tolerances(manifest),
        *_stream_files(manifest),
        *_unknown_intrinsics(manifest),
    ]


def _unknown_intrinsics(manifest: Manifest) -> list[Finding]:
    """A camera whose source recorded no calibration is declared so (``{"unknown": true}``),
    which ORTF accepts; but its frames cannot be related to 3D, which a user should hear."""
    return [
        finding(
            "manifest.intrinsics_unknown",
            _FILE,
            f"camera sensor {sensor.name!r} declares its intrinsics unknown: its frames cannot be related to 3D",
            field=f"sensors[{i}].intrinsics",
        )
        for i, sensor in enumerate(manifest.sensors)
        if sensor.is_camera and sensor.intrinsics_unknown
    ]


def _stream_files(manifest: Manifest) -> list[Finding]:
    try:
        _ = manifest.stream_files
    except FormatError as exc:
        return [finding("manifest.stream_files", layout.MANIFEST, str(exc).removeprefix("manifest: "))]
    return []


STREAM_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def _stream_names(manifest: Manifest) -> list[Finding]:
    """Stream names become file and column names, so they must be plain identifiers."""
    names = list(manifest.native_streams) + list(manifest.alignment.streams if manifest.alignment else ())
    return [
        finding("manifest.stream_names", layout.MANIFEST, f"stream name {name!r} must match {STREAM_NAME.pattern}")
        for name in names
        if not STREAM_NAME.match(name)
    ]


def _stream_tolerances(manifest: Manifest) -> list[Finding]:
    """Each stream's own sync tolerance (``alignment.tolerance_ms``) is of an aligned stream,
    not negative, and within the dataset's, which the spec defines as the loosest."""
    if manifest.alignment is None:
        return []
    found = []
    for name, ms in manifest.alignment.tolerance_ms.items():
        where = f"alignment.tolerance_ms.{name}"
        if name not in manifest.alignment.streams:
            found.append(
                finding("manifest.stream_tolerance", layout.MANIFEST, f"{name!r} is no aligned stream", field=where)
            )
        elif not 0 <= ms <= (manifest.sync_tolerance_ms if manifest.sync_tolerance_ms is not None else math.inf):
            message = f"{ms:g} ms is not between 0 and the dataset's sync_tolerance_ms ({manifest.sync_tolerance_ms})"
            found.append(finding("manifest.stream_tolerance", layout.MANIFEST, message, field=where))
    return found


def check_statistics(manifest: Manifest, episodes: int, steps: int, seconds: float) -> list[Finding]:
    """The manifest's totals against the episode index. A warning only: the writer updates
    the manifest after the index, so a crash in between leaves them one episode behind."""
    declared = manifest.statistics
    actual = {"total_episodes": episodes, "total_steps": steps, "total_duration_hours": seconds / 3600.0}
    return [
        finding(
            "manifest.statistics",
            _FILE,
            f"says {getattr(declared, key):.6g} but episodes.parquet gives {value:.6g}; "
            f"run `ortf recover` to refresh the totals",
            field=f"statistics.{key}",
        )
        for key, value in actual.items()
        if not math.isclose(getattr(declared, key), value, rel_tol=STATISTICS_TOLERANCE)
    ]


def _version(version: str) -> list[Finding]:
    if version in KNOWN_VERSIONS:
        return []
    message = (
        f"is {version!r}; this validator knows ORTF {' and '.join(KNOWN_VERSIONS)} "
        f"and cannot check a version it does not know"
    )
    return [finding("manifest.version", _FILE, message, field="ortf_version")]


def _action_dimensions(manifest: Manifest) -> list[Finding]:
    dimensions = manifest.action_space.dimensions
    names = [d.name for d in dimensions]
    types, units = ", ".join(ACTION_DIMENSION_TYPES), ", ".join(ACTION_DIMENSION_UNITS)
    return [
        *_unlisted("manifest.action_type", "type", names, [d.type for d in dimensions], ACTION_DIMENSION_TYPES,
                   f"; expected one of {types}"),
        *_unlisted("manifest.action_units", "units", names, [d.units for d in dimensions], ACTION_DIMENSION_UNITS,
                   f", which the spec does not list ({units})"),
    ]  # fmt: skip


def _unlisted(
    rule: str, key: str, names: Sequence[str], values: Sequence[str], listed: Sequence[str], explanation: str
) -> list[Finding]:
    """One finding per value of ``key`` that is not ``listed``, naming the dimensions that have it
    (at most NAMED_DIMENSIONS of them), so an imported arm's dozens of dimensions make one line."""
    positions: dict[str, list[int]] = {}
    for i, value in enumerate(values):
        if value not in listed:
            positions.setdefault(value, []).append(i)
    found = []
    for value, where in positions.items():
        named = ", ".join(repr(names[i]) for i in where[:NAMED_DIMENSIONS])
        if len(where) > NAMED_DIMENSIONS:
            named += f" and {len(where) - NAMED_DIMENSIONS} more"
        subject = f"dimension {named} has" if len(where) == 1 else f"dimensions {named} have"
        field = f"action_space.dimensions[{','.join(map(str, where))}].{key}"
        found.append(finding(rule, _FILE, f"{subject} {key} {value!r}{explanation}", field=field))
    return found


def _indices(rule: str, where: str, indices: Sequence[int]) -> list[Finding]:
    indices = sorted(indices)
    if indices == list(range(len(indices))):
        return []
    message = f"indices must be 0..{len(indices) - 1}, each exactly once; got {indices}"
    return [finding(rule, _FILE, message, field=where)]


def _joints(manifest: Manifest) -> list[Finding]:
    found = [
        finding(
            "manifest.joint_type",
            _FILE,
            f"joint {joint.name!r} has type {joint.type!r}; expected one of {', '.join(MOVABLE_JOINT_TYPES)}",
            field=f"robot.joints[{i}].type",
        )
        for i, joint in enumerate(manifest.robot.joints)
        if joint.type not in MOVABLE_JOINT_TYPES
    ]
    dof, joints = manifest.robot.dof, len(manifest.robot.joints)
    if dof is not None and joints and dof != joints:
        found.append(finding("manifest.dof", _FILE, f"is {dof} but {joints} joints are listed", field="robot.dof"))
    return found


def _images(manifest: Manifest) -> list[Finding]:
    found = []
    for key, name in manifest.observation_space.images.items():
        sensor = manifest.sensor(name)
        if sensor is None:
            problem = f"names sensor {name!r}, which is not declared in sensors"
        elif not sensor.is_camera:
            problem = f"names sensor {name!r} of type {sensor.type!r}; expected camera or depth_camera"
        else:
            continue
        found.append(finding("manifest.images", _FILE, problem, field=f"observation_space.images.{key}"))
    return found


def _sensors(manifest: Manifest) -> list[Finding]:
    counts = Counter(sensor.name for sensor in manifest.sensors)
    found = [
        finding("manifest.sensor_names", _FILE, f"sensor name {name!r} is used {n} times", field="sensors")
        for name, n in counts.items()
        if n > 1
    ]
    for i, sensor in enumerate(manifest.sensors):
        for key in REQUIRED_SENSOR_FIELDS.get(sensor.type, ()):
            if not sensor.has_field(key):
                message = f"{sensor.type} sensor {sensor.name!r} lacks required field {key!r}"
                found.append(finding("manifest.sensor_fields", _FILE, message, field=f"sensors[{i}].{key}"))
        if sensor.is_depth and sensor.encoding not in LOSSLESS_DEPTH_ENCODINGS:
            message = (
                f"depth sensor {sensor.name!r} has encoding {sensor.encoding!r}; 16-bit depth must be stored "
                f"losslessly: {' or '.join(LOSSLESS_DEPTH_ENCODINGS)}"
            )
            found.append(finding("manifest.depth_encoding", _FILE, message, field=f"sensors[{i}].encoding"))
    return found


def _transforms(manifest: Manifest) -> Iterator[tuple[str, Transform]]:
    for name, frame in manifest.frames.items():
        if frame.transform is not None:
            yield f"frames.{name}.transform.rotation", frame.transform
    for i, sensor in enumerate(manifest.sensors):
        if sensor.extrinsics is not None:
            yield f"sensors[{i}].extrinsics.rotation", sensor.extrinsics.transform


def _rotations(manifest: Manifest) -> list[Finding]:
    found = []
    for where, transform in _transforms(manifest):
        q = transform.rotation
        norm = math.sqrt(sum(v * v for v in q))
        if abs(norm - 1.0) > QUATERNION_TOLERANCE:
            message = f"{list(q)} has norm {norm:.6f}; expected a unit quaternion (w, x, y, z)"
            found.append(finding("manifest.quaternion", _FILE, message, field=where))
        # [0, 0, 0, 1] is a half turn about z in (w, x, y, z) but the identity in (x, y, z, w):
        # a legal value that is far more often an ordering mistake.
        if abs(q[0]) < 0.05 and abs(q[3]) > 0.95:
            message = f"{list(q)} looks like (x, y, z, w) order; ORTF rotations are (w, x, y, z)"
            found.append(finding("manifest.quaternion_order", _FILE, message, field=where))
    return found


def _frames(manifest: Manifest, known_links: Collection[str]) -> list[Finding]:
    """Frame parents: declared frames, the implicit world frame, or robot links (which the
    URDF, the end-effector link and sensor mount links name)."""
    known = {*manifest.frames, *IMPLICIT_FRAMES, *known_links, *(s.mount_link for s in manifest.sensors)}
    if manifest.robot.end_effector_link is not None:
        known.add(manifest.robot.end_effector_link)
    parents = [(f"frames.{name}.parent", frame.parent) for name, frame in manifest.frames.items()]
    parents += [
        (f"sensors[{i}].extrinsics.parent_frame", s.extrinsics.parent_frame)
        for i, s in enumerate(manifest.sensors)
        if s.extrinsics is not None
    ]
    found = [
        finding("manifest.frame_parent", _FILE, f"parent frame {parent!r} is not declared in frames", field=where)
        for where, parent in parents
        if parent is not None and parent not in known
    ]
    found += [
        finding(
            "manifest.frame_transform",
            _FILE,
            f"fixed frame {name!r} has parent {frame.parent!r} but no transform",
            field=f"frames.{name}.transform",
        )
        for name, frame in manifest.frames.items()
        if frame.type == "fixed" and frame.parent is not None and frame.transform is None
    ]
    return found
