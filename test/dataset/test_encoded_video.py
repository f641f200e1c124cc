"""``DatasetWriter.add_encoded_video``: an episode's video from already-encoded packets,
committed like a recorded one, frames decoded bit-exactly as the source's; and what it
refuses (another codec or size, a cut that is not at keyframes, frames the file lacks)
before anything is staged."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.dataset.recover import recover
from ortf_ros.dataset.validation import validate
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import VideoRefusedError, WriterError
from ortf_ros.format import layout
from ortf_ros.io.segment import VideoSegment, whole_video
from ortf_ros.synthetic.dataset import write_demo_dataset

STEPS = 12  # ORTF's GOP is 10: keyframes at frames 0 and 10


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Episode:
    root = tmp_path_factory.mktemp("encoded") / "source"
    write_demo_dataset(root, steps=STEPS, width=64, height=48)
    return load_dataset(root).episode(0)


@pytest.mark.parametrize("finish", ["end_episode", "ortf recover"])
def test_copied_videos_commit_and_decode_bit_exactly(source: Episode, tmp_path: Path, finish: str) -> None:
    """Ended, or left staged as a killed writer leaves it and committed by ``ortf recover``."""
    cameras = list(source.dataset.manifest.cameras)
    urdf = (source.dataset.root / layout.URDF).read_text()
    with DatasetWriter(tmp_path / "copy", source.dataset.manifest, urdf=urdf) as writer:
        writer.begin_episode("copy the source's videos")
        for camera in cameras:
            assert writer.add_encoded_video(camera, whole_video(source.video_path(camera))) == STEPS
        state = {
            name: source.array(layout.state_column(name)) for name in source.dataset.manifest.observation_space.state
        }
        for step, action in enumerate(source.array("action")):
            writer.add_step(
                step / 30, {n: v[step] for n, v in state.items()}, action, frames=dict.fromkeys(cameras, step)
            )
        if finish == "end_episode":
            writer.end_episode(success=True)
    if finish == "ortf recover":
        assert [r.action for r in recover(tmp_path / "copy")] == ["recovered"]
    assert validate(tmp_path / "copy", strict=True).ok
    copy = load_dataset(tmp_path / "copy").episode(0)
    for camera in cameras:
        for step, (image, expected) in enumerate(
            zip(copy.step_frames(camera), source.step_frames(camera), strict=True)
        ):
            assert image.dtype == expected.dtype and np.array_equal(image, expected), (camera, step)


def refusal(writer: DatasetWriter, camera: str, segment: VideoSegment) -> str:
    """Why the writer refused to copy ``segment``; it must have staged nothing."""
    with pytest.raises(VideoRefusedError) as refused:
        writer.add_encoded_video(camera, segment)
    assert not list(writer.root.glob(".staging/*/videos/*.mp4"))
    return str(refused.value)


def test_what_cannot_be_copied_is_refused_before_it_is_staged(source: Episode, tmp_path: Path) -> None:
    wrist, depth = source.video_path("cam_wrist"), source.video_path("depth")
    with DatasetWriter(tmp_path / "copy", source.dataset.manifest) as writer:
        writer.begin_episode("refusals")
        problems = {
            "codec": refusal(writer, "cam_wrist", whole_video(depth)),
            "start": refusal(writer, "cam_wrist", VideoSegment(wrist, 1, 9)),
            "end": refusal(writer, "cam_wrist", VideoSegment(wrist, 0, 5)),
            "length": refusal(writer, "cam_wrist", VideoSegment(wrist, 10, 5)),
            "camera": refusal(writer, "nope", whole_video(wrist)),
        }
        assert "is ffv1/gray16le 64x48 at 30 fps" in problems["codec"]
        assert "camera 'cam_wrist' is stored as h264/yuv420p 64x48 at 30 fps" in problems["codec"]
        assert problems["start"].endswith("frames 1..9: frame 1 is not a keyframe")
        assert "the frame after them is not a keyframe" in problems["end"]
        assert problems["length"].endswith("the file holds frames 10..11 of them")
        assert problems["camera"].startswith("unknown camera 'nope'")
        writer.add_encoded_video("cam_wrist", VideoSegment(wrist, 0, 10))
        with pytest.raises(VideoRefusedError, match="camera 'cam_wrist' already has frames"):
            writer.add_encoded_video("cam_wrist", VideoSegment(wrist, 0, 10))
        with pytest.raises(WriterError, match="this episode's video was added encoded; it takes no more frames"):
            writer.add_frame("cam_wrist", np.zeros((48, 64, 3), np.uint8))
        writer.discard_episode()


def test_a_damaged_packet_is_not_copied(source: Episode, tmp_path: Path) -> None:
    """A file cut short keeps its index, and its last packet comes out short (flagged corrupt)."""
    path = source.video_path("cam_wrist")
    with av.open(str(path)) as container:
        last = max(container.demux(container.streams.video[0]), key=lambda packet: packet.pos or -1)
        assert last.pos is not None
        end = last.pos + last.size // 2  # halfway through the last packet in the file (frame 11's)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(path.read_bytes()[:end])
    with DatasetWriter(tmp_path / "copy", source.dataset.manifest) as writer:
        writer.begin_episode("damaged")
        problem = refusal(writer, "cam_wrist", VideoSegment(cut, 10, 2))
        assert problem.endswith("frames 10..11: frame 11 is damaged in the file")
        writer.discard_episode()
