"""JPEG stills with PyAV (no OpenCV): what ``sensor_msgs/CompressedImage`` carries.

The synthetic recordings publish their cameras this way, and the player does when
asked for JPEG to save bandwidth.
"""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np

DEFAULT_QSCALE = 2  # MJPEG quantiser, 1 (best) .. 31: near-lossless, so decoded frames stay close


class JpegEncoder:
    """Encodes HxWx3 uint8 RGB frames of one size; one codec context, reused for every frame."""

    def __init__(self, width: int, height: int, qscale: int = DEFAULT_QSCALE) -> None:
        self.ctx = av.CodecContext.create("mjpeg", "w")
        self.ctx.width, self.ctx.height = width, height
        self.ctx.pix_fmt = "yuvj420p"
        self.ctx.time_base = Fraction(1, 30)
        self.ctx.options = {"qscale": str(qscale)}
        self.ctx.open()

    def encode(self, rgb: np.ndarray) -> bytes:
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuvj420p")
        data = b"".join(bytes(p) for p in self.ctx.encode(frame))
        if not data:
            raise RuntimeError("the JPEG encoder returned no image")
        return data
