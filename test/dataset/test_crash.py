"""A writer SIGKILLed mid-episode or mid-commit leaves a valid dataset, earlier
episodes untouched, and ``ortf recover`` turns what was staged into a valid episode."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import numpy as np
import psutil
import pyarrow.parquet as pq
import pytest

from ortf_ros.cli.ortf import main as ortf
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.recover import RECOVERED_NOTE
from ortf_ros.dataset.validation import validate
from ortf_ros.format import layout
from ortf_ros.io import atomic, parquet_append
from ortf_ros.io.video import VideoReader, finalize, plain_copy
from ortf_ros.synthetic.dataset import write_demo_dataset

CHILD = Path(__file__).resolve().parents[1] / "support" / "crash_child.py"


def committed_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and layout.STAGING_DIR not in p.relative_to(root).parts
    }


def snapshot(root: Path) -> tuple[dict[str, bytes], list[dict[str, object]]]:
    videos = {str(p.relative_to(root)): p.read_bytes() for p in (root / "videos").rglob("*.mp4")}
    rows = pq.read_table(root / layout.steps_path(0)).to_pylist()
    return videos, rows


def run_child_until_killed(root: Path, mode: str, arg: str, kill_after_step: int | None) -> None:
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(root), mode, arg],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    assert child.stdout is not None and child.stdin is not None
    if kill_after_step is not None:
        for line in child.stdout:
            if line.strip() == f"STEP {kill_after_step}":
                child.send_signal(signal.SIGKILL)
                break
            child.stdin.write("\n")  # lock step: the child records its next step only now
            child.stdin.flush()
    assert child.wait(timeout=120) == -signal.SIGKILL


@pytest.fixture
def base(tmp_path: Path) -> tuple[Path, dict[str, bytes], list[dict[str, object]]]:
    root = tmp_path / "ds"
    write_demo_dataset(root, episodes=2, steps=10, width=64, height=48)
    return (root, *snapshot(root))


def assert_earlier_episodes_intact(root: Path, videos: dict[str, bytes], rows: list[dict[str, object]]) -> None:
    now_videos, now_rows = snapshot(root)
    assert all(now_videos[name] == data for name, data in videos.items())
    assert [r for r in now_rows if r["episode_id"] in ("000000", "000001")] == rows


def assert_valid(root: Path, strict: bool) -> None:
    report = validate(root, strict=strict)
    assert report.ok, "\n".join(f.line() for f in report.findings)


@pytest.mark.parametrize("kill_after_step", [0, 7, 39])
def test_kill_mid_episode_then_recover(
    base: tuple[Path, dict[str, bytes], list[dict[str, object]]], kill_after_step: int
) -> None:
    root, videos, rows = base
    before = committed_files(root)
    run_child_until_killed(root, "steps", "100", kill_after_step)
    assert committed_files(root) == before  # nothing committed is touched while recording
    assert_valid(root, strict=False)
    assert len(load_dataset(root)) == 2
    assert_earlier_episodes_intact(root, videos, rows)

    assert ortf(["recover", str(root)]) == 0
    assert_valid(root, strict=True)
    assert_earlier_episodes_intact(root, videos, rows)
    dataset = load_dataset(root)
    if len(dataset) == 2:  # every frame of the few steps was still inside the encoder
        assert kill_after_step < 10
        return
    episode = dataset.episode("000002")
    assert episode.record.success is None
    assert episode.record.operator_notes == RECOVERED_NOTE
    assert 1 <= episode.record.length <= kill_after_step + 1
    assert len(list(episode.step_frames("cam_overhead"))) == episode.record.length
    assert not (root / layout.STAGING_DIR).exists()


def test_kill_mid_episode_then_discard(base: tuple[Path, dict[str, bytes], list[dict[str, object]]]) -> None:
    root, videos, rows = base
    run_child_until_killed(root, "steps", "100", 30)
    assert ortf(["recover", str(root), "--discard"]) == 0
    assert_valid(root, strict=True)
    assert len(load_dataset(root)) == 2
    assert_earlier_episodes_intact(root, videos, rows)
    assert sorted(videos) == sorted(snapshot(root)[0])


def data_before_footer(root: Path) -> bytes:
    """The chunk's step table without its footer: the committed episodes' row groups, which an
    append must leave byte for byte where they are."""
    return (root / layout.steps_path(0)).read_bytes()[: parquet_append.read_tail(root / layout.steps_path(0)).data_end]


@pytest.mark.parametrize("point", ["videos", "journal", "rows", "footer", "chunk", "index"])
def test_kill_inside_commit_then_recover_completes_it(
    base: tuple[Path, dict[str, bytes], list[dict[str, object]]], point: str
) -> None:
    root, videos, rows = base
    committed_rows = data_before_footer(root)
    run_child_until_killed(root, "commit", point, None)
    if point not in ("rows", "footer"):  # killed inside an append, the table is cut back by recover
        assert_valid(root, strict=False)
        assert_earlier_episodes_intact(root, videos, rows)
    assert (root / layout.steps_path(0)).read_bytes().startswith(committed_rows)
    assert ortf(["recover", str(root)]) == 0
    assert data_before_footer(root).startswith(committed_rows)
    assert_earlier_episodes_intact(root, videos, rows)
    assert_valid(root, strict=True)
    episode = load_dataset(root).episode("000002")
    assert (episode.record.success, episode.record.operator_notes, episode.record.length) == (True, "done", 10)
    assert episode.array("step_index").tolist() == list(range(20, 30))
    assert load_dataset(root).manifest.statistics.total_steps == 30
    assert load_dataset(root).stats["action"]["count"] == [30]  # counted once, whatever the kill point


def test_commits_killed_at_random_instants_lose_nothing_earlier(
    base: tuple[Path, dict[str, bytes], list[dict[str, object]]],
) -> None:
    """SIGKILL at instants spread over a commit (seeded, so a failure replays), one episode after
    another: each time every earlier episode keeps its bytes and recovery leaves a valid dataset."""
    root, videos, rows = base
    random = np.random.default_rng(20)
    committed = 2
    for attempt in range(8):
        before = data_before_footer(root)
        earlier = pq.read_table(root / layout.steps_path(0)).to_pylist()
        child = subprocess.Popen(
            [sys.executable, str(CHILD), str(root), "commit", "timed"], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        for line in child.stdout:
            if line.strip() == "COMMITTING":
                break
        time.sleep(float(random.uniform(0.0, 0.25)))
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=60) in (0, -signal.SIGKILL)
        assert (root / layout.steps_path(0)).read_bytes().startswith(before), f"attempt {attempt}"
        assert ortf(["recover", str(root)]) == 0
        assert_valid(root, strict=True)
        assert data_before_footer(root).startswith(before)
        dataset = load_dataset(root)
        assert len(dataset) in (committed, committed + 1)
        committed = len(dataset)
        now = pq.read_table(root / layout.steps_path(0)).to_pylist()
        assert now[: len(earlier)] == earlier
        assert_earlier_episodes_intact(root, videos, rows)
    assert committed > 2  # some commits got through, or recovery rolled them forward


def kill_once_written(script: str, *args: str) -> psutil.Process:
    """Run ``script`` (a StagedVideoWriter's writer) until it says "written", SIGKILL it,
    and return its encoder process, which the kill does not reach."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "written"
    [encoder] = psutil.Process(child.pid).children()
    child.kill()
    assert child.wait(timeout=60) == -signal.SIGKILL
    return encoder


HANDED_OVER = """
import sys
from pathlib import Path

import numpy as np

from ortf_ros.io.staged_video import StagedVideoWriter
from ortf_ros.io.video import VideoSettings

writer = StagedVideoWriter(Path(sys.argv[1]), 64, 48, 30, "rgb", VideoSettings(), camera="cam")
for i in range(int(sys.argv[2])):
    writer.write(np.full((48, 64, 3), 4 * i, np.uint8))
print("written", flush=True)
sys.stdin.readline()
"""


def test_a_killed_writer_loses_no_frame_it_handed_over(tmp_path: Path) -> None:
    """Its encoder process sees the socket close, encodes what it was sent (also the frames
    x264 still held), flushes and closes the fragmented MP4."""
    staged, frames = tmp_path / "cam.mp4", 60
    encoder = kill_once_written(HANDED_OVER, str(staged), str(frames))
    psutil.wait_procs([encoder], timeout=60)
    assert not encoder.is_running()
    assert finalize(staged, tmp_path / "final.mp4") == frames
    with VideoReader(tmp_path / "final.mp4", "rgb") as video:
        assert int(video.read(frames - 1)[24, 32, 0]) == pytest.approx(4 * (frames - 1), abs=3)


KILLED_ENCODER = """
import sys
from pathlib import Path

import numpy as np

from ortf_ros.io.video import StagingEncoder, VideoSettings

encoder = StagingEncoder(Path(sys.argv[1]), 64, 48, 30, "rgb", VideoSettings(preset="ultrafast", threads=1))
for i in range(int(sys.argv[2])):
    encoder.encode(np.full((48, 64, 3), 4 * i, np.uint8))
print("written", flush=True)
sys.stdin.readline()
"""


def test_a_killed_encoders_staged_video_is_remuxed_up_to_its_last_whole_frame(tmp_path: Path) -> None:
    """The encoder itself killed: its plain copy was never closed, so none is left to take,
    and ``finalize`` copies what reached the fragmented file."""
    staged, frames = tmp_path / "cam.mp4", 40
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_ENCODER, str(staged), str(frames)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "written"
    child.kill()
    assert child.wait(timeout=60) == -signal.SIGKILL
    assert atomic.temporary_for(plain_copy(staged)).exists()  # the copy it was writing: never taken
    assert not plain_copy(staged).exists()
    kept = finalize(staged, tmp_path / "final.mp4")
    assert 0 < kept <= frames
    with VideoReader(tmp_path / "final.mp4", "rgb") as video:
        assert int(video.read(kept - 1)[24, 32, 0]) == pytest.approx(4 * (kept - 1), abs=3)


HELD = """
import fcntl
import sys
from pathlib import Path

import numpy as np

from ortf_ros.io.staged_video import StagedVideoWriter
from ortf_ros.io.video import VideoSettings

lock = open(sys.argv[2], "wb")
fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
settings = VideoSettings(preset="slow", threads=1)  # noise at 720p: the frames handed over take a while
writer = StagedVideoWriter(Path(sys.argv[1]), 1280, 720, 30, "rgb", settings, camera="cam", hold=lock.fileno())
noise = np.random.default_rng(0)
for i in range(int(sys.argv[3])):
    writer.write(noise.integers(0, 256, (720, 1280, 3), np.uint8))
print("written", flush=True)
sys.stdin.readline()
"""


def test_a_killed_writers_encoder_holds_its_lock_until_the_video_is_complete(tmp_path: Path) -> None:
    """What a writer hands its encoder process to hold (the dataset's lock) stays held
    after the writer is killed, until the frames it was handed are in the file: recovery
    waits for them instead of taking a video that is still being written."""
    staged, lock, frames = tmp_path / "cam.mp4", tmp_path / "writer.lock", 4
    encoder = kill_once_written(HELD, str(staged), str(lock), str(frames))
    with lock.open("wb") as other:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        deadline = time.monotonic() + 120
        while not _locked(other) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert finalize(staged, tmp_path / "final.mp4") == frames  # every frame, once the lock is free
    psutil.wait_procs([encoder], timeout=60)
    assert not encoder.is_running()


def _locked(handle: IO[bytes]) -> bool:
    """Took the lock on ``handle``'s file (False while another holds it)."""
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
