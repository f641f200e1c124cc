"""``ortf info``: what a dataset holds, at a glance, from metadata and video headers only;
also the recordings its episodes were converted from, and those whose episodes were
deleted, which ``ortf-bag2ortf`` skips (``held_recordings``): what it remembers is shown."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ortf_ros.dataset.held_recordings import HeldRecording, deleted_episodes, held_recordings
from ortf_ros.dataset.reader import Dataset
from ortf_ros.errors import ReaderError
from ortf_ros.format.audio import audio_sensors
from ortf_ros.format.sensors import Sensor
from ortf_ros.io.video import probe


@dataclass(frozen=True)
class CameraInfo:
    key: str
    sensor: str
    type: str
    width: int
    height: int
    fps: float
    codec: str
    pix_fmt: str


@dataclass(frozen=True)
class TaskSummary:
    task_id: int
    instruction: str
    episodes: int


@dataclass(frozen=True)
class RecordingSummary:
    """A recording episodes were converted from: its episodes in the dataset (more than one a
    place once converted again) and its deleted ones (None: an id not remembered)."""

    path: str
    fingerprint: str
    episodes: tuple[str, ...]
    deleted_episodes: tuple[str | None, ...]

    @classmethod
    def of(cls, fingerprint: str, held: HeldRecording) -> RecordingSummary:
        return cls(held.path, fingerprint, tuple(held.ids()), tuple(d.episode_id for d in held.deleted))

    def line(self) -> str:
        """``PATH -> 000001, 000004; deleted: 000002``."""
        deleted = ", ".join(i or "(id not remembered)" for i in self.deleted_episodes)
        said = [", ".join(self.episodes)] if self.episodes else []
        said += [f"deleted: {deleted}"] if deleted else []
        return f"{self.path} -> {'; '.join(said)}"


@dataclass(frozen=True)
class DatasetInfo:
    path: str
    name: str
    robot: str
    episodes: int
    steps: int
    duration_seconds: float
    success: int
    failure: int
    not_evaluated: int
    cameras: tuple[CameraInfo, ...]
    tasks: tuple[TaskSummary, ...]
    microphones: tuple[str, ...] = ()  # one line each: name, rate, channels, sample format, codec
    lidars: tuple[str, ...] = ()  # one line each: name, scan or cloud, rate, samples or channels, source
    recordings: tuple[RecordingSummary, ...] = ()  # those converted into it, and those deleted from it
    unsourced: int = 0  # episodes that name no recording (recorded live, or by another tool)

    @property
    def success_rate(self) -> float | None:
        evaluated = self.success + self.failure
        return self.success / evaluated if evaluated else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "success_rate": self.success_rate}

    def lines(self) -> list[str]:
        rate = "n/a" if self.success_rate is None else f"{self.success_rate:.1%}"
        out = [
            f"dataset   {self.name} ({self.path})",
            f"robot     {self.robot}",
            f"episodes  {self.episodes}",
            f"steps     {self.steps}",
            f"duration  {self.duration_seconds:.1f} s ({self.duration_seconds / 3600:.3f} h)",
            f"success   {rate} ({self.success} succeeded, {self.failure} failed, {self.not_evaluated} not evaluated)",
            "cameras",
        ]
        out += [
            f"  {c.key:<16} {c.type:<13} {c.width}x{c.height} @ {c.fps:g} fps  {c.codec} {c.pix_fmt}"
            for c in self.cameras
        ]
        if self.microphones:
            out += ["microphones", *(f"  {line}" for line in self.microphones)]
        if self.lidars:
            out += ["lidars", *(f"  {line}" for line in self.lidars)]
        out.append("tasks")
        out += [
            f"  [{t.task_id}] {t.instruction}  ({t.episodes} episode{'' if t.episodes == 1 else 's'})"
            for t in self.tasks
        ]
        return out + self._recording_lines()

    def _recording_lines(self) -> list[str]:
        """The recordings, each with its episodes: what ``ortf-bag2ortf`` skips."""
        if not self.recordings:
            return []
        gone = sum(1 for r in self.recordings if not r.episodes)
        out = [
            f"recordings  {len(self.recordings)} converted"
            + (f", {gone} of them with every episode deleted" if gone else "")
            + " (ortf-bag2ortf skips them; --again converts them again)"
        ]
        out += [f"  {r.line()}" for r in self.recordings]
        if self.unsourced:
            out.append(f"  {self.unsourced} other episode(s) name no recording (recorded live, or by another tool)")
        return out


def dataset_info(dataset: Dataset) -> DatasetInfo:
    manifest = dataset.manifest
    cameras = []
    for key, sensor in manifest.cameras.items():
        res = sensor.resolution
        width, height, fps, codec, pix_fmt = (
            (res.width if res else 0),
            (res.height if res else 0),
            sensor.fps or 0.0,
            "?",
            "",
        )
        # Codec and real geometry come from the first episode's video header.
        for record in dataset.episodes[:1]:
            relative = record.video_files.get(key)
            if relative:
                try:
                    video = probe(Path(dataset.root, relative))
                except ReaderError:
                    continue
                width, height, fps, codec, pix_fmt = video.width, video.height, video.fps, video.codec, video.pix_fmt
        cameras.append(CameraInfo(key, sensor.name, sensor.type, width, height, fps, codec, pix_fmt))
    per_task = Counter(e.task_id for e in dataset.episodes)
    tasks = tuple(
        TaskSummary(t.task_id, t.instruction, per_task.get(t.task_id, 0))
        for t in sorted(dataset.tasks.values(), key=lambda t: t.task_id)
    )
    microphones = tuple(
        f"{s.name:<16} {s.extra.get('sample_rate')} Hz, {s.extra.get('channels')} ch, "
        f"{s.extra.get('sample_format')}  {s.extra.get('codec')} ({s.extra.get('source')})"
        for s in audio_sensors(manifest)
    )
    sources = [(e.episode_id, e.source) for e in dataset.episodes if e.source is not None]
    held = held_recordings(sources, deleted_episodes(manifest.extra))
    return DatasetInfo(
        recordings=tuple(RecordingSummary.of(fingerprint, h) for fingerprint, h in held.items()),
        unsourced=len(dataset.episodes) - len(sources),
        microphones=microphones,
        lidars=tuple(_lidar_line(s) for s in manifest.sensors if s.type == "lidar"),
        path=str(dataset.root),
        name=manifest.name,
        robot=manifest.robot.name,
        episodes=len(dataset.episodes),
        steps=dataset.total_steps,
        duration_seconds=sum(e.duration_seconds for e in dataset.episodes),
        success=sum(1 for e in dataset.episodes if e.success is True),
        failure=sum(1 for e in dataset.episodes if e.success is False),
        not_evaluated=sum(1 for e in dataset.episodes if e.success is None),
        cameras=tuple(cameras),
        tasks=tasks,
    )


def _lidar_line(sensor: Sensor) -> str:
    """A lidar as ``ortf info`` lists it: a scanner's scans (samples per scan) or a point
    cloud stream (channels), its rate and its topic."""
    extra = sensor.extra
    if extra.get("format") == "point_cloud":
        what = f"point clouds, {extra.get('channels')} channel(s)"
    else:
        what = f"scans of {extra.get('samples')} ranges" + (" + intensities" if extra.get("intensities") else "")
    rate = extra.get("scan_rate")
    shown = f"{rate:.3g} Hz" if isinstance(rate, (int, float)) else f"{rate} rate"
    return f"{sensor.name:<16} {what} @ {shown} ({extra.get('source')})"
