"""What a sample holds besides its step: windows of step values and frames around it
(``delta_timestamps``, as LeRobot users write them) and native-rate spans of a stream
(``native_windows``, which only ORTF keeps).

The semantics are LeRobot's, so a policy written for ``LeRobotDataset`` runs on ORTF: a
delta is a multiple of the step period (within ``DELTA_TOLERANCE_S``), a position past
either end of the episode takes the edge step's value and is marked in ``<key>_is_pad``.
A frame in a window is the one the step table names for that step, never one found by a
timestamp search.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ortf_ros.errors import UsageError
from ortf_ros.format import layout
from ortf_ros.format.manifest import Manifest

DELTA_TOLERANCE_S = 1e-4
"""How far a delta may be from a multiple of the step period: LeRobot's ``tolerance_s``."""

IMAGE_PREFIX = "observation.images."
"""A camera's key in a sample: ``observation.images.<camera>``, the prefix of its step column."""

PAD_SUFFIX = "_is_pad"
"""A window's mask key: ``<key>_is_pad``, True where the position lies outside the episode."""

NATIVE_CAPACITY_MARGIN = 1.5
"""A native window's room, in samples, over its span times the stream's rate: jitter and
bursts fit; a window that still overflows keeps the samples nearest the step and says so."""


def camera_key(camera: str) -> str:
    return IMAGE_PREFIX + camera


def pad_key(key: str) -> str:
    return key + PAD_SUFFIX


def times_key(stream: str) -> str:
    """A native window's sample times (seconds on the step clock): ``<stream>.timestamp``."""
    return f"{stream}.timestamp"


@dataclass(frozen=True)
class StepWindow:
    """A window of a step column (``column``) or of a camera's frames (``camera`` set), as
    whole-step offsets from the sample's step."""

    key: str
    offsets: tuple[int, ...]
    camera: str | None = None

    def positions(self, step: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        """The steps the window reads (clamped into the episode) and which of them are pads."""
        wanted = step + np.asarray(self.offsets, dtype=np.int64)
        pads = (wanted < 0) | (wanted >= length)
        return np.clip(wanted, 0, length - 1), pads


@dataclass(frozen=True)
class NativeWindow:
    """Every sample of native stream ``stream`` whose time lies in [step + start, step + end]
    seconds, padded to ``capacity`` rows so that batches stack."""

    stream: str
    start: float
    end: float
    capacity: int


def step_windows(
    delta_timestamps: Mapping[str, Sequence[float]],
    manifest: Manifest,
    step_columns: Sequence[str],
    fps: float,
    where: str,
) -> tuple[StepWindow, ...]:
    """``delta_timestamps`` as whole-step offsets, each key a step column or a camera."""
    windows = []
    for key, deltas in delta_timestamps.items():
        camera = key[len(IMAGE_PREFIX) :] if key.startswith(IMAGE_PREFIX) else None
        if camera is not None and camera in manifest.cameras:
            column = layout.image_column(camera)
        elif key in step_columns and key != "episode_id":
            camera, column = None, key
        else:
            known = sorted([camera_key(c) for c in manifest.cameras] + [c for c in step_columns if c != "episode_id"])
            raise UsageError(f"delta_timestamps: {where} has no step column or camera {key!r}; it has {known}")
        if column not in step_columns:
            raise UsageError(f"delta_timestamps: {where} has no step column {column!r} for {key!r}")
        windows.append(StepWindow(key, _offsets(key, deltas, fps, where), camera))
    return tuple(windows)


def _offsets(key: str, deltas: Sequence[float], fps: float, where: str) -> tuple[int, ...]:
    if isinstance(deltas, (str, bytes)) or not isinstance(deltas, Sequence) or not deltas:
        raise UsageError(f"delta_timestamps[{key!r}]: expected a non-empty list of seconds, got {deltas!r}")
    offsets = []
    for delta in deltas:
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not math.isfinite(delta):
            raise UsageError(f"delta_timestamps[{key!r}]: {delta!r} is not a finite number of seconds")
        steps = round(delta * fps)
        if abs(steps / fps - delta) > DELTA_TOLERANCE_S:
            raise UsageError(
                f"delta_timestamps[{key!r}]: {delta} s is not a whole number of steps of {where} "
                f"({fps:g} Hz: multiples of {1 / fps:.6g} s, within {DELTA_TOLERANCE_S} s)"
            )
        offsets.append(steps)
    return tuple(offsets)


def native_windows(spans: Mapping[str, Sequence[float]], manifest: Manifest, where: str) -> tuple[NativeWindow, ...]:
    """``native_windows`` checked against the manifest: ``{stream: (start, end[, capacity])}``."""
    windows = []
    for stream, span in spans.items():
        declared = manifest.native_streams.get(stream)
        if declared is None:
            raise UsageError(
                f"native_windows: {where} has no native stream {stream!r}; it has {sorted(manifest.native_streams)}"
            )
        if isinstance(span, (str, bytes)) or not isinstance(span, Sequence) or len(span) not in (2, 3):
            raise UsageError(f"native_windows[{stream!r}]: expected (start_s, end_s) or (start_s, end_s, capacity)")
        start, end = float(span[0]), float(span[1])
        if not (math.isfinite(start) and math.isfinite(end) and start <= end):
            raise UsageError(f"native_windows[{stream!r}]: expected finite start <= end seconds, got {tuple(span)}")
        if len(span) == 3:
            capacity = span[2]
            if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
                raise UsageError(f"native_windows[{stream!r}]: capacity must be a positive integer, got {capacity!r}")
        elif declared.rate_hz:
            capacity = math.ceil((end - start) * declared.rate_hz * NATIVE_CAPACITY_MARGIN) + 2
        else:
            raise UsageError(
                f"native_windows[{stream!r}]: {where} declares no rate_hz for it; "
                "give a capacity: (start_s, end_s, rows)"
            )
        windows.append(NativeWindow(stream, start, end, int(capacity)))
    return tuple(windows)
