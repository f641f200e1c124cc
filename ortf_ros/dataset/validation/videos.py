"""Rules on the episode videos (and NPZ depth stacks).

Videos are probed, never decoded whole: the stream header gives codec, size and frame
count, and one seek to the end shows whether the last packet is really on disk. A
faststart MP4 cut short keeps its index, so the header alone would still promise
every frame.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import av
import numpy as np
from av.container import InputContainer

from ortf_ros.dataset.validation.findings import Finding, finding
from ortf_ros.errors import OrtfError
from ortf_ros.format.sensors import Sensor
from ortf_ros.io.video import LOSSLESS_DEPTH_ENCODING, VideoInfo, probe

LOSSLESS_DEPTH_PIX_FMT = "gray16le"
NPZ_CODEC = "npz"
FPS_TOLERANCE = 1e-3


class VideoChecks:
    """Checks each video file once, however many episodes reference it (LeRobot-style
    shards hold several), and remembers its frame count for the step rules."""

    def __init__(self, root: Path, *, strict: bool) -> None:
        self.root = root
        self.strict = strict
        self._seen: dict[str, VideoInfo | None] = {}

    def check(self, path: str, sensor: Sensor, episode: str) -> tuple[VideoInfo | None, list[Finding]]:
        """Facts of ``path`` (None if unusable), with findings the first time it is seen."""
        if path in self._seen:
            return self._seen[path], []
        info, found = self._inspect(path, sensor, episode)
        self._seen[path] = info
        return info, found

    def _inspect(self, path: str, sensor: Sensor, episode: str) -> tuple[VideoInfo | None, list[Finding]]:
        full = self.root / path
        if not full.is_file():
            return None, [finding("videos.missing", path, "referenced video does not exist", episode=episode)]
        try:
            info = _probe_npz(full) if full.suffix == ".npz" else _probe_complete(full)
        except (OrtfError, av.error.FFmpegError, OSError, ValueError, zipfile.BadZipFile) as exc:
            return None, [finding("videos.unreadable", path, str(exc).removeprefix(f"{full}: "), episode=episode)]
        return info, self._compare(path, info, sensor, episode)

    def _compare(self, path: str, info: VideoInfo, sensor: Sensor, episode: str) -> list[Finding]:
        found = []
        res = sensor.resolution
        if res is not None and (info.width, info.height) != (res.width, res.height):
            message = f"is {info.width}x{info.height}; sensor {sensor.name!r} is {res.width}x{res.height}"
            found.append(finding("videos.resolution", path, message, episode=episode))
        lossless = info.codec == NPZ_CODEC or (
            info.codec == LOSSLESS_DEPTH_ENCODING and info.pix_fmt == LOSSLESS_DEPTH_PIX_FMT
        )
        if sensor.is_depth and not lossless:
            message = (
                f"depth stored as {info.codec}/{info.pix_fmt}; expected {LOSSLESS_DEPTH_ENCODING}/"
                f"{LOSSLESS_DEPTH_PIX_FMT} or npz (anything else loses depth values)"
            )
            found.append(finding("videos.depth_lossless", path, message, episode=episode))
        # NPZ stacks have no frame rate of their own.
        fps_known = sensor.fps is not None and info.codec != NPZ_CODEC
        if self.strict and fps_known and not math.isclose(info.fps, sensor.fps or 0.0, abs_tol=FPS_TOLERANCE):
            message = f"plays at {info.fps:g} fps; sensor {sensor.name!r} runs at {sensor.fps:g} fps"
            found.append(finding("videos.fps", path, message, episode=episode))
        return found


def _probe_complete(path: Path) -> VideoInfo:
    info = probe(path)
    with av.open(str(path)) as container:
        assert isinstance(container, InputContainer)
        stream = container.streams.video[0]
        end = (stream.start_time or 0) + (stream.duration or 0)
        container.seek(end, stream=stream, backward=True, any_frame=True)
        tail = [packet for packet in container.demux(stream) if packet.dts is not None]
    if info.frames and (not tail or any(packet.is_corrupt for packet in tail)):
        raise ValueError(f"truncated: the index lists {info.frames} frames but the last ones are not in the file")
    return info


def _probe_npz(path: Path) -> VideoInfo:
    """Shape of the first array of an NPZ stack, read from its header without loading it."""
    with zipfile.ZipFile(path) as archive:
        names = [name for name in archive.namelist() if name.endswith(".npy")]
        if not names:
            raise ValueError("NPZ holds no array")
        with archive.open(names[0]) as member:
            npy = np.lib.format
            read_header = npy.read_array_header_1_0 if npy.read_magic(member) == (1, 0) else npy.read_array_header_2_0
            shape, _, dtype = read_header(member)
    if len(shape) != 3:
        raise ValueError(f"NPZ depth array has shape {shape}; expected (frames, height, width)")
    return VideoInfo(codec=NPZ_CODEC, width=shape[2], height=shape[1], fps=0.0, frames=shape[0], pix_fmt=str(dtype))
