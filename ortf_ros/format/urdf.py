"""A URDF read once, as the elements a dataset uses: its links, its joints (type, parent
and child link, the joint a ``<mimic>`` follows, the ``<limit>``) and the ``package://``
URIs of its meshes.

Two readers build on it: the converter, which derives the manifest's robot from the
URDF and refuses one that is not a tree (``pipeline.robot``), and the validator, which
checks a stored ``robot/robot.urdf`` against the manifest and reports what it finds
(``dataset.validation.urdf``). This module judges nothing: names and types are as
written (None where an attribute is missing), and each reader words its own findings.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass

MOVABLE_JOINT_TYPES = ("revolute", "prismatic", "continuous")
"""The joint types a joint vector holds (and the manifest's ``robot.joints`` lists)."""
URDF_JOINT_TYPES = (*MOVABLE_JOINT_TYPES, "fixed", "floating", "planar")
PACKAGE_SCHEME = "package://"


@dataclass(frozen=True)
class UrdfJoint:
    name: str | None
    type: str | None
    parent: str | None
    """The ``link`` of ``<parent>``."""
    child: str | None
    mimic: str | None
    """The joint a ``<mimic>`` follows ("" when it names none); None for a joint that is no mimic."""
    limit: Mapping[str, str] | None
    """The attributes of ``<limit>`` (``lower``, ``upper``, ``velocity``...); None without one."""

    @property
    def movable(self) -> bool:
        return self.type in MOVABLE_JOINT_TYPES

    @property
    def independent(self) -> bool:
        """Movable on its own: movable and not a ``<mimic>`` of another joint."""
        return self.movable and self.mimic is None


@dataclass(frozen=True)
class UrdfDocument:
    tag: str
    """The root element's tag: ``robot`` for a URDF (the readers refuse anything else)."""
    name: str | None
    links: tuple[str | None, ...]
    """The ``<link>`` names, in document order."""
    joints: tuple[UrdfJoint, ...]
    """The ``<joint>`` children of the root, in document order (not the ``<joint>`` of a ``<transmission>``)."""
    mesh_uris: tuple[str, ...]
    """The distinct ``package://`` URIs of ``<mesh>`` and ``<texture>``, in document order."""


def _joint(element: ET.Element) -> UrdfJoint:
    parent, child = element.find("parent"), element.find("child")
    mimic, limit = element.find("mimic"), element.find("limit")
    return UrdfJoint(
        name=element.get("name"),
        type=element.get("type"),
        parent=parent.get("link") if parent is not None else None,
        child=child.get("link") if child is not None else None,
        mimic=mimic.get("joint", "") if mimic is not None else None,
        limit=dict(limit.attrib) if limit is not None else None,
    )


def parse_urdf(xml: str | bytes) -> UrdfDocument:
    """The URDF ``xml`` (text, or bytes that may declare their encoding); ET.ParseError
    when it is not XML."""
    root = ET.fromstring(xml)
    uris = [
        element.get("filename", "").strip()
        for element in root.iter()
        if element.tag in ("mesh", "texture") and element.get("filename", "").strip().startswith(PACKAGE_SCHEME)
    ]
    return UrdfDocument(
        tag=root.tag,
        name=root.get("name"),
        links=tuple(link.get("name") for link in root.findall("link")),
        joints=tuple(_joint(joint) for joint in root.findall("joint")),  # direct children only
        mesh_uris=tuple(dict.fromkeys(uris)),
    )
