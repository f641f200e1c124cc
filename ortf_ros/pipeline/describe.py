"""The dataset's description (manifest, step layout, robot) from a prologue and a mapping.

Pure: the same prologue gives the same manifest whether a bag or a live recorder
accumulated it, which is what makes a recording and a conversion of the same scene
the same dataset. Only ``name`` and ``collection`` (who wrote it: ``ortf-bag2ortf``
or ``ortf_recorder``) differ between the two.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ortf_ros.errors import MappingError, RobotDescriptionError, SourceError
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.native_streams import Alignment, NativeStream
from ortf_ros.format.point_clouds import POINT_CLOUDS_KEY
from ortf_ros.format.robot import Joint, Robot
from ortf_ros.format.sensors import UNKNOWN_INTRINSICS, Extrinsics, Frame, Resolution, Sensor, Transform
from ortf_ros.format.spaces import ActionDimension, ActionSpace, ObservationSpace, StateComponent
from ortf_ros.io.h264 import PUBLISHED_ENCODING_KEY
from ortf_ros.pipeline.assembly.steps import END_EFFECTOR, StepLayout
from ortf_ros.pipeline.calibration import CalibrationFile
from ortf_ros.pipeline.mapping import CameraMapping, SyncTolerance, TopicMapping, sync_tolerance
from ortf_ros.pipeline.prologue import Prologue, camera_fps
from ortf_ros.pipeline.robot import UrdfRobot, robot_from_urdf
from ortf_ros.pipeline.samples import (
    ControllerStateSample,
    JointStateSample,
    LaserScanSample,
    PinholeCalibration,
    PointCloudSample,
    VectorSample,
)
from ortf_ros.pipeline.streams.audio import describe_audio
from ortf_ros.pipeline.streams.range_manifest import range_description
from ortf_ros.pipeline.tf import Pose

FALLBACK_ACTION = "fallback: the next step's joint positions (the recording has no action topic)"


@dataclass(frozen=True)
class Description:
    """What a dataset written from this prologue holds, and what the user should hear of it."""

    manifest: Manifest
    steps: StepLayout
    robot: UrdfRobot | None
    urdf: str | None
    warnings: tuple[str, ...]
    tolerance: SyncTolerance


def describe(
    config: TopicMapping,
    prologue: Prologue,
    *,
    name: str,
    collection: Mapping[str, object],
    urdf: str | None = None,
    urdf_source: str = "--urdf",
) -> Description:
    """The manifest and step layout; ``urdf`` (from ``urdf_source``) over the prologue's."""
    urdf_text = urdf or prologue.urdf
    robot = None
    if urdf_text:
        source = urdf_source if urdf else config.robot_description_topic
        robot = robot_from_urdf(urdf_text, gripper_joints=config.gripper_joints, source=source)
    joints = dataset_joints(config, prologue, robot)
    if joints.robot is None:
        urdf_text = None  # (none, or one whose joints are not the dataset's, as the manifest would claim)
    steps = step_layout(config, prologue, robot, joints)
    tolerance = sync_tolerance(config, stream_rates(config, prologue))
    calibrations = {c.name: camera_calibration(c, prologue) for c in config.cameras}
    warnings = [*joints.warnings, *(c.warning for c in calibrations.values() if c.warning is not None)]
    manifest = build_manifest(config, prologue, joints.robot, steps, name, collection, tolerance, calibrations)
    return Description(manifest, steps, joints.robot, urdf_text, tuple(warnings), tolerance)


@dataclass(frozen=True)
class DatasetJoints:
    """The joints a dataset holds: the ones its joint state topic gives, named by it or,
    where it lists no names, by ``unnamed_joint_names``."""

    robot: UrdfRobot | None  # the URDF's robot with these joints; None when no URDF names them
    names: tuple[str, ...]  # in the joint states' order
    unnamed: tuple[str, ...]  # the names given to a message's values where it lists none; () when named
    warnings: tuple[str, ...]  # what the summary says of how they were named


def dataset_joints(config: TopicMapping, prologue: Prologue, robot: UrdfRobot | None) -> DatasetJoints:
    """Which joints the dataset holds and how they are named. By name: the URDF's movable
    joints the joint states name (a controller's state names only its own), in the URDF's
    order; without a URDF, as named. Without names: see ``unnamed_joint_names``."""
    state = first_joint_state(config, prologue)
    topic = state.topic
    if not state.names:
        unnamed = unnamed_joint_names(state.position.size, robot)
        warning = unnamed_joints_warning(topic, unnamed, robot, config.robot_description_topic)
        fits = robot is not None and unnamed == robot.joint_names
        return DatasetJoints(robot if fits else None, unnamed, unnamed, (warning,))
    names = prologue.joint_names or state.names
    if robot is None:
        missing = f"no URDF on {config.robot_description_topic} and none given: joints named from {topic}"
        return DatasetJoints(None, names, (), (missing,))
    kept = tuple(n for n in robot.joint_names if n in names)
    if not kept:
        raise RobotDescriptionError(
            f"{topic}: none of the joints its messages name ({', '.join(names)}) is a movable joint of the URDF "
            f"({', '.join(robot.joint_names) or 'none'})"
        )
    if len(kept) == len(robot.joint_names):
        return DatasetJoints(robot, kept, (), ())
    left_out = ", ".join(n for n in robot.joint_names if n not in kept)
    warning = f"{topic}: the URDF's joints {left_out} are in no message of it: left out of the dataset"
    return DatasetJoints(robot.with_joints(kept), kept, (), (warning,))


def first_joint_state(config: TopicMapping, prologue: Prologue) -> JointStateSample:
    """The prologue's joint state; without one, the refusal says why (what the mapping
    lacks, or what was wrong with the topic's messages)."""
    if config.joint_states is None:
        raise MappingError(
            "no sensor_msgs/JointState topic (nor control_msgs/JointTrajectoryControllerState) to build steps from "
            "(none is mapped as joint_states)"
        )
    if prologue.joint_state is None:
        topic = config.joint_states.topic
        problem = prologue.problems.get(topic)
        why = f": {problem}" if problem else ""
        raise SourceError(f"{topic}: no usable joint state message, nothing to build steps from{why}")
    return prologue.joint_state


def unnamed_joint_names(count: int, robot: UrdfRobot | None) -> tuple[str, ...]:
    """Names for the ``count`` values of a joint state that lists none: the URDF's movable
    joints in its order when there are as many (what a driver that publishes positions
    only means), else ``joint_0``, ``joint_1``, ..."""
    if robot is not None and len(robot.joint_names) == count:
        return robot.joint_names
    return tuple(f"joint_{i}" for i in range(count))


def unnamed_joints_warning(topic: str, names: tuple[str, ...], robot: UrdfRobot | None, urdf_topic: str) -> str:
    """What the summary says of joints named by ``unnamed_joint_names``, and why so."""
    said = f"{topic}: the joint states list no joint names: their {len(names)} positions"
    if robot is not None and names == robot.joint_names:
        return f"{said} are taken to be the URDF's movable joints in its order ({', '.join(names)})"
    generic = f"{said} are named {', '.join(names)}"
    if robot is None:
        return f"{generic}: there is no URDF to name them from (none on {urdf_topic} and none given)"
    return (
        f"{generic}: the URDF has {len(robot.joint_names)} movable joints ({', '.join(robot.joint_names)}), "
        "so it does not say which they are; the URDF is left out of the dataset, whose joints it does not describe"
    )


def stream_rates(config: TopicMapping, prologue: Prologue) -> dict[str, float]:
    """Messages/s per topic, cameras at their frame rate (``camera_fps``)."""
    rates = dict(prologue.rates)
    rates.update({c.topic: camera_fps(prologue, c.name, c.topic) for c in config.cameras})
    return rates


def action_joints(action: JointStateSample | VectorSample | ControllerStateSample | None) -> JointStateSample | None:
    """The joint vector an action sample commands by joint name (a JointState command, or
    a controller's reference); None for a command of another kind."""
    if isinstance(action, ControllerStateSample):
        return action.reference
    return action if isinstance(action, JointStateSample) else None


def step_layout(config: TopicMapping, prologue: Prologue, robot: UrdfRobot | None, joints: DatasetJoints) -> StepLayout:
    """``robot``: the URDF's, for the end-effector frames; ``joints``: what the steps hold."""
    state = first_joint_state(config, prologue)
    if joints.robot is not None:
        gripper = joints.robot.gripper_joints
        arm = tuple(j.name for j in joints.robot.arm_joints)
    else:
        gripper = tuple(n for n in joints.names if n in config.gripper_joints)
        arm = tuple(n for n in joints.names if n not in gripper)
    ee_frames = None
    base = config.base_frame or (robot.base_link if robot is not None else None)
    ee = config.end_effector_frame or (robot.end_effector_link if robot is not None else None)
    frames = prologue.tf.frames()
    for key, named in (("base_frame", config.base_frame), ("end_effector_frame", config.end_effector_frame)):
        if named is not None and named not in frames:  # asked for by name: not dropped in silence
            known = ", ".join(sorted(frames)[:8]) + (", ..." if len(frames) > 8 else "") or "none"
            raise MappingError(f"{key} {named!r} is not a frame of the TF tree (frames: {known})")
    if base and ee and ee in frames:
        ee_frames = (base, ee)
    action = prologue.action
    by_joint = action_joints(action)
    if config.action.topic is None:
        action_names = arm + gripper
    elif action is None:
        problem = prologue.problems.get(config.action.topic)
        why = f": {problem}" if problem else ""
        raise SourceError(f"{config.action.topic}: the action topic has no usable message{why}")
    elif by_joint is not None:
        unnamed = joints.unnamed
        commanded = by_joint.names or (unnamed if by_joint.position.size == len(unnamed) else ())
        action_names = tuple(n for n in arm + gripper if n in commanded)
        if not action_names:
            listed = ", ".join(commanded) if commanded else f"no joint names ({by_joint.position.size} positions)"
            raise MappingError(
                f"{config.action.topic}: the action commands joints by name, and none of its joints ({listed}) is "
                f"one of the state's ({', '.join(arm + gripper)})"
            )
    else:
        assert isinstance(action, VectorSample)
        action_names = action.names
    return StepLayout(
        arm_joints=arm,
        gripper_joints=gripper,
        with_torques=len(state.effort) > 0,
        ee_frames=ee_frames,
        action_names=action_names,
        action_by_joint_name=by_joint is not None or config.action.topic is None,
        unnamed_joints=joints.unnamed,
    )


def build_manifest(
    config: TopicMapping,
    prologue: Prologue,
    robot: UrdfRobot | None,
    steps: StepLayout,
    name: str,
    collection: Mapping[str, object],
    tolerance: SyncTolerance,
    calibrations: Mapping[str, CameraCalibration],
) -> Manifest:
    joints = steps.joints
    state = {
        "joint_positions": StateComponent(len(steps.arm_joints), "radians", names=steps.arm_joints),
        "joint_velocities": StateComponent(len(steps.arm_joints), "rad_per_s", names=steps.arm_joints),
    }
    if steps.with_torques:
        state["joint_torques"] = StateComponent(len(steps.arm_joints), "newton_meters", names=steps.arm_joints)
    if steps.ee_frames is not None:
        state["ee_position"] = StateComponent(3, "meters", frame=steps.ee_frames[0])
        state["ee_orientation"] = StateComponent(4, "quaternion", frame=steps.ee_frames[0], order="wxyz")
    if steps.gripper_joints:
        state["gripper_position"] = StateComponent(len(steps.gripper_joints), "meters", names=steps.gripper_joints)
    sensors: list[Sensor] = []
    native: dict[str, NativeStream] = {}
    for wrench in config.wrenches:
        state[wrench.name] = StateComponent(6, "newtons_newton_meters", names=("fx", "fy", "fz", "tx", "ty", "tz"))
        rate = prologue.rates.get(wrench.topic, 0.0)
        sensors.append(
            Sensor(
                name=wrench.name,
                type="force_torque",
                # A bag does not say the sensor's range; "unknown" says so instead of inventing one.
                extra={
                    "rate_hz": rate,
                    "range_force": "unknown" if wrench.range_force is None else wrench.range_force,
                    "range_torque": "unknown" if wrench.range_torque is None else wrench.range_torque,
                    "source": wrench.topic,
                },
            )
        )
        if wrench.native:
            native[wrench.name] = NativeStream(
                columns={"force": StateComponent(3, "newtons"), "torque": StateComponent(3, "newton_meters")},
                sensor=wrench.name,
                rate_hz=rate,
                source=wrench.topic,
            )
    if config.joint_states is not None and config.joint_states.native:
        native["joint_states"] = NativeStream(
            columns={
                "position": StateComponent(len(joints), names=joints),
                "velocity": StateComponent(len(joints), names=joints),
                "effort": StateComponent(len(joints), names=joints),
            },
            rate_hz=prologue.rates.get(config.joint_states.topic, 0.0),
            source=config.joint_states.topic,
        )
    images = {}
    for camera in config.cameras:
        images[camera.name] = camera.name
        sensors.append(_camera_sensor(prologue, camera, calibrations[camera.name]))
    sensors += describe_audio(config, prologue.audio, prologue.problems)
    range_sensors, range_streams, clouds = range_description(config, prologue.scans, prologue.clouds, prologue.rates)
    for sensor in range_sensors:
        sensors.append(replace(sensor, extrinsics=tf_extrinsics(prologue, sensor.extra["frame"], sensor.name)))
    native.update(range_streams)
    return Manifest(
        dataset_id="",
        name=name,
        robot=_robot(robot, steps),
        action_space=_action_space(config, steps, prologue.action),
        observation_space=ObservationSpace(state=state, images=images),
        sensors=tuple(sensors),
        frames=_frames(config, prologue, steps),
        collection=dict(collection),
        sync_tolerance_ms=tolerance.ms,
        native_streams=native,
        alignment=Alignment(streams=_aligned_streams(config, steps), tolerance_ms=dict(tolerance.streams)),
        extra={POINT_CLOUDS_KEY: clouds} if clouds else {},
    )


def _robot(robot: UrdfRobot | None, steps: StepLayout) -> Robot:
    ee = steps.ee_frames[1] if steps.ee_frames else None
    if robot is not None:
        return robot.manifest_robot(end_effector_link=ee or robot.end_effector_link)
    # No URDF: joints as the joint states name them; their types and limits are unknown.
    joints = tuple(Joint(name, "revolute", i) for i, name in enumerate(steps.arm_joints))
    gripper = {"joints": list(steps.gripper_joints)} if steps.gripper_joints else None
    return Robot(name="unknown", dof=len(joints), joints=joints, gripper=gripper, end_effector_link=ee)


def _aligned_streams(config: TopicMapping, steps: StepLayout) -> tuple[str, ...]:
    names = ["joint_states", *(w.name for w in config.wrenches), *(c.name for c in config.cameras)]
    names += [s.name for s in config.laser_scans]
    if config.action.topic is not None:
        names.append("action")
    if steps.ee_frames is not None:
        names.append(END_EFFECTOR)
    return tuple(names)


def _action_space(
    config: TopicMapping, steps: StepLayout, action: JointStateSample | VectorSample | ControllerStateSample | None
) -> ActionSpace:
    if steps.action_by_joint_name:
        dims = tuple(
            ActionDimension(n, i, "position", "radians" if n in steps.arm_joints else "meters")
            for i, n in enumerate(steps.action_names)
        )
        kind = "joint_position"
    else:
        dims = tuple(ActionDimension(n, i, "continuous", "normalized") for i, n in enumerate(steps.action_names))
        kind = "command"
    extra: dict[str, object] = {"source": config.action.topic} if config.action.topic else {"source": FALLBACK_ACTION}
    if isinstance(action, ControllerStateSample):
        extra |= {"source_field": action.reference_field, "description": controller_reference(action.reference_field)}
    return ActionSpace(type=kind, dimensions=dims, control_frequency_hz=config.step.rate_hz, extra=extra)


def controller_reference(field: str | None) -> str:
    """What an action taken from a controller state is, in words (the manifest's description)."""
    return (
        f"the controller's reference: the joint positions in the {field or 'reference'!r} field of the "
        "control_msgs/JointTrajectoryControllerState messages on the source topic, where the controller was "
        "taking the joints"
    )


@dataclass(frozen=True)
class CameraCalibration:
    """A camera's intrinsics and distortion as the manifest gives them, where they came
    from (a topic or a file; None: nowhere), and what the user should hear of it."""

    intrinsics: dict[str, object]
    distortion: dict[str, object] | None
    source: str | None
    warning: str | None = None


def camera_calibration(camera: CameraMapping, prologue: Prologue) -> CameraCalibration:
    """The first of: the CameraInfo the camera_info topic delivered (unless its fx is not
    positive: a driver's zeros for "not calibrated"), the calibration file ``camera_info_url``, unknown. A
    mapped topic that gave nothing, and unknown intrinsics, are said in a warning."""
    info = prologue.camera_info.get(camera.name)
    found: PinholeCalibration | None = None
    source: str | None = None
    lacking: str | None = None
    if info is not None and info.k[0] > 0:
        found, source = info, camera.camera_info_topic
    elif info is not None:
        lacking = f"the CameraInfo on {camera.camera_info_topic} is not calibrated (fx {info.k[0]:g})"
    elif camera.camera_info_topic is not None:
        lacking = f"no CameraInfo came on {camera.camera_info_topic}"
    if found is None and camera.name in prologue.calibration_files:
        found = prologue.calibration_files[camera.name]
        source = str(found.path)
        _check_size(camera, found, prologue)
    if found is None:
        why = lacking or "no camera_info topic and no camera_info_url in the mapping"
        unknown = (
            f"camera {camera.name}: {why}: intrinsics declared unknown (to give them, name the camera's "
            f"calibration YAML as cameras.{camera.name}.camera_info_url)"
        )
        return CameraCalibration(dict(UNKNOWN_INTRINSICS), None, None, unknown)
    intrinsics: dict[str, object] = {"fx": found.k[0], "fy": found.k[4], "cx": found.k[2], "cy": found.k[5]}
    distortion: dict[str, object] = {"model": found.distortion_model, "coefficients": list(found.d)}
    fallback = f"camera {camera.name}: {lacking}: intrinsics from {source}" if lacking else None
    return CameraCalibration(intrinsics, distortion, source, fallback)


def _check_size(camera: CameraMapping, calibration: CalibrationFile, prologue: Prologue) -> None:
    """A calibration of another image size does not apply to these frames (scaled, cropped or binned)."""
    first = prologue.images.get(camera.name)
    if first is None:
        return  # (refused where the sensor is built: no decodable frame)
    height, width = first.pixels.shape[:2]
    if (calibration.width, calibration.height) != (width, height):
        raise MappingError(
            f"{calibration.path}: image_width x image_height is {calibration.width}x{calibration.height}, "
            f"but camera {camera.name}'s frames on {camera.topic} are {width}x{height}"
        )


def _camera_sensor(prologue: Prologue, camera: CameraMapping, calibration: CameraCalibration) -> Sensor:
    name, topic, kind = camera.name, camera.topic, camera.kind
    first = prologue.images.get(name)
    if first is None:
        problem = prologue.problems.get(topic)
        raise SourceError(f"{topic}: camera {name!r} has no decodable frame" + (f": {problem}" if problem else ""))
    height, width = first.pixels.shape[:2]
    frame_id = first.stamps.frame_id
    extrinsics = _extrinsics(prologue, frame_id, first.stamps.header_ns or first.stamps.receive_ns)
    extra: dict[str, object] = {"source": topic, "frame_id": frame_id}
    if calibration.source is not None:
        extra["calibration_source"] = calibration.source
    if name in prologue.encoded:
        if kind == "depth":
            raise MappingError(
                f"{topic}: camera {name!r} is mapped as depth but publishes {prologue.encoded[name]} "
                "(lossy, 8-bit colour): map it with kind rgb"
            )
        extra[PUBLISHED_ENCODING_KEY] = prologue.encoded[name]  # (stored as published: ``io.packet_video``)
    if kind == "depth":
        extra.update(bit_depth=16, depth_units="millimeters", depth_range=[0.0, 65.535])
    return Sensor(
        name=name,
        type="depth_camera" if kind == "depth" else "camera",
        mount_link=frame_id or None,
        resolution=Resolution(width, height),
        fps=camera_fps(prologue, name, topic),
        intrinsics=calibration.intrinsics,
        distortion=calibration.distortion,
        extrinsics=extrinsics,
        extra=extra,
    )


def _extrinsics(prologue: Prologue, frame_id: str, at_ns: int) -> Extrinsics | None:
    """The frame's pose in its TF parent at ``at_ns`` (a sensor's first message); None
    when TF does not have the frame."""
    parent = prologue.tf.frames().get(frame_id)
    if parent is None:
        return None
    found = prologue.tf.lookup(parent.parent, frame_id, at_ns)
    return None if found is None else Extrinsics(parent.parent, _transform(found.pose))


def tf_extrinsics(prologue: Prologue, frame_id: object, name: str) -> Extrinsics | None:
    """A lidar's extrinsics, at its first scan's or cloud's time."""
    first = prologue.scans.get(name) or prologue.clouds.get(name)
    if first is None or not isinstance(frame_id, str):
        return None
    return _extrinsics(prologue, frame_id, first.stamps.header_ns or first.stamps.receive_ns)


def _transform(pose: Pose) -> Transform:
    t, r = pose.translation, pose.rotation
    return Transform((float(t[0]), float(t[1]), float(t[2])), (float(r[0]), float(r[1]), float(r[2]), float(r[3])))


def _frames(config: TopicMapping, prologue: Prologue, steps: StepLayout) -> dict[str, Frame]:
    """Every TF frame: static ones fixed with their transform, moving ones dynamic with their topic."""
    frames: dict[str, Frame] = {}
    tree = prologue.tf.frames()
    for root in prologue.tf.roots():
        frames[root] = Frame("fixed", description="root of the TF tree")
    for child, edge in tree.items():
        if edge.static and edge.pose is not None:
            frames[child] = Frame("fixed", parent=edge.parent, transform=_transform(edge.pose))
        else:
            frames[child] = Frame("dynamic", parent=edge.parent, source=prologue.dynamic_sources.get(child, "/tf"))
    firsts: list[LaserScanSample | PointCloudSample] = [*prologue.scans.values(), *prologue.clouds.values()]
    for first in firsts:
        frame_id = first.stamps.frame_id
        if frame_id and frame_id not in frames:  # (a sensor frame TF does not have: named, placed nowhere)
            frames[frame_id] = Frame("fixed", description=f"the frame of {first.topic}; TF does not place it")
    world = config.world_frame or (prologue.tf.roots()[0] if prologue.tf.roots() else None)
    if world is not None and "world" not in frames:
        frames["world"] = Frame("fixed", description=f"the TF frame {world!r}", extra={"tf_frame": world})
    if steps.ee_frames is not None:
        base, ee = steps.ee_frames
        if "robot_base" not in frames:
            frames["robot_base"] = Frame("fixed", description=f"the TF frame {base!r}", extra={"tf_frame": base})
        if "end_effector" not in frames:
            frames["end_effector"] = Frame(
                "dynamic", parent=base, source="tf", description=f"the TF frame {ee!r}", extra={"tf_frame": ee}
            )
    return frames
