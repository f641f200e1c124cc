"""RGB frames to yuv420p for the H.264 encoder, in about half the time swscale takes.

Why: converting RGB to YUV is a large part of what encoding costs at the fast x264
presets, and PyAV's encode path converts with swscale. One thread, 640x480 rgb24, on
the benchmark machine (``bench/bench_bag2ortf.py``, "colour conversion"):
- swscale: about 0.85 ms a frame, out of about 2 ms for the whole ultrafast encode;
- OpenCV, as here: about 0.45 ms.

The colours are swscale's for untagged RGB: BT.601, limited range.
- Luma is OpenCV's fixed-point RGB to I420: within 1 of swscale's, and rounded the
  other way on about 2 % of pixels.
- Chroma is the mean of each 2x2 block: OpenCV's YCrCb of the block means, scaled to
  limited range, within 1.6 of the exact value (four roundings: the block mean, the
  luma OpenCV takes Cb and Cr from, Cb and Cr, the range; 1.51 is the most measured).
  That is swscale's siting (the block's centre); swscale's filter also reaches the
  rows above and below (1/8, 3/8, 3/8, 1/8).
  OpenCV's own I420 takes each block's top-left pixel, which aliases on colour edges.

After H.264 at crf 23, measured against swscale's conversion:
- on a real camera image panned across with sensor noise: the same PSNR (within
  0.1 dB) and the same file size;
- on the benchmark's noise-free synthetic gradients: 0.2-0.4 dB lower, and at
  veryfast up to 20 % larger (tiny) files. The rounding differences are noise that
  x264 must encode where the source has none.
"""

from __future__ import annotations

import cv2
import numpy as np

# Full-range chroma (OpenCV's YCrCb: 128 +- 127.5) to limited range (128 +- 112).
_LIMITED = 224 / 255
_LIMITED_OFFSET = 128 * (1 - _LIMITED)


class I420Converter:
    """Converts H x W x 3 rgb24 frames (H and W even) into the planes of yuv420p."""

    def __init__(self, width: int, height: int) -> None:
        if width % 2 or height % 2:
            raise ValueError(f"yuv420p needs an even width and height, got {width}x{height}")
        self.width, self.height = width, height
        self._yuv = np.empty((height * 3 // 2, width), np.uint8)  # I420: Y, then U and V, packed
        self._block_means = np.empty((height // 2, width // 2, 3), np.uint8)

    def convert(self, image: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The Y (H x W), U and V (H/2 x W/2 each) planes, overwritten by the next call."""
        height, width = self.height, self.width
        if image.shape != (height, width, 3) or image.dtype != np.uint8:
            # (OpenCV would write a new array of that shape instead of ours, and say nothing.)
            raise ValueError(f"expected a {width}x{height} rgb24 frame, got {image.dtype.name} {image.shape}")
        yuv, means = self._yuv, self._block_means
        cv2.cvtColor(image, cv2.COLOR_RGB2YUV_I420, dst=yuv)  # luma (its chroma is replaced below)
        cv2.resize(image, (width // 2, height // 2), dst=means, interpolation=cv2.INTER_AREA)
        cv2.cvtColor(means, cv2.COLOR_RGB2YCrCb, dst=means)
        cv2.convertScaleAbs(means, dst=means, alpha=_LIMITED, beta=_LIMITED_OFFSET)
        u, v = yuv[height:].reshape(2, height // 2, width // 2)
        cv2.mixChannels([means], [u, v], [2, 0, 1, 1])  # Cb to U, Cr to V
        return yuv[:height], u, v
