"""decode: type names normalised, truncated or garbage bytes as bad messages, and the
definitions a recording carries registered (msg, IDL, replacing a different one, broken ones)."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

from ortf_ros.pipeline.decode import Decoder, canonical_msgtype, normalize_msgtype
from ortf_ros.pipeline.extract import extract
from ortf_ros.pipeline.samples import (
    BadMessage,
    JointStateSample,
    RawMessage,
    Serialization,
)
from support.messages import DECODER, RECEIVE_NS, SERIALIZATIONS, build, header, one, run, serialize


@pytest.mark.parametrize(
    ("name", "normalized", "canonical"),
    [
        ("sensor_msgs/Image", "sensor_msgs/msg/Image", "sensor_msgs/msg/Image"),
        ("sensor_msgs/msg/Image", "sensor_msgs/msg/Image", "sensor_msgs/msg/Image"),
        ("tf/tfMessage", "tf/msg/tfMessage", "tf2_msgs/msg/TFMessage"),
        ("tf2_msgs/TFMessage", "tf2_msgs/msg/TFMessage", "tf2_msgs/msg/TFMessage"),
    ],
)
def test_type_names_are_normalised(name: str, normalized: str, canonical: str) -> None:
    assert normalize_msgtype(name) == normalized
    assert canonical_msgtype(name) == canonical


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_legacy_short_type_names_decode(ser: Serialization) -> None:
    """Old .db3 files and ROS 1 name types pkg/Type."""
    msg = build(ser, "sensor_msgs/msg/JointState", name=["a"], position=np.array([1.0]))
    sample = one(run(msg, "sensor_msgs/msg/JointState", ser, msgtype="sensor_msgs/JointState"), JointStateSample)
    assert sample.names == ("a",)


def joint_state_bytes(ser: Serialization) -> bytes:
    msg = build(ser, "sensor_msgs/msg/JointState", header=header(ser), name=["shoulder"], position=np.array([1.0]))
    return serialize(msg, "sensor_msgs/msg/JointState", ser)


@pytest.mark.parametrize("ser", SERIALIZATIONS)
@pytest.mark.parametrize("cut", [1, 9, 30])
def test_truncated_bytes_are_bad_messages(cut: int, ser: Serialization) -> None:
    data = joint_state_bytes(ser)
    raw = RawMessage("/joint_states", "sensor_msgs/msg/JointState", RECEIVE_NS, data[:-cut], ser)
    result = DECODER.decode(raw)
    assert isinstance(result, BadMessage)
    assert result.topic == "/joint_states"
    assert result.receive_ns == RECEIVE_NS
    assert result.reason.startswith("/joint_states (sensor_msgs/msg/JointState): cannot decode")
    assert extract(result, raw) == [result]


def test_garbage_cdr_header_is_bad() -> None:
    raw = RawMessage("/x", "std_msgs/msg/String", RECEIVE_NS, b"\x07\x07\x00\x00abcd")
    result = DECODER.decode(raw)
    assert isinstance(result, BadMessage)
    assert "encapsulation" in result.reason


def test_sequence_length_beyond_the_payload_is_bad() -> None:
    data = bytearray(joint_state_bytes("cdr"))
    # the name sequence's length (after encapsulation, stamp and frame id) claims 2**31 entries
    offset = 4 + 8 + 4 + len(b"/camera_optical\x00")
    offset += -offset % 4
    assert struct.unpack_from("<I", data, offset)[0] == 1
    struct.pack_into("<I", data, offset, 2**31)
    result = DECODER.decode(RawMessage("/j", "sensor_msgs/msg/JointState", RECEIVE_NS, bytes(data)))
    assert isinstance(result, BadMessage)


@pytest.mark.parametrize("ser", SERIALIZATIONS)
def test_unknown_type_is_bad(ser: Serialization) -> None:
    result = DECODER.decode(RawMessage("/gadget", "my_pkg/msg/Gadget", RECEIVE_NS, b"\x00\x01\x00\x00", ser))
    assert isinstance(result, BadMessage)
    assert result.reason.startswith("/gadget (my_pkg/msg/Gadget): unknown message type")


GRIP_MSG = "float64 width\nstring tool\n"
GRIP_IDL = """
module my_pkg {
  module msg {
    struct Grip {
      double width;
      string tool;
    };
  };
};
"""


def grip_bytes(definition: str, ser: Serialization, **fields: Any) -> bytes:
    store = get_typestore(Stores.EMPTY)
    store.register(get_types_from_msg(definition, "my_pkg/msg/Grip"))
    msg = store.types["my_pkg/msg/Grip"](**fields)
    if ser == "ros1":
        return bytes(store.serialize_ros1(msg, "my_pkg/msg/Grip"))
    return bytes(store.serialize_cdr(msg, "my_pkg/msg/Grip"))


@pytest.mark.parametrize(
    ("ser", "fmt", "definition"),
    [("cdr", "ros2msg", GRIP_MSG), ("cdr", "ros2idl", GRIP_IDL), ("ros1", "ros1msg", GRIP_MSG)],
)
def test_register_a_recordings_type(ser: Serialization, fmt: Any, definition: str) -> None:
    decoder = Decoder()
    raw = RawMessage("/grip", "my_pkg/Grip", RECEIVE_NS, grip_bytes(GRIP_MSG, ser, width=0.08, tool="pinch"), ser)
    assert isinstance(decoder.decode(raw), BadMessage)
    decoder.register("my_pkg/Grip", definition, fmt)
    message = decoder.decode(raw)
    assert not isinstance(message, BadMessage), message.reason
    assert (getattr(message, "width", None), getattr(message, "tool", None)) == (0.08, "pinch")


def test_register_concatenated_idl_as_rosbag2_stores_it() -> None:
    separator = "=" * 80 + "\n"
    decoder = Decoder()
    decoder.register("my_pkg/msg/Grip", f"{separator}IDL: my_pkg/msg/Grip\n{GRIP_IDL}", "ros2idl")
    raw = RawMessage("/grip", "my_pkg/msg/Grip", RECEIVE_NS, grip_bytes(GRIP_MSG, "cdr", width=1.0, tool="t"))
    assert getattr(decoder.decode(raw), "width", None) == 1.0
    assert get_types_from_idl(GRIP_IDL)  # the same IDL parses on its own


def test_a_recordings_definition_replaces_a_different_one() -> None:
    decoder = Decoder()
    decoder.register("my_pkg/msg/Grip", GRIP_MSG, "ros2msg")
    changed = "float32 width\nuint8 mode\nstring tool\n"
    decoder.register("my_pkg/msg/Grip", changed, "ros2msg")
    data = grip_bytes(changed, "cdr", width=0.5, mode=3, tool="x")
    message = decoder.decode(RawMessage("/grip", "my_pkg/msg/Grip", RECEIVE_NS, data))
    assert (getattr(message, "width", None), getattr(message, "mode", None)) == (0.5, 3)
    # the built-in types are still there
    assert not isinstance(
        decoder.decode(RawMessage("/j", "sensor_msgs/msg/JointState", 0, joint_state_bytes("cdr"))), BadMessage
    )


@pytest.mark.parametrize(
    ("definition", "words"),
    [
        ("float64[ width", "its ros2msg definition does not parse: Could not parse:"),
        ("this is { not a msg", "its ros2msg definition uses types it does not define: my_pkg/msg/this"),
    ],
)
def test_broken_definition_is_reported_per_message(definition: str, words: str) -> None:
    decoder = Decoder()
    decoder.register("my_pkg/msg/Grip", definition, "ros2msg")
    result = decoder.decode(RawMessage("/grip", "my_pkg/msg/Grip", RECEIVE_NS, b"\x00\x01\x00\x00"))
    assert isinstance(result, BadMessage)
    assert result.reason.startswith(f"/grip (my_pkg/msg/Grip): {words}")
    assert "\n" not in result.reason
    # a later, sound definition of the type replaces the complaint
    decoder.register("my_pkg/msg/Grip", GRIP_MSG, "ros2msg")
    data = grip_bytes(GRIP_MSG, "cdr", width=2.0, tool="t")
    assert getattr(decoder.decode(RawMessage("/grip", "my_pkg/msg/Grip", RECEIVE_NS, data)), "width", None) == 2.0
