"""TF helpers and buffer against closed forms.

Every rotation in the chain tests is about a fixed axis at a constant rate, so slerp
between two samples is exactly the analytic rotation, and lerp of a translation that
moves at constant velocity is exactly the analytic translation: the expected poses are
written with rotation matrices and half-angle formulas, independently of the code.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from ortf_ros.pipeline.samples import Stamps, TransformSample
from ortf_ros.pipeline.tf import (
    Pose,
    TfBuffer,
    Vector,
    quat_multiply,
    quat_rotate,
    slerp,
    wxyz_to_xyzw,
    xyzw_to_wxyz,
)

T0 = 1_700_000_000_000_000_000  # epoch-scale nanoseconds: float seconds would lose the ns
PERIOD_NS = 10_000_000  # dynamic TF at 100 Hz
OMEGA = 0.7  # rad/s of link1 about base's z
VELOCITY = np.array([0.05, -0.02, 0.01])  # m/s of link1's origin in base
BETA = 0.4  # base's rotation about world's x
BASE_IN_WORLD = np.array([1.0, 2.0, 0.5])
LINK1_OFFSET = np.array([0.0, 0.0, 0.3])  # link1's origin in base at T0
EE_IN_LINK1 = np.array([0.25, 0.0, 0.1])
EE_YAW = 0.3  # ee's fixed rotation about link1's z
CAMERA_IN_BASE = np.array([0.0, 0.5, 1.2])
CAMERA_YAW = -1.1  # camera's fixed rotation about base's z
TOL = 1e-9


def axis_quat(axis: str, angle: float) -> Vector:
    """(w, x, y, z) of a rotation by ``angle`` about a coordinate axis."""
    q = np.zeros(4)
    q[0] = math.cos(angle / 2)
    q["xyz".index(axis) + 1] = math.sin(angle / 2)
    return q


def rot_x(angle: float) -> Vector:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_z(angle: float) -> Vector:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def transform(parent: str, child: str, time_ns: int, pose: Pose, *, static: bool = False) -> TransformSample:
    return TransformSample(
        parent=parent,
        child=child,
        stamps=Stamps(receive_ns=time_ns + 1_000_000, header_ns=time_ns, frame_id=parent),
        translation=np.array(pose.translation),
        rotation=np.array(pose.rotation),
        static=static,
    )


def link1_pose(time_ns: int) -> Pose:
    seconds = (time_ns - T0) / 1e9
    return Pose(LINK1_OFFSET + VELOCITY * seconds, axis_quat("z", OMEGA * seconds))


def sample_times(count: int = 20) -> list[int]:
    """Irregular stamps around 100 Hz, as a real publisher's are."""
    jitter = [0, 300_000, -250_000, 1_000_000, 0, -400_000]
    return [T0 + k * PERIOD_NS + jitter[k % len(jitter)] for k in range(count)]


def robot_buffer(times: list[int] | None = None, *, history_ns: int = 10_000_000_000) -> TfBuffer:
    """world -> base (static) -> link1 (dynamic) -> ee (static), and base -> camera (static)."""
    buffer = TfBuffer(history_ns=history_ns)
    buffer.add(transform("world", "base", T0, Pose(BASE_IN_WORLD, axis_quat("x", BETA)), static=True))
    buffer.add(transform("link1", "ee", T0, Pose(EE_IN_LINK1, axis_quat("z", EE_YAW)), static=True))
    buffer.add(transform("base", "camera", T0, Pose(CAMERA_IN_BASE, axis_quat("z", CAMERA_YAW)), static=True))
    for time_ns in sample_times() if times is None else times:
        buffer.add(transform("base", "link1", time_ns, link1_pose(time_ns)))
    return buffer


def ee_in_world(time_ns: int) -> tuple[Vector, Vector]:
    """Closed form: translation by matrices, quaternion q_x(beta) * q_z(gamma) by half angles."""
    seconds = (time_ns - T0) / 1e9
    link1_origin = LINK1_OFFSET + VELOCITY * seconds
    translation = BASE_IN_WORLD + rot_x(BETA) @ (link1_origin + rot_z(OMEGA * seconds) @ EE_IN_LINK1)
    b, g = BETA / 2, (OMEGA * seconds + EE_YAW) / 2
    rotation = np.array(
        [math.cos(b) * math.cos(g), math.sin(b) * math.cos(g), -math.sin(b) * math.sin(g), math.cos(b) * math.sin(g)]
    )
    return translation, rotation


def assert_rotation(actual: Vector, expected: Vector) -> None:
    """Equal as rotations: q and -q are the same one."""
    sign = 1.0 if float(np.dot(actual, expected)) >= 0 else -1.0
    np.testing.assert_allclose(sign * actual, expected, rtol=0, atol=TOL)


def assert_pose(actual: Pose, translation: Vector, rotation: Vector) -> None:
    np.testing.assert_allclose(actual.translation, translation, rtol=0, atol=TOL)
    assert_rotation(actual.rotation, rotation)


# --- quaternion helpers ---------------------------------------------------------------


def test_xyzw_wxyz_round_trip() -> None:
    rng = np.random.default_rng(4)
    for q in rng.normal(size=(10, 4)):
        np.testing.assert_array_equal(wxyz_to_xyzw(xyzw_to_wxyz(q)), q)
        np.testing.assert_array_equal(xyzw_to_wxyz(wxyz_to_xyzw(q)), q)
    np.testing.assert_array_equal(xyzw_to_wxyz([1.0, 2.0, 3.0, 4.0]), [4.0, 1.0, 2.0, 3.0])


def test_ros_90_degrees_about_z_turns_x_into_y() -> None:
    h = math.sqrt(0.5)
    q = xyzw_to_wxyz([0.0, 0.0, h, h])
    np.testing.assert_allclose(q, [h, 0.0, 0.0, h], rtol=0, atol=TOL)
    np.testing.assert_allclose(quat_rotate(q, np.array([1.0, 0.0, 0.0])), [0.0, 1.0, 0.0], rtol=0, atol=TOL)
    np.testing.assert_allclose(Pose(np.zeros(3), q).apply([1.0, 0.0, 0.0]), [0.0, 1.0, 0.0], rtol=0, atol=TOL)


def test_multiply_applies_right_factor_first() -> None:
    """q_x(90) * q_z(90) takes x to z: z-rotation first (x -> y), then x-rotation (y -> z)."""
    q = quat_multiply(axis_quat("x", math.pi / 2), axis_quat("z", math.pi / 2))
    np.testing.assert_allclose(quat_rotate(q, np.array([1.0, 0.0, 0.0])), [0.0, 0.0, 1.0], rtol=0, atol=TOL)


def test_pose_compose_inverse_and_apply_agree_with_matrices() -> None:
    a = Pose(np.array([1.0, -2.0, 0.5]), axis_quat("x", 0.8))
    b = Pose(np.array([0.3, 0.1, -0.7]), axis_quat("z", -1.3))
    point = np.array([0.2, 0.4, -0.9])
    expected = a.translation + rot_x(0.8) @ (b.translation + rot_z(-1.3) @ point)
    np.testing.assert_allclose(a.compose(b).apply(point), expected, rtol=0, atol=TOL)
    np.testing.assert_allclose(a.inverse().apply(a.apply(point)), point, rtol=0, atol=TOL)
    identity = a.compose(b).compose(b.inverse()).compose(a.inverse())
    assert_pose(identity, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))


def test_pose_arrays_cannot_be_changed_behind_its_back() -> None:
    translation = np.array([1.0, 2.0, 3.0])
    pose = Pose(translation, np.array([1.0, 0.0, 0.0, 0.0]))
    translation[0] = 99.0
    assert pose.translation[0] == 1.0
    with pytest.raises(ValueError, match="read-only"):
        pose.translation[1] = 5.0


@pytest.mark.parametrize("u", [0.0, 0.25, 0.5, 1.0])
def test_slerp_about_a_fixed_axis_interpolates_the_angle(u: float) -> None:
    a0, a1 = 0.2, 1.9
    assert_rotation(slerp(axis_quat("y", a0), axis_quat("y", a1), u), axis_quat("y", a0 + u * (a1 - a0)))


@pytest.mark.parametrize("u", [0.25, 0.5, 0.75])
def test_slerp_treats_q_and_minus_q_alike(u: float) -> None:
    q0, q1 = axis_quat("z", 0.3), axis_quat("z", 1.1)
    assert_rotation(slerp(q0, -q1, u), axis_quat("z", 0.3 + u * 0.8))
    assert_rotation(slerp(-q0, q1, u), axis_quat("z", 0.3 + u * 0.8))


def test_slerp_takes_the_shorter_arc() -> None:
    """0 deg to 350 deg is 10 deg backwards: halfway is -5 deg, not 175 deg."""
    halfway = slerp(axis_quat("z", 0.0), axis_quat("z", math.radians(350)), 0.5)
    assert_rotation(halfway, axis_quat("z", math.radians(-5)))


@pytest.mark.parametrize("step", [1e-12, 0.0])
def test_slerp_of_nearly_or_exactly_equal_quaternions_is_finite_and_unit(step: float) -> None:
    q0, q1 = axis_quat("x", 0.5), axis_quat("x", 0.5 + step)
    for u in (0.0, 0.3, 1.0):
        for q in (slerp(q0, q1, u), slerp(q0, -q1, u)):
            assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-15
            assert_rotation(q, axis_quat("x", 0.5 + u * step))


# --- buffer lookups -------------------------------------------------------------------


def between_samples() -> list[int]:
    times = sample_times()
    return [times[3] + 1, (times[7] + times[8]) // 2, times[12] + 3_333_333, times[18] - 17]


@pytest.mark.parametrize("time_ns", between_samples())
def test_chain_lookup_between_samples_matches_closed_form(time_ns: int) -> None:
    result = robot_buffer().lookup("world", "ee", time_ns)
    assert result is not None
    assert_pose(result.pose, *ee_in_world(time_ns))


@pytest.mark.parametrize("time_ns", between_samples())
def test_inverse_lookup_maps_world_into_ee(time_ns: int) -> None:
    buffer = robot_buffer()
    world_in_ee = buffer.lookup("ee", "world", time_ns)
    ee_in_world_lookup = buffer.lookup("world", "ee", time_ns)
    assert world_in_ee is not None and ee_in_world_lookup is not None
    translation, rotation = ee_in_world(time_ns)
    point_in_world = np.array([0.7, -0.2, 1.4])
    seconds = (time_ns - T0) / 1e9
    world_to_ee_matrix = (rot_x(BETA) @ rot_z(OMEGA * seconds + EE_YAW)).T
    expected = world_to_ee_matrix @ (point_in_world - translation)
    np.testing.assert_allclose(world_in_ee.pose.apply(point_in_world), expected, rtol=0, atol=TOL)
    assert_rotation(world_in_ee.pose.rotation, rotation * np.array([1.0, -1.0, -1.0, -1.0]))
    assert world_in_ee.gap_ns == ee_in_world_lookup.gap_ns


@pytest.mark.parametrize("time_ns", between_samples())
def test_lookup_across_branches_through_common_ancestor(time_ns: int) -> None:
    """Camera in ee: up from ee to base, down from base to camera."""
    result = robot_buffer().lookup("ee", "camera", time_ns)
    assert result is not None
    seconds = (time_ns - T0) / 1e9
    ee_rotation_in_base = rot_z(OMEGA * seconds + EE_YAW)
    ee_origin_in_base = LINK1_OFFSET + VELOCITY * seconds + rot_z(OMEGA * seconds) @ EE_IN_LINK1
    translation = ee_rotation_in_base.T @ (CAMERA_IN_BASE - ee_origin_in_base)
    rotation = axis_quat("z", CAMERA_YAW - OMEGA * seconds - EE_YAW)
    assert_pose(result.pose, translation, rotation)


def test_gap_is_distance_to_nearer_bracketing_sample() -> None:
    times = sample_times()
    buffer = robot_buffer()
    exact = buffer.lookup("world", "ee", times[5])
    near_first = buffer.lookup("world", "ee", times[5] + 1_000)
    near_second = buffer.lookup("world", "ee", times[6] - 2_000)
    assert exact is not None and near_first is not None and near_second is not None
    assert (exact.gap_ns, near_first.gap_ns, near_second.gap_ns) == (0, 1_000, 2_000)
    static_only = buffer.lookup("world", "camera", times[5] + 1_000)
    assert static_only is not None and static_only.gap_ns == 0


@pytest.mark.parametrize(("offset_ns", "sample_index"), [(-25_000_000, 0), (40_000_000, -1)])
def test_outside_the_samples_the_nearest_is_used_and_the_gap_reported(offset_ns: int, sample_index: int) -> None:
    times = sample_times()
    edge_time = times[sample_index]
    result = robot_buffer().lookup("world", "ee", edge_time + offset_ns)
    assert result is not None
    assert_pose(result.pose, *ee_in_world(edge_time))
    assert result.gap_ns == abs(offset_ns)


def test_unconnected_or_unknown_frames_give_none() -> None:
    buffer = robot_buffer()
    buffer.add(transform("map", "odom", T0, Pose.identity()))
    assert buffer.lookup("world", "odom", T0) is None
    assert buffer.lookup("odom", "ee", T0) is None
    assert buffer.lookup("world", "nowhere", T0) is None
    assert buffer.lookup("map", "odom", T0) is not None


def test_out_of_order_adds_are_placed_in_time_order() -> None:
    times = sample_times()
    shuffled = times[:]
    random.Random(7).shuffle(shuffled)
    assert shuffled != times
    buffer = robot_buffer(shuffled)
    for time_ns in between_samples():
        result = buffer.lookup("world", "ee", time_ns)
        assert result is not None
        assert_pose(result.pose, *ee_in_world(time_ns))


def test_a_stamp_sent_again_replaces_the_sample() -> None:
    times = sample_times()
    buffer = robot_buffer()
    count = buffer.dynamic_sample_count()
    moved = Pose(link1_pose(times[4]).translation + 1.0, link1_pose(times[4]).rotation)
    assert buffer.add(transform("base", "link1", times[4], moved))
    result = buffer.lookup("base", "link1", times[4])
    assert result is not None
    assert_pose(result.pose, moved.translation, moved.rotation)
    assert buffer.dynamic_sample_count() == count


def test_prune_before_keeps_what_interpolation_needs() -> None:
    times = sample_times()
    buffer = robot_buffer()
    cut = times[10] + 4_000_000
    buffer.prune_before(cut)
    assert buffer.dynamic_sample_count() == len(times) - 10  # times[10] stays: it brackets ``cut``
    for time_ns in (cut, times[13] + 5):
        result = buffer.lookup("world", "ee", time_ns)
        assert result is not None
        assert_pose(result.pose, *ee_in_world(time_ns))
    buffer.prune_before(times[12])
    assert buffer.dynamic_sample_count() == len(times) - 12  # an exact sample needs none before it


def test_history_bounds_memory() -> None:
    history_ns = 100_000_000
    buffer = robot_buffer([T0 + k * PERIOD_NS for k in range(2_000)], history_ns=history_ns)
    assert buffer.dynamic_sample_count() == history_ns // PERIOD_NS + 1
    newest = T0 + 1_999 * PERIOD_NS
    result = buffer.lookup("world", "ee", newest - history_ns + PERIOD_NS // 2)
    assert result is not None
    assert result.gap_ns == PERIOD_NS // 2


def test_a_second_parent_is_reported_and_ignored() -> None:
    buffer = robot_buffer()
    before = buffer.lookup("world", "ee", T0)
    for k in range(3):
        assert not buffer.add(transform("camera", "link1", T0 + k, Pose.identity()))
    problems = buffer.problems()
    assert len(problems) == 1
    assert "3 transform(s) 'camera' -> 'link1' ignored" in problems[0]
    assert "already has parent 'base'" in problems[0]
    after = buffer.lookup("world", "ee", T0)
    assert before is not None and after is not None
    np.testing.assert_array_equal(after.pose.translation, before.pose.translation)
    assert buffer.frames()["link1"].parent == "base"


def test_loops_static_dynamic_mixes_and_bad_numbers_are_reported() -> None:
    buffer = robot_buffer()
    assert not buffer.add(transform("ee", "world", T0, Pose.identity()))
    assert not buffer.add(transform("base", "link1", T0, Pose.identity(), static=True))
    bad = transform("base", "tool", T0, Pose.identity())
    assert not buffer.add(TransformSample("base", "tool", bad.stamps, bad.translation, np.zeros(4), static=False))
    assert not buffer.add(TransformSample("base", "tool", bad.stamps, np.array([math.nan, 0, 0]), bad.rotation, False))
    assert not buffer.add(transform("base", "", T0, Pose.identity()))
    problems = buffer.problems()
    assert len(problems) == 4
    assert "loop" in problems[0]
    assert "both static and dynamic; kept the dynamic one" in problems[1]
    assert problems[2].startswith("2 transform(s) 'base' -> 'tool' ignored, first at 1700000000.000000000 s")
    assert buffer.lookup("world", "ee", T0) is not None
    assert problems[3].endswith("empty frame name, non-finite value or zero quaternion")
    assert buffer.lookup("base", "tool", T0) is None
    assert "" not in buffer.frames()


def test_frames_and_roots_describe_the_tree() -> None:
    buffer = robot_buffer()
    frames = buffer.frames()
    assert list(frames) == ["base", "camera", "ee", "link1"]
    assert [(f.parent, f.static) for f in frames.values()] == [
        ("world", True),
        ("base", True),
        ("link1", True),
        ("base", False),
    ]
    assert frames["link1"].pose is None
    camera = frames["camera"].pose
    assert camera is not None
    assert_pose(camera, CAMERA_IN_BASE, axis_quat("z", CAMERA_YAW))
    assert buffer.roots() == ["world"]


def test_latest_static_transform_wins() -> None:
    buffer = robot_buffer()
    moved = np.array([0.0, 0.6, 1.0])
    assert buffer.add(transform("base", "camera", T0 - 5, Pose(moved, axis_quat("z", 0.1)), static=True))
    camera = buffer.frames()["camera"].pose
    assert camera is not None
    assert_pose(camera, moved, axis_quat("z", 0.1))


def test_a_lookup_is_settled_once_every_moving_edge_reached_its_time() -> None:
    times = sample_times(5)
    buffer = robot_buffer(times)
    past, beyond = times[-1] - 1, times[-1] + 1
    never = -(2**62)  # no input time has passed anything
    assert buffer.settled("world", "ee", past, never)
    assert not buffer.settled("world", "ee", beyond, never)  # link1 has nothing at or after it yet
    assert not buffer.settled("camera", "ee", beyond, never)  # either way round, across branches
    assert buffer.settled("world", "camera", beyond, never)  # only static edges between them
    assert buffer.settled("world", "ee", beyond, beyond)  # input time has passed it
    assert buffer.settled("world", "nowhere", beyond, never)  # not connected: nothing to wait for
    buffer.add(transform("base", "link1", beyond + 5, link1_pose(beyond + 5)))
    assert buffer.settled("world", "ee", beyond, never)
