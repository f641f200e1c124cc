"""A camera that publishes H.264: its packets remuxed into the episode video (what the
converter and the recorder do with it, ``io.packet_video``) against decoding the same
stream and encoding it again (what storing it like a raw camera would take), in one run.

The stream: ``SECONDS`` of a synthetic camera (``synthetic.images.rgb_frame``) at 640x480 and
30 fps, encoded as an on-board encoder publishes it (``io.h264.AnnexBEncoder``: libx264, an
IDR frame with its SPS and PPS every 10 frames, no B-frames), its packets held in memory.
Rows, each the median of ``REPEAT`` runs:

1. remux: every packet into ``StagedPacketVideo``, then ``video.finalize`` (the commit's
   copy into the plain MP4); the floor under it: the same bytes written to one file (no
   container, no index), which no remux can beat; ratio remux/floor;
2. decode + encode: PyAV's H.264 decoder, each frame to the writer's ``StagingEncoder``
   (libx264 with the writer's settings, one thread), then ``video.finalize``; ratio against
   the remux: what storing the camera as published saves per camera, offline in converter
   time, live in recorder CPU (the encoder is out of the recorder's budget).

Run from the repository root::

    PYTHONPATH=. python bench/bench_h264.py

Nothing here asserts on timings; the figures depend on the machine.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import av
from measure import MB, Row, print_table

from ortf_ros.io.h264 import AnnexBEncoder, packet_facts
from ortf_ros.io.packet_video import StagedPacketVideo
from ortf_ros.io.video import StagingEncoder, VideoSettings, finalize, probe
from ortf_ros.synthetic.images import rgb_frame
from ortf_ros.synthetic.topics import TOPIC_WRIST_IMAGE

WIDTH, HEIGHT, FPS, SECONDS = 640, 480, 30, 20
REPEAT = 3
SECTION = f"H.264 camera, {SECONDS} s of {WIDTH}x{HEIGHT} at {FPS} fps"


def published_stream() -> list[bytes]:
    encoder = AnnexBEncoder(WIDTH, HEIGHT)
    return [encoder.encode(rgb_frame(TOPIC_WRIST_IMAGE, seq, WIDTH, HEIGHT)) for seq in range(SECONDS * FPS)]


def remux(packets: list[bytes], tmp: Path) -> None:
    video = StagedPacketVideo(tmp / "staged.mp4", FPS, camera="bench")
    for packet in packets:
        video.write(packet, packet_facts(packet).keyframe)
    video.close()
    finalize(tmp / "staged.mp4", tmp / "video.mp4")


def floor(packets: list[bytes], tmp: Path) -> None:
    with (tmp / "stream.h264").open("wb") as out:
        for packet in packets:
            out.write(packet)


def decode_and_encode(packets: list[bytes], tmp: Path) -> None:
    decoder = av.CodecContext.create("h264", "r")
    encoder = StagingEncoder(tmp / "staged.mp4", WIDTH, HEIGHT, FPS, "rgb", VideoSettings(threads=1))
    for packet in [*packets, None]:
        for frame in decoder.decode(None if packet is None else av.Packet(packet)):
            encoder.encode(frame.to_ndarray(format="rgb24"))
    encoder.close()
    finalize(tmp / "staged.mp4", tmp / "video.mp4")


def timed(run: Callable[[list[bytes], Path], None], packets: list[bytes]) -> tuple[float, int]:
    """Median seconds of ``REPEAT`` runs, and the size of the video (or file) made."""
    seconds, size = [], 0
    for _ in range(REPEAT):
        with tempfile.TemporaryDirectory(prefix="ortf-bench-h264-") as name:
            tmp = Path(name)
            started = time.perf_counter()
            run(packets, tmp)
            seconds.append(time.perf_counter() - started)
            made = tmp / "video.mp4" if (tmp / "video.mp4").exists() else tmp / "stream.h264"
            size = made.stat().st_size
            if made.suffix == ".mp4":
                assert probe(made).frames == len(packets)
    return statistics.median(seconds), size


def main() -> None:
    packets = published_stream()
    frames = len(packets)
    remux_s, remux_size = timed(remux, packets)
    floor_s, floor_size = timed(floor, packets)
    again_s, again_size = timed(decode_and_encode, packets)

    def speed(seconds: float) -> str:
        return f"{frames / seconds:,.0f} frames/s, {seconds / SECONDS * 100:.2f} % of a core per camera in real time"

    print_table(
        [
            Row(SECTION, "published stream", f"{frames} packets", f"{floor_size / MB:.2f} MB"),
            Row(SECTION, "remux (StagedPacketVideo + finalize)", f"{remux_s:8.3f} s", speed(remux_s)),
            Row(SECTION, "floor: the bytes written to one file", f"{floor_s:8.3f} s", f"{floor_size / MB:.2f} MB"),
            Row(SECTION, "ratio remux / floor", f"{remux_s / floor_s:8.1f} x", f"video {remux_size / MB:.2f} MB"),
            Row(SECTION, "decode + encode (PyAV + StagingEncoder)", f"{again_s:8.3f} s", speed(again_s)),
            Row(
                SECTION,
                "ratio decode + encode / remux",
                f"{again_s / remux_s:8.1f} x",
                f"video {again_size / MB:.2f} MB, a second lossy generation",
            ),
        ]
    )


if __name__ == "__main__":
    main()
