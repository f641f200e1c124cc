"""The encode floor of ``bench_live.py``: one camera's frames encoded by bare PyAV, in real time.

What the recorder does with a frame beyond taking it from its subscription (the floor
subscriber's part) is mostly encoding it. A process of this script does only that, for
one camera, as the recorder's encoder process for that camera would: PyAV alone
(``measure.bare_video_stream``) with the recorder's video settings (given by
``bench_live.py``: ``pipeline.recorder.live_writer_config`` of the bench's mapping, with
the encoder threads the writer gives each of the three cameras), the scene publisher's
pictures (``synthetic.images.rgb_frame``, the same size and content), one every 1/fps s
for ``SECONDS``, into a plain MP4.

Beside this floor the recorder also muxes each packet into a fragmented MP4, flushed
(crash safety), and copies frames through its ring: part of what it adds. RGB is turned
into yuv420p by PyAV's encode (swscale), as in the other benchmarks' floors; the
recorder's encoders convert with ``io.colour`` (OpenCV), about 0.4 ms a frame less.
Painting a frame takes about 0.1 ms: timed (``paint_s``), and taken off the floor.

Run by ``bench_live.py`` only, as ``live_encode.py TOPIC OUT SECONDS SETTINGS_JSON``: it
imports, opens ``OUT`` and prints "ready"; at a line on its stdin it encodes, then
prints its summary (JSON, one line). Its imports are few (about 45 MB), as an encoder
process's are.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import av
from measure import bare_video_stream

from ortf_ros.io.video import VideoSettings
from ortf_ros.synthetic.images import rgb_frame

WIDTH, HEIGHT, FPS = 640, 480, 30  # (bench_live's scene)


@dataclass(frozen=True)
class EncodeReport:
    start_ns: int  # wall clock: the first frame's time
    end_ns: int  # the last frame encoded (the flush and close after it are not in the window)
    frames: int
    paint_s: float  # CPU seconds spent painting the frames (rgb_frame), in the window
    late: int  # frames encoded more than a period after their time


def encode(topic: str, out: Path, seconds: float, settings: VideoSettings) -> EncodeReport:
    """Encode ``seconds`` of ``topic``'s frames at ``FPS`` from the line on stdin."""
    period_ns = 1_000_000_000 // FPS
    with av.open(str(out), "w", format="mp4") as container:
        stream, time_base = bare_video_stream(container, settings, WIDTH, HEIGHT, FPS)
        rgb_frame(topic, 0, WIDTH, HEIGHT)  # (its background, computed once and kept)
        print("ready", flush=True)
        sys.stdin.readline()
        start = time.time_ns()
        paint = 0.0
        late = 0
        frames = round(seconds * FPS)
        for seq in range(frames):
            due = start + seq * period_ns
            wait = due - time.time_ns()
            if wait > 0:
                time.sleep(wait / 1e9)
            elif -wait > period_ns:
                late += 1
            began = time.thread_time()
            pixels = rgb_frame(topic, seq, WIDTH, HEIGHT)
            paint += time.thread_time() - began
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts = seq
            frame.time_base = time_base
            container.mux(stream.encode(frame))
        end = time.time_ns()
        container.mux(stream.encode(None))
    return EncodeReport(start, end, frames, paint, late)


def main() -> None:
    topic, out, seconds, settings = sys.argv[1:]
    report = encode(topic, Path(out), float(seconds), VideoSettings(**json.loads(settings)))
    print(json.dumps(asdict(report)), flush=True)


if __name__ == "__main__":
    main()
