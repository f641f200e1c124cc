"""Where each of a dataset's values goes in a Rerun recording: entity paths, decided
from the manifest alone, once for all the episodes exported.

- ``/cameras/<name>``: a camera's video (or depth images), its pinhole and extrinsics;
- ``/state/<component>/<element>``: one scalar series per state element (joint names,
  else the component's ``order`` letters, else indices);
- ``/action/<dim>``: one series per action dimension;
- ``/ft/<sensor>/<axis>``: force-torque, ``fx fy fz tx ty tz``;
- ``/tf/<frame>``: transforms between named frames (manifest frames, URDF links, the
  end-effector pose);
- ``/state/<stream>/<column>/<element>``: a native-rate table of another kind;
- ``/lidar/<name>``: a lidar's scans and a point cloud stream's clouds (``rerun_lidar``).

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
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.native_streams import NativeStream
from ortf_ros.format.point_clouds import scan_streams
from ortf_ros.format.spaces import StateComponent

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
    """A vector column logged as one scalar series per element (``entities[i]`` for element i),
    the series under ``plot`` (``/state/<component>``, ``/action``, ``/ft/<sensor>``)."""

    column: str
    plot: str
    entities: tuple[str, ...]

    @classmethod
    def under(cls, column: str, plot: tuple[str, ...], elements: tuple[str, ...]) -> Scalars:
        return cls(column, path(*plot), tuple(path(*plot, e) for e in elements))


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

    def plots(self, manifest: Manifest) -> list[str]:
        """The scalar plots: the state components in the manifest's order, then ``/action``, ``/ft/...``."""
        order = {path("state", name): rank for rank, name in enumerate(manifest.observation_space.state)}
        found = dict.fromkeys(s.plot for source in self.sources for s in source.scalars)
        return sorted(
            found, key=lambda p: (not p.startswith("/state/"), p.startswith("/ft/"), order.get(p, len(order)))
        )

    @property
    def moved_joints(self) -> frozenset[str]:
        """Joints whose positions the dataset records (the others keep the URDF's zero pose)."""
        return frozenset(name for s in self.sources for _, names in s.joint_positions for name in names)


def plan(manifest: Manifest) -> Plan:
    """Where every state, action and force-torque value of ``manifest``'s datasets goes."""
    force_torque = {s.name for s in manifest.sensors if s.type == "force_torque"}
    scans = set(scan_streams(manifest))  # (points, not series: ``rerun_lidar``)
    natives = [
        _native(name, stream, force_torque) for name, stream in manifest.native_streams.items() if name not in scans
    ]
    replaced = {component for _, components in natives for component in components}
    steps = _steps(manifest, replaced, force_torque, native_joints=any(s.joint_positions for s, _ in natives))
    return Plan((steps, *(source for source, _ in natives)), end_effector(manifest))


def _native(name: str, stream: NativeStream, force_torque: set[str]) -> tuple[Source, set[str]]:
    """A native-rate table's series, and the step components it stands for."""
    sensor = stream.sensor
    if sensor in force_torque and {"force", "torque"} <= set(stream.columns):
        assert sensor is not None
        force = Scalars.under("force", ("ft", sensor), FT_AXES[:3])
        torque = Scalars.under("torque", ("ft", sensor), FT_AXES[3:])
        return Source(name, (force, torque)), {sensor}
    if "position" in stream.columns:
        scalars = [
            Scalars.under(column, ("state", component), element_names(stream.columns[column]))
            for column, component in JOINT_FIELDS.items()
            if column in stream.columns
        ]
        joints = (("position", element_names(stream.columns["position"])),)
        return Source(name, tuple(scalars), joints), {JOINT_FIELDS[s.column] for s in scalars}
    scalars = [
        Scalars.under(column, ("state", name, column), element_names(values))
        for column, values in stream.columns.items()
    ]
    return Source(name, tuple(scalars)), set()


def _steps(manifest: Manifest, replaced: set[str], force_torque: set[str], *, native_joints: bool) -> Source:
    """The step table's series: state components no native table stands for, and the action."""
    state = manifest.observation_space.state
    scalars: list[Scalars] = []
    for name, component in state.items():
        if name in replaced:
            continue
        column = layout.state_column(name)
        if name in force_torque and component.dim == len(FT_AXES):
            scalars.append(Scalars.under(column, ("ft", name), FT_AXES))
        else:
            scalars.append(Scalars.under(column, ("state", name), element_names(component)))
    dims = sorted(manifest.action_space.dimensions, key=lambda d: d.index)
    scalars.append(Scalars.under("action", ("action",), tuple(d.name for d in dims)))
    joints: list[tuple[str, tuple[str, ...]]] = []
    for name in JOINT_POSITION_COMPONENTS if not native_joints else ():
        names = state[name].names if name in state else None
        if names is not None and len(names) == state[name].dim:
            joints.append((layout.state_column(name), names))
    return Source(None, tuple(scalars), tuple(joints))


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
