"""TF for the assembler: quaternion and pose helpers, and a buffer that answers lookups.

Conventions are ORTF's: quaternions are (w, x, y, z), and the pose of frame ``c`` in
frame ``p`` maps points from ``c`` to ``p`` (p_parent = T * p_child). ROS messages carry
(x, y, z, w); ``xyzw_to_wxyz`` is the one place that order is changed.

The buffer is pure Python over numpy, so the bag converter and the live recorder share
it and tests drive it with hand-made samples. Bad TF input (a frame with two parents, a
loop, NaNs) is counted and reported by ``problems()``, never raised: one bad publisher
should not stop a conversion that needs other frames.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from ortf_ros.format.units import NS
from ortf_ros.pipeline.samples import TransformRun, TransformSample

Vector = npt.NDArray[np.float64]

DEFAULT_HISTORY_NS = 10_000_000_000
"""Dynamic history kept per edge behind its newest sample; tf2's default cache time."""

_NLERP_BELOW_RAD = 1e-6
"""At zero angle slerp's sin ratio is 0/0; below this, nlerp's error (~angle**3) is below float precision."""


def _as_vector(values: npt.ArrayLike, size: int) -> Vector:
    vector = np.array(values, dtype=np.float64)
    if vector.shape != (size,):
        raise ValueError(f"expected {size} numbers, got shape {vector.shape}")
    return vector


def xyzw_to_wxyz(q: npt.ArrayLike) -> Vector:
    """ROS order (x, y, z, w) to ORTF order (w, x, y, z)."""
    return np.roll(_as_vector(q, 4), 1)


def wxyz_to_xyzw(q: npt.ArrayLike) -> Vector:
    """ORTF order (w, x, y, z) to ROS order (x, y, z, w)."""
    return np.roll(_as_vector(q, 4), -1)


# The quaternion helpers work on Python floats: for 3- and 4-vectors, numpy's per-call
# overhead costs several times the arithmetic, and a TF lookup runs for every step.


def quat_multiply(a: Vector, b: Vector) -> Vector:
    """Hamilton product a * b: the rotation b followed by a."""
    aw, ax, ay, az = a.tolist()
    bw, bx, by, bz = b.tolist()
    return np.array(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def quat_conjugate(q: Vector) -> Vector:
    """The inverse rotation of a unit quaternion."""
    w, x, y, z = q.tolist()
    return np.array([w, -x, -y, -z])


def quat_rotate(q: Vector, v: Vector) -> Vector:
    """Rotate vector ``v`` by unit quaternion ``q`` without building a matrix: v + 2 (w u x v + u x (u x v))."""
    w, x, y, z = q.tolist()
    vx, vy, vz = v.tolist()
    cx, cy, cz = y * vz - z * vy, z * vx - x * vz, x * vy - y * vx  # u x v
    dx, dy, dz = y * cz - z * cy, z * cx - x * cz, x * cy - y * cx  # u x (u x v)
    return np.array([vx + 2.0 * (w * cx + dx), vy + 2.0 * (w * cy + dy), vz + 2.0 * (w * cz + dz)])


def quat_normalize(q: Vector) -> Vector:
    """Unit quaternion; TF publishers send slightly non-unit ones, and products drift."""
    w, x, y, z = q.tolist()
    norm = math.sqrt(w * w + x * x + y * y + z * z)
    if not math.isfinite(norm) or norm == 0.0:
        raise ValueError(f"cannot normalize quaternion {q.tolist()}")
    return np.array([w / norm, x / norm, y / norm, z / norm])


def slerp(q0: Vector, q1: Vector, u: float) -> Vector:
    """Rotation a fraction ``u`` of the way from ``q0`` to ``q1``, along the shorter arc.

    q and -q are the same rotation: ``q1`` is flipped when it lies in the other
    hemisphere, or the result would swing the long way round. The half-angle comes
    from atan2, which stays accurate for nearly equal quaternions where acos does not.
    """
    a, b = q0.tolist(), q1.tolist()
    if sum(x * y for x, y in zip(a, b, strict=True)) < 0.0:
        b = [-y for y in b]
    apart = math.sqrt(sum((y - x) ** 2 for x, y in zip(a, b, strict=True)))
    together = math.sqrt(sum((y + x) ** 2 for x, y in zip(a, b, strict=True)))
    half_angle = 2.0 * math.atan2(apart, together)
    if half_angle < _NLERP_BELOW_RAD:
        wa, wb = 1.0 - u, u
    else:
        sin_half = math.sin(half_angle)
        wa, wb = math.sin((1.0 - u) * half_angle) / sin_half, math.sin(u * half_angle) / sin_half
    return quat_normalize(np.array([wa * x + wb * y for x, y in zip(a, b, strict=True)]))


@dataclass(frozen=True, eq=False)
class Pose:
    """A rigid transform p_parent = R * p_child + t; rotation (w, x, y, z), unit.

    The arrays are copied and made read-only, so a Pose held by the buffer cannot be
    changed through an array a caller still holds. (No ``==``: float poses are compared
    with a tolerance, not exactly.)
    """

    translation: Vector
    rotation: Vector

    def __post_init__(self) -> None:
        for name, size in (("translation", 3), ("rotation", 4)):
            vector = _as_vector(getattr(self, name), size)
            vector.setflags(write=False)
            object.__setattr__(self, name, vector)

    @classmethod
    def _of_new_arrays(cls, translation: Vector, rotation: Vector) -> Pose:
        """A pose of arrays nobody else holds (this module's results): no copy needed."""
        pose = object.__new__(cls)
        for name, vector in (("translation", translation), ("rotation", rotation)):
            vector.setflags(write=False)
            object.__setattr__(pose, name, vector)
        return pose

    @classmethod
    def identity(cls) -> Pose:
        return cls(np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))

    def compose(self, other: Pose) -> Pose:
        """self * other: ``other`` maps c -> b and ``self`` maps b -> a, the result c -> a."""
        translation = self.translation + quat_rotate(self.rotation, other.translation)
        return Pose._of_new_arrays(translation, quat_normalize(quat_multiply(self.rotation, other.rotation)))

    def inverse(self) -> Pose:
        rotation = quat_conjugate(self.rotation)
        return Pose._of_new_arrays(-quat_rotate(rotation, self.translation), rotation)

    def apply(self, point: npt.ArrayLike) -> Vector:
        """The point given in the child frame, expressed in the parent frame."""
        return self.translation + quat_rotate(self.rotation, _as_vector(point, 3))


def interpolate_pose(p0: Pose, p1: Pose, u: float) -> Pose:
    """Lerp the translation and slerp the rotation, ``u`` in [0, 1]."""
    translation = p0.translation + u * (p1.translation - p0.translation)
    return Pose._of_new_arrays(translation, slerp(p0.rotation, p1.rotation, u))


@dataclass(frozen=True)
class TfLookup:
    """A lookup's pose and how far from the asked time the TF data behind it was.

    ``gap_ns`` is the largest, over the dynamic edges used, of the distance between the
    asked time and the nearest sample used: 0 at an exact sample, the distance to the
    nearer bracketing sample when interpolating, the distance to the end sample when
    the time is outside the edge's samples. Static edges add no gap.
    """

    pose: Pose
    gap_ns: int


@dataclass(frozen=True)
class TfFrame:
    """One child frame of the tree, as the manifest describes it."""

    parent: str
    static: bool
    pose: Pose | None  # the fixed transform of a static frame; None for dynamic ones


@dataclass
class _Edge:
    """A child's transform in its one parent: the latest pose if static, else a time-ordered history."""

    parent: str
    static: bool
    times: list[int] = field(default_factory=list)
    poses: list[Pose] = field(default_factory=list)

    def insert(self, time_ns: int, pose: Pose) -> None:
        """Keep samples sorted by time: bags interleave publishers, so adds come slightly out of order."""
        if self.static:
            self.times[:], self.poses[:] = [time_ns], [pose]
            return
        index = bisect_left(self.times, time_ns)
        if index < len(self.times) and self.times[index] == time_ns:
            self.poses[index] = pose  # the same stamp sent again: the latest wins, as in tf2
        else:
            self.times.insert(index, time_ns)
            self.poses.insert(index, pose)

    def insert_all(self, times_ns: list[int], poses: list[Pose]) -> None:
        """``insert`` each in turn; in one go when they follow the samples held in time order."""
        if not self.static and (not self.times or times_ns[0] > self.times[-1]) and _increasing(times_ns):
            self.times += times_ns
            self.poses += poses
            return
        for time_ns, pose in zip(times_ns, poses, strict=True):
            self.insert(time_ns, pose)

    def prune_before(self, time_ns: int) -> None:
        """Drop samples no lookup at ``time_ns`` or later needs: all but the last one at or before it."""
        keep_from = bisect_right(self.times, time_ns) - 1
        if keep_from > 0:
            del self.times[:keep_from]
            del self.poses[:keep_from]

    def at(self, time_ns: int) -> tuple[Pose, int]:
        """The pose at ``time_ns`` and its gap (see ``TfLookup``); nearest sample outside the range."""
        if self.static:
            return self.poses[0], 0
        index = bisect_left(self.times, time_ns)
        if index < len(self.times) and self.times[index] == time_ns:
            return self.poses[index], 0
        if index == 0:
            return self.poses[0], self.times[0] - time_ns
        if index == len(self.times):
            return self.poses[-1], time_ns - self.times[-1]
        t0, t1 = self.times[index - 1], self.times[index]
        pose = interpolate_pose(self.poses[index - 1], self.poses[index], (time_ns - t0) / (t1 - t0))
        return pose, min(time_ns - t0, t1 - time_ns)


def _increasing(times_ns: list[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(times_ns))


_Reason = Literal["second parent", "static and dynamic", "loop", "invalid"]


@dataclass
class _Rejected:
    """Transforms the buffer refused for one reason on one edge: counted, so memory stays bounded."""

    first_ns: int
    count: int = 0


def _format_ns(time_ns: int) -> str:
    seconds, nanoseconds = divmod(time_ns, NS)
    return f"{seconds}.{nanoseconds:09d} s"


def _sample_time(sample: TransformSample) -> int:
    """TF is stamped by its publisher; the receive time stands in only when there is no header."""
    return sample.stamps.header_ns if sample.stamps.header_ns is not None else sample.stamps.receive_ns


class TfBuffer:
    """Static and dynamic transforms, looked up at any time between any two connected frames.

    Memory is bounded by ``history_ns``: each dynamic edge keeps its samples from
    ``history_ns`` before its newest one (plus one older sample to interpolate from).
    ``prune_before`` drops more once the caller knows it will not look further back.
    """

    def __init__(self, history_ns: int = DEFAULT_HISTORY_NS) -> None:
        if history_ns < 0:
            raise ValueError(f"history_ns must be >= 0, got {history_ns}")
        self._history_ns = history_ns
        self._edges: dict[str, _Edge] = {}
        self._rejected: dict[tuple[_Reason, str, str], _Rejected] = {}

    def add(self, sample: TransformSample) -> bool:
        """Store a transform; False (and a line in ``problems()``) when it was refused.

        The bool lets the caller count refused transforms per topic in its summary.
        """
        time_ns = _sample_time(sample)
        try:
            pose = Pose(sample.translation, quat_normalize(_as_vector(sample.rotation, 4)))
        except ValueError:
            return self._reject("invalid", sample.parent, sample.child, time_ns)
        if not np.all(np.isfinite(pose.translation)):
            return self._reject("invalid", sample.parent, sample.child, time_ns)
        edge = self._edge(sample.parent, sample.child, sample.static, time_ns)
        if edge is None:
            return False
        edge.insert(time_ns, pose)
        if not edge.static:
            edge.prune_before(edge.times[-1] - self._history_ns)
        return True

    def add_run(self, run: TransformRun) -> int:
        """Store an edge's transforms as ``add`` would one by one (the fast path has checked
        their numbers); returns how many were stored: all or, when the edge is refused, none."""
        count = len(run.header_ns)
        edge = self._edge(run.parent, run.child, run.static, int(run.header_ns[0]), count)
        if edge is None:
            return 0
        w, x, y, z = run.rotation.T
        norm = np.sqrt(w * w + x * x + y * y + z * z)  # (as quat_normalize: the same operations, the same bits)
        rotations = run.rotation / norm[:, np.newaxis]
        poses = [Pose._of_new_arrays(t, r) for t, r in zip(run.translation.copy(), rotations, strict=True)]
        edge.insert_all(run.header_ns.tolist(), poses)
        if not edge.static:
            edge.prune_before(edge.times[-1] - self._history_ns)
        return count

    def _edge(self, parent: str, child: str, static: bool, time_ns: int, count: int = 1) -> _Edge | None:
        """The edge ``count`` transforms from ``time_ns`` on go to (made with the first);
        None, with them counted as refused, when they may not."""
        edge = self._edges.get(child)
        refused: _Reason | None = None
        if not parent or not child:
            refused = "invalid"
        elif edge is None:
            if child in self._chain(parent):
                refused = "loop"
            else:
                edge = self._edges[child] = _Edge(parent, static)
        elif edge.parent != parent:
            refused = "second parent"
        elif edge.static != static:
            refused = "static and dynamic"
        if refused is None:
            return edge
        self._reject(refused, parent, child, time_ns, count)
        return None

    def prune_history(self, history_ns: int) -> None:
        """Forget dynamic samples more than ``history_ns`` before their edge's newest: a tree
        kept between episodes, pruned on the stamps' own clock (which need not be the
        receive times': ``pipeline.clock_offsets``)."""
        for edge in self._edges.values():
            if not edge.static and edge.times:
                edge.prune_before(edge.times[-1] - history_ns)

    def prune_before(self, time_ns: int) -> None:
        """Forget dynamic samples that lookups at ``time_ns`` or later no longer need."""
        for edge in self._edges.values():
            if not edge.static:
                edge.prune_before(time_ns)

    def dynamic_sample_count(self) -> int:
        """How many dynamic samples are held: what ``history_ns`` and ``prune_before`` bound."""
        return sum(len(edge.times) for edge in self._edges.values() if not edge.static)

    def lookup(self, target: str, source: str, time_ns: int) -> TfLookup | None:
        """Pose of ``source`` in ``target`` (p_target = T * p_source) at ``time_ns``.

        Walks up from both frames to their nearest common ancestor, so it works across
        branches and in either direction. None when the frames are not connected; a
        frame in itself is the identity, whether the buffer knows it or not.
        """
        if target == source:
            return TfLookup(Pose.identity(), 0)
        source_chain = self._chain(source)
        target_chain = set(self._chain(target))
        ancestor = next((frame for frame in source_chain if frame in target_chain), None)
        if ancestor is None:
            return None
        source_in_ancestor, source_gap = self._pose_in_ancestor(source, ancestor, time_ns)
        target_in_ancestor, target_gap = self._pose_in_ancestor(target, ancestor, time_ns)
        if target_in_ancestor is None:  # (the usual case: the target is the source's ancestor)
            pose = source_in_ancestor or Pose.identity()
        else:
            inverse = target_in_ancestor.inverse()
            pose = inverse if source_in_ancestor is None else inverse.compose(source_in_ancestor)
        return TfLookup(pose, max(source_gap, target_gap))

    def settled(self, target: str, source: str, time_ns: int, watermark_ns: int) -> bool:
        """Whether ``lookup(target, source, time_ns)`` can no longer change as transforms
        arrive: every moving edge between the frames has a transform at or after
        ``time_ns``, or input time has passed it (``watermark_ns``, as for the streams a
        step samples). Frames not connected yet are settled: the step goes without a pose."""
        if watermark_ns >= time_ns or target == source:
            return True
        source_chain, target_chain = self._chain(source), self._chain(target)
        ancestor = next((frame for frame in source_chain if frame in target_chain), None)
        if ancestor is None:
            return True
        for chain in (source_chain, target_chain):
            for frame in chain[: chain.index(ancestor)]:
                edge = self._edges[frame]
                if not edge.static and edge.times[-1] < time_ns:
                    return False
        return True

    def frames(self) -> dict[str, TfFrame]:
        """Every child frame with its parent, sorted by name; static ones with their fixed pose."""
        return {
            child: TfFrame(edge.parent, edge.static, edge.poses[0] if edge.static else None)
            for child, edge in sorted(self._edges.items())
        }

    def roots(self) -> list[str]:
        """Frames that are a parent but nobody's child: the candidates for ``world``."""
        return sorted({edge.parent for edge in self._edges.values()} - self._edges.keys())

    def problems(self) -> list[str]:
        """One line per kind of refused transform and edge, for the conversion summary."""
        return [
            self._describe(reason, parent, child, rejected)
            for (reason, parent, child), rejected in self._rejected.items()
        ]

    def _chain(self, frame: str) -> list[str]:
        """``frame`` and its ancestors up to the root; finite because ``add`` refuses loops."""
        chain = [frame]
        while (edge := self._edges.get(chain[-1])) is not None:
            chain.append(edge.parent)
        return chain

    def _pose_in_ancestor(self, frame: str, ancestor: str, time_ns: int) -> tuple[Pose | None, int]:
        """The pose of ``frame`` in ``ancestor`` and its gap; None for the identity (the
        frame is the ancestor), so that a lookup composes no more poses than it must."""
        pose: Pose | None = None
        gap_ns = 0
        while frame != ancestor:
            edge = self._edges[frame]
            edge_pose, edge_gap = edge.at(time_ns)
            pose, gap_ns = edge_pose if pose is None else edge_pose.compose(pose), max(gap_ns, edge_gap)
            frame = edge.parent
        return pose, gap_ns

    def _reject(self, reason: _Reason, parent: str, child: str, time_ns: int, count: int = 1) -> bool:
        """Count ``count`` refused transforms (False, for ``add`` to return)."""
        rejected = self._rejected.setdefault((reason, parent, child), _Rejected(time_ns))
        rejected.count += count
        return False

    def _describe(self, reason: _Reason, parent: str, child: str, rejected: _Rejected) -> str:
        ignored = (
            f"{rejected.count} transform(s) '{parent}' -> '{child}' ignored, first at {_format_ns(rejected.first_ns)}"
        )
        if reason == "second parent":
            return f"{ignored}: '{child}' already has parent '{self._edges[child].parent}' (a TF frame has one parent)"
        if reason == "static and dynamic":
            first = "static" if self._edges[child].static else "dynamic"
            return f"{ignored}: '{child}' is published both static and dynamic; kept the {first} one, which came first"
        if reason == "loop":
            return f"{ignored}: they would close a loop in the TF tree"
        return f"{ignored}: empty frame name, non-finite value or zero quaternion"
