"""The scene's lidar (``TeleopConfig.lidar``): a 2D scan and an organized point cloud in
``LIDAR_FRAME``, their values exact functions of the sequence number (their messages:
``sensor_messages``).

The scan holds REP 117's +inf (no return), -inf (too close) and NaN (invalid) at fixed
places, and the cloud a NaN point and padding bytes between fields and after each row,
so a test sees a converter keep the values as sent and drop the padding.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

SCAN_RATE_HZ = 10
SCAN_SAMPLES = 90
SCAN_ANGLE_MIN, SCAN_ANGLE_INCREMENT = -math.pi / 2, math.pi / 90
SCAN_RANGE = (0.05, 12.0)
CLOUD_RATE_HZ = 5
CLOUD_HEIGHT, CLOUD_WIDTH = 2, 8  # an organized cloud
CLOUD_POINT_STEP = 32  # x, y, z (float32) at 0, 4, 8; 4 bytes of padding; intensity, ring, time after
CLOUD_ROW_PADDING = 8  # bytes after each row's points (row_step = width * point_step + this)
CLOUD_FIELDS = (
    ("x", 0, 7, 1),
    ("y", 4, 7, 1),
    ("z", 8, 7, 1),
    ("intensity", 16, 7, 1),
    ("ring", 20, 4, 1),
    ("time", 24, 8, 1),
)
"""(name, offset, datatype, count) of each PointField: float32 xyz and intensity, uint16 ring, float64 time."""


def scan_ranges(seq: int) -> np.ndarray:
    """Scan ``seq``'s ranges (float32): a wall that moves, with REP 117's +inf (no return),
    -inf (too close) and NaN (invalid) at fixed places."""
    i = np.arange(SCAN_SAMPLES)
    ranges = (2.0 + 0.01 * i + 0.05 * math.sin(seq / 3)).astype(np.float32)
    ranges[7::17] = np.inf
    ranges[3] = -np.inf
    ranges[11] = np.nan
    return ranges


def scan_intensities(seq: int) -> np.ndarray:
    return (np.arange(SCAN_SAMPLES) * 0.5 + seq).astype(np.float32)


def cloud_values(seq: int) -> dict[str, np.ndarray]:
    """Cloud ``seq``'s points, row-major, per field (``CLOUD_FIELDS``); one point is NaN (not dense)."""
    n = CLOUD_HEIGHT * CLOUD_WIDTH
    k = np.arange(n)
    x = (0.5 + 0.1 * k + 0.01 * seq).astype(np.float32)
    x[5] = np.nan
    return {
        "x": x,
        "y": (np.sin(k + seq) * 2).astype(np.float32),
        "z": (0.25 * (k // CLOUD_WIDTH)).astype(np.float32),
        "intensity": (k * 3.0 + seq).astype(np.float32),
        "ring": (k // CLOUD_WIDTH).astype(np.uint16),
        "time": (seq / CLOUD_RATE_HZ + k * 1e-5).astype(np.float64),
    }


def cloud_data(seq: int) -> bytes:
    """Cloud ``seq`` as PointCloud2 ``data``: ``CLOUD_FIELDS`` at their offsets, padding of
    0xAB between fields and after each row (which must not reach the dataset)."""
    names = [f[0] for f in CLOUD_FIELDS]
    formats = ["<" + {4: "u2", 7: "f4", 8: "f8"}[f[2]] for f in CLOUD_FIELDS]
    # (Any: numpy's stubs type this dict differently for Python 3.10 and 3.12)
    spec: Any = {
        "names": names,
        "formats": formats,
        "offsets": [f[1] for f in CLOUD_FIELDS],
        "itemsize": CLOUD_POINT_STEP,
    }
    dtype = np.dtype(spec)
    raw = np.full((CLOUD_HEIGHT, CLOUD_WIDTH * CLOUD_POINT_STEP + CLOUD_ROW_PADDING), 0xAB, np.uint8)
    points = raw[:, : CLOUD_WIDTH * CLOUD_POINT_STEP].copy().reshape(-1).view(dtype)
    for name, values in cloud_values(seq).items():
        points[name] = values
    raw[:, : CLOUD_WIDTH * CLOUD_POINT_STEP] = points.view(np.uint8).reshape(CLOUD_HEIGHT, -1)
    return raw.tobytes()
