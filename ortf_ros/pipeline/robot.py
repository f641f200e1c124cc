"""The robot from its URDF: the manifest's ``robot`` and the meshes the URDF names.

``robot_from_urdf`` reads what a dataset needs from the URDF text (from
``/robot_description`` or ``--urdf``) without changing it: the URDF is stored byte for
byte as ``robot/robot.urdf``, and its ``package://`` mesh URIs are kept as they are.
``copy_meshes`` copies the mesh files it can find under ``robot/meshes/<pkg>/<path>``,
so a viewer that maps ``package://`` to ``robot/meshes/`` finds them, and reports the
ones it cannot find.

Joints: the movable ones (revolute, prismatic, continuous) in document order. Fixed,
floating and planar joints are not degrees of freedom a joint vector holds, and a
``<mimic>`` joint follows another one, so none of these is listed (``mimic_joints``
says which joint each mimic follows). Limits are the ``<limit lower upper>`` of the
URDF; continuous joints have none.

Gripper joints: given, or the movable joints whose name contains ``finger`` or
``gripper``. The arm's joints are the others; ``dof`` counts them.

End-effector link, when not given (the rule):
  1. leave out the gripper's moving links (every link below a gripper joint, or below a
     mimic of one, and links named like ``finger``), sensor links (named like ``camera``,
     ``optical``, ``sensor``, ``imu``, ``lidar``, ``laser``, ``scan``) and wheels
     (``wheel``, ``caster``). The link the gripper is mounted on stays a candidate, even
     when named ``gripper_link``;
  2. of the others, take the link with the most arm joints between it and the root, and
     of those the one with the longest chain of links (the last link rigidly attached
     after the arm's last joint: a hand or flange, or its TCP link); ties go to the link
     first in the document.
For a Panda that is ``panda_hand``; for a UR arm ``tool0``.
"""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import pairwise
from pathlib import Path, PurePosixPath

from ortf_ros.errors import RobotDescriptionError
from ortf_ros.format import layout
from ortf_ros.format.robot import Joint, Robot
from ortf_ros.format.text import read_text
from ortf_ros.format.urdf import PACKAGE_SCHEME, URDF_JOINT_TYPES, UrdfDocument, UrdfJoint, parse_urdf
from ortf_ros.io import atomic

_GRIPPER_WORDS = ("finger", "gripper")
_NOT_END_EFFECTOR = re.compile(r"finger|camera|optical|sensor|imu|lidar|laser|scan|wheel|caster", re.IGNORECASE)


@dataclass(frozen=True)
class UrdfRobot:
    """What a dataset takes from a URDF (see the module's docstring for the rules)."""

    name: str
    joints: tuple[Joint, ...]  # movable, non-mimic, in document order; index = position here
    gripper_joints: tuple[str, ...]  # in document order
    end_effector_link: str | None  # None only for a URDF with no link left by the rule
    links: tuple[str, ...]  # every <link>, in document order
    parents: Mapping[str, str]  # child link -> parent link, over every joint (fixed ones too)
    mesh_uris: tuple[str, ...]  # distinct package:// URIs of <mesh> and <texture>, in document order
    mimic_joints: Mapping[str, str] = field(default_factory=dict)  # mimic joint -> the joint it follows
    joint_of: Mapping[str, str] = field(default_factory=dict)  # child link -> the joint that moves it
    velocity_limits: Mapping[str, float] = field(default_factory=dict)  # movable joint -> <limit velocity>

    @property
    def arm_joints(self) -> tuple[Joint, ...]:
        """The movable joints that are not gripper joints, in document order."""
        gripper = set(self.gripper_joints)
        return tuple(j for j in self.joints if j.name not in gripper)

    def with_joints(self, names: Collection[str]) -> UrdfRobot:
        """The robot with only these of its movable joints (the ones a recording's joint
        states give: a controller's, say), in the URDF's order; links and the end effector
        as they are."""
        return replace(
            self,
            joints=tuple(j for j in self.joints if j.name in names),
            gripper_joints=tuple(n for n in self.gripper_joints if n in names),
        )

    @property
    def dof(self) -> int:
        return len(self.arm_joints)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def roots(self) -> tuple[str, ...]:
        """Links without a parent (a valid URDF has exactly one)."""
        return tuple(link for link in self.links if link not in self.parents)

    @property
    def root_link(self) -> str | None:
        """The URDF's root link (the first root, should there be several); None without links."""
        return self.roots[0] if self.roots else None

    def chain(self, link: str) -> list[str]:
        """The links from the root down to ``link`` (``[link]`` for a root or unknown link)."""
        chain = [link]
        while chain[-1] in self.parents:
            chain.append(self.parents[chain[-1]])
        return chain[::-1]

    @property
    def base_link(self) -> str | None:
        """The link the arm hangs from: the parent of the first movable joint on the way from
        the root to the end effector (``base_link`` under a fixed ``world`` link, say), where
        the end-effector pose is expressed."""
        if self.end_effector_link is None:
            return self.root_link
        movable = set(self.joint_names) | set(self.mimic_joints)
        chain = self.chain(self.end_effector_link)
        for parent, child in pairwise(chain):
            if self.joint_of.get(child) in movable:
                return parent
        return self.root_link

    def is_ancestor(self, ancestor: str, link: str) -> bool:
        """Whether ``ancestor`` is on the chain from the root to ``link`` (the link included)."""
        return ancestor in self.chain(link)

    def manifest_robot(self, *, urdf_path: str | None = layout.URDF, **fields: object) -> Robot:
        """The manifest's ``robot``: the arm's joints (index = position in joint_positions,
        as the spec's Panda example has it), ``dof``, the gripper's joints under
        ``gripper.joints`` and the end-effector link. ``fields`` sets other Robot fields
        (``type``, ``robot_class``, ``manufacturer``, ``gripper``...)."""
        joints = tuple(Joint(j.name, j.type, i, j.limits) for i, j in enumerate(self.arm_joints))
        gripper = {"joints": list(self.gripper_joints)} if self.gripper_joints else None
        values: dict[str, object] = {
            "name": self.name,
            "dof": self.dof,
            "urdf_path": urdf_path,
            "joints": joints,
            "gripper": gripper,
            "end_effector_link": self.end_effector_link,
            **fields,
        }
        return Robot(**values)  # type: ignore[arg-type]


def _float(text: str | None, what: str) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise RobotDescriptionError(f"{what}: expected a number, got {text!r}") from None


def _limits(joint: UrdfJoint, where: str) -> tuple[float, float] | None:
    if joint.type == "continuous" or joint.limit is None:
        return None
    lower = _float(joint.limit.get("lower"), f"{where}: limit lower")
    upper = _float(joint.limit.get("upper"), f"{where}: limit upper")
    if lower is None and upper is None:
        return None
    return (lower or 0.0, upper or 0.0)  # URDF: a missing bound is 0


def _velocity_limit(joint: UrdfJoint, where: str) -> float | None:
    """``<limit velocity>``, continuous joints included; None when absent."""
    return None if joint.limit is None else _float(joint.limit.get("velocity"), f"{where}: limit velocity")


def _parse(urdf_xml: str, source: str) -> UrdfDocument:
    try:
        document = parse_urdf(urdf_xml)
    except ET.ParseError as exc:
        raise RobotDescriptionError(f"{source}: the URDF is not valid XML ({exc})") from None
    if document.tag != "robot":
        raise RobotDescriptionError(f"{source}: the URDF's root element is <{document.tag}>, expected <robot>")
    return document


def _tree(document: UrdfDocument, source: str) -> tuple[tuple[str, ...], dict[str, str], dict[str, str]]:
    """(links, child -> parent link, child link -> joint name), checked to form a forest."""
    links: list[str] = []
    for name in document.links:
        if not name:
            raise RobotDescriptionError(f"{source}: a <link> has no name")
        if name in links:
            raise RobotDescriptionError(f"{source}: link {name!r} is defined twice")
        links.append(name)
    known = set(links)
    parents: dict[str, str] = {}
    joint_of: dict[str, str] = {}
    for joint in document.joints:
        name = joint.name or ""
        where = f"{source}: joint {name!r}"
        parent, child = joint.parent, joint.child
        if not parent or not child:
            raise RobotDescriptionError(f"{where}: needs <parent link=...> and <child link=...>")
        for end in (parent, child):
            if end not in known:
                raise RobotDescriptionError(f"{where}: {end!r} is not a <link> of the URDF")
        if child in joint_of:
            raise RobotDescriptionError(f"{where}: link {child!r} is already the child of joint {joint_of[child]!r}")
        parents[child] = parent
        joint_of[child] = name
    for start in links:
        seen = {start}
        current = start
        while current in parents:
            current = parents[current]
            if current in seen:
                raise RobotDescriptionError(f"{source}: the joints form a loop through link {start!r}")
            seen.add(current)
    return tuple(links), parents, joint_of


def _pick_end_effector(
    links: Sequence[str], parents: Mapping[str, str], joint_of: Mapping[str, str], arm: set[str], gripper: set[str]
) -> str | None:
    def chain(link: str) -> list[str]:
        found = [link]
        while found[-1] in parents:
            found.append(parents[found[-1]])
        return found

    best: tuple[int, int] | None = None
    chosen = None
    for link in links:  # document order: the first of equals wins
        path = chain(link)
        joints = [joint_of[c] for c in path if c in joint_of]
        if _NOT_END_EFFECTOR.search(link) or any(j in gripper for j in joints):
            continue
        score = (sum(1 for j in joints if j in arm), len(path))
        if best is None or score > best:
            best, chosen = score, link
    return chosen


def robot_from_urdf(
    urdf_xml: str,
    *,
    end_effector_link: str | None = None,
    gripper_joints: Collection[str] = (),
    source: str = "URDF",
) -> UrdfRobot:
    """Read the robot from URDF text; ``source`` names it in errors (a file, a topic).

    ``gripper_joints`` (when given) must be movable joints of the URDF; a mimic joint
    among them is dropped (it follows another joint). ``end_effector_link`` (when given)
    must be a link of the URDF.
    """
    document = _parse(urdf_xml, source)
    name = document.name
    if not name:
        raise RobotDescriptionError(f"{source}: <robot> has no name")
    links, parents, joint_of = _tree(document, source)

    movable: list[Joint] = []
    mimics: dict[str, str] = {}
    velocities: dict[str, float] = {}
    seen: set[str] = set()
    for joint in document.joints:
        joint_name, kind = joint.name, joint.type
        if not joint_name:
            raise RobotDescriptionError(f"{source}: a <joint> has no name")
        where = f"{source}: joint {joint_name!r}"
        if joint_name in seen:
            raise RobotDescriptionError(f"{where}: defined twice")
        seen.add(joint_name)
        if kind not in URDF_JOINT_TYPES:
            raise RobotDescriptionError(f"{where}: type {kind!r}, expected one of {', '.join(URDF_JOINT_TYPES)}")
        if not joint.movable:
            continue
        if joint.mimic is not None:
            mimics[joint_name] = joint.mimic
            continue
        movable.append(Joint(joint_name, kind, len(movable), _limits(joint, where)))
        velocity = _velocity_limit(joint, where)
        if velocity is not None:
            velocities[joint_name] = velocity

    names = [j.name for j in movable]
    if gripper_joints:
        wanted = set(gripper_joints)
        for given in sorted(wanted - set(names) - set(mimics)):
            reason = "is a fixed, floating or planar joint" if given in seen else "is not a joint"
            raise RobotDescriptionError(
                f"{source}: gripper joint {given!r} {reason} of the URDF (movable: {', '.join(names)})"
            )
        gripper = tuple(n for n in names if n in wanted)
    else:
        gripper = tuple(n for n in names if any(word in n.lower() for word in _GRIPPER_WORDS))

    if end_effector_link is not None:
        if end_effector_link not in links:
            raise RobotDescriptionError(f"{source}: end-effector link {end_effector_link!r} is not a link of the URDF")
        effector: str | None = end_effector_link
    else:
        arm = set(names) - set(gripper)
        # Below a gripper joint, or a mimic of one, is the gripper.
        gripper_like = set(gripper) | {m for m, target in mimics.items() if target in gripper}
        effector = _pick_end_effector(links, parents, joint_of, arm, gripper_like)
    return UrdfRobot(
        name=name,
        joints=tuple(movable),
        gripper_joints=gripper,
        end_effector_link=effector,
        links=links,
        parents=parents,
        mesh_uris=document.mesh_uris,
        mimic_joints=mimics,
        joint_of=joint_of,
        velocity_limits=velocities,
    )


# ---------------------------------------------------------------- meshes


@dataclass(frozen=True)
class CopiedMesh:
    uri: str
    source: Path
    dest: Path


@dataclass(frozen=True)
class MeshReport:
    copied: tuple[CopiedMesh, ...] = ()
    missing: tuple[str, ...] = ()  # well-formed URIs no search directory holds
    invalid: tuple[str, ...] = ()  # not package://PKG/PATH, or a PATH that leaves the package (..)

    @property
    def complete(self) -> bool:
        return not self.missing and not self.invalid


def split_package_uri(uri: str) -> tuple[str, PurePosixPath] | None:
    """``package://pkg/a/b.stl`` -> ``("pkg", a/b.stl)``; None for anything else or a path
    that would leave the package."""
    if not uri.startswith(PACKAGE_SCHEME):
        return None
    package, _, rest = uri[len(PACKAGE_SCHEME) :].partition("/")
    rel = PurePosixPath(rest)
    if not package or package in (".", "..") or "\\" in uri or not rest or rel.is_absolute():
        return None
    if any(part in ("..", ".") for part in rest.split("/")) or "" in rest.split("/"):
        return None
    return package, rel


class _PackageIndex:
    """Package names of ``<dir>/package.xml`` and ``<dir>/*/package.xml``, read once."""

    def __init__(self) -> None:
        self._names: dict[Path, str | None] = {}

    def name(self, directory: Path) -> str | None:
        if directory not in self._names:
            name = None
            try:
                element = ET.parse(directory / "package.xml").getroot().find("name")
                name = element.text.strip() if element is not None and element.text else None
            except (OSError, ET.ParseError):
                pass
            self._names[directory] = name
        return self._names[directory]

    def packages_under(self, directory: Path) -> list[Path]:
        try:
            children = sorted(p for p in directory.iterdir() if p.is_dir())
        except OSError:
            return []
        return [c for c in children if (c / "package.xml").is_file()]


def _resolve(package: str, rel: PurePosixPath, search: Sequence[Path], index: _PackageIndex) -> Path | None:
    for directory in search:
        candidates = [directory / package / rel, directory / "share" / package / rel]
        candidates += [sub / rel for sub in index.packages_under(directory) if index.name(sub) == package]
        own = index.name(directory)
        if own is None or own == package:
            candidates.append(directory / rel)
        for candidate in candidates:
            if candidate.is_file():
                return candidate
    return None


def _copy(source: Path, target: Path) -> None:
    shutil.copyfile(source, target)


def copy_meshes(uris: Sequence[str], mesh_path: Sequence[Path], dest: Path) -> MeshReport:
    """Copy the files of ``package://PKG/PATH`` URIs to ``dest/PKG/PATH``.

    Each search directory ``D`` of ``mesh_path`` is tried in order, and in it:
    ``D/PKG/PATH`` (a source or share tree), ``D/share/PKG/PATH`` (an install tree),
    ``S/PATH`` for a ``D/S/package.xml`` whose name is PKG (a workspace ``src`` whose
    folder names differ from the package names), and ``D/PATH`` (``D`` is the package
    itself; skipped when ``D/package.xml`` names another package). Files are replaced
    atomically; nothing else is written.
    """
    copied: list[CopiedMesh] = []
    missing: list[str] = []
    invalid: list[str] = []
    index = _PackageIndex()
    search = [Path(d) for d in mesh_path]
    for uri in dict.fromkeys(uris):
        parts = split_package_uri(uri)
        if parts is None:
            invalid.append(uri)
            continue
        package, rel = parts
        found = _resolve(package, rel, search, index)
        if found is None:
            missing.append(uri)
            continue
        target = dest / package / rel
        try:
            atomic.write_with(target, partial(_copy, found))
        except OSError as exc:
            raise RobotDescriptionError(f"{found}: cannot copy the mesh to {target} ({exc.strerror or exc})") from None
        copied.append(CopiedMesh(uri, found, target))
    return MeshReport(tuple(copied), tuple(missing), tuple(invalid))


def read_urdf(path: Path) -> str:
    """A URDF file's text; an empty file or one that is not text is a RobotDescriptionError
    naming it (an empty one would otherwise read as "no URDF given")."""
    text = read_text(path)
    if not text.strip():
        raise RobotDescriptionError(f"{path}: empty; expected a URDF (XML) file")
    return text
