"""Which recorded values are images, and how their rows become pictures: one rule for the viewer
page (`trajcore.viewer`) and the video export (`trajcore.formats.to_mp4`).

Plain values in, plain values out: nothing here reads a file.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["SMALL_IMAGE_SIDE", "image_shape", "pictures"]

SMALL_IMAGE_SIDE = 4
"""Smallest side of a uint8 HxWx1/3/4 array shown as an image (other images: 8)."""


def image_shape(shape: tuple[int, ...], dtype: np.dtype[Any]) -> str | None:
    """How a row of this shape and dtype is shown as an image, or None when it is not one.

    Returns:
        ``"hwc"`` (height, width, 1/3/4 channels), ``"hw"`` (grey) or ``"chw"`` (a stack of
        grey frames, channels first, as ``FrameStackObservation`` over grey frames gives:
        the last one is shown).
    """
    if dtype.kind not in "uif" or len(shape) not in (2, 3):
        return None
    if len(shape) == 2:
        return "hw" if min(shape) >= 8 else None
    # uint8 with a channel axis is an image even when small (MiniGrid's 7x7x3 view).
    if shape[2] in (1, 3, 4) and min(shape[:2]) >= (SMALL_IMAGE_SIDE if dtype == np.uint8 else 8):
        return "hwc"
    if shape[0] <= 8 and min(shape[1:]) >= 8:
        return "chw"
    return None


def pictures(values: npt.NDArray[Any], layout: str) -> npt.NDArray[Any]:
    """Rows of an image-shaped column (`image_shape`'s `layout`) as (rows, H, W, 1 or 3), values
    unchanged: a grey frame gets a channel axis, a channels-first stack gives its newest (last)
    frame, RGBA drops its alpha. A view where numpy can make one."""
    if layout == "hw":
        values = values[..., None]
    elif layout == "chw":
        values = values[:, -1, :, :, None]
    if values.shape[-1] == 4:
        values = values[..., :3]
    return values
