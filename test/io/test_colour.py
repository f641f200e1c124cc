"""io.colour: RGB to yuv420p as swscale does it (BT.601, limited range), chroma the 2x2 mean."""

from __future__ import annotations

import av
import numpy as np
import pytest

from ortf_ros.io.colour import I420Converter


def _exact_chroma(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """BT.601 limited-range Cb, Cr of each 2x2 block's mean, unrounded."""
    r, g, b = np.moveaxis(image.astype(np.float64), -1, 0)
    cb = 128 + (-0.168736 * r - 0.331264 * g + 0.5 * b) * 224 / 255
    cr = 128 + (0.5 * r - 0.418688 * g - 0.081312 * b) * 224 / 255
    height, width = image.shape[:2]
    blocks = (height // 2, 2, width // 2, 2)
    return cb.reshape(blocks).mean(axis=(1, 3)), cr.reshape(blocks).mean(axis=(1, 3))


@pytest.mark.parametrize(("width", "height"), [(640, 480), (1280, 720), (100, 50), (2, 2), (10, 6)])
def test_luma_is_swscales_and_chroma_the_mean_of_each_block(width: int, height: int) -> None:
    image = np.random.default_rng(width).integers(0, 256, (height, width, 3), dtype=np.uint8)
    luma, u, v = I420Converter(width, height).convert(image)
    assert luma.shape == (height, width) and u.shape == v.shape == (height // 2, width // 2)
    swscale = av.VideoFrame.from_numpy_buffer(image, format="rgb24").reformat(format="yuv420p").to_ndarray()
    assert np.abs(luma.astype(int) - swscale[:height]).max() <= 1
    exact_u, exact_v = _exact_chroma(image)
    assert np.abs(u - exact_u).max() <= 1.6  # four roundings: the block mean, Y, Cb / Cr, the range
    assert np.abs(v - exact_v).max() <= 1.6


def test_saturated_colours_land_on_the_limited_range_extremes() -> None:
    # Blue on the left half, red on the right: Cb at 240 / Cr at 240 where each is strongest.
    image = np.zeros((4, 8, 3), np.uint8)
    image[:, :4, 2] = 255
    image[:, 4:, 0] = 255
    converter = I420Converter(8, 4)
    _, u, v = converter.convert(image)
    assert u[:, :2].tolist() == [[240, 240]] * 2 and v[:, 2:].tolist() == [[240, 240]] * 2
    for value, luma in ((0, 16), (255, 235)):  # black, white: no colour
        planes = converter.convert(np.full((4, 8, 3), value, np.uint8))
        assert [set(plane.ravel().tolist()) for plane in planes] == [{luma}, {128}, {128}]


def test_an_odd_size_is_refused() -> None:
    with pytest.raises(ValueError, match="even width and height, got 5x4"):
        I420Converter(5, 4)


def test_a_frame_of_another_size_or_type_is_refused() -> None:
    converter = I420Converter(8, 4)
    for frame in (np.zeros((4, 6, 3), np.uint8), np.zeros((4, 8, 4), np.uint8), np.zeros((4, 8, 3), np.uint16)):
        with pytest.raises(ValueError, match=r"expected a 8x4 rgb24 frame, got"):
            converter.convert(frame)
