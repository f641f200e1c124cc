"""The writer when its files cannot be written (a full disk, a file-size limit), made to
fail for real: one WriterError naming the file or camera, nothing half-kept, and the
episode still discardable or recoverable."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from dataset.test_native_streams import manifest as stream_manifest
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.recover import recover
from ortf_ros.dataset.staging import lock_dataset
from ortf_ros.dataset.validation import validate
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import WriterError
from ortf_ros.format import layout
from ortf_ros.synthetic.dataset import write_demo_dataset
from ortf_ros.synthetic.demo_arm import (
    DEPTH_CAMERA,
    RGB_CAMERAS,
    demo_action,
    demo_depth,
    demo_manifest,
    demo_rgb,
    demo_state,
)
from support.fsize_child import BEFORE, FAILING, HZ, STEP_BATCH, STEPS, STREAM, expected_force

CHILD = Path(__file__).resolve().parents[1] / "support" / "fsize_child.py"
WIDTH, HEIGHT = 64, 48


def run_capped(*args: str) -> str:
    """Run a scenario of fsize_child; what it printed (the WriterError it met)."""
    child = subprocess.run(
        [sys.executable, str(CHILD), *args], capture_output=True, text=True, env=dict(os.environ), timeout=300
    )
    assert child.returncode == 0, child.stderr
    return child.stdout.strip()


def committed_files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and layout.STAGING_DIR not in p.parts}


def test_a_video_copy_that_cannot_be_written_is_one_writer_error_and_leaves_no_file(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_demo_dataset(root, episodes=1, steps=12, width=WIDTH, height=HEIGHT)
    video = load_dataset(root).episode(0).video_path("depth")
    assert video.stat().st_size > 4096
    error = run_capped("stage", str(root), "depth", "4096")
    staged = root / layout.STAGING_DIR / layout.episode_file_stem(1)
    target = staged / "videos" / "depth.mp4"
    assert re.fullmatch(
        rf"WriterError: {re.escape(str(target))}: staging frames 0..11 of {re.escape(str(video))} failed: "
        r"OSError: \[Errno 27\] File too large.*",
        error,
    ), error
    assert staged.is_dir() and not target.exists()


def test_samples_whose_batch_cannot_be_written_are_not_kept(tmp_path: Path) -> None:
    """The call fails as a whole: the batch of it that did reach the log is taken off again,
    so adding the same samples once more gives every sample once, in order."""
    root = tmp_path / "ds"
    with DatasetWriter(root, stream_manifest()):
        pass
    error = run_capped("samples", str(root))
    log = root / layout.STAGING_DIR / layout.episode_file_stem(0) / "streams" / f"{STREAM}.arrows"
    assert error.startswith(
        f"stream {STREAM!r}: {FAILING} samples not recorded, none of them kept ({BEFORE} recorded before them): "
        f"{log}: cannot append to the staging log: OSError: [Errno 27] File too large"
    ), error
    samples = load_dataset(root).episode(0).stream(STREAM)
    total = BEFORE + FAILING
    assert samples["sample_index"].to_pylist() == list(range(total))
    assert samples["stamp_ns"].to_pylist() == list(range(total))
    np.testing.assert_allclose(samples["timestamp"].to_numpy(), np.arange(total) / HZ)
    force = samples["force"].combine_chunks().flatten().to_numpy().reshape(-1, 3)
    np.testing.assert_array_equal(force, expected_force(0, total).astype(np.float32))


def test_steps_whose_batch_cannot_be_written_wait_for_the_next_append(tmp_path: Path) -> None:
    """A failed append of a batch of steps is an error that says they wait: the episode
    then holds every step, once, in order."""
    root = tmp_path / "ds"
    with DatasetWriter(root, demo_manifest(WIDTH, HEIGHT)):
        pass
    error = run_capped("steps", str(root))
    log = root / layout.STAGING_DIR / layout.episode_file_stem(0) / "steps.arrows"
    assert error == (
        f"{log}: cannot append to the staging log: OSError: [Errno 27] File too large "
        f"(the step was recorded; {STEP_BATCH} steps wait for the next append, with the next step or when the "
        "episode ends)"
    ), error
    episode = load_dataset(root).episode(0)
    assert episode.array("step_index").tolist() == list(range(STEPS))
    np.testing.assert_allclose(episode.array("timestamp"), np.arange(STEPS) / 30, atol=1e-6)
    np.testing.assert_array_equal(episode.array("action"), np.stack([demo_action(0, s) for s in range(STEPS)]))


def encoder_writing(path: Path) -> psutil.Process:
    """The encoder process that has ``path`` open."""
    [encoder] = [
        child
        for child in psutil.Process().children()
        if any(Path(f.path) == path.resolve() for f in child.open_files())
    ]
    return encoder


def cap_encoder_file(path: Path) -> int:
    """The encoder process writing ``path`` may not grow it any more, as on a full quota:
    its next write fails with EFBIG. Returns the process's pid."""
    encoder = encoder_writing(path)
    _, hard = resource.prlimit(encoder.pid, resource.RLIMIT_FSIZE)
    resource.prlimit(encoder.pid, resource.RLIMIT_FSIZE, (path.stat().st_size, hard))
    return int(encoder.pid)


def add_steps(writer: DatasetWriter, steps: range, width: int = WIDTH) -> None:
    for step in steps:
        add_step(writer, step, width)


def add_step(writer: DatasetWriter, step: int, width: int = WIDTH) -> None:
    images = {camera: demo_rgb(n, step, width, HEIGHT) for n, camera in enumerate(RGB_CAMERAS)}
    images[DEPTH_CAMERA[0]] = demo_depth(step, width, HEIGHT)
    writer.add_step(step / 30, demo_state(1, step), demo_action(1, step), images)


@pytest.mark.parametrize("finish", ["discard_episode", "ortf recover"])
def test_after_an_encoder_failure_every_call_raises_it(tmp_path: Path, finish: str) -> None:
    """A caller that catches the failure and ends the episode all the same does not get it
    committed by the frames that exist; it can discard it, or leave it to ``ortf recover``."""
    root = tmp_path / "ds"
    write_demo_dataset(root, episodes=1, steps=5, width=WIDTH, height=HEIGHT)
    before = committed_files(root)
    failure = r"camera 'cam_wrist': encoding into .*cam_wrist\.mp4 failed: .*File too large"
    recorded = 40
    with DatasetWriter(root) as writer:
        writer.begin_episode("pick")
        add_steps(writer, range(recorded))
        encoder = cap_encoder_file(root / layout.STAGING_DIR / layout.episode_file_stem(1) / "videos" / "cam_wrist.mp4")
        with pytest.raises(WriterError, match=failure):  # by a later add_step, once the encoder met it
            add_steps(writer, range(recorded, recorded + 200))
        with pytest.raises(WriterError, match=failure):
            add_step(writer, recorded + 200)
        with pytest.raises(WriterError, match=failure):
            writer.end_episode(success=True)
        assert not psutil.pid_exists(encoder)  # the failed encoder process is not kept for reuse
        if finish == "discard_episode":
            writer.discard_episode()
        else:
            with pytest.raises(WriterError, match=failure):
                writer.close()  # the episode stays staged
    if finish == "discard_episode":
        assert committed_files(root) == before and not (root / layout.STAGING_DIR).exists()
        return
    [result] = recover(root)
    assert result.action == "recovered" and 0 < result.steps <= recorded  # the steps whose frames reached the disk
    assert validate(root).ok and len(load_dataset(root)) == 2


@pytest.mark.parametrize("next_call", ["add_step", "end_episode"])
def test_an_encoder_process_that_dies_is_a_writer_error_naming_how(tmp_path: Path, next_call: str) -> None:
    """Killed by the OOM killer, say: the episode is not taken for complete (also when the
    next call ends it), and the frames the encoder had written stay recoverable."""
    root = tmp_path / "ds"
    write_demo_dataset(root, episodes=1, steps=5, width=WIDTH, height=HEIGHT)
    failure = r"camera 'cam_wrist': encoding into .*cam_wrist\.mp4 failed: the encoder process was killed by SIGKILL"
    with DatasetWriter(root) as writer:
        writer.begin_episode("pick")
        add_steps(writer, range(40))
        encoder = encoder_writing(root / layout.STAGING_DIR / layout.episode_file_stem(1) / "videos" / "cam_wrist.mp4")
        encoder.kill()
        while encoder.status() != psutil.STATUS_ZOMBIE:  # dead; the writer reaps it (psutil's wait would)
            time.sleep(0.01)
        if next_call == "add_step":
            with pytest.raises(WriterError, match=failure):
                add_steps(writer, range(40, 240))
        with pytest.raises(WriterError, match=failure):
            writer.end_episode(success=True)
        with pytest.raises(WriterError, match=failure):
            writer.close()
    [result] = recover(root)
    assert result.action == "recovered" and 0 < result.steps <= 40
    assert validate(root).ok and len(load_dataset(root)) == 2


def test_an_interrupted_close_leaves_the_other_videos_to_finish_and_the_dataset_unlocked(tmp_path: Path) -> None:
    """Ctrl-C while the first camera's video closes: the others are not waited for, but
    their encoder processes finish them and let go of the dataset's lock, and the episode
    is recovered whole."""
    root = tmp_path / "ds"
    writer = DatasetWriter(root, demo_manifest(WIDTH, HEIGHT)).open()
    writer.begin_episode("pick")
    add_steps(writer, range(12))
    recording = writer._recording
    assert recording is not None
    first = recording.videos["cam_wrist"]
    close = first.close

    def interrupted() -> None:
        close()
        raise KeyboardInterrupt

    first.close = interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        writer.close()
    lock_dataset(root, wait_s=10).close()  # (waits for the other encoder processes)
    [result] = recover(root)
    assert (result.action, result.steps) == ("recovered", 12)
    episode = load_dataset(root).episode(0)
    for camera in (*RGB_CAMERAS, DEPTH_CAMERA[0]):
        assert len(list(episode.step_frames(camera))) == 12, camera


def test_a_discard_waits_for_encoder_processes_let_go_of_before_it_removes_the_directory(tmp_path: Path) -> None:
    """An interrupted discard lets the encoder processes go. One that has not opened its
    video yet opens it by path: had the next discard removed the directory without
    waiting, the process would make it again, and leave an episode directory without a
    header (which ``ortf recover`` cannot read), or write beside the video of the next
    episode made at the same path."""
    root = tmp_path / "ds"
    writer = DatasetWriter(root, demo_manifest(WIDTH + 2, HEIGHT)).open()  # a size of its own: new processes
    writer.begin_episode("pick")
    add_steps(writer, range(3), width=WIDTH + 2)
    recording = writer._recording
    assert recording is not None
    processes = [video._process.process for video in recording.videos.values()]  # type: ignore[union-attr]

    def continue_them() -> None:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)

    for process in processes:  # still starting Python: none has opened its video
        os.kill(process.pid, signal.SIGSTOP)
    resume = threading.Timer(0.5, continue_them)
    try:
        assert not (recording.staged.directory / "videos").exists()
        first = next(iter(recording.videos.values()))
        close = first.close

        def interrupted() -> None:
            first.abandon()  # what close does when interrupted: the process finishes on its own
            first.close = close  # type: ignore[method-assign]
            raise KeyboardInterrupt

        first.close = interrupted  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            writer.discard_episode()
        resume.start()
        writer.discard_episode()  # again, and the directory goes
        assert all(process.poll() is not None for process in processes)
        assert not recording.staged.directory.exists()
    finally:
        resume.cancel()
        continue_them()
    writer.begin_episode("place")
    add_steps(writer, range(5), width=WIDTH + 2)
    writer.end_episode(success=True)
    writer.close()
    episode = load_dataset(root).episode(0)
    for camera in (*RGB_CAMERAS, DEPTH_CAMERA[0]):
        assert len(list(episode.step_frames(camera))) == 5, camera
    assert validate(root, strict=True).ok
