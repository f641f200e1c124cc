"""decode + extract on the real third-party bags in test/support/resources: every message
extracted or rejected with a reason, legacy TF in every compression, a camera's JPEG and info."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.interfaces import MessageDefinitionFormat
from rosbags.typesys import Stores, get_typestore

from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.extract import extract, supports
from ortf_ros.pipeline.samples import (
    BadMessage,
    CameraInfoSample,
    ImageSample,
    JointStateSample,
    RawMessage,
    Sample,
    Serialization,
    TransformSample,
    WrenchSample,
)

RESOURCES = Path(__file__).resolve().parents[1] / "support" / "resources"
GEOCAM = RESOURCES / "geocamxyz__rosbags-rs" / "tests" / "test_bags"
CRUISE = RESOURCES / "cruise-automation__rosbag.js" / "fixtures"
UBIQUITY = RESOURCES / "UbiquityRobotics__fiducials" / "fiducial_slam" / "test" / "aruco_images.bag"


def read_recording(
    path: Path, decoder: Decoder, topics: set[str] | None = None, *, register: bool = True
) -> Iterator[RawMessage]:
    """What a bag source does: raw bytes with receive time, definitions registered first."""
    with AnyReader([path], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        ser: Serialization = "cdr" if reader.is2 else "ros1"
        connections = [c for c in reader.connections if topics is None or c.topic in topics]
        for connection in connections if register else []:
            if connection.msgdef.format == MessageDefinitionFormat.MSG:
                decoder.register(connection.msgtype, connection.msgdef.data, "ros2msg" if reader.is2 else "ros1msg")
            elif connection.msgdef.format == MessageDefinitionFormat.IDL:
                decoder.register(connection.msgtype, connection.msgdef.data, "ros2idl")
        for connection, receive_ns, data in reader.messages(connections=connections):
            yield RawMessage(connection.topic, connection.msgtype, receive_ns, bytes(data), ser)


def decode_and_extract(raws: Iterator[RawMessage], decoder: Decoder) -> list[tuple[RawMessage, list[Sample]]]:
    out: list[tuple[RawMessage, list[Sample]]] = []
    for raw in raws:
        decoded = decoder.decode(raw)
        samples: list[Sample] = [decoded] if isinstance(decoded, BadMessage) else extract(decoded, raw)
        out.append((raw, samples))
    return out


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_geocamxyz_bag_extracts_or_rejects_every_message(storage: str) -> None:
    decoder = Decoder()
    results = decode_and_extract(read_recording(GEOCAM / f"test_bag_{storage}", decoder), decoder)
    assert len(results) == 188

    bad_by_topic = Counter(s.topic for _, samples in results for s in samples if isinstance(s, BadMessage))
    assert bad_by_topic == {"/test/sensor_msgs/image": 2, "/test/sensor_msgs/compressed_image": 2}
    reasons = sorted({s.reason for _, samples in results for s in samples if isinstance(s, BadMessage)})
    assert len(reasons) == 2
    assert reasons[0].startswith("/test/sensor_msgs/compressed_image (sensor_msgs/msg/CompressedImage): ")
    assert "10 bytes do not decode as JPEG" in reasons[0]
    assert reasons[1] == (
        "/test/sensor_msgs/image (sensor_msgs/msg/Image): data holds 30 bytes, 640x480 rgb8 with step 1920 needs 921600"
    )

    def samples_of(topic: str) -> list[Sample]:
        return [s for raw, samples in results if raw.topic == topic for s in samples]

    joints = samples_of("/test/sensor_msgs/joint_state")
    assert len(joints) == 2
    for joint in joints:
        assert isinstance(joint, JointStateSample)
        assert joint.names == ("joint1", "joint2", "joint3")
        np.testing.assert_array_equal(joint.position, [0.1, 0.2, 0.3])
        np.testing.assert_array_equal(joint.velocity, [0.01, 0.02, 0.03])
        np.testing.assert_array_equal(joint.effort, [1.0, 2.0, 3.0])
        assert joint.stamps.frame_id == "test_frame"
        assert joint.stamps.header_ns is not None and joint.stamps.header_ns > 1_700_000_000 * 10**9

    for topic in ("/test/geometry_msgs/wrench_stamped", "/test/geometry_msgs/wrench"):
        wrenches = samples_of(topic)
        assert len(wrenches) == 2
        for wrench in wrenches:
            assert isinstance(wrench, WrenchSample)
            np.testing.assert_array_equal(wrench.force, [10.0, 5.0, 2.0])
            np.testing.assert_array_equal(wrench.torque, [0.1, 0.2, 0.3])

    transforms = samples_of("/test/tf2_msgs/tf_message")
    assert len(transforms) == 2
    for sample in transforms:
        assert isinstance(sample, TransformSample)
        assert (sample.parent, sample.child, sample.static) == ("test_frame", "child_frame", False)
        np.testing.assert_array_equal(sample.translation, [1.0, 2.0, 3.0])
        np.testing.assert_array_equal(sample.rotation, [1.0, 0.0, 0.0, 0.0])  # identity: xyzw (0, 0, 0, 1)

    infos = samples_of("/test/sensor_msgs/camera_info")
    assert len(infos) == 2 and all(isinstance(s, CameraInfoSample) for s in infos)
    kinds = Counter(type(s).__name__ for _, samples in results for s in samples)
    assert kinds["VectorSample"] == 2 * 7  # Twist(Stamped), Pose(Stamped), Float64, Bool, Float64MultiArray
    ignored = sum(1 for raw, samples in results if not samples)
    assert ignored == 188 - sum(1 for raw, _ in results if supports(raw.msgtype))


CRUISE_TF_MESSAGES = 2688


@pytest.mark.parametrize("register", [True, False])
@pytest.mark.parametrize("name", ["example.bag", "example-lz4.bag", "example-bz2.bag"])
def test_cruise_legacy_tf_in_every_compression(name: str, register: bool) -> None:
    decoder = Decoder()
    raws = read_recording(CRUISE / name, decoder, {"/tf", "/tf_static"}, register=register)
    results = decode_and_extract(raws, decoder)
    tf = [(raw, samples) for raw, samples in results if raw.topic == "/tf"]
    assert len(tf) == CRUISE_TF_MESSAGES
    assert {raw.msgtype for raw, _ in tf} == {"tf/msg/tfMessage"}
    assert {raw.serialization for raw, _ in tf} == {"ros1"}
    transforms = [s for _, samples in tf for s in samples]
    assert len(transforms) == CRUISE_TF_MESSAGES
    assert all(isinstance(s, TransformSample) and not s.static for s in transforms)
    pairs = Counter((s.parent, s.child) for s in transforms if isinstance(s, TransformSample))
    assert set(pairs) == {("world", "turtle1"), ("world", "turtle2")}
    static = [s for raw, samples in results if raw.topic == "/tf_static" for s in samples]
    assert static and all(isinstance(s, TransformSample) and s.static for s in static)


def test_ubiquity_jpeg_matches_its_camera_info() -> None:
    decoder = Decoder()
    results = decode_and_extract(read_recording(UBIQUITY, decoder), decoder)
    samples = [s for _, samples in results for s in samples]
    images = [s for s in samples if isinstance(s, ImageSample)]
    infos = [s for s in samples if isinstance(s, CameraInfoSample)]
    assert len(images) == 1 and len(infos) == 15 and len(samples) == 16
    frame = images[0]
    assert frame.kind == "rgb"
    assert frame.pixels.shape == (infos[0].height, infos[0].width, 3) == (960, 1280, 3)
    assert frame.pixels.dtype == np.uint8
    assert frame.pixels.std() > 10  # a real picture, not a flat concealment fill
    assert frame.stamps.header_ns == 1_491_682_360_314_066_469
    assert frame.stamps.frame_id == "raspicam"
    assert infos[0].k[0] == pytest.approx(1014.3431, abs=1e-3)
    assert infos[0].distortion_model == "plumb_bob"
    assert len(infos[0].d) == 5
