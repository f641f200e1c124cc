"""``ortf review`` in a real browser: Debian's chromium driven by Selenium, headless,
against the command itself run as a subprocess on a dataset with two colour cameras, a
depth camera, a force-torque stream and alignment columns.

Screenshots of each page go to test-artifacts/review/ (git-ignored)."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest

from ortf_ros.cli.ortf import main as ortf_main
from ortf_ros.dataset.reader import load_dataset
from ortf_ros.dataset.run_lock import run_lock
from ortf_ros.dataset.staging import lock_dataset, unlock_dataset
from ortf_ros.dataset.writer import DatasetWriter
from ortf_ros.errors import OutsideDatasetError
from ortf_ros.format import layout
from ortf_ros.format.accounting import QUEUE_FULL, StreamAccount
from ortf_ros.format.native_streams import Alignment, NativeStream
from ortf_ros.format.spaces import StateComponent
from ortf_ros.synthetic.demo_arm import (
    DEPTH_CAMERA,
    RGB_CAMERAS,
    demo_action,
    demo_depth,
    demo_manifest,
    demo_rgb,
    demo_state,
    demo_urdf,
)

pytest.importorskip("selenium.webdriver", reason="selenium: pip install -e '.[test]'")
from selenium.webdriver.common.by import By
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.ui import WebDriverWait

from ortf_ros.review import chromium, plots
from ortf_ros.review.access import dataset_file
from ortf_ros.review.app import rerun_available
from ortf_ros.review.chromium import headless_chromium

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "review"
STEPS, FPS, WRENCH_HZ, WIDTH, HEIGHT = 90, 30, 500, 160, 120
TASKS = ("Pick up the red box", "Open the drawer")

pytestmark = pytest.mark.skipif(
    not chromium.installed(),
    reason="needs Debian's chromium and chromium-driver (bash scripts/setup-env.sh installs them)",
)


BEYOND_LIMIT = range(30, 46)
"""Steps of episode 000000 whose first joint is beyond its URDF limit: a doctor finding
from 1.0 s to 1.5 s."""


def write_dataset(root: Path, episodes: int = 3) -> None:
    """Three 3 s episodes: two colour cameras, depth, a 500 Hz force-torque stream with
    per-step alignment; the third failed, the first has a joint beyond its limit for 0.5 s."""
    manifest = replace(
        demo_manifest(WIDTH, HEIGHT, FPS, depth=True),
        native_streams={
            "wrist_ft": NativeStream(
                columns={"force": StateComponent(3, "newtons"), "torque": StateComponent(3, "newton_meters")},
                rate_hz=WRENCH_HZ,
            )
        },
        alignment=Alignment(streams=("cam_wrist", "wrist_ft")),
        sync_tolerance_ms=20.0,
    )
    with DatasetWriter(root, manifest, urdf=demo_urdf()) as writer:
        for episode in range(episodes):
            writer.begin_episode(TASKS[episode % 2])
            sample = -1
            for step in range(STEPS):
                t = step / FPS
                while (sample + 1) / WRENCH_HZ <= t:
                    sample += 1
                    s = sample / WRENCH_HZ
                    force = np.array([np.sin(3 * s), np.cos(2 * s), -9.0 + s], np.float32)
                    writer.add_sample("wrist_ft", s, {"force": force, "torque": force / 10})
                state = demo_state(episode, step, FPS)
                if episode == 0 and step in BEYOND_LIMIT:
                    state["joint_positions"][0] = 3.0
                images: dict[str, np.ndarray] = {c: demo_rgb(n, step, WIDTH, HEIGHT) for n, c in enumerate(RGB_CAMERAS)}
                images[DEPTH_CAMERA[0]] = demo_depth(step, WIDTH, HEIGHT)
                writer.add_step(
                    t,
                    state,
                    demo_action(episode, step, FPS),
                    images,
                    samples={"wrist_ft": sample},
                    alignment_ms={"cam_wrist": camera_late(episode, step), "wrist_ft": (t - sample / WRENCH_HZ) * 1000},
                )
            # The failed one lost 3 wrist frames to a full queue, as its accounting says.
            dropped = [
                StreamAccount("cam_wrist", "camera", "/wrist/image_raw", STEPS + 3, 0, STEPS, 0, {QUEUE_FULL: 3})
            ]
            writer.end_episode(
                success=episode != 2,
                failure_reason="gripper slipped" if episode == 2 else None,
                accounting=dropped if episode == 2 else None,
            )


LATE_STEP = 47
"""The step of episode 000001 whose frame came 15 ms late (within the 20 ms tolerance: no
finding), where no decimation keeping every k-th row would land."""


def camera_late(episode: int, step: int) -> float:
    return 15.0 if (episode, step) == (1, LATE_STEP) else 2.0 * (step % 3)


class Server:
    """``ortf review DATASET --port 0`` as a subprocess; ``url`` from the line it prints."""

    def __init__(self, root: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), *sys.path])}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ortf_ros.cli.ortf", "review", str(root), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert " at http://127.0.0.1:" in line, (line, self.process.stderr and self.process.stderr.read())
        self.url = line.split(" at ")[1].split()[0].rstrip("/")
        self.netloc = urlsplit(self.url).netloc

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """A raw request: the path is sent exactly as given (``..`` and ``%2e`` included)."""
        connection = http.client.HTTPConnection(self.netloc, timeout=10)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            connection.close()

    def post_json(self, path: str, data: Any, **headers: str) -> tuple[int, Any]:
        status, _, body = self.request(
            "POST", path, json.dumps(data).encode(), {"Content-Type": "application/json", **headers}
        )
        return status, json.loads(body)

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGINT)
        _, stderr = self.process.communicate(timeout=15)
        return self.process.returncode, stderr


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("review") / "day"
    write_dataset(root)
    return root


@pytest.fixture(scope="module")
def server(dataset: Path) -> Iterator[Server]:
    server = Server(dataset)
    yield server
    code, stderr = server.stop()
    assert (code, stderr) == (130, ""), "Ctrl-C ends ortf review quietly with 130"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with headless_chromium({"goog:loggingPrefs": {"performance": "ALL"}}) as driver:  # (its network log)
        yield driver


def by_testid(driver: Any, name: str) -> Any:
    return driver.find_element(By.CSS_SELECTOR, f'[data-testid="{name}"]')


def wait_for(driver: Any, condition: Callable[[Any], Any], timeout: float = 10.0) -> Any:
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition)


def page_time(driver: Any) -> float:
    """The time the episode page shows (seconds from the first step), as its script sets it."""
    return float(driver.find_element(By.TAG_NAME, "body").get_attribute("data-time"))


def screenshot(driver: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def episodes_table(root: Path) -> dict[str, dict[str, Any]]:
    return {row["episode_id"]: row for row in pq.read_table(root / layout.EPISODES).to_pylist()}


def video_responses(driver: Any) -> list[tuple[int, str]]:
    """(status, Content-Range) of every video response Chromium received so far."""
    found = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.responseReceived" and "/videos/" in message["params"]["response"]["url"]:
            response = message["params"]["response"]
            headers = {k.lower(): v for k, v in response["headers"].items()}
            found.append((int(response["status"]), headers.get("content-range", "")))
    return found


def test_plot_data_is_bounded_and_true_to_the_dataset(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plots, "MAX_POINTS", 20)
    with load_dataset(dataset).episode("000001") as episode:
        data = plots.episode_plots(episode)
        wrench = episode.stream("wrist_ft", ["timestamp", "force"])
    assert [p["title"] for p in data["panels"]] == [
        "joint positions",
        "action (joint_position)",
        "force-torque: wrist_ft",
        "alignment error per stream",
    ]
    for panel in data["panels"]:
        assert 15 <= len(panel["time"]) <= 41 and panel["time"][0] == 0.0, (panel["title"], len(panel["time"]))
        assert all(len(series["values"]) == len(panel["time"]) for series in panel["series"])
    force = data["panels"][2]
    times = wrench["timestamp"].to_numpy()
    for t, fx in zip(force["time"], force["series"][0]["values"], strict=True):  # each point a real sample
        row = int(np.searchsorted(times, t))
        assert times[row] == t and abs(wrench["force"][row].as_py()[0] - fx) < 1e-6
    late = data["panels"][3]  # the one late frame is on the alignment plot, at its time
    at = late["time"].index(LATE_STEP / FPS)
    assert late["series"][0]["name"] == "cam_wrist" and late["series"][0]["values"][at] == 15.0
    wrist = data["cameras"]["cam_wrist"]
    assert wrist["fps"] == FPS and wrist["frame"][0] == 0 and len(wrist["frame"]) <= 21


@pytest.mark.parametrize(
    ("arguments", "code", "says"),
    [
        (["/nonexistent/day"], 2, "/nonexistent/day: no such file or directory; expected an ORTF dataset directory"),
        (["{tmp}"], 1, "meta/manifest.json: missing"),
        (["{dataset}", "--port", "70000"], 2, "--port: expected a port number 0..65535, got 70000"),
        (["{dataset}", "--host", "no.such.host.invalid"], 2, "--host no.such.host.invalid: not an address"),
    ],
)
def test_bad_invocations(
    arguments: list[str], code: int, says: str, dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    words = [a.format(tmp=tmp_path, dataset=dataset) for a in arguments]
    try:
        result = ortf_main(["review", *words])
    except SystemExit as exc:  # the parser's own refusals
        result = int(exc.code or 0)
    err = capsys.readouterr().err
    assert (result, err.count("\n")) == (code, 1) and says in err and err.startswith("ortf review: "), err


def test_list_filters_and_sorts(server: Server, browser: Any) -> None:
    browser.get(server.url + "/")
    rows = browser.find_elements(By.CSS_SELECTOR, '[data-testid="episode-row"]')
    assert [r.get_attribute("data-episode-id") for r in rows] == ["000000", "000001", "000002"]
    assert "Pick up the red box" in rows[0].text and "2.97 s" in rows[0].text
    Select(by_testid(browser, "filter-outcome")).select_by_value("failure")
    visible = [r.get_attribute("data-episode-id") for r in rows if r.is_displayed()]
    assert visible == ["000002"]
    assert by_testid(browser, "shown-count").text == "1 of 3 shown"
    Select(by_testid(browser, "filter-outcome")).select_by_value("")
    Select(by_testid(browser, "filter-task")).select_by_value("Open the drawer")
    assert [r.get_attribute("data-episode-id") for r in rows if r.is_displayed()] == ["000001"]
    Select(by_testid(browser, "filter-task")).select_by_value("")
    by_testid(browser, "sort-outcome").click()  # failure < success
    ordered = browser.find_elements(By.CSS_SELECTOR, '[data-testid="episode-row"]')
    assert ordered[0].get_attribute("data-episode-id") == "000002"
    by_testid(browser, "sort-id").click()
    by_testid(browser, "sort-id").click()  # descending
    ordered = browser.find_elements(By.CSS_SELECTOR, '[data-testid="episode-row"]')
    assert [r.get_attribute("data-episode-id") for r in ordered] == ["000002", "000001", "000000"]
    # the doctor's counts arrive in the background: only episode 000000 has findings
    wait_for(browser, lambda d: all(r.get_attribute("data-findings") != "" for r in rows), timeout=15)
    counts = {r.get_attribute("data-episode-id"): int(r.get_attribute("data-findings")) for r in rows}
    assert counts["000000"] > 0 and counts["000001"] == 0 and counts["000002"] == 1, counts  # (its drops)
    drops = {r.get_attribute("data-episode-id"): r.get_attribute("data-drops") for r in rows}
    assert drops == {"000000": "0", "000001": "0", "000002": "3"}
    by_testid(browser, "filter-findings").click()
    assert [r.get_attribute("data-episode-id") for r in rows if r.is_displayed()] == ["000000", "000002"]
    screenshot(browser, "list")


def test_episode_plays_seeks_and_plots(server: Server, browser: Any) -> None:
    browser.get(server.url + "/")
    browser.find_element(By.CSS_SELECTOR, '[data-testid="episode-row"][data-episode-id="000001"]').click()
    wait_for(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-plot-ready") == "true")
    assert by_testid(browser, "task").text == "Open the drawer"
    if rerun_available():
        assert by_testid(browser, "rerun").get_attribute("href") == server.url + "/episodes/000001.rrd"
    else:  # no Rerun SDK here (Python 3.10): the page offers no link that would fail
        assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="rerun"]')
    video = by_testid(browser, "video-cam_wrist")
    by_testid(browser, "video-cam_overhead")
    wait_for(browser, lambda d: d.execute_script("return arguments[0].readyState", video) >= 2)
    by_testid(browser, "play").click()
    wait_for(browser, lambda d: d.execute_script("return arguments[0].currentTime", video) > 0.5)
    by_testid(browser, "play").click()  # pause
    # the cursor follows the video: the page's time is the video's (same clock here)
    wait_for(browser, lambda d: page_time(d) > 0.4)
    browser.execute_script("arguments[0].currentTime = 2.2", video)
    wait_for(browser, lambda d: not d.execute_script("return arguments[0].seeking", video))
    assert abs(browser.execute_script("return arguments[0].currentTime", video) - 2.2) < 0.05
    wait_for(browser, lambda d: abs(page_time(d) - 2.2) < 0.05)
    cursor = "const s = document.getElementById('plot').layout.shapes; return s[s.length - 1].x0"
    wait_for(browser, lambda d: abs(d.execute_script(cursor) - 2.2) < 0.05)  # drawn within a frame or two
    # the other camera followed, and Chromium fetched the videos with range requests
    browser.execute_script("window.ortfReview.seekTo(1.0)")
    overhead = by_testid(browser, "video-cam_overhead")
    wait_for(browser, lambda d: abs(d.execute_script("return arguments[0].currentTime", overhead) - 1.0) < 0.05)
    statuses = video_responses(browser)
    assert any(status == 206 and content_range.startswith("bytes ") for status, content_range in statuses), statuses
    # depth colourised on the server: a picture of the camera's size, not grey
    depth = by_testid(browser, "video-depth")
    wait_for(browser, lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", depth))
    assert browser.execute_script("return arguments[0].naturalWidth", depth) == WIDTH
    panels = browser.execute_script("return document.getElementById('plot').layout.grid.rows")
    titles = browser.execute_script("return document.getElementById('plot').layout.annotations.map(a => a.text)")
    assert panels == 4 and any("force-torque" in t for t in titles) and any("alignment" in t for t in titles), titles
    screenshot(browser, "episode")


def test_findings_on_the_timeline(server: Server, browser: Any) -> None:
    browser.get(server.url + "/episodes/000000")
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="finding"]'), timeout=15)
    found = browser.find_elements(By.CSS_SELECTOR, '[data-testid="finding"]')
    assert any(f.get_attribute("data-rule").startswith("robot.") for f in found), [f.text for f in found]
    spans = wait_for(  # (the plot may still be drawing: its layout exists once it is)
        browser,
        lambda d: d.execute_script(
            "const plot = document.getElementById('plot');"
            "return plot && plot.layout && plot.layout.shapes"
            " ? plot.layout.shapes.filter(s => s.type === 'rect').map(s => [s.x0, s.x1]) : null"
        ),
        timeout=15,
    )
    assert any(abs(x0 - 1.0) < 0.05 and abs(x1 - 1.5) < 0.05 for x0, x1 in spans), spans
    found[0].click()  # a finding seeks the videos to its start
    start = float(found[0].get_attribute("data-start"))
    wait_for(browser, lambda d: abs(page_time(d) - start) < 0.02)
    screenshot(browser, "findings")


def test_ranges_and_paths_outside_the_dataset(server: Server, dataset: Path) -> None:
    status, headers, body = server.request("GET", "/episodes/000000/videos/cam_wrist", headers={"Range": "bytes=10-19"})
    mp4 = (dataset / episodes_table(dataset)["000000"]["video_files"]["cam_wrist"]).read_bytes()
    assert (status, headers["content-range"], body) == (206, f"bytes 10-19/{len(mp4)}", mp4[10:20])
    for path in (
        "/episodes/../../../../etc/passwd",
        "/episodes/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/episodes/000000/videos/..%2F..%2Fmeta%2Fepisodes.parquet",
        "/episodes/000000/videos/%2e%2e",
        "/static/..%2F..%2Fsetup.py",
        "/static/../app.py",
        "/episodes/999999",
        "/episodes/000000/depth/cam_wrist",  # a colour camera is no depth picture
    ):
        status, _, body = server.request("GET", path)
        assert status == 404, (path, status, body[:200])
    # a video file that is a symlink leading out of the dataset is refused
    relative = episodes_table(dataset)["000001"]["video_files"]["cam_overhead"]
    inside = dataset / relative
    outside = dataset.parent / "outside.mp4"
    shutil.move(inside, outside)
    inside.symlink_to(outside)
    try:
        status, _, body = server.request("GET", "/episodes/000001/videos/cam_overhead")
        assert status == 403 and b"outside the dataset" in body
    finally:
        inside.unlink()
        shutil.move(outside, inside)
    # depth: the frame a step saw, decoded and colourised on the server (not grey, and moving)
    pictures = []
    for t in (0.1, 2.5):
        status, headers, body = server.request("GET", f"/episodes/000000/depth/depth?t={t}")
        assert (status, headers["content-type"]) == (200, "image/jpeg")
        picture = cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_COLOR)
        assert picture is not None and picture.shape == (HEIGHT, WIDTH, 3)
        assert float(np.abs(picture[..., 0].astype(int) - picture[..., 2]).mean()) > 20  # blue != red: colour
        pictures.append(picture.astype(int))
    assert float(np.abs(pictures[0] - pictures[1]).mean()) > 5  # the bump moved between the two
    # the episode handed to Rerun, as a download made on request
    status, headers, body = server.request("GET", "/episodes/000000.rrd")
    if rerun_available():
        assert (status, headers["content-disposition"]) == (200, 'attachment; filename="episode_000000.rrd"')
        assert body[:4] == b"RRF2" and len(body) > 10_000, body[:16]
        # ... for the page's own link only: another site's page pointing an <img> here is refused
        assert server.request("GET", "/episodes/000000.rrd", headers={"Sec-Fetch-Site": "cross-site"})[0] == 403
    else:  # (Rerun 0.41 needs Python 3.11): the extra named instead
        assert status == 404 and b"pip install 'ortf_ros[rerun]'" in body, (status, body[:200])
    # another site's page cannot post here, nor reach the server under another name
    assert server.post_json("/api/episodes/000000/labels", {"success": False}, Origin="http://evil.example")[0] == 403
    status, _, _ = server.request(
        "POST", "/api/episodes/000000/labels", b'{"success": false}', {"Content-Type": "text/plain"}
    )
    assert status == 415
    assert server.request("GET", "/", headers={"Host": "evil.example"})[0] == 400
    assert server.post_json("/api/episodes/000000/labels", {"success": "yes"})[0] == 400
    assert episodes_table(dataset)["000000"]["success"] is True


def test_a_path_the_index_names_outside_the_dataset_is_refused(tmp_path: Path) -> None:
    """Requests name episodes and cameras, but the index (another writer's) may name any path."""
    root = tmp_path / "ds"
    (root / "videos").mkdir(parents=True)
    (root / "videos" / "a.mp4").write_bytes(b"ok")
    (tmp_path / "secret.mp4").write_bytes(b"not the dataset's")
    assert dataset_file(root, "videos/a.mp4") == (root / "videos" / "a.mp4").resolve()
    for relative in ("../secret.mp4", "videos/../../secret.mp4", str(tmp_path / "secret.mp4"), "", "videos\\a.mp4"):
        with pytest.raises(OutsideDatasetError):
            dataset_file(root, relative)
    (root / "videos" / "link.mp4").symlink_to(tmp_path / "secret.mp4")
    with pytest.raises(OutsideDatasetError):
        dataset_file(root, "videos/link.mp4")


def test_read_only_while_a_writer_holds_the_dataset(server: Server, browser: Any, dataset: Path) -> None:
    handle = lock_dataset(dataset)
    try:
        browser.get(server.url + "/episodes/000000")
        assert "read-only" in by_testid(browser, "read-only").text
        for control in ("save", "delete", "notes", "outcome-failure", "flag"):
            assert not by_testid(browser, control).is_enabled(), control
        screenshot(browser, "read-only")
        status, answer = server.post_json("/api/episodes/000000/labels", {"success": False})
        assert status == 409 and "read-only" in answer["error"]
        assert server.post_json("/api/episodes/000000/delete", {})[0] == 409
    finally:
        unlock_dataset(dataset, handle)
    with run_lock(dataset):  # an ortf-bag2ortf run into the dataset, between two recordings
        assert server.post_json("/api/episodes/000000/labels", {"success": False})[0] == 409
    assert episodes_table(dataset)["000000"]["success"] is True


def test_decisions_are_saved_into_the_dataset(server: Server, browser: Any, dataset: Path) -> None:
    browser.get(server.url + "/episodes/000001")
    by_testid(browser, "outcome-failure").click()
    by_testid(browser, "failure-reason").send_keys("dropped the box")
    notes = by_testid(browser, "notes")
    notes.clear()
    notes.send_keys("camera 2 glare at 1.5 s")
    by_testid(browser, "flag").click()
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="saved"]')
    by_testid(browser, "save").click()
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="saved"]'))
    screenshot(browser, "saved")
    row = episodes_table(dataset)["000001"]
    assert (row["success"], row["failure_reason"], row["operator_notes"], row["review_flag"]) == (
        False,
        "dropped the box",
        "camera 2 glare at 1.5 s",
        True,
    )
    browser.refresh()  # the page reads them back too
    assert by_testid(browser, "outcome-failure").is_selected() and by_testid(browser, "flag").is_selected()


def test_delete_with_confirmation_leaves_a_valid_dataset(server: Server, browser: Any, dataset: Path) -> None:
    browser.get(server.url + "/episodes/000002")
    by_testid(browser, "delete").click()
    confirm = by_testid(browser, "confirm-delete")
    assert confirm.is_displayed() and "000002" in episodes_table(dataset)
    confirm.click()
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="deleted"]'))  # the list, told
    assert by_testid(browser, "deleted").text == "Episode 000002 was deleted from the dataset."
    ids = [
        r.get_attribute("data-episode-id")
        for r in browser.find_elements(By.CSS_SELECTOR, '[data-testid="episode-row"]')
    ]
    assert ids == ["000000", "000001"] and set(episodes_table(dataset)) == {"000000", "000001"}
    assert ortf_main(["validate", "--strict", str(dataset)]) == 0
