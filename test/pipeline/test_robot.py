"""URDF -> the manifest's robot, and the package:// meshes copied beside it."""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath

import pytest

from ortf_ros.errors import ConversionError
from ortf_ros.format.robot import Joint, Robot
from ortf_ros.pipeline.robot import copy_meshes, robot_from_urdf, split_package_uri
from ortf_ros.synthetic.robot import teleop_urdf

PANDA_DIR = Path(__file__).resolve().parent / "resources" / "moveit__moveit_resources"
PANDA_PACKAGE = PANDA_DIR / "panda_description"
PANDA_URDF = PANDA_PACKAGE / "urdf" / "panda.urdf"
PANDA_PKG = "moveit_resources_panda_description"
PANDA_ARM = tuple(f"panda_joint{i}" for i in range(1, 8))

# Every joint type, a mimic joint, a <transmission> naming a joint, a camera chain deeper
# than the tool, a gripper joint whose links are not named like a gripper.
MIXED = """<?xml version="1.0"?>
<robot name="mixed">
  <link name="base"/><link name="link1"/><link name="link2"/><link name="flange"/><link name="tool0"/>
  <link name="camera_link"/><link name="camera_optical_frame"/><link name="camera_depth_frame"/>
  <link name="jaw_left"/><link name="jaw_left_tip"/><link name="jaw_right"/>
  <link name="free_body"/><link name="slider"/>
  <joint name="j1" type="continuous">
    <parent link="base"/><child link="link1"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
  <joint name="j2" type="prismatic">
    <parent link="link1"/><child link="link2"/><limit lower="-0.1" upper="0.2" effort="10" velocity="1"/>
  </joint>
  <joint name="flange_joint" type="fixed"><parent link="link2"/><child link="flange"/></joint>
  <joint name="tool_joint" type="fixed"><parent link="flange"/><child link="tool0"/></joint>
  <joint name="camera_joint" type="fixed"><parent link="link2"/><child link="camera_link"/></joint>
  <joint name="camera_optical_joint" type="fixed">
    <parent link="camera_link"/><child link="camera_optical_frame"/>
  </joint>
  <joint name="camera_depth_joint" type="fixed">
    <parent link="camera_optical_frame"/><child link="camera_depth_frame"/>
  </joint>
  <joint name="gripper_joint" type="revolute">
    <parent link="flange"/><child link="jaw_left"/><limit upper="0.8" effort="1" velocity="1"/>
  </joint>
  <joint name="jaw_tip_joint" type="fixed"><parent link="jaw_left"/><child link="jaw_left_tip"/></joint>
  <joint name="gripper_mimic_joint" type="revolute">
    <parent link="flange"/><child link="jaw_right"/><limit lower="-0.8" upper="0" effort="1" velocity="1"/>
    <mimic joint="gripper_joint" multiplier="-1"/>
  </joint>
  <joint name="free_joint" type="floating"><parent link="base"/><child link="free_body"/></joint>
  <joint name="planar_joint" type="planar"><parent link="base"/><child link="slider"/></joint>
  <transmission name="t1"><joint name="j1"/><actuator name="m1"/></transmission>
</robot>
"""

MOBILE = """<robot name="mobile">
  <link name="base_footprint"/><link name="base_link"/><link name="wheel_left_link"/><link name="wheel_right_link"/>
  <link name="caster_link"/><link name="laser_link"/>
  <link name="arm_link1"/><link name="arm_link2"/><link name="gripper_link"/><link name="left_finger_link"/>
  <joint name="base_joint" type="fixed"><parent link="base_footprint"/><child link="base_link"/></joint>
  <joint name="wheel_left_joint" type="continuous"><parent link="base_link"/><child link="wheel_left_link"/></joint>
  <joint name="wheel_right_joint" type="continuous"><parent link="base_link"/><child link="wheel_right_link"/></joint>
  <joint name="caster_joint" type="fixed"><parent link="base_link"/><child link="caster_link"/></joint>
  <joint name="laser_joint" type="fixed"><parent link="base_link"/><child link="laser_link"/></joint>
  <joint name="arm_joint1" type="revolute">
    <parent link="base_link"/><child link="arm_link1"/><limit lower="-3" upper="3" effort="1" velocity="1"/>
  </joint>
  <joint name="arm_joint2" type="revolute">
    <parent link="arm_link1"/><child link="arm_link2"/><limit lower="-2" upper="2" effort="1" velocity="1"/>
  </joint>
  <joint name="gripper_mount" type="fixed"><parent link="arm_link2"/><child link="gripper_link"/></joint>
  <joint name="left_finger_joint" type="prismatic">
    <parent link="gripper_link"/><child link="left_finger_link"/><limit lower="0" upper="0.05" effort="1" velocity="1"/>
  </joint>
</robot>
"""


def _urdf(body: str, name: str = "r") -> str:
    return f'<robot name="{name}">{body}</robot>'


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- the Panda (moveit_resources)


def test_panda_joints_gripper_and_end_effector() -> None:
    robot = robot_from_urdf(PANDA_URDF.read_text(), source=str(PANDA_URDF))
    assert robot.name == "panda"
    # panda_finger_joint2 mimics panda_finger_joint1: not a joint of its own
    assert robot.joint_names == (*PANDA_ARM, "panda_finger_joint1")
    assert robot.mimic_joints == {"panda_finger_joint2": "panda_finger_joint1"}
    assert [j.index for j in robot.joints] == list(range(8))
    assert robot.joints[3] == Joint("panda_joint4", "revolute", 3, (-3.1416, 0.0873))
    assert robot.joints[7] == Joint("panda_finger_joint1", "prismatic", 7, (0.0, 0.04))
    assert robot.gripper_joints == ("panda_finger_joint1",)
    assert robot.dof == 7 and tuple(j.name for j in robot.arm_joints) == PANDA_ARM
    assert robot.end_effector_link == "panda_hand"  # as in the spec's Panda example
    assert robot.roots == ("panda_link0",) and robot.root_link == "panda_link0"
    assert robot.parents["panda_hand"] == "panda_link8"
    assert robot.chain("panda_leftfinger")[:2] == ["panda_link0", "panda_link1"]
    assert robot.chain("panda_leftfinger")[-3:] == ["panda_link8", "panda_hand", "panda_leftfinger"]
    assert len(robot.links) == 12


def test_panda_manifest_robot_is_the_specs_shape() -> None:
    robot = robot_from_urdf(PANDA_URDF.read_text()).manifest_robot(type="manipulator", robot_class="arm")
    assert robot == Robot(
        name="panda",
        type="manipulator",
        robot_class="arm",
        dof=7,
        urdf_path="robot/robot.urdf",
        joints=robot.joints,
        gripper={"joints": ["panda_finger_joint1"]},
        end_effector_link="panda_hand",
    )
    assert [(j.name, j.index) for j in robot.joints] == [(name, i) for i, name in enumerate(PANDA_ARM)]
    assert robot.to_dict()["joints"][3] == {
        "name": "panda_joint4",
        "type": "revolute",
        "index": 3,
        "limits": [-3.1416, 0.0873],
    }


def test_panda_mesh_uris_in_document_order() -> None:
    robot = robot_from_urdf(PANDA_URDF.read_text())
    assert len(robot.mesh_uris) == 20  # finger.dae/.stl are used twice, listed once
    assert robot.mesh_uris[:2] == (
        f"package://{PANDA_PKG}/meshes/visual/link0.dae",
        f"package://{PANDA_PKG}/meshes/collision/link0.stl",
    )


SEARCHES = {
    "package": [PANDA_PACKAGE],  # the package's own folder: D/PATH
    "workspace": [PANDA_DIR],  # a folder of packages: D/S/package.xml names the package
    "second": [Path("/nonexistent"), PANDA_DIR],  # the first folder that has it
}


@pytest.mark.parametrize("search", SEARCHES)
def test_panda_collision_meshes_copied_visual_ones_missing(search: str, tmp_path: Path) -> None:
    urdf = PANDA_URDF.read_text()
    robot = robot_from_urdf(urdf)
    report = copy_meshes(robot.mesh_uris, SEARCHES[search], tmp_path / "meshes")
    stl = [u for u in robot.mesh_uris if u.endswith(".stl")]
    assert [c.uri for c in report.copied] == stl
    assert report.missing == tuple(u for u in robot.mesh_uris if u.endswith(".dae"))  # absent on purpose
    assert report.invalid == () and not report.complete
    for copied in report.copied:
        rel = copied.uri.removeprefix(f"package://{PANDA_PKG}/")
        assert copied.dest == tmp_path / "meshes" / PANDA_PKG / rel
        assert _sha(copied.dest) == _sha(PANDA_PACKAGE / rel)
    assert sorted(p.name for p in (tmp_path / "meshes" / PANDA_PKG / "meshes" / "collision").iterdir()) == sorted(
        Path(u).name for u in stl
    )
    assert PANDA_URDF.read_text() == urdf  # nothing rewritten


def test_a_folder_whose_package_xml_names_another_package_is_not_searched_by_path(tmp_path: Path) -> None:
    other = tmp_path / "other_pkg"
    (other / "meshes").mkdir(parents=True)
    (other / "package.xml").write_text("<package><name>other_pkg</name></package>")
    (other / "meshes" / "a.stl").write_bytes(b"other")
    report = copy_meshes(["package://wanted_pkg/meshes/a.stl"], [other], tmp_path / "out")
    assert report.missing == ("package://wanted_pkg/meshes/a.stl",) and report.copied == ()
    # the share/ layout of an install tree
    share = tmp_path / "install" / "share" / "wanted_pkg" / "meshes"
    share.mkdir(parents=True)
    (share / "a.stl").write_bytes(b"wanted")
    report = copy_meshes(["package://wanted_pkg/meshes/a.stl"], [other, tmp_path / "install"], tmp_path / "out")
    assert report.complete and (tmp_path / "out" / "wanted_pkg" / "meshes" / "a.stl").read_bytes() == b"wanted"


@pytest.mark.parametrize(
    "uri",
    [
        "package://pkg/../../etc/passwd",
        "package://pkg/meshes/../x.stl",
        "package://../x.stl",
        "package:///abs.stl",
        "package://pkg",
        "package://pkg/",
        "package://pkg//x.stl",
        "file:///tmp/x.stl",
        "meshes/x.stl",
    ],
)
def test_uris_that_would_leave_the_package_are_invalid(uri: str, tmp_path: Path) -> None:
    assert split_package_uri(uri) is None
    report = copy_meshes([uri], [tmp_path], tmp_path / "out")
    assert report.invalid == (uri,) and report.copied == () and report.missing == ()
    assert not (tmp_path / "out").exists()


def test_split_package_uri() -> None:
    assert split_package_uri("package://pkg/meshes/a b.stl") == ("pkg", PurePosixPath("meshes/a b.stl"))


# ---------------------------------------------------------------- hand-written URDFs


def test_every_joint_type_mimic_and_transmission() -> None:
    robot = robot_from_urdf(MIXED)
    assert robot.joints == (
        Joint("j1", "continuous", 0, None),  # continuous: no limits, even with a <limit>
        Joint("j2", "prismatic", 1, (-0.1, 0.2)),
        Joint("gripper_joint", "revolute", 2, (0.0, 0.8)),  # a missing bound is 0
    )
    assert robot.mimic_joints == {"gripper_mimic_joint": "gripper_joint"}
    assert robot.gripper_joints == ("gripper_joint",) and robot.dof == 2
    # the camera chain is deeper, the jaw tip too (below the gripper joint): the tool wins
    assert robot.end_effector_link == "tool0"
    assert robot.parents["free_body"] == "base" and robot.parents["camera_depth_frame"] == "camera_optical_frame"
    assert robot.roots == ("base",) and robot.mesh_uris == ()


def test_mobile_manipulator_end_effector_is_on_the_arm() -> None:
    robot = robot_from_urdf(MOBILE)
    assert robot.joint_names == (
        "wheel_left_joint",
        "wheel_right_joint",
        "arm_joint1",
        "arm_joint2",
        "left_finger_joint",
    )
    assert robot.gripper_joints == ("left_finger_joint",)
    assert robot.dof == 4  # the wheels are joints of the robot too
    assert robot.end_effector_link == "gripper_link"  # the gripper's mount; its finger is not


def test_synthetic_teleop_robot() -> None:
    robot = robot_from_urdf(teleop_urdf())
    assert robot.dof == 7 and robot.gripper_joints == ("finger_joint1", "finger_joint2")
    assert robot.end_effector_link == "hand"  # not the wrist camera's optical frame below it


def test_given_gripper_joints_and_end_effector() -> None:
    robot = robot_from_urdf(MIXED, gripper_joints=["gripper_mimic_joint", "j2"], end_effector_link="flange")
    assert robot.gripper_joints == ("j2",)  # document order; a mimic joint is dropped
    assert robot.dof == 2 and robot.end_effector_link == "flange"
    auto = robot_from_urdf(MIXED, gripper_joints=["j2"])
    assert auto.end_effector_link == "link1"  # link2 and below hang from the gripper joint now


@pytest.mark.parametrize(
    ("urdf", "kwargs", "message"),
    [
        ("<robot name='r'>", {}, r"^/robot_description: the URDF is not valid XML \(no element found: line 1"),
        ("", {}, r"^/robot_description: the URDF is not valid XML"),
        ("<sdf version='1.6'/>", {}, r"^/robot_description: the URDF's root element is <sdf>, expected <robot>$"),
        ("<robot/>", {}, r"^/robot_description: <robot> has no name$"),
        (_urdf("<link name='a'/><link name='a'/>"), {}, r"link 'a' is defined twice$"),
        (
            _urdf("<link name='a'/><joint name='j' type='fixed'><parent link='a'/><child link='b'/></joint>"),
            {},
            r"^/robot_description: joint 'j': 'b' is not a <link> of the URDF$",
        ),
        (
            _urdf("<link name='a'/><joint name='j' type='fixed'><parent link='a'/></joint>"),
            {},
            r"joint 'j': needs <parent link=...> and <child link=...>$",
        ),
        (
            _urdf(
                "<link name='a'/><link name='b'/><link name='c'/>"
                "<joint name='j1' type='fixed'><parent link='a'/><child link='c'/></joint>"
                "<joint name='j2' type='fixed'><parent link='b'/><child link='c'/></joint>"
            ),
            {},
            r"joint 'j2': link 'c' is already the child of joint 'j1'$",
        ),
        (
            _urdf(
                "<link name='a'/><link name='b'/>"
                "<joint name='j1' type='fixed'><parent link='a'/><child link='b'/></joint>"
                "<joint name='j2' type='fixed'><parent link='b'/><child link='a'/></joint>"
            ),
            {},
            r"the joints form a loop through link 'a'$",
        ),
        (
            _urdf(
                "<link name='a'/><link name='b'/><link name='c'/>"
                "<joint name='j' type='fixed'><parent link='a'/><child link='b'/></joint>"
                "<joint name='j' type='fixed'><parent link='b'/><child link='c'/></joint>"
            ),
            {},
            r"joint 'j': defined twice$",
        ),
        (
            _urdf(
                "<link name='a'/><link name='b'/>"
                "<joint name='j' type='ball'><parent link='a'/><child link='b'/></joint>"
            ),
            {},
            r"joint 'j': type 'ball', expected one of revolute, prismatic, continuous, fixed, floating, planar$",
        ),
        (
            _urdf(
                "<link name='a'/><link name='b'/><joint name='j' type='revolute'>"
                "<parent link='a'/><child link='b'/><limit lower='-1' upper='1.5rad'/></joint>"
            ),
            {},
            r"joint 'j': limit upper: expected a number, got '1.5rad'$",
        ),
        (MIXED, {"gripper_joints": ["nope"]}, r"gripper joint 'nope' is not a joint of the URDF \(movable: j1, j2, "),
        (MIXED, {"gripper_joints": ["tool_joint"]}, r"gripper joint 'tool_joint' is a fixed, floating or planar"),
        (MIXED, {"end_effector_link": "hand"}, r"^/robot_description: end-effector link 'hand' is not a link of"),
    ],
)
def test_bad_urdf_is_one_line_naming_the_source(urdf: str, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConversionError, match=message) as info:
        robot_from_urdf(urdf, source="/robot_description", **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_a_urdf_with_no_links_has_no_end_effector() -> None:
    robot = robot_from_urdf(_urdf(""))
    assert robot.joints == () and robot.end_effector_link is None and robot.dof == 0 and robot.root_link is None
    assert robot.manifest_robot(urdf_path=None) == Robot(name="r", dof=0)


def test_base_link_is_where_the_arm_hangs_from_not_the_world_root() -> None:
    robot = robot_from_urdf(teleop_urdf())
    assert robot.root_link == "world"
    assert robot.base_link == "base_link"
