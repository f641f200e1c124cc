"""The fast path: fixed-layout messages read straight from their CDR bytes give what the full
decode gives, on an analytic bag and on layouts that change, clash or are cut."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.fastpath import SampleDecoder
from ortf_ros.pipeline.samples import (
    BadMessage,
    RawMessage,
    Stamps,
    TransformSample,
    WrenchSample,
)
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.scene import BagFormat
from support.messages import (
    HEADER_NSEC,
    HEADER_SEC,
    RECEIVE_NS,
    assert_same_samples,
    build,
    check_header_stamps,
    full_way,
    header,
    joint_state_raw,
    one,
    serialize,
    tf_message,
    transform,
    vector3,
)


@pytest.mark.parametrize("fmt", ["mcap", "sqlite3", "ros1"])
def test_fast_path_equals_the_full_decode_on_an_analytic_bag(tmp_path: Path, fmt: BagFormat) -> None:
    write_teleop_bag(tmp_path / "bag", fmt, duration_s=0.5, with_depth=False)
    with BagSource(tmp_path / "bag") as source:
        kinds = ("/JointState", "/WrenchStamped", "/TFMessage", "/tfMessage")
        topics = {t.topic for t in source.topics() if t.msgtype.endswith(kinds)}
        decoder = SampleDecoder(Decoder())
        count = 0
        for raw in source.messages(topics):
            assert_same_samples(decoder.samples(raw), full_way(raw))
            count += 1
    assert count > 500
    if fmt == "ros1":
        assert decoder.fast_reads == 0  # ROS 1 serialization always goes the full way
    else:
        # All but each topic's first message, and the first of the finger-only joint states (a layout of their own).
        assert decoder.fast_reads == count - len(topics) - 1


def test_fast_path_follows_a_layout_that_changes_mid_topic() -> None:
    a, b = ["shoulder", "elbow"], ["shoulder", "elbaw"]  # same lengths, other bytes
    good = joint_state_raw(a, [0.1, 0.2], [1.0, 2.0])
    messages = [
        good,
        joint_state_raw(a, [0.3, np.nan], [-1.0, np.inf], sec=HEADER_SEC + 1),  # same layout: fast
        joint_state_raw(b, [0.5, 0.6], [3.0, 4.0]),  # other names, same length
        joint_state_raw(a, [0.5, 0.6], [3.0, 4.0], frame="base_lonk"),  # other frame id, same length
        joint_state_raw(a, [0.5, 0.6]),  # no velocities: shorter
        joint_state_raw([*a, "wrist"], [0.5, 0.6, 0.7], [1.0, 2.0, 3.0]),  # a joint more
        joint_state_raw(a, [0.5], [1.0, 2.0]),  # position count disagrees: bad, same length as none other
        RawMessage(good.topic, good.msgtype, good.receive_ns, good.data[:-8]),  # truncated: bad
        joint_state_raw(a, [0.7, 0.8], [5.0, 6.0], little_endian=False),  # big-endian CDR: full way
        joint_state_raw(a, [0.9, 1.0], [7.0, 8.0], sec=HEADER_SEC + 2),  # back to the first layout: learned again
        joint_state_raw(a, [1.1, 1.2], [9.0, 9.5], sec=HEADER_SEC + 3),  # and then fast
    ]
    decoder = SampleDecoder(Decoder())
    for raw in messages:
        assert_same_samples(decoder.samples(raw), full_way(raw))
    assert decoder.fast_reads == 2
    assert isinstance(decoder.samples(messages[7])[0], BadMessage)  # still counted as undecodable


def test_fast_path_skips_a_type_the_recording_defines_its_own_way() -> None:
    plain = Decoder()
    plain.register("std_msgs/msg/Header", "builtin_interfaces/Time stamp\nstring frame_id\n", "ros2msg")
    assert plain.has_jazzy_layout("sensor_msgs/msg/JointState")  # the same definition changes nothing
    changed = Decoder()
    changed.register("std_msgs/msg/Header", "builtin_interfaces/Time stamp\nstring frame_id\nuint32 seq\n", "ros2msg")
    assert not changed.has_jazzy_layout("sensor_msgs/msg/JointState")
    assert changed.has_jazzy_layout("std_msgs/msg/String")
    decoder = SampleDecoder(changed)
    for sec in range(3):
        decoder.samples(joint_state_raw(["a"], [1.0], sec=sec))
    assert decoder.fast_reads == 0


def test_fast_path_reads_wrenches_and_still_reports_a_cut_one() -> None:
    def wrench_raw(force: float, frame: str = "ft_sensor") -> RawMessage:
        wrench = build(
            "cdr", "geometry_msgs/msg/Wrench", force=vector3("cdr", force, 2.0, 3.0), torque=vector3("cdr", 4, 5, 6)
        )
        msg = build("cdr", "geometry_msgs/msg/WrenchStamped", header=header("cdr", frame), wrench=wrench)
        data = serialize(msg, "geometry_msgs/msg/WrenchStamped", "cdr")
        return RawMessage("/ft", "geometry_msgs/msg/WrenchStamped", RECEIVE_NS, data)

    first = wrench_raw(1.0)
    # ft_sensor_2 pads to the same length as ft_sensor: a layout that changes at one length.
    messages = [first, wrench_raw(-1.5), wrench_raw(2.5, "ft_sensor_2"), wrench_raw(3.5), wrench_raw(4.5)]
    messages.append(RawMessage(first.topic, first.msgtype, first.receive_ns, first.data[:30]))
    decoder = SampleDecoder(Decoder())
    for raw in messages:
        assert_same_samples(decoder.samples(raw), full_way(raw))
    assert decoder.fast_reads == 2
    wrench = one(decoder.samples(wrench_raw(7.0)), WrenchSample)
    np.testing.assert_array_equal(wrench.force, [7.0, 2.0, 3.0])
    np.testing.assert_array_equal(wrench.torque, [4.0, 5.0, 6.0])
    check_header_stamps(wrench.stamps, "ft_sensor")


def test_fast_path_reads_transforms_and_leaves_the_bad_ones_to_the_full_way() -> None:
    def tf_raw(*transforms: Any, sec: int = 0) -> RawMessage:
        data = serialize(tf_message("cdr", *transforms), "tf2_msgs/msg/TFMessage", "cdr")
        return RawMessage("/tf", "tf2_msgs/msg/TFMessage", RECEIVE_NS + sec, data)

    def arm(x: float, xyzw: tuple[float, ...] = (0.0, 0.0, 0.6, 0.8), child: str = "flange") -> list[Any]:
        return [
            transform("cdr", "world", "base", (x, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)),
            transform("cdr", "base", child, (0.1, 0.2, x), xyzw),
        ]

    messages = [
        tf_raw(*arm(0.0)),
        tf_raw(*arm(0.5), sec=1),  # fast
        tf_raw(*arm(1.0, (0.0, 0.0, 3.0, 4.0)), sec=2),  # fast: normalised as extract does
        tf_raw(*arm(1.5, (0.0, 0.0, 0.0, 0.0))),  # not a rotation: the full way reports it
        tf_raw(*arm(np.nan)),  # a NaN translation: the full way
        tf_raw(*arm(2.0, child="flango")),  # other child, same length: learned anew
        tf_raw(*arm(2.5, child="flango"), sec=3),  # and then fast
        tf_raw(*arm(3.0)[:1]),  # one transform: shorter, a layout of its own
        tf_raw(),  # no transform at all
    ]
    decoder = SampleDecoder(Decoder())
    for raw in messages:
        assert_same_samples(decoder.samples(raw), full_way(raw))
    assert decoder.fast_reads == 3
    assert [type(s) for s in decoder.samples(messages[3])] == [TransformSample, BadMessage]
    flange = decoder.samples(messages[2])[1]
    assert isinstance(flange, TransformSample)
    np.testing.assert_array_equal(flange.rotation, [0.8, 0.0, 0.0, 0.6])  # (x, y, z, w) = (0, 0, 3, 4) / 5
    assert flange.stamps == Stamps(RECEIVE_NS + 2, HEADER_SEC * 1_000_000_000 + HEADER_NSEC, "base")
