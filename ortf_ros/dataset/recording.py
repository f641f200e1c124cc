"""The episode a ``DatasetWriter`` has open: its staging directory, its step and sample logs
and its cameras' video writers, and the order they are flushed and closed in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from ortf_ros.dataset.audio_files import AudioFile, staged_audio
from ortf_ros.dataset.logs import SampleLog, StepLog, StepRows
from ortf_ros.dataset.point_clouds import CloudLog
from ortf_ros.dataset.staging import EpisodeHeader, StagedEpisode
from ortf_ros.errors import WriterError
from ortf_ros.format import point_clouds
from ortf_ros.format.audio import audio_codec, audio_sensors, sensor_format
from ortf_ros.format.manifest import Manifest
from ortf_ros.format.point_clouds import NON_FINITE_KEY
from ortf_ros.format.schema import step_schema, stream_schema
from ortf_ros.io.packet_video import StagedPacketVideo
from ortf_ros.io.staged_video import StagedVideoWriter


@dataclass(frozen=True)
class CopiedVideo:
    """A camera whose episode video was staged from encoded packets (``add_encoded_video``)."""

    frames_written: int

    def close(self) -> None:
        """Nothing to flush: the packets were on disk when the call returned."""

    def abandon(self) -> None:
        """Nothing runs for it."""


class Recording:
    """The episode in progress: its staging directory, step log and video encoders."""

    def __init__(self, staged: StagedEpisode, header: EpisodeHeader, manifest: Manifest) -> None:
        self.staged = staged
        self.header = header
        self.schema = step_schema(manifest)
        self.rows = StepRows(manifest, self.schema, header.episode_id)
        self.steps = 0
        self.origin: float | None = None
        self.last_timestamp = -np.inf
        self.videos: dict[str, StagedVideoWriter | CopiedVideo | StagedPacketVideo] = {}
        self.step_log = StepLog(staged.steps_file, self.schema)
        self.stream_logs: dict[str, SampleLog] = {}
        # A file per microphone from the start: an episode has each one's, empty if it was silent.
        self.audio = {
            s.name: AudioFile(staged_audio(staged.directory, s.name), sensor_format(s), audio_codec(s))
            for s in audio_sensors(manifest)
        }
        self.cloud_logs: dict[str, CloudLog] = {}

    def clock(self, first: float) -> float:
        """The episode's time origin: the timestamp of its first step or sample (``first``, if
        nothing came before it)."""
        if self.origin is None:
            self.origin = first
            for audio in self.audio.values():
                audio.set_origin(first)  # (its chunks' times count from it too)
        return self.origin

    def relative(self, timestamp: float) -> float:
        """Seconds since the episode's first step or sample, whichever came first."""
        return timestamp - self.clock(timestamp)

    def stream_log(self, manifest: Manifest, stream: str) -> SampleLog:
        log = self.stream_logs.get(stream)
        if log is None:
            spec = manifest.native_streams.get(stream)
            if spec is None:
                raise WriterError(f"unknown stream {stream!r}; the manifest declares {sorted(manifest.native_streams)}")
            dims = {name: component.dim for name, component in spec.columns.items()}
            log = self.stream_logs[stream] = SampleLog(
                self.staged.stream_file(stream), stream, stream_schema(manifest, stream), dims, self.header.episode_id
            )
            log.finite_only = NON_FINITE_KEY not in spec.extra
        return log

    def cloud_log(self, manifest: Manifest, name: str) -> CloudLog:
        log = self.cloud_logs.get(name)
        if log is None:
            declared = point_clouds.declarations(manifest)
            if name not in declared:
                raise WriterError(f"unknown point cloud {name!r}; the manifest declares {sorted(declared)}")
            log = self.cloud_logs[name] = CloudLog(
                self.staged.cloud_file(name), name, declared[name], self.header.episode_id
            )
        return log

    def append_steps(self, last: bool = False) -> None:
        """Append the steps that wait, after the native samples they may point at. If that
        fails (WriterError), they still wait, and go with the next append (unless this is
        the ``last``, as the episode's files close)."""
        batch = self.rows.batch()
        if batch is None:
            return
        try:
            for log in self.stream_logs.values():
                log.flush()
            self.step_log.append(batch)
        except WriterError as exc:
            if last:
                raise WriterError(f"{exc} (the last {len(self.rows)} steps are not in the staging log)") from None
            raise WriterError(
                f"{exc} (the step was recorded; {len(self.rows)} steps wait for the next append, "
                "with the next step or when the episode ends)"
            ) from None
        self.rows.clear()

    def close_files(self) -> None:
        """Append what waits and close every file, each one even after another failed (every
        encoder process is waited for, whatever failed); the first failure is raised. An
        exception of another kind (an interrupt) is raised at once: the videos not closed
        yet are abandoned, their encoder processes finish them on their own."""
        failures: list[WriterError] = []

        def attempt(close: Callable[[], None]) -> None:
            try:
                close()
            except WriterError as exc:
                failures.append(exc)

        try:
            attempt(lambda: self.append_steps(last=True))
            attempt(self.step_log.close)
            for log in self.stream_logs.values():
                attempt(log.close)
            for audio in self.audio.values():
                attempt(partial(audio.finish, self.origin or 0.0))  # (its chunk table, on the steps' clock)
            for cloud_log in self.cloud_logs.values():
                attempt(cloud_log.close)
        finally:
            videos = list(self.videos.values())
            for number, writer in enumerate(videos):
                try:
                    attempt(writer.close)
                except BaseException:
                    for rest in videos[number + 1 :]:
                        rest.abandon()
                    raise
        if failures:
            raise failures[0]
