"""The topic mapping: YAML schema, error messages, round trips, auto-detection."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from ortf_ros.dataset.config import WriterConfig
from ortf_ros.errors import ConversionError
from ortf_ros.io.video import VideoSettings
from ortf_ros.pipeline.mapping import (
    ActionMapping,
    CameraMapping,
    EpisodeLabels,
    EpisodeSplit,
    JointStateMapping,
    LaserScanMapping,
    PointCloudMapping,
    StepClock,
    TopicMapping,
    WrenchMapping,
    camera_name,
    describe_mapping,
    detect_mapping,
    dump_mapping,
    is_command_topic,
    load_mapping,
    mapping_from_dict,
    mapping_from_parameters,
    mapping_to_dict,
    sync_tolerance,
    wrench_name,
    write_mapping,
)
from ortf_ros.pipeline.sources.bag import BagSource, TopicInfo
from ortf_ros.synthetic.bag import write_teleop_bag

CONFIG_DIR = Path(__file__).resolve().parents[3] / "config"
RESOURCES = Path(__file__).resolve().parents[2] / "support" / "resources"

FULL = TopicMapping(
    cameras=(
        CameraMapping(
            "wrist", "/wrist/image_raw", "rgb", "/wrist/camera_info", "receive", "latest", sync_tolerance_ms=8.0
        ),
        CameraMapping("depth", "/cam/depth/image_raw", "depth", clock_offset_ms=-250.5),
    ),
    joint_states=JointStateMapping("/joint_states", "receive", "nearest", native=False, clock_offset_ms="auto"),
    wrenches=(
        WrenchMapping(
            "ft", "/ft/wrench", "tool0", "receive", "linear", native=False, range_force=500.0, range_torque=10
        ),
    ),
    action=ActionMapping("/cmd_vel", "receive", "nearest", sync_tolerance_ms=40.0),
    tf_topics=("/tf", "/robot2/tf"),
    tf_static_topics=(),
    robot_description_topic="/robot2/robot_description",
    base_frame="base_link",
    end_effector_frame="tool0",
    world_frame="map",
    gripper_joints=("finger_left", "finger_right"),
    step=StepClock(rate_hz=None, camera="wrist"),
    sync_tolerance_ms=12.5,
    drop_outside_tolerance=True,
    episodes=EpisodeSplit("ranges", ranges=((0.0, 1.5), (2.0, 7.25))),
    labels=EpisodeLabels("stack: the cubes", "/task", False, "dropped", "yes"),
    writer=WriterConfig(chunk_size=10, video=VideoSettings(crf=30)),
    writer_given=("chunk_size", "video", "video.crf"),
)


def _topic(name: str, msgtype: str, count: int = 10) -> TopicInfo:
    return TopicInfo(name, msgtype, msgtype, count, 0 if count else None, count if count else None, "", "", "cdr")


def _error(data: object) -> str:
    with pytest.raises(ConversionError) as info:
        mapping_from_dict(data, "teleop.yaml")
    return str(info.value)


# ---------------------------------------------------------------- shipped files


def test_shipped_arm_config_loads() -> None:
    cfg = load_mapping(CONFIG_DIR / "bag2ortf_arm.yaml")
    assert [(c.name, c.kind) for c in cfg.cameras] == [
        ("wrist_camera", "rgb"),
        ("overhead_camera", "rgb"),
        ("depth_camera", "depth"),
    ]
    assert cfg.joint_states == JointStateMapping("/joint_states")
    assert cfg.wrenches == (WrenchMapping("ft_sensor", "/ft_sensor/wrench", range_force=580.0, range_torque=20.0),)
    assert cfg.action == ActionMapping("/joint_command")
    assert (cfg.base_frame, cfg.end_effector_frame, cfg.world_frame) == ("base_link", "hand", "world")
    assert cfg.step == StepClock(30.0) and cfg.sync_tolerance_ms == 20.0
    assert cfg.writer_settings() == {"video": {"crf": 23, "preset": "veryfast"}}


def test_shipped_mobile_manipulator_config_loads() -> None:
    cfg = load_mapping(CONFIG_DIR / "bag2ortf_mobile_manipulator.yaml")
    assert cfg.action == ActionMapping("/cmd_vel", time="receive", policy="latest")
    assert cfg.wrenches == ()
    assert cfg.camera("head_depth") == CameraMapping(
        "head_depth",
        "/head_camera/aligned_depth_to_color/image_raw/compressedDepth",
        "depth",
        "/head_camera/aligned_depth_to_color/camera_info",
    )
    assert cfg.episodes == EpisodeSplit("topic", topic="/teleop/recording")
    assert cfg.labels.task_topic == "/task_instruction"
    assert cfg.world_frame == "odom"
    assert cfg.max_latency_ms == 300.0
    assert cfg.laser_scans == (LaserScanMapping("base_scan", "/base_scan"),)
    assert cfg.point_clouds == (PointCloudMapping("head_points", "/head_camera/depth/color/points"),)


def test_shipped_arm_config_matches_the_synthetic_bag(tmp_path: Path) -> None:
    """Every topic the example maps is one the project's teleop bag records (it converts it as is)."""
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=0.1)
    cfg = load_mapping(CONFIG_DIR / "bag2ortf_arm.yaml")
    assert set(cfg.topics()) <= set(bag.msgtypes)


@pytest.mark.parametrize("name", ["bag2ortf_arm.yaml", "bag2ortf_mobile_manipulator.yaml"])
def test_shipped_configs_round_trip(name: str, tmp_path: Path) -> None:
    cfg = load_mapping(CONFIG_DIR / name)
    write_mapping(cfg, tmp_path / "again.yaml")
    assert load_mapping(tmp_path / "again.yaml") == cfg


# ---------------------------------------------------------------- reading and writing


def test_empty_file_and_empty_mapping_are_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    assert load_mapping(tmp_path / "empty.yaml") == TopicMapping()
    assert mapping_from_dict({}, "x") == TopicMapping()
    assert TopicMapping().step == StepClock(30.0, None)


def test_every_field_round_trips_through_yaml(tmp_path: Path) -> None:
    path = tmp_path / "full.yaml"
    write_mapping(FULL, path)
    text = path.read_text()
    assert text.startswith("# ortf-bag2ortf topic mapping")
    assert load_mapping(path) == FULL
    # a stream's own tolerance is written under the stream, and the header says what it does
    assert yaml.safe_load(text)["cameras"]["wrist"]["sync_tolerance_ms"] == 8.0
    assert "stream's own tolerance (null: the mapping's sync_tolerance_ms above)" in text
    assert mapping_from_dict(mapping_to_dict(FULL), "x") == FULL
    # every key is written, unset ones as null, so the file shows what can be set
    assert mapping_to_dict(TopicMapping())["cameras"] == {}
    assert yaml.safe_load(dump_mapping(TopicMapping()))["joint_states"] is None
    assert "world_frame: null" in dump_mapping(TopicMapping())


def test_list_form_of_cameras_and_wrenches_reads_like_the_mapping_form() -> None:
    listed = mapping_from_dict(
        {
            "cameras": [
                {"name": "a", "topic": "/a/image", "kind": "rgb"},
                {"name": "b", "topic": "/b", "kind": "depth"},
            ],
            "wrenches": [{"name": "ft", "topic": "/ft"}],
        },
        "x",
    )
    keyed = mapping_from_dict(
        {
            "cameras": {"a": {"topic": "/a/image", "kind": "rgb"}, "b": {"topic": "/b", "kind": "depth"}},
            "wrenches": {"ft": {"topic": "/ft"}},
        },
        "x",
    )
    assert listed == keyed
    assert [c.name for c in keyed.cameras] == ["a", "b"]


def test_ros_parameters_read_like_the_yaml() -> None:
    params = {
        "cameras.wrist.topic": "/wrist/image_raw",
        "cameras.wrist.kind": "rgb",
        "joint_states.topic": "/joint_states",
        "step.camera": "wrist",
        "episodes.mode": "ranges",
        "episodes.ranges": [0.0, 1.0, 2.0, 3.0],  # a parameter holds no list of lists
        "tf_topics": ("/tf",),
        "writer.video.crf": 30,
    }
    cfg = mapping_from_parameters(params)
    assert cfg.cameras == (CameraMapping("wrist", "/wrist/image_raw", "rgb"),)
    assert cfg.step == StepClock(None, "wrist")
    assert cfg.episodes.ranges == ((0.0, 1.0), (2.0, 3.0))
    assert cfg.writer_settings() == {"video": {"crf": 30}} and cfg.writer.video.crf == 30
    offsets = mapping_from_parameters(
        {**params, "joint_states.clock_offset_ms": "auto", "cameras.wrist.clock_offset_ms": 3}
    )
    assert offsets.joint_states is not None and offsets.joint_states.clock_offset_ms == "auto"
    assert offsets.cameras[0].clock_offset_ms == 3.0
    with pytest.raises(ConversionError, match=r"^parameters: step: is a value and a namespace$"):
        mapping_from_parameters({"step": 1, "step.rate_hz": 2.0})


def test_frames_lose_a_leading_slash() -> None:
    cfg = mapping_from_dict({"base_frame": "/base_link", "wrenches": {"ft": {"topic": "/ft", "frame": "/tool"}}}, "x")
    assert cfg.base_frame == "base_link" and cfg.wrenches[0].frame == "tool"


def test_topics_lists_every_mapped_topic_once() -> None:
    assert FULL.topics() == [
        "/wrist/image_raw",
        "/cam/depth/image_raw",
        "/wrist/camera_info",
        "/joint_states",
        "/ft/wrench",
        "/cmd_vel",
        "/tf",
        "/robot2/tf",
        "/robot2/robot_description",
        "/task",
    ]


# ---------------------------------------------------------------- errors

CAM = {"topic": "/cam/image_raw", "kind": "rgb"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"cameras": [{"name": "a", **CAM}, {"name": "b", **CAM, "topic": "/b", "policy": "mean"}]},
            "teleop.yaml: cameras[1].policy: expected one of latest, nearest, linear, got 'mean'",
        ),
        ({"camera": {}}, "teleop.yaml: camera: unknown key (expected one of step, sync_tolerance_ms,"),
        ({"cameras": {"a": {**CAM, "polcy": "latest"}}}, "teleop.yaml: cameras.a.polcy: unknown key (expected one of"),
        (
            {"cameras": {"a": {**CAM, "kind": "ir"}}},
            "teleop.yaml: cameras.a.kind: expected one of rgb, depth, got 'ir'",
        ),
        ({"cameras": {"a": {"topic": "/a"}}}, "teleop.yaml: cameras.a.kind: required key is missing"),
        ({"cameras": {"a": {"kind": "rgb"}}}, "teleop.yaml: cameras.a.topic: required key is missing"),
        ({"cameras": {"a": {**CAM, "time": "now"}}}, "cameras.a.time: expected one of header, receive, got 'now'"),
        ({"cameras": {"a": {**CAM, "policy": "linear"}}}, "cameras.a.policy: linear interpolation is for numeric"),
        ({"cameras": {"wrist cam": CAM}}, "teleop.yaml: cameras.wrist cam: name 'wrist cam' must match [A-Za-z0-9_]+"),
        ({"cameras": [{"name": "a-b", **CAM}]}, "teleop.yaml: cameras[0].name: expected a name matching"),
        ({"cameras": [CAM]}, "teleop.yaml: cameras[0].name: required key is missing"),
        (
            {"cameras": [{"name": "a", **CAM}, {"name": "a", **CAM, "topic": "/b"}]},
            "teleop.yaml: cameras[1].name: 'a' is already the name of cameras[0]",
        ),
        ({"cameras": {"a": CAM, "b": CAM}}, "teleop.yaml: cameras: topic /cam/image_raw is mapped twice"),
        ({"cameras": "/cam/image_raw"}, "teleop.yaml: cameras: expected a mapping of name -> settings"),
        ({"cameras": {"a": CAM}, "wrenches": {"a": {"topic": "/ft"}}}, "wrenches: 'a' is also a camera"),
        ({"cameras": {"a": {**CAM, "topic": "cam"}}}, "cameras.a.topic: expected a topic name starting with '/'"),
        ({"step": {"rate_hz": 30, "camera": "a"}, "cameras": {"a": CAM}}, "teleop.yaml: step: give exactly one of"),
        ({"step": {"rate_hz": None}}, "teleop.yaml: step: give exactly one of rate_hz"),
        ({"step": {"camera": "nope"}, "cameras": {"a": CAM}}, "step.camera: 'nope' is not one of the cameras (a)"),
        ({"step": {"rate_hz": 0}}, "teleop.yaml: step.rate_hz: expected a positive number up to 1000, got 0"),
        ({"step": {"rate_hz": "30"}}, "teleop.yaml: step.rate_hz: expected a positive number up to 1000, got '30'"),
        ({"step": {"rate_hz": True}}, "teleop.yaml: step.rate_hz: expected a positive number up to 1000, got true"),
        ({"step": {"rate_hz": 5000}}, "teleop.yaml: step.rate_hz: expected a positive number up to 1000, got 5000"),
        (
            {"step": {"rate_hz": float("inf")}},
            "teleop.yaml: step.rate_hz: expected a positive number up to 1000, got inf",
        ),
        (
            {"step": {"rate_hz": float("nan")}},
            "teleop.yaml: step.rate_hz: expected a positive number up to 1000, got nan",
        ),
        ({"sync_tolerance_ms": -1}, "teleop.yaml: sync_tolerance_ms: expected a number from 0 to 10000, got -1"),
        (
            {"cameras": {"wrist": {"topic": "/w", "kind": "rgb", "sync_tolerance_ms": "20"}}},
            "teleop.yaml: cameras.wrist.sync_tolerance_ms: expected a number from 0 to 10000, got '20'",
        ),
        (
            {"laser_scans": {"scan": {"topic": "/scan", "sync_tolerance_ms": 20000}}},
            "teleop.yaml: laser_scans.scan.sync_tolerance_ms: expected a number from 0 to 10000, got 20000",
        ),
        (
            {"audio": {"mic": {"topic": "/audio", "sync_tolerance_ms": 20}}},
            "teleop.yaml: audio.mic.sync_tolerance_ms: unknown key (expected one of topic,",
        ),
        ({"drop_outside_tolerance": "yes"}, "drop_outside_tolerance: expected true or false, got 'yes'"),
        ({"joint_states": {"policy": "linear"}}, "teleop.yaml: joint_states.topic: required key is missing"),
        ({"joint_states": {"topic": "/j", "native": 1}}, "joint_states.native: expected true or false, got 1"),
        (
            {"wrenches": {"ft": {"topic": "/ft", "range_force": 0}}},
            "wrenches.ft.range_force: expected a positive number up to 1000000000, got 0",
        ),
        ({"action": {"policy": "mean"}}, "teleop.yaml: action.policy: expected one of latest, nearest, linear"),
        ({"action": None, "tf_topics": None}, "teleop.yaml: tf_topics: must not be null"),
        ({"tf_topics": "/tf"}, "teleop.yaml: tf_topics: expected a list of topic names, got '/tf'"),
        ({"tf_topics": ["/tf", "/tf"]}, "teleop.yaml: tf_topics[1]: '/tf' is listed twice"),
        ({"tf_static_topics": ["tf_static"]}, "tf_static_topics[0]: expected a topic name starting with '/'"),
        ({"gripper_joints": ["a", 3]}, "teleop.yaml: gripper_joints[1]: expected a non-empty string, got 3"),
        ({"base_frame": "base link"}, "teleop.yaml: base_frame: expected a frame name, got 'base link'"),
        ({"episodes": {"mode": "split"}}, "episodes.mode: expected one of input, topic, gap, ranges, got 'split'"),
        ({"episodes": {"mode": "gap"}}, "teleop.yaml: episodes.gap_s: required with mode gap"),
        ({"episodes": {"mode": "topic"}}, "teleop.yaml: episodes.topic: required with mode topic"),
        ({"episodes": {"gap_s": 2.0}}, "teleop.yaml: episodes.gap_s: only used with mode gap, but mode is input"),
        ({"episodes": {"mode": "ranges", "ranges": [[0, 1], [3]]}}, "episodes.ranges[1]: expected [start, end]"),
        ({"episodes": {"mode": "ranges", "ranges": [[2, 1]]}}, "episodes.ranges[0]: ends at 1 s, not after its start"),
        (
            {"episodes": {"mode": "ranges", "ranges": [[0, 5], [4, 6]]}},
            "episodes.ranges[1]: starts at 4 s, before the previous range ends (5 s)",
        ),
        ({"episodes": {"mode": "ranges", "ranges": [0, 1, 2]}}, "episodes.ranges: expected [start, end] pairs"),
        ({"labels": {"task": ""}}, "teleop.yaml: labels.task: expected a non-empty string, got ''"),
        (
            {"cameras": {"a": {**CAM, "clock_offset_ms": "measure"}}},
            "teleop.yaml: cameras.a.clock_offset_ms: expected auto or a number of milliseconds within +-1e+12, "
            "got 'measure'",
        ),
        ({"action": {"topic": "/c", "clock_offset_ms": float("inf")}}, "action.clock_offset_ms: expected auto or a"),
        ({"wrenches": {"ft": {"topic": "/ft", "clock_offset_ms": True}}}, "wrenches.ft.clock_offset_ms: expected auto"),
        ({"max_latency_ms": -5}, "teleop.yaml: max_latency_ms: expected a number from 0 to 10000, got -5"),
        ({"max_latency_ms": None}, "teleop.yaml: max_latency_ms: must not be null"),
        ({"max_latency_ms": 60000}, "teleop.yaml: max_latency_ms: expected a number from 0 to 10000, got 60000"),
        ({"labels": {"success": "true"}}, "teleop.yaml: labels.success: expected true or false, got 'true'"),
        ({"writer": {"chunk_sz": 3}}, "teleop.yaml: writer: chunk_sz: unknown setting"),
        ({"writer": {"video": {"crf": "high"}}}, "teleop.yaml: writer: video.crf: expected int, got 'high'"),
        ({"writer": 3}, "teleop.yaml: writer: expected a mapping of DatasetWriter settings, got 3"),
        ([1, 2], "teleop.yaml: top level: expected a mapping, got [1, 2]"),
        ({3: "x"}, "teleop.yaml: top level: keys must be strings, got 3"),
    ],
)
def test_bad_mapping_is_one_line_naming_file_and_key(data: object, message: str) -> None:
    error = _error(data)
    assert error.startswith(message) or message in error, error
    assert "\n" not in error


def test_unreadable_files_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConversionError, match=r"nope\.yaml: cannot read the topic mapping \(No such file"):
        load_mapping(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("cameras: [\n")
    with pytest.raises(ConversionError, match=r"bad\.yaml: not valid YAML: .*line 2"):
        load_mapping(bad)
    twice = tmp_path / "twice.yaml"
    twice.write_text("step:\n  rate_hz: 10\nstep:\n  rate_hz: 20\n")
    with pytest.raises(ConversionError, match=r"twice\.yaml: not valid YAML: key 'step' given twice \(line 3\)"):
        load_mapping(twice)
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(ConversionError, match=r"dir\.yaml: cannot read the topic mapping"):
        load_mapping(tmp_path / "dir.yaml")


def test_an_invalid_config_is_not_written(tmp_path: Path) -> None:
    broken = dataclasses.replace(FULL, step=StepClock(rate_hz=30.0, camera="wrist"))
    with pytest.raises(ConversionError, match="step: give exactly one of"):
        write_mapping(broken, tmp_path / "out.yaml")
    assert not (tmp_path / "out.yaml").exists()
    with pytest.raises(ConversionError, match=r"cannot write the topic mapping"):
        write_mapping(FULL, tmp_path)  # a directory


# ---------------------------------------------------------------- auto-detection


@pytest.mark.parametrize(
    ("topic", "name"),
    [
        ("/wrist_camera/image_raw", "wrist_camera"),
        ("/wrist_camera/image_raw/compressed", "wrist_camera"),
        ("/camera/color/image_raw", "camera_color"),
        ("/camera/depth/image_rect_raw/compressedDepth", "camera_depth"),
        ("/front/image_rect_color", "front"),
        ("/kinect/rgb", "kinect"),
        ("/image_raw", "camera"),
        ("/robot-1/cam.left/image", "robot_1_cam_left"),
        ("/test/sensor_msgs/compressed_image", "test_sensor_msgs"),
    ],
)
def test_camera_names_from_topics(topic: str, name: str) -> None:
    assert camera_name(topic) == name


def test_wrench_names_and_command_topics() -> None:
    assert wrench_name("/ft_sensor/wrench") == "ft_sensor"
    assert wrench_name("/wrench") == "wrench"
    assert wrench_name("/left_arm/ft/wrench/raw") == "left_arm_ft"
    commands = ["/joint_command", "/cmd_vel", "/arm/joint_targets", "/forward_position_controller/commands"]
    assert all(is_command_topic(t) for t in commands)
    assert not any(is_command_topic(t) for t in ["/joint_states", "/camera/image_raw", "/contact"])


def test_auto_config_of_the_synthetic_teleop_bag(tmp_path: Path) -> None:
    """The canonical example converts with no config: every topic lands where it belongs."""
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=0.1)
    with BagSource(bag.path) as source:
        cfg = detect_mapping(source.topics(), step_rate_hz=15.0)
    assert cfg == TopicMapping(
        cameras=(
            CameraMapping("depth_camera", "/depth_camera/image_raw", "depth", "/depth_camera/camera_info"),
            CameraMapping("overhead_camera", "/overhead_camera/image_raw", "rgb", "/overhead_camera/camera_info"),
            CameraMapping("wrist_camera", "/wrist_camera/image_raw", "rgb", "/wrist_camera/camera_info"),
        ),
        joint_states=JointStateMapping("/joint_states"),
        wrenches=(WrenchMapping("ft_sensor", "/ft_sensor/wrench"),),
        action=ActionMapping("/joint_command"),
        step=StepClock(15.0),
    )
    path = tmp_path / "auto.yaml"
    write_mapping(cfg, path)
    assert load_mapping(path) == cfg


def test_auto_config_of_a_ros1_bag_with_compressed_images_and_legacy_tf(tmp_path: Path) -> None:
    bag = write_teleop_bag(tmp_path / "t.bag", "ros1", duration_s=0.1, compressed=True, legacy_tf=True)
    with BagSource(bag.path) as source:
        cfg = detect_mapping(source.topics())
    assert [(c.name, c.topic) for c in cfg.cameras if c.kind == "rgb"] == [
        ("overhead_camera", "/overhead_camera/image_raw/compressed"),
        ("wrist_camera", "/wrist_camera/image_raw/compressed"),
    ]
    assert cfg.tf_topics == ("/tf",) and cfg.tf_static_topics == ("/tf_static",)


def test_auto_config_of_third_party_bags() -> None:
    with BagSource(RESOURCES / "UbiquityRobotics__fiducials/fiducial_slam/test/aruco_images.bag") as source:
        cfg = detect_mapping(source.topics())
    assert cfg.cameras == (
        CameraMapping("raspicam_node", "/raspicam_node/image/compressed", "rgb", "/raspicam_node/camera_info"),
    )
    assert cfg.joint_states is None and cfg.action == ActionMapping() and cfg.tf_topics == ()
    with BagSource(RESOURCES / "cruise-automation__rosbag.js/fixtures/example.bag") as source:
        turtle = detect_mapping(source.topics())
    assert turtle.action == ActionMapping("/turtle1/cmd_vel", time="receive")  # Twist has no header
    assert turtle.cameras == () and turtle.tf_topics == ("/tf",)
    with BagSource(RESOURCES / "geocamxyz__rosbags-rs/tests/test_bags/test_bag_mcap") as source:
        odd = detect_mapping(source.topics())
    assert {c.name: c.topic for c in odd.cameras} == {  # both named test_sensor_msgs: full names instead
        "test_sensor_msgs_compressed_image": "/test/sensor_msgs/compressed_image",
        "test_sensor_msgs_image": "/test/sensor_msgs/image",
    }
    assert odd.joint_states == JointStateMapping("/test/sensor_msgs/joint_state")
    assert odd.wrenches == (WrenchMapping("test_geometry_msgs", "/test/geometry_msgs/wrench_stamped"),)
    assert odd.tf_topics == () and odd.tf_static_topics == ()


def test_auto_config_realsense_and_duplicates() -> None:
    topics = [
        _topic("/camera/color/image_raw", "sensor_msgs/msg/Image"),
        _topic("/camera/color/image_raw/compressed", "sensor_msgs/msg/CompressedImage"),  # same images: left out
        _topic("/camera/color/camera_info", "sensor_msgs/msg/CameraInfo"),
        _topic("/camera/aligned_depth_to_color/image_raw", "sensor_msgs/msg/Image"),
        _topic("/camera/aligned_depth_to_color/camera_info", "sensor_msgs/msg/CameraInfo"),
        _topic("/left/image_raw", "sensor_msgs/msg/Image"),
        _topic("/left/image_rect", "sensor_msgs/msg/Image"),  # both "left": full names instead
        _topic("/empty/image_raw", "sensor_msgs/msg/Image", count=0),  # no messages: not mapped
        _topic("/left/wrench", "geometry_msgs/msg/WrenchStamped"),  # "left" is free: the cameras took full names
        _topic("/camera/wrench", "geometry_msgs/msg/WrenchStamped"),
    ]
    cfg = detect_mapping(topics)
    assert [(c.name, c.kind, c.camera_info_topic) for c in cfg.cameras] == [
        ("camera_aligned_depth_to_color", "depth", "/camera/aligned_depth_to_color/camera_info"),
        ("camera_color", "rgb", "/camera/color/camera_info"),
        ("left_image_raw", "rgb", None),
        ("left_image_rect", "rgb", None),
    ]
    assert [w.name for w in cfg.wrenches] == ["camera", "left"]
    assert cfg.robot_description_topic == "/robot_description"  # the default when none is recorded


def test_auto_config_wrench_name_taken_by_a_camera() -> None:
    topics = [
        _topic("/wrist/image_raw", "sensor_msgs/msg/Image"),
        _topic("/wrist/wrench", "geometry_msgs/msg/WrenchStamped"),
    ]
    cfg = detect_mapping(topics)
    assert [c.name for c in cfg.cameras] == ["wrist"]
    assert [w.name for w in cfg.wrenches] == ["wrist_wrench"]
    mapping_from_dict(mapping_to_dict(cfg), "x")  # valid: names are unique


@pytest.mark.parametrize(
    ("topics", "state", "action"),
    [
        # the state is the JointState named like joint_states; a second one named like a command the action
        (
            [("/joint_states", "JointState"), ("/arm/joint_states", "JointState"), ("/target_joints", "JointState")],
            "/joint_states",
            ActionMapping("/target_joints"),
        ),
        (
            [("/joint_states", "JointState"), ("/arm/joint_trajectory", "JointTrajectory")],
            "/joint_states",
            ActionMapping("/arm/joint_trajectory"),
        ),
        (
            [("/joint_states", "JointState"), ("/position_controller/commands", "Float64MultiArray")],
            "/joint_states",
            ActionMapping("/position_controller/commands", time="receive"),
        ),
        ([("/joint_states", "JointState"), ("/state_vector", "Float64MultiArray")], "/joint_states", ActionMapping()),
        (
            [("/joint_states", "JointState"), ("/cmd_vel", "Twist"), ("/joint_command", "JointState")],
            "/joint_states",
            ActionMapping("/joint_command"),
        ),
        ([("/joint_command", "JointState")], None, ActionMapping("/joint_command")),
        (
            [("/robot/joint_states", "JointState"), ("/servo/target_pose", "PoseStamped")],
            "/robot/joint_states",
            ActionMapping("/servo/target_pose"),
        ),
    ],
)
def test_auto_config_state_and_action(topics: list[tuple[str, str]], state: str | None, action: ActionMapping) -> None:
    packages = {
        "JointState": "sensor_msgs",
        "JointTrajectory": "trajectory_msgs",
        "Float64MultiArray": "std_msgs",
        "Twist": "geometry_msgs",
        "PoseStamped": "geometry_msgs",
    }
    cfg = detect_mapping([_topic(name, f"{packages[kind]}/msg/{kind}") for name, kind in topics])
    assert (cfg.joint_states.topic if cfg.joint_states else None) == state
    assert cfg.action == action


CONTROLLER = "control_msgs/msg/JointTrajectoryControllerState"


@pytest.mark.parametrize(
    ("topics", "state", "action"),
    [
        # no JointState: the controller state is the state, and its reference the action
        ([("/arm_controller/state", CONTROLLER)], "/arm_controller/state", "/arm_controller/state"),
        # an arm's controller before a torso's or a gripper's (TIAGo), whatever the alphabet says
        (
            [
                ("/gripper_controller/state", CONTROLLER),
                ("/arm_controller/state", CONTROLLER),
                ("/torso_controller/state", CONTROLLER),
            ],
            "/arm_controller/state",
            "/arm_controller/state",
        ),
        # a command topic wins over the reference
        (
            [("/arm_controller/state", CONTROLLER), ("/joint_command", "sensor_msgs/msg/JointState")],
            "/arm_controller/state",
            "/joint_command",
        ),
        # a JointState is the state; with no command, the controller's reference is the action
        (
            [("/joint_states", "sensor_msgs/msg/JointState"), ("/scaled_pos_joint_traj_controller/state", CONTROLLER)],
            "/joint_states",
            "/scaled_pos_joint_traj_controller/state",
        ),
        # ROS 1 spelling of the type
        ([("/arm_controller/state", "control_msgs/JointTrajectoryControllerState")], "/arm_controller/state", None),
    ],
)
def test_auto_config_of_controller_states(topics: list[tuple[str, str]], state: str, action: str | None) -> None:
    cfg = detect_mapping([_topic(name, msgtype) for name, msgtype in topics])
    assert cfg.joint_states == JointStateMapping(state)
    assert cfg.action == ActionMapping(action or state)


def test_describe_mapping_says_what_a_controller_state_gives() -> None:
    cfg = TopicMapping(
        joint_states=JointStateMapping("/arm_controller/state"), action=ActionMapping("/arm_controller/state")
    )
    types = {"/arm_controller/state": "control_msgs/JointTrajectoryControllerState"}
    lines = describe_mapping(cfg, {}, types)
    assert (
        "joint state: /arm_controller/state (header time, linear, the controller state's feedback (else actual), "
        "every message kept at its native rate)"
    ) in lines
    assert (
        "action: /arm_controller/state (header time, latest, the controller's reference (else desired): declared so "
        "in the manifest)"
    ) in lines
    untyped = describe_mapping(cfg, {})  # (a live recorder's: no types known)
    assert "action: /arm_controller/state (header time, latest)" in untyped


def test_a_mapping_names_a_controller_state_as_it_names_a_joint_state(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("joint_states: {topic: /arm_controller/state}\naction: {topic: /arm_controller/state}\n")
    cfg = load_mapping(path)
    assert cfg.joint_states == JointStateMapping("/arm_controller/state")
    assert cfg.action == ActionMapping("/arm_controller/state")


def test_auto_config_tf_and_robot_description_by_name_and_type() -> None:
    cfg = detect_mapping(
        [
            _topic("/robot1/tf", "tf2_msgs/msg/TFMessage"),
            _topic("/robot1/tf_static", "tf2_msgs/msg/TFMessage", count=1),
            _topic("/tf", "tf/msg/tfMessage"),  # ROS 1 legacy name
            _topic("/debug/tf_message", "tf2_msgs/msg/TFMessage"),  # not named tf
            _topic("/robot1/robot_description", "std_msgs/msg/String", count=1),
            _topic("/chatter", "std_msgs/msg/String"),
        ]
    )
    assert cfg.tf_topics == ("/robot1/tf", "/tf")
    assert cfg.tf_static_topics == ("/robot1/tf_static",)
    assert cfg.robot_description_topic == "/robot1/robot_description"


def test_describe_mapping_says_what_happens() -> None:
    lines = describe_mapping(FULL, {})
    assert lines[0] == "steps: at each frame of camera wrist"
    assert lines[1] == (
        "sync tolerance 40 ms (the mapping's sync_tolerance_ms of action); per stream: joint_states 12.5 ms, "
        "ft 12.5 ms, wrist 8 ms, depth 12.5 ms; steps beyond it are dropped"
    )
    wrist = "camera wrist (rgb): /wrist/image_raw (receive time, latest, camera_info /wrist/camera_info, "
    assert wrist + "without it intrinsics unknown)" in lines
    assert (
        "camera depth (depth): /cam/depth/image_raw (header time -250.5 ms, nearest, "
        "no camera_info: intrinsics unknown)" in lines
    )
    assert "episodes: 0-1.5 s, 2-7.25 s" in lines
    assert "joint state: /joint_states (receive time, its clock offset measured and taken out, nearest)" in lines, lines
    assert any(
        line.startswith("camera depth (depth): /cam/depth/image_raw (header time -250.5 ms, nearest") for line in lines
    )
    default = describe_mapping(TopicMapping(), {})
    assert "sync tolerance 16.7 ms (half the 30 Hz step period); steps beyond it are kept and counted" in default
    live = describe_mapping(TopicMapping(), None)
    assert any(line.startswith("sync tolerance from the streams' rates, once measured") for line in live)
    live = describe_mapping(dataclasses.replace(FULL, sync_tolerance_ms=None), None)
    assert any(
        line.endswith("; the mapping's per stream: wrist 8 ms, action 40 ms; steps beyond it are dropped")
        for line in live
    )
    assert "action: none recorded; the next step's joint positions (declared so in the manifest)" in default
    assert "joint state: none" in default and "cameras: none" in default


# ---------------------------------------------------------------- sync tolerance per stream


LIDAR_ARM = TopicMapping(
    cameras=(CameraMapping("wrist", "/wrist/image_raw", "rgb"), CameraMapping("top", "/top/image_raw", "rgb")),
    joint_states=JointStateMapping("/joint_states"),
    laser_scans=(LaserScanMapping("lidar", "/scan"),),
    action=ActionMapping("/joint_command"),
)
RATES = {
    "/wrist/image_raw": 30.0,
    "/top/image_raw": 30.0,
    "/joint_states": 500.0,
    "/scan": 10.0,
    "/joint_command": 50.0,
}


def test_each_stream_gets_the_tolerance_its_own_rate_and_policy_allow() -> None:
    tolerance = sync_tolerance(LIDAR_ARM, RATES)
    assert (tolerance.ms, tolerance.set_by) == (62.5, "set by laser scan lidar: /scan at 10 Hz, nearest")
    expected = {"joint_states": 16.7, "lidar": 62.5, "wrist": 20.9, "top": 20.9, "action": 25.0}
    assert tolerance.streams == expected
    assert tolerance.line() == (
        "sync tolerance 62.5 ms (set by laser scan lidar: /scan at 10 Hz, nearest); "
        "per stream: joint_states 16.7 ms, wrist 20.9 ms, top 20.9 ms, action 25 ms"
    )
    # The camera driving the steps is at 0 from them: half the step period (its 30 Hz).
    driven = sync_tolerance(dataclasses.replace(LIDAR_ARM, step=StepClock(None, "wrist")), RATES)
    assert driven.streams["wrist"] == 16.7 and driven.streams["top"] == 20.9


def test_a_streams_own_tolerance_and_the_mappings_default() -> None:
    wrist = dataclasses.replace(LIDAR_ARM.cameras[0], sync_tolerance_ms=10.0)
    lidar = dataclasses.replace(LIDAR_ARM.laser_scans[0], sync_tolerance_ms=100.0)
    mapping = dataclasses.replace(
        LIDAR_ARM, cameras=(wrist, LIDAR_ARM.cameras[1]), laser_scans=(lidar,), sync_tolerance_ms=30.0
    )
    tolerance = sync_tolerance(mapping, RATES)
    assert tolerance.streams == {"joint_states": 30.0, "lidar": 100.0, "wrist": 10.0, "top": 30.0, "action": 30.0}
    assert (tolerance.ms, tolerance.set_by) == (100.0, "the mapping's sync_tolerance_ms of laser scan lidar")
    # Without a mapping default, the others keep what their rates give; the loosest is the dataset's.
    alone = sync_tolerance(dataclasses.replace(mapping, sync_tolerance_ms=None, laser_scans=()), RATES)
    assert alone.streams == {"joint_states": 16.7, "wrist": 10.0, "top": 20.9, "action": 25.0}
    assert alone.line() == (
        "sync tolerance 25 ms (set by action: /joint_command at 50 Hz, latest); "
        "per stream: joint_states 16.7 ms, wrist 10 ms, top 20.9 ms"
    )
