"""Sampling policies at step times and the alignment error each choice reports."""

from __future__ import annotations

import numpy as np
import pytest

from ortf_ros.pipeline.sync import StreamSampler, lerp_array, step_times

MS = 1_000_000


def sampler(policy: str) -> StreamSampler[np.ndarray]:
    s: StreamSampler[np.ndarray] = StreamSampler("joints", policy, interpolate=lerp_array)  # type: ignore[arg-type]
    for time_ms, value in ((10, 1.0), (20, 2.0), (40, 4.0)):
        s.add(time_ms * MS, np.array([value]))
    return s


@pytest.mark.parametrize(
    ("policy", "t_ms", "value", "time_ms", "error_ms", "index"),
    [
        ("latest", 25, 2.0, 20, 5, 1),
        ("latest", 20, 2.0, 20, 0, 1),
        ("latest", 45, 4.0, 40, 5, 2),
        ("nearest", 25, 2.0, 20, 5, 1),
        ("nearest", 33, 4.0, 40, 7, 2),
        ("nearest", 5, 1.0, 10, 5, 0),
        ("linear", 30, 3.0, 20, 10, 1),
        ("linear", 35, 3.5, 40, 5, 2),
        ("linear", 20, 2.0, 20, 0, 1),
        ("linear", 50, 4.0, 40, 10, 2),
    ],
)
def test_policies(policy: str, t_ms: int, value: float, time_ms: int, error_ms: int, index: int) -> None:
    got = sampler(policy).sample(t_ms * MS)
    assert got is not None
    assert (float(got.value[0]), got.time_ns, got.error_ns, got.index) == (value, time_ms * MS, error_ms * MS, index)


def test_nothing_before_the_first_sample_for_latest_and_linear() -> None:
    assert sampler("latest").sample(5 * MS) is None
    assert sampler("linear").sample(5 * MS) is None
    assert StreamSampler[int]("empty", "nearest").sample(0) is None


def test_ready_waits_for_a_later_sample_only_where_the_policy_can_use_one() -> None:
    latest, nearest = sampler("latest"), sampler("nearest")
    assert latest.ready(45 * MS, watermark_ns=45 * MS)
    assert not nearest.ready(45 * MS, watermark_ns=44 * MS)  # a closer sample may still come
    assert nearest.ready(45 * MS, watermark_ns=45 * MS)
    assert nearest.ready(30 * MS, watermark_ns=0)  # 40 ms is already there


def test_prune_keeps_indices_and_what_later_steps_need() -> None:
    s = sampler("latest")
    s.add(50 * MS, np.array([5.0]))
    s.prune_before(41 * MS)
    assert len(s) == 2 and s.total == 4
    got = s.sample(45 * MS)
    assert got is not None and got.index == 2 and float(got.value[0]) == 4.0


def test_out_of_order_samples_are_refused_and_counted() -> None:
    s = sampler("nearest")
    assert not s.add(30 * MS, np.array([3.0]))
    assert s.out_of_order == 1 and s.total == 3


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown sampling policy 'mean'"):
        StreamSampler("x", "mean")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="linear interpolation needs a numeric stream"):
        StreamSampler("x", "linear")


def test_step_times_are_a_lazy_grid() -> None:
    grid = step_times(0, 10**18, 30.0)
    assert isinstance(grid, range) and grid[1] == 33_333_333 and len(grid) > 10**9


def test_oldest_and_next_time_drive_camera_clocked_steps() -> None:
    s = sampler("nearest")
    assert s.oldest_ns == 10 * MS
    assert (s.next_time(11 * MS), s.next_time(20 * MS), s.next_time(41 * MS)) == (20 * MS, 20 * MS, None)
