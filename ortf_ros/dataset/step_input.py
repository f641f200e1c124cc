"""A ``DatasetWriter``'s steps: each checked whole (timestamp order, the action's and
state's sizes, the frames and native samples it points at, the alignment columns) before
it is kept, then batched into the staging step log."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike

from ortf_ros.dataset.recording import Recording
from ortf_ros.dataset.video_input import VideoInput
from ortf_ros.dataset.writer_core import check_keys
from ortf_ros.errors import WriterError


class StepInput(VideoInput):
    """Steps of the episode in progress (with the frames a step may bring: ``VideoInput``)."""

    def add_step(
        self,
        timestamp: float,
        state: Mapping[str, ArrayLike],
        action: ArrayLike,
        images: Mapping[str, np.ndarray] | None = None,
        *,
        samples: Mapping[str, int] | None = None,
        alignment_ms: Mapping[str, float] | None = None,
        frames: Mapping[str, int] | None = None,
    ) -> None:
        """Record one step.

        ``timestamp`` is in seconds on any clock (stored relative to the episode's first
        step or sample). ``images`` are new frames for this step; each camera uses its
        newest frame unless ``frames`` names another (the one nearest the step time,
        say). ``samples`` names, per native-rate stream, the sample this step used;
        ``alignment_ms`` how far from the step time each aligned stream's sample was.
        Everything is checked before anything is written: a step refused (WriterError)
        is not recorded. Once checked, the step is recorded, and steps go to the staging
        log ``step_batch`` at a time; when that append fails (a full disk), the WriterError
        says so and the steps stay held for the next append: record the next step, not
        this one again.
        """
        recording = self.recording
        rows = recording.rows
        timestamp = float(timestamp)
        if not np.isfinite(timestamp) or timestamp <= recording.last_timestamp:
            raise WriterError(
                f"step {recording.steps}: timestamp {timestamp} must be finite and after the previous step's "
                f"({recording.last_timestamp})"
            )
        vectors = np.empty(rows.width, np.float32)
        _fill_vector(vectors, rows.action, "action", action)
        if state.keys() != rows.state.keys():
            check_keys(f"step {recording.steps} state", "state component", state, rows.state)
        for name, part in rows.state.items():
            _fill_vector(vectors, part, f"state {name}", state[name])
        sample_indices, alignment = self._stream_columns(recording, samples or {}, alignment_ms or {})
        checked = {camera: self._checked_image(camera, image) for camera, image in (images or {}).items()}
        for camera, image in checked.items():
            self.add_frame(camera, image)
        frames = frames or {}
        if not frames.keys() <= rows.camera_set:
            check_keys(f"step {recording.steps} frames", "camera", frames, rows.cameras, partial=True)
        frame_indices = []
        for camera in rows.cameras:
            writer = recording.videos.get(camera)
            written = writer.frames_written if writer is not None else 0
            index = frames.get(camera, written - 1)
            if not 0 <= index < written:
                raise WriterError(f"step {recording.steps}: camera {camera!r} has no frame {index} ({written} written)")
            frame_indices.append(index)
        rows.add(recording.steps, recording.relative(timestamp), vectors, frame_indices, sample_indices, alignment)
        recording.steps += 1
        recording.last_timestamp = timestamp
        if len(rows) >= self.config.step_batch:
            recording.append_steps()

    def _stream_columns(
        self, recording: Recording, samples: Mapping[str, int], alignment_ms: Mapping[str, float]
    ) -> tuple[list[int | None], list[float | None]]:
        """Per native stream the sample index (None: none used), per aligned stream the error in ms."""
        rows = recording.rows
        if not samples.keys() <= rows.stream_set:
            check_keys(f"step {recording.steps} samples", "stream", samples, rows.streams, partial=True)
        if not alignment_ms.keys() <= rows.aligned_set:
            check_keys(f"step {recording.steps} alignment_ms", "stream", alignment_ms, rows.aligned, partial=True)
        indices: list[int | None] = []
        for stream in rows.streams:
            index = samples.get(stream)
            if index is not None:
                log = recording.stream_logs.get(stream)
                recorded = log.count if log is not None else 0
                if log is None or not 0 <= index < log.count:
                    raise WriterError(
                        f"step {recording.steps}: stream {stream!r} has no sample {index} ({recorded} recorded)"
                    )
            indices.append(index)
        errors: list[float | None] = []
        for stream in rows.aligned:
            error = alignment_ms.get(stream)
            if error is not None and not (math.isfinite(error) and error >= 0):
                raise WriterError(f"step {recording.steps}: alignment of {stream!r} must be >= 0 ms, got {error}")
            errors.append(error)
        return indices, errors


def _fill_vector(buffer: np.ndarray, part: slice, what: str, value: ArrayLike) -> None:
    """Check ``value`` (size, real, finite) and store it in ``buffer[part]`` as float32."""
    dim = part.stop - part.start
    array = np.asarray(value, dtype=np.float64) if not isinstance(value, np.ndarray) else value
    if array.shape != (dim,):
        raise WriterError(f"{what}: expected {dim} values, got shape {array.shape}")
    if array.dtype.kind not in "iuf":  # dtype.kind: cheap on the per-step path
        raise WriterError(f"{what}: expected real numbers, got dtype {array.dtype}")
    if not np.isfinite(array).all():
        raise WriterError(f"{what}: values must be finite, got {array.tolist()}")
    buffer[part] = array
