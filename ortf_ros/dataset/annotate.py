"""``ortf annotate``: an episode's labelled objects, ``annotations/episode_N/scene_objects.json``,
and the frame they were drawn on with their boxes, ``first_frame.jpg``.

An edit of a committed dataset like the labels (``ortf_ros.dataset.edits``): it holds the
writer lock and the run lock, everything is checked before anything is written (the objects'
shape, the boxes against the camera's resolution, the episode, camera and frame), and each
file is replaced atomically: the picture first, then the JSON, so a crash between the two
leaves the old objects with a new picture of the same frame at worst, never a JSON whose
picture is missing. Annotating again replaces both.

The rendering (``render_annotations``) is shared with the detections a recording carries
(``ortf_ros.pipeline.streams.detections``): one picture whether a person or a detector labelled the scene.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

from ortf_ros.dataset.catalog import utc_now_iso
from ortf_ros.dataset.edits import editing
from ortf_ros.dataset.reader import Episode, load_dataset
from ortf_ros.errors import FormatError, ReaderError, UsageError
from ortf_ros.format import layout
from ortf_ros.format.scene_objects import (
    FIRST_FRAME_FILE,
    SCENE_OBJECTS_FILE,
    SceneObjects,
    box_problem,
    default_camera,
    parse_scene_objects,
)
from ortf_ros.format.sensors import Sensor
from ortf_ros.io import atomic
from ortf_ros.io.pictures import annotated_jpeg, colourise_depth, depth_span


@dataclass(frozen=True)
class Rendered:
    """What an annotated episode's directory holds: the JSON document and the picture."""

    scene_objects: SceneObjects
    first_frame_jpeg: bytes


def read_objects_file(path: Path) -> SceneObjects:
    """The objects of a JSON or YAML file (a ``scene_objects.json``-shaped document or a bare
    list of objects; ``color`` may be left out): UsageError naming the file and the field."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))  # YAML is a superset of JSON
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"{path}: cannot read the objects ({reason})") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid JSON or YAML: {' '.join(str(exc).split())}") from None
    if isinstance(data, dict) and isinstance(data.get("annotated_at"), (dt.datetime, dt.date)):
        data["annotated_at"] = _iso(data["annotated_at"])  # YAML reads an unquoted time as a datetime
    try:
        return parse_scene_objects(data, colors_required=False)
    except FormatError as exc:
        raise UsageError(f"{path}: {exc}") from None


def render_annotations(objects: SceneObjects, frame: np.ndarray, sensor: Sensor) -> Rendered:
    """Check ``objects``' boxes against ``sensor``'s resolution (FormatError) and draw them on
    ``frame`` (RGB, or a depth frame shown in colour)."""
    assert sensor.resolution is not None  # cameras have one (manifest rule)
    problem = box_problem(objects.objects, sensor.resolution.width, sensor.resolution.height)
    if problem is not None:
        raise FormatError(f"camera {sensor.name!r}: {problem}")
    rgb = colourise_depth(frame, depth_span(frame))[:, :, ::-1] if frame.ndim == 2 else frame
    return Rendered(objects, annotated_jpeg(rgb, objects.objects))


def write_rendered(directory: Path, rendered: Rendered) -> None:
    """Both files in place atomically, the picture first (see the module's docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(directory / FIRST_FRAME_FILE, rendered.first_frame_jpeg)
    atomic.write_json(directory / SCENE_OBJECTS_FILE, rendered.scene_objects.to_dict())


def annotate_episode(
    root: Path, episode_id: str, objects: SceneObjects, *, camera: str | None = None, frame: int | None = None
) -> tuple[SceneObjects, Path]:
    """Annotate frame ``frame`` (default: the objects' ``annotated_frame``, else 0) of ``camera``
    (default: the objects' ``camera``, else the first colour camera) of the episode; returns
    what was written and where. ``annotated_at`` is now unless the objects give one."""
    root = Path(root)
    with editing(root) as manifest:
        camera = camera or objects.camera or default_camera(manifest)
        if camera is None or camera not in manifest.cameras:
            declared = sorted(manifest.cameras)
            raise UsageError(f"{root}: no camera {camera!r} to annotate; the manifest declares {declared}")
        frame = frame if frame is not None else objects.annotated_frame or 0
        if frame < 0:
            raise UsageError(f"--frame: expected a frame index >= 0, got {frame}")
        with load_dataset(root).episode(episode_id) as episode:
            if camera not in episode.record.video_files:
                raise UsageError(f"{root}: episode {episode_id} has no video of camera {camera!r}")
            try:
                picture = episode.frame(camera, frame)
            except ReaderError as exc:
                raise UsageError(f"episode {episode_id}, camera {camera!r}: no frame {frame} ({exc})") from None
            document = replace(
                objects,
                annotated_at=objects.annotated_at or utc_now_iso(),
                annotated_frame=frame,
                annotated_frame_timestamp=frame_timestamp(episode, camera, frame),
                camera=camera,
            )
            try:
                rendered = render_annotations(document, picture, manifest.cameras[camera])
            except FormatError as exc:
                raise UsageError(str(exc)) from None
            write_rendered(episode.annotations_dir, rendered)
            return document, episode.annotations_dir


def frame_timestamp(episode: Episode, camera: str, frame: int) -> float:
    """The episode time (seconds, the steps' clock) of a camera frame: the time of the first step
    that saw it or a later frame; past the last step's frame, extrapolated at the camera's rate."""
    column = layout.image_column(camera)
    last = (0.0, 0)
    for batch in episode.step_batches(["timestamp", column]):
        times = batch.column("timestamp").to_numpy()
        frames = batch.column(column).to_numpy()
        at = int(np.searchsorted(frames, frame, side="left"))
        if at < len(frames):
            return float(times[at])
        last = (float(times[-1]), int(frames[-1]))
    fps = episode.dataset.manifest.cameras[camera].fps or 30.0
    return last[0] + (frame - last[1]) / fps


def _iso(value: dt.date) -> str:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value.isoformat().replace("+00:00", "") + ("Z" if isinstance(value, dt.datetime) else "")
