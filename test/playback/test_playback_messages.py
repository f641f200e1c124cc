"""The player's messages, built without ROS, against the dataset they come from: values
exact, depth bit-exact, TF in ROS's quaternion order, one message per step or sample."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from av.container import InputContainer

from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ReaderError
from ortf_ros.format import layout
from ortf_ros.format.spaces import ActionDimension, ActionSpace
from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.samples import RawMessage
from ortf_ros.playback.messages import Outgoing, Playlist
from ortf_ros.playback.publication import Publication
from ortf_ros.playback.rosmsg import RosMessages
from ortf_ros.playback.settings import default_settings
from ortf_ros.playback.timeline import GAP_NS
from ortf_ros.synthetic.dataset import write_demo_dataset
from ortf_ros.synthetic.demo_arm import demo_action, demo_manifest, demo_state
from ortf_ros.synthetic.robot import FINGER_JOINTS
from ortf_ros.synthetic.scene import START_NS
from support.playback_data import on, pairs, play, stamp_ns, teleop_dataset, time_ns, vectors


@pytest.fixture(scope="module")
def dataset_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root, _ = teleop_dataset(tmp_path_factory.mktemp("teleop"), seconds=1.0)
    return root


@pytest.fixture(scope="module")
def played(dataset_root: Path) -> tuple[Episode, list[Outgoing]]:
    dataset = load_dataset(dataset_root)
    return dataset.episode(0), play(dataset)


def test_joint_states_are_the_state_columns(played: tuple[Episode, list[Outgoing]]) -> None:
    episode, items = played
    steps = episode.steps()
    arm = vectors(steps, "observation.state.joint_positions")
    gripper = vectors(steps, "observation.state.gripper_position")
    velocities = vectors(steps, "observation.state.joint_velocities")
    torques = vectors(steps, "observation.state.joint_torques")
    names = episode.dataset.manifest.observation_space.state["joint_positions"].names
    assert names is not None
    for row, item in pairs(on(items, "/joint_states"), steps.num_rows):
        message = item.message
        assert list(message.name) == [*names, *FINGER_JOINTS]
        np.testing.assert_array_equal(message.position, np.concatenate([arm[row], gripper[row]]))
        np.testing.assert_array_equal(message.velocity[:7], velocities[row])
        np.testing.assert_array_equal(message.effort[:7], torques[row])
        assert np.isnan(message.velocity[7:]).all() and np.isnan(message.effort[7:]).all()  # not in the dataset
        assert stamp_ns(message) == item.time_ns


def test_every_native_force_torque_sample_is_published_exactly(played: tuple[Episode, list[Outgoing]]) -> None:
    episode, items = played
    native = episode.stream("ft_sensor")
    wrenches = on(items, "/ft_sensor/wrench")
    assert len(wrenches) == native.num_rows
    forces, torques = vectors(native, "force"), vectors(native, "torque")
    # The timeline keeps the recording's own stamps where the dataset has them.
    assert wrenches[0].time_ns == native["stamp_ns"][0].as_py() == START_NS
    for item, force, torque, timestamp in zip(wrenches, forces, torques, native["timestamp"].to_numpy(), strict=True):
        wrench = item.message.wrench
        assert [wrench.force.x, wrench.force.y, wrench.force.z] == force.tolist()
        assert [wrench.torque.x, wrench.torque.y, wrench.torque.z] == torque.tolist()
        assert item.time_ns == START_NS + round(timestamp * 1e9) == stamp_ns(item.message)
        assert item.message.header.frame_id == "ft_sensor"


def test_without_a_native_table_force_torque_comes_from_the_step_state(tmp_path: Path) -> None:
    root, _ = teleop_dataset(tmp_path, seconds=0.3, native_wrench=False, with_depth=False)
    episode = load_dataset(root).episode(0)
    steps = episode.steps()
    state = vectors(steps, "observation.state.ft_sensor")
    joints = on(play(episode.dataset), "/joint_states")
    for row, item in pairs(on(play(episode.dataset), "/ft_sensor/wrench"), steps.num_rows):
        wrench = item.message.wrench
        values = [wrench.force.x, wrench.force.y, wrench.force.z, wrench.torque.x, wrench.torque.y, wrench.torque.z]
        assert values == state[row].tolist()
        assert item.time_ns == joints[row].time_ns


def test_images_are_the_decoded_frames_and_depth_is_bit_exact(played: tuple[Episode, list[Outgoing]]) -> None:
    episode, items = played
    manifest = episode.dataset.manifest
    for camera, sensor in manifest.cameras.items():
        frames = episode.array(layout.image_column(camera))
        images = on(items, f"/{camera}/image_raw")
        infos = on(items, f"/{camera}/camera_info")
        assert len(infos) == len(frames)
        for row, item in pairs(images, len(frames)):
            message = item.message
            expected = episode.frame(camera, int(frames[row]))
            assert (message.width, message.height) == (64, 48)
            assert message.header.frame_id == sensor.extra["frame_id"]
            if sensor.is_depth:
                assert message.encoding == "16UC1" and message.step == 128 and not message.is_bigendian
                assert bytes(message.data) == expected.astype("<u2").tobytes()
            else:
                assert message.encoding == "rgb8" and message.step == 192
                assert bytes(message.data) == expected.tobytes()
        info = infos[0].message
        intrinsics = sensor.intrinsics or {}
        assert info.k.tolist() == [
            intrinsics["fx"],
            0,
            intrinsics["cx"],
            0,
            intrinsics["fy"],
            intrinsics["cy"],
            0,
            0,
            1,
        ]
        assert info.d.tolist() == (sensor.distortion or {})["coefficients"]
        assert info.header.frame_id == sensor.extra["frame_id"]
    episode.close()


def test_tf_holds_the_end_effector_pose_and_the_fixed_frames_in_xyzw(played: tuple[Episode, list[Outgoing]]) -> None:
    episode, items = played
    manifest = episode.dataset.manifest
    steps = episode.steps()
    positions = vectors(steps, "observation.state.ee_position")
    orientations = vectors(steps, "observation.state.ee_orientation")  # w, x, y, z
    for row, item in pairs(on(items, "/tf"), steps.num_rows):
        (transform,) = item.message.transforms
        assert (transform.header.frame_id, transform.child_frame_id) == ("base_link", "hand")
        t, q = transform.transform.translation, transform.transform.rotation
        assert [t.x, t.y, t.z] == positions[row].tolist()
        assert [q.w, q.x, q.y, q.z] == orientations[row].tolist()
    (static,) = on(items, "/tf_static")
    published = {t.child_frame_id: t for t in static.message.transforms}
    fixed = {key: f for key, f in manifest.frames.items() if f.type == "fixed" and f.transform is not None}
    assert set(published) == set(fixed) == {"base_link", "wrist_camera_optical_frame", "overhead_camera_optical_frame"}
    for child, frame in fixed.items():
        transform = published[child]
        assert frame.transform is not None and transform.header.frame_id == frame.parent
        t, q = transform.transform.translation, transform.transform.rotation
        assert (t.x, t.y, t.z) == frame.transform.translation
        assert (q.w, q.x, q.y, q.z) == frame.transform.rotation
    # The elbow moved in the recording, but the dataset keeps no pose of it.
    assert Publication.of(manifest, default_settings().messages).unpublished_frames == ("arm_link4",)


def test_latched_state_task_and_episode_boundaries_frame_the_messages(
    played: tuple[Episode, list[Outgoing]], dataset_root: Path
) -> None:
    episode, items = played
    topics = [item.topic for item in items]
    assert topics[:4] == ["/robot_description", "/tf_static", "/ortf/task", "/ortf/episode"]
    assert items[0].message.data == (dataset_root / layout.URDF).read_text()
    assert items[2].message.data == episode.task.instruction
    assert items[3].message.data is True and items[-1].message.data is False
    assert topics.count("/ortf/episode") == 2
    times = [item.time_ns for item in items]
    assert times == sorted(times) and times[1] < times[2] < times[3] < times[4] and times[-2] < times[-1]


def test_the_action_is_published_as_the_joint_command_it_was(played: tuple[Episode, list[Outgoing]]) -> None:
    episode, items = played
    actions = vectors(episode.steps(), "action")
    names = [d.name for d in episode.dataset.manifest.action_space.dimensions]
    for row, item in pairs(on(items, "/joint_command"), len(actions)):
        assert item.msgtype == "sensor_msgs/msg/JointState"
        assert list(item.message.name) == names
        np.testing.assert_array_equal(item.message.position, actions[row])


ACTION_SPACES = {
    "geometry_msgs/msg/TwistStamped": (
        "command",
        ("linear_x", "linear_y", "linear_z", "angular_x", "angular_y", "angular_z"),
    ),
    "geometry_msgs/msg/PoseStamped": ("end_effector_pose", ("x", "y", "z", "qw", "qx", "qy", "qz")),
    "std_msgs/msg/Float64MultiArray": ("end_effector_delta", ("dx", "dy", "dz", "droll", "dpitch", "dyaw", "grip")),
}


@pytest.mark.parametrize("msgtype", sorted(ACTION_SPACES))
def test_the_action_message_type_follows_the_action_space(msgtype: str, tmp_path: Path) -> None:
    kind, names = ACTION_SPACES[msgtype]
    space = ActionSpace(kind, tuple(ActionDimension(n, i, "continuous", "normalized") for i, n in enumerate(names)))
    manifest = replace(demo_manifest(64, 48, 30, depth=False), action_space=space)
    values = np.arange(len(names), dtype=np.float32) / 10 + 0.05
    blank = np.zeros((48, 64, 3), np.uint8)
    with DatasetWriter(tmp_path / "ds", manifest) as writer:
        writer.begin_episode("move")
        for step in range(3):
            writer.add_step(step / 30, demo_state(0, step), values + step, {"cam_wrist": blank, "cam_overhead": blank})
        writer.end_episode(success=True)
    actions = on(play(load_dataset(tmp_path / "ds")), "/action")
    assert [a.msgtype for a in actions] == [msgtype] * 3
    message = actions[1].message
    expected = dict(zip(names, (values + 1).astype(np.float64).tolist(), strict=True))
    if msgtype.endswith("TwistStamped"):
        twist = message.twist
        got = [twist.linear.x, twist.linear.y, twist.linear.z, twist.angular.x, twist.angular.y, twist.angular.z]
    elif msgtype.endswith("PoseStamped"):
        p, q = message.pose.position, message.pose.orientation
        got = [p.x, p.y, p.z, q.w, q.x, q.y, q.z]
    else:
        assert [d.label for d in message.layout.dim] == list(names)
        got = message.data.tolist()
    assert got == [expected[n] for n in names]


def test_demo_dataset_joint_names_and_gripper_come_from_the_manifest(tmp_path: Path) -> None:
    write_demo_dataset(tmp_path / "demo", episodes=1, steps=4, width=64, height=48)
    dataset = load_dataset(tmp_path / "demo")
    items = play(dataset)
    joint_state = on(items, "/joint_states")[0].message
    assert list(joint_state.name) == [*(f"demo_joint{i}" for i in range(1, 8)), "gripper"]
    np.testing.assert_array_equal(joint_state.position[:7], demo_state(0, 0)["joint_positions"])
    (transform,) = on(items, "/tf")[0].message.transforms
    assert (transform.header.frame_id, transform.child_frame_id) == ("robot_base", "demo_hand")
    static = {t.child_frame_id: t.header.frame_id for t in on(items, "/tf_static")[0].message.transforms}
    assert static == {
        "robot_base": "world",
        "wrist_rgb": "demo_hand",
        "overhead_rgb": "world",
        "overhead_depth": "world",
    }
    np.testing.assert_array_equal(on(items, "/action")[0].message.position, demo_action(0, 0))


def test_steps_sit_exactly_on_the_control_grid_and_episodes_follow_each_other(tmp_path: Path) -> None:
    root, bags = teleop_dataset(tmp_path, seconds=0.4, episodes=2, with_depth=False)
    items = play(load_dataset(root))
    period = round(1e9 / 30)
    by_episode: dict[str | None, list[int]] = {}
    for item in on(items, "/joint_states"):
        by_episode.setdefault(item.episode_id, []).append(item.time_ns)
    first, second = by_episode["000000"], by_episode["000001"]
    assert np.all(np.diff(first) == period) and np.all(np.diff(second) == period)
    # Both recordings start at the same instant: the second episode waits for the first.
    assert first[0] == bags[0].start_ns
    wrenches = [item for item in on(items, "/ft_sensor/wrench") if item.episode_id == "000001"]
    first_end = max(item.time_ns for item in items if item.episode_id == "000000" and item.kind != "episode")
    assert wrenches[0].time_ns - first_end == GAP_NS


def test_loop_and_start_offset(tmp_path: Path) -> None:
    root, _ = teleop_dataset(tmp_path, seconds=0.5, with_depth=False)
    dataset = load_dataset(root)
    playlist = Playlist(dataset, ["000000"], default_settings().messages, print)
    played = playlist.play(loop=True, start_offset_s=0.2)
    first_steps = [item for item in next(played).items() if item.kind == "joint_states"]
    second_steps = [item for item in next(played).items() if item.kind == "joint_states"]
    assert first_steps[0].step == 6 and second_steps[0].step == 0  # 0.2 s at 30 Hz; the loop starts over
    assert len(second_steps) == dataset.episodes[0].length
    assert second_steps[0].time_ns > first_steps[-1].time_ns + GAP_NS


def test_restamp_shifts_every_header_stamp_of_the_cdr_bag2ortf_decodes(played: tuple[Episode, list[Outgoing]]) -> None:
    _, items = played
    ros = RosMessages()
    decoder = Decoder()
    for item in (on(items, "/tf")[0], on(items, "/wrist_camera/image_raw")[0], on(items, "/joint_states")[0]):
        before = ros.serialize(item.message, item.msgtype)
        ros.restamp(item.message, 1_500_000_123)
        after = decoder.decode(RawMessage(item.topic, item.msgtype, 0, ros.serialize(item.message, item.msgtype)))
        original = decoder.decode(RawMessage(item.topic, item.msgtype, 0, before))
        for shifted, was in zip(headers_of(after), headers_of(original), strict=True):
            assert time_ns(shifted.stamp) - time_ns(was.stamp) == 1_500_000_123
        assert len(before) == len(ros.serialize(item.message, item.msgtype))


def headers_of(message: Any) -> list[Any]:
    return [t.header for t in message.transforms] if hasattr(message, "transforms") else [message.header]


def test_step_rows_are_streamed_from_the_episodes_own_row_groups(tmp_path: Path) -> None:
    write_demo_dataset(tmp_path / "ds", episodes=3, steps=12, width=64, height=48, depth=False)
    episode = load_dataset(tmp_path / "ds").episode(1)
    path = tmp_path / "ds" / episode.steps_file
    assert pq.ParquetFile(path).num_row_groups == 3  # one per episode: the others are skipped unread
    streamed = pa.Table.from_batches(list(episode.step_batches(["step_index", "action"])))
    assert streamed.equals(episode.steps(["step_index", "action"]))
    table = pq.read_table(path)
    pq.write_table(table.take(list(range(table.num_rows))[::-1]), path)
    with pytest.raises(ReaderError, match="not stored in step_index order"):
        list(episode.step_batches(["step_index"]))


def test_a_corrupt_frame_is_skipped_with_a_warning(dataset_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(dataset_root, root)
    episode = load_dataset(root).episode(0)
    video = episode.video_path("wrist_camera")
    with av.open(str(video)) as container:
        assert isinstance(container, InputContainer)
        packets = [(p.pos, p.size) for p in container.demux(container.streams.video[0]) if p.dts is not None]
    position, size = packets[12]  # in the second GOP (keyframes every 10 frames)
    assert position is not None
    data = bytearray(video.read_bytes())
    data[position : position + size] = bytes(size)
    video.write_bytes(bytes(data))
    warnings: list[str] = []
    items = play(load_dataset(root), warnings=warnings)
    images = on(items, "/wrist_camera/image_raw")
    steps = episode.record.length
    assert 0 < steps - len(images) <= 10 and len(warnings) == steps - len(images)
    assert all("wrist_camera frame" in w and "skipped" in w for w in warnings)
    assert len(on(items, "/overhead_camera/image_raw")) == steps  # the other cameras are whole
    clean = load_dataset(dataset_root).episode(0)
    last = images[-1]
    assert last.step == steps - 1
    index = int(clean.array(layout.image_column("wrist_camera"))[-1])
    assert bytes(last.message.data) == clean.frame("wrist_camera", index).tobytes()  # decoding recovered
    clean.close()
