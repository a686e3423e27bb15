"""Frames for the viewer page: which image an episode shows, and how its frames are packed so a
10,000-step Atari episode still opens in seconds.

Frames go in blocks of consecutive rows (about `BLOCK_BYTES` raw, at most `MAX_BLOCK_FRAMES`):
the block's first frame as it is, every later one as its byte-wise difference to the one before
(mod 256: unchanged pixels become zeros), the whole block deflate-compressed (zlib format) and
base64-encoded. The page inflates a block with the browser's ``DecompressionStream("deflate")``
when the slider reaches it, undoes the differences and keeps a few decoded blocks. A block
starts from a whole frame, so jumping anywhere decodes one block only.

Everything here takes and returns plain values (arrays, numbers); nothing reads a file.
"""

from __future__ import annotations

import base64
import math
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore.images import image_shape, pictures

__all__ = ["BLOCK_BYTES", "EncodedFrames", "as_image_rows", "encode_frames", "image_shape", "is_code_grid"]

BLOCK_BYTES = 4 << 20
"""Raw bytes of frames per block: what the page decodes to show any one frame of it."""

MAX_BLOCK_FRAMES = 64
"""Frames per block at most, so small frames do not make long chains to decode."""

CODE_MAX = 32
"""uint8 images whose values all stay below this are codes, not intensities (`is_code_grid`)."""

DEFLATE_LEVEL = 6
"""zlib's default. On 10,000 Enduro frames, level 9 is 21% smaller at 3.4 times the time, level 1
twice the size (docs/BENCHMARKS.md, "The viewer page")."""


@dataclass
class EncodedFrames:
    """Frames packed for the page.

    Attributes:
        height, width, channels: one frame's shape (channels 1 or 3).
        rows: the episode's observation rows (T+1).
        stride: every `stride`-th row's frame is kept (1: all of them).
        present: per kept frame, whether the row had one (False: show "no frame").
        blocks: per block, the first kept frame's index, the number of frames and the base64
            of the deflated differences.
        raw_bytes: bytes of the kept frames, decoded.
    """

    height: int
    width: int
    channels: int
    rows: int
    stride: int
    present: list[bool]
    blocks: list[tuple[int, int, str]] = field(default_factory=list)
    raw_bytes: int = 0

    @property
    def nbytes(self) -> int:
        """Bytes the blocks take in the page (base64 text)."""
        return sum(len(b) for _, _, b in self.blocks)

    @property
    def kept(self) -> int:
        return len(self.present)


def as_image_rows(values: npt.NDArray[Any], layout: str) -> npt.NDArray[np.uint8]:
    """Rows of an image-shaped column as (rows, H, W, 1 or 3) uint8 (`pictures`).

    uint8 stays as it is, unless it holds small codes only (`is_code_grid`: stretched so they
    can be told apart); other dtypes are scaled to 0..255 over the episode's range (for the
    eye only: the values beside the image are the recorded ones).
    """
    values = pictures(values, layout)
    if values.dtype == np.uint8:
        if is_code_grid(values):
            return np.ascontiguousarray(values * np.uint8(255 // max(1, int(values.max()))))
        return np.ascontiguousarray(values)
    v = values.astype(np.float64)
    finite = v[np.isfinite(v)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if low >= 0.0 and high <= 1.0:
        low, high = 0.0, 1.0  # images stored as floats in [0, 1]
    scaled = np.nan_to_num((v - low) / max(high - low, 1e-12), nan=0.0) * 255.0
    return np.clip(np.rint(scaled), 0, 255).astype(np.uint8)


def is_code_grid(values: npt.NDArray[Any]) -> bool:
    """uint8 rows whose values all stay below `CODE_MAX`: a grid of codes (MiniGrid's object,
    colour and state numbers), near black as pixels, so `as_image_rows` stretches them."""
    return values.dtype == np.uint8 and values.size > 0 and int(values.max()) < CODE_MAX


def _pack(frames: npt.NDArray[np.uint8]) -> str:
    """One block: differences to the previous frame (the first whole), deflated, base64."""
    flat = frames.reshape(len(frames), -1)
    diff = np.empty_like(flat)
    diff[0] = flat[0]
    np.subtract(flat[1:], flat[:-1], out=diff[1:])  # uint8: wraps mod 256, as the page adds back
    return base64.b64encode(zlib.compress(diff.tobytes(), DEFLATE_LEVEL)).decode("ascii")


def _encode(frames: npt.NDArray[np.uint8], present: npt.NDArray[np.bool_], stride: int) -> EncodedFrames:
    kept = frames[::stride]
    n, h, w, c = kept.shape
    per_block = max(1, min(MAX_BLOCK_FRAMES, BLOCK_BYTES // max(1, h * w * c)))
    out = EncodedFrames(h, w, c, len(frames), stride, [bool(p) for p in present[::stride]])
    starts = range(0, n, per_block)
    # zlib and numpy release the GIL on blocks this large: the blocks pack in parallel.
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        packed = pool.map(lambda first: _pack(kept[first : first + per_block]), starts)
        out.blocks = [(first, min(per_block, n - first), b) for first, b in zip(starts, packed, strict=True)]
    out.raw_bytes = int(kept.nbytes)
    return out


def encode_frames(
    frames: npt.NDArray[np.uint8], present: npt.NDArray[np.bool_] | None = None, *, max_bytes: int | None = None
) -> EncodedFrames | None:
    """Packs an episode's frames for the page, within a size budget.

    Args:
        frames: (rows, H, W, 1 or 3) uint8, one per observation row.
        present: per row, whether it has a frame (None: all do). Missing rows are packed as
            they read (zeros) and shown as missing.
        max_bytes: bound of the packed size; frames are thinned (every 2nd, 3rd, ... row kept)
            until they fit. None: every frame.

    Returns:
        The packed frames, or None when not even one frame fits `max_bytes`.
    """
    if present is None:
        present = np.ones(len(frames), dtype=np.bool_)
    if max_bytes is not None and max_bytes <= 0:
        return None
    stride = 1
    while True:
        packed = _encode(frames, present, stride)
        if max_bytes is None or packed.nbytes <= max_bytes:
            return packed
        if packed.kept <= 1:
            return None
        # Thin in proportion to the excess (a little more, so one retry usually fits).
        stride = max(stride + 1, math.ceil(stride * packed.nbytes * 1.1 / max_bytes))
        stride = min(stride, len(frames))
