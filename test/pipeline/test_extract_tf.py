"""decode + extract of TF: quaternions in wxyz, good transforms kept beside flagged bad ones,
static or not by topic, and ROS 1's legacy tf message decoded like tf2's."""

from __future__ import annotations

import numpy as np
import pytest

from ortf_ros.pipeline.samples import (
    BadMessage,
    Serialization,
    TransformSample,
)
from support.messages import SERIALIZATIONS, check_header_stamps, one, run, tf_message, transform


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_tf_quaternion_becomes_wxyz(ser: Serialization) -> None:
    msg = tf_message(ser, transform(ser, "world", "base", (1.0, 2.0, 3.0), (0.0, 0.0, 0.7071, 0.7071)))
    sample = one(run(msg, "tf2_msgs/msg/TFMessage", ser, topic="/tf"), TransformSample)
    assert (sample.parent, sample.child) == ("world", "base")
    np.testing.assert_allclose(sample.rotation, [0.70710678, 0.0, 0.0, 0.70710678], atol=1e-8)
    np.testing.assert_array_equal(sample.translation, [1.0, 2.0, 3.0])
    assert sample.static is False
    check_header_stamps(sample.stamps, "world")
    # the rotation really is +90 degrees about z: it takes x to y
    w, x, y, z = sample.rotation
    rotated_x = np.array([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)])
    np.testing.assert_allclose(rotated_x, [0.0, 1.0, 0.0], atol=1e-8)


def test_tf_keeps_good_transforms_and_flags_bad_ones() -> None:
    msg = tf_message(
        "cdr",
        transform("cdr", "/world", "/base", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 2.0)),
        transform("cdr", "world", "arm", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0)),
        transform("cdr", "world", "cam", (0.0, 0.0, 0.0), (np.nan, 0.0, 0.0, 1.0)),
        transform("cdr", "world", "tool", (np.inf, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)),
        transform("cdr", "", "gripper", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)),
        transform("cdr", "base", "flange", (0.5, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)),
    )
    samples = run(msg, "tf2_msgs/msg/TFMessage", topic="/tf")
    assert [type(s).__name__ for s in samples] == [
        "TransformSample",
        "BadMessage",
        "BadMessage",
        "BadMessage",
        "BadMessage",
        "TransformSample",
    ]
    first, last = samples[0], samples[-1]
    assert isinstance(first, TransformSample) and isinstance(last, TransformSample)
    assert (first.parent, first.child) == ("world", "base")  # leading "/" dropped, as tf2 does
    np.testing.assert_array_equal(first.rotation, [1.0, 0.0, 0.0, 0.0])  # normalised
    np.testing.assert_array_equal(last.rotation, [0.0, 1.0, 0.0, 0.0])  # xyzw (1,0,0,0) -> wxyz (0,1,0,0)
    reasons = [s.reason for s in samples if isinstance(s, BadMessage)]
    assert "'world' -> 'arm'" in reasons[0] and "not a rotation" in reasons[0]
    assert "'world' -> 'cam'" in reasons[1] and "not a rotation" in reasons[1]
    assert "non-finite translation" in reasons[2]
    assert "empty frame id" in reasons[3]
    assert all(r.startswith("/tf (tf2_msgs/msg/TFMessage): ") for r in reasons)


@pytest.mark.parametrize(
    ("topic", "static_tf", "expected"),
    [
        ("/tf", None, False),
        ("/tf_static", None, True),
        ("/robot1/tf_static", None, True),
        ("/tf", True, True),
        ("/tf_static", False, False),
    ],
)
def test_static_flag(topic: str, static_tf: bool | None, expected: bool) -> None:
    msg = tf_message("cdr", transform("cdr", "world", "base", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
    sample = one(run(msg, "tf2_msgs/msg/TFMessage", topic=topic, static_tf=static_tf), TransformSample)
    assert sample.static is expected


@pytest.mark.parametrize("ser", SERIALIZATIONS)
@pytest.mark.parametrize("msgtype", ["tf/tfMessage", "tf/msg/tfMessage"])
def test_legacy_tf_message_decodes_like_tf2(msgtype: str, ser: Serialization) -> None:
    """No registration: the decoder knows ROS 1's tf/tfMessage by itself."""
    msg = tf_message(ser, transform(ser, "/odom", "/base_footprint", (1.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
    samples = run(msg, "tf/msg/tfMessage", ser, topic="/tf", msgtype=msgtype)
    sample = one(samples, TransformSample)
    assert (sample.parent, sample.child) == ("odom", "base_footprint")
