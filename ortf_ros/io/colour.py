"""RGB frames to yuv420p for the H.264 encoder, in about half the time swscale takes.

Why: converting RGB to YUV is a large part of what encoding costs at the fast x264
presets, and PyAV's encode path converts with swscale's generic scaler. For 640x480
rgb24 on the benchmark machine, one thread (``bench/bench_bag2ortf.py``, "colour
conversion"):
- swscale took about 0.85 ms a frame, out of about 2 ms for the whole ultrafast encode;
- OpenCV's SIMD code here takes about 0.5 ms.

The colours are the same as swscale's for untagged RGB: BT.601, limited range.
- Luma is OpenCV's RGB to I420, within 1 of swscale's.
- Chroma is the mean of each 2x2 block, from OpenCV's YCrCb of the block means scaled
  to limited range, within 2 of the exact value. OpenCV's own I420 takes each block's
  top-left pixel instead, which aliases on colour edges. swscale's bilinear filter
  reaches a little past the block, so the two differ by a few levels at edges. Decoded
  H.264 is closer to its source with the mean: +0.5 dB PSNR on the benchmark's frames,
  at the same file size.
"""

from __future__ import annotations

import cv2
import numpy as np

# Full-range chroma (OpenCV's YCrCb: 128 +- 127.5) to limited range (128 +- 112).
_LIMITED = 224 / 255
_LIMITED_OFFSET = 128 * (1 - _LIMITED)


class I420Converter:
    """Converts H x W x 3 rgb24 frames (H and W even) into yuv420p: an (H * 3/2) x W array,
    the Y plane, then U and V, each (H/2) x (W/2), packed row after row."""

    def __init__(self, width: int, height: int) -> None:
        if width % 2 or height % 2:
            raise ValueError(f"yuv420p needs an even width and height, got {width}x{height}")
        self.width, self.height = width, height
        self._block_means = np.empty((height // 2, width // 2, 3), np.uint8)

    def convert(self, image: np.ndarray) -> np.ndarray:
        """A new array each call: an encoder may keep a reference to the frame made of it
        (x264 copies each picture, other codecs need not), so it is never overwritten."""
        height, width = self.height, self.width
        yuv = np.empty((height * 3 // 2, width), np.uint8)
        cv2.cvtColor(image, cv2.COLOR_RGB2YUV_I420, dst=yuv)  # luma (its chroma is replaced below)
        means = self._block_means
        cv2.resize(image, (width // 2, height // 2), dst=means, interpolation=cv2.INTER_AREA)
        cv2.cvtColor(means, cv2.COLOR_RGB2YCrCb, dst=means)
        cv2.convertScaleAbs(means, dst=means, alpha=_LIMITED, beta=_LIMITED_OFFSET)
        chroma = yuv[height:].reshape(2, height // 2, width // 2)
        cv2.mixChannels([means], [chroma[0], chroma[1]], [2, 0, 1, 1])  # Cb to U, Cr to V
        return yuv
