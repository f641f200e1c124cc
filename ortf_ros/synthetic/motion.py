"""How the teleop arm moves: joint positions, velocities, efforts, the command and the
wrist's wrench, each an exact function of time ``t`` (seconds since ``start_ns``).

A test computes from these what a converter must have stored. The messages list the
joints in orders of their own (not the URDF's), as real drivers do, so a converter has
to go by name: ``JOINT_STATE_ORDER``, ``COMMAND_ORDER``, ``CONTROLLER_JOINTS``; and
every ``FINGERS_ONLY_EVERY``-th joint state lists only the fingers.
"""

from __future__ import annotations

import math

import numpy as np

from ortf_ros.synthetic.robot import ARM_JOINTS, FINGER_JOINTS, JOINTS

JOINT_STATE_ORDER = (
    "finger_joint2",
    "arm_joint4",
    "arm_joint1",
    "arm_joint7",
    "finger_joint1",
    "arm_joint2",
    "arm_joint6",
    "arm_joint3",
    "arm_joint5",
)
COMMAND_ORDER = tuple(reversed(JOINTS))
CONTROLLER_JOINTS = tuple(reversed(ARM_JOINTS))  # the arm controller's joints, in its order (not the URDF's)
FINGERS_ONLY_EVERY = 5  # joint_states messages with seq % 5 == 4 list only the fingers
COMMAND_LEAD_S = 0.1  # the command leads the measured positions by this much

_OMEGA = 0.5 + 0.1 * np.arange(7)
_PHASE = 0.7 * np.arange(7)


def joint_positions(t: float) -> np.ndarray:
    """(9,) float64 in ``JOINTS`` order: arm in radians, fingers in metres (0..0.04)."""
    arm = 0.5 * np.sin(_OMEGA * t + _PHASE)
    finger = 0.02 + 0.015 * math.sin(1.3 * t)
    return np.concatenate([arm, [finger, finger]])


def joint_velocities(t: float) -> np.ndarray:
    """Exact time derivative of ``joint_positions``."""
    arm = 0.5 * _OMEGA * np.cos(_OMEGA * t + _PHASE)
    finger = 0.015 * 1.3 * math.cos(1.3 * t)
    return np.concatenate([arm, [finger, finger]])


def joint_efforts(t: float) -> np.ndarray:
    """(9,) float64 in ``JOINTS`` order, newton-metres / newtons."""
    arm = 10.0 * np.cos(0.3 * t + _PHASE) + np.arange(7)
    grip = 5.0 + 2.0 * math.sin(0.9 * t)
    return np.concatenate([arm, [grip, -grip]])


def joint_command(t: float) -> np.ndarray:
    """(9,) float64 target positions in ``JOINTS`` order: where the arm is ``COMMAND_LEAD_S`` later."""
    return joint_positions(t + COMMAND_LEAD_S)


def joint_state_names(seq: int) -> tuple[str, ...]:
    """Names that ``/joint_states`` message ``seq`` lists, in its order."""
    if seq % FINGERS_ONLY_EVERY == FINGERS_ONLY_EVERY - 1:
        return tuple(n for n in JOINT_STATE_ORDER if n in FINGER_JOINTS)
    return JOINT_STATE_ORDER


def select_joints(values: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """Pick entries of a ``JOINTS``-ordered vector in the order of ``names``."""
    return np.array([values[JOINTS.index(n)] for n in names], dtype=np.float64)


def wrench(t: float) -> tuple[np.ndarray, np.ndarray]:
    """(force (3,) N, torque (3,) N m) of the FT sensor in ``FT_FRAME``."""
    force = np.array(
        [2.0 * math.sin(2 * math.pi * 1.5 * t), 1.5 * math.cos(2 * math.pi * 0.7 * t), -9.81 + 0.5 * math.sin(6 * t)]
    )
    torque = np.array([0.1 * math.sin(5 * t), 0.2 * math.cos(3 * t), 0.05 * math.sin(11 * t)])
    return force, torque
