"""ros_control controller state (control_msgs/JointTrajectoryControllerState) instead of
JointState: the joint state is its actual / feedback, the action (with no command topic)
its desired / reference. Bags of every format and layout written by ``ortf_ros.synthetic``,
converted by the CLI, the datasets read back and checked value by value against the
analytic functions at the stamps of the messages each step used."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from cli.test_bag2ortf import mapping_for, origin_ns, run_cli, vectors
from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.errors import SettingsError
from ortf_ros.format import layout
from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.extract import extract
from ortf_ros.pipeline.mapping import ActionMapping, write_mapping
from ortf_ros.pipeline.samples import BadMessage, ControllerStateSample, DefinitionFormat, RawMessage, Sample
from ortf_ros.pipeline.sources.bag import BagSource, TopicInfo
from ortf_ros.ros.recorder_settings import detected_mapping
from ortf_ros.synthetic.bag import TeleopBagInfo, write_teleop_bag
from ortf_ros.synthetic.messages import Messages
from ortf_ros.synthetic.motion import (
    CONTROLLER_JOINTS,
    joint_command,
    joint_efforts,
    joint_positions,
    joint_velocities,
    select_joints,
)
from ortf_ros.synthetic.robot import ARM_JOINTS, JOINTS
from ortf_ros.synthetic.scene import BagFormat, TeleopConfig
from ortf_ros.synthetic.schedule import seconds, stamp_ns
from ortf_ros.synthetic.topics import TOPIC_CONTROLLER_STATE, TOPIC_JOINT_COMMAND
from ortf_ros.synthetic.typestore import CONTROLLER_STATE_TYPE, ControllerLayout, controller_state_definition
from support.playback_data import on, pairs, play

ARM = [JOINTS.index(n) for n in ARM_JOINTS]  # the arm's places in the analytic vectors
KINDS: list[tuple[BagFormat, ControllerLayout]] = [
    ("ros1", "jazzy"),  # (a ROS 1 bag has ROS 1's layout whatever the option)
    ("mcap", "jazzy"),
    ("sqlite3", "jazzy"),
    ("mcap", "humble"),
]


def write(tmp: Path, fmt: BagFormat, **options: Any) -> TeleopBagInfo:
    return write_teleop_bag(tmp / f"bag-{fmt}", fmt, duration_s=1.0, with_depth=False, **options)


def convert(bag: TeleopBagInfo, out: Path, **change: Any) -> tuple[Episode, dict[str, Any]]:
    """The detected mapping (the joint state sampled ``latest``, so that each step's state
    is a message's), through the CLI; the episode and the JSON summary."""
    config = replace(mapping_for(bag.path), **change)
    write_mapping(config, out.parent / f"{out.name}.yaml")
    result = run_cli(str(bag.path), "-o", str(out), "--config", str(out.parent / f"{out.name}.yaml"), "--json")
    assert result.returncode == 0, result.stderr
    (summary,) = json.loads(result.stdout)["recordings"]
    return load_dataset(out).episode(0), summary


def step_times_ns(episode: Episode) -> np.ndarray:
    times: np.ndarray = origin_ns(episode) + episode.array("timestamp") * 1e9
    return times


def assert_state_is_the_feedback(episode: Episode, names: tuple[str, ...]) -> None:
    """Every native joint sample is actual/feedback at its stamp, every step's state the sample it names."""
    native = episode.stream("joint_states")
    stamps = native["stamp_ns"].to_numpy()
    assert list(stamps) == [stamp_ns(seq, 100) for seq in range(100)]
    columns = episode.dataset.manifest.native_streams["joint_states"].columns
    assert columns["position"].names == names
    for column, function in (("position", joint_positions), ("velocity", joint_velocities), ("effort", joint_efforts)):
        expected = np.array([function(seconds(int(stamp)))[ARM] for stamp in stamps])
        np.testing.assert_array_equal(vectors(native, column), expected.astype(np.float32))
    steps = episode.steps()
    used = steps[layout.stream_index_column("joint_states")].to_numpy()
    for state, column in (
        ("joint_positions", "position"),
        ("joint_velocities", "velocity"),
        ("joint_torques", "effort"),
    ):
        np.testing.assert_array_equal(vectors(steps, f"observation.state.{state}"), vectors(native, column)[used])
    assert "observation.state.gripper_position" not in steps.column_names  # the arm controller has no fingers


def assert_action_is(episode: Episode, rate_hz: int, places: list[int] = ARM) -> None:
    """Each step's action is ``joint_command`` (at ``places``: the arm's) at the stamp of
    a message of a ``rate_hz`` stream, 1 s long: the newest at or before the step ("latest")."""
    actions = vectors(episode.steps(), "action")
    assert actions.shape[1] == len(places)
    count = round(1.0 * rate_hz)
    stamps = [stamp_ns(seq, rate_hz) for seq in range(count)]
    table = np.array([joint_command(seconds(stamp))[places] for stamp in stamps]).astype(np.float32)
    for step_ns, action in zip(step_times_ns(episode), actions, strict=True):
        (matches,) = np.nonzero((table == action).all(axis=1))
        assert len(matches) == 1, action
        age_ns = step_ns - stamps[int(matches[0])]
        assert -1e3 <= age_ns < 1e9 / rate_hz + 1e3  # (float64 seconds: microsecond slack)


@pytest.fixture(scope="module", params=KINDS, ids=[f"{fmt}-{kind}" for fmt, kind in KINDS])
def converted(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[TeleopBagInfo, Episode, dict[str, Any]]:
    fmt, kind = request.param
    tmp = tmp_path_factory.mktemp(f"{fmt}-{kind}")
    options = {} if fmt == "ros1" else {"controller_layout": kind}
    bag = write(tmp, fmt, controller_state=True, **options)
    assert TOPIC_JOINT_COMMAND not in bag.counts and "/joint_states" not in bag.counts
    return bag, *convert(bag, tmp / "ds")


def test_state_is_actual_or_feedback_value_by_value(converted: tuple[TeleopBagInfo, Episode, dict[str, Any]]) -> None:
    _, episode, _ = converted
    assert_state_is_the_feedback(episode, ARM_JOINTS)
    assert episode.dataset.manifest.native_streams["joint_states"].source == TOPIC_CONTROLLER_STATE


def test_action_is_the_controllers_reference_and_declared_so(
    converted: tuple[TeleopBagInfo, Episode, dict[str, Any]],
) -> None:
    bag, episode, _ = converted
    assert_action_is(episode, 100)
    space = episode.dataset.manifest.action_space
    assert space.type == "joint_position"
    assert [(d.name, d.index, d.type, d.units) for d in space.dimensions] == [
        (name, i, "position", "radians") for i, name in enumerate(ARM_JOINTS)
    ]
    field = "reference" if bag.fmt != "ros1" and bag.config.controller_layout == "jazzy" else "desired"
    assert space.extra["source"] == TOPIC_CONTROLLER_STATE and space.extra["source_field"] == field
    assert f"the controller's reference: the joint positions in the {field!r} field" in str(space.extra["description"])


def test_the_player_publishes_the_reference_on_its_own_topic(
    converted: tuple[TeleopBagInfo, Episode, dict[str, Any]],
) -> None:
    """Not on the controller state's topic, which carries another type."""
    _, episode, _ = converted
    items = play(episode.dataset)
    assert not on(items, TOPIC_CONTROLLER_STATE)
    actions = vectors(episode.steps(), "action")
    for row, item in pairs(on(items, "/action"), len(actions)):
        assert item.msgtype == "sensor_msgs/msg/JointState" and list(item.message.name) == list(ARM_JOINTS)
        np.testing.assert_array_equal(item.message.position, actions[row])


def test_the_urdfs_joints_the_controller_lacks_are_left_out_with_a_warning(
    converted: tuple[TeleopBagInfo, Episode, dict[str, Any]],
) -> None:
    _, episode, summary = converted
    warning = f"{TOPIC_CONTROLLER_STATE}: the URDF's joints finger_joint1, finger_joint2 are in no message of it"
    assert any(w.startswith(warning) for w in summary["warnings"]), summary["warnings"]
    robot = episode.dataset.manifest.robot
    assert [j.name for j in robot.joints] == list(ARM_JOINTS) and robot.dof == 7 and robot.gripper is None
    assert summary["topics"][TOPIC_CONTROLLER_STATE]["used"] == 100
    report = validate(episode.dataset.root)
    assert report.ok, [f.line() for f in report.findings]
    assert [f.rule for f in report.findings] == ["manifest.urdf_movable"]  # (a warning: the fingers are not data)


def test_list_shows_the_detected_controller_mapping(tmp_path: Path) -> None:
    bag = write(tmp_path, "ros1", controller_state=True)
    listing = run_cli(str(bag.path), "--list")
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    joint_state = f"  joint state: {TOPIC_CONTROLLER_STATE} (header time, linear, the controller state's feedback"
    assert f"{joint_state} (else actual), every message kept at its native rate)" in lines
    action = f"  action: {TOPIC_CONTROLLER_STATE} (header time, latest, the controller's reference (else desired)"
    assert f"{action}: declared so in the manifest)" in lines


def test_a_command_topic_wins_over_the_controllers_reference(tmp_path: Path) -> None:
    bag = write(tmp_path, "mcap", controller_state=True, with_command=True)
    episode, _ = convert(bag, tmp_path / "ds")
    assert_state_is_the_feedback(episode, ARM_JOINTS)
    assert_action_is(episode, 50)  # the 50 Hz command, of the 7 joints it shares with the state
    space = episode.dataset.manifest.action_space
    assert space.extra == {"source": TOPIC_JOINT_COMMAND}
    assert [d.name for d in space.dimensions] == list(ARM_JOINTS)


def test_with_no_action_mapped_the_action_is_the_next_steps_joints(tmp_path: Path) -> None:
    bag = write(tmp_path, "mcap", controller_state=True)
    episode, _ = convert(bag, tmp_path / "ds", action=ActionMapping(topic=None))
    steps = episode.steps()
    joints = vectors(steps, "observation.state.joint_positions")
    np.testing.assert_array_equal(vectors(steps, "action")[:-1], joints[1:])
    assert "source_field" not in episode.dataset.manifest.action_space.extra


def test_a_controller_state_without_joint_names_is_named_joint_0_to_6(tmp_path: Path) -> None:
    bag = write(tmp_path, "ros1", controller_state=True, unnamed_joints="arm")
    episode, summary = convert(bag, tmp_path / "ds")
    names = tuple(f"joint_{i}" for i in range(7))
    assert_state_is_the_feedback(episode, names)  # the values in the URDF's order, as written
    assert_action_is(episode, 100)
    manifest = episode.dataset.manifest
    assert [d.name for d in manifest.action_space.dimensions] == list(names)
    assert manifest.robot.name == "unknown" and [j.name for j in manifest.robot.joints] == list(names)
    assert not (episode.dataset.root / layout.URDF).exists()
    assert (
        f"{TOPIC_CONTROLLER_STATE}: the joint states list no joint names: their 7 positions are named "
        f"{', '.join(names)}: the URDF has 9 movable joints ({', '.join(JOINTS)}), so it does not say which they "
        "are; the URDF is left out of the dataset, whose joints it does not describe"
    ) in summary["warnings"]
    report = validate(episode.dataset.root)
    assert report.ok and not report.findings, [f.line() for f in report.findings]


# ---------------------------------------------------------------- the message, field by field


def controller_message(fmt: BagFormat, layout_: ControllerLayout, seq: int = 3) -> tuple[Messages, Any, float]:
    messages = Messages(TeleopConfig(fmt, controller_state=True, controller_layout=layout_))
    stamp = stamp_ns(seq, 100)
    return messages, messages.controller(seq, stamp), seconds(stamp)


def extracted(messages: Messages, message: Any, layout_: ControllerLayout) -> list[Sample]:
    """Serialized, then decoded as a conversion does: with the definition the bag carries."""
    ros1 = messages.ros1
    store = messages.store
    data = (
        store.serialize_ros1(message, CONTROLLER_STATE_TYPE)
        if ros1
        else store.serialize_cdr(message, CONTROLLER_STATE_TYPE)
    )
    decoder = Decoder()
    fmt: DefinitionFormat = "ros1msg" if ros1 else "ros2msg"
    decoder.register(CONTROLLER_STATE_TYPE, controller_state_definition(ros1, layout_), fmt)
    raw = RawMessage(TOPIC_CONTROLLER_STATE, CONTROLLER_STATE_TYPE, 0, bytes(data), "ros1" if ros1 else "cdr")
    decoded = decoder.decode(raw)
    assert not isinstance(decoded, BadMessage), decoded.reason
    return extract(decoded, raw)


@pytest.mark.parametrize(("fmt", "layout_"), KINDS)
def test_each_layout_is_read_by_field_name(fmt: BagFormat, layout_: ControllerLayout) -> None:
    messages, message, t = controller_message(fmt, layout_)
    (sample,) = extracted(messages, message, layout_)
    assert isinstance(sample, ControllerStateSample)
    order = [JOINTS.index(n) for n in CONTROLLER_JOINTS]
    assert sample.state.names == CONTROLLER_JOINTS
    np.testing.assert_array_equal(sample.state.position, joint_positions(t)[order])
    np.testing.assert_array_equal(sample.state.velocity, joint_velocities(t)[order])
    np.testing.assert_array_equal(sample.state.effort, joint_efforts(t)[order])
    assert sample.reference is not None and sample.reference.names == CONTROLLER_JOINTS
    np.testing.assert_array_equal(sample.reference.position, joint_command(t)[order])
    newest = fmt != "ros1" and layout_ == "jazzy"
    assert (sample.state_field, sample.reference_field) == (
        ("feedback", "reference") if newest else ("actual", "desired")
    )


def test_humbles_new_fields_win_over_its_deprecated_ones() -> None:
    messages, message, _ = controller_message("mcap", "humble")
    swapped = replace(message, feedback=message.actual, reference=message.error, actual=message.error)
    (sample,) = extracted(messages, swapped, "humble")
    assert isinstance(sample, ControllerStateSample)
    assert (sample.state_field, sample.reference_field) == ("feedback", "reference")
    np.testing.assert_array_equal(sample.state.position, message.actual.positions)
    assert sample.reference is not None
    np.testing.assert_array_equal(sample.reference.position, message.error.positions)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"feedback": "empty"}, "no joint positions in feedback"),
        ({"feedback.velocities": 3}, "feedback.velocities has 3 values for 7 joint names"),
        ({"feedback.effort": 8}, "feedback.effort has 8 values for 7 joint names"),
        ({"reference.positions": 2}, "reference.positions has 2 values for 7 joint names"),
        ({"joint_names": [], "reference.positions": 2}, "reference.positions has 2 values, feedback.positions 7"),
        ({"joint_names": ["a", "b", "a"]}, "joint names repeat: a"),
        (
            {"joint_names": [], "feedback.velocities": 5},
            "feedback.velocities has 5 values for 7 feedback.positions (the message lists no joint names)",
        ),
    ],
)
def test_a_malformed_controller_state_is_refused_naming_its_field(change: dict[str, Any], words: str) -> None:
    messages, message, _ = controller_message("mcap", "jazzy")
    for key, value in change.items():
        field, _, part = key.partition(".")
        if value == "empty":
            message = replace(message, **{field: messages.trajectory_point()})
        elif part:
            point = getattr(message, field)
            message = replace(message, **{field: replace(point, **{part: np.arange(value, dtype=np.float64)})})
        else:
            message = replace(message, **{field: value})
    (sample,) = extracted(messages, message, "jazzy")
    assert isinstance(sample, BadMessage)
    assert f"{TOPIC_CONTROLLER_STATE} ({CONTROLLER_STATE_TYPE}): {words}" in sample.reason, sample.reason


def test_a_controller_state_without_reference_gives_a_state_and_no_action() -> None:
    messages, message, _ = controller_message("ros1", "jazzy")
    (sample,) = extracted(messages, replace(message, desired=messages.trajectory_point()), "jazzy")
    assert isinstance(sample, ControllerStateSample) and sample.reference is None and sample.reference_field is None


# ---------------------------------------------------------------- recordings without its definition


def cdr_of(definition: str, fields: dict[str, Any]) -> RawMessage:
    """A controller state serialized with ``definition`` in a ROS 2 store."""
    store = get_typestore(Stores.ROS2_JAZZY)
    store.register(get_types_from_msg(definition, CONTROLLER_STATE_TYPE))
    names = [name for name, _ in store.fielddefs[CONTROLLER_STATE_TYPE][1]]
    message = store.types[CONTROLLER_STATE_TYPE](**{name: fields[name] for name in names})
    data = bytes(store.serialize_cdr(message, CONTROLLER_STATE_TYPE))
    return RawMessage(TOPIC_CONTROLLER_STATE, CONTROLLER_STATE_TYPE, 0, data, "cdr")


@pytest.mark.parametrize(
    ("definition", "label"),
    [
        (controller_state_definition(False, "humble"), "ROS 2 Humble's (reference, feedback and the"),
        (controller_state_definition(False, "jazzy"), "ROS 2 Iron's and Jazzy's"),
        # ROS 1's fields with ROS 2's header: Foxy's and Galactic's
        (controller_state_definition(True), "ROS 2 Foxy's and Galactic's"),
    ],
)
def test_without_a_definition_the_layout_its_bytes_fit_is_found(definition: str, label: str) -> None:
    _, message, t = controller_message("mcap", "humble")
    fields = {name: getattr(message, name) for name in message.__dataclass_fields__}
    fields |= {"feedback": message.actual, "reference": message.desired}  # (whatever the layout reads)
    decoder = Decoder()  # (nothing registered: the recording brought no definition)
    raw = cdr_of(definition, fields)
    decoded = decoder.decode(raw)
    assert not isinstance(decoded, BadMessage), decoded.reason
    assert decoder.guessed[CONTROLLER_STATE_TYPE].startswith(label)
    (sample,) = extract(decoded, raw)
    assert isinstance(sample, ControllerStateSample)
    np.testing.assert_array_equal(sample.state.position, select_joints(joint_positions(t), CONTROLLER_JOINTS))
    assert sample.reference is not None
    np.testing.assert_array_equal(sample.reference.position, select_joints(joint_command(t), CONTROLLER_JOINTS))
    assert decoder.decode(raw) is not None and len(decoder.guessed) == 1  # (learned once)


def test_bytes_no_known_layout_reads_are_undecodable_with_why() -> None:
    raw = RawMessage(TOPIC_CONTROLLER_STATE, CONTROLLER_STATE_TYPE, 0, b"\x00\x01\x00\x00" + bytes(10), "cdr")
    decoded = Decoder().decode(raw)
    assert isinstance(decoded, BadMessage)
    assert (
        f"{TOPIC_CONTROLLER_STATE} ({CONTROLLER_STATE_TYPE}): the recording brings no definition, and its 14 bytes fit "
        "no layout it had (ROS 2 Humble's (reference, feedback and the deprecated desired, actual); ROS 2 Humble's "
        "first (desired, actual, multi-DOF); ROS 2 Foxy's and Galactic's (desired, actual); ROS 2 Iron's and Jazzy's "
        "(reference, feedback))"
    ) == decoded.reason


def test_a_humble_sqlite3_bag_without_definitions_converts(tmp_path: Path) -> None:
    """rosbag2 before Iron stored no message definitions in its sqlite3 files."""
    bag = write(tmp_path, "sqlite3", controller_state=True, controller_layout="humble")
    for file in bag.files:
        with contextlib.closing(sqlite3.connect(file)) as db, db:
            db.execute("DELETE FROM message_definitions WHERE topic_type = ?", (CONTROLLER_STATE_TYPE,))
    with BagSource(bag.path) as source:
        assert next(t for t in source.topics() if t.topic == TOPIC_CONTROLLER_STATE).definition == ""
    episode, summary = convert(bag, tmp_path / "ds")
    assert_state_is_the_feedback(episode, ARM_JOINTS)
    assert_action_is(episode, 100)
    assert (
        f"{CONTROLLER_STATE_TYPE}: the recording holds no definition of it; read as ROS 2 Humble's (reference, "
        "feedback and the deprecated desired, actual) layout, the one its bytes fit"
    ) in summary["warnings"]


# ---------------------------------------------------------------- the live side: offline only
# (the scene publisher's refusal of a controller state is in test_scene_publisher: it needs rclpy)


def test_the_live_recorder_does_not_detect_a_controller_state_it_cannot_subscribe_to() -> None:
    def topic(name: str, msgtype: str) -> TopicInfo:
        return TopicInfo(name, msgtype, msgtype, 1, None, None, "", "", "cdr")

    controller = topic(TOPIC_CONTROLLER_STATE, CONTROLLER_STATE_TYPE)
    with pytest.raises(SettingsError) as refused:
        detected_mapping([controller], 30.0, 3.0)
    assert str(refused.value) == (
        "no mapping given (parameter mapping) and none detected: no JointState or camera topic in the graph after "
        f"3 s ({TOPIC_CONTROLLER_STATE}: control_msgs/JointTrajectoryControllerState, which only ortf-bag2ortf "
        "converts: record a bag and convert it)"
    )
    mapping = detected_mapping([controller, topic("/joint_states", "sensor_msgs/msg/JointState")], 30.0, 3.0)
    assert mapping.joint_states is not None and mapping.joint_states.topic == "/joint_states"
    assert mapping.action.topic is None  # (offline, the controller's reference would be the action)
