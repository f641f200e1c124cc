"""Joint states that list no joint names (drivers that publish positions only): named
after the URDF's movable joints when there are as many, else joint_0, joint_1, ... with
a warning; and every refusal on the way names what the messages lack. Bags written by
``ortf_ros.synthetic`` (or, for malformed messages, here with rosbags), converted by the CLI,
the datasets checked value by value against what was written."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Rosbag2Writer
from rosbags.typesys import Stores, get_typestore

from cli.test_bag2ortf import mapping_for, run_cli, vectors
from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout
from ortf_ros.pipeline.mapping import ActionMapping, write_mapping
from ortf_ros.synthetic.bag import TeleopBagInfo, write_teleop_bag
from ortf_ros.synthetic.motion import joint_efforts, joint_positions, joint_velocities
from ortf_ros.synthetic.robot import ARM_JOINTS, FINGER_JOINTS, JOINTS
from ortf_ros.synthetic.scene import BagFormat
from ortf_ros.synthetic.schedule import seconds, stamp_ns
from ortf_ros.synthetic.topics import TOPIC_JOINT_COMMAND, TOPIC_JOINT_STATES
from pipeline.test_controller_state import assert_action_is

GENERIC = tuple(f"joint_{i}" for i in range(9))


def convert(bag: Path, out: Path, **change: Any) -> tuple[Episode, dict[str, Any]]:
    """The detected mapping (the joint state sampled ``latest``), changed, through the CLI."""
    config = replace(mapping_for(bag), **change)
    write_mapping(config, out.parent / f"{out.name}.yaml")
    result = run_cli(str(bag), "-o", str(out), "--config", str(out.parent / f"{out.name}.yaml"), "--json")
    assert result.returncode == 0, result.stderr
    (summary,) = json.loads(result.stdout)["recordings"]
    return load_dataset(out).episode(0), summary


def assert_joints_are(episode: Episode, names: tuple[str, ...], joints: tuple[str, ...], seqs: list[int]) -> None:
    """The native joint samples are messages ``seqs`` of the 100 Hz joint states, which
    gave the values of ``joints`` (analytic names) in order; the manifest calls them
    ``names``; each step's state is the sample it names."""
    native = episode.stream("joint_states")
    stamps = native["stamp_ns"].to_numpy()
    assert list(stamps) == [stamp_ns(seq, 100) for seq in seqs]
    assert episode.dataset.manifest.native_streams["joint_states"].columns["position"].names == names
    places = [JOINTS.index(n) for n in joints]
    for column, function in (("position", joint_positions), ("velocity", joint_velocities), ("effort", joint_efforts)):
        expected = np.array([function(seconds(int(stamp)))[places] for stamp in stamps])
        np.testing.assert_array_equal(vectors(native, column), expected.astype(np.float32))
    steps = episode.steps()
    used = steps[layout.stream_index_column("joint_states")].to_numpy()
    state = episode.dataset.manifest.observation_space.state
    arm = state["joint_positions"].dim
    np.testing.assert_array_equal(
        vectors(steps, "observation.state.joint_positions"), vectors(native, "position")[used, :arm]
    )
    if "gripper_position" in state:
        gripper = vectors(steps, "observation.state.gripper_position")
        np.testing.assert_array_equal(gripper, vectors(native, "position")[used, arm:])


@pytest.fixture(scope="module", params=["mcap", "sqlite3", "ros1"])
def all_joints(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[TeleopBagInfo, Episode, dict[str, Any]]:
    fmt: BagFormat = request.param
    tmp = tmp_path_factory.mktemp(fmt)
    bag = write_teleop_bag(tmp / "bag", fmt, duration_s=1.0, with_depth=False, unnamed_joints="all")
    return bag, *convert(bag.path, tmp / "ds")


def test_as_many_values_as_the_urdf_has_joints_are_its_joints_in_its_order(
    all_joints: tuple[TeleopBagInfo, Episode, dict[str, Any]],
) -> None:
    _, episode, summary = all_joints
    assert_joints_are(episode, JOINTS, JOINTS, list(range(100)))
    assert (
        f"{TOPIC_JOINT_STATES}: the joint states list no joint names: their 9 positions are taken to be the URDF's "
        f"movable joints in its order ({', '.join(JOINTS)})"
    ) in summary["warnings"]
    robot = episode.dataset.manifest.robot
    assert [j.name for j in robot.joints] == list(ARM_JOINTS) and robot.gripper == {"joints": list(FINGER_JOINTS)}
    assert (episode.dataset.root / layout.URDF).exists()
    report = validate(episode.dataset.root)
    assert report.ok and not report.findings, [f.line() for f in report.findings]


def test_the_command_by_name_still_is_the_action(all_joints: tuple[TeleopBagInfo, Episode, dict[str, Any]]) -> None:
    _, episode, _ = all_joints
    assert_action_is(episode, 50, places=list(range(9)))  # /joint_command names its joints, in its own order
    assert [d.name for d in episode.dataset.manifest.action_space.dimensions] == list(JOINTS)


def test_fewer_values_than_the_urdfs_joints_are_joint_0_and_on_with_a_warning(tmp_path: Path) -> None:
    bag = write_teleop_bag(
        tmp_path / "bag", "mcap", duration_s=1.0, with_depth=False, unnamed_joints="arm", with_command=False
    )
    episode, summary = convert(bag.path, tmp_path / "ds")
    names = GENERIC[:7]
    assert_joints_are(episode, names, ARM_JOINTS, list(range(100)))
    assert (
        f"{TOPIC_JOINT_STATES}: the joint states list no joint names: their 7 positions are named {', '.join(names)}: "
        f"the URDF has 9 movable joints ({', '.join(JOINTS)}), so it does not say which they are; the URDF is left "
        "out of the dataset, whose joints it does not describe"
    ) in summary["warnings"]
    manifest = episode.dataset.manifest
    assert [j.name for j in manifest.robot.joints] == list(names) and not (episode.dataset.root / layout.URDF).exists()
    assert [d.name for d in manifest.action_space.dimensions] == list(names)  # the next step's joints
    assert "observation.state.ee_position" in episode.steps().column_names  # (the TF frames are the URDF's still)
    report = validate(episode.dataset.root)
    assert report.ok and not report.findings, [f.line() for f in report.findings]


def test_without_a_urdf_unnamed_values_are_joint_0_and_on(tmp_path: Path) -> None:
    bag = write_teleop_bag(tmp_path / "bag", "ros1", duration_s=1.0, with_depth=False, unnamed_joints="all")
    episode, summary = convert(
        bag.path, tmp_path / "ds", robot_description_topic="/no_urdf_here", action=ActionMapping(topic=None)
    )
    assert_joints_are(episode, GENERIC, JOINTS, list(range(100)))
    assert (
        f"{TOPIC_JOINT_STATES}: the joint states list no joint names: their 9 positions are named "
        f"{', '.join(GENERIC)}: there is no URDF to name them from (none on /no_urdf_here and none given)"
    ) in summary["warnings"]
    assert validate(episode.dataset.root).ok


def test_a_command_naming_none_of_the_states_joints_is_one_clean_line(tmp_path: Path) -> None:
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=0.5, with_depth=False, unnamed_joints="arm")
    result = run_cli(str(bag.path), "-o", str(tmp_path / "ds"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"ortf-bag2ortf: {TOPIC_JOINT_COMMAND}: the action commands joints by name, and none of its joints "
        f"({', '.join(reversed(JOINTS))}) is one of the state's ({', '.join(GENERIC[:7])})"
    ]
    assert not (tmp_path / "ds").exists()


# ---------------------------------------------------------------- malformed joint states


Message = tuple[list[str], list[float]]  # the names a message lists, its positions


def write_joint_states(path: Path, make: Callable[[int], Message]) -> Path:
    """An MCAP of 1 s of 100 Hz /joint_states, message ``seq`` of ``make(seq)``; each
    position is ``joint_positions`` of the joint in that place, velocities and efforts too
    (as many as positions)."""
    store = get_typestore(Stores.ROS2_JAZZY)
    types = store.types
    with Rosbag2Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as bag:
        connection = bag.add_connection(TOPIC_JOINT_STATES, "sensor_msgs/msg/JointState", typestore=store)
        for seq in range(100):
            names, position = make(seq)
            stamp = stamp_ns(seq, 100)
            t = seconds(stamp)
            count = len(position)
            message = types["sensor_msgs/msg/JointState"](
                header=types["std_msgs/msg/Header"](
                    stamp=types["builtin_interfaces/msg/Time"](sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id=""
                ),
                name=names,
                position=np.array(position, dtype=np.float64),
                velocity=joint_velocities(t)[:count],
                effort=joint_efforts(t)[:count],
            )
            bag.write(connection, stamp + 500_000, store.serialize_cdr(message, "sensor_msgs/msg/JointState"))
    return path


def unnamed(count: int) -> Callable[[int], Message]:
    return lambda seq: ([], list(joint_positions(seconds(stamp_ns(seq, 100)))[:count]))


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda seq: (list(JOINTS), []), "a JointState lists 9 joint names but no positions"),
        (
            lambda seq: (list(JOINTS), [0.1, 0.2, 0.3]),
            f"{TOPIC_JOINT_STATES} (sensor_msgs/msg/JointState): position has 3 values for 9 joint names",
        ),
        (
            lambda seq: ([], []),
            f"{TOPIC_JOINT_STATES} (sensor_msgs/msg/JointState): lists no joint names and no position",
        ),
    ],
    ids=["names-without-positions", "lengths-disagree", "neither"],
)
def test_a_joint_state_topic_without_usable_messages_says_what_they_lack(
    make: Callable[[int], Message], problem: str, tmp_path: Path
) -> None:
    bag = write_joint_states(tmp_path / "bag", make)
    result = run_cli(str(bag), "-o", str(tmp_path / "ds"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"ortf-bag2ortf: {TOPIC_JOINT_STATES}: no usable joint state message, nothing to build steps from: {problem}"
    ]


def test_an_unnamed_joint_state_of_another_length_is_counted_with_why(tmp_path: Path) -> None:
    full, short = unnamed(9), unnamed(7)
    bag = write_joint_states(tmp_path / "bag", lambda seq: short(seq) if seq % 10 == 9 else full(seq))
    episode, summary = convert(bag, tmp_path / "ds")
    counted = summary["topics"][TOPIC_JOINT_STATES]
    assert (counted["used"], counted["undecodable"]) == (90, 10)
    assert counted["first_problem"] == (
        f"{TOPIC_JOINT_STATES}: a joint state lists no joint names and has 7 positions, "
        "where the first joint state had 9"
    )
    assert_joints_are(episode, GENERIC, JOINTS, [seq for seq in range(100) if seq % 10 != 9])
