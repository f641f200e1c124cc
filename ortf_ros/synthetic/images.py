"""What the scene's cameras see: RGB frames that carry their own sequence number, depth
frames that are an exact formula, and the cameras' intrinsics.

Camera frames carry their sequence number in 16x16 grey blocks that survive H.264 and
JPEG (``rgb_frame`` / ``decode_frame_number``), so a test can tell which frame a
converter stored where; the rest of each frame is a smooth moving gradient (like camera
content, unlike noise, which no video codec compresses). Depth is ``depth_frame(seq)``,
for bit-exactness checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import numpy as np

from ortf_ros.synthetic.topics import TOPIC_OVERHEAD_IMAGE, TOPIC_SIDE_IMAGE, TOPIC_WRIST_IMAGE

JPEG_FORMAT = "rgb8; jpeg compressed bgr8"
H264_GOP = 10  # an H.264 camera's keyframe interval
BLOCK = 16  # code block size in pixels (one H.264 macroblock)
CODE_DIGITS = 12  # base-4 digits: frame numbers up to 4**12 - 1
CODE_LEVELS = (32, 96, 160, 224)
_BACKGROUND_TINT = {TOPIC_WRIST_IMAGE: (40, 0, 0), TOPIC_OVERHEAD_IMAGE: (0, 0, 60), TOPIC_SIDE_IMAGE: (0, 40, 0)}
# Colour of each camera's code blocks around their grey level (mean zero, so the decoded
# level is unchanged): the cameras' frames differ even when blocks fill the image.
CODE_TINT = {TOPIC_WRIST_IMAGE: (0, 0, 0), TOPIC_OVERHEAD_IMAGE: (24, 0, -24), TOPIC_SIDE_IMAGE: (0, 24, -24)}


def check_size(width: int, height: int) -> None:
    if (width // BLOCK) * (height // BLOCK) < CODE_DIGITS or width % 2 or height % 2:
        raise ValueError(
            f"image size {width}x{height}: expected even sides and {CODE_DIGITS} {BLOCK}px code blocks (e.g. 64x48)"
        )


def _blocks(width: int) -> Iterator[tuple[int, int]]:
    cols = width // BLOCK
    for i in range(CODE_DIGITS):
        yield (i // cols) * BLOCK, (i % cols) * BLOCK


@lru_cache(maxsize=8)
def _background(camera: str, width: int, height: int) -> np.ndarray:
    """A smooth gradient twice as wide as the image; frames show a window sliding along it."""
    x = np.arange(2 * width)[None, :]
    y = np.arange(height)[:, None]
    tint = _BACKGROUND_TINT.get(camera, (0, 0, 0))
    r = 90 + 60 * np.sin(2 * np.pi * x / width) + 0 * y + tint[0]
    g = 100 + 50 * np.cos(2 * np.pi * y / height) + 0 * x + tint[1]
    b = 110 + 40 * np.sin(2 * np.pi * (x + y) / (width + height)) + tint[2]
    img: np.ndarray = np.clip(np.stack(np.broadcast_arrays(r, g, b), axis=-1), 0, 255).astype(np.uint8)
    img.flags.writeable = False
    return img


def rgb_frame(camera: str, seq: int, width: int, height: int) -> np.ndarray:
    """Frame ``seq`` of a camera topic: HxWx3 uint8 RGB, a moving gradient with the number in blocks.

    The first ``CODE_DIGITS`` 16x16 blocks (row-major from the top left) are grey, one
    base-4 digit each (least significant first) at levels ``CODE_LEVELS``, plus the
    camera's ``CODE_TINT``.
    """
    check_size(width, height)
    shift = (seq * 2) % width
    img = np.array(_background(camera, width, height)[:, shift : shift + width])
    tint = np.array(CODE_TINT.get(camera, (0, 0, 0)))
    value = seq
    for y, x in _blocks(width):
        img[y : y + BLOCK, x : x + BLOCK] = CODE_LEVELS[value % 4] + tint
        value //= 4
    return img


def decode_frame_number(rgb: np.ndarray) -> int:
    """The sequence number ``rgb_frame`` wrote into a frame (also after lossy compression)."""
    levels = np.array(CODE_LEVELS, dtype=np.float64)
    value = 0
    for i, (y, x) in enumerate(_blocks(rgb.shape[1])):
        inner = rgb[y + 4 : y + BLOCK - 4, x + 4 : x + BLOCK - 4].astype(np.float64).mean()
        value += int(np.argmin(np.abs(levels - inner))) * 4**i
    return value


@lru_cache(maxsize=4)
def _depth_base(width: int, height: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    base: np.ndarray = ((500 + 3 * x + 5 * y) % 9500).astype(np.uint16)
    base.flags.writeable = False
    return base


def depth_frame(seq: int, width: int, height: int) -> np.ndarray:
    """Depth frame ``seq``: HxW uint16 millimetres, an exact function of the pixel and ``seq``:
    ``(500 + 3 x + 5 y + 7 seq) % 9500 + 300``."""
    # Computed from a cached (500 + 3 x + 5 y) % 9500 in uint16 (a 640x480 frame in 0.05 ms
    # rather than 2-5 ms, for the live scene publisher): adding (7 seq) % 9500 + 300 gives
    # at most 19298, and 9500 comes off where the sum wrapped, i.e. where it is >= 9800.
    depth: np.ndarray = _depth_base(width, height) + np.uint16((7 * seq) % 9500 + 300)
    np.subtract(depth, 9500, out=depth, where=depth >= 9800)
    return depth


def camera_intrinsics(width: int, height: int) -> tuple[float, float, float, float]:
    """(fx, fy, cx, cy) of the wrist camera."""
    return 0.9 * width, 0.9 * width, width / 2, height / 2


CAMERA_DISTORTION = ("plumb_bob", (0.1, -0.05, 0.001, 0.002, 0.0))
