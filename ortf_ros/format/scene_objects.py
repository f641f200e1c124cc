"""``annotations/episode_N/scene_objects.json``: the labelled boxes of an episode's annotated frame.

The spec's shape (section "Annotations")::

    {"annotated_at": "2025-12-21T10:30:00Z", "annotated_frame": 0, "annotated_frame_timestamp": 0.0,
     "objects": [{"label": "Box A", "class": "box",
                  "bounding_box": {"x": 120, "y": 80, "width": 64, "height": 64}, "color": "#ef4444"}]}

Boxes are pixels of the annotated frame, top-left corner plus size. The spec does not say
which camera the frame is from; we add ``"camera"`` (the manifest's sensor key) so the boxes
can be checked against that camera's resolution, and readers that do not know the key ignore it.
The same checks serve ``ortf annotate`` (refusing bad input) and ``ortf validate`` (reporting a
bad file), so one function says what is wrong, in one line naming the object and field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from ortf_ros.errors import FormatError
from ortf_ros.format.manifest import Manifest

SCENE_OBJECTS_FILE = "scene_objects.json"
FIRST_FRAME_FILE = "first_frame.jpg"
DEPTH_COLORIZED_FILE = "depth_colorized.jpg"

COLOR = re.compile(r"#[0-9a-fA-F]{6}")
PALETTE = ("#ef4444", "#3b82f6", "#22c55e", "#f59e0b", "#a855f7", "#06b6d4", "#ec4899", "#84cc16")
"""Colours given to objects that come without one (detections, a hand-written list): the
spec example's red, blue and green first, then other Tailwind 500s, distinct on most scenes."""

BOX_KEYS = ("x", "y", "width", "height")


@dataclass(frozen=True)
class BoundingBox:
    """Top-left corner and size in pixels of the annotated frame (numbers, kept as given)."""

    x: float
    y: float
    width: float
    height: float

    def to_dict(self) -> dict[str, float]:
        return {"x": self.x, "y": self.y, "width": self.width, "height": self.height}


@dataclass(frozen=True)
class SceneObject:
    label: str
    object_class: str
    bounding_box: BoundingBox
    color: str

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "class": self.object_class, "bounding_box": self.bounding_box.to_dict(),
                "color": self.color}  # fmt: skip

    @property
    def rgb(self) -> tuple[int, int, int]:
        value = int(self.color[1:], 16)
        return value >> 16, (value >> 8) & 0xFF, value & 0xFF


@dataclass(frozen=True)
class SceneObjects:
    """A whole ``scene_objects.json``."""

    objects: tuple[SceneObject, ...]
    annotated_at: str | None = None
    annotated_frame: int | None = None
    annotated_frame_timestamp: float | None = None
    camera: str | None = None

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "annotated_at": self.annotated_at,
            "annotated_frame": self.annotated_frame,
            "annotated_frame_timestamp": self.annotated_frame_timestamp,
        }
        if self.camera is not None:
            document["camera"] = self.camera
        document["objects"] = [o.to_dict() for o in self.objects]
        return document


def parse_scene_objects(data: object, *, colors_required: bool = True) -> SceneObjects:
    """``data`` (parsed JSON or YAML) as scene objects, or FormatError saying what is wrong
    (``objects[2].bounding_box.width: expected a number >= 0, got -3``). A bare list is taken
    as the ``objects`` list. ``colors_required=False``: an object without a colour gets the
    next one of ``PALETTE`` (for input; a stored file must carry its colours)."""
    if isinstance(data, list):
        data = {"objects": data}
    if not isinstance(data, Mapping):
        raise FormatError(f"expected an object with an 'objects' list, got {_kind(data)}")
    items = data.get("objects")
    if not isinstance(items, list):
        raise FormatError(f"objects: expected a list of objects, got {_kind(items)}")
    objects = tuple(_object(item, f"objects[{i}]", i, colors_required) for i, item in enumerate(items))
    frame = data.get("annotated_frame")
    if frame is not None and not (isinstance(frame, int) and not isinstance(frame, bool) and frame >= 0):
        raise FormatError(f"annotated_frame: expected an integer >= 0, got {frame!r}")
    stamp = data.get("annotated_frame_timestamp")
    if stamp is not None and not _is_number(stamp):
        raise FormatError(f"annotated_frame_timestamp: expected a number, got {stamp!r}")
    return SceneObjects(
        objects,
        annotated_at=_optional_text(data, "annotated_at"),
        annotated_frame=frame,
        annotated_frame_timestamp=float(stamp) if stamp is not None else None,
        camera=_optional_text(data, "camera"),
    )


def box_problem(objects: Sequence[SceneObject], width: int, height: int) -> str | None:
    """The first box not inside a ``width`` x ``height`` frame, said in one line; None if all fit."""
    for i, item in enumerate(objects):
        box = item.bounding_box
        if box.x + box.width > width or box.y + box.height > height:
            return (
                f"objects[{i}].bounding_box: x {box.x:g} + width {box.width:g}, y {box.y:g} + height "
                f"{box.height:g} must fit the {width}x{height} frame"
            )
    return None


def read_scene_objects(directory: Path) -> SceneObjects | None:
    """``directory``'s ``scene_objects.json`` (None without one); FormatError if it is not the spec's shape."""
    path = directory / SCENE_OBJECTS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path}: not valid JSON: {exc}") from None
    try:
        return parse_scene_objects(data)
    except FormatError as exc:
        raise FormatError(f"{path}: {exc}") from None


def default_camera(manifest: Manifest) -> str | None:
    """The camera annotated when none is named: the first colour camera, else the first."""
    cameras = manifest.cameras
    return next((key for key, sensor in cameras.items() if not sensor.is_depth), next(iter(cameras), None))


def _object(item: object, where: str, position: int, colors_required: bool) -> SceneObject:
    if not isinstance(item, Mapping):
        raise FormatError(f"{where}: expected an object, got {_kind(item)}")
    label = _text(item, "label", where)
    object_class = _text(item, "class", where)
    box = item.get("bounding_box")
    if not isinstance(box, Mapping):
        raise FormatError(f"{where}.bounding_box: expected an object with x, y, width, height, got {_kind(box)}")
    values: list[float] = []
    for key in BOX_KEYS:
        value = box.get(key)
        if not _is_number(value) or value < 0:
            raise FormatError(f"{where}.bounding_box.{key}: expected a number >= 0, got {value!r}")
        values.append(value)
    color = item.get("color")
    if color is None and not colors_required:
        color = PALETTE[position % len(PALETTE)]
    if not (isinstance(color, str) and COLOR.fullmatch(color)):
        raise FormatError(f"{where}.color: expected a colour '#rrggbb', got {color!r}")
    return SceneObject(label, object_class, BoundingBox(*values), color.lower())


def _text(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip():
        raise FormatError(f"{where}.{key}: expected a non-empty string, got {value!r}")
    return value


def _optional_text(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise FormatError(f"{key}: expected a string, got {value!r}")
    return value


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _kind(value: object) -> str:
    return "nothing" if value is None else type(value).__name__
