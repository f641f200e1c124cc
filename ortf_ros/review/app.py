"""The review's routes: pages, videos, plot data, findings and decisions.

Requests name episodes (checked against the index) and cameras (checked against the
manifest), never paths; the files they lead to are checked to lie inside the dataset
(``access.dataset_file``). Writes are POSTs of JSON from the page itself (a request from
another origin, or not JSON, is refused: a web page elsewhere cannot make the browser
post here), refused with 409 while a writer holds the dataset.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Callable
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ortf_ros.dataset.edits import delete_episodes, set_episode_labels
from ortf_ros.dataset.reader import Episode
from ortf_ros.errors import (
    DatasetBusyError,
    HttpError,
    OrtfError,
    OutsideDatasetError,
    UnknownEpisodeError,
    UsageError,
    os_error_line,
)
from ortf_ros.format.scene_objects import FIRST_FRAME_FILE
from ortf_ros.review import pages
from ortf_ros.review.access import dataset_file, writer_active
from ortf_ros.review.catalog import DatasetView, Snapshot
from ortf_ros.review.depth import DepthPictures
from ortf_ros.review.findings import Findings
from ortf_ros.review.plots import episode_plots

STATIC = {
    "review.css": "text/css; charset=utf-8",
    "list.js": "text/javascript; charset=utf-8",
    "episode.js": "text/javascript; charset=utf-8",
}
"""The page's own assets (package data of ``ortf_ros.review``), the only names served
besides ``plotly.min.js``."""


CACHED = {"Cache-Control": "max-age=3600"}
"""Assets a page visited again need not fetch: an hour, so an upgrade shows within one."""


def plotly_js() -> Path:
    """The plotting library's JavaScript, as the installed ``plotly`` package ships it."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise HttpError(404, "plotly is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"


def rerun_available() -> bool:
    """Whether the episode page may offer the episode as a Rerun recording (the ``rerun``
    extra and the exporter both installed)."""
    try:
        return (
            importlib.util.find_spec("rerun") is not None
            and importlib.util.find_spec("ortf_ros.convert.rerun_export") is not None
        )
    except (ImportError, ValueError):
        return False


class Review:
    """The state behind the routes: the dataset as last read, the doctor's worker, the
    depth decoders."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.view = DatasetView(root)
        self.findings = Findings(root)
        self.depth = DepthPictures()
        self.reading = threading.Lock()  # one reader at a time: the reader's table cache is not thread-safe
        self.exporting = threading.Lock()  # one Rerun export at a time
        self.rerun = rerun_available()

    def read_only(self) -> bool:
        return writer_active(self.root)

    def episode(self, request: Request) -> tuple[Snapshot, Episode]:
        snapshot = self.view.current()
        try:
            return snapshot, snapshot.dataset.episode(str(request.path_params["episode_id"]))
        except UnknownEpisodeError:
            raise HttpError(404, f"no episode {request.path_params['episode_id']!r} in this dataset") from None

    def camera(self, episode: Episode, request: Request, *, depth: bool) -> tuple[str, Path]:
        camera = str(request.path_params["camera"])
        sensor = episode.dataset.manifest.cameras.get(camera)
        relative = episode.record.video_files.get(camera) if sensor is not None else None
        if sensor is None or sensor.is_depth != depth or not relative:
            raise HttpError(
                404, f"episode {episode.episode_id} has no {'depth' if depth else 'colour'} camera {camera!r}"
            )
        try:
            return camera, dataset_file(self.root, relative)
        except OutsideDatasetError:
            raise HttpError(403, f"{relative}: outside the dataset") from None
        except FileNotFoundError:
            raise HttpError(404, f"{relative}: missing") from None

    # ---------------------------------------------------------------- pages

    def list_page(self, request: Request) -> Response:
        snapshot = self.view.current()
        self.findings.request(e.episode_id for e in snapshot.dataset.episodes)
        return HTMLResponse(pages.list_page(snapshot, self.read_only()))

    def episode_page(self, request: Request) -> Response:
        snapshot, episode = self.episode(request)
        self.findings.request([episode.episode_id], first=True)
        return HTMLResponse(pages.episode_page(snapshot, episode, self.read_only(), self.rerun))

    def static(self, request: Request) -> Response:
        name = str(request.path_params["name"])
        if name == "plotly.min.js":
            return FileResponse(plotly_js(), media_type="text/javascript; charset=utf-8", headers=CACHED)
        if name not in STATIC:
            raise HttpError(404, f"no asset {name!r}")
        data = resources.files("ortf_ros.review").joinpath("static").joinpath(name).read_bytes()
        return Response(data, media_type=STATIC[name], headers=CACHED)

    # ---------------------------------------------------------------- media and data

    def video(self, request: Request) -> Response:
        _, episode = self.episode(request)
        _, path = self.camera(episode, request, depth=False)
        return FileResponse(path, media_type="video/mp4")  # answers Range requests (206)

    def depth_picture(self, request: Request) -> Response:
        _, episode = self.episode(request)
        camera, _ = self.camera(episode, request, depth=True)
        try:
            time_s = float(request.query_params.get("t", "-inf"))
        except ValueError:
            raise HttpError(400, "t: expected a time in seconds") from None
        with self.reading:
            data = self.depth.jpeg(episode, camera, time_s)
        return Response(data, media_type="image/jpeg", headers=CACHED)

    def annotated_frame(self, request: Request) -> Response:
        _, episode = self.episode(request)
        relative = (episode.annotations_dir / FIRST_FRAME_FILE).relative_to(episode.dataset.root).as_posix()
        try:
            return FileResponse(dataset_file(self.root, relative), media_type="image/jpeg")
        except OutsideDatasetError:
            raise HttpError(403, f"{relative}: outside the dataset") from None
        except FileNotFoundError:
            raise HttpError(404, f"episode {episode.episode_id} has no {FIRST_FRAME_FILE}") from None

    def plots(self, request: Request) -> Response:
        _, episode = self.episode(request)
        with self.reading:
            return JSONResponse(episode_plots(episode))

    def episode_findings(self, request: Request) -> Response:
        _, episode = self.episode(request)
        self.findings.request([episode.episode_id], first=True)
        return JSONResponse(self.findings.state(episode.episode_id))

    def all_findings(self, request: Request) -> Response:
        return JSONResponse({"counts": self.findings.counts(), "failed": self.findings.failures()})

    def rerun_recording(self, request: Request) -> Response:
        """The episode as a Rerun recording, made on request: a whole export, so one at a time,
        and only for the page's own links (a GET another site's page makes, an ``<img>``
        pointing here, says so in ``Sec-Fetch-Site`` and is refused)."""
        _, episode = self.episode(request)
        if not self.rerun:
            raise HttpError(404, "Rerun export needs pip install 'ortf_ros[rerun]'")
        if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            raise HttpError(403, "a Rerun export is made for this page's own links only")
        if not self.exporting.acquire(blocking=False):
            raise HttpError(429, "a Rerun export is being made; try again when it is done")
        from ortf_ros.convert.rerun_export import export_rerun

        folder = Path(tempfile.mkdtemp(prefix="ortf-review-"))
        out = folder / f"episode_{episode.episode_id}.rrd"
        try:
            export_rerun(self.root, out, [episode.episode_id])
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            self.exporting.release()
        return FileResponse(
            out,
            media_type="application/octet-stream",
            filename=out.name,
            background=BackgroundTask(shutil.rmtree, folder, ignore_errors=True),
        )

    # ---------------------------------------------------------------- decisions

    def _writable(self, request: Request) -> None:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            raise HttpError(415, "expected a JSON body (Content-Type: application/json)")
        origin = request.headers.get("origin")
        if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
            raise HttpError(403, f"a request from {origin} is refused")
        if self.read_only():
            raise HttpError(409, "a recorder is writing this dataset: it is open read-only")

    async def save(self, request: Request) -> Response:
        self._writable(request)
        try:
            body = await request.json()
        except ValueError:
            raise HttpError(400, "the body is not valid JSON") from None
        labels = decision_labels(body)
        before, episode = self.episode(request)
        episode_id = episode.episode_id
        await _in_thread(lambda: set_episode_labels(self.root, episode_id, **labels))
        snapshot = self.view.current()
        if _labelled(before) != _labelled(snapshot):  # (whether any episode is labelled decides a rule of all)
            self.findings.forget_all()
        else:
            self.findings.forget(episode_id)
        return JSONResponse(
            {"saved": True, "episode": pages.episode_json(snapshot, snapshot.dataset.episode(episode_id))}
        )

    async def delete(self, request: Request) -> Response:
        self._writable(request)
        _, episode = self.episode(request)
        episode_id = episode.episode_id
        await _in_thread(lambda: delete_episodes(self.root, [episode_id]))
        self.findings.forget(episode_id)
        return JSONResponse({"deleted": episode_id})


def _labelled(snapshot: Snapshot) -> bool:
    """Whether some episode has an outcome: the doctor's ``episode.unlabelled`` is a finding
    only then (``quality.episode.check_outcome``)."""
    return any(record.success is not None for record in snapshot.dataset.episodes)


def decision_labels(body: object) -> dict[str, Any]:
    """The labels a save sets, from the page's JSON: each key optional, checked for its type."""
    if not isinstance(body, dict):
        raise HttpError(400, "expected a JSON object")
    kinds: dict[str, tuple[type, ...]] = {
        "success": (bool, type(None)),
        "failure_reason": (str, type(None)),
        "operator_notes": (str, type(None)),
        "review_flag": (bool,),
    }
    unknown = sorted(set(body) - set(kinds))
    if unknown:
        raise HttpError(400, f"unknown field(s) {', '.join(unknown)}; expected {', '.join(kinds)}")
    labels: dict[str, Any] = {}
    for key, value in body.items():
        if not isinstance(value, kinds[key]):
            raise HttpError(400, f"{key}: expected {' or '.join(k.__name__ for k in kinds[key])}, got {value!r}")
        labels[key] = value.strip() or None if isinstance(value, str) else value
    return labels


async def _in_thread(work: Callable[[], object]) -> None:
    await run_in_threadpool(work)


def _guarded(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
    """The handler's refusals as JSON with their status; the package's errors as 409 (a
    writer holds the dataset), 400 (the edit was refused) or 500 with their line."""

    def answer(exc: Exception) -> Response:
        if isinstance(exc, HttpError):
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        if isinstance(exc, DatasetBusyError):
            return JSONResponse({"error": f"{exc} (the dataset is open read-only)"}, status_code=409)
        status = 400 if isinstance(exc, UsageError) else 500
        line = os_error_line(exc) if isinstance(exc, OSError) else str(exc)
        return JSONResponse({"error": " ".join(line.split())}, status_code=status)

    if inspect.iscoroutinefunction(handler):

        async def run_async(request: Request) -> Response:
            try:
                return await handler(request)  # type: ignore[no-any-return]
            except (OrtfError, OSError) as exc:
                return answer(exc)

        return run_async

    def run(request: Request) -> Response:
        try:
            return handler(request)  # type: ignore[no-any-return]
        except (OrtfError, OSError) as exc:
            return answer(exc)

    return run


LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
MAX_BODY = 1 << 20
"""The largest request body taken (a save is a few hundred bytes of JSON)."""


def allowed_hosts(host: str) -> list[str]:
    """The Host headers answered: bound to the loopback, only its names (a web page whose
    domain is made to resolve to 127.0.0.1 cannot read or post through the browser);
    bound elsewhere on purpose (``--host 0.0.0.0``), any."""
    return sorted({*LOOPBACK, host}) if host in LOOPBACK else ["*"]


def create_app(root: Path, host: str = "127.0.0.1") -> Starlette:
    review = Review(root)
    routes = [
        Route("/", _guarded(review.list_page)),
        Route("/episodes/{episode_id}.rrd", _guarded(review.rerun_recording)),
        Route("/episodes/{episode_id}", _guarded(review.episode_page)),
        Route("/episodes/{episode_id}/videos/{camera}", _guarded(review.video)),
        Route("/episodes/{episode_id}/depth/{camera}", _guarded(review.depth_picture)),
        Route(f"/episodes/{{episode_id}}/annotations/{FIRST_FRAME_FILE}", _guarded(review.annotated_frame)),
        Route("/static/{name}", _guarded(review.static)),
        Route("/api/findings", _guarded(review.all_findings)),
        Route("/api/episodes/{episode_id}/plots", _guarded(review.plots)),
        Route("/api/episodes/{episode_id}/findings", _guarded(review.episode_findings)),
        Route("/api/episodes/{episode_id}/labels", _guarded(review.save), methods=["POST"]),
        Route("/api/episodes/{episode_id}/delete", _guarded(review.delete), methods=["POST"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        review.findings.stop()
        review.depth.close()

    app = Starlette(
        routes=routes,
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(host))],
        lifespan=lifespan,
        max_body_size=MAX_BODY,
    )
    app.state.review = review
    return app
