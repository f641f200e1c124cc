"""High-rate messages read and assembled a block at a time give what they give one by one."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from rosbags.interfaces import (
    Connection,
    ConnectionExtRosbag2,
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)
from rosbags.rosbag2 import Reader, StoragePlugin
from rosbags.rosbag2 import Writer as Rosbag2Writer
from rosbags.typesys import Stores, get_typestore

from cli.test_bag2ortf import mapping_for, origin_ns
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.pipeline import offline
from ortf_ros.pipeline.assembly.assembler import Assembler
from ortf_ros.pipeline.assembly.joints import JointMerger
from ortf_ros.pipeline.batching import BlockFeed
from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.fastpath import Layout, SampleDecoder, has_blocks
from ortf_ros.pipeline.flow import Flow
from ortf_ros.pipeline.mapping import WrenchMapping
from ortf_ros.pipeline.offline import convert_recording
from ortf_ros.pipeline.samples import (
    JointStateSample,
    RawMessage,
    RawRun,
    Sample,
    SampleBlock,
    TransformBlock,
    TransformRun,
    TransformSample,
    WrenchSample,
)
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.pipeline.tf import TfBuffer
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.motion import joint_positions
from ortf_ros.synthetic.robot import JOINTS
from ortf_ros.synthetic.scene import START_NS
from ortf_ros.synthetic.topics import TOPIC_JOINT_COMMAND, TOPIC_JOINT_STATES, TOPIC_TF, TOPIC_WRENCH
from support.messages import HEADER_SEC, assert_same_samples, build, full_way, joint_state_raw, serialize


def as_block(decoder: SampleDecoder, messages: list[RawMessage]) -> list[Sample | SampleBlock | TransformBlock]:
    """``decoder.block`` of messages whose layouts it has learned."""
    assert all(decoder.layout(raw) is not None for raw in messages)
    return decoder.block(messages)


def test_a_block_is_its_messages_one_by_one_on_an_analytic_bag(tmp_path: Path) -> None:
    write_teleop_bag(tmp_path / "bag", "mcap", duration_s=0.5, with_depth=False)
    decoder = SampleDecoder(Decoder())
    by_topic: dict[str, list[RawMessage]] = defaultdict(list)
    with BagSource(tmp_path / "bag") as source:
        topics = {t.topic for t in source.topics() if t.msgtype.endswith(("/JointState", "/WrenchStamped"))}
        for raw in source.messages(topics):
            decoder.samples(raw)  # learns each layout
            by_topic[raw.topic].append(raw)
    assert set(by_topic) == {"/joint_states", "/joint_command", "/ft_sensor/wrench"}
    for topic, messages in by_topic.items():
        read = decoder.fast_reads
        [block] = as_block(decoder, messages)
        assert isinstance(block, SampleBlock)
        assert decoder.fast_reads == read + len(messages)
        # The joint states interleave two layouts (all joints; every fifth message the fingers alone).
        assert len(block.parts) == (2 if topic == "/joint_states" else 1)
        assert_same_samples(block.samples(), [s for raw in messages for s in full_way(raw)])
        if block.kind == "wrench":
            wrench = full_way(messages[7])[0]
            assert isinstance(wrench, WrenchSample)
            np.testing.assert_array_equal(block.stacked(0)[7], np.concatenate([wrench.force, wrench.torque]))


def test_a_block_with_a_message_laid_out_otherwise_goes_one_by_one() -> None:
    names = ["shoulder", "elbow"]
    decoder = SampleDecoder(Decoder())
    decoder.samples(joint_state_raw(names, [0.0, 0.0], [0.0, 0.0]))
    messages = [
        joint_state_raw(names, [0.1, 0.2], [1.0, 2.0], sec=HEADER_SEC + 1),
        joint_state_raw(["shoulder", "elbaw"], [0.3, 0.4], [3.0, 4.0], sec=HEADER_SEC + 2),  # same length, other bytes
        joint_state_raw(names, [0.5, np.nan], [5.0, np.inf], sec=HEADER_SEC + 3),
    ]
    got = as_block(decoder, messages)
    assert not any(isinstance(item, (SampleBlock, TransformBlock)) for item in got)
    assert_same_samples(
        [s for s in got if not isinstance(s, (SampleBlock, TransformBlock))], [s for m in messages for s in full_way(m)]
    )


def test_a_run_is_its_messages_one_by_one(tmp_path: Path) -> None:
    """What the source reads as a run (MCAP chunks, a topic's messages as arrays) gives the
    samples of its messages, and comes back whole from ``RawRun.messages``."""
    write_teleop_bag(tmp_path / "bag", "mcap", duration_s=0.5, with_depth=False)
    decoder = SampleDecoder(Decoder())
    by_topic: dict[str, list[RawMessage]] = defaultdict(list)
    with BagSource(tmp_path / "bag") as source:
        topics = {t.topic for t in source.topics() if has_blocks(t.msgtype) and not t.msgtype.endswith("/TFMessage")}
        for raw in source.messages(topics):
            by_topic[raw.topic].append(raw)
    assert set(by_topic) == {"/joint_states", "/joint_command", "/ft_sensor/wrench"}  # (TF: see below)
    for messages in by_topic.values():
        run = RawRun.of(messages)
        assert run.messages() == messages
        assert decoder.run_block(run) is None  # (no layout learned yet)
        decoder.samples(messages[0])
        if len(run.parts) > 1:  # the joint states' second layout (the fingers alone) is not known yet
            assert decoder.run_block(run) is None
            decoder.samples(messages[4])
        read = decoder.fast_reads
        block = decoder.run_block(run)
        assert isinstance(block, SampleBlock) and decoder.fast_reads == read + len(messages)
        assert_same_samples(block.samples(), [s for raw in messages for s in full_way(raw)])


def test_a_run_with_a_message_laid_out_otherwise_goes_one_by_one() -> None:
    names = ["shoulder", "elbow"]
    messages = [
        joint_state_raw(names, [0.1, 0.2], [1.0, 2.0], sec=HEADER_SEC + 1),
        joint_state_raw(["shoulder", "elbaw"], [0.3, 0.4], [3.0, 4.0], sec=HEADER_SEC + 2),  # same length, other bytes
        joint_state_raw(names, [0.5, np.nan], [5.0, np.inf], sec=HEADER_SEC + 3),
    ]
    decoder = SampleDecoder(Decoder())
    decoder.samples(messages[0])
    run = RawRun.of(messages)
    assert len(run.parts) == 1 and decoder.run_block(run) is None
    fed: list[Sample | SampleBlock] = []

    class Collector:
        def feed(self, sample: Sample | SampleBlock, topic: str) -> None:
            fed.append(sample)

        def emit_ready(self) -> None:
            pass

    feed = BlockFeed(decoder)
    feed.feed_run(run, Collector())  # type: ignore[arg-type]
    feed.flush(Collector())  # type: ignore[arg-type]
    assert not any(isinstance(item, SampleBlock) for item in fed)
    assert_same_samples([s for s in fed if not isinstance(s, SampleBlock)], [s for m in messages for s in full_way(m)])


Transform = tuple[str, str, int, tuple[float, ...], tuple[float, ...]]  # parent, child, stamp (ns), xyz, xyzw


def tf_raw(transforms: list[Transform], topic: str = "/tf") -> RawMessage:
    def stamped(parent: str, child: str, stamp_ns: int, xyz: tuple[float, ...], xyzw: tuple[float, ...]) -> object:
        sec, nanosec = divmod(stamp_ns, 1_000_000_000)
        header = build(
            "cdr",
            "std_msgs/msg/Header",
            stamp=build("cdr", "builtin_interfaces/msg/Time", sec=sec, nanosec=nanosec),
            frame_id=parent,
        )
        vector = build("cdr", "geometry_msgs/msg/Vector3", x=xyz[0], y=xyz[1], z=xyz[2])
        rotation = build("cdr", "geometry_msgs/msg/Quaternion", x=xyzw[0], y=xyzw[1], z=xyzw[2], w=xyzw[3])
        pose = build("cdr", "geometry_msgs/msg/Transform", translation=vector, rotation=rotation)
        return build("cdr", "geometry_msgs/msg/TransformStamped", header=header, child_frame_id=child, transform=pose)

    message = build("cdr", "tf2_msgs/msg/TFMessage", transforms=[stamped(*t) for t in transforms])
    return RawMessage(
        topic, "tf2_msgs/msg/TFMessage", transforms[0][2], serialize(message, "tf2_msgs/msg/TFMessage", "cdr")
    )


def random_tf_messages(count: int, seed: int, *, second_parent: bool = False) -> list[RawMessage]:
    """TF messages of several layouts (each its own length): two edges; a third edge alone;
    one edge thrice with the same stamp (the last wins); a loop (refused); with
    ``second_parent``, a frame under another parent (refused); stamps that sometimes go
    back (placed in time order); quaternions not quite unit."""
    rng = np.random.default_rng(seed)
    origin = HEADER_SEC * 1_000_000_000

    def pose() -> tuple[tuple[float, ...], tuple[float, ...]]:
        xyzw = rng.normal(size=4)
        return tuple(rng.normal(size=3).tolist()), tuple((xyzw / np.linalg.norm(xyzw) * 1.001).tolist())

    messages = []
    for i in range(count):
        stamp = origin + i * 10_000_000 + (-25_000_000 if i % 7 == 3 else 0)
        layouts: list[list[Transform]] = [
            [("world", "base", stamp, *pose()), ("base", "tool", stamp, *pose())],
            [("base", "camera", stamp, *pose())],
            [("base", "tool", stamp, *pose()), ("base", "tool", stamp, *pose()), ("base", "tool", stamp, *pose())],
            [("tool", "world", stamp + k, *pose()) for k in range(4)],
        ]
        if second_parent:
            layouts.append([("world_at_the_table", "tool", stamp, *pose())])
        messages.append(tf_raw(layouts[int(rng.integers(len(layouts)))]))
    return messages


def assert_same_tf(a: TfBuffer, b: TfBuffer, times_ns: list[int]) -> None:
    """The same frames, problems and held samples, and every lookup bit for bit."""
    assert a.frames().keys() == b.frames().keys()
    assert a.problems() == b.problems()
    assert a.dynamic_sample_count() == b.dynamic_sample_count()
    frames = sorted({*a.frames(), *a.roots()})
    for target in frames:
        for source in frames:
            for time_ns in times_ns:
                x, y = a.lookup(target, source, time_ns), b.lookup(target, source, time_ns)
                assert (x is None) == (y is None)
                if x is not None and y is not None:
                    assert x.gap_ns == y.gap_ns
                    assert x.pose.translation.tobytes() == y.pose.translation.tobytes()
                    assert x.pose.rotation.tobytes() == y.pose.rotation.tobytes()


def test_a_tf_block_stores_what_its_transforms_store_one_by_one() -> None:
    messages = random_tf_messages(120, seed=3)
    decoder = SampleDecoder(Decoder())
    one_by_one, whole = TfBuffer(), TfBuffer()
    for raw in messages[:20]:  # (teaches every layout)
        for sample in decoder.samples(raw):
            assert isinstance(sample, TransformSample)
            assert one_by_one.add(sample) == whole.add(sample)
    stored = 0
    edges: dict[tuple[str, str], None] = {}  # (an ordered set)
    for raw in messages[20:]:
        for sample in decoder.samples(raw):
            assert isinstance(sample, TransformSample)
            stored += one_by_one.add(sample)
            edges.setdefault((sample.parent, sample.child), None)
    read = decoder.fast_reads
    [block] = decoder.run_samples(RawRun.of(messages[20:]))
    assert isinstance(block, TransformBlock) and decoder.fast_reads == read + 100
    assert [(run.parent, run.child) for run in block.edges] == list(edges)  # (as they first appear)
    assert len(edges) == 4
    assert sum(whole.add_run(run) for run in block.edges) == stored
    assert any("close a loop" in line for line in whole.problems())  # (what was refused is compared too)
    stamps = [raw.receive_ns for raw in messages]
    assert_same_tf(one_by_one, whole, stamps + [t + 3_000_000 for t in stamps])


def test_a_tf_block_with_a_frame_under_two_parents_goes_one_by_one() -> None:
    """Which of the two is refused as what depends on the order of every transform."""
    messages = random_tf_messages(40, seed=3, second_parent=True)
    decoder = SampleDecoder(Decoder())
    for raw in messages:
        decoder.samples(raw)
    assert len({len(raw.data) for raw in messages}) == 5  # (every layout, learned)
    got = decoder.run_samples(RawRun.of(messages))
    assert not any(isinstance(item, (SampleBlock, TransformBlock)) for item in got)


def test_tf_of_two_topics_is_stored_in_the_order_it_came() -> None:
    """The first transform of a frame decides its parent and whether it is static, so TF
    waiting in blocks on one topic goes before a message of another."""
    origin, xyz, unit = HEADER_SEC * 1_000_000_000, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)
    messages = [
        tf_raw([("odom", "yy", origin, xyz, unit)]),
        tf_raw([("base", "x", origin + 1, xyz, unit)], topic="/tf_static"),
        tf_raw([("odom", "x", origin + 2, xyz, unit)]),
    ]
    decoder = SampleDecoder(Decoder())
    one_by_one = TfBuffer()
    for raw in messages:
        for sample in decoder.samples(raw):  # (teaches the layouts)
            assert isinstance(sample, TransformSample)
            one_by_one.add(sample)
    assert one_by_one.frames()["x"].parent == "base" and one_by_one.frames()["x"].static

    class TfOnly:
        def __init__(self) -> None:
            self.tf = TfBuffer()

        def feed(self, sample: Sample | SampleBlock | TransformBlock, topic: str) -> None:
            if isinstance(sample, TransformBlock):
                for run in sample.edges:
                    self.tf.add_run(run)
            else:
                assert isinstance(sample, TransformSample)
                self.tf.add(sample)

        def emit_ready(self) -> None:
            pass

    assembler = TfOnly()
    feed = BlockFeed(decoder)
    for raw in messages:
        feed.feed(raw, assembler)  # type: ignore[arg-type]
    feed.flush(assembler)  # type: ignore[arg-type]
    assert_same_tf(one_by_one, assembler.tf, [origin, origin + 2])


def test_a_tf_block_with_a_transform_only_the_full_way_reports_goes_one_by_one() -> None:
    messages = random_tf_messages(12, seed=5)
    decoder = SampleDecoder(Decoder())
    for raw in messages:
        decoder.samples(raw)
    stamp, xyz = messages[-1].receive_ns + 1, (0.0, 0.0, 0.0)
    zero = tf_raw([("world", "base", stamp, xyz, (0.0, 0.0, 0.0, 0.0)), ("base", "tool", stamp, xyz, (0, 0, 0, 1.0))])
    assert decoder.layout(zero) is not None  # (laid out as the first kind of message)
    got = decoder.run_samples(RawRun.of([*messages, zero]))
    assert not any(isinstance(item, TransformBlock) for item in got)
    assert_same_samples(
        [s for s in got if not isinstance(s, (SampleBlock, TransformBlock))],
        [s for raw in [*messages, zero] for s in full_way(raw)],
    )


def with_wrench_on_two_connections(source: Path, target: Path) -> Path:
    """``source`` again, its force-torque messages alternating between two connections of the
    topic (offered with other QoS, as two publishers may be)."""
    with Reader(source) as reader, Rosbag2Writer(target, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        copied, second = {}, None
        for conn in reader.connections:
            ext = conn.ext
            assert isinstance(ext, ConnectionExtRosbag2)

            def add(qos: list[Qos], conn: Connection = conn, ext: ConnectionExtRosbag2 = ext) -> Connection:
                return writer.add_connection(
                    conn.topic, conn.msgtype, msgdef=conn.msgdef.data, rihs01=conn.digest, offered_qos_profiles=qos
                )

            copied[conn.id] = add(ext.offered_qos_profiles)
            if conn.topic == TOPIC_WRENCH:
                never = QosTime(0, 0)
                second = add(
                    [
                        Qos(
                            QosHistory.KEEP_LAST,
                            7,
                            QosReliability.RELIABLE,
                            QosDurability.VOLATILE,
                            never,
                            never,
                            QosLiveliness.AUTOMATIC,
                            never,
                            False,
                        )
                    ]
                )
        assert second is not None
        for count, (conn, time, data) in enumerate(reader.messages()):
            writer.write(second if conn.topic == TOPIC_WRENCH and count % 2 else copied[conn.id], time, data)
    return target


def test_runs_change_nothing_in_the_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An MCAP recording of several chunks converts to the same dataset with its high-rate
    topics read as runs (a chunk at a time) as message by message (TF too, transform by
    transform), whatever the block size; also with a topic on two connections (read
    message by message then)."""
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=6, with_depth=False, tf_rate_hz=50)
    with BagSource(bag.path) as source:
        assert sum(1 for _ in source.batches()) > 3  # (chunks: steps are decided between them)
    two = with_wrench_on_two_connections(bag.path, tmp_path / "two")
    config = mapping_for(bag.path)
    runs_fed = []
    feed_run = BlockFeed.feed_run

    def counted(self: BlockFeed, run: RawRun, assembler: Assembler) -> None:
        runs_fed.append(len(run))
        feed_run(self, run, assembler)

    monkeypatch.setattr(BlockFeed, "feed_run", counted)
    read_transforms = Layout.read_transforms
    add_run = TfBuffer.add_run
    transform_runs = []

    def counted_transforms(self: TfBuffer, run: TransformRun) -> int:
        transform_runs.append(len(run.header_ns))
        return add_run(self, run)

    monkeypatch.setattr(TfBuffer, "add_run", counted_transforms)
    transforms = bag.counts[TOPIC_TF] * 2
    tables = []
    for with_runs, block_messages, path in (
        (False, 256, bag.path),
        (True, 256, bag.path),
        (True, 3, bag.path),
        (True, 256, two),
    ):
        monkeypatch.setattr(offline, "has_blocks", has_blocks if with_runs else lambda msgtype: False)
        monkeypatch.setattr(Layout, "read_transforms", read_transforms if with_runs else lambda *_: None)
        runs_fed.clear()
        transform_runs.clear()
        out = tmp_path / f"ds-{with_runs}-{block_messages}-{path.name}"
        result = convert_recording([path], out, config, flow=Flow(block_messages=block_messages))
        wrench = bag.counts[TOPIC_WRENCH]
        joints = bag.counts[TOPIC_JOINT_STATES] + bag.counts[TOPIC_JOINT_COMMAND]
        # (TF on two topics, /tf and /tf_static, does not come as runs, but waits in blocks.)
        assert sum(runs_fed) == (0 if not with_runs else joints if path == two else joints + wrench)
        assert sum(transform_runs) > transforms / 2 if with_runs else not transform_runs
        assert result.counts.used[TOPIC_WRENCH] == wrench
        assert result.counts.used[TOPIC_TF] == transforms
        episode = load_dataset(out).episode(0)
        tables.append((episode.steps(), episode.stream("ft_sensor"), episode.stream("joint_states")))
    for other in tables[1:]:
        for a, b in zip(tables[0], other, strict=True):
            assert a.drop_columns(["episode_id"]).equals(b.drop_columns(["episode_id"]))


def test_merging_a_block_equals_merging_its_messages_in_order() -> None:
    joints = ("a", "b", "c", "d")
    rng = np.random.default_rng(7)
    layouts = [["c", "a", "b", "d"], ["b"], ["d", "c"], ["a", "x", "b", "c", "d"]]  # "x" is not a joint of ours
    decoder = SampleDecoder(Decoder())
    messages = []
    for i in range(60):
        names = layouts[int(rng.integers(len(layouts)))]
        position = rng.normal(size=len(names))
        if i == 30:
            position[0] = np.nan  # a NaN position: that joint counts as not seen again
        velocity: list[float] = list(rng.normal(size=len(names))) if i % 3 else []  # some messages without any
        messages.append(joint_state_raw(names, list(position), velocity, sec=HEADER_SEC + i))
    for raw in messages:
        decoder.samples(raw)
    [block] = as_block(decoder, messages[10:])
    assert isinstance(block, SampleBlock) and len(block.parts) == 2 * len(layouts)  # with and without velocities
    one_by_one, whole = JointMerger(joints), JointMerger(joints)
    for merger in (one_by_one, whole):
        for raw in messages[:10]:
            sample = decoder.samples(raw)[0]
            assert isinstance(sample, JointStateSample)
            merger.merge(sample)
    full = whole.merge_block(block)
    assert whole.current == one_by_one.current  # nothing changes until it is settled
    complete = 0
    for row, sample in enumerate(block.samples()):
        assert isinstance(sample, JointStateSample)
        merged = one_by_one.merge(sample)
        if merged is None:
            assert np.isnan(full[row, 0]).any()
        else:
            complete += 1
            np.testing.assert_array_equal(full[row], merged)
    assert 0 < complete < len(block)  # both kinds of row were compared
    whole.settle(full)
    np.testing.assert_array_equal(np.array(whole.current), np.array(one_by_one.current))


def write_wrenches(path: Path, stamps_s: list[float]) -> Path:
    """A second bag of the recording: /ft2 WrenchStamped at 1 kHz receive times, header stamps as given."""
    store = get_typestore(Stores.ROS2_JAZZY)
    kinds = store.types
    with Rosbag2Writer(path, version=9) as bag:
        connection = bag.add_connection("/ft2", "geometry_msgs/msg/WrenchStamped", typestore=store)
        for i, stamp_s in enumerate(stamps_s):
            stamp_ns = START_NS + round(stamp_s * 1e9)
            header = kinds["std_msgs/msg/Header"](
                stamp=kinds["builtin_interfaces/msg/Time"](sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9),
                frame_id="ft2",
            )
            vector = kinds["geometry_msgs/msg/Vector3"]
            wrench = kinds["geometry_msgs/msg/Wrench"](
                force=vector(x=float(i), y=0.0, z=0.0), torque=vector(x=0.0, y=0.0, z=0.0)
            )
            message = kinds["geometry_msgs/msg/WrenchStamped"](header=header, wrench=wrench)
            bag.write(
                connection, START_NS + i * 1_000_000, store.serialize_cdr(message, "geometry_msgs/msg/WrenchStamped")
            )
    return path


def test_a_sample_stamped_before_its_predecessor_is_refused_alone(tmp_path: Path) -> None:
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=0.6, with_depth=False)
    stamps = [i / 1000 for i in range(600)]
    stamps[300] = stamps[298]  # stamped before the one received before it
    extra = write_wrenches(tmp_path / "ft2", stamps)
    config = mapping_for(bag.path)
    config = replace(config, wrenches=(*config.wrenches, WrenchMapping("ft2", "/ft2")))
    result = convert_recording([bag.path, extra], tmp_path / "ds", config)
    assert result.counts.out_of_order["/ft2"] == 1
    assert result.counts.used["/ft2"] == len(stamps) - 1
    kept = load_dataset(tmp_path / "ds").episode(0).stream("ft2", ["stamp_ns"])["stamp_ns"].to_pylist()
    assert kept == [START_NS + round(s * 1e9) for i, s in enumerate(stamps) if i != 300]


def test_block_size_changes_nothing_in_the_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps are decided once per block: how many messages that is must not show in the data,
    the end-effector pose from a 2 Hz TF included (a step waits for the TF after it)."""
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=1.2, with_depth=False, tf_rate_hz=2)
    config = mapping_for(bag.path)
    tables = []
    for block_messages in (1, 7, 4096):
        out = tmp_path / f"ds-{block_messages}"
        convert_recording([bag.path], out, config, flow=Flow(block_messages=block_messages))
        episode = load_dataset(out).episode(0)
        tables.append((episode.steps(), episode.stream("ft_sensor"), episode.stream("joint_states")))
    for other in tables[1:]:
        for a, b in zip(tables[0], other, strict=True):
            assert a.drop_columns(["episode_id"]).equals(b.drop_columns(["episode_id"]))


def write_joint_states(path: Path, topic: str, seconds: float, missing_until_s: float) -> Path:
    """A second bag of the recording: ``topic`` JointState at 500 Hz with every joint, the last
    one NaN (not known yet) before ``missing_until_s``."""
    store = get_typestore(Stores.ROS2_JAZZY)
    kinds = store.types
    with Rosbag2Writer(path, version=9) as bag:
        connection = bag.add_connection(topic, "sensor_msgs/msg/JointState", typestore=store)
        for i in range(round(seconds * 500)):
            stamp_ns = START_NS + i * 2_000_000
            position = joint_positions(stamp_ns / 1e9)
            if i * 0.002 < missing_until_s:
                position[-1] = np.nan
            header = kinds["std_msgs/msg/Header"](
                stamp=kinds["builtin_interfaces/msg/Time"](sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9),
                frame_id="",
            )
            message = kinds["sensor_msgs/msg/JointState"](
                header=header,
                name=list(JOINTS),
                position=position,
                velocity=np.zeros(len(JOINTS)),
                effort=np.zeros(len(JOINTS)),
            )
            bag.write(connection, stamp_ns, store.serialize_cdr(message, "sensor_msgs/msg/JointState"))
    return path


def test_joint_state_blocks_without_a_complete_vector_are_folded_in(tmp_path: Path) -> None:
    """Blocks whose messages all lack a joint only update what is known; steps start once
    every joint was seen."""
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=0.8, with_depth=False)
    extra = write_joint_states(tmp_path / "js2", "/js2", 0.8, missing_until_s=0.4)
    config = mapping_for(bag.path)
    assert config.joint_states is not None
    config = replace(config, joint_states=replace(config.joint_states, topic="/js2"))
    result = convert_recording([bag.path, extra], tmp_path / "ds", config)
    assert result.counts.used["/js2"] == 400
    episode = load_dataset(tmp_path / "ds").episode(0)
    samples = episode.stream("joint_states", ["stamp_ns"])["stamp_ns"].to_pylist()
    assert samples == [START_NS + i * 2_000_000 for i in range(200, 400)]  # the complete ones, all of them
    first_step_ns = origin_ns(episode) + float(episode.array("timestamp")[0]) * 1e9
    assert first_step_ns >= START_NS + 0.4e9 - 1e3


def without_messages(source: Path, target: Path, storage: StoragePlugin, drop: Callable[[str, int], bool]) -> Path:
    """``source`` again (as ``storage``), without the messages ``drop(topic, time)`` picks."""
    with Reader(source) as reader, Rosbag2Writer(target, version=9, storage_plugin=storage) as writer:
        copied = {
            conn.id: writer.add_connection(conn.topic, conn.msgtype, msgdef=conn.msgdef.data, rihs01=conn.digest)
            for conn in reader.connections
        }
        for conn, time, data in reader.messages():
            if not drop(conn.topic, time):
                writer.write(copied[conn.id], time, data)
    return target


@pytest.mark.parametrize("storage", [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_the_episode_clock_starts_at_the_earliest_sample_of_any_stream(tmp_path: Path, storage: StoragePlugin) -> None:
    """The force-torque sensor starts 5 ms after the joint states, and its first 256
    samples (a block) reach the assembler before the joint states' first block: the
    episode's time 0 is still the first joint state, and no sample is before it."""
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=1.5, with_depth=False)
    late = without_messages(
        bag.path, tmp_path / "late", storage, lambda topic, time: topic == TOPIC_WRENCH and time < START_NS + 5_000_000
    )
    convert_recording([late], tmp_path / "ds", mapping_for(bag.path))
    episode = load_dataset(tmp_path / "ds").episode(0)
    joints = episode.stream("joint_states").column("timestamp").to_numpy()
    wrench = episode.stream("ft_sensor").column("timestamp").to_numpy()
    steps = episode.steps().column("timestamp").to_numpy()
    assert joints[0] == 0.0 and (np.diff(joints) > 0).all()
    assert wrench[0] == pytest.approx(0.005, abs=1e-6) and steps[0] >= 0.0
