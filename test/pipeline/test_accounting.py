"""Per-stream accounting (``format.accounting``): each loss lands in its stage's count, live and
offline, every stage adds up on what the writers write, and ``ortf validate`` flags a count
that was doctored."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Rosbag2Writer

from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.errors import FormatError
from ortf_ros.format import layout
from ortf_ros.format.accounting import (
    NOT_FOR_ACTION,
    OUT_OF_ORDER,
    QUEUE_FULL,
    StoredAccounts,
    StreamAccount,
    inconsistencies,
)
from ortf_ros.format.metadata import read_episodes
from ortf_ros.io.video import probe
from ortf_ros.synthetic.bag import write_teleop_bag
from ortf_ros.synthetic.topics import TOPIC_JOINT_COMMAND, TOPIC_JOINT_STATES, TOPIC_WRIST_IMAGE
from ortf_ros.synthetic.typestore import typestore
from pipeline.test_live_recorder import NS, Live, live  # noqa: F401 (the fixture)

TOPIC_OVERHEAD_IMAGE = "/overhead_camera/image_raw"


def accounts(root: Path, episode: int = 0) -> dict[str, StreamAccount]:
    record = load_dataset(root).episode(episode).record
    assert record.accounting is not None
    return {a.topic or a.stream: a for a in record.accounting}


def assert_adds_up(root: Path) -> None:
    report = validate(root)
    assert report.ok, [f.line() for f in report.findings]
    assert not [f for f in report.findings if f.rule.startswith("episodes.accounting")]
    for account in accounts(root).values():
        assert inconsistencies(account) == [], account


# -- live ------------------------------------------------------------------------------------


def test_live_a_full_queue_an_undecodable_frame_and_a_throttled_camera_each_land_in_their_count(
    live: Live,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    live.feed(1.5)
    received_before = live.source.received().get(TOPIC_WRIST_IMAGE, 0)
    assert live.start().success
    published = {TOPIC_WRIST_IMAGE: 0, TOPIC_OVERHEAD_IMAGE: 0}
    # A second with the overhead camera throttled to every other frame (a publisher that slowed down).
    until = live.clock.now_ns + NS
    for event in live.events:
        live.clock.now_ns = max(live.clock.now_ns, event.receive_ns)
        if event.topic == TOPIC_OVERHEAD_IMAGE:
            if event.seq % 2:
                continue
            published[TOPIC_OVERHEAD_IMAGE] += 1
        if event.topic == TOPIC_WRIST_IMAGE:
            published[TOPIC_WRIST_IMAGE] += 1
        assert live.source.put(
            event.topic, live.messages.serialize(event.topic, event.seq, event.stamp_ns), event.receive_ns
        )
        live.drained()
        if event.receive_ns >= until:
            break
    # One wrist frame whose bytes are not an image, then a burst the queue cannot hold.
    live.clock.now_ns += NS // 100
    assert live.source.put(TOPIC_WRIST_IMAGE, b"\x00\x01not an image", live.clock.now_ns)
    dropped_before = live.source.dropped().get(TOPIC_WRIST_IMAGE, 0)
    burst = 200
    last = live.clock.now_ns
    for i in range(burst):
        stamp = last + (i + 1) * 1000
        live.source.put(TOPIC_WRIST_IMAGE, live.messages.serialize(TOPIC_WRIST_IMAGE, 10_000 + i, stamp), stamp)
    dropped = live.source.dropped().get(TOPIC_WRIST_IMAGE, 0) - dropped_before
    assert dropped > 0  # (the queue holds LIVE.queue_frames frames; the pipeline encodes each)
    live.drained()
    received = live.source.received()[TOPIC_WRIST_IMAGE] - received_before  # (its subscription's own count)
    reply = live.recorder.stop()
    assert reply.success and f"{dropped} message(s) dropped" in reply.message, reply.message

    root = tmp_path / "dataset"
    assert_adds_up(root)
    wrist, overhead = accounts(root)[TOPIC_WRIST_IMAGE], accounts(root)[TOPIC_OVERHEAD_IMAGE]
    assert wrist.undecodable == 1 and wrist.read is not None
    assert wrist.dropped == {QUEUE_FULL: dropped}
    assert wrist.received == wrist.read + dropped == received
    assert wrist.read == published[TOPIC_WRIST_IMAGE] + 1 + burst - dropped
    assert wrist.kept == wrist.frames_encoded == wrist.frames_in_video == wrist.read - 1
    assert overhead.read == overhead.kept == overhead.frames_in_video == published[TOPIC_OVERHEAD_IMAGE]
    assert overhead.received == overhead.read and not overhead.dropped
    # A camera at half its rate is further than the tolerance from some steps: counted, as the validator says.
    late_steps = [f for f in validate(root).findings if f.rule == "alignment.tolerance"]
    assert overhead.steps_outside_tolerance and late_steps
    assert late_steps[0].message.startswith(f"{overhead.steps_outside_tolerance} step(s)")
    for camera, account in (("wrist_camera", wrist), ("overhead_camera", overhead)):
        video = load_dataset(root).episode(0).video_path(camera)
        assert probe(video).frames == account.frames_in_video
    joints = accounts(root)[TOPIC_JOINT_STATES]
    samples = pq.read_table(root / layout.episode_stream_path(0, "joint_states", 0))
    assert joints.native_samples == samples.num_rows and joints.lost_in_transport == 0


# -- offline ---------------------------------------------------------------------------------


def other_arm_command(stamp: int) -> bytes:
    """A command on the command topic for joints the action does not have (another arm's)."""
    store = typestore(False)
    types = store.types
    header = types["std_msgs/msg/Header"](
        stamp=types["builtin_interfaces/msg/Time"](sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id=""
    )
    empty = np.zeros(0)
    message = types["sensor_msgs/msg/JointState"](
        header=header, name=["left_arm_joint1"], position=np.array([0.1]), velocity=empty, effort=empty
    )
    return bytes(store.serialize_cdr(message, "sensor_msgs/msg/JointState"))


def rewrite_bag(source: Path, target: Path) -> dict[str, int]:
    """``source`` copied with, on the wrist camera, one frame cut short (undecodable); the
    overhead camera throttled to every other frame; one joint state sent again after later
    ones (out of order); a command for another arm's joint. Returns how many messages of
    each of those topics were written."""
    written = {TOPIC_WRIST_IMAGE: 0, TOPIC_OVERHEAD_IMAGE: 0, TOPIC_JOINT_STATES: 0, TOPIC_JOINT_COMMAND: 0}
    with AnyReader([source]) as reader, Rosbag2Writer(target, version=9, storage_plugin=StoragePlugin.MCAP) as out:
        connections = {
            c.id: out.add_connection(c.topic, c.msgtype, msgdef=c.msgdef.data, rihs01=c.digest)
            for c in reader.connections
        }
        seen: dict[str, int] = {}
        again: tuple[Any, int, bytes] | None = None
        for connection, time_ns, data in reader.messages():
            seq = seen[connection.topic] = seen.get(connection.topic, -1) + 1
            if connection.topic == TOPIC_OVERHEAD_IMAGE and seq % 2:
                continue
            if connection.topic == TOPIC_WRIST_IMAGE and seq == 10:
                data = data[: len(data) // 2]
            if connection.topic == TOPIC_JOINT_STATES and seq == 5:
                again = (connections[connection.id], time_ns, data)
            if connection.topic == TOPIC_JOINT_STATES and seq == 40 and again is not None:
                out.write(again[0], time_ns, again[2])  # stamped 35 messages ago
                written[TOPIC_JOINT_STATES] += 1
            if connection.topic == TOPIC_JOINT_COMMAND and seq == 7:
                out.write(connections[connection.id], time_ns, other_arm_command(time_ns))
                written[TOPIC_JOINT_COMMAND] += 1
            out.write(connections[connection.id], time_ns, data)
            if connection.topic in written:
                written[connection.topic] += 1
    return written


def test_offline_an_undecodable_frame_a_throttled_camera_and_an_old_message_each_land_in_their_count(
    tmp_path: Path,
) -> None:
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=1.0, with_depth=False)
    written = rewrite_bag(bag.path, tmp_path / "edited")
    root = tmp_path / "ds"
    result = subprocess.run(
        [sys.executable, "-m", "ortf_ros.cli.bag2ortf", str(tmp_path / "edited"), "-o", str(root), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)["recordings"][0]
    assert_adds_up(root)
    rows = accounts(root)
    assert [StreamAccount.from_dict(a) for a in summary["accounting"]["000000"]] == list(
        load_dataset(root).episode(0).record.accounting or ()
    )
    wrist, overhead, joints = rows[TOPIC_WRIST_IMAGE], rows[TOPIC_OVERHEAD_IMAGE], rows[TOPIC_JOINT_STATES]
    assert (wrist.read, wrist.undecodable, wrist.kept) == (
        written[TOPIC_WRIST_IMAGE],
        1,
        written[TOPIC_WRIST_IMAGE] - 1,
    )
    assert wrist.frames_encoded == wrist.frames_in_video == wrist.kept
    assert overhead.read == overhead.kept == overhead.frames_in_video == written[TOPIC_OVERHEAD_IMAGE]
    assert joints.read == written[TOPIC_JOINT_STATES] and joints.dropped == {OUT_OF_ORDER: 1}
    assert joints.native_samples == joints.kept == joints.read - 1
    command = rows[TOPIC_JOINT_COMMAND]
    assert command.read == written[TOPIC_JOINT_COMMAND] and command.dropped == {NOT_FOR_ACTION: 1}
    assert command.kept == command.read - 1
    assert wrist.received is None and wrist.lost_in_transport is None  # (nothing is received offline)
    info = subprocess.run(
        [sys.executable, "-m", "ortf_ros.cli.ortf", "info", str(root), "--episode", "000000"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert info.returncode == 0, info.stderr
    assert "joint_states: 1 dropped (out of order)" in info.stdout
    wrist_line = next(line.split() for line in info.stdout.splitlines() if line.strip().startswith("wrist_camera"))
    assert wrist_line[1:8] == ["-", "-", str(wrist.read), "1", "0", str(wrist.late), str(wrist.kept)]


# -- a doctored count ------------------------------------------------------------------------


def test_validate_flags_a_count_doctored_to_hide_a_lost_frame(tmp_path: Path) -> None:
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=0.5, with_depth=False)
    root = tmp_path / "ds"
    converted = subprocess.run([sys.executable, "-m", "ortf_ros.cli.bag2ortf", str(bag.path), "-o", str(root)])
    assert converted.returncode == 0
    table = pq.read_table(root / layout.EPISODES)
    rows = table.to_pylist()
    wrist = next(a for a in rows[0]["accounting"] if a["topic"] == TOPIC_WRIST_IMAGE)
    wrist["frames_in_video"] += 1  # a frame the video does not hold
    wrist["frames_encoded"] += 1
    wrist["kept"] += 1
    wrist["read"] += 1
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), root / layout.EPISODES)
    result = subprocess.run(
        [sys.executable, "-m", "ortf_ros.cli.ortf", "validate", str(root)], capture_output=True, text=True
    )
    assert result.returncode == 1
    assert "episodes.accounting_files" in result.stdout and "stream wrist_camera: frames_in_video" in result.stdout


# -- the index's accounting, decoded when read -------------------------------------------------


def test_the_index_accounting_is_decoded_when_read_and_a_malformed_row_says_where(tmp_path: Path) -> None:
    """``read_episodes`` keeps each row's accounting as Arrow (``StoredAccounts``): equal to the
    decoded counts, pickled as them, and a malformed row fails with one line naming the episode
    only where it is read, so ``ortf info`` of the dataset still works."""
    bag = write_teleop_bag(tmp_path / "bag", "mcap", duration_s=0.5, with_depth=False)
    root = tmp_path / "ds"
    converted = subprocess.run([sys.executable, "-m", "ortf_ros.cli.bag2ortf", str(bag.path), "-o", str(root)])
    assert converted.returncode == 0
    table = pq.read_table(root / layout.EPISODES)
    rows = table.to_pylist()
    expected = tuple(StreamAccount.from_dict(row) for row in rows[0]["accounting"])
    (record,) = read_episodes(root)
    assert isinstance(record.accounting, StoredAccounts)
    assert record.accounting == expected and list(record.accounting) == list(expected)
    unpickled = pickle.loads(pickle.dumps(record))
    assert type(unpickled.accounting) is tuple and unpickled == record

    rows[0]["accounting"][0]["kept"] = -3  # not a count
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), root / layout.EPISODES)
    (broken,) = read_episodes(root)
    with pytest.raises(FormatError, match=r"meta/episodes.parquet: episode '000000': accounting: bad value: kept"):
        len(broken.accounting or ())
    info = subprocess.run(
        [sys.executable, "-m", "ortf_ros.cli.ortf", "info", str(root)], capture_output=True, text=True
    )
    assert info.returncode == 0, info.stderr
