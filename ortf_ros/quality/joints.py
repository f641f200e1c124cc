"""Robot rules: joint positions within the URDF's limits, and joint speed between
consecutive samples within its velocity limits.

Limits come from the dataset's URDF (``robot/robot.urdf``, read by the converter's own
``robot_from_urdf``), or, without one, from the manifest's joints (positions only). The
positions checked are every native-rate stream's ``position`` column, and the step state
components that name joints and hold positions (``joint_positions``) for the joints no
native stream holds: a joint's limits and speed are judged on its native samples when a
stream has it (the steps' values of it come from them), else on the steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ortf_ros.errors import OrtfError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.spaces import StateComponent
from ortf_ros.format.text import read_text
from ortf_ros.pipeline.robot import robot_from_urdf
from ortf_ros.quality.runs import EpisodeFindings, Run, RunTracker
from ortf_ros.quality.settings import DoctorSettings

POSITION_WORDS = ("position",)
NOT_POSITION_WORDS = ("velocit", "effort", "torque", "command", "target")
_OnRun = Callable[[Run], None]


@dataclass(frozen=True)
class JointLimits:
    positions: Mapping[str, tuple[float, float]]
    velocities: Mapping[str, float]

    def __bool__(self) -> bool:
        return bool(self.positions or self.velocities)


def joint_limits(root: Path, manifest: Manifest) -> JointLimits:
    """The URDF's limits when the dataset has a readable one, else the manifest's."""
    positions = {j.name: j.limits for j in manifest.robot.joints if j.limits is not None}
    velocities: dict[str, float] = {}
    urdf = root / (manifest.robot.urdf_path or layout.URDF)
    if urdf.is_file():
        try:
            robot = robot_from_urdf(read_text(urdf), source=str(urdf))
        except (OrtfError, OSError, UnicodeError):
            robot = None  # a URDF that does not read is ``ortf validate``'s finding
        if robot is not None:
            positions.update({j.name: j.limits for j in robot.joints if j.limits is not None})
            velocities = {name: v for name, v in robot.velocity_limits.items() if v > 0}
    return JointLimits(positions, velocities)


def position_joints(name: str, component: StateComponent, manifest: Manifest) -> tuple[str, ...] | None:
    """The joints a state component or stream column holds positions of, in its order; None
    when it is not one (its name says velocity, or it names no joints)."""
    lowered = name.lower()
    if not any(w in lowered for w in POSITION_WORDS) or any(w in lowered for w in NOT_POSITION_WORDS):
        return None
    if component.names is not None:
        return tuple(component.names) if len(component.names) == component.dim else None
    joints = sorted(manifest.robot.joints, key=lambda j: j.index)
    if "joint" in lowered and len(joints) == component.dim:
        return tuple(j.name for j in joints)
    return None


class JointChecker:
    """Positions of some joints fed batch by batch (times, rows): a run of samples beyond a
    joint's limits is one finding, and so is a run of intervals faster than its limit."""

    def __init__(
        self,
        stream: str,
        joints: Sequence[str],
        limits: JointLimits,
        settings: DoctorSettings,
        report: EpisodeFindings,
        *,
        speed: bool,
        declared_hz: float | None = None,
    ) -> None:
        self.stream = stream
        self.settings = settings
        self.report = report
        self.columns: list[int] = []
        self.names: list[str] = []
        lows, highs, fastest = [], [], []
        for column, joint in enumerate(joints):
            bounds = limits.positions.get(joint)
            velocity = limits.velocities.get(joint) if speed else None
            if bounds is None and velocity is None:
                continue
            self.columns.append(column)
            self.names.append(joint)
            lows.append(bounds[0] if bounds else -np.inf)
            highs.append(bounds[1] if bounds else np.inf)
            fastest.append(velocity if velocity is not None else np.inf)
        self.low = np.array(lows)
        self.high = np.array(highs)
        self.fastest = np.array(fastest)
        # Stamps closer than half a period apart (jitter) would make any motion look fast.
        self.shortest = 0.5 / declared_hz if declared_hz else 0.0
        self._previous: tuple[float, np.ndarray] | None = None
        self._outside = [RunTracker(self._position_run(i)) for i in range(len(self.names))]
        self._fast = [RunTracker(self._speed_run(i)) for i in range(len(self.names))]

    def __bool__(self) -> bool:
        return bool(self.names)

    def feed(self, times: np.ndarray, rows: np.ndarray) -> None:
        if not self.names or not len(times):
            return
        values = rows[:, self.columns].astype(np.float64)
        tolerance = self.settings.position_tolerance
        with np.errstate(invalid="ignore"):
            below, above = values < self.low - tolerance, values > self.high + tolerance
            excess = np.maximum(self.low - values, values - self.high)
        if self._previous is None:
            self._previous = (float(times[0]), values[0])
        before_t = np.concatenate([[self._previous[0]], times[:-1]])
        before = np.vstack([self._previous[1][None, :], values[:-1]])
        self._previous = (float(times[-1]), values[-1])
        dt = times - before_t
        with np.errstate(invalid="ignore", divide="ignore"):
            moved = np.abs(values - before)
            allowed = self.fastest * (1 + self.settings.velocity_margin) * np.maximum(dt, self.shortest)[:, None]
            fast = (dt > 0)[:, None] & (moved > allowed + tolerance)
            speed = moved / np.maximum(dt, self.shortest)[:, None]
        for i in range(len(self.names)):
            self._outside[i].feed(below[:, i] | above[:, i], times, times, excess[:, i])
            self._fast[i].feed(fast[:, i], before_t, times, speed[:, i])

    def _position_run(self, i: int) -> _OnRun:
        def on_run(run: Run) -> None:
            self.report.add(
                "robot.position_limit",
                self.stream,
                run.start_s,
                run.end_s,
                f"joint {self.names[i]} beyond its limits [{self.low[i]:g}, {self.high[i]:g}] by up to "
                f"{run.worst:.4g} in {run.rows} sample(s)",
            )

        return on_run

    def _speed_run(self, i: int) -> _OnRun:
        def on_run(run: Run) -> None:
            self.report.add(
                "robot.velocity_limit",
                self.stream,
                run.start_s,
                run.end_s,
                f"joint {self.names[i]} moves at up to {run.worst:.4g}/s between consecutive samples, above its "
                f"velocity limit {self.fastest[i]:g}/s ({run.rows} interval(s))",
            )

        return on_run

    def finish(self) -> None:
        for tracker in (*self._outside, *self._fast):
            tracker.finish()
