"""Audio offline: recordings the tests write (``ortf_ros.synthetic`` with ``audio``) in both
``audio_common_msgs`` layouts, converted by ``ortf-bag2ortf``: every sample published is in
the episode's WAV, in order, as published (read back with ``wave`` and PyAV), the chunk
table says when each message was recorded and where a dropped one was, and the dataset
validates strictly."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import wave
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.convert.mixtrain_export import data_file
from ortf_ros.dataset.audio_codecs import AudioSamples, encode, probe_audio
from ortf_ros.dataset.audio_files import AudioFile
from ortf_ros.dataset.edits import delete_episodes
from ortf_ros.dataset.info import dataset_info
from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.recover import recover
from ortf_ros.dataset.validation import validate
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ConversionError, WriterError
from ortf_ros.format import layout
from ortf_ros.format.audio import AudioFormat, audio_sensor
from ortf_ros.io.wav import read_wav, wav_header, wav_info
from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.extract import extract
from ortf_ros.pipeline.fastpath import SampleDecoder
from ortf_ros.pipeline.mapping import (
    AudioMapping,
    TopicMapping,
    describe_mapping,
    detect_mapping,
    mapping_from_dict,
    mapping_from_parameters,
    mapping_to_dict,
    write_mapping,
)
from ortf_ros.pipeline.prologue import PrologueBuilder
from ortf_ros.pipeline.samples import AudioChunkSample, AudioInfoSample, BadMessage, RawMessage
from ortf_ros.pipeline.sources.bag import BagSource, TopicInfo
from ortf_ros.pipeline.streams.audio import describe_audio, from_bytes
from ortf_ros.pipeline.streams.audio_definitions import OLDER_LAYOUT, ROS2_LAYOUT, audio_data_arrays
from ortf_ros.synthetic.audio import audio_samples
from ortf_ros.synthetic.bag import TeleopBagInfo, write_scene_bag
from ortf_ros.synthetic.demo_arm import demo_action, demo_manifest, demo_rgb, demo_state
from ortf_ros.synthetic.messages import Messages
from ortf_ros.synthetic.scene import START_NS, TeleopConfig
from ortf_ros.synthetic.schedule import stamp_ns
from ortf_ros.synthetic.topics import TOPIC_AUDIO, TOPIC_AUDIO_INFO
from ortf_ros.synthetic.typestore import typestore

REPO = Path(__file__).resolve().parents[3]
CRASH_CHILD = REPO / "test" / "support" / "audio_crash_child.py"
DROPPED = 5
CASES = {
    # name: (bag format, layout, sample format, channels)
    "mcap-ros2-s16-mono": ("mcap", "ros2", "s16le", 1),
    "sqlite3-ros2-f32-stereo": ("sqlite3", "ros2", "f32le", 2),
    "ros1-older-s16-stereo": ("ros1", "older", "s16le", 2),
    "mcap-older-s24-mono": ("mcap", "older", "s24le", 1),
}


def scene(fmt: str, audio: str, sample_format: str, channels: int) -> TeleopConfig:
    return TeleopConfig(
        fmt=fmt,  # type: ignore[arg-type]
        duration_s=1.0,
        with_depth=False,
        audio=audio,  # type: ignore[arg-type]
        audio_format=sample_format,
        audio_channels=channels,
        audio_dropped=(DROPPED,),
    )


def convert(bag: TeleopBagInfo, out: Path) -> Episode:
    with BagSource(bag.path) as source:
        config = detect_mapping(source.topics())
    write_mapping(config, out.parent / "mapping.yaml")
    assert bag2ortf([str(bag.path), "-o", str(out), "--config", str(out.parent / "mapping.yaml")]) == 0
    return load_dataset(out).episode(0)


@pytest.fixture(scope="module", params=list(CASES))
def converted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[TeleopConfig, Episode]:
    tmp = tmp_path_factory.mktemp(request.param)
    config = scene(*CASES[request.param])
    bag = write_scene_bag(tmp / ("bag.bag" if config.fmt == "ros1" else "bag"), config)
    return config, convert(bag, tmp / "ds")


def published(config: TeleopConfig) -> list[int]:
    """The audio messages (seq) the recording holds."""
    total = round(config.duration_s * config.audio_rate_hz / config.audio_chunk)
    return [seq for seq in range(total) if seq not in config.audio_dropped]


def test_the_file_holds_every_sample_published_in_order(converted: tuple[TeleopConfig, Episode]) -> None:
    config, episode = converted
    wav, _ = episode.audio_files("microphone")
    expected = np.concatenate([audio_samples(config, seq) for seq in published(config)])
    written = read_wav(wav, config.audio_format)
    assert written.dtype == expected.dtype
    np.testing.assert_array_equal(written, expected)  # sample-exact, the dropped chunk's samples absent
    info = wav_info(wav)
    assert (info.sample_rate, info.channels) == (config.audio_rate_hz, config.audio_channels)
    assert info.frames * config.audio_channels == len(expected)


def test_an_independent_decoder_reads_the_same_samples(converted: tuple[TeleopConfig, Episode]) -> None:
    config, episode = converted
    wav, _ = episode.audio_files("microphone")
    expected = np.concatenate([audio_samples(config, seq) for seq in published(config)])
    if config.audio_format == "s16le":
        with wave.open(str(wav)) as reader:
            params = (reader.getnchannels(), reader.getframerate(), reader.getsampwidth())
            assert params == (config.audio_channels, 16000, 2)
            data = np.frombuffer(reader.readframes(reader.getnframes()), "<i2")
        np.testing.assert_array_equal(data, expected)
    with av.open(str(wav)) as container:
        stream = container.streams.audio[0]
        assert (stream.rate, stream.channels) == (config.audio_rate_hz, config.audio_channels)
        decoded = np.concatenate([frame.to_ndarray().T.reshape(-1) for frame in container.decode(stream)])
    if config.audio_format == "s24le":
        decoded = decoded >> 8  # (FFmpeg widens 24-bit PCM to s32)
    np.testing.assert_array_equal(decoded.astype(expected.dtype), expected)


def test_the_chunk_table_maps_samples_to_time_and_shows_the_gap(converted: tuple[TeleopConfig, Episode]) -> None:
    config, episode = converted
    _, table_path = episode.audio_files("microphone")
    table = pq.read_table(table_path).to_pydict()
    seqs = published(config)
    chunk = config.audio_chunk
    assert table["chunk_index"] == list(range(len(seqs)))
    assert table["sample_count"] == [chunk] * len(seqs)
    assert table["first_sample"] == [i * chunk for i in range(len(seqs))]
    rate = config.audio_rate_hz / chunk
    stamps = [stamp_ns(seq, rate, config.start_ns) for seq in seqs]
    if config.audio == "ros2":
        assert table["stamp_ns"] == stamps
        assert table["time_ns"] == stamps
    else:  # AudioData has no header: its receive time
        assert table["stamp_ns"] == [None] * len(seqs)
        assert table["time_ns"] == table["receive_ns"]
    gaps = np.array([chunk if seq == DROPPED + 1 else 0 for seq in seqs])
    # Receive times jitter (0.4 ms here): a gap from them is good to that much.
    slack = 0 if config.audio == "ros2" else round(0.0004 * config.audio_rate_hz)
    assert np.abs(np.array(table["gap_samples"]) - gaps).max() <= slack
    assert (np.array(table["gap_samples"]) > 0).tolist() == (gaps > 0).tolist()
    # Time on the step clock: the same origin as the native-rate tables'.
    wrench = episode.stream("ft_sensor", ["timestamp", "stamp_ns"]).to_pydict()
    origin_ns = wrench["stamp_ns"][0] - round(wrench["timestamp"][0] * 1e9)
    seconds = [(t - origin_ns) / 1e9 for t in table["time_ns"]]
    np.testing.assert_allclose(table["timestamp"], seconds, atol=1e-6)


def test_manifest_episode_row_accounting_and_strict_validation(converted: tuple[TeleopConfig, Episode]) -> None:
    config, episode = converted
    sensor = episode.dataset.manifest.sensor("microphone")
    assert sensor is not None and sensor.type == "audio"
    bits = {"s16le": 16, "f32le": 32, "s24le": 24}[config.audio_format]
    assert sensor.extra["sample_rate"] == 16000
    assert sensor.extra["channels"] == config.audio_channels
    assert sensor.extra["bit_depth"] == bits
    assert sensor.extra["codec"] == f"pcm_{config.audio_format}"
    assert sensor.extra["source"] == TOPIC_AUDIO
    assert episode.record.audio_file == layout.audio_path("microphone", 0, 0)
    (line,) = dataset_info(episode.dataset).microphones  # (`ortf info`)
    assert line.split()[:3] == ["microphone", "16000", "Hz,"] and f"{config.audio_channels} ch" in line
    account = next(a for a in episode.record.accounting or () if a.stream == "microphone")
    assert (account.role, account.read, account.kept, account.native_samples) == ("audio", 15, 15, 15)
    report = validate(episode.dataset.root, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)


WAV = layout.audio_path("microphone", 0, 0)
CHUNKS = layout.audio_chunks_path("microphone", 0, 0)


def _truncate(relative: str, drop: int) -> Callable[[Path], None]:
    def cut(root: Path) -> None:
        data = (root / relative).read_bytes()
        (root / relative).write_bytes(data[:-drop])

    return cut


def _manifest_channels(root: Path) -> None:
    path = root / layout.MANIFEST
    manifest = json.loads(path.read_text())
    next(s for s in manifest["sensors"] if s["type"] == "audio")["channels"] = 2
    path.write_text(json.dumps(manifest))


def _accounted_chunks(root: Path) -> None:
    path = root / layout.EPISODES
    table = pq.read_table(path)
    rows = table.to_pylist()
    for account in rows[0]["accounting"]:
        if account["stream"] == "microphone":
            account["native_samples"] += 1
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)


AUDIO_BREAKAGES: list[tuple[str, Callable[[Path], object]]] = [
    ("audio.file", lambda root: (root / WAV).unlink()),
    ("audio.file", lambda root: (root / WAV).write_bytes(b"RIFF")),
    ("audio.format", _manifest_channels),
    ("audio.chunks", _truncate(WAV, 2048)),  # a chunk's samples lost
    ("audio.chunks", lambda root: (root / CHUNKS).write_bytes(b"not parquet")),
    ("episodes.accounting_files", _accounted_chunks),
]
"""A breakage of each audio rule (``test_validate.test_every_rule_has_a_breakage`` counts these)."""


@pytest.fixture(scope="module")
def audio_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("audio-rules")
    bag = write_scene_bag(tmp / "bag", scene("mcap", "ros2", "s16le", 1))
    return convert(bag, tmp / "ds").dataset.root


@pytest.mark.parametrize(("rule", "breaker"), AUDIO_BREAKAGES, ids=[r for r, _ in AUDIO_BREAKAGES])
def test_audio_rule(audio_dataset: Path, tmp_path: Path, rule: str, breaker: Callable[[Path], object]) -> None:
    root = tmp_path / "ds"
    shutil.copytree(audio_dataset, root)
    breaker(root)
    found = {f.rule for f in validate(root).findings}
    assert rule in found, found


def test_mapping_keys_round_trip_and_are_detected_by_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mapping = {"audio": {"mic": {"topic": "/mic/audio", "info_topic": "/mic/info", "time": "receive", "codec": "wav"}}}
    config = mapping_from_dict(mapping, "test")
    assert config.audio == (AudioMapping("mic", "/mic/audio", "/mic/info", "receive", "wav"),)
    assert mapping_from_dict(mapping_to_dict(config), "again") == config
    parameters = {"audio.mic.topic": "/mic/audio", "audio.mic.info_topic": "/mic/info", "audio.mic.time": "receive"}
    assert mapping_from_parameters(parameters).audio == config.audio
    assert AudioMapping("m", "/robot/mic/audio").info_topics == ("/robot/mic/audio_info", "/robot/mic/info")
    assert any(line.startswith("audio mic: /mic/audio") for line in describe_mapping(config, None))
    with pytest.raises(Exception, match="codec"):
        mapping_from_dict({"audio": {"mic": {"topic": "/a", "codec": "mp3"}}}, "test")
    bag = write_scene_bag(tmp_path / "bag", scene("mcap", "older", "s16le", 1))
    with BagSource(bag.path) as source:
        detected = detect_mapping(source.topics())
    assert detected.audio == (AudioMapping("microphone", TOPIC_AUDIO, TOPIC_AUDIO_INFO, "receive"),)
    assert bag2ortf([str(bag.path), "--list"]) == 0
    listed = capsys.readouterr().out
    assert f"audio microphone: {TOPIC_AUDIO} (receive time, every sample kept, wav file, format from " in listed
    assert "audio_common_msgs/msg/AudioData" in listed and "audio_common_msgs/msg/AudioInfo" in listed


def test_definitions_are_the_upstream_files() -> None:
    """``ROS2_LAYOUT`` is what ``ros/audio_common_msgs`` builds into the venv."""
    for msgtype, text in ROS2_LAYOUT.items():
        name = msgtype.rpartition("/")[2]
        assert (REPO / "ros" / "audio_common_msgs" / "msg" / f"{name}.msg").read_text() == text
    assert set(OLDER_LAYOUT) == {f"audio_common_msgs/msg/{n}" for n in ("AudioData", "AudioInfo", "AudioDataStamped")}


def test_bad_audio_messages_are_counted_with_a_reason_naming_the_field() -> None:
    store = typestore(False, "jazzy", "older")
    decoder = Decoder()
    for msgtype, text in OLDER_LAYOUT.items():
        decoder.register(msgtype, text, "ros2msg")
    info = store.types["audio_common_msgs/msg/AudioInfo"](
        channels=1, sample_rate=16000, sample_format="S16LE", bitrate=256000, coding_format="mp3"
    )
    serialized = store.serialize_cdr(info, info.__msgtype__)
    raw = RawMessage(TOPIC_AUDIO_INFO, "audio_common_msgs/msg/AudioInfo", 1, serialized)
    (found,) = extract(decoder.decode(raw), raw)
    assert isinstance(found, BadMessage) and "coding_format is 'mp3'" in found.reason
    stamped = typestore(False, "jazzy", "ros2")
    data: Any = stamped.types["audio_common_msgs/msg/AudioData"](**audio_data_arrays(np.arange(6), "int16_data"))
    stereo = stamped.types["audio_common_msgs/msg/AudioInfo"](format=8, channels=4, rate=16000, chunk=0)
    audio: Any = stamped.types["audio_common_msgs/msg/Audio"](audio_data=data, info=stereo)
    header = stamped.types["std_msgs/msg/Header"](stamped.types["builtin_interfaces/msg/Time"](1, 2), "mic")
    msg = stamped.types["audio_common_msgs/msg/AudioStamped"](header=header, audio=audio)
    decoder = Decoder()
    for msgtype, text in ROS2_LAYOUT.items():
        decoder.register(msgtype, text, "ros2msg")
    raw = RawMessage(TOPIC_AUDIO, "audio_common_msgs/msg/AudioStamped", 5, stamped.serialize_cdr(msg, msg.__msgtype__))
    (found,) = extract(decoder.decode(raw), raw)
    assert isinstance(found, BadMessage) and "6 samples are not a whole number of 4-channel frames" in found.reason
    audio.info.channels = 2
    raw = replace(raw, data=stamped.serialize_cdr(msg, msg.__msgtype__))
    (chunk,) = extract(decoder.decode(raw), raw)
    assert isinstance(chunk, AudioChunkSample) and chunk.stamps.header_ns == 1_000_000_002
    np.testing.assert_array_equal(chunk.samples, np.arange(6, dtype=np.int16))


def test_an_unknown_format_is_one_line_naming_the_topic() -> None:
    config = TopicMapping(audio=(AudioMapping("mic", "/mic/audio"),))
    with pytest.raises(Exception, match=r"audio mic: /mic/audio: its format is unknown.*audio.mic.info_topic"):
        describe_audio(config, {})


def test_mcap_export_publishes_the_chunks_and_converts_back(audio_dataset: Path, tmp_path: Path) -> None:
    """``ortf export mcap`` writes an AudioStamped per chunk at its time, read back with
    ``mcap_ros2`` (the upstream definitions, not ours), and the file converts back to the
    same samples."""
    out, mapping = tmp_path / "audio.mcap", tmp_path / "mapping.yaml"
    assert ortf(["export", "mcap", str(audio_dataset), str(out), "--write-config", str(mapping)]) == 0
    episode = load_dataset(audio_dataset).episode(0)
    wav, chunks = episode.audio_files("microphone")
    table = pq.read_table(chunks).to_pydict()
    written = read_wav(wav, "s16le")
    with out.open("rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        messages = list(reader.iter_decoded_messages(topics=["/microphone/audio"]))
    assert len(messages) == len(table["chunk_index"])
    for (_, _, _, decoded), first, count in zip(messages, table["first_sample"], table["sample_count"], strict=True):
        audio = decoded.audio
        assert (audio.info.format, audio.info.channels, audio.info.rate, audio.info.chunk) == (8, 1, 16000, count)
        np.testing.assert_array_equal(np.asarray(audio.audio_data.int16_data), written[first : first + count])
    times = [message.log_time for _, _, message, _ in messages]
    np.testing.assert_allclose(np.diff(times) / 1e9, np.diff(table["timestamp"]), atol=1e-6)  # gaps kept
    assert bag2ortf([str(out), "-o", str(tmp_path / "back"), "--config", str(mapping)]) == 0
    back = load_dataset(tmp_path / "back").episode(0)
    np.testing.assert_array_equal(read_wav(back.audio_files("microphone")[0], "s16le"), written)


def test_mixtrain_fills_the_audio_column(audio_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "mixtrain"
    assert ortf(["export", "mixtrain", str(audio_dataset), str(out)]) == 0
    sidecar = json.loads((out / "mixtrain.json").read_text())
    entry = sidecar["column_types"]["audio"]
    assert (entry["type"], entry["sample_rate"], entry["channels"], entry["codec"]) == ("audio", 16000, 1, "pcm_s16le")
    rows = pq.read_table(out / data_file(0))
    relative = rows.column("audio")[0].as_py()
    wav, chunks = load_dataset(audio_dataset).episode(0).audio_files("microphone")
    assert (out / relative).read_bytes() == wav.read_bytes()
    assert (out / relative.replace(".wav", ".chunks.parquet")).read_bytes() == chunks.read_bytes()


def test_lerobot_export_keeps_the_audio_beside_it_and_says_so(
    audio_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lerobot"
    assert ortf(["export", "lerobot", str(audio_dataset), str(out)]) == 0
    assert "1 audio file(s) kept beside it under audio/" in capsys.readouterr().out
    info = json.loads((out / "meta" / "info.json").read_text())
    entry = info["ortf"]["audio"]["microphone"]
    assert entry["path"] == "audio/microphone/episode_{episode_index:06d}.wav" and entry["sample_rate"] == 16000
    wav, _ = load_dataset(audio_dataset).episode(0).audio_files("microphone")
    assert (out / "audio/microphone/episode_000000.wav").read_bytes() == wav.read_bytes()
    assert (out / "audio/microphone/episode_000000.chunks.parquet").is_file()
    # ... and `ortf import lerobot` brings it back.
    assert ortf(["import", "lerobot", str(out), str(tmp_path / "back")]) == 0
    back = load_dataset(tmp_path / "back").episode(0)
    assert back.audio_files("microphone")[0].read_bytes() == wav.read_bytes()
    report = validate(back.dataset.root, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)


def test_a_killed_recorder_loses_at_most_the_chunks_in_flight(tmp_path: Path) -> None:
    """SIGKILL mid-episode, 150 chunks written: ``ortf recover`` commits the chunks whose
    rows were logged (every 64), sample-exact, with a whole WAV and table, and it validates."""
    root = tmp_path / "ds"
    child = subprocess.run([sys.executable, str(CRASH_CHILD), str(root), "150"])
    assert child.returncode == -signal.SIGKILL
    recover(root)
    episode = load_dataset(root).episode(0)
    wav, chunks = episode.audio_files("mic")
    table = pq.read_table(chunks).to_pydict()
    assert len(table["chunk_index"]) == 128  # two logged blocks of 64; the last 22 were in flight
    expected = np.concatenate([(np.arange(s * 1024, (s + 1) * 1024) % 30000).astype(np.int16) for s in range(128)])
    np.testing.assert_array_equal(read_wav(wav, "s16le"), expected)
    assert table["timestamp"][1] == pytest.approx(0.064)
    report = validate(root)
    assert report.ok, "\n".join(f.line() for f in report.findings)


@pytest.mark.parametrize("layout", ["ros2", "older"])
@pytest.mark.parametrize(("sample_format", "channels"), [("s16le", 1), ("f32le", 2), ("u8", 1)])
def test_a_recording_without_definitions_is_read_by_the_known_layouts(
    layout: str, sample_format: str, channels: int
) -> None:
    """rosbag2 sqlite3 files before Iron hold no definitions: each layout is tried on the bytes."""
    config = TeleopConfig(fmt="mcap", audio=layout, audio_format=sample_format, audio_channels=channels)  # type: ignore[arg-type]
    messages = Messages(config)
    decoder = Decoder()  # (nothing registered: what a recording without definitions gives)
    topics = (TOPIC_AUDIO_INFO, TOPIC_AUDIO) if layout == "older" else (TOPIC_AUDIO,)
    samples = []
    for topic in topics:
        raw = RawMessage(topic, messages.msgtype(topic), 1, messages.serialize(topic, 3, config.start_ns))
        samples += extract(decoder.decode(raw), raw)
    chunk = samples[-1]
    assert isinstance(chunk, AudioChunkSample), samples
    if layout == "ros2":
        assert chunk.format == AudioFormat(sample_format, channels, 16000)
        np.testing.assert_array_equal(chunk.samples, audio_samples(config, 3))
    else:
        info = samples[0]
        assert isinstance(info, AudioInfoSample) and info.format.channels == channels
        np.testing.assert_array_equal(from_bytes(chunk.samples, info.format), audio_samples(config, 3))


def test_an_mp3_stream_is_refused_naming_the_coding(tmp_path: Path) -> None:
    """ros-drivers' audio_capture defaults to mp3: not sample-exact PCM, so not kept, and the line says why."""
    store = typestore(False, "jazzy", "older")
    info = store.types["audio_common_msgs/msg/AudioInfo"](
        channels=1, sample_rate=16000, sample_format="S16LE", bitrate=32000, coding_format="mp3"
    )
    raw = RawMessage(TOPIC_AUDIO_INFO, info.__msgtype__, 1, store.serialize_cdr(info, info.__msgtype__))
    config = TopicMapping(audio=(AudioMapping("microphone", TOPIC_AUDIO, time="receive"),))
    builder = PrologueBuilder(config, SampleDecoder(Decoder()), {TOPIC_AUDIO, TOPIC_AUDIO_INFO})
    builder.accept(raw)
    assert builder.missing() == [f"no audio format yet on {TOPIC_AUDIO}"]
    with pytest.raises(ConversionError, match=r"its format is unknown: .*coding_format is 'mp3'; only uncompressed"):
        describe_audio(config, builder.result().audio, builder.result().problems)


def convert_as(bag: TeleopBagInfo, out: Path, codec: str) -> int:
    with BagSource(bag.path) as source:
        config = detect_mapping(source.topics())
    config = replace(config, audio=tuple(replace(a, codec=codec) for a in config.audio))  # type: ignore[arg-type]
    write_mapping(config, out.parent / f"mapping-{codec}.yaml")
    return bag2ortf([str(bag.path), "-o", str(out), "--config", str(out.parent / f"mapping-{codec}.yaml")])


@pytest.mark.parametrize(("sample_format", "channels"), [("s16le", 2), ("s24le", 1), ("u8", 1)])
def test_flac_in_mp4_keeps_every_sample(sample_format: str, channels: int, tmp_path: Path) -> None:
    config = scene("mcap", "ros2", sample_format, channels)
    bag = write_scene_bag(tmp_path / "bag", config)
    assert convert_as(bag, tmp_path / "ds", "flac") == 0
    episode = load_dataset(tmp_path / "ds").episode(0)
    audio, _ = episode.audio_files("microphone")
    assert audio.suffix == ".mp4" and episode.record.audio_file == "audio/microphone/chunk-000/episode_000000.mp4"
    sensor = episode.dataset.manifest.sensor("microphone")
    assert sensor is not None and (sensor.extra["codec"], sensor.extra["container"]) == ("flac", "mp4")
    expected = np.concatenate([audio_samples(config, seq) for seq in published(config)])
    with AudioSamples(audio, AudioFormat(sample_format, channels, 16000)) as reader:
        decoded = reader.read(len(expected))
    np.testing.assert_array_equal(decoded, expected)
    report = validate(episode.dataset.root, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)


def test_aac_in_mp4_is_valid_and_float_samples_refuse_flac(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = scene("mcap", "ros2", "f32le", 1)
    bag = write_scene_bag(tmp_path / "bag", config)
    assert convert_as(bag, tmp_path / "flac", "flac") != 0
    assert "codec flac keeps integers of at most 24 bits exactly" in capsys.readouterr().err
    assert convert_as(bag, tmp_path / "aac", "aac") == 0
    episode = load_dataset(tmp_path / "aac").episode(0)
    report = validate(episode.dataset.root, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    audio, _ = episode.audio_files("microphone")
    probed = probe_audio(audio)
    assert (probed.codec, probed.sample_rate, probed.channels) == ("aac", 16000, 1)
    assert abs(probed.frames - 15 * 1024) <= 2048


@pytest.mark.parametrize("codec", ["aac", "flac"])
def test_a_stereo_file_of_either_codec_reads_back_interleaved(tmp_path: Path, codec: str) -> None:
    """AAC decodes to one plane per channel, FLAC to one packed row: ``AudioSamples`` gives
    left, right, left, ... either way (a constant left at +1/4 and right at -1/4 of full scale)."""
    fmt = AudioFormat("s16le", 2, 16000)
    frames = np.empty((16000, 2), np.int16)
    frames[:, 0], frames[:, 1] = 8192, -8192
    wav = tmp_path / "stereo.wav"
    wav.write_bytes(wav_header(fmt, len(frames)) + frames.tobytes())
    encode(wav, fmt, codec, tmp_path / "stereo.mp4")
    with AudioSamples(tmp_path / "stereo.mp4", fmt) as reader:
        samples = reader.read(len(frames))
    stereo = samples.reshape(-1, 2).astype(np.float64)
    settled = stereo[4096:-4096]  # (AAC's priming and tail are not the signal)
    scale = 1.0 if codec == "flac" else 32768.0
    assert np.all(settled[:, 0] * scale > 4000) and np.all(settled[:, 1] * scale < -4000), settled[:4]


def test_audio_past_what_a_wav_holds_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """A WAV's sizes are 32 bits: the chunk that would pass 4 GiB is refused with one line
    (the file keeps what it had), rather than a file whose header cannot say its size."""
    fmt = AudioFormat("f32le", 8, 48000)
    audio = AudioFile(tmp_path / "mic.wav", fmt)
    chunk = np.zeros(480 * 8, np.float32)
    assert audio.add(chunk, 0.0, time_ns=0, stamp_ns=None, receive_ns=0) == 0
    audio.frames = (0xFFFFFFFF - 36) // (4 * 8) - 100  # (as if the episode had gone on for 46.6 minutes)
    with pytest.raises(WriterError, match=r"mic.wav: a WAV file holds at most 4 GiB of samples.* after 47 min"):
        audio.add(chunk, 1.0, time_ns=10**9, stamp_ns=None, receive_ns=10**9)
    audio.abandon()


def test_parallel_conversion_imports_each_recordings_audio(tmp_path: Path) -> None:
    """``--jobs 2``: each recording is converted to a dataset of its own and its episodes
    imported (``importing.import_episode``), audio files and chunk tables with them."""
    configs = [replace(scene("mcap", "ros2", "s16le", 1), start_ns=START_NS + i * 10**10) for i in range(2)]
    bags = [write_scene_bag(tmp_path / f"bag{i}", config) for i, config in enumerate(configs)]
    with BagSource(bags[0].path) as source:
        write_mapping(detect_mapping(source.topics()), tmp_path / "mapping.yaml")
    args = [str(b.path) for b in bags] + ["-o", str(tmp_path / "ds"), "--config", str(tmp_path / "mapping.yaml")]
    assert bag2ortf([*args, "--jobs", "2"]) == 0
    dataset = load_dataset(tmp_path / "ds")
    for index, config in enumerate(configs):
        episode = dataset.episode(index)
        expected = np.concatenate([audio_samples(config, seq) for seq in published(config)])
        np.testing.assert_array_equal(read_wav(episode.audio_files("microphone")[0], "s16le"), expected)
        assert episode.record.audio_file == layout.audio_path("microphone", 0, index)
    report = validate(dataset.root, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)


def test_deleting_an_episode_removes_its_audio(audio_dataset: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    shutil.copytree(audio_dataset, root)
    wav, chunks = load_dataset(root).episode(0).audio_files("microphone")
    delete_episodes(root, ["000000"])
    assert not wav.exists() and not chunks.exists()


def test_detection_names_microphones_and_finds_their_audio_info() -> None:
    def topic(name: str, msgtype: str) -> TopicInfo:
        return TopicInfo(name, msgtype, msgtype, 10, None, None, "", "", "cdr")

    topics = [
        topic("/robot/mic/audio", "audio_common_msgs/msg/AudioData"),
        topic("/robot/audio_settings", "audio_common_msgs/msg/AudioInfo"),  # (not a sibling: the only one)
        topic("/head/audio_stamped", "audio_common_msgs/msg/AudioDataStamped"),
        topic("/audio", "audio_common_msgs/msg/AudioStamped"),
    ]
    detected = detect_mapping(topics).audio
    assert detected == (
        AudioMapping("audio", "/audio", None, "header"),
        AudioMapping("head", "/head/audio_stamped", "/robot/audio_settings", "header"),
        AudioMapping("robot_mic", "/robot/mic/audio", "/robot/audio_settings", "receive"),
    )


def test_two_microphones_each_have_their_files_and_audio_file_is_the_first(tmp_path: Path) -> None:
    base = demo_manifest(64, 48, depth=False)
    microphones = (
        audio_sensor("left", AudioFormat("s16le", 1, 16000), source="/left/audio", layout="AudioStamped"),
        audio_sensor("right", AudioFormat("f32le", 2, 48000), source="/right/audio", layout="AudioStamped"),
    )
    with DatasetWriter(tmp_path / "ds", replace(base, sensors=(*base.sensors, *microphones))) as writer:
        writer.begin_episode("Listen with both ears")
        for step in range(10):
            images = {cam: demo_rgb(n, step, 64, 48) for n, cam in enumerate(("cam_wrist", "cam_overhead"))}
            writer.add_step(step / 30, demo_state(0, step), demo_action(0, step), images)
            left = np.full(160, step, np.int16)
            right = np.full(2 * 480, step / 10, np.float32)
            writer.add_audio("left", left, step / 30, time_ns=step * 33_000_000, receive_ns=0)
            writer.add_audio("right", right, step / 30, time_ns=step * 33_000_000, receive_ns=0)
        writer.end_episode(success=True)
    episode = load_dataset(tmp_path / "ds").episode(0)
    assert episode.record.audio_file == "audio/left/chunk-000/episode_000000.wav"
    left_file, _ = episode.audio_files("left")
    right_file, right_table = episode.audio_files("right")
    assert read_wav(left_file, "s16le").tolist() == [s for s in range(10) for _ in range(160)]
    assert wav_info(right_file).channels == 2 and len(read_wav(right_file, "f32le")) == 10 * 960
    assert pq.read_table(right_table)["timestamp"].to_pylist() == pytest.approx([s / 30 for s in range(10)])
    report = validate(episode.dataset.root, strict=True)
    assert report.ok, "\n".join(f.line() for f in report.findings)
