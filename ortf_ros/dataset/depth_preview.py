"""``annotations/episode_N/depth_colorized.jpg``: what a depth camera saw at the start of the
episode, in colour, for a person browsing the dataset.

Made from the episode's first depth frame as the writer takes it (``DatasetWriter.add_frame``),
not decoded back from the video at the commit: one small frame, colourised and encoded once per
episode and camera, staged with the episode so that the commit (live, offline, or ``ortf
recover``'s) moves it in place with the rest.

Colours: the turbo map (near is blue, far is red; no reading is black) over the sensor's
declared ``depth_range``, so a colour is the same distance in every episode. A range that only
says what 16-bit millimetres can hold (0 to 65.535 m, what conversions declare when the
recording does not say) would paint a table-top scene in one colour: such a range is replaced by
the frame's own (its 2nd to 98th percentile of readings), as the review page does.

Several depth cameras: the first (manifest order) is ``depth_colorized.jpg``, the spec's name,
and each other ``depth_colorized_<camera>.jpg``, so readers that know only the spec's file find
the first camera's and nothing is lost of the others.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ortf_ros.format.manifest import Manifest
from ortf_ros.format.scene_objects import DEPTH_COLORIZED_FILE
from ortf_ros.format.sensors import Sensor
from ortf_ros.io import atomic
from ortf_ros.io.pictures import colourise_depth, depth_span, encode_jpeg

FULL_SCALE_M = 65.0
"""A declared range reaching this far (metres) is 16-bit millimetres' whole span, not a sensor's."""

METRE_UNITS = ("meters", "metres")
"""``depth_units`` of frames in metres; any other (``millimeters``, the spec's) is taken as millimetres."""


def depth_preview_name(manifest: Manifest, camera: str) -> str:
    """``depth_colorized.jpg`` for the manifest's first depth camera, ``depth_colorized_<camera>.jpg`` else."""
    first = next((key for key, sensor in manifest.cameras.items() if sensor.is_depth), None)
    return DEPTH_COLORIZED_FILE if camera == first else f"depth_colorized_{camera}.jpg"


def colour_range(sensor: Sensor, depth: np.ndarray) -> tuple[float, float]:
    """The frame values (in ``depth_units``) the colour map spans: the declared range, or the frame's."""
    declared = sensor.extra.get("depth_range")
    if (
        isinstance(declared, (list, tuple))
        and len(declared) == 2
        and all(isinstance(v, (int, float)) for v in declared)
        and 0 <= declared[0] < declared[1] < FULL_SCALE_M
    ):
        per_metre = 1.0 if sensor.extra.get("depth_units") in METRE_UNITS else 1000.0
        return float(declared[0]) * per_metre, float(declared[1]) * per_metre
    return depth_span(depth)


def depth_preview_jpeg(sensor: Sensor, depth: np.ndarray) -> bytes:
    """``depth`` (H x W uint16, the sensor's ``depth_units``) as the colourised JPEG."""
    return encode_jpeg(colourise_depth(depth, colour_range(sensor, depth)))


def stage_depth_preview(directory: Path, manifest: Manifest, camera: str, depth: np.ndarray) -> None:
    """Write the picture of ``camera``'s first frame ``depth`` into the staged annotations ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    picture = depth_preview_jpeg(manifest.cameras[camera], depth)
    atomic.write_bytes(directory / depth_preview_name(manifest, camera), picture)
