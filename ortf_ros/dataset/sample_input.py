"""A ``DatasetWriter``'s input at the streams' own rates: native-rate samples (joint
states, wrenches, scans at kHz, in batches), audio chunks and files, point clouds. Each is
checked against the manifest's declaration before any of it is kept."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from ortf_ros.dataset.writer_core import WriterCore, check_keys
from ortf_ros.errors import WriterError


class SampleInput(WriterCore):
    """Samples, audio and clouds of the episode in progress."""

    def add_sample(
        self,
        stream: str,
        timestamp: float,
        values: Mapping[str, ArrayLike],
        *,
        stamp_ns: int | None = None,
        receive_ns: int | None = None,
    ) -> int:
        """Record one sample of a native-rate stream; returns its index for ``add_step(samples=...)``.

        ``timestamp`` is on the steps' clock; ``stamp_ns``/``receive_ns`` keep the raw
        header stamp and receive time of the message it came from.
        """
        rows = {name: cast("ArrayLike", [value]) for name, value in values.items()}
        return self.add_samples(stream, [timestamp], rows, stamp_ns=[stamp_ns], receive_ns=[receive_ns])

    def add_samples(
        self,
        stream: str,
        timestamps: ArrayLike,
        values: Mapping[str, ArrayLike],
        *,
        stamp_ns: Sequence[int | None] | None = None,
        receive_ns: Sequence[int | None] | None = None,
    ) -> int:
        """Record consecutive samples of a native-rate stream in one call, as ``add_sample``
        would one by one (``values[column]`` has a row per sample); all are checked before
        any is kept, and if writing them fails (WriterError) none is. Returns the index of
        the first. A stream at kHz costs a call per batch instead of one per sample.
        """
        recording = self.recording
        log = recording.stream_log(self.manifest, stream)
        times = np.asarray(timestamps, dtype=np.float64).reshape(-1)
        count = len(times)
        if values.keys() != log.dims.keys():
            check_keys(f"stream {stream!r}", "column", values, log.dims)
        columns = [_rows(f"stream {stream!r} {name}", values[name], count, dim) for name, dim in log.dims.items()]
        stamps = [None] * count if stamp_ns is None else list(stamp_ns)
        receives = [None] * count if receive_ns is None else list(receive_ns)
        if len(stamps) != count or len(receives) != count:
            raise WriterError(
                f"stream {stream!r}: {count} timestamps, {len(stamps)} stamp_ns, {len(receives)} receive_ns"
            )
        if not count:
            return log.count
        rows = columns[0] if len(columns) == 1 else np.concatenate(columns, axis=1)
        start = float(times[0])
        first = log.add(times, rows, stamps, receives, recording.origin if recording.origin is not None else start)
        recording.clock(start)  # only samples kept may start the episode's clock
        return first

    def add_audio(
        self,
        microphone: str,
        samples: np.ndarray,
        timestamp: float,
        *,
        time_ns: int,
        stamp_ns: int | None = None,
        receive_ns: int,
    ) -> int:
        """Append one audio message's samples (interleaved, in the microphone's sample
        format) to its file; returns the index of its first frame there. ``timestamp``: its
        time on the steps' clock (audio does not start the episode's clock)."""
        files = self.recording.audio
        audio = files.get(microphone)
        if audio is None:
            raise WriterError(f"unknown microphone {microphone!r}; the manifest declares {sorted(files)}")
        return audio.add(samples, timestamp, time_ns=time_ns, stamp_ns=stamp_ns, receive_ns=receive_ns)

    def add_point_cloud(
        self,
        name: str,
        timestamp: float,
        values: Mapping[str, np.ndarray],
        *,
        height: int,
        width: int,
        is_dense: bool,
        frame_id: str | None = None,
        stamp_ns: int | None = None,
        receive_ns: int | None = None,
    ) -> int:
        """Record one cloud of point cloud stream ``name`` (``dataset.point_clouds``):
        ``values`` per declared field, the ``height x width`` points row-major. ``timestamp``
        is on the steps' clock, and may start the episode's clock. Returns its index."""
        recording = self.recording
        log = recording.cloud_log(self.manifest, name)
        relative = timestamp - (recording.origin if recording.origin is not None else timestamp)
        index = log.add(
            relative,
            values,
            height=height,
            width=width,
            is_dense=is_dense,
            frame_id=frame_id,
            stamp_ns=stamp_ns,
            receive_ns=receive_ns,
        )
        recording.clock(timestamp)
        return index

    def add_audio_file(self, microphone: str, audio: Path, table: Path) -> None:
        """Stage an audio file and its chunk table written elsewhere (another dataset's
        episode, an export's copy) as the microphone's in this episode, unchanged."""
        files = self.recording.audio
        if microphone not in files:
            raise WriterError(f"unknown microphone {microphone!r}; the manifest declares {sorted(files)}")
        files[microphone].copy_from(audio, table)


def _rows(what: str, value: ArrayLike, count: int, dim: int) -> np.ndarray:
    """``value`` as ``count`` rows of ``dim`` real numbers, float64 (not yet checked to be finite)."""
    try:
        array = np.asarray(value)
    except ValueError:  # ragged
        raise WriterError(f"{what}: expected {count} rows of {dim} values") from None
    if array.shape != (count, dim):
        got = array.shape[1:] if array.ndim and array.shape[0] == count else array.shape
        raise WriterError(f"{what}: expected {dim} values, got shape {got}")
    if array.dtype.kind not in "iuf":
        raise WriterError(f"{what}: expected real numbers, got dtype {array.dtype}")
    return array.astype(np.float64, copy=False)
