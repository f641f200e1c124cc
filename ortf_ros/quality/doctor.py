"""``examine``: the doctor's one pass over each file of an episode, rules fed as it goes.

Per episode: the outcome; each camera's video decoded once (frozen frames, its
timestamps); the step table a row group at a time (step times and rate, NaN, alignment
errors, joint positions, each camera's frame times, which also put the video's findings
on the episode clock); each native-rate stream a row group at a time (its times and rate,
NaN, joint positions and speed); then the duration. Memory: a row group, a frame and two
thumbnails per camera, and the findings (at most ``max_per_rule`` per rule and stream).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow.compute as pc

from ortf_ros.dataset.reader import Dataset, Episode, column_array
from ortf_ros.errors import ReaderError
from ortf_ros.format import layout
from ortf_ros.format.point_clouds import NON_FINITE_KEY
from ortf_ros.format.schema import vector_columns
from ortf_ros.quality.cameras import StepFrames, VideoScan
from ortf_ros.quality.episode import check_drops, check_duration, check_outcome
from ortf_ros.quality.findings import QualityFinding
from ortf_ros.quality.joints import JointChecker, JointLimits, joint_limits, position_joints
from ortf_ros.quality.runs import EpisodeFindings, Run, RunTracker
from ortf_ros.quality.settings import DoctorSettings
from ortf_ros.quality.timing import IntervalChecker, Report
from ortf_ros.quality.values import NonFiniteChecker

__all__ = ["DoctorSettings", "examine"]


DEFAULT_SETTINGS = DoctorSettings()


def examine(
    dataset: Dataset, episode_ids: Sequence[str] | None = None, settings: DoctorSettings = DEFAULT_SETTINGS
) -> Iterator[QualityFinding]:
    """The findings of each episode (all of them, or ``episode_ids`` in that order), an
    episode's in time order. An unknown id raises ``UnknownEpisodeError`` before anything
    is examined."""
    ids = [e.episode_id for e in dataset.episodes] if episode_ids is None else list(episode_ids)
    for episode_id in ids:
        dataset.episode(episode_id)  # unknown ids fail first
    limits = joint_limits(dataset.root, dataset.manifest)
    labelled = any(e.success is not None for e in dataset.episodes)
    for episode_id in ids:
        with dataset.episode(episode_id) as episode:
            yield from _examine_episode(episode, limits, settings, labelled)


def _examine_episode(
    episode: Episode, limits: JointLimits, settings: DoctorSettings, dataset_labelled: bool
) -> list[QualityFinding]:
    report = EpisodeFindings(episode.episode_id, settings.max_per_rule)
    check_outcome(episode.record, report, dataset_labelled=dataset_labelled)
    check_drops(episode.record, report)
    videos = _scan_videos(episode, settings, report)
    covered = _native_joints(episode)
    span = _step_pass(episode, videos, limits, covered, settings, report)
    for stream in episode.dataset.manifest.native_streams:
        _stream_pass(episode, stream, span, limits, settings, report)
    check_duration(*span, settings, report)
    return report.findings()


def _direct(report: EpisodeFindings, stream: str) -> Report:
    """Runs whose times are already on the episode clock (steps, native samples)."""
    return lambda rule, run, message: report.add(rule, stream, run.start_s, run.end_s, message)


def _scan_videos(episode: Episode, settings: DoctorSettings, report: EpisodeFindings) -> dict[str, VideoScan | None]:
    """Each camera's video decoded once; None for a camera whose video is not looked at
    (``.npz`` depth) or cannot be read (a ``camera.unreadable`` finding: the other cameras,
    tables and episodes are still examined)."""
    videos: dict[str, VideoScan | None] = {}
    for camera, sensor in episode.dataset.manifest.cameras.items():
        path = episode.video_path(camera)
        if path.suffix == ".npz":  # a depth stack loads whole: not within the doctor's memory bound
            videos[camera] = None
            continue
        videos[camera] = None  # (until it is read through: a video that is not is a finding)
        where = path.relative_to(episode.dataset.root)
        if not path.is_file():
            report.add("camera.unreadable", camera, None, None, f"{where}: missing")
            continue
        scan = VideoScan(camera, sensor, settings)
        try:
            scan.scan(path)
        except ReaderError as exc:
            report.add("camera.unreadable", camera, None, None, str(exc).replace(str(path), str(where)))
            continue
        videos[camera] = scan
    return videos


def _native_joints(episode: Episode) -> set[str]:
    """Joints whose positions a native-rate stream holds: their limits are judged there."""
    manifest = episode.dataset.manifest
    joints: set[str] = set()
    for stream in manifest.native_streams.values():
        for column, component in stream.columns.items():
            joints.update(position_joints(column, component, manifest) or ())
    return joints


def _step_pass(
    episode: Episode,
    videos: dict[str, VideoScan | None],
    limits: JointLimits,
    covered: set[str],
    settings: DoctorSettings,
    report: EpisodeFindings,
) -> tuple[float | None, float | None]:
    """The step table, a row group at a time; returns the first and last step time."""
    manifest = episode.dataset.manifest
    vectors = list(vector_columns(manifest))
    cameras = {camera: layout.image_column(camera) for camera in manifest.cameras}
    aligned = {s: layout.alignment_column(s) for s in (manifest.alignment.streams if manifest.alignment else ())}
    steps_rate = manifest.action_space.control_frequency_hz
    times = IntervalChecker("steps", steps_rate, settings, _direct(report, "steps"), what="steps")
    non_finite = {c: NonFiniteChecker(c, c, report) for c in ["timestamp", *vectors, *aligned.values()]}
    frames = {c: StepFrames(c, manifest.cameras[c], videos.get(c), settings) for c in cameras}
    tolerance = {s: manifest.stream_tolerance_ms(s) for s in aligned}  # (each stream's own, else the dataset's)
    alignment = {s: _alignment_runs(s, tolerance[s], report) for s in aligned}
    # A joint a native stream holds is judged there, where every sample is: the steps' values of
    # it come from those samples, and would report the same excursion a second time.
    step_limits = JointLimits(
        {j: b for j, b in limits.positions.items() if j not in covered},
        {j: v for j, v in limits.velocities.items() if j not in covered},
    )
    joints: dict[str, JointChecker] = {}
    for name, component in manifest.observation_space.state.items():
        names = position_joints(name, component, manifest)
        if names is not None:
            step_checker = JointChecker(name, names, step_limits, settings, report, speed=True, declared_hz=steps_rate)
            if step_checker:
                joints[layout.state_column(name)] = step_checker
    first: float | None = None
    last: float | None = None
    for batch in episode.step_batches(["timestamp", *vectors, *cameras.values(), *aligned.values()]):
        t = batch.column("timestamp").to_numpy(zero_copy_only=False)
        if not len(t):
            continue
        first = float(t[0]) if first is None else first
        last = float(t[-1])
        times.feed(t)
        non_finite["timestamp"].feed(t, t)
        for column in vectors:
            values = column_array(batch.column(column))
            non_finite[column].feed(t, values)
            if column in joints:
                joints[column].feed(t, values)
        for stream, column in aligned.items():
            errors = pc.fill_null(batch.column(column), 0.0).to_numpy(zero_copy_only=False).astype(np.float64)
            non_finite[column].feed(t, errors)
            tracker = alignment[stream]
            if tracker is not None:
                tracker.feed(errors > (tolerance[stream] or np.inf), t, t, errors)
        for camera, column in cameras.items():
            frames[camera].feed(t, batch.column(column).to_numpy(zero_copy_only=False))
    times.finish()
    for values_checker in non_finite.values():
        values_checker.finish()
    for joint_checker in joints.values():
        joint_checker.finish()
    for tracker in alignment.values():
        if tracker is not None:
            tracker.finish()
    for camera_frames in frames.values():
        camera_frames.finish(report)
    return first, last


def _alignment_runs(stream: str, tolerance_ms: float | None, report: EpisodeFindings) -> RunTracker | None:
    if tolerance_ms is None:
        return None

    def on_run(run: Run) -> None:
        report.add(
            "steps.alignment",
            stream,
            run.start_s,
            run.end_s,
            f"{run.rows} step(s) used a sample {run.worst:.2f} ms or less from the step time, more than its "
            f"sync tolerance {tolerance_ms:g} ms",
        )

    return RunTracker(on_run)


def _stream_pass(
    episode: Episode,
    stream: str,
    span: tuple[float | None, float | None],
    limits: JointLimits,
    settings: DoctorSettings,
    report: EpisodeFindings,
) -> None:
    """One native-rate stream, a row group at a time; ``span``: the first and last step time."""
    manifest = episode.dataset.manifest
    declared = manifest.native_streams[stream]
    if not (episode.dataset.root / episode.stream_file(stream)).is_file():
        return  # no samples of it in this episode: the step table says so, validate checks the rest
    times = IntervalChecker(stream, declared.rate_hz, settings, _direct(report, stream))
    columns = list(declared.columns)
    # (a stream that declares non-finite values meaningful, a laser scan's ranges: its timestamps only)
    finite = ["timestamp", *columns] if NON_FINITE_KEY not in declared.extra else ["timestamp"]
    non_finite = {c: NonFiniteChecker(stream, c, report) for c in finite}
    joints: dict[str, JointChecker] = {}
    for column, component in declared.columns.items():
        names = position_joints(column, component, manifest)
        if names is not None:
            checker = JointChecker(stream, names, limits, settings, report, speed=True, declared_hz=declared.rate_hz)
            if checker:
                joints[column] = checker
    for batch in episode.stream_batches(stream, ["timestamp", *columns]):
        t = batch.column("timestamp").to_numpy(zero_copy_only=False)
        times.feed(t)
        non_finite["timestamp"].feed(t, t)
        for column in columns:
            values: np.ndarray = column_array(batch.column(column))
            if column in non_finite:
                non_finite[column].feed(t, values)
            if column in joints:
                joints[column].feed(t, values)
    times.finish()
    times.check_edges(*span)
    for values_checker in non_finite.values():
        values_checker.finish()
    for joint_checker in joints.values():
        joint_checker.finish()
