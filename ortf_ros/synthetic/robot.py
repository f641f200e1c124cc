"""The synthetic robots' descriptions: one URDF generator, and the teleop arm's joints.

Both synthetic robots are serial arms of seven revolute joints: the teleop scene's
(``teleop_urdf``: with a hand, two fingers and the cameras, published on
``/robot_description``) and the demo dataset's (``demo_arm.demo_urdf``). One generator
writes both, so a change to how a joint is written reaches every test that parses
either. The text is exact (numbers as written here), since tests compare what a
converter or the recorder stored with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ortf_ros.synthetic.tf import (
    BASE_LINK,
    HAND,
    OVERHEAD_CAMERA_FRAME,
    SIDE_CAMERA_FRAME,
    WORLD,
    WRIST_CAMERA_FRAME,
    static_frames,
)

ROBOT_NAME = "ortf_teleop_arm"
ARM_JOINTS = tuple(f"arm_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("finger_joint1", "finger_joint2")
JOINTS = ARM_JOINTS + FINGER_JOINTS  # the URDF's order
ARM_LIMIT = 2.8
FINGER_LIMIT = 0.04


@dataclass(frozen=True)
class UrdfJoint:
    """One ``<joint>``; ``origin``, ``axis`` and ``limit`` are the attributes of those
    elements as written (None: no such element)."""

    name: str
    type: str
    parent: str
    child: str
    origin: str | None = None
    axis: str | None = None
    limit: str | None = None

    def element(self) -> str:
        lines = [
            f'  <joint name="{self.name}" type="{self.type}">',
            f'    <parent link="{self.parent}"/><child link="{self.child}"/>',
        ]
        if self.origin is not None:
            axis = "" if self.axis is None else f'<axis xyz="{self.axis}"/>'
            lines.append(f"    <origin {self.origin}/>{axis}")
        if self.limit is not None:
            lines.append(f"    <limit {self.limit}/>")
        return "\n".join([*lines, "  </joint>"])


def urdf(robot: str, links: Sequence[str], joints: Sequence[UrdfJoint]) -> str:
    """The URDF of ``robot``: its links, then its joints."""
    body = "\n".join([*(f'  <link name="{name}"/>' for name in links), *(joint.element() for joint in joints)])
    return f'<?xml version="1.0"?>\n<robot name="{robot}">\n{body}\n</robot>\n'


def revolute_chain(
    names: Sequence[str], links: Sequence[str], parent: str, limit: float, first_z: float = 0.1
) -> list[UrdfJoint]:
    """Joints ``names`` in a chain from ``parent`` through ``links``: revolute about z, each
    0.1 m above the last (the first ``first_z`` above ``parent``), within +-``limit``."""
    joints = []
    for i, (name, child) in enumerate(zip(names, links, strict=True)):
        origin = f'xyz="0 0 {first_z if i == 0 else 0.1}" rpy="0 0 0"'
        bounds = f'lower="{-limit}" upper="{limit}" effort="87" velocity="2.1"'
        joints.append(UrdfJoint(name, "revolute", parent, child, origin, "0 0 1", bounds))
        parent = child
    return joints


def _origin(xyz: tuple[float, float, float], rpy: tuple[float, float, float]) -> str:
    return f'xyz="{xyz[0]:.17g} {xyz[1]:.17g} {xyz[2]:.17g}" rpy="{rpy[0]:.17g} {rpy[1]:.17g} {rpy[2]:.17g}"'


def teleop_urdf(side_camera: bool = False) -> str:
    """URDF of the arm: world -> base_link -> arm_link1..7 -> hand -> two fingers, and the cameras."""
    arm_links = [f"arm_link{i}" for i in range(1, 8)]
    links = [WORLD, BASE_LINK, *arm_links, HAND, "left_finger", "right_finger"]
    links += [WRIST_CAMERA_FRAME, OVERHEAD_CAMERA_FRAME]
    links += [SIDE_CAMERA_FRAME] if side_camera else []
    static = {(p, c): (xyz, rpy) for p, c, xyz, rpy in static_frames(side_camera)}

    def fixed(name: str, parent: str, child: str) -> UrdfJoint:
        return UrdfJoint(name, "fixed", parent, child, _origin(*static[(parent, child)]))

    joints = [fixed("world_joint", WORLD, BASE_LINK)]
    joints += revolute_chain(ARM_JOINTS, arm_links, BASE_LINK, ARM_LIMIT, first_z=0.333)
    joints.append(UrdfJoint("hand_joint", "fixed", arm_links[-1], HAND, 'xyz="0 0 0.107" rpy="0 0 0"'))
    for name, child, axis in (("finger_joint1", "left_finger", "0 1 0"), ("finger_joint2", "right_finger", "0 -1 0")):
        limit = f'lower="0" upper="{FINGER_LIMIT}" effort="20" velocity="0.2"'
        joints.append(UrdfJoint(name, "prismatic", HAND, child, 'xyz="0 0 0.0584" rpy="0 0 0"', axis, limit))
    joints.append(fixed("wrist_camera_joint", HAND, WRIST_CAMERA_FRAME))
    joints.append(fixed("overhead_camera_joint", WORLD, OVERHEAD_CAMERA_FRAME))
    if side_camera:
        joints.append(fixed("side_camera_joint", WORLD, SIDE_CAMERA_FRAME))
    return urdf(ROBOT_NAME, links, joints)
