"""Camera rules: frozen pictures and the video's own timestamps (one decode of each video),
and the frame times the step table gives a camera (which frame each step saw, when).

A video stores its frames at a constant rate (``ortf_ros.io.video``: pts = frame index),
so its timestamps can only disagree with the declared fps if something rewrote them; the
capture times live in the step table, where a camera's frame index advances as its frames
arrive. Both are evidence of fabricated time, each against the declared fps.

What the video pass finds is about frame indices; the step pass, which comes after it,
puts them on the episode's clock (the time of the first step that saw the frame), so
neither pass keeps a table the length of the episode.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np

from ortf_ros.errors import ReaderError
from ortf_ros.format.sensors import Sensor
from ortf_ros.quality.runs import EpisodeFindings, Run, RunTracker
from ortf_ros.quality.settings import DoctorSettings
from ortf_ros.quality.timing import IntervalChecker, check_rate

TIME_BATCH = 256  # video timestamps checked this many at a time
LOSSLESS_CODECS = ("ffv1",)


@dataclass(frozen=True)
class FrameFinding:
    """A finding about frames ``first``..``last`` of a camera's video, not yet timed."""

    rule: str
    first: int
    last: int
    message: str


class VideoScan:
    """Decodes one camera's video once: runs of frozen frames, and its timestamps."""

    def __init__(self, camera: str, sensor: Sensor, settings: DoctorSettings) -> None:
        self.camera = camera
        self.sensor = sensor
        self.settings = settings
        self.found: list[FrameFinding] = []
        self.untold: Counter[str] = Counter()  # findings beyond max_per_rule: counted only
        self.frames = 0

    def _keep(self, item: FrameFinding) -> None:
        if sum(1 for f in self.found if f.rule == item.rule) < self.settings.max_per_rule:
            self.found.append(item)
        else:
            self.untold[item.rule] += 1

    def scan(self, path: Path) -> None:
        times = IntervalChecker(
            self.camera, self.sensor.fps, self.settings, self._timed, rate_rule="camera.fps_mismatch", what="frames"
        )
        pending: list[float] = []
        anchor: np.ndarray | None = None  # first frame of the current run of equal pictures
        run_start = 0
        try:
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                stream.thread_type = "AUTO"
                exact = stream.codec_context.name in LOSSLESS_CODECS
                for index, frame in enumerate(container.decode(stream)):
                    thumb = self._thumbnail(frame)
                    if anchor is None or not self._same(anchor, thumb, exact):
                        self._end_run(run_start, index - 1)
                        anchor, run_start = thumb, index
                    pending.append(frame.time if frame.time is not None else np.nan)
                    if len(pending) >= TIME_BATCH:
                        times.feed(np.array(pending))
                        pending.clear()
                    self.frames = index + 1
        except (av.error.FFmpegError, OSError, ValueError, IndexError) as exc:
            raise ReaderError(f"{path}: cannot decode the video of camera {self.camera!r}: {exc}") from None
        self._end_run(run_start, self.frames - 1)
        times.feed(np.array(pending))
        times.finish()

    def _thumbnail(self, frame: av.VideoFrame) -> np.ndarray:
        """Every ``thumbnail_stride``-th luma (or depth) sample, as integers."""
        plane = frame.planes[0]
        dtype = np.uint16 if plane.line_size >= 2 * frame.width and frame.format.name.startswith("gray16") else np.uint8
        width = plane.line_size // np.dtype(dtype).itemsize
        pixels: np.ndarray = np.frombuffer(memoryview(plane), dtype).reshape(plane.height, width)
        step = self.settings.thumbnail_stride
        thumb: np.ndarray = pixels[::step, : frame.width : step].astype(np.int32)
        return thumb

    def _same(self, anchor: np.ndarray, thumb: np.ndarray, exact: bool) -> bool:
        if anchor.shape != thumb.shape:
            return False
        difference = np.abs(thumb - anchor)
        if exact:
            return not difference.any()
        return bool(
            difference.max() <= self.settings.frozen_max_difference
            and difference.mean() <= self.settings.frozen_mean_difference
        )

    def _end_run(self, first: int, last: int) -> None:
        frames = last - first + 1
        if frames >= self.settings.frozen_frames:
            self._keep(
                FrameFinding(
                    "camera.frozen", first, last, f"{frames} identical frames in a row (frames {first}..{last})"
                )
            )

    def _timed(self, rule: str, run: Run, message: str) -> None:
        if rule == "camera.fps_mismatch":
            first, last = 0, max(self.frames - 1, 0)
        else:  # an interval's run starts at the frame before its first offending interval
            first, last = max(run.first - 1, 0), run.last
        self._keep(FrameFinding(rule, first, last, f"video timestamps: {message}"))


class StepFrames:
    """One camera's frames as the steps saw them, fed with the step table's batches: the
    times of the frames the video pass found something about, silences (a frame index
    that stops advancing while steps go on) and the frame rate."""

    def __init__(self, camera: str, sensor: Sensor, video: VideoScan | None, settings: DoctorSettings) -> None:
        self.camera = camera
        self.fps = sensor.fps if sensor.fps and sensor.fps > 0 else None
        self.settings = settings
        self.video = video
        wanted = {i for f in video.found for i in (f.first, f.last)} if video is not None else set()
        self._unresolved = sorted(wanted)
        self.times: dict[int, float] = {}
        self._last: tuple[float, int] | None = None  # time and index of the last advance
        self._last_step: float | None = None
        self._first_time: float | None = None
        self._steady = (0.0, 0)  # seconds and frames advanced, gaps left out
        self._every = (0.0, 0)
        self._gaps: list[Run] = []
        self._gap_runs = RunTracker(self._gaps.append)

    def feed(self, times: np.ndarray, indices: np.ndarray) -> None:
        if not len(times):
            return
        self._resolve(times, indices)
        if self._first_time is None:
            self._first_time = float(times[0])
            self._last = (float(times[0]), int(indices[0]))
            self._last_step = float(times[0])
        assert self._last is not None and self._last_step is not None
        step_before = np.concatenate([[self._last_step], times[:-1]])
        index_before = np.concatenate([[self._last[1]], indices[:-1]])
        advanced = np.flatnonzero(indices > index_before)
        self._last_step = float(times[-1])
        if not len(advanced):
            self._gap_runs.feed(np.zeros(0, bool), np.zeros(0), np.zeros(0))
            return
        at = times[advanced]
        since = np.concatenate([[self._last[0]], at[:-1]])
        elapsed = at - since
        frames = (indices[advanced] - np.concatenate([[self._last[1]], indices[advanced][:-1]])).astype(np.float64)
        self._last = (float(at[-1]), int(indices[advanced][-1]))
        per_frame = elapsed / frames
        # A silence of the steps themselves is the steps' gap, not the camera's.
        steps_silent = (times[advanced] - step_before[advanced]) >= 0.5 * elapsed
        gap = np.zeros(len(advanced), bool)
        if self.fps is not None:
            gap = (per_frame > self.settings.gap_s(1 / self.fps)) & ~steps_silent
        self._gap_runs.feed(gap, since, at, elapsed)
        forward = elapsed > 0
        steady = forward & ~gap & ~(steps_silent & (elapsed > self.settings.gap_s(1 / (self.fps or 1.0))))
        self._steady = (self._steady[0] + float(elapsed[steady].sum()), self._steady[1] + int(frames[steady].sum()))
        self._every = (self._every[0] + float(elapsed[forward].sum()), self._every[1] + int(frames[forward].sum()))

    def _resolve(self, times: np.ndarray, indices: np.ndarray) -> None:
        while self._unresolved:
            wanted = self._unresolved[0]
            reached = np.flatnonzero(indices >= wanted)
            if not len(reached):
                return
            self.times[wanted] = float(times[reached[0]])
            self._unresolved.pop(0)

    def time_of(self, frame: int) -> float | None:
        """The time of the first step that saw ``frame`` (or, past the last step's frame, that
        step's time plus the frames after it at the declared fps)."""
        if frame in self.times:
            return self.times[frame]
        if self._last is None:
            return None
        return self._last[0] + (frame - self._last[1]) / (self.fps or 1.0)

    def finish(self, report: EpisodeFindings) -> None:
        self._gap_runs.finish()
        if self.fps is not None and self._last is not None and self._last_step is not None:
            silent = self._last_step - self._last[0]  # no new frame until the last step
            if silent > self.settings.gap_s(1 / self.fps):
                self._gaps.append(Run(0, 0, self._last[0], self._last_step, 1, silent))
        period_ms = 1000 / self.fps if self.fps else 0.0
        for run in self._gaps:
            report.add(
                "stream.gap",
                self.camera,
                run.start_s,
                run.end_s,
                f"no new frame for {run.worst:.3f} s while steps went on ({run.worst * (self.fps or 0):.1f} "
                f"periods of {period_ms:.2f} ms; more than {self.settings.gap_periods:g} and "
                f"{self.settings.min_gap_s:g} s is a gap)",
            )
        if self.fps is not None and self._first_time is not None and self._last is not None:
            check_rate(
                "camera.fps_mismatch",
                "frame times in the step table: a new frame",
                self.fps,
                self._steady,
                self._every,
                (self._first_time, self._last[0]),
                self.settings,
                lambda rule, run, message: report.add(rule, self.camera, run.start_s, run.end_s, message),
            )
        if self.video is not None:
            for item in self.video.found:
                report.add(item.rule, self.camera, self.time_of(item.first), self.time_of(item.last), item.message)
            for rule, count in self.video.untold.items():
                for _ in range(count):
                    report.add(rule, self.camera, None, None, "")
