"""A due step made and written: each stream's sample nearest the step time, the state
vectors and end-effector pose of ``StepLayout``, the alignment columns, and the action
(the action stream's sample, or without one the next step's joint positions, for which a
step is held until the next is made)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format.units import NS
from ortf_ros.pipeline.assembly.counts import TopicCounts
from ortf_ros.pipeline.mapping import TopicMapping
from ortf_ros.pipeline.sync import Sampled, StreamSampler
from ortf_ros.pipeline.tf import TfBuffer

END_EFFECTOR = "end_effector"
"""The alignment stream of the end-effector pose (looked up in TF)."""


@dataclass(frozen=True)
class StepLayout:
    """What each step holds, decided from the prologue and reflected in the manifest."""

    arm_joints: tuple[str, ...]
    gripper_joints: tuple[str, ...]
    with_torques: bool
    ee_frames: tuple[str, str] | None  # (base, end effector) for ee_position/ee_orientation
    action_names: tuple[str, ...]  # the action vector's elements
    action_by_joint_name: bool  # the action topic carries joints by name (JointState/JointTrajectory)
    # The names, in order, of the values of a joint state (or command) that lists no names;
    # () when the joint states name their joints (``describe.unnamed_joint_names``).
    unnamed_joints: tuple[str, ...] = ()

    @property
    def joints(self) -> tuple[str, ...]:
        return self.arm_joints + self.gripper_joints


def _zero_missing(values: np.ndarray) -> np.ndarray:
    """A step's velocities or efforts, 0 for a joint whose messages never gave one
    (``np.nan_to_num``, called only when needed: it costs more than a step's other vectors)."""
    return values if np.isfinite(values).all() else np.nan_to_num(values)


@dataclass(frozen=True)
class _Step:
    """A step ready for the writer but for its action (which may be the next step's joints)."""

    timestamp: float
    state: dict[str, np.ndarray]
    frames: dict[str, int]
    samples: dict[str, int]
    alignment_ms: dict[str, float]


class StepBuilder:
    """Makes the steps of one episode from ``samplers`` (every stream a step samples, by
    name; ``cameras`` and ``scans`` among them) and writes them; ``tolerances_ns``: each
    one's sync tolerance, and the end effector's; ``clock_ns`` gives the writer's time
    origin (``NativeBatching.clock_ns``)."""

    def __init__(
        self,
        config: TopicMapping,
        layout: StepLayout,
        writer: DatasetWriter,
        counts: TopicCounts,
        samplers: list[tuple[str, StreamSampler[Any]]],
        *,
        cameras: Collection[str],
        scans: Collection[str],
        tf: TfBuffer,
        tolerances_ns: Mapping[str, int],
        clock_ns: Callable[[int], int],
    ) -> None:
        self.config = config
        self.layout = layout
        self.writer = writer
        self.counts = counts
        self.tolerances_ns = tolerances_ns
        self.pending_fallback: _Step | None = None  # a step waiting for the next one's joints
        self.steps_written = 0
        self._samplers = samplers
        self._cameras = cameras
        self._scans = scans
        self._tf = tf
        self._clock_ns = clock_ns

    def emit(self, t_ns: int) -> None:
        """The step at ``t_ns`` (skipped, counted, when a stream has no sample for it, there
        is no end-effector pose, or a stream is outside the tolerance and such steps are dropped)."""
        sampled: dict[str, Sampled[Any]] = {}
        for name, sampler in self._samplers:
            got = sampler.sample(t_ns)
            if got is None:
                self.counts.skipped_steps[f"no {name} sample"] += 1
                return
            sampled[name] = got
        state, alignment = self._state(t_ns, sampled)
        if state is None:
            self.counts.skipped_steps["no end-effector pose in TF"] += 1
            return
        outside = [name for name, error in alignment.items() if error > self.tolerances_ns[name]]
        for name in outside:
            self.counts.outside_tolerance[name] += 1
        if outside and self.config.drop_outside_tolerance:
            self.counts.skipped_steps["outside sync tolerance (dropped)"] += 1
            return
        step = _Step(
            timestamp=(t_ns - self._clock_ns(t_ns)) / NS,
            state=state,
            frames={name: int(sampled[name].value) for name in self._cameras},
            samples=self._sample_indices(sampled),
            alignment_ms={name: error / 1e6 for name, error in alignment.items()},
        )
        if self.config.action.topic is not None:
            self._write_step(step, np.asarray(sampled["action"].value))
            return
        # Fallback action: the next step's joint positions, so hold this step one step.
        if self.pending_fallback is not None:
            self._write_step(self.pending_fallback, self._fallback_action(state))
        self.pending_fallback = step

    def finish(self) -> None:
        """A held fallback step, written with its own state's joint positions as its action."""
        if self.pending_fallback is not None:
            step = self.pending_fallback
            self._write_step(step, self._fallback_action(step.state))
            self.pending_fallback = None

    def _fallback_action(self, next_state: dict[str, np.ndarray]) -> np.ndarray:
        parts = [next_state["joint_positions"]]
        if "gripper_position" in next_state:
            parts.append(next_state["gripper_position"])
        return np.concatenate(parts)

    def _write_step(self, step: _Step, action: np.ndarray) -> None:
        self.writer.add_step(
            step.timestamp,
            step.state,
            action,
            frames=step.frames,
            samples=step.samples,
            alignment_ms=step.alignment_ms,
        )
        self.steps_written += 1

    def _sample_indices(self, sampled: dict[str, Sampled[Any]]) -> dict[str, int]:
        indices = {}
        if self.config.joint_states and self.config.joint_states.native:
            indices["joint_states"] = sampled["joint_states"].index
        for mapping in self.config.wrenches:
            if mapping.native:
                indices[mapping.name] = sampled[mapping.name].index
        for name in self._scans:
            indices[name] = sampled[name].index
        return indices

    def _state(
        self, t_ns: int, sampled: dict[str, Sampled[Any]]
    ) -> tuple[dict[str, np.ndarray] | None, dict[str, int]]:
        joints = np.asarray(sampled["joint_states"].value)
        arm = len(self.layout.arm_joints)
        state: dict[str, np.ndarray] = {
            "joint_positions": joints[0, :arm],
            "joint_velocities": _zero_missing(joints[1, :arm]),
        }
        if self.layout.with_torques:
            state["joint_torques"] = _zero_missing(joints[2, :arm])
        if self.layout.gripper_joints:
            state["gripper_position"] = joints[0, arm:]
        alignment = {name: got.error_ns for name, got in sampled.items()}
        if self.layout.ee_frames is not None:
            found = self._tf.lookup(*self.layout.ee_frames, t_ns)
            if found is None:
                return None, alignment
            state["ee_position"] = found.pose.translation
            state["ee_orientation"] = found.pose.rotation
            alignment[END_EFFECTOR] = found.gap_ns
        for mapping in self.config.wrenches:
            state[mapping.name] = np.asarray(sampled[mapping.name].value)
        return state, alignment
