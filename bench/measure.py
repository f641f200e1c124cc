"""Measuring helpers shared by the benchmarks: result rows, the table, and the peak RSS of
a child process with its encoder processes (their VmHWM, cross-checked by sampling from
the parent)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import psutil
from av.container import OutputContainer
from av.video.stream import VideoStream

from ortf_ros.io.video import VideoSettings

MB = 1024 * 1024


@dataclass(frozen=True)
class Row:
    section: str
    what: str
    value: str
    note: str = ""


def print_table(rows: list[Row]) -> None:
    what = max(len(r.what) for r in rows)
    value = max(len(r.value) for r in rows)
    section = None
    for r in rows:
        if r.section != section:
            section = r.section
            print(f"\n{section}")
        note = f"  ({r.note})" if r.note else ""
        print(f"  {r.what:<{what}}  {r.value:>{value}}{note}")


def peak_rss_with_encoders() -> int:
    """VmHWM, the high-water mark of RSS, of this process plus its live descendants: the
    writer's encoder processes, which it keeps for the next video. A sum of peaks, so an
    upper bound (the frame rings, mapped by both sides, count twice).

    Not ``getrusage().ru_maxrss``: Linux carries the parent's high-water mark across
    fork+exec into the child's (and so into RUSAGE_CHILDREN), so a child started from
    a big parent reports the parent's size.
    """
    this = psutil.Process()
    total = _vm_hwm(this.pid)
    for child in this.children(recursive=True):
        with contextlib.suppress(psutil.Error, OSError):
            total += _vm_hwm(child.pid)
    return total


def _vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024  # kB
    raise RuntimeError(f"/proc/{pid}/status has no VmHWM (not Linux?)")


def _tree_memory(process: psutil.Process) -> tuple[int, int]:
    """(RSS, PSS) of ``process`` and its descendants now. PSS counts a page shared by n
    processes (library code, the frame rings) as 1/n in each: the sum is what they take."""
    rss = pss = 0
    for member in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            info = member.memory_full_info()
            rss += info.rss
            pss += info.pss
    return rss, pss


def run_measured_child(command: list[str], what: str) -> tuple[dict[str, Any], int, int]:
    """Run a child that prints a JSON summary as its last line; returns it and the peak RSS
    and PSS of the child and its descendants, sampled every 50 ms from here (a check on
    the VmHWM the child reports)."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    watched = psutil.Process(child.pid)
    peak_rss = peak_pss = 0
    while child.poll() is None:
        rss, pss = _tree_memory(watched)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(0.05)
    out, _ = child.communicate()
    if child.returncode != 0:
        raise SystemExit(f"child {what} failed with exit code {child.returncode}")
    summary: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return summary, peak_rss, peak_pss


def bare_video_stream(
    container: OutputContainer, settings: VideoSettings, width: int, height: int, fps: int
) -> tuple[VideoStream, Fraction]:
    """The floor's encoder: PyAV alone with the writer's codec settings, its thread count
    included (``settings`` as the writer resolves them); frames keep the time base returned."""
    stream = container.add_stream(
        settings.codec, rate=fps, options={"crf": str(settings.crf), "preset": settings.preset}
    )
    assert isinstance(stream, VideoStream)
    stream.pix_fmt = settings.pix_fmt
    stream.gop_size = settings.gop
    stream.codec_context.thread_count = settings.threads
    stream.width = width
    stream.height = height
    time_base = Fraction(1, fps)
    stream.time_base = time_base
    return stream, time_base
