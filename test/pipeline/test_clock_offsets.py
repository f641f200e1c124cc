"""Recordings whose clocks disagree (``pipeline.clock_offsets``): bags written with known
offsets (``TeleopConfig.receive_offset_ns``, ``stamp_offsets``, ``receive_jump``), converted,
and every value checked against the scene's truth."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.errors import EXIT_FAILED, ClockOffsetError
from ortf_ros.format import layout
from ortf_ros.format.accounting import LEGACY_ACCOUNTING_TYPES
from ortf_ros.pipeline.clock_offsets import ClockOffsets
from ortf_ros.pipeline.mapping import ClockOffset, TopicMapping, WrenchMapping, detect_mapping
from ortf_ros.pipeline.offline import ConversionResult, convert_recording
from ortf_ros.pipeline.samples import Stamps, WrenchSample
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.synthetic.bag import TeleopBagInfo, write_scene_bag
from ortf_ros.synthetic.images import decode_frame_number
from ortf_ros.synthetic.motion import FINGERS_ONLY_EVERY, joint_positions, wrench
from ortf_ros.synthetic.robot import JOINTS
from ortf_ros.synthetic.scene import START_NS, TeleopConfig
from ortf_ros.synthetic.schedule import stamp_ns
from ortf_ros.synthetic.topics import TOPIC_WRENCH, TOPIC_WRIST_IMAGE
from pipeline.test_live_recorder import live_recorder

S = 1_000_000_000
FPS = 30
SIM_START_NS = 5 * S  # a simulation's /clock: stamps seconds after 0


def scene(tmp: Path, name: str, duration_s: float = 2.0, **clocks: object) -> TeleopBagInfo:
    return write_scene_bag(tmp / name, TeleopConfig(fmt="mcap", duration_s=duration_s, **clocks))  # type: ignore[arg-type]


def mapping(bag: TeleopBagInfo) -> TopicMapping:
    with BagSource([bag.path]) as source:
        return detect_mapping(source.topics())


def with_camera_offset(config: TopicMapping, name: str, offset: ClockOffset) -> TopicMapping:
    cameras = tuple(replace(c, clock_offset_ms=offset) if c.name == name else c for c in config.cameras)
    return replace(config, cameras=cameras)


def convert(bag: TeleopBagInfo, out: Path, config: TopicMapping | None = None) -> ConversionResult:
    return convert_recording([bag.path], out, config if config is not None else mapping(bag))


def origin_ns(episode: Episode) -> int:
    """The absolute time of the episode's time 0 (on its step clock), from the joint
    states' native table, whose stamps are as published."""
    samples = episode.stream("joint_states", ["timestamp", "stamp_ns"])
    return int(samples["stamp_ns"][0].as_py()) - round(float(samples["timestamp"][0].as_py()) * S)


def check_against_truth(episode: Episode, start_ns: int, duration_s: float, *, camera: str = "wrist_camera") -> None:
    """Every step as long as the data (none beyond it), the joint sample and frame it points
    at the scene's nearest its time, every native sample the scene's at its stamp."""
    length = episode.record.length
    assert duration_s * FPS - 3 <= length <= duration_s * FPS + 1
    origin = origin_ns(episode)
    joints = episode.stream("joint_states", ["stamp_ns", "position"])
    joint_stamps = joints["stamp_ns"].to_numpy()
    positions = joints["position"].combine_chunks().flatten().to_numpy().reshape(joints.num_rows, -1)
    names = episode.dataset.manifest.native_streams["joint_states"].columns["position"].names
    order = [JOINTS.index(n) for n in names or ()]
    for seq, (stamp, row) in enumerate(zip(joint_stamps.tolist(), positions, strict=True)):
        assert stamp == stamp_ns(seq, 100, start_ns)
        arm = 0 if seq % FINGERS_ONLY_EVERY != FINGERS_ONLY_EVERY - 1 else 7  # (fingers only: the arm's are held)
        np.testing.assert_array_equal(
            row[arm:], joint_positions((stamp - start_ns) / S)[order][arm:].astype(np.float32)
        )
    columns = ["timestamp", layout.stream_index_column("joint_states"), layout.image_column(camera)]
    steps = episode.steps(columns)
    times = origin + np.round(steps["timestamp"].to_numpy() * S).astype(np.int64)
    assert start_ns <= times[0] and times[-1] <= start_ns + duration_s * S
    for t_ns, joint, frame in zip(
        times.tolist(), steps[1].to_numpy().tolist(), steps[2].to_numpy().tolist(), strict=True
    ):
        assert abs(joint_stamps[joint] - t_ns) <= S / 100, (t_ns, joint)
        seq = decode_frame_number(episode.frame(camera, int(frame)))
        assert abs(stamp_ns(seq, FPS, start_ns) - t_ns) <= S / FPS / 2 + 1e6, (t_ns, seq)
    native = episode.stream("ft_sensor", ["stamp_ns", "force"])
    forces = native["force"].combine_chunks().flatten().to_numpy().reshape(native.num_rows, 3)
    for stamp, force in zip(native["stamp_ns"].to_numpy().tolist(), forces, strict=True):
        np.testing.assert_array_equal(force, wrench((stamp - start_ns) / S)[0].astype(np.float32))
    episode.close()


def clock_of(episode: Episode) -> dict[str, tuple[float | None, float | None]]:
    accounting = episode.record.accounting
    assert accounting is not None
    return {a.stream: (a.clock_offset_ms, a.clock_shift_ms) for a in accounting}


@pytest.mark.parametrize(
    ("name", "start_ns", "offset_ns", "words"),
    [
        ("simulation", SIM_START_NS, START_NS - SIM_START_NS, "behind"),  # /clock stamps, wall receive times
        ("robot_3s_ahead", START_NS, -3 * S, "ahead of"),
        ("robot_an_hour_behind", START_NS, 3600 * S, "behind"),
    ],
)
def test_one_offset_shared_by_every_stamped_stream_converts_on_the_stamp_clock(
    tmp_path: Path, name: str, start_ns: int, offset_ns: int, words: str
) -> None:
    bag = scene(tmp_path, name, start_ns=start_ns, receive_offset_ns=offset_ns)
    result = convert(bag, tmp_path / "out")
    [line] = result.clock
    found = re.search(r"the stamps are ([\d.]+) s (behind|ahead of) the receive times", line)
    assert found is not None and found[2] == words, line
    assert abs(float(found[1]) - abs(offset_ns) / S) < 0.015, line  # (latency included: a few ms)
    episode = load_dataset(tmp_path / "out").episode(0)
    clocks = clock_of(episode)
    for stream in ("wrist_camera", "overhead_camera", "depth_camera", "joint_states", "ft_sensor", "action"):
        offset_ms, shift_ms = clocks[stream]
        assert offset_ms is not None and abs(offset_ms - offset_ns / 1e6) < 15, (stream, offset_ms)
        assert shift_ms is None
    assert clocks["tf"] == (None, None)
    assert not any(result.counts.late.values())
    check_against_truth(episode, start_ns, 2.0)
    assert validate(tmp_path / "out", strict=True).ok


def test_the_summary_says_the_shared_offset_in_one_line_and_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bag = scene(tmp_path, "ahead", duration_s=1.0, receive_offset_ns=-3 * S)
    assert bag2ortf([str(bag.path), "-o", str(tmp_path / "text")]) == 0
    text = [line for line in capsys.readouterr().out.splitlines() if "clock:" in line]
    assert len(text) == 1 and re.search(r"the stamps are (2\.99\d|3\.00\d) s ahead of the receive times", text[0]), text
    assert bag2ortf([str(bag.path), "-o", str(tmp_path / "json"), "--json"]) == 0
    [recording] = json.loads(capsys.readouterr().out)["recordings"]
    assert recording["clock"] == [text[0].strip()]
    [rows] = recording["accounting"].values()
    wrist = next(row for row in rows if row["stream"] == "wrist_camera")
    assert -3000 < wrist["clock_offset_ms"] < -2980 and wrist["clock_shift_ms"] is None


CAMERA_250MS = ((TOPIC_WRIST_IMAGE, 250_000_000),)  # the wrist camera's driver stamps on its own clock


def test_one_camera_on_its_own_clock_is_refused_in_one_line_naming_it_and_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bag = scene(tmp_path, "camera", stamp_offsets=CAMERA_250MS)
    with pytest.raises(ClockOffsetError, match=r"/wrist_camera/image_raw .*24\d\.\d ms ahead of the step clock"):
        convert(bag, tmp_path / "api")
    out = tmp_path / "cli"
    assert bag2ortf([str(bag.path), "-o", str(out)]) == EXIT_FAILED
    [line] = capsys.readouterr().err.strip().splitlines()
    assert str(bag.path) in line and "cameras.wrist_camera.clock_offset_ms: auto" in line, line
    assert not (out / layout.MANIFEST).exists() or not load_dataset(out).episodes  # nothing of it written


def test_one_camera_on_its_own_clock_is_aligned_with_auto_and_its_frames_match_the_right_steps(tmp_path: Path) -> None:
    bag = scene(tmp_path, "camera", stamp_offsets=CAMERA_250MS)
    config = with_camera_offset(mapping(bag), "wrist_camera", "auto")
    result = convert(bag, tmp_path / "auto", config)
    [line] = result.clock
    assert re.search(r"/wrist_camera/image_raw moved -24\d\.\d ms", line), line
    assert "cameras.wrist_camera.clock_offset_ms: auto" in line
    episode = load_dataset(tmp_path / "auto").episode(0)
    offset_ms, shift_ms = clock_of(episode)["wrist_camera"]
    assert offset_ms is not None and shift_ms is not None and -243 < offset_ms < -241 and -243 < shift_ms < -241
    assert clock_of(episode)["overhead_camera"][1] is None
    check_against_truth(episode, START_NS, 2.0)
    # A number says the same; 0 takes the stamps as they are, and the frames are then 250 ms off.
    convert(bag, tmp_path / "number", with_camera_offset(config, "wrist_camera", -250.0))
    check_against_truth(load_dataset(tmp_path / "number").episode(0), START_NS, 2.0)
    convert(bag, tmp_path / "zero", with_camera_offset(config, "wrist_camera", 0.0))
    with pytest.raises(AssertionError):
        check_against_truth(load_dataset(tmp_path / "zero").episode(0), START_NS, 2.0)


def test_receive_timed_streams_beside_stamps_of_another_clock_are_refused_or_aligned(tmp_path: Path) -> None:
    bag = scene(tmp_path, "simulation", start_ns=SIM_START_NS, receive_offset_ns=START_NS - SIM_START_NS)
    config = mapping(bag)
    by_receive = replace(config, wrenches=tuple(replace(w, time="receive") for w in config.wrenches))
    with pytest.raises(
        ClockOffsetError, match=r"/ft_sensor/wrench \(receive time.*wrenches\.ft_sensor\.clock_offset_ms"
    ):
        convert(bag, tmp_path / "refused", by_receive)
    aligned = replace(by_receive, wrenches=tuple(replace(w, clock_offset_ms="auto") for w in by_receive.wrenches))
    convert(bag, tmp_path / "aligned", aligned)
    episode = load_dataset(tmp_path / "aligned").episode(0)
    native = episode.stream("ft_sensor", ["timestamp", "stamp_ns"])
    times = origin_ns(episode) + np.round(native["timestamp"].to_numpy() * S).astype(np.int64)
    late = times - native["stamp_ns"].to_numpy()  # receive time on the stamps' clock: the latency
    assert (np.abs(late) < 1_000_000).all(), late
    check_against_truth(episode, SIM_START_NS, 2.0)


def test_a_clock_that_jumps_mid_episode_is_refused_with_the_time_of_the_jump(tmp_path: Path) -> None:
    bag = scene(tmp_path, "ntp_step", duration_s=4.0, receive_jump=(2.0, 5 * S))
    with pytest.raises(
        ClockOffsetError, match=r"jumped by -5\.0\d\d s .* between 1\.9\d\d s and 7\.0\d\d s after the episode's start"
    ):
        convert(bag, tmp_path / "refused")
    assert not (tmp_path / "refused" / layout.MANIFEST).exists() or not load_dataset(tmp_path / "refused").episodes
    # Split there, each side is an episode of its own, measured on its own.
    split = replace(
        mapping(bag), episodes=replace(mapping(bag).episodes, mode="ranges", ranges=((0.0, 1.9), (7.1, 9.0)))
    )
    result = convert(bag, tmp_path / "split", split)
    [line] = result.clock  # (the second side's stamps are 5 s behind its receive times)
    assert len(result.episodes) == 2 and "the stamps are 5.00" in line and "behind" in line, line
    dataset = load_dataset(tmp_path / "split")
    lags = []
    for number, record in enumerate(dataset.episodes):
        assert 50 <= record.length <= 58
        lags.append(clock_of(dataset.episode(number))["joint_states"][0])
    assert lags[0] is not None and lags[1] is not None and abs(lags[1] - lags[0] - 5000) < 1, lags


def wrench_sample(stamp_ns: int, receive_ns: int) -> WrenchSample:
    return WrenchSample(TOPIC_WRENCH, Stamps(receive_ns, stamp_ns), np.zeros(3), np.zeros(3))


def feed(clocks: ClockOffsets, stamps: range, lag_ns: Callable[[int], int]) -> int:
    """1 kHz force-torque messages, each received ``lag_ns(stamp)`` after its stamp; how many came through."""
    through = 0
    for stamp in stamps:
        receive = stamp + lag_ns(stamp)
        through += len(clocks.take(wrench_sample(stamp, receive), TOPIC_WRENCH))
        through += len(clocks.settle(receive))
    return through


def test_a_stall_that_drains_holds_the_watermark_and_a_lasting_jump_is_refused() -> None:
    config = TopicMapping(wrenches=(WrenchMapping("ft", TOPIC_WRENCH),))
    clocks = ClockOffsets(config, origin_ns=0)
    ms = 1_000_000
    assert feed(clocks, range(S, 2 * S, ms), lambda t: ms) == 1000 and clocks.decided
    assert clocks.reference_ns == 0 and clocks.step_input_ns(2 * S) == 2 * S
    # The recorder stalls for 0.6 s: what was published meanwhile is received at its end.
    stall = (2 * S, 2 * S + 600 * ms)
    feed(clocks, range(stall[0], stall[0] + 300 * ms, ms), lambda t: stall[1] - t + ms)
    assert clocks.step_input_ns(3 * S) == stall[1] + ms  # (held where the question began)
    feed(clocks, range(stall[0] + 300 * ms, stall[1], ms), lambda t: stall[1] - t + ms)
    feed(clocks, range(stall[1], 3 * S, ms), lambda t: ms)
    assert clocks.step_input_ns(3 * S) == 3 * S  # it drained: no jump
    # The clock steps 5 s: held at once, refused once it lasted a second.
    with pytest.raises(
        ClockOffsetError, match=r"jumped by -5\.000 s .* between 3\.000 s and 8\.001 s after the episode's start"
    ):
        feed(clocks, range(3 * S, 5 * S, ms), lambda t: 5 * S + ms)


def test_the_119000_s_bag_converts_in_seconds_in_bounded_memory(tmp_path: Path) -> None:
    """The issue's recording: 10 s, received 119,000 s after its stamps, the detected
    mapping; it took 6 minutes to write 3.5 million steps."""
    bag = scene(tmp_path, "take", duration_s=10.0, receive_offset_ns=119_000 * S)
    out = tmp_path / "D"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run(
        [sys.executable, "-m", "ortf_ros.cli.bag2ortf", str(bag.path), "-o", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    [recording] = json.loads(done.stdout)["recordings"]
    assert recording["seconds"] < 60, recording["seconds"]
    assert 297 <= recording["steps"] <= 301
    assert peak_mb < 1024 or before / 1024 >= 1024, peak_mb
    [line] = recording["clock"]
    assert "119000.00" in line
    check_against_truth(load_dataset(out).episode(0), START_NS, 10.0)


def test_a_dataset_of_the_accounting_without_the_clock_fields_validates(tmp_path: Path) -> None:
    bag = scene(tmp_path, "plain", duration_s=1.0)
    convert(bag, tmp_path / "out")
    path = tmp_path / "out" / layout.EPISODES
    table = pq.read_table(path)
    rows = table.column("accounting").to_pylist()
    for episode_rows in rows:
        for row in episode_rows:
            del row["clock_offset_ms"], row["clock_shift_ms"]
    legacy = pa.array(rows, type=LEGACY_ACCOUNTING_TYPES[0])
    pq.write_table(table.set_column(table.schema.get_field_index("accounting"), "accounting", legacy), path)
    report = validate(tmp_path / "out", strict=True)
    assert report.ok, [f.line() for f in report.findings]
    [account] = [
        a for a in load_dataset(tmp_path / "out").episode(0).record.accounting or () if a.stream == "joint_states"
    ]
    assert account.clock_offset_ms is None


# -- live ----------------------------------------------------------------------------------------


def test_live_an_episode_whose_camera_is_on_its_own_clock_is_refused_and_the_recorder_goes_on(
    tmp_path: Path,
) -> None:
    scene = TeleopConfig(fmt="mcap", duration_s=60.0, with_depth=False, command_rate_hz=100, stamp_offsets=CAMERA_250MS)
    with live_recorder(tmp_path, scene) as live:
        live.feed(1.5)
        assert live.start().success
        live.feed(1.5)
        reply = live.recorder.stop()
        assert not reply.success and "episode 000000 refused, nothing of it written" in reply.message, reply.message
        assert "cameras.wrist_camera.clock_offset_ms: auto" in reply.message
        assert any("refused" in warning for warning in live.recorder.status()["warnings"])
        assert live.recorder.state == "ready" and live.start().success  # the recorder goes on
        assert live.recorder.discard().success
    assert not load_dataset(tmp_path / "dataset").episodes


def test_live_a_publisher_on_simulated_time_records_on_its_clock(tmp_path: Path) -> None:
    """Stamps from a simulation's /clock (seconds after 0) while the recorder's receive times
    are the wall clock's: the steps are the stamps', as long as the data."""
    scene = TeleopConfig(fmt="mcap", duration_s=60.0, with_depth=False, command_rate_hz=100, start_ns=SIM_START_NS)
    with live_recorder(tmp_path, scene) as live:
        live.clock.now_ns = START_NS  # (the wall clock the recorder receives on)
        live.events = (replace(e, receive_ns=e.receive_ns + START_NS - SIM_START_NS) for e in live.events)
        live.feed(1.5)
        assert live.start().success
        live.feed(2.0)
        reply = live.recorder.stop()
        assert reply.success, reply.message
    episode = load_dataset(tmp_path / "dataset").episode(0)
    assert 55 <= episode.record.length <= 61
    offset_ms, shift_ms = clock_of(episode)["joint_states"]
    assert offset_ms is not None and abs(offset_ms - (START_NS - SIM_START_NS) / 1e6) < 1 and shift_ms is None
    native = episode.stream("joint_states", ["stamp_ns"])
    times = origin_ns(episode) + np.round(episode.steps(["timestamp"])["timestamp"].to_numpy() * S).astype(np.int64)
    stamps = native["stamp_ns"].to_numpy()
    assert stamps[0] - S // 100 <= times[0] and times[-1] <= stamps[-1] + S // 100  # (on the stamps' clock)
