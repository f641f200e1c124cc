"""Where each of a dataset's values goes in a Rerun recording: entity paths, decided
from the manifest alone, once for all the episodes exported.

- ``/cameras/<name>``: a camera's video (or depth images), its pinhole and extrinsics;
- ``/state/<component>/<element>``: one scalar series per state element (joint names,
  else the component's ``order`` letters, else indices);
- ``/action/<dim>``: one series per action dimension;
- ``/ft/<sensor>/<axis>``: force-torque, ``fx fy fz tx ty tz``;
- ``/tf/<frame>``: transforms between named frames (manifest frames, URDF links).

Native-rate tables are used where the dataset has them, the steps otherwise: a
force-torque sensor sampled at 1 kHz shown at the 30 Hz step rate would hide what the
native table was kept for. A joint-state table (``position``/``velocity``/``effort``)
stands for the ``joint_positions``/``joint_velocities``/``joint_torques`` components, a
force-torque table for the sensor's step component; the steps' copies of them (sampled
from the same messages) are then left out rather than shown twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest, StateComponent

FT_AXES = ("fx", "fy", "fz", "tx", "ty", "tz")
JOINT_FIELDS = {"position": "joint_positions", "velocity": "joint_velocities", "effort": "joint_torques"}
"""A joint-state table's columns and the state components they are the native samples of."""
JOINT_POSITION_COMPONENTS = ("joint_positions", "gripper_position")
"""Step components whose elements are named joint positions (what moves the URDF without a native table)."""
EE_POSITION, EE_ORIENTATION = "ee_position", "ee_orientation"
EE_FRAME = "end_effector"


def escape(part: str) -> str:
    """One entity path part (a joint named ``arm/1`` stays one part), escaped as Rerun escapes it."""
    from rerun import escape_entity_path_part

    return escape_entity_path_part(part)


def path(*parts: str) -> str:
    return "/" + "/".join(escape(p) for p in parts)


def element_names(component: StateComponent) -> tuple[str, ...]:
    """Names of a component's elements: its ``names``, else its ``order`` (``wxyz``), else 0..dim-1."""
    if component.names is not None and len(component.names) == component.dim:
        return component.names
    if component.order is not None and len(component.order) == component.dim:
        return tuple(component.order)
    return tuple(str(i) for i in range(component.dim))


@dataclass(frozen=True)
class Scalars:
    """A vector column logged as one scalar series per element (``entities[i]`` for element i)."""

    column: str
    entities: tuple[str, ...]


@dataclass(frozen=True)
class Source:
    """What is read from one table (the steps, or a native-rate stream) and where it goes."""

    stream: str | None  # None: the step table
    scalars: tuple[Scalars, ...]
    joint_positions: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (column, joint names) that move the URDF

    @property
    def columns(self) -> list[str]:
        names = [s.column for s in self.scalars] + [c for c, _ in self.joint_positions]
        return list(dict.fromkeys(["timestamp", *names]))


@dataclass(frozen=True)
class EndEffector:
    """The end-effector pose in the state, logged as the transform of ``frame`` in ``parent``."""

    frame: str
    parent: str


@dataclass(frozen=True)
class Plan:
    sources: tuple[Source, ...]
    end_effector: EndEffector | None

    @property
    def steps(self) -> Source:
        return next(s for s in self.sources if s.stream is None)

    @property
    def moved_joints(self) -> frozenset[str]:
        """Joints whose positions the dataset records (the others keep the URDF's zero pose)."""
        return frozenset(name for s in self.sources for _, names in s.joint_positions for name in names)


def plan(manifest: Manifest) -> Plan:
    """Where every state, action and force-torque value of ``manifest``'s datasets goes."""
    force_torque = {s.name for s in manifest.sensors if s.type == "force_torque"}
    natives: list[Source] = []
    replaced: set[str] = set()  # step components a native table stands for
    native_joints = False
    for name, stream in manifest.native_streams.items():
        scalars: list[Scalars] = []
        joints: list[tuple[str, tuple[str, ...]]] = []
        if stream.sensor in force_torque and {"force", "torque"} <= set(stream.columns):
            sensor = stream.sensor
            assert sensor is not None
            scalars += [
                Scalars("force", tuple(path("ft", sensor, a) for a in FT_AXES[:3])),
                Scalars("torque", tuple(path("ft", sensor, a) for a in FT_AXES[3:])),
            ]
            replaced.add(sensor)
        elif "position" in stream.columns:
            for column, component in JOINT_FIELDS.items():
                if column in stream.columns:
                    names = element_names(stream.columns[column])
                    scalars.append(Scalars(column, tuple(path("state", component, n) for n in names)))
                    replaced.add(component)
            joints.append(("position", element_names(stream.columns["position"])))
            native_joints = True
        else:
            for column, values in stream.columns.items():
                scalars.append(Scalars(column, tuple(path("state", name, column, n) for n in element_names(values))))
        natives.append(Source(name, tuple(scalars), tuple(joints)))
    state = manifest.observation_space.state
    steps: list[Scalars] = []
    for name, component in state.items():
        if name in replaced:
            continue
        column = layout.state_column(name)
        if name in force_torque and component.dim == len(FT_AXES):
            steps.append(Scalars(column, tuple(path("ft", name, a) for a in FT_AXES)))
        else:
            steps.append(Scalars(column, tuple(path("state", name, n) for n in element_names(component))))
    dims = sorted(manifest.action_space.dimensions, key=lambda d: d.index)
    steps.append(Scalars("action", tuple(path("action", d.name) for d in dims)))
    step_joints: list[tuple[str, tuple[str, ...]]] = []
    for name in JOINT_POSITION_COMPONENTS if not native_joints else ():
        names = state[name].names if name in state else None
        if names is not None and len(names) == state[name].dim:
            step_joints.append((layout.state_column(name), names))
    sources = (Source(None, tuple(steps), tuple(step_joints)), *natives)
    return Plan(sources, end_effector(manifest))


def end_effector(manifest: Manifest) -> EndEffector | None:
    """The ``end_effector`` frame, when the state carries its pose and no TF frame stands for it
    (a frame with ``tf_frame`` is placed by the URDF's joints instead)."""
    state = manifest.observation_space.state
    frame = manifest.frames.get(EE_FRAME)
    if frame is None or EE_POSITION not in state or EE_ORIENTATION not in state or "tf_frame" in frame.extra:
        return None
    parent = state[EE_POSITION].frame or frame.parent
    return EndEffector(EE_FRAME, parent) if parent else None


def aliases(manifest: Manifest) -> Mapping[str, str]:
    """Frame -> the TF frame it names (``robot_base`` -> ``base_link``): the same place."""
    found = {}
    for name, frame in manifest.frames.items():
        target = frame.extra.get("tf_frame")
        if isinstance(target, str) and target and target != name:
            found[name] = target
    return found


def timeline(episode_id: str) -> str:
    """The timeline an episode's data lies on: seconds since the episode's start."""
    return f"episode_{episode_id}"
