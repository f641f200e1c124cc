"""The demo dataset's robot and episodes: a 7-joint arm whose every value is a pure
function of (episode, step), so a test can regenerate exactly what was written and
compare it with what is read back.

Unlike the teleop scene (``scene``, ``messages``), nothing here is a ROS message: these
values go straight into a ``DatasetWriter`` (``dataset.write_demo_dataset``, and the tests
and benchmarks that write their own episodes). Images are smooth moving patterns (like
camera content, unlike noise, which no video codec compresses).
"""

from __future__ import annotations

import numpy as np

from ortf_ros.format.manifest import Manifest
from ortf_ros.format.robot import Joint, Robot
from ortf_ros.format.sensors import Extrinsics, Frame, Resolution, Sensor, Transform
from ortf_ros.format.spaces import ActionDimension, ActionSpace, ObservationSpace, StateComponent
from ortf_ros.synthetic.robot import UrdfJoint, revolute_chain, urdf

JOINTS = tuple(f"demo_joint{i}" for i in range(1, 8))
LIMIT = 2.8
RGB_CAMERAS = {"cam_wrist": "wrist_rgb", "cam_overhead": "overhead_rgb"}
DEPTH_CAMERA = ("depth", "overhead_depth")
TASKS = ("Pick up the red box and place it in the bowl", "Open the drawer")


def demo_urdf() -> str:
    """A 7-joint serial arm whose joint names match the demo manifest."""
    links = [f"demo_link{i}" for i in range(1, len(JOINTS) + 1)]
    joints = revolute_chain(JOINTS, links, "base_link", LIMIT)
    joints.append(UrdfJoint("demo_hand_joint", "fixed", links[-1], "demo_hand"))
    return urdf("ortf_demo_arm", ["base_link", *links, "demo_hand"], joints)


def demo_manifest(width: int = 640, height: int = 480, fps: int = 30, depth: bool = True) -> Manifest:
    def camera(name: str, mount: str, parent: str, translation: tuple[float, float, float]) -> Sensor:
        return Sensor(
            name=name,
            type="camera",
            mount=mount,
            resolution=Resolution(width, height),
            fps=fps,
            intrinsics={"fx": 0.9 * width, "fy": 0.9 * width, "cx": width / 2, "cy": height / 2},
            extrinsics=Extrinsics(parent, Transform(translation, (0.5, 0.5, -0.5, -0.5))),
        )

    sensors = [
        camera("wrist_rgb", "egocentric", "demo_hand", (0.05, 0.0, 0.02)),
        camera("overhead_rgb", "exocentric", "world", (0.5, 0.0, 1.2)),
    ]
    images = dict(RGB_CAMERAS)
    if depth:
        sensors.append(
            Sensor(
                name=DEPTH_CAMERA[1],
                type="depth_camera",
                mount="exocentric",
                resolution=Resolution(width, height),
                fps=fps,
                intrinsics={"fx": 0.9 * width, "fy": 0.9 * width, "cx": width / 2, "cy": height / 2},
                extrinsics=Extrinsics("world", Transform((0.5, 0.0, 1.2), (0.5, 0.5, -0.5, -0.5))),
                extra={"bit_depth": 16, "depth_units": "millimeters", "depth_range": [0.1, 10.0]},
            )
        )
        images[DEPTH_CAMERA[0]] = DEPTH_CAMERA[1]
    action_dims = [ActionDimension(name, i, "position", "radians", (-LIMIT, LIMIT)) for i, name in enumerate(JOINTS)]
    action_dims.append(ActionDimension("gripper", len(JOINTS), "continuous", "normalized", (0.0, 1.0)))
    return Manifest(
        dataset_id="",
        name="ortf_ros synthetic demo",
        description="Synthetic two-camera teleoperation episodes written by `ortf demo`",
        license="CC0-1.0",
        robot=Robot(
            name="ortf_demo_arm",
            type="manipulator",
            robot_class="arm",
            dof=len(JOINTS),
            joints=tuple(Joint(n, "revolute", i, (-LIMIT, LIMIT)) for i, n in enumerate(JOINTS)),
            gripper={"type": "parallel_jaw", "max_width": 0.08, "fingers": 2},
            end_effector_link="demo_hand",
        ),
        action_space=ActionSpace(
            type="joint_position", dimensions=tuple(action_dims), frame="robot_base", control_frequency_hz=fps
        ),
        observation_space=ObservationSpace(
            state={
                "joint_positions": StateComponent(len(JOINTS), "radians", names=JOINTS),
                "joint_velocities": StateComponent(len(JOINTS), "rad_per_s", names=JOINTS),
                "ee_position": StateComponent(3, "meters", frame="robot_base"),
                "ee_orientation": StateComponent(4, "quaternion", order="wxyz"),
                "gripper_position": StateComponent(1, "normalized", range=(0.0, 1.0)),
            },
            images=images,
        ),
        sensors=tuple(sensors),
        frames={
            "world": Frame("fixed", convention="z_up", description="Global reference frame, gravity-aligned"),
            "robot_base": Frame(
                "fixed", parent="world", transform=Transform((0.0, 0.0, 0.75)), description="Robot base link origin"
            ),
            "end_effector": Frame("dynamic", parent="robot_base", source="forward_kinematics"),
        },
        collection={"operator": "synthetic", "interface": "ortf_ros.synthetic"},
        sync_tolerance_ms=1000.0 / fps / 2,
    )


def demo_state(episode: int, step: int, fps: int = 30) -> dict[str, np.ndarray]:
    t = step / fps
    phase = np.arange(len(JOINTS)) * 0.7 + episode
    positions = np.sin(t + phase)
    half = 0.5 * np.sin(0.3 * t)
    return {
        "joint_positions": positions.astype(np.float32),
        "joint_velocities": np.cos(t + phase).astype(np.float32),
        "ee_position": np.array([0.4 + 0.1 * np.sin(t), 0.1 * np.cos(t), 0.3], np.float32),
        "ee_orientation": np.array([np.cos(half), 0.0, 0.0, np.sin(half)], np.float32),
        "gripper_position": np.array([0.5 + 0.5 * np.sin(t)], np.float32),
    }


def demo_action(episode: int, step: int, fps: int = 30) -> np.ndarray:
    """The next step's joint positions plus a gripper command."""
    state = demo_state(episode, step + 1, fps)
    return np.concatenate([state["joint_positions"], state["gripper_position"]]).astype(np.float32)


def demo_rgb(camera_number: int, step: int, width: int, height: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    shift = step * 2.0 + camera_number * 40.0
    r = 128 + 100 * np.sin((x + shift) / 37.0)
    g = 128 + 100 * np.cos((y - shift) / 29.0)
    b = 128 + 60 * np.sin((x + y + shift) / 53.0)
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


def demo_depth(step: int, width: int, height: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    bump = 400 * np.exp(-(((x - width / 2 - step) / (width / 6)) ** 2 + ((y - height / 2) / (height / 6)) ** 2))
    depth: np.ndarray = (1500 + 2 * x - bump + (step % 7)).astype(np.uint16)
    return depth
