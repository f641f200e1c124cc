"""ORTF -> LeRobot -> ORTF: ``ortf export lerobot`` then ``ortf import lerobot`` gives the
same steps, times, tasks, outcomes and episode boundaries; the result passes ``ortf
validate --strict``. When both legs copy the H.264 packets (ORTF's yuv420p files are
remuxed into the shards at keyframes, and the import cuts them out again) every frame
decodes bit-exactly as the source's; when both re-encode (a yuv444p source, an import
that stores yuv444p) frames stay within 35 dB PSNR. Depth, which the export keeps under
``ortf/depth`` as ORTF's FFV1 files (LeRobot has no lossless depth feature), comes back
byte-identical, with the same step -> frame column. GR00T's flavour (LeRobot v2.0) comes
back the same way."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dataset.test_writer_reader import psnr
from ortf_ros.cli.ortf import main as ortf_main
from ortf_ros.convert import from_lerobot, to_lerobot
from ortf_ros.convert.lerobot_export import REENCODE_SETTINGS
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.reader import Dataset, load_dataset
from ortf_ros.format import layout
from ortf_ros.io.video import VideoSettings, probe
from ortf_ros.synthetic.dataset import write_demo_dataset

STEPS, WIDTH, HEIGHT = 15, 64, 48
COLOUR = ("cam_wrist", "cam_overhead")
VIDEOS = len(COLOUR) * 3
# An import that stores another pixel format than the shards' must re-encode: a third
# generation of loss. On these 64x48 frames the export's re-encode alone leaves >= 38 dB;
# a 4:4:4 re-encode of its 4:2:0 frames takes 3.2 dB more at CRF 18, 1.9 dB at CRF 14.
REENCODING_IMPORT = WriterConfig(video=replace(REENCODE_SETTINGS, pix_fmt="yuv444p", crf=14))
STEP_COLUMNS = ("timestamp", "is_first", "is_last", "is_terminal", "action")


def round_trip(tmp_path: Path, pix_fmt: str, config: WriterConfig) -> tuple[Dataset, Dataset, tuple[int, int]]:
    """(source, imported, (videos the export reused, videos the import reused))."""
    source = tmp_path / "ortf"
    source_config = WriterConfig(video=VideoSettings(pix_fmt=pix_fmt))
    write_demo_dataset(source, episodes=3, steps=STEPS, width=WIDTH, height=HEIGHT, config=source_config)
    exported = to_lerobot(source, tmp_path / "lerobot")
    imported = from_lerobot(tmp_path / "lerobot", tmp_path / "back", config=config)
    assert imported.videos_reused + imported.videos_reencoded == VIDEOS
    return load_dataset(source), load_dataset(tmp_path / "back"), (exported.videos_reused, imported.videos_reused)


@pytest.mark.parametrize(
    ("pix_fmt", "config", "reused", "bit_exact"),
    [("yuv420p", WriterConfig(), (VIDEOS, VIDEOS), True), ("yuv444p", REENCODING_IMPORT, (0, 0), False)],
    ids=["videos-copied", "videos-reencoded"],
)
def test_round_trip_keeps_steps_tasks_outcomes_and_frames(
    tmp_path: Path,
    pix_fmt: str,
    config: WriterConfig,
    reused: tuple[int, int],
    bit_exact: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before, after, videos_reused = round_trip(tmp_path, pix_fmt, config)
    assert videos_reused == reused
    assert [e.length for e in after.episodes] == [e.length for e in before.episodes] == [STEPS] * 3
    assert list(after.manifest.observation_space.state) == list(before.manifest.observation_space.state)
    assert list(after.manifest.cameras) == [*COLOUR, "depth"] == list(before.manifest.cameras)
    # LeRobot has no place for what the action's dimensions are; the kept manifest brings it back.
    assert [(d.type, d.units) for d in after.manifest.action_space.dimensions] == [
        *[("position", "radians")] * 7,
        ("continuous", "normalized"),
    ]
    assert after.manifest.action_space == before.manifest.action_space
    for old, new in zip(before, after, strict=True):
        assert new.task.instruction == old.task.instruction
        assert (new.record.success, new.record.failure_reason) == (old.record.success, old.record.failure_reason)
        for column in STEP_COLUMNS:
            assert np.array_equal(new.array(column), old.array(column)), column
        for component in before.manifest.observation_space.state:
            assert np.array_equal(new.array(layout.state_column(component)), old.array(layout.state_column(component)))
        for camera in COLOUR:
            for step, (image, source) in enumerate(zip(new.step_frames(camera), old.step_frames(camera), strict=True)):
                if bit_exact:
                    assert np.array_equal(image, source), (camera, step)
                else:
                    assert psnr(image, source) >= 35, (camera, step)
        assert new.video_path("depth").read_bytes() == old.video_path("depth").read_bytes()
        assert np.array_equal(new.array(layout.image_column("depth")), old.array(layout.image_column("depth")))
        for image, source in zip(new.step_frames("depth"), old.step_frames("depth"), strict=True):
            assert image.dtype == np.uint16 and np.array_equal(image, source)
    assert ortf_main(["validate", "--strict", str(after.root)]) == 0, capsys.readouterr().out


def test_gr00t_flavour_round_trip_keeps_steps_tasks_outcomes_and_frames(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ORTF -> ``ortf export lerobot --flavor gr00t`` (LeRobot v2.0: a data file and a video
    per camera for each episode, tasks.jsonl, episodes.jsonl, modality.json) -> ``ortf
    import lerobot``: the same episodes, steps, tasks and success (GR00T's validity
    annotation), state split as modality.json says, every episode video copied back
    bit-exact with one frame per step, depth byte-identical, no warning. Failure reasons
    and notes have no place in GR00T's files and do not come back."""
    source, gr00t, back = tmp_path / "ortf", tmp_path / "gr00t", tmp_path / "back"
    write_demo_dataset(source, episodes=3, steps=STEPS, width=WIDTH, height=HEIGHT)
    assert ortf_main(["export", "lerobot", str(source), str(gr00t), "--flavor", "gr00t"]) == 0
    capsys.readouterr()
    assert ortf_main(["import", "lerobot", str(gr00t), str(back)]) == 0
    printed = capsys.readouterr()
    assert f"3 episode(s), {3 * STEPS} steps" in printed.out and f"videos reused {VIDEOS}, re-encoded 0" in printed.out
    assert printed.err == ""
    before, after = load_dataset(source), load_dataset(back)
    assert after.manifest.collection["source_format"] == "lerobot v2.0"
    assert after.manifest.observation_space.state == before.manifest.observation_space.state
    assert after.manifest.action_space == before.manifest.action_space
    assert list(after.manifest.cameras) == [*COLOUR, "depth"] == list(before.manifest.cameras)
    assert [e.record.success for e in after] == [e.record.success for e in before] == [True, True, False]
    for old, new in zip(before, after, strict=True):
        assert (new.task.instruction, new.record.length) == (old.task.instruction, old.record.length)
        for column in STEP_COLUMNS:
            assert np.array_equal(new.array(column), old.array(column)), column
        for component in before.manifest.observation_space.state:
            assert np.array_equal(new.array(layout.state_column(component)), old.array(layout.state_column(component)))
        for camera in COLOUR:
            assert probe(new.video_path(camera)).frames == STEPS
            for step, (image, source_image) in enumerate(
                zip(new.step_frames(camera), old.step_frames(camera), strict=True)
            ):
                assert np.array_equal(image, source_image), (camera, step)
        assert new.video_path("depth").read_bytes() == old.video_path("depth").read_bytes()
        assert np.array_equal(new.array(layout.image_column("depth")), old.array(layout.image_column("depth")))
    assert ortf_main(["validate", "--strict", str(back)]) == 0, capsys.readouterr().out
