"""Cameras that publish H.264 (foxglove_msgs CompressedVideo, CompressedImage ``h264``):
converted without decoding them, their packets muxed into the episode's MP4 as published.

"Byte for byte": every MP4 sample holds the NAL units of the packet published for that
frame, each unit's bytes unchanged and in the same order; only the framing differs (MP4's
4-byte lengths for Annex B's start codes). And the video decodes to exactly the frames
the published stream decodes to.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import av
import numpy as np
import pytest

from ortf_ros.cli.bag2ortf import main as bag2ortf
from ortf_ros.cli.ortf import main as ortf
from ortf_ros.dataset import video_input
from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.recover import recover
from ortf_ros.dataset.validation import validate
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import ConversionError
from ortf_ros.format import layout
from ortf_ros.format.accounting import BEFORE_FIRST_KEYFRAME
from ortf_ros.format.sensors import Resolution
from ortf_ros.io.encoder_pool import Prestart
from ortf_ros.io.h264 import (
    PUBLISHED_ENCODING_KEY,
    AnnexBEncoder,
    decode_keyframe,
    length_prefixed_units,
    nal_units,
    packet_facts,
)
from ortf_ros.io.h264_bits import frame_num, sequence_facts
from ortf_ros.io.video import FrameKind
from ortf_ros.pipeline.decode import Decoder
from ortf_ros.pipeline.extract import extract
from ortf_ros.pipeline.mapping import detect_mapping, write_mapping
from ortf_ros.pipeline.offline import register_types
from ortf_ros.pipeline.samples import BadMessage, EncodedFrameSample, ImageSample, RawMessage, Stamps
from ortf_ros.pipeline.sources.bag import BagSource
from ortf_ros.pipeline.streams.h264_camera import (
    COMPRESSED_VIDEO_TYPE,
    EncodedCameraGate,
    ParameterSets,
    encoded_frame,
    is_h264_format,
)
from ortf_ros.synthetic.bag import TeleopBagInfo, write_scene_bag
from ortf_ros.synthetic.dataset import write_demo_dataset
from ortf_ros.synthetic.images import H264_GOP, decode_frame_number, rgb_frame
from ortf_ros.synthetic.scene import H264Message, TeleopConfig
from ortf_ros.synthetic.topics import TOPIC_WRIST_IMAGE

CAMERA = "wrist_camera"
LEAD = 3  # packets before the first keyframe


def published_packets(bag: TeleopBagInfo) -> list[bytes]:
    """The H.264 camera's packets as the recording holds them, decoded with its own definition."""
    topic = bag.config.image_topic(TOPIC_WRIST_IMAGE)
    decoder = Decoder()
    with BagSource(bag.path) as source:
        register_types(source, decoder)
        packets = []
        for raw in source.messages([topic]):
            (sample,) = extract(decoder.decode(raw), raw)
            assert isinstance(sample, EncodedFrameSample)
            packets.append(sample.data)
    return packets


def decoded(packets: list[bytes]) -> list[np.ndarray]:
    context = av.CodecContext.create("h264", "r")
    frames = [f for p in packets for f in context.decode(av.Packet(p))] + list(context.decode(None))
    return [f.to_ndarray(format="rgb24") for f in frames]


@pytest.fixture(scope="module", params=["CompressedVideo", "CompressedImage"])
def converted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[TeleopBagInfo, Path]:
    message: H264Message = request.param
    tmp = tmp_path_factory.mktemp(message)
    config = TeleopConfig(
        "mcap", duration_s=1.0, h264_cameras=(TOPIC_WRIST_IMAGE,), h264_message=message, h264_lead=LEAD
    )
    bag = write_scene_bag(tmp / "bag", config)
    assert bag2ortf([str(bag.path), "-o", str(tmp / "ds")]) == 0
    return bag, tmp / "ds"


def test_the_video_holds_the_published_packets_from_the_first_keyframe(converted: tuple[TeleopBagInfo, Path]) -> None:
    bag, root = converted
    assert validate(root, strict=True).ok
    packets = published_packets(bag)
    assert len(packets) == 30
    assert [packet_facts(p).keyframe for p in packets].index(True) == LEAD
    episode = load_dataset(root).episode(0)
    with av.open(str(episode.video_path(CAMERA))) as container:
        samples = [bytes(p) for p in container.demux(video=0) if p.size]
    kept = packets[LEAD:]
    assert [length_prefixed_units(s) for s in samples] == [nal_units(p) for p in kept]
    stored = [episode.frame(CAMERA, i) for i in range(len(samples))]
    assert all(np.array_equal(a, b) for a, b in zip(stored, decoded(kept), strict=True))
    episode.close()


def test_manifest_accounting_and_steps(converted: tuple[TeleopBagInfo, Path]) -> None:
    _, root = converted
    episode = load_dataset(root).episode(0)
    sensor = episode.dataset.manifest.cameras[CAMERA]
    assert sensor.encoding == "h264" and sensor.extra[PUBLISHED_ENCODING_KEY] == "h264"
    assert sensor.resolution == Resolution(64, 48) and sensor.fps == 30
    (account,) = [a for a in episode.record.accounting or () if a.stream == CAMERA]
    assert account.read == 30 and account.dropped == {BEFORE_FIRST_KEYFRAME: LEAD} and account.losses == 0
    assert account.kept == account.frames_encoded == account.frames_in_video == 30 - LEAD
    # Each step's frame is the one whose stamp is nearest the step time, as for any camera.
    steps = episode.steps(["timestamp", layout.image_column(CAMERA)])
    overhead = episode.steps([layout.image_column("overhead_camera")])[0].to_numpy()
    for index, other in zip(steps[1].to_numpy(), overhead, strict=True):
        seq = decode_frame_number(episode.frame(CAMERA, int(index)))
        assert seq == int(index) + LEAD
        assert abs(seq - decode_frame_number(episode.frame("overhead_camera", int(other)))) <= 1
    episode.close()


def gate_sample(data: bytes, seq: int = 0) -> EncodedFrameSample:
    return EncodedFrameSample("/cam/h264", Stamps(seq * 33_000_000, seq * 33_000_000), "h264", data, packet_facts(data))


def test_b_frames_and_a_resolution_change_are_refused() -> None:
    frames = [rgb_frame(TOPIC_WRIST_IMAGE, i, 64, 48) for i in range(8)]
    packets = AnnexBEncoder(64, 48, bframes=2).encode_all(frames)
    first_b = [packet_facts(p).b_slice for p in packets].index(True)
    gate = EncodedCameraGate({"cam": Resolution(64, 48)})
    assert all(gate.admit("cam", gate_sample(packet, seq)) == packet for seq, packet in enumerate(packets[:first_b]))
    with pytest.raises(ConversionError, match=r"^/cam/h264 at [0-9.]+ s: the H.264 stream has B-frames"):
        gate.admit("cam", gate_sample(packets[first_b], first_b))
    small, large = AnnexBEncoder(64, 48), AnnexBEncoder(96, 48)
    gate = EncodedCameraGate({"cam": Resolution(64, 48)})
    first = small.encode(rgb_frame(TOPIC_WRIST_IMAGE, 0, 64, 48))
    assert gate.admit("cam", gate_sample(first)) == first
    with pytest.raises(ConversionError, match="resolution changed from 64x48 to 96x48 mid-recording"):
        gate.admit("cam", gate_sample(large.encode(rgb_frame(TOPIC_WRIST_IMAGE, 0, 96, 48))))


@pytest.mark.parametrize("lost", ["dropped by the pipeline", "never came"])
def test_after_a_lost_packet_the_next_keyframe_is_waited_for(lost: str) -> None:
    """A packet the pipeline drops (out of order, undecodable) is told to the gate; one that
    never came shows as a gap in ``frame_num``; either way what follows waits for a keyframe."""
    encoder = AnnexBEncoder(64, 48, gop=4)
    packets = [encoder.encode(rgb_frame(TOPIC_WRIST_IMAGE, i, 64, 48)) for i in range(9)]
    gate = EncodedCameraGate({"cam": Resolution(64, 48)})
    refused = []
    for seq, packet in enumerate(packets):
        if seq == 2:
            if lost == "dropped by the pipeline":
                gate.lost("cam")
            continue
        admitted = gate.admit("cam", gate_sample(packet, seq))
        refused.append(None if admitted == packet else admitted)
    # 0 1 | lost 2 | 3 waits | 4 (keyframe) 5 6 7 8
    assert refused == [None, None, "after_lost_packet", None, None, None, None, None]


def split_parameter_sets(packet: bytes) -> tuple[bytes, bytes]:
    """A keyframe as an encoder that sends its SPS and PPS apart gives it: those two, and the rest."""
    units = nal_units(packet)
    kinds = [unit[0] & 0x1F for unit in units]
    sets = b"".join(b"\x00\x00\x00\x01" + u for u, k in zip(units, kinds, strict=True) if k in (7, 8))
    rest = b"".join(b"\x00\x00\x00\x01" + u for u, k in zip(units, kinds, strict=True) if k not in (7, 8))
    return sets, rest


def test_parameter_sets_sent_once_or_alone_start_every_episode_s_video() -> None:
    """An encoder that sends its SPS and PPS once, in a packet of their own: that packet is
    no frame (``no_picture``), and every later IDR frame can start a video, in this episode
    or the next (the gate's parameter sets outlive it), with them in front."""
    encoder = AnnexBEncoder(64, 48, gop=4)
    packets = [encoder.encode(rgb_frame(TOPIC_WRIST_IMAGE, i, 64, 48)) for i in range(9)]
    sets, first = split_parameter_sets(packets[0])
    stripped = [split_parameter_sets(p)[1] if packet_facts(p).idr else p for p in packets[1:]]
    kept: dict[str, ParameterSets] = {}
    gate = EncodedCameraGate({"cam": Resolution(64, 48)}, kept)
    assert gate.admit("cam", gate_sample(sets, 0)) == "no_picture"
    assert gate.admit("cam", gate_sample(first, 0)) == sets + first  # (the video is opened from them)
    assert all(gate.admit("cam", gate_sample(p, seq)) == p for seq, p in enumerate(stripped[:3], start=1))
    assert packet_facts(stripped[3]).idr  # frame 4: an IDR frame without its parameter sets
    next_episode = EncodedCameraGate({"cam": Resolution(64, 48)}, kept)
    assert next_episode.admit("cam", gate_sample(stripped[3], 4)) == sets + stripped[3]
    decoded = decode_keyframe(sets + stripped[3]).rgb
    assert decode_frame_number(decoded) == 4
    assert next_episode.admit("cam", gate_sample(stripped[4], 5)) == stripped[4]


def test_frame_num_counts_the_reference_frames() -> None:
    encoder = AnnexBEncoder(64, 48, gop=4)
    facts = [packet_facts(encoder.encode(rgb_frame(TOPIC_WRIST_IMAGE, i, 64, 48))) for i in range(6)]
    assert facts[0].sps is not None
    sequence = sequence_facts(facts[0].sps)
    assert sequence is not None and not sequence.gaps_allowed
    assert all(f.reference and f.first_slice is not None for f in facts)
    assert [frame_num(f.first_slice or b"", sequence) for f in facts] == [0, 1, 2, 3, 0, 1]


def test_h264_formats() -> None:
    assert is_h264_format("h264") and is_h264_format("H264") and is_h264_format("h264; profile=high")
    assert not is_h264_format("jpeg") and not is_h264_format("h265") and not is_h264_format("rgb8; h264")


@pytest.mark.parametrize("finish", ["end_episode", "ortf recover"])
def test_packets_written_one_by_one_commit_or_recover(tmp_path: Path, finish: str) -> None:
    """The staged MP4 is complete packet by packet: ``ortf recover`` commits what a killed
    writer left as ``end_episode`` would."""
    write_demo_dataset(tmp_path / "demo", steps=2, width=64, height=48)
    manifest = load_dataset(tmp_path / "demo").manifest
    camera = next(name for name, sensor in manifest.cameras.items() if not sensor.is_depth)
    encoder = AnnexBEncoder(64, 48, gop=H264_GOP)
    packets = [encoder.encode(rgb_frame(TOPIC_WRIST_IMAGE, i, 64, 48)) for i in range(12)]
    urdf = (tmp_path / "demo" / layout.URDF).read_text()
    with DatasetWriter(tmp_path / "ds", manifest, urdf=urdf) as writer:
        writer.begin_episode("packets")
        state = {name: np.zeros(part.dim) for name, part in manifest.observation_space.state.items()}
        action = np.zeros(manifest.action_space.dim)
        others = [c for c, s in manifest.cameras.items() if c != camera]
        for step, packet in enumerate(packets):
            assert writer.add_packet(camera, packet, packet_facts(packet).keyframe) == step
            for other in others:
                sensor = manifest.cameras[other]
                shape = (48, 64) if sensor.is_depth else (48, 64, 3)
                writer.add_frame(other, np.zeros(shape, np.uint16 if sensor.is_depth else np.uint8))
            writer.add_step(step / 30, state, action)
        if finish == "end_episode":
            writer.end_episode(success=True)
    if finish == "ortf recover":
        assert [r.action for r in recover(tmp_path / "ds")] == ["recovered"]
    assert validate(tmp_path / "ds", strict=True).ok
    episode: Episode = load_dataset(tmp_path / "ds").episode(0)
    stored = [episode.frame(camera, i) for i in range(12)]
    assert all(np.array_equal(a, b) for a, b in zip(stored, decoded(packets), strict=True))
    episode.close()


def test_no_encoder_process_is_started_for_an_h264_camera(
    converted: tuple[TeleopBagInfo, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, root = converted
    asked: list[tuple[int, int, str]] = []

    def prestart(videos: list[tuple[int, int, FrameKind]], queue_frames: int) -> Prestart:
        asked.extend(videos)
        return Prestart([], queue_frames)

    monkeypatch.setattr(video_input, "Prestart", prestart)
    with DatasetWriter(root) as writer:
        writer.start_encoders()
        cameras = writer.manifest.cameras
    assert len(asked) == len(cameras) - 1 and (64, 48, "depth") in asked


def test_validate_playback_export_show_the_stored_frames(converted: tuple[TeleopBagInfo, Path], tmp_path: Path) -> None:
    """``ortf validate`` passes it, and ``ortf export mcap`` (the player's messages) publishes
    each step's frame of the H.264 camera as an Image holding the frame the video decodes to."""
    _, root = converted
    assert ortf(["validate", "--strict", str(root)]) == 0
    out = tmp_path / "export.mcap"
    assert ortf(["export", "mcap", str(root), str(out)]) == 0
    episode = load_dataset(root).episode(0)
    indices = episode.steps([layout.image_column(CAMERA)])[0].to_numpy()
    decoder = Decoder()
    with BagSource(out) as source:
        register_types(source, decoder)
        images = []
        for raw in source.messages(["/wrist_camera/image_raw"]):
            (sample,) = extract(decoder.decode(raw), raw)
            assert isinstance(sample, ImageSample)
            images.append(sample.pixels)
    assert len(images) == len(indices)
    assert all(np.array_equal(image, episode.frame(CAMERA, int(i))) for image, i in zip(images, indices, strict=True))
    episode.close()


def test_a_packet_that_is_not_annex_b_is_undecodable() -> None:
    raw = RawMessage("/cam/h264", COMPRESSED_VIDEO_TYPE, 5, b"")
    length_prefixed = b"\x00\x00\x00\x05" + bytes([0x65, 1, 2, 3, 4])
    sample = encoded_frame(raw, Stamps(5), length_prefixed)
    assert isinstance(sample, BadMessage)
    assert (
        sample.reason
        == f"/cam/h264 ({COMPRESSED_VIDEO_TYPE}): H.264 data must be Annex B (00 00 01), starts 00 00 00 05"
    )


def test_an_h264_camera_mapped_as_depth_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = TeleopConfig("mcap", duration_s=0.4, h264_cameras=(TOPIC_WRIST_IMAGE,), with_depth=False)
    bag = write_scene_bag(tmp_path / "bag", config)
    with BagSource(bag.path) as source:
        mapping = detect_mapping(source.topics())
    cameras = tuple(replace(c, kind="depth") if c.name == CAMERA else c for c in mapping.cameras)
    write_mapping(replace(mapping, cameras=cameras), tmp_path / "mapping.yaml")
    assert bag2ortf([str(bag.path), "-o", str(tmp_path / "ds"), "--config", str(tmp_path / "mapping.yaml")]) == 1
    error = capsys.readouterr().err.strip()
    assert error.endswith(
        "/wrist_camera/image_raw/h264: camera 'wrist_camera' is mapped as depth but publishes h264 "
        "(lossy, 8-bit colour): map it with kind rgb"
    )
    assert len(error.splitlines()) == 1 and not (tmp_path / "ds").exists()


def test_a_stream_with_b_frames_is_refused_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = TeleopConfig("mcap", duration_s=0.5, h264_cameras=(TOPIC_WRIST_IMAGE,), h264_bframes=True)
    bag = write_scene_bag(tmp_path / "bag", config)
    assert bag2ortf([str(bag.path), "-o", str(tmp_path / "ds")]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "Traceback" not in error
    assert "/wrist_camera/image_raw/h264 at " in error and "the H.264 stream has B-frames (frames reordered)" in error
