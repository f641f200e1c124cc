"""``ortf doctor``: a clean dataset has no findings, and each defect, put into real files
(written with the defect by ``DatasetWriter``, or a written file rewritten with pyarrow /
PyAV), is flagged with its rule, stream and time range."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ortf_ros.cli.ortf import main as ortf_main
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.format import layout
from ortf_ros.format.accounting import QUEUE_FULL, StreamAccount
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.native_streams import Alignment, NativeStream
from ortf_ros.format.spaces import StateComponent
from ortf_ros.quality.doctor import DoctorSettings, examine
from ortf_ros.quality.findings import QualityFinding
from ortf_ros.synthetic.demo_arm import (
    JOINTS,
    LIMIT,
    RGB_CAMERAS,
    demo_action,
    demo_manifest,
    demo_rgb,
    demo_state,
    demo_urdf,
)

FPS = 30
STEPS = 90  # 3 s
JOINT_HZ = 100
W, H = 64, 48
WRIST, OVERHEAD = RGB_CAMERAS  # observation keys


@dataclass(frozen=True)
class Defects:
    """What the writer is given wrong (all off: the clean dataset)."""

    frozen: tuple[int, int] | None = None  # steps whose wrist frame repeats the first one's
    camera_silent: tuple[int, int] | None = None  # steps given no overhead frame
    joint_silent: tuple[float, float] | None = None  # no joint samples in [a, b) s
    beyond_limit: tuple[float, float] | None = None  # joint 3 at LIMIT + 0.2 in [a, b) s
    jump_at: float | None = None  # one joint-2 sample 0.5 rad off at this time
    late_steps: tuple[int, int] | None = None  # alignment 30 ms (tolerance 16.7) for these steps
    steps: int = STEPS
    success: bool | None = True
    steps_follow_joints: bool = False  # the steps' joint positions are the joint samples' (as a converter makes them)


def manifest(tolerance: tuple[float, float] | None = None) -> Manifest:
    """The demo arm's (sync tolerance half the step period); ``tolerance``: the dataset's
    and the joint states' own instead."""
    base = demo_manifest(W, H, FPS, depth=False)
    joints = NativeStream(columns={"position": StateComponent(len(JOINTS), "radians", names=JOINTS)}, rate_hz=JOINT_HZ)
    alignment = Alignment(("joint_states",))
    if tolerance is not None:
        base = replace(base, sync_tolerance_ms=tolerance[0])
        alignment = replace(alignment, tolerance_ms={"joint_states": tolerance[1]})
    return replace(base, native_streams={"joint_states": joints}, alignment=alignment)


def joint_position(t: float, defects: Defects) -> np.ndarray:
    position: np.ndarray = np.sin(t + np.arange(len(JOINTS)) * 0.7)
    if defects.beyond_limit and defects.beyond_limit[0] <= t < defects.beyond_limit[1]:
        position[3] = LIMIT + 0.2
    if defects.jump_at is not None and abs(t - defects.jump_at) < 1e-6:
        position[2] += 0.5
    return position


def write(root: Path, defects: Defects = Defects(), tolerance: tuple[float, float] | None = None) -> Path:
    with DatasetWriter(root, manifest(tolerance), urdf=demo_urdf()) as writer:
        writer.begin_episode("Pick up the red box")
        sample = 0  # next joint sample, at sample / JOINT_HZ
        last_sample = None
        for step in range(defects.steps):
            t = step / FPS
            while sample / JOINT_HZ <= t + 1e-9:
                ts = sample / JOINT_HZ
                silent = defects.joint_silent and defects.joint_silent[0] <= ts < defects.joint_silent[1]
                if not silent:
                    last_sample = writer.add_sample("joint_states", ts, {"position": joint_position(ts, defects)})
                sample += 1
            images = {}
            frozen = defects.frozen and defects.frozen[0] <= step <= defects.frozen[1]
            images[WRIST] = demo_rgb(0, defects.frozen[0] if frozen and defects.frozen else step, W, H)
            if not (defects.camera_silent and defects.camera_silent[0] <= step <= defects.camera_silent[1]):
                images[OVERHEAD] = demo_rgb(1, step, W, H)
            late = defects.late_steps and defects.late_steps[0] <= step <= defects.late_steps[1]
            state = demo_state(0, step, FPS)
            if defects.steps_follow_joints:
                state["joint_positions"] = joint_position(t, defects).astype(np.float32)
            writer.add_step(
                t,
                state,
                demo_action(0, step, FPS),
                images,
                samples={"joint_states": last_sample} if last_sample is not None else None,
                alignment_ms={"joint_states": 30.0 if late else 0.0} if last_sample is not None else None,
            )
        writer.end_episode(success=defects.success)
    return root


def doctor(root: Path) -> list[QualityFinding]:
    return list(examine(load_dataset(root)))


def only(findings: list[QualityFinding], rule: str) -> list[QualityFinding]:
    return [f for f in findings if f.rule == rule]


def assert_found(findings: list[QualityFinding], rule: str, stream: str | None, start: float, end: float) -> None:
    matching = [f for f in findings if f.rule == rule and f.stream == stream]
    assert matching, f"no {rule} on {stream}: {[f.line() for f in findings]}"
    item = matching[0]
    assert item.start_s == pytest.approx(start, abs=0.04), item.line()
    assert item.end_s == pytest.approx(end, abs=0.04), item.line()


def ortf_doctor(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ortf_ros.cli.ortf", "doctor", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("doctor") / "clean")


def copy_of(clean: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(clean, tmp_path / "copy"))


def rewrite_steps(root: Path, change: Callable[[dict[str, list[object]]], None]) -> None:
    """Rewrite the chunk's step table with pyarrow, its columns changed by ``change``."""
    path = root / "data/chunk-000/steps.parquet"
    table = pq.read_table(path)
    columns = table.to_pydict()
    change(columns)
    pq.write_table(pa.Table.from_pydict(columns, schema=table.schema), path)


def test_clean_dataset_has_no_findings(clean: Path) -> None:
    assert doctor(clean) == []
    run = subprocess.run(
        [sys.executable, "-m", "ortf_ros.cli.ortf", "doctor", str(clean)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "clean: 1 episode(s), 0 finding(s): 0 error(s), 0 warning(s), 0 info(s) (--fail-on error)"
    ]


def test_frozen_frames(tmp_path: Path) -> None:
    found = doctor(write(tmp_path / "d", Defects(frozen=(30, 59))))
    assert {f.rule for f in found} == {"camera.frozen"}, [f.line() for f in found]
    assert_found(found, "camera.frozen", WRIST, 1.0, 59 / FPS)
    assert found[0].message.split()[0] in ("29", "30")  # the first frozen frame may still be converging (H.264)


def test_silent_camera_and_native_stream(tmp_path: Path) -> None:
    found = doctor(write(tmp_path / "d", Defects(camera_silent=(40, 59), joint_silent=(0.5, 1.0))))
    assert {f.rule for f in found} == {"stream.gap"}, [f.line() for f in found]
    assert_found(found, "stream.gap", OVERHEAD, 39 / FPS, 60 / FPS)
    assert_found(found, "stream.gap", "joint_states", 0.49, 1.0)


def test_streams_silent_until_the_end(tmp_path: Path) -> None:
    found = doctor(write(tmp_path / "d", Defects(camera_silent=(70, STEPS), joint_silent=(2.5, 9.0))))
    assert {f.rule for f in found} == {"stream.gap"}, [f.line() for f in found]
    assert_found(found, "stream.gap", OVERHEAD, 69 / FPS, (STEPS - 1) / FPS)
    assert_found(found, "stream.gap", "joint_states", 2.49, (STEPS - 1) / FPS)


def test_joint_beyond_its_limit_and_over_speed(tmp_path: Path) -> None:
    found = doctor(write(tmp_path / "d", Defects(beyond_limit=(2.0, 2.1), jump_at=1.5)))
    assert {f.rule for f in found} == {"robot.position_limit", "robot.velocity_limit"}, [f.line() for f in found]
    limit = only(found, "robot.position_limit")
    assert len(limit) == 1 and "demo_joint4" in limit[0].message
    assert_found(found, "robot.position_limit", "joint_states", 2.0, 2.09)
    speed = only(found, "robot.velocity_limit")
    assert {f.message.split()[1] for f in speed} == {"demo_joint3", "demo_joint4"}  # the jump, and into the limit
    assert all("velocity limit 2.1/s" in f.message for f in speed)  # the URDF's <limit velocity>
    assert_found(found, "robot.velocity_limit", "joint_states", 1.49, 1.51)


def test_an_excursion_in_steps_and_native_stream_alike_is_one_finding(tmp_path: Path) -> None:
    """A converter's steps take their joint positions from the native stream: the excursion is
    judged there, once, not again in the step table."""
    found = doctor(write(tmp_path / "d", Defects(beyond_limit=(2.0, 2.1), steps_follow_joints=True)))
    limit = only(found, "robot.position_limit")
    assert len(limit) == 1, [f.line() for f in found]
    assert_found(found, "robot.position_limit", "joint_states", 2.0, 2.09)


def test_alignment_beyond_tolerance(tmp_path: Path) -> None:
    found = doctor(write(tmp_path / "d", Defects(late_steps=(50, 54))))
    assert {f.rule for f in found} == {"steps.alignment"}, [f.line() for f in found]
    assert_found(found, "steps.alignment", "joint_states", 50 / FPS, 54 / FPS)
    assert found[0].message.startswith("5 step(s)")


@pytest.mark.parametrize(("tolerance", "flagged"), [((62.5, 20.0), True), ((62.5, 40.0), False)])
def test_alignment_is_judged_by_the_streams_own_tolerance(
    tmp_path: Path, tolerance: tuple[float, float], flagged: bool
) -> None:
    """30 ms steps: beyond the joint states' own 20 ms, though within the dataset's 62.5 (a
    looser stream's, the loosest); within their own 40 ms."""
    found = doctor(write(tmp_path / "d", Defects(late_steps=(50, 54)), tolerance))
    if not flagged:
        assert found == [], [f.line() for f in found]
        return
    assert_found(found, "steps.alignment", "joint_states", 50 / FPS, 54 / FPS)
    assert found[0].message.endswith("more than its sync tolerance 20 ms")


def short_unlabelled_then_clean(root: Path) -> Path:
    """Episode 000000 short and unlabelled, then a clean labelled one appended."""
    write(root, Defects(steps=12, success=None))
    return write(root)


def test_short_and_unlabelled_episode(tmp_path: Path) -> None:
    found = doctor(short_unlabelled_then_clean(tmp_path / "d"))
    assert {f.rule for f in found} == {"episode.too_short", "episode.unlabelled"}, [f.line() for f in found]
    assert {f.episode_id for f in found} == {"000000"}
    assert_found(found, "episode.too_short", None, 0.0, 11 / FPS)
    assert only(found, "episode.unlabelled")[0].start_s is None


def test_a_dataset_nobody_labelled_is_said_once_not_per_episode(tmp_path: Path) -> None:
    root = write(tmp_path / "d", Defects(success=None))
    assert doctor(root) == []
    result = ortf_doctor(str(root))
    assert result.returncode == 0 and result.stdout.startswith("clean: 1 episode(s), 0 finding(s)")
    assert "no episode has an outcome label (1 unlabelled)" in result.stderr


def test_drops_and_late_messages_the_episode_counted(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    table = pq.read_table(root / layout.EPISODES)
    rows = table.to_pylist()
    extra = StreamAccount("wrist_cam_stream", "camera", topic="/wrist/image_raw", read=90, kept=87, late=4)
    extra = replace(extra, undecodable=1, dropped={QUEUE_FULL: 2})
    rows[0]["accounting"] = [*rows[0]["accounting"], extra.to_dict()]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), root / layout.EPISODES)
    found = doctor(root)
    assert [(f.rule, f.stream) for f in found] == [("episode.drops", "wrist_cam_stream")], [f.line() for f in found]
    assert found[0].message.startswith("2 dropped (queue full), 1 undecodable, 4 late of 90 read")


def test_non_finite_values(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)

    def poison(columns: dict[str, list[object]]) -> None:
        action = columns["action"]
        for row, bad in ((20, float("nan")), (21, float("inf"))):
            values = action[row]
            assert isinstance(values, list)
            action[row] = [bad, *values[1:]]

    rewrite_steps(root, poison)
    found = doctor(root)
    assert {f.rule for f in found} == {"value.non_finite"}, [f.line() for f in found]
    assert_found(found, "value.non_finite", "action", 20 / FPS, 21 / FPS)


def test_non_monotonic_and_duplicated_step_times(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)

    def shuffle(columns: dict[str, list[object]]) -> None:
        times = columns["timestamp"]
        times[30], times[31] = times[31], times[30]
        times[60] = times[59]

    rewrite_steps(root, shuffle)
    found = doctor(root)
    assert {f.rule for f in found} == {"time.non_monotonic", "time.duplicate"}, [f.line() for f in found]
    assert_found(found, "time.non_monotonic", "steps", 31 / FPS, 30 / FPS)
    assert_found(found, "time.duplicate", "steps", 59 / FPS, 59 / FPS)


def test_stretched_step_times(clean: Path, tmp_path: Path) -> None:
    """The fabricated-time case: step stamps 2x apart; the video and the joints' own stamps as recorded."""
    root = copy_of(clean, tmp_path)
    rewrite_steps(root, lambda columns: columns.update(timestamp=[2 * float(t) for t in columns["timestamp"]]))  # type: ignore[arg-type]
    found = doctor(root)
    rules = {(f.rule, f.stream) for f in found}
    assert ("time.rate_mismatch", "steps") in rules
    assert {("camera.fps_mismatch", WRIST), ("camera.fps_mismatch", OVERHEAD)} <= rules
    assert all("2.00x" in f.message for f in found if f.rule.endswith("mismatch")), [f.line() for f in found]


def test_stretched_video_timestamps(clean: Path, tmp_path: Path) -> None:
    """The video's timestamps rewritten 2x apart (its packets copied, not re-encoded)."""
    root = copy_of(clean, tmp_path)
    video = root / load_dataset(root).episode(0).record.video_files[WRIST]  # type: ignore[operator]
    stretched = video.with_suffix(".tmp.mp4")
    with av.open(str(video)) as source, av.open(str(stretched), "w", format="mp4") as target:
        stream = target.add_stream_from_template(source.streams.video[0])
        for packet in source.demux(source.streams.video[0]):
            if packet.dts is None:
                continue
            assert packet.pts is not None
            packet.pts, packet.dts = packet.pts * 2, packet.dts * 2
            packet.stream = stream
            target.mux(packet)
    stretched.replace(video)
    found = doctor(root)
    assert [(f.rule, f.stream) for f in found] == [("camera.fps_mismatch", WRIST)], [f.line() for f in found]
    assert found[0].message.startswith("video timestamps:") and "2.00x" in found[0].message


def test_cli_exit_codes_json_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``ortf doctor`` through the console script's own entry (one real subprocess for the
    exit code as the shell sees it; the rest in this process, through the same boundary)."""
    root = short_unlabelled_then_clean(tmp_path / "d")  # two warnings, no error

    def doctor_cli(*args: str) -> tuple[int, str, str]:
        try:
            code = ortf_main(["doctor", *args])
        except SystemExit as exc:  # the argument parser's usage errors
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    plain = ortf_doctor(str(root))
    assert plain.returncode == 0, plain.stderr
    lines = plain.stdout.splitlines()
    assert len(lines) == 3 and lines[-1].startswith("passed: 2 episode(s), 2 finding(s): 0 error(s), 2 warning(s)")
    assert doctor_cli(str(root), "--fail-on", "warning")[0] == 1
    assert doctor_cli(str(root), "--min-duration", "0.1", "--fail-on", "warning")[0] == 1  # still unlabelled
    code, out, _ = doctor_cli(str(root), "--json", "--episode", "000000")
    document = json.loads(out)
    assert code == 0 and document["ok"] is True and document["episodes"] == 1
    assert document["totals"] == {
        "findings": 2,
        "error": 0,
        "warning": 2,
        "info": 0,
        "by_rule": {"episode.too_short": 1, "episode.unlabelled": 1},
    }
    assert set(document["findings"][0]) == {"rule", "severity", "episode_id", "stream", "start_s", "end_s", "message"}
    for args, needle in (
        ((str(tmp_path / "missing"),), "no such file or directory"),
        ((str(root), "--episode", "000009"), "no episode with id '000009'"),
        ((str(root), "--gap-periods", "0"), "--gap-periods: expected a number from 1"),
        ((str(root), "--fail-on", "info"), "--fail-on: invalid choice"),
    ):
        code, out, err = doctor_cli(*args)
        assert code == 2 and out == "", (args, out)
        assert len(err.splitlines()) == 1 and needle in err, err


def test_settings_are_bounded() -> None:
    with pytest.raises(Exception, match="frozen_frames"):
        DoctorSettings(frozen_frames=1)


def test_findings_beyond_max_per_rule_are_counted(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)

    def poison(columns: dict[str, list[object]]) -> None:
        for row in (10, 30, 50):  # three separate runs
            values = columns["observation.state.joint_positions"][row]
            assert isinstance(values, list)
            columns["observation.state.joint_positions"][row] = [float("nan"), *values[1:]]

    rewrite_steps(root, poison)
    dataset = load_dataset(root)
    found = list(examine(dataset, ["000000"], DoctorSettings(max_per_rule=1)))
    assert [f.rule for f in found] == ["doctor.truncated", "value.non_finite"], [f.line() for f in found]
    assert found[0].severity == "info" and found[0].message.startswith("2 more value.non_finite")
    assert_found(found, "value.non_finite", "observation.state.joint_positions", 10 / FPS, 10 / FPS)


def test_a_video_that_does_not_decode_is_a_finding_and_the_rest_is_still_examined(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    episode = load_dataset(root).episode(0)
    episode.video_path(WRIST).write_bytes(b"not a video")
    episode.video_path(OVERHEAD).unlink()
    result = ortf_doctor(str(root), "--json")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    document = json.loads(result.stdout)
    unreadable = {f["stream"]: f for f in document["findings"] if f["rule"] == "camera.unreadable"}
    assert sorted(unreadable) == sorted([WRIST, OVERHEAD]), document
    assert all(f["severity"] == "error" and f["episode_id"] == "000000" for f in unreadable.values())
    assert "cannot decode the video" in unreadable[WRIST]["message"]
    assert unreadable[OVERHEAD]["message"].endswith(": missing")
    assert str(root) not in unreadable[WRIST]["message"]  # the dataset-relative path
    assert not document.get("stopped")
