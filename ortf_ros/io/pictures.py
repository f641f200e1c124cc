"""Still pictures for people: a frame with its labelled boxes drawn, a depth frame in colour,
as JPEG (OpenCV, already a dependency for the encoder's colour conversion).

``annotations/episode_N/first_frame.jpg`` and ``depth_colorized.jpg`` are made here, and the
review page's depth pictures use the same colour map, so a colour means the same in both.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ortf_ros.format.scene_objects import SceneObject

JPEG_QUALITY = 90
BOX_THICKNESS = 2
FONT = cv2.FONT_HERSHEY_SIMPLEX
FONT_SCALE = 0.4


def encode_jpeg(bgr: np.ndarray, quality: int = JPEG_QUALITY) -> bytes:
    ok, encoded = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return bytes(encoded)


def annotated_jpeg(rgb: np.ndarray, objects: Sequence[SceneObject]) -> bytes:
    """``rgb`` (H x W x 3 uint8) with each object's box outlined (2 px, inside the box) in its
    colour and its label on a filled tab of that colour above the box (inside, at a frame's top edge)."""
    picture = np.ascontiguousarray(rgb[:, :, ::-1])  # OpenCV draws on BGR
    for item in objects:
        box = item.bounding_box
        red, green, blue = item.rgb
        colour = (blue, green, red)
        left, top = round(box.x), round(box.y)
        right, bottom = max(left, round(box.x + box.width) - 1), max(top, round(box.y + box.height) - 1)
        for ring in range(BOX_THICKNESS):  # 1 px rings inward: the outline's outer edge is the box's edge
            cv2.rectangle(picture, (left + ring, top + ring), (right - ring, bottom - ring), colour, 1)
        (text_width, text_height), baseline = cv2.getTextSize(item.label, FONT, FONT_SCALE, 1)
        tab_height = text_height + baseline + 2
        tab_top = top - tab_height if top >= tab_height else top + BOX_THICKNESS
        cv2.rectangle(picture, (left, tab_top), (left + text_width + 4, tab_top + tab_height), colour, cv2.FILLED)
        ink = (0, 0, 0) if 0.299 * red + 0.587 * green + 0.114 * blue > 150 else (255, 255, 255)
        cv2.putText(picture, item.label, (left + 2, tab_top + text_height + 1), FONT, FONT_SCALE, ink, 1, cv2.LINE_AA)
    return encode_jpeg(picture)


def depth_span(depth: np.ndarray) -> tuple[float, float]:
    """The depths the colour map spans when no useful range is declared: the 2nd to 98th
    percentile of a frame's readings (zero is no reading)."""
    readings = depth[depth > 0]
    if not readings.size:
        return 0.0, 1.0
    low, high = np.percentile(readings, [2, 98])
    return float(low), float(max(high, low + 1))


def colourise_depth(depth: np.ndarray, span: tuple[float, float]) -> np.ndarray:
    """A BGR picture of a depth frame (turbo colour map, near is blue, ``span`` in the frame's
    units); zero (no reading) black."""
    valid = depth > 0
    low, high = span
    scaled = (np.clip((depth.astype(np.float32) - low) / max(high - low, 1.0), 0.0, 1.0) * 255).astype(np.uint8)
    picture: np.ndarray = cv2.applyColorMap(scaled, cv2.COLORMAP_TURBO)
    picture[~valid] = 0
    return picture
