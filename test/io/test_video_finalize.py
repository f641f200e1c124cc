"""How a staged episode video becomes the committed one: the encoder muxes its packets
into a plain MP4 beside the fragmented staging file, and ``finalize`` moves that copy into
place when a clean close left it; otherwise it remuxes the staging file. Both ways give
the same frames."""

from __future__ import annotations

import shutil
from pathlib import Path

import av
import numpy as np
import pytest
from av.video.reformatter import ColorRange

from ortf_ros.io import atomic
from ortf_ros.io.staged_video import StagedVideoWriter
from ortf_ros.io.video import (
    COLOUR_MATRIX,
    StagingEncoder,
    VideoReader,
    VideoSettings,
    finalize,
    plain_copy,
    probe,
)

WIDTH, HEIGHT = 64, 48


def frame(index: int) -> np.ndarray:
    """A frame that tells its index apart from its neighbours' after lossy coding."""
    image = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    image[:, :, 0] = (index * 7) % 256
    image[: HEIGHT // 2, : 4 + index % 40] = 255
    return image


def timeline(path: Path) -> tuple[object, ...]:
    """The stream's start and every packet's (pts, dts) in seconds: what a reader seeks by."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        base = float(stream.time_base or 0)
        packets = [
            (p.pts * base, p.dts * base) for p in container.demux(stream) if p.pts is not None and p.dts is not None
        ]
        return (stream.start_time or 0) * base, tuple(packets)


@pytest.mark.parametrize("preset", ["ultrafast", "veryfast"])  # veryfast: B-frames, so dts runs behind pts
def test_a_cleanly_closed_video_is_moved_into_place_and_matches_a_remux(tmp_path: Path, preset: str) -> None:
    staged, frames = tmp_path / "cam.mp4", 45
    writer = StagedVideoWriter(staged, WIDTH, HEIGHT, 30, "rgb", VideoSettings(preset=preset), camera="cam")
    for index in range(frames):
        writer.write(frame(index))
    writer.close()
    assert plain_copy(staged).is_file()
    remuxable = tmp_path / "copy.mp4"  # the same staged file without a plain copy beside it
    shutil.copyfile(staged, remuxable)

    assert finalize(staged, tmp_path / "moved.mp4") == frames
    assert not plain_copy(staged).exists()
    assert staged.is_file()  # kept until the commit ends: a rolled-forward commit remuxes it
    assert finalize(remuxable, tmp_path / "remuxed.mp4") == frames
    assert probe(tmp_path / "moved.mp4") == probe(tmp_path / "remuxed.mp4")
    assert timeline(tmp_path / "moved.mp4") == timeline(tmp_path / "remuxed.mp4")  # frame i at i/fps in both
    with (
        VideoReader(tmp_path / "moved.mp4", "rgb") as moved,
        VideoReader(tmp_path / "remuxed.mp4", "rgb") as remuxed,
    ):
        for index in [*range(frames), 30, 2, frames - 1, 0]:  # in order, then seeking
            image = moved.read(index)
            np.testing.assert_array_equal(image, remuxed.read(index))
            assert int(image[HEIGHT - 4, WIDTH // 2, 0]) == pytest.approx((index * 7) % 256, abs=4)


def test_a_video_that_is_not_closed_cleanly_leaves_no_plain_copy(tmp_path: Path) -> None:
    """Nor does an earlier video's copy at the same path survive: ``finalize`` would take it
    for this one's."""
    staged = tmp_path / "cam.mp4"
    plain_copy(staged).write_bytes(b"an earlier video's copy")
    encoder = StagingEncoder(staged, WIDTH, HEIGHT, 30, "rgb", VideoSettings(preset="ultrafast", threads=1))
    assert not plain_copy(staged).exists()
    for index in range(20):
        encoder.encode(frame(index))
    encoder.abandon()  # as after a failure
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cam.mp4"]  # no copy, no temporary one
    kept = finalize(staged, tmp_path / "final.mp4")  # the staged file's packets, remuxed
    assert 0 < kept <= 20
    assert probe(tmp_path / "final.mp4").frames == kept


def test_a_video_without_frames_gives_no_file(tmp_path: Path) -> None:
    staged = tmp_path / "cam.mp4"
    StagingEncoder(staged, WIDTH, HEIGHT, 30, "rgb", VideoSettings(threads=1)).close()
    assert not plain_copy(staged).exists()
    assert not atomic.temporary_for(plain_copy(staged)).exists()
    assert finalize(staged, tmp_path / "final.mp4") == 0
    assert not (tmp_path / "final.mp4").exists()


def test_an_encoder_finishing_after_its_directory_was_made_anew_leaves_the_new_video_alone(tmp_path: Path) -> None:
    """An encoder process let go of (an interrupted close) finishes on its own, maybe after
    its episode was discarded and the staging directory made anew for the next episode:
    its plain copy stays in the removed directory, and the next video's is its own."""
    staged = tmp_path / "episode" / "videos" / "cam.mp4"
    settings = VideoSettings(preset="ultrafast", threads=1)
    old = StagingEncoder(staged, WIDTH, HEIGHT, 30, "rgb", settings)
    for index in range(10):
        old.encode(frame(index))
    shutil.rmtree(tmp_path / "episode")
    new = StagingEncoder(staged, WIDTH, HEIGHT, 30, "rgb", settings)
    for index in range(5):
        new.encode(frame(index))
    with pytest.raises(FileNotFoundError):  # its copy went with the removed directory
        old.close()
    assert not plain_copy(staged).exists()
    new.close()
    assert finalize(staged, tmp_path / "final.mp4") == 5


def test_the_plain_copy_takes_no_name_of_another_cameras_video(tmp_path: Path) -> None:
    other = tmp_path / "cam.plain.mp4"  # camera "cam.plain"'s staged video
    other.write_bytes(b"another camera's video")
    encoder = StagingEncoder(tmp_path / "cam.mp4", WIDTH, HEIGHT, 30, "rgb", VideoSettings(threads=1))
    encoder.encode(frame(0))
    encoder.close()
    assert other.read_bytes() == b"another camera's video"
    assert finalize(tmp_path / "cam.mp4", tmp_path / "final.mp4") == 1


def test_colour_videos_are_tagged_with_how_their_colours_were_converted(tmp_path: Path) -> None:
    """BT.601, limited range, as io.colour converts: a player must not guess BT.709 for an HD camera."""
    staged = tmp_path / "cam.mp4"
    encoder = StagingEncoder(staged, WIDTH, HEIGHT, 30, "rgb", VideoSettings(preset="ultrafast", threads=1))
    encoder.encode(frame(0))
    encoder.close()
    shutil.copy(staged, tmp_path / "killed.mp4")  # as if the encoder had been killed: no plain copy
    finalize(staged, tmp_path / "moved.mp4")
    finalize(tmp_path / "killed.mp4", tmp_path / "remuxed.mp4")
    for path in (staged, tmp_path / "moved.mp4", tmp_path / "remuxed.mp4"):
        with av.open(str(path)) as container:
            decoded = next(container.decode(video=0))
        assert (decoded.colorspace, decoded.color_range) == (COLOUR_MATRIX, ColorRange.MPEG), path.name
