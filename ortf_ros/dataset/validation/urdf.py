"""Rules tying the manifest's robot to its URDF.

The spec says manifest joint names MUST match the URDF; the reverse direction (a
movable URDF joint the manifest does not list) is only suspicious, since a dataset
may record a subset of the robot.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ortf_ros.dataset.validation.findings import Finding, finding
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.urdf import parse_urdf

_FIELD = "robot.urdf_path"


@dataclass(frozen=True)
class Urdf:
    joints: frozenset[str]
    # Joints that move on their own: movable and not a <mimic> of another joint.
    independent_joints: frozenset[str]
    links: frozenset[str]


def load_urdf(root: Path, manifest: Manifest) -> tuple[Urdf | None, list[Finding]]:
    """The URDF that ``robot.urdf_path`` names, or None with what is wrong."""
    path = manifest.robot.urdf_path
    if path is None:
        if (root / layout.URDF).exists():
            message = f"{layout.URDF} exists but robot.urdf_path does not reference it"
            return None, [finding("manifest.urdf_undeclared", layout.MANIFEST, message, field=_FIELD)]
        return None, []
    parts = PurePosixPath(path).parts
    if len(parts) < 2 or parts[0] != layout.ROBOT_DIR or ".." in parts:
        message = f"{path!r} must be a file in the {layout.ROBOT_DIR}/ directory"
        return None, [finding("manifest.urdf", layout.MANIFEST, message, field=_FIELD)]
    try:
        document = parse_urdf((root / path).read_bytes())
    except FileNotFoundError:
        return None, [finding("manifest.urdf", layout.MANIFEST, f"{path} does not exist", field=_FIELD)]
    except (ET.ParseError, OSError) as exc:
        return None, [finding("manifest.urdf", path, f"not readable XML: {exc}")]
    if document.tag != "robot":
        return None, [finding("manifest.urdf", path, f"root element is <{document.tag}>; a URDF has <robot>")]
    return Urdf(
        joints=frozenset(j.name or "" for j in document.joints),
        independent_joints=frozenset(j.name or "" for j in document.joints if j.independent),
        links=frozenset(link or "" for link in document.links),
    ), []


def check_urdf_joints(manifest: Manifest, urdf: Urdf) -> list[Finding]:
    path = manifest.robot.urdf_path or layout.URDF
    listed = {joint.name for joint in manifest.robot.joints}
    found = [
        finding("manifest.urdf_joints", layout.MANIFEST, f"{name!r} is not a joint of {path}", field="robot.joints")
        for name in sorted(listed - urdf.joints)
    ]
    gripper = manifest.robot.gripper or {}
    gripper_joints = gripper.get("joints", [])
    # The gripper's joints are declared under robot.gripper.joints, as converted datasets
    # list them: robot.joints indexes joint_positions, which holds the arm only.
    if isinstance(gripper_joints, list):
        found += [
            finding(
                "manifest.urdf_joints", layout.MANIFEST, f"{name!r} is not a joint of {path}", field="robot.gripper"
            )
            for name in sorted(set(map(str, gripper_joints)) - urdf.joints)
        ]
        listed |= set(map(str, gripper_joints))
    unlisted = sorted(urdf.independent_joints - listed)
    if unlisted:
        message = f"movable joints of {path} not listed in robot.joints or robot.gripper.joints: {', '.join(unlisted)}"
        found.append(finding("manifest.urdf_movable", layout.MANIFEST, message, field="robot.joints"))
    return found
