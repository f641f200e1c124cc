"""Recordings cut short (a recorder killed mid-write, a copy interrupted): an MCAP without
summary or footer, a ROS 1 bag without its index. Every message whose record is whole
before the cut is read, and nothing after it; the conversion says what it salvaged and
succeeds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from mcap.records import Chunk, Message
from mcap.stream_reader import StreamReader, breakup_chunk

from cli.test_bag2ortf import mapping_for, run_cli, vectors
from cli.test_bag2ortf import test_each_step_uses_the_frame_published_nearest_its_time as check_frames
from cli.test_bag2ortf import test_joint_values_exact_after_name_reordering as check_joint_values
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.errors import ConversionError
from ortf_ros.pipeline.mapping import write_mapping
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.synthetic.bag import TeleopBagInfo, cut_recording, write_teleop_bag
from ortf_ros.synthetic.motion import wrench
from ortf_ros.synthetic.schedule import seconds
from ortf_ros.synthetic.topics import TOPIC_WRENCH

Stored = tuple[str, int, bytes]  # topic, receive time, payload

FORMATS = {
    "mcap": ("mcap", "none"),
    "mcap-zstd": ("mcap", "storage"),
    "ros1": ("ros1", "none"),
    "ros1-lz4": ("ros1", "lz4"),
    "ros1-bz2": ("ros1", "bz2"),
}


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TeleopBagInfo]:
    """Recordings of several chunks (a chunk holds about a megabyte)."""
    root = tmp_path_factory.mktemp("cut")
    return {
        name: write_teleop_bag(root / name, fmt, duration_s=2.5, width=96, height=72, bag_compression=compression)  # type: ignore[arg-type]
        for name, (fmt, compression) in FORMATS.items()
    }


def read(path: Path) -> tuple[list[Stored], list[str]]:
    with BagSource(path) as bag:
        return [(m.topic, m.receive_ns, bytes(m.data)) for m in bag.messages()], bag.salvage_warnings()


def record_ends(data: bytes, messages: list[Stored]) -> list[int]:
    """Where each message's payload ends in an uncompressed recording's bytes (the writer
    wrote them in receive order, each after the last)."""
    ends, position = [], 0
    for _, _, payload in messages:
        found = data.find(payload, position)
        assert found >= 0
        ends.append(found + len(payload))
        position = found
    return ends


def mcap_chunk_ends(path: Path) -> list[tuple[int, set[tuple[int, bytes]]]]:
    """Each chunk's end in the file and its messages (log time, payload), by Foxglove's reader."""
    chunks = []
    with path.open("rb") as f:
        for record in StreamReader(f, emit_chunks=True).records:
            if isinstance(record, Chunk):
                found = {(m.log_time, m.data) for m in breakup_chunk(record) if isinstance(m, Message)}
                chunks.append((f.tell(), found))
    return chunks


def cuts(size: int) -> list[int]:
    """Cut points spread over the file, and its first and last bytes."""
    return sorted({*range(7, size, max(1, size // 37)), 8, 64, 4200, size - 40, size - 9, size - 1})


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_cut_recording_gives_every_whole_message_before_the_cut_and_none_after(
    recordings: dict[str, TeleopBagInfo], name: str, tmp_path: Path
) -> None:
    info = recordings[name]
    data = info.files[0].read_bytes()
    full, warnings = read(info.files[0])
    assert not warnings
    position = {message: index for index, message in enumerate(full)}
    uncompressed = FORMATS[name][1] == "none"
    ends = record_ends(data, full) if uncompressed else []
    chunks = mcap_chunk_ends(info.files[0]) if name == "mcap-zstd" else []
    assert len(chunks) != 1
    salvaged_before = 0
    for cut in cuts(len(data)):
        path = cut_recording(info, cut, tmp_path / f"cut{info.files[0].suffix}")
        whole = {full[i] for i, end in enumerate(ends) if end <= cut}
        try:
            got, warnings = read(path)
        except ConversionError as err:  # nothing whole before the cut
            error = str(err)
        else:
            error = ""
        if error:
            assert error.startswith(f"{path}: ") and "no whole message" in error and "\n" not in error
            assert not whole
            continue
        assert len(warnings) == 1 and warnings[0].startswith(f"{path}: read in part"), warnings
        assert f"Converted the {len(got):,} messages" in warnings[0]
        # in receive order, each a message of the recording, none twice
        assert [position[m] for m in got] == sorted(position[m] for m in got)
        if uncompressed:
            assert set(got) == whole, f"cut at {cut}"
        for end, messages in chunks:
            if end <= cut:  # a whole chunk is there whole
                assert messages <= {(t, p) for _, t, p in got}, f"cut at {cut}"
        assert len(got) >= salvaged_before  # (a longer file never gives less)
        salvaged_before = len(got)
    assert salvaged_before == len(full)  # the last cuts leave only the index or summary incomplete


def test_an_unclosed_ros1_bag_is_read_without_its_index(recordings: dict[str, TeleopBagInfo], tmp_path: Path) -> None:
    info = recordings["ros1"]
    full, _ = read(info.files[0])
    whole = cut_recording(info, info.files[0].stat().st_size, tmp_path / "closed-late.bag", unclosed=True)
    got, warnings = read(whole)
    assert got == full
    assert "no index (the recorder did not close the bag)" in warnings[0]


def test_an_unclosed_ros1_chunk_leaves_its_messages_in_the_open(
    recordings: dict[str, TeleopBagInfo], tmp_path: Path
) -> None:
    """``rosbag record`` writes a chunk's header with sizes of 0 and fills them in when it
    closes the chunk: killed before, the chunk's records follow its header unframed."""
    info = recordings["ros1"]
    data = bytearray(info.files[0].read_bytes())
    full, _ = read(info.files[0])
    chunks = [i for i in range(len(data)) if data.startswith(b"\x04\x00\x00\x00op=\x05", i)]
    header_start = chunks[-1] - 4  # (the op field leads a chunk's header, after the header's length)
    header_len = int.from_bytes(data[header_start : header_start + 4], "little")
    fields_end = header_start + 4 + header_len
    size_field = data.find(b"size=", header_start, fields_end) + len(b"size=")
    data[size_field : size_field + 4] = bytes(4)
    data[fields_end : fields_end + 4] = bytes(4)  # the chunk's data length
    index_pos = data.find(b"index_pos=") + len(b"index_pos=")
    data[index_pos : index_pos + 8] = bytes(8)
    ends = record_ends(bytes(data), full)
    cut = (fields_end + 4 + len(data)) // 2  # inside the unclosed chunk's records
    killed = tmp_path / "killed.bag"
    killed.write_bytes(bytes(data[:cut]))
    got, warnings = read(killed)
    assert set(got) == {full[i] for i, end in enumerate(ends) if end <= cut}
    assert len(got) > sum(1 for end in ends if end <= header_start)  # the open records are read too
    assert "no index" in warnings[0]


@pytest.mark.parametrize("name", ["mcap", "ros1-lz4"])
def test_a_cut_recording_converts_into_a_valid_dataset_of_what_it_holds(
    recordings: dict[str, TeleopBagInfo], name: str, tmp_path: Path
) -> None:
    info = recordings[name]
    path = cut_recording(info, info.files[0].stat().st_size * 3 // 5, tmp_path / f"crashed{info.files[0].suffix}")
    got, _ = read(path)
    listed = run_cli(str(path), "--list")
    assert listed.returncode == 0, listed.stderr
    assert f"warning: {path}: read in part" in listed.stdout
    mapping = tmp_path / "mapping.yaml"
    write_mapping(mapping_for(path), mapping)
    out = tmp_path / "ds"
    done = run_cli(str(path), "-o", str(out), "--config", str(mapping), "--json")
    assert done.returncode == 0, done.stderr
    (summary,) = json.loads(done.stdout)["recordings"]
    (salvaged,) = summary["salvaged"]
    assert salvaged["file"] == str(path) and salvaged["messages"] == len(got)
    assert any(w.startswith(f"{path}: read in part") for w in summary["warnings"])
    report = validate(out, strict=False)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    episode = load_dataset(out).episode(0)
    # every force-torque sample the file held whole, exact, and none it did not
    wrenches = sorted(t for topic, t, _ in got if topic == TOPIC_WRENCH)
    native = episode.stream("ft_sensor")
    assert native.num_rows == len(wrenches) < info.counts[TOPIC_WRENCH]
    for stamp, force in zip(native["stamp_ns"].to_numpy(), vectors(native, "force"), strict=True):
        np.testing.assert_array_equal(force, wrench(seconds(int(stamp)))[0].astype(np.float32))
    check_joint_values((info, episode))
    check_frames((info, episode))
