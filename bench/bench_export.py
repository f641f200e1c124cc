"""Speed of ``ortf export lerobot`` against the bare operations under it.

Prints one table:

1. Reuse: ORTF's H.264 yuv420p episodes remuxed into LeRobot shards (``to_lerobot``
   with every video reused), vs copying the whole source dataset with ``shutil``
   (the floor: an export cannot move less data than a copy).
2. Re-encode: yuv444p episodes, which LeRobot's yuv420p shards cannot take, so every
   video is decoded and encoded again, vs bare PyAV decoding the same files and
   encoding them with the same settings (``REENCODE_SETTINGS``) into plain MP4s.

Episodes/s and frames/s (video frames: steps x colour cameras) for each, the floor
measured in the same run, and their ratio. Run from the repository root::

    .venv/bin/python bench/bench_export.py            # 8 episodes of 300 steps, 320x240, 2 cameras
    .venv/bin/python bench/bench_export.py --quick    # 4 episodes of 90 steps

Nothing here asserts on timings; the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import av
from av.container import InputContainer
from measure import Row, bare_video_stream, print_table

from ortf_ros.convert.lerobot_export import REENCODE_SETTINGS, to_lerobot
from ortf_ros.dataset.config import WriterConfig
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.io.video import VideoSettings
from ortf_ros.synthetic.dataset import write_demo_dataset
from ortf_ros.synthetic.demo_arm import RGB_CAMERAS

FPS = 30


def best_of(repeat: int, run: Callable[[Path], object], scratch: Path) -> float:
    """Fastest of ``repeat`` runs, each into a fresh directory (other load only slows a run)."""
    times = []
    for attempt in range(repeat):
        out = scratch / f"run-{attempt}"
        start = time.perf_counter()
        run(out)
        times.append(time.perf_counter() - start)
        shutil.rmtree(out)
    return min(times)


def bare_reencode(source: Path, out: Path) -> None:
    """Decode every colour episode video and encode it with the export's settings."""
    dataset = load_dataset(source)
    out.mkdir()
    for episode in dataset:
        for camera in RGB_CAMERAS:
            with av.open(str(episode.video_path(camera))) as src, av.open(str(out / "x.mp4"), "w") as dst:
                assert isinstance(src, InputContainer)
                context = src.streams.video[0].codec_context
                stream, time_base = bare_video_stream(dst, REENCODE_SETTINGS, context.width, context.height, FPS)
                for index, frame in enumerate(src.decode(video=0)):
                    image = av.VideoFrame.from_ndarray(frame.to_ndarray(format="rgb24"), format="rgb24")
                    image.pts, image.time_base = index, time_base
                    for packet in stream.encode(image):
                        dst.mux(packet)
                for packet in stream.encode(None):
                    dst.mux(packet)


def rates(section: str, what: str, seconds: float, episodes: int, frames: int) -> list[Row]:
    return [
        Row(section, f"{what}: episodes/s", f"{episodes / seconds:.2f}"),
        Row(section, f"{what}: frames/s", f"{frames / seconds:.0f}", f"{seconds:.3f} s"),
    ]


def ratio(section: str, export: float, floor: float) -> Row:
    return Row(section, "export time / floor time", f"{export / floor:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 episodes of 90 steps")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--repeat", type=int, default=3, help="best of N")
    args = parser.parse_args()
    episodes, steps = (4, 90) if args.quick else (args.episodes, args.steps)
    frames = episodes * steps * len(RGB_CAMERAS)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for pix_fmt in ("yuv420p", "yuv444p"):
            write_demo_dataset(
                scratch / pix_fmt,
                episodes=episodes,
                steps=steps,
                width=args.width,
                height=args.height,
                depth=False,
                config=WriterConfig(video=VideoSettings(pix_fmt=pix_fmt)),
            )
        size = f"{episodes} episodes x {steps} steps, {len(RGB_CAMERAS)} cameras {args.width}x{args.height}"

        section = f"1. Reuse (H.264 yuv420p remuxed into shards; {size})"
        export = best_of(args.repeat, lambda out: _export(scratch / "yuv420p", out, reused=True), scratch)
        floor = best_of(args.repeat, lambda out: shutil.copytree(scratch / "yuv420p", out), scratch)
        rows += rates(section, "to_lerobot", export, episodes, frames)
        rows += rates(section, "floor, shutil.copytree of the dataset", floor, episodes, frames)
        rows.append(ratio(section, export, floor))

        section = f"2. Re-encode (yuv444p decoded and encoded to yuv420p, crf {REENCODE_SETTINGS.crf}; {size})"
        export = best_of(args.repeat, lambda out: _export(scratch / "yuv444p", out, reused=False), scratch)
        floor = best_of(args.repeat, lambda out: bare_reencode(scratch / "yuv444p", out), scratch)
        rows += rates(section, "to_lerobot", export, episodes, frames)
        rows += rates(section, "floor, bare PyAV decode + encode", floor, episodes, frames)
        rows.append(ratio(section, export, floor))
    print_table(rows)


def _export(source: Path, out: Path, reused: bool) -> None:
    summary = to_lerobot(source, out)
    videos = summary.videos_reused if reused else summary.videos_reencoded
    if videos != summary.episodes * len(RGB_CAMERAS):
        raise SystemExit(f"expected every video {'reused' if reused else 're-encoded'}: {summary}")


if __name__ == "__main__":
    main()
