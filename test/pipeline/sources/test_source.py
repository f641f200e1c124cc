"""BagSource on bags the project generates in every format and layout, and on broken ones.

The content checks decode the raw bytes with a typestore built only from the message
definitions the bag itself carries (as the pipeline's decoder does) and compare them
with the generator's analytic functions, so reader, writer and definitions are all
checked against the same ground truth.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sqlite3
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from ortf_ros.errors import ConversionError
from ortf_ros.pipeline.decode import canonical_msgtype
from ortf_ros.pipeline.samples import RawMessage
from ortf_ros.pipeline.sources.bag import BATCH_MESSAGES, BagSource, TopicInfo
from ortf_ros.synthetic.bag import TeleopBagInfo, write_teleop_bag
from ortf_ros.synthetic.images import camera_intrinsics, decode_frame_number, depth_frame, rgb_frame
from ortf_ros.synthetic.motion import (
    COMMAND_ORDER,
    joint_command,
    joint_efforts,
    joint_positions,
    joint_state_names,
    joint_velocities,
    select_joints,
    wrench,
)
from ortf_ros.synthetic.robot import teleop_urdf
from ortf_ros.synthetic.schedule import receive_latency_ns, seconds, stamp_ns
from ortf_ros.synthetic.tf import (
    DEPTH_FRAME,
    FT_FRAME,
    OVERHEAD_CAMERA_FRAME,
    STATIC_TRANSFORMS,
    WRIST_CAMERA_FRAME,
    dynamic_transforms,
)
from ortf_ros.synthetic.topics import (
    CAMERAS,
    TOPIC_DEPTH_CAMERA_INFO,
    TOPIC_DEPTH_IMAGE,
    TOPIC_JOINT_COMMAND,
    TOPIC_JOINT_STATES,
    TOPIC_OVERHEAD_CAMERA_INFO,
    TOPIC_OVERHEAD_IMAGE,
    TOPIC_ROBOT_DESCRIPTION,
    TOPIC_TF,
    TOPIC_TF_STATIC,
    TOPIC_WRENCH,
    TOPIC_WRIST_CAMERA_INFO,
)

SHORT = {"duration_s": 0.4, "wrench_rate_hz": 500}

# (id, format, options): every layout BagSource must read.
VARIANTS: list[tuple[str, str, dict[str, Any]]] = [
    ("mcap", "mcap", {}),
    ("sqlite3", "sqlite3", {}),
    ("ros1", "ros1", {}),
    ("mcap-split", "mcap", {"max_bagfile_duration_s": 0.2}),
    ("mcap-split-message-zstd", "mcap", {"max_bagfile_duration_s": 0.2, "bag_compression": "message"}),
    ("sqlite3-split-file-zstd", "sqlite3", {"max_bagfile_duration_s": 0.2, "bag_compression": "file"}),
    ("mcap-chunk-zstd-jpeg", "mcap", {"bag_compression": "storage", "compressed": True}),
    ("ros1-bz2", "ros1", {"bag_compression": "bz2"}),
    ("ros1-lz4-legacy-tf", "ros1", {"bag_compression": "lz4", "legacy_tf": True}),
]


def _bag_path(root: Path, name: str, fmt: str) -> Path:
    return root / (f"{name}.bag" if fmt == "ros1" else name)


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TeleopBagInfo]:
    root = tmp_path_factory.mktemp("bags")
    return {
        name: write_teleop_bag(_bag_path(root, name, fmt), fmt, **SHORT, **options)  # type: ignore[arg-type]
        for name, fmt, options in VARIANTS
    }


def _read_all(paths: Path | list[Path]) -> tuple[list[TopicInfo], list[RawMessage]]:
    with BagSource(paths) as bag:
        return bag.topics(), list(bag.messages())


def _expected_span(info: TeleopBagInfo, topic: str) -> tuple[int, int]:
    rate = info.config.rates()[topic]
    last = info.counts[topic] - 1
    first_stamp = info.start_ns
    last_stamp = info.start_ns if rate is None else stamp_ns(last, rate, info.start_ns)
    return first_stamp + receive_latency_ns(topic, 0), last_stamp + receive_latency_ns(topic, last)


# ---------------------------------------------------------------- topics, counts, order


@pytest.mark.parametrize("name", [v[0] for v in VARIANTS])
def test_topics_counts_rates_and_order(bags: dict[str, TeleopBagInfo], name: str) -> None:
    info = bags[name]
    if "split" in name:
        assert len(info.files) == 2
    with BagSource([info.path]) as bag:
        topics = bag.topics()
        assert {t.topic: t.msgtype for t in topics} == info.msgtypes
        assert {t.topic: t.count for t in topics} == info.counts
        assert bag.message_count == info.message_count
        assert bag.start_ns == info.first_receive_ns
        assert bag.end_ns == info.last_receive_ns
        assert bag.duration_ns == info.last_receive_ns - info.first_receive_ns
        assert bag.duration == pytest.approx(bag.duration_ns / 1e9)
        for topic in topics:
            assert (topic.first_ns, topic.last_ns) == _expected_span(info, topic.topic), topic.topic
            rate = info.config.rates()[topic.topic]
            if rate is None:
                assert topic.rate_hz is None and topic.count == 1
            else:
                assert topic.rate_hz == pytest.approx(rate, rel=0.01), topic.topic
            assert topic.definition and topic.definition_format == ("ros1msg" if info.fmt == "ros1" else "ros2msg")
            assert topic.serialization == ("ros1" if info.fmt == "ros1" else "cdr")
            assert topic.latched == (topic.topic in (TOPIC_TF_STATIC, TOPIC_ROBOT_DESCRIPTION))
        messages = list(bag.messages())
    assert len(messages) == info.message_count
    stamps = [m.receive_ns for m in messages]
    assert stamps == sorted(stamps)
    assert (stamps[0], stamps[-1]) == (info.first_receive_ns, info.last_receive_ns)
    assert {m.serialization for m in messages} == {"ros1" if info.fmt == "ros1" else "cdr"}
    per_topic: dict[str, int] = {}
    for m in messages:
        per_topic[m.topic] = per_topic.get(m.topic, 0) + 1
        assert m.msgtype == info.msgtypes[m.topic]
    assert per_topic == info.counts


@pytest.mark.parametrize("name", [v[0] for v in VARIANTS] + ["mcap-split-message-zstd-without-metadata"])
def test_batches_hold_the_messages(bags: dict[str, TeleopBagInfo], name: str, tmp_path: Path) -> None:
    """``batches`` gives what ``messages`` gives, each topic in order; an MCAP file's
    high-rate topics as runs, a chunk at a time."""
    runs = {TOPIC_WRENCH, TOPIC_JOINT_STATES}
    path = bags[name.removesuffix("-without-metadata")].path
    if name.endswith("-without-metadata"):  # (zstd messages found by their magic number, runs of them included)
        shutil.copytree(path, tmp_path / "lost")
        (tmp_path / "lost" / "metadata.yaml").unlink()
        path = tmp_path / "lost"
    with BagSource(path) as bag:
        messages = list(bag.messages())
        batches = list(bag.batches(None, runs))
    got: list[RawMessage] = []
    spans = [[m.receive_ns for m in b.messages] + [t for r in b.runs for t in r.receive_ns.tolist()] for b in batches]
    assert all(max(a) <= min(b) for a, b in itertools.pairwise(spans))  # (steps are decided between batches)
    for batch in batches:
        assert [m.receive_ns for m in batch.messages] == sorted(m.receive_ns for m in batch.messages)
        assert not {m.topic for m in batch.messages} & {run.topic for run in batch.runs}
        got += batch.messages
        for run in batch.runs:
            assert run.topic in runs and run.msgtype == next(m.msgtype for m in messages if m.topic == run.topic)
            got += run.messages()
    assert len(got) == len(messages)
    for topic in {m.topic for m in messages}:
        assert [m for m in got if m.topic == topic] == [m for m in messages if m.topic == topic]
    run_messages = sum(len(run) for batch in batches for run in batch.runs)
    if name.startswith("mcap") and "message" not in name:  # (zstd per message: each is decompressed alone)
        assert run_messages == sum(1 for m in messages if m.topic in runs)
        assert len(batches) >= len(bags[name].files)  # (a chunk or more per file)
        assert name != "mcap-split" or len(bags[name].files) > 1
    elif "message" in name:
        assert run_messages == 0
    else:  # (no chunks to follow: batches of BATCH_MESSAGES, without runs)
        assert run_messages == 0 and all(len(batch.messages) == BATCH_MESSAGES for batch in batches[:-1])


def test_legacy_tf_keeps_its_original_name(bags: dict[str, TeleopBagInfo]) -> None:
    topics = {t.topic: t for t in _read_all(bags["ros1-lz4-legacy-tf"].path)[0]}
    assert topics[TOPIC_TF].msgtype == "tf2_msgs/msg/TFMessage"
    assert topics[TOPIC_TF].original_msgtype == "tf/tfMessage"
    assert topics[TOPIC_TF_STATIC].original_msgtype == "tf2_msgs/TFMessage"
    assert topics[TOPIC_JOINT_STATES].original_msgtype == "sensor_msgs/JointState"
    mcap_topics = {t.topic: t for t in _read_all(bags["mcap"].path)[0]}
    assert mcap_topics[TOPIC_TF].original_msgtype == "tf2_msgs/msg/TFMessage"


def test_ros2_msgtype_names() -> None:
    assert canonical_msgtype("sensor_msgs/Image") == "sensor_msgs/msg/Image"
    assert canonical_msgtype("sensor_msgs/msg/Image") == "sensor_msgs/msg/Image"
    assert canonical_msgtype("tf/tfMessage") == "tf2_msgs/msg/TFMessage"
    assert canonical_msgtype("tf2_msgs/TFMessage") == "tf2_msgs/msg/TFMessage"


def test_topic_filter(bags: dict[str, TeleopBagInfo]) -> None:
    info = bags["ros1"]
    wanted = {TOPIC_WRENCH, TOPIC_TF_STATIC}
    with BagSource(info.path) as bag:
        got = list(bag.messages(wanted))
        assert list(bag.messages(())) == []
        with pytest.raises(ConversionError, match=r"ros1\.bag: no topic /nope in the recording"):
            bag.messages({"/nope", TOPIC_TF})
    assert {m.topic for m in got} == wanted
    assert len(got) == info.counts[TOPIC_WRENCH] + 1
    assert [m.receive_ns for m in got] == sorted(m.receive_ns for m in got)


# ---------------------------------------------------------------- content


def _typestore_from_bag(topics: list[TopicInfo]) -> Typestore:
    """Only what the bag defines: the pipeline's decoder registers types the same way."""
    store = get_typestore(Stores.EMPTY)
    for topic in topics:
        if topic.definition_format == "ros2idl":
            store.register(get_types_from_idl(topic.definition))
        else:
            store.register(get_types_from_msg(topic.definition, topic.msgtype))
    return store


def _ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _check_message(info: TeleopBagInfo, msg: RawMessage, decoded: Any, seq: int) -> None:
    """One message against the generator's analytic functions."""
    ros1 = info.fmt == "ros1"
    topic = msg.topic.removesuffix("/compressed")
    if topic == TOPIC_ROBOT_DESCRIPTION:
        assert decoded.data == teleop_urdf()
        assert msg.receive_ns == info.start_ns + receive_latency_ns(topic, 0)
        return
    if topic == TOPIC_TF_STATIC:
        got = [(t.header.frame_id, t.child_frame_id) for t in decoded.transforms]
        assert got == [(t.parent, t.child) for t in STATIC_TRANSFORMS]
        r = decoded.transforms[1].transform.rotation
        assert (r.x, r.y, r.z, r.w) == STATIC_TRANSFORMS[1].rotation_xyzw
        return
    header = decoded.transforms[0].header if topic == TOPIC_TF else decoded.header
    stamp = _ns(header.stamp)
    rate = info.config.rates()[msg.topic]
    assert rate is not None
    assert stamp == stamp_ns(seq, rate, info.start_ns)
    assert msg.receive_ns == stamp + receive_latency_ns(topic, seq)
    if ros1:
        assert header.seq == seq
    t = seconds(stamp, info.start_ns)
    if topic == TOPIC_TF:
        for got, want in zip(decoded.transforms, dynamic_transforms(t), strict=True):
            assert (got.header.frame_id, got.child_frame_id) == (want.parent, want.child)
            tr, rot = got.transform.translation, got.transform.rotation
            assert (tr.x, tr.y, tr.z) == want.translation
            assert (rot.x, rot.y, rot.z, rot.w) == want.rotation_xyzw
    elif topic == TOPIC_JOINT_STATES:
        names = tuple(decoded.name)
        assert names == joint_state_names(seq)
        np.testing.assert_array_equal(decoded.position, select_joints(joint_positions(t), names))
        np.testing.assert_array_equal(decoded.velocity, select_joints(joint_velocities(t), names))
        np.testing.assert_array_equal(decoded.effort, select_joints(joint_efforts(t), names))
    elif topic == TOPIC_JOINT_COMMAND:
        assert tuple(decoded.name) == COMMAND_ORDER
        np.testing.assert_array_equal(decoded.position, select_joints(joint_command(t), COMMAND_ORDER))
        assert len(decoded.velocity) == len(decoded.effort) == 0
    elif topic == TOPIC_WRENCH:
        force, torque = wrench(t)
        assert header.frame_id == FT_FRAME
        w = decoded.wrench
        assert (w.force.x, w.force.y, w.force.z) == tuple(force)
        assert (w.torque.x, w.torque.y, w.torque.z) == tuple(torque)
    elif topic in CAMERAS:
        assert header.frame_id == CAMERAS[topic]
        width, height = info.config.width, info.config.height
        if info.config.compressed:
            import av

            assert "jpeg" in decoded.format
            frame = av.CodecContext.create("mjpeg", "r").decode(av.Packet(bytes(decoded.data)))[0]
            assert decode_frame_number(frame.to_ndarray(format="rgb24")) == seq
        else:
            assert (decoded.encoding, decoded.width, decoded.height, decoded.step) == ("rgb8", width, height, width * 3)
            pixels = np.asarray(decoded.data).reshape(height, width, 3)
            np.testing.assert_array_equal(pixels, rgb_frame(topic, seq, width, height))
            assert decode_frame_number(pixels) == seq
    elif topic == TOPIC_DEPTH_IMAGE:
        width, height = info.config.width, info.config.height
        assert (decoded.encoding, decoded.is_bigendian, header.frame_id) == ("16UC1", 0, DEPTH_FRAME)
        depth = np.frombuffer(bytes(decoded.data), dtype="<u2").reshape(height, width)
        np.testing.assert_array_equal(depth, depth_frame(seq, width, height))
    elif topic in CAMERA_INFO_FRAMES:
        assert header.frame_id == CAMERA_INFO_FRAMES[topic]
        fx, fy, cx, cy = camera_intrinsics(info.config.width, info.config.height)
        k = decoded.K if ros1 else decoded.k
        np.testing.assert_array_equal(k, [fx, 0, cx, 0, fy, cy, 0, 0, 1])
        assert (decoded.width, decoded.height, decoded.distortion_model) == (
            info.config.width,
            info.config.height,
            "plumb_bob",
        )
    else:
        raise AssertionError(f"unexpected topic {msg.topic}")


CAMERA_INFO_FRAMES = {
    TOPIC_WRIST_CAMERA_INFO: WRIST_CAMERA_FRAME,
    TOPIC_OVERHEAD_CAMERA_INFO: OVERHEAD_CAMERA_FRAME,
    TOPIC_DEPTH_CAMERA_INFO: DEPTH_FRAME,
}


@pytest.mark.parametrize("name", ["mcap", "sqlite3", "ros1", "ros1-lz4-legacy-tf", "mcap-chunk-zstd-jpeg"])
def test_raw_bytes_decode_to_the_analytic_values(bags: dict[str, TeleopBagInfo], name: str) -> None:
    info = bags[name]
    topics, messages = _read_all(info.path)
    store = _typestore_from_bag(topics)
    deserialize: Callable[[bytes, str], Any] = store.deserialize_ros1 if info.fmt == "ros1" else store.deserialize_cdr
    seqs: dict[str, int] = {}
    for msg in messages:
        seq = seqs.get(msg.topic, 0)
        seqs[msg.topic] = seq + 1
        _check_message(info, msg, deserialize(bytes(msg.data), msg.msgtype), seq)
    assert seqs == info.counts


# ---------------------------------------------------------------- layouts


def test_bare_files_without_metadata(bags: dict[str, TeleopBagInfo], tmp_path: Path) -> None:
    for name in ("mcap", "sqlite3"):
        info = bags[name]
        reference = _read_all(info.path)
        (storage_file,) = info.files
        bare = tmp_path / storage_file.name
        shutil.copy(storage_file, bare)
        assert _read_all(bare) == reference
        # The same file under a name rosbags does not recognise: found by its content.
        odd = tmp_path / f"{name}.recording"
        shutil.copy(storage_file, odd)
        assert _read_all(odd) == reference
        # A rosbag2 directory that lost its metadata.yaml.
        lost = tmp_path / f"{name}-dir"
        shutil.copytree(info.path, lost)
        (lost / "metadata.yaml").unlink()
        assert _read_all(lost) == reference
        if name == "mcap":
            assert _read_all(info.path / "metadata.yaml") == reference  # the directory's metadata file


def test_split_directory_without_metadata_merges_by_time(bags: dict[str, TeleopBagInfo], tmp_path: Path) -> None:
    info = bags["mcap-split-message-zstd"]
    reference = _read_all(info.path)
    lost = tmp_path / "split"
    shutil.copytree(info.path, lost)
    (lost / "metadata.yaml").unlink()
    assert _read_all(lost) == reference  # zstd messages found by their magic number
    assert _read_all(sorted(lost.iterdir(), reverse=True)) == reference  # file order does not matter


def test_several_bags_are_one_recording(tmp_path: Path) -> None:
    first = write_teleop_bag(tmp_path / "a.bag", "ros1", duration_s=0.3, wrench_rate_hz=100)
    later = first.start_ns + 150_000_000
    second = write_teleop_bag(tmp_path / "b.db3", "sqlite3", duration_s=0.3, wrench_rate_hz=100, start_ns=later)
    topics, messages = _read_all([first.path, second.path])
    stamps = [m.receive_ns for m in messages]
    assert stamps == sorted(stamps)
    assert len(messages) == first.message_count + second.message_count
    assert {m.serialization for m in messages} == {"ros1", "cdr"}
    by_topic = {t.topic: t for t in topics}
    assert by_topic[TOPIC_WRENCH].count == first.counts[TOPIC_WRENCH] + second.counts[TOPIC_WRENCH]
    assert by_topic[TOPIC_WRENCH].first_ns == _expected_span(first, TOPIC_WRENCH)[0]
    assert by_topic[TOPIC_WRENCH].last_ns == _expected_span(second, TOPIC_WRENCH)[1]


def test_legacy_type_names_in_an_old_db3(bags: dict[str, TeleopBagInfo], tmp_path: Path) -> None:
    old = tmp_path / "old.db3"
    shutil.copy(bags["sqlite3"].files[0], old)
    with sqlite3.connect(old) as db:
        db.execute("UPDATE topics SET type = 'sensor_msgs/JointState' WHERE type = 'sensor_msgs/msg/JointState'")
    db.close()
    topics, messages = _read_all(old)
    joint = next(t for t in topics if t.topic == TOPIC_JOINT_STATES)
    assert (joint.msgtype, joint.original_msgtype) == ("sensor_msgs/msg/JointState", "sensor_msgs/JointState")
    assert {m.msgtype for m in messages if m.topic == TOPIC_JOINT_STATES} == {"sensor_msgs/msg/JointState"}


def _strip_mcap_summary(src: Path, dst: Path) -> None:
    """The same MCAP with no summary section: a valid file that must be scanned."""
    data = src.read_bytes()
    (summary_start,) = struct.unpack_from("<Q", data, len(data) - 8 - 20)
    footer = bytes([0x02]) + struct.pack("<QQQI", 20, 0, 0, 0) + data[-8:]
    dst.write_bytes(data[:summary_start] + footer)


def test_mcap_without_summary_is_scanned(bags: dict[str, TeleopBagInfo], tmp_path: Path) -> None:
    info = bags["mcap"]
    plain = tmp_path / "no-summary.mcap"
    _strip_mcap_summary(info.files[0], plain)
    assert plain.stat().st_size < info.files[0].stat().st_size
    assert _read_all(plain) == _read_all(info.path)


# ---------------------------------------------------------------- bad input


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ConversionError, match=r"nothere\.mcap: no such file or directory"):
        BagSource([tmp_path / "nothere.mcap"])
    with pytest.raises(ConversionError, match="no input"):
        BagSource([])


def test_rosbag2_directory_missing_its_db3(bags: dict[str, TeleopBagInfo], tmp_path: Path) -> None:
    broken = tmp_path / "split"
    shutil.copytree(bags["sqlite3-split-file-zstd"].path, broken)
    victim = sorted(broken.glob("*.db3.zstd"))[1]
    victim.unlink()
    with (
        pytest.raises(ConversionError, match=rf"{victim.name}: file missing \(metadata\.yaml lists it"),
        BagSource(broken),
    ):
        pass


def test_unknown_and_empty_files(tmp_path: Path) -> None:
    text = tmp_path / "notes.bag"
    text.write_text("not a bag at all\n")
    with pytest.raises(ConversionError, match=r"notes\.bag: not a ROS 1 bag file \(it holds text"), BagSource(text):
        pass
    empty = tmp_path / "empty.mcap"
    empty.touch()
    with pytest.raises(ConversionError, match=r"empty\.mcap: empty file"), BagSource(empty):
        pass
    other = tmp_path / "dir"
    other.mkdir()
    (other / "readme.txt").write_text("hi")
    with pytest.raises(ConversionError, match="dir: not a rosbag2 directory"), BagSource(other):
        pass
    bad_meta = tmp_path / "badmeta"
    bad_meta.mkdir()
    (bad_meta / "metadata.yaml").write_text("just: [a list\n")
    with pytest.raises(ConversionError, match=r"metadata\.yaml: not valid rosbag2 metadata"), BagSource(bad_meta):
        pass


def _consume(path: Path) -> None:
    with BagSource(path) as bag:
        bag.topics()
        for _ in bag.messages():
            pass


@pytest.mark.parametrize("name", ["mcap", "sqlite3", "ros1", "ros1-bz2", "mcap-chunk-zstd-jpeg"])
def test_truncated_bags_give_one_clear_error(bags: dict[str, TeleopBagInfo], tmp_path: Path, name: str) -> None:
    source = bags[name].files[0]
    data = source.read_bytes()
    if name == "sqlite3":  # (cut MCAP and ROS 1 bags are read as far as they go: test_cut_recordings.py)
        half = tmp_path / f"half{source.suffix}"
        half.write_bytes(data[: len(data) // 2])
        with pytest.raises(ConversionError, match=rf"half{source.suffix}: .*(truncated|malformed)"):
            _consume(half)
    # Cut anywhere: a ConversionError naming the file, or (when the cut spares what is read) success.
    for cut in (0.02, 0.3, 0.6, 0.95, 0.9999):
        cut_file = tmp_path / f"cut{int(cut * 1e4)}{source.suffix}"
        cut_file.write_bytes(data[: int(len(data) * cut)])
        error = ""
        try:
            _consume(cut_file)
        except ConversionError as err:
            error = str(err)
        assert not error or (error.startswith(f"{cut_file}: ") and "\n" not in error), error


def test_source_must_be_open(bags: dict[str, TeleopBagInfo]) -> None:
    bag = BagSource(bags["mcap"].path)
    with pytest.raises(ConversionError, match="not open"):
        bag.topics()
    with bag, pytest.raises(ConversionError, match="already open"):
        bag.open()
    with pytest.raises(ConversionError, match="not open"):
        bag.messages()


# ---------------------------------------------------------------- streaming


def _bytes_read() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


@pytest.fixture(scope="module")
def big_bags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TeleopBagInfo]:
    """~20 MB per bag: frames of 320x240 and depth; chunks are about 1 MB."""
    root = tmp_path_factory.mktemp("big")
    options: dict[str, Any] = {"duration_s": 1.0, "width": 320, "height": 240, "wrench_rate_hz": 200}
    return {fmt: write_teleop_bag(_bag_path(root, fmt, fmt), fmt, **options) for fmt in ("mcap", "sqlite3", "ros1")}


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux /proc/self/io")
@pytest.mark.parametrize("fmt", ["mcap", "sqlite3", "ros1"])
def test_first_message_reads_a_small_part_of_the_bag(big_bags: dict[str, TeleopBagInfo], fmt: str) -> None:
    info = big_bags[fmt]
    size = sum(f.stat().st_size for f in info.files)
    assert size > 15e6
    with BagSource(info.path) as bag:
        before = _bytes_read()
        messages = bag.messages()
        first = next(messages)
        read = _bytes_read() - before
        assert first.receive_ns == info.first_receive_ns
        assert read < size / 8, f"{read} bytes read for the first message of a {size}-byte bag"
        camera = next(m for m in messages if m.topic == TOPIC_OVERHEAD_IMAGE)
        assert camera.receive_ns < info.first_receive_ns + 20_000_000


@pytest.mark.parametrize("fmt", ["mcap", "ros1"])
def test_memory_stays_bounded_while_reading(big_bags: dict[str, TeleopBagInfo], fmt: str) -> None:
    info = big_bags[fmt]
    size = sum(f.stat().st_size for f in info.files)
    with BagSource(info.path) as bag:
        tracemalloc.start()
        try:
            count = sum(1 for _ in bag.messages())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert count == info.message_count
    # A chunk or two of the bag (chunks are about 1 MB), not the bag (about 19 MB).
    assert peak < 8e6, f"peak {peak} bytes while reading a {size}-byte bag"
