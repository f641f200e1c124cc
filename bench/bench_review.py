"""Time to first paint of an ``ortf review`` episode page, against a static page with the
same video elements, its floor.

The dataset is the one converted from the benchmark's 60 s two-camera bag
(``bench_bag2ortf.py``: 2 cameras 640x480 @ 30 fps, JointState 500 Hz, wrench 1 kHz; the
bag with JPEG cameras, cached in ``.cache/bench/``, as ``bench_doctor.py`` uses it). The
review app runs in this process on uvicorn (a thread), and Debian's chromium loads, :

- the episode page: first contentful paint, both videos' first frame (``loadeddata``), and
  the plots drawn (the page sets ``data-plot-ready``);
- the floor: a page served by the same server with nothing but the same two ``<video>``
  elements on the same URLs (first contentful paint, videos' first frame).

Each page is loaded ``--repeat`` times, interleaved; the median is shown. Then again with
the browser's cache enabled (a page visited again: plotly.min.js and the assets cached). Run from the
repository root::

    .venv/bin/python bench/bench_review.py            # the 60 s episode
    .venv/bin/python bench/bench_review.py --quick    # a 10 s episode

Nothing here asserts on timings; the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from html import escape
from pathlib import Path
from typing import Any

import uvicorn
from bench_bag2ortf import DEFAULT_CACHE, BagSpec, convert, ensure_bag, prune_cache
from measure import Row, print_table
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from ortf_ros.dataset.reader import load_dataset
from ortf_ros.review.app import create_app
from ortf_ros.review.chromium import headless_chromium
from ortf_ros.review.server import bind, url_of

MARKS = """
window.__marks = {videos: 0};
document.addEventListener("loadeddata", () => {
  window.__marks.videos += 1;
  window.__marks.lastVideo = performance.now();
}, true);
new MutationObserver(() => {
  if (document.body && document.body.dataset.plotReady && !window.__marks.plot) window.__marks.plot = performance.now();
}).observe(document, {attributes: true, subtree: true, attributeFilter: ["data-plot-ready"]});
"""
"""Run in each page before its own scripts: when the videos' first frames and the plots arrive."""


def floor_page(videos: list[str]) -> str:
    tags = "".join(f'<video src="{escape(v)}" preload="auto" muted playsinline></video>' for v in videos)
    return f'<!doctype html><html><head><meta charset="utf-8"><title>floor</title></head><body>{tags}</body></html>'


def prepare(driver: Any, cache: bool) -> None:
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": not cache})
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": MARKS})


def load(driver: Any, url: str, videos: int, plot: bool) -> dict[str, float]:
    """Milliseconds from navigation start: first contentful paint, every video's first frame, plots."""
    driver.get("about:blank")
    driver.get(url)
    deadline = time.monotonic() + 60
    while True:
        marks = driver.execute_script(
            "const p = performance.getEntriesByName('first-contentful-paint')[0];"
            "const js = performance.getEntriesByType('resource').find(r => r.name.endsWith('/plotly.min.js'));"
            "return {fcp: p ? p.startTime : null, videos: window.__marks.videos, lastVideo: window.__marks.lastVideo,"
            " plot: window.__marks.plot || null, plotly: js ? js.responseEnd : null}"
        )
        if marks["fcp"] is not None and marks["videos"] >= videos and (marks["plot"] is not None or not plot):
            return {k: float(marks[k] or 0.0) for k in ("fcp", "lastVideo", "plot", "plotly")}
        if time.monotonic() > deadline:
            raise SystemExit(f"{url}: not painted within 60 s: {marks}")
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 10 s episode instead of 60 s")
    parser.add_argument("--repeat", type=int, default=5, help="loads of each page (default 5; the median is shown)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="where generated bags are kept")
    args = parser.parse_args()
    print(f"ortf_ros review benchmark: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    bags: Path = args.cache_dir.resolve()
    prune_cache(bags)
    bag = ensure_bag(bags, BagSpec(10.0 if args.quick else 60.0, compressed=True))
    tmp = Path(tempfile.mkdtemp(prefix="ortf_bench_review_"))
    try:
        dataset = tmp / "dataset"
        convert(bag.path, dataset, None)
        episode = load_dataset(dataset).episode(0)
        cameras = [c for c, s in episode.dataset.manifest.cameras.items() if not s.is_depth]
        base = f"/episodes/{episode.episode_id}"
        floor = floor_page([f"{base}/videos/{c}" for c in cameras])
        app = create_app(dataset)

        def floor_route(request: Request) -> HTMLResponse:
            return HTMLResponse(floor)

        app.router.routes.append(Route("/floor", floor_route))
        sock = bind("127.0.0.1", 0)
        url = url_of(sock).rstrip("/")
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        runs: dict[str, list[dict[str, float]]] = {}
        try:
            for cache in (False, True):
                with headless_chromium() as driver:
                    prepare(driver, cache)
                    load(driver, url + base, len(cameras), plot=True)  # warm-up: the server's reads, Chromium's start
                    for _ in range(args.repeat):
                        page = load(driver, url + base, len(cameras), plot=True)
                        floor_run = load(driver, url + "/floor", len(cameras), plot=False)
                        runs.setdefault(f"review{cache}", []).append(page)
                        runs.setdefault(f"floor{cache}", []).append(floor_run)
        finally:
            server.should_exit = True
            thread.join(timeout=10)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def median(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    rows = []
    for cache in (False, True):
        review, bare = runs[f"review{cache}"], runs[f"floor{cache}"]
        visit = "cache enabled: a page visited again" if cache else "cache disabled: a first visit"
        section = (
            f"{2 if cache else 1}. review page of one {bag.spec.length} episode ({len(cameras)} cameras 640x480 "
            f"@ 30 fps, {episode.record.length} steps; Chromium headless, {visit}), median of {args.repeat}, "
            "ms from navigation start"
        )
        rows += [
            Row(section, "episode page: first contentful paint", f"{median(review, 'fcp'):7.0f} ms"),
            Row(section, "episode page: videos' first frame", f"{median(review, 'lastVideo'):7.0f} ms"),
            Row(section, "episode page: plotly.min.js received", f"{median(review, 'plotly'):7.0f} ms", "4.6 MB"),
            Row(section, "episode page: plots drawn", f"{median(review, 'plot'):7.0f} ms"),
            Row(section, "floor: static page, same videos: FCP", f"{median(bare, 'fcp'):7.0f} ms"),
            Row(section, "floor: videos' first frame", f"{median(bare, 'lastVideo'):7.0f} ms"),
            Row(
                section,
                "ratio first frame, episode page / floor",
                f"{median(review, 'lastVideo') / median(bare, 'lastVideo'):7.2f}",
            ),
        ]
    print_table(rows)


if __name__ == "__main__":
    main()
