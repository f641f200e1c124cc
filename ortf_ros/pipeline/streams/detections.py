"""Detections a recording carries (``vision_msgs/Detection2DArray``) as an episode's annotations:
the boxes nearest in time to the episode's first frame of the mapped camera become its
``scene_objects.json``, drawn on that frame as ``first_frame.jpg`` (the rendering
``ortf annotate`` uses: ``dataset.annotate.render_annotations``). The same for a live recorder
and a conversion: both assemble through ``pipeline.assembly``, which hands this the camera's
first frame and every detections message of the episode.

Memory: the first frame (one copy) and at most ``EARLY_KEPT`` messages received before it (a
detector's output may arrive before the frame it was computed from is recorded); after it, only
the best message so far.

Boxes: ``BoundingBox2D`` is a centre and a size in floating-point pixels (a rotation ``theta``
is ignored: the spec's boxes are upright); it becomes the spec's top-left ``x``, ``y``, ``width``,
``height`` in whole pixels, clipped to the frame; a box with nothing inside the frame is left
out. The class is the best hypothesis's class id, named through the mapping's ``labels``; the
label is the detection's ``id`` (a tracker's) when it has one, else the class and a letter
(``cup A``, ``cup B``), as the spec's ``Box A`` and ``Bowl A``, so objects of a class are told apart.
``annotated_at`` is the chosen message's stamp (when the detector saw the scene), so converting
a recording again writes the same file.
"""

from __future__ import annotations

from collections import Counter, deque

import numpy as np

from ortf_ros.dataset.annotate import Rendered, render_annotations
from ortf_ros.dataset.catalog import iso_utc
from ortf_ros.dataset.writer import Annotations
from ortf_ros.format.scene_objects import PALETTE, BoundingBox, SceneObject, SceneObjects
from ortf_ros.format.sensors import Sensor
from ortf_ros.format.units import NS
from ortf_ros.pipeline.mapping import DetectionsMapping
from ortf_ros.pipeline.samples import DetectedBox, DetectionsSample

EARLY_KEPT = 8


def scene_objects(boxes: tuple[DetectedBox, ...], labels: dict[str, str], width: int, height: int) -> list[SceneObject]:
    """Detected boxes as the spec's objects in a ``width`` x ``height`` frame (see the module's docstring)."""
    objects: list[SceneObject] = []
    numbers: Counter[str] = Counter()
    for box in boxes:
        left = min(max(round(box.center_x - box.size_x / 2), 0), width)
        top = min(max(round(box.center_y - box.size_y / 2), 0), height)
        right = min(max(round(box.center_x + box.size_x / 2), 0), width)
        bottom = min(max(round(box.center_y + box.size_y / 2), 0), height)
        if right <= left or bottom <= top:
            continue
        object_class = labels.get(box.class_id, box.class_id) or "object"
        numbers[object_class] += 1
        label = box.object_id or f"{object_class} {_letters(numbers[object_class])}"
        colour = PALETTE[len(objects) % len(PALETTE)]
        objects.append(SceneObject(label, object_class, BoundingBox(left, top, right - left, bottom - top), colour))
    return objects


def _letters(number: int) -> str:
    """1 -> A, 26 -> Z, 27 -> AA: the spec's ``Box A``, ``Bowl A``."""
    text = ""
    while number > 0:
        number, rest = divmod(number - 1, 26)
        text = chr(ord("A") + rest) + text
    return text


class FirstFrameDetections:
    """The detections of one episode nearest its first frame of ``mapping.camera``."""

    def __init__(self, mapping: DetectionsMapping, sensor: Sensor) -> None:
        self.mapping = mapping
        self.sensor = sensor
        self._frame: np.ndarray | None = None
        self._frame_ns = 0
        self._early: deque[tuple[int, DetectionsSample]] = deque(maxlen=EARLY_KEPT)
        self._best: tuple[int, int, DetectionsSample] | None = None  # (distance, time, message)

    def first_frame(self, time_ns: int, pixels: np.ndarray) -> None:
        """The camera's frame 0 of the episode (copied: the caller's buffer is reused)."""
        self._frame, self._frame_ns = np.array(pixels), time_ns
        while self._early:
            self._consider(*self._early.popleft())

    def offer(self, topic: str, time_ns: int, sample: DetectionsSample) -> bool:
        """A detections message of the episode (its time on the mapping's clock): kept if it may
        be the nearest to the first frame. Whether it was looked at (on the mapped topic)."""
        if topic != self.mapping.topic:
            return False
        if self._frame is None:
            self._early.append((time_ns, sample))
        else:
            self._consider(time_ns, sample)
        return True

    def _consider(self, time_ns: int, sample: DetectionsSample) -> None:
        distance = abs(time_ns - self._frame_ns)
        if self._best is None or distance < self._best[0]:
            self._best = (distance, time_ns, sample)

    def rendered(self, clock_origin_ns: int | None) -> Rendered | None:
        """The annotations (None: no frame or no detections in the episode); ``clock_origin_ns``:
        the episode clock's zero, for ``annotated_frame_timestamp``."""
        if self._frame is None or self._best is None:
            return None
        assert self.sensor.resolution is not None  # cameras have one
        width, height = self.sensor.resolution.width, self.sensor.resolution.height
        objects = scene_objects(self._best[2].boxes, dict(self.mapping.labels), width, height)
        origin = clock_origin_ns if clock_origin_ns is not None else self._frame_ns
        stamps = self._best[2].stamps
        document = SceneObjects(
            tuple(objects),
            annotated_at=iso_utc(stamps.header_ns or stamps.receive_ns),  # the detector's time: a rerun gives the same
            annotated_frame=0,
            annotated_frame_timestamp=(self._frame_ns - origin) / NS,
            camera=self.mapping.camera,
        )
        return render_annotations(document, self._frame, self.sensor)


def with_detections(annotations: Annotations | None, rendered: Rendered | None) -> Annotations | None:
    """``annotations`` (a recorder's, or none) with the detections' scene objects and picture added."""
    if rendered is None:
        return annotations
    scene = rendered.scene_objects.to_dict()
    if annotations is None:
        return Annotations(scene_objects=scene, first_frame_jpeg=rendered.first_frame_jpeg)
    return Annotations(scene, rendered.first_frame_jpeg, annotations.recording)
