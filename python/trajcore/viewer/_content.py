"""What the viewer page shows of an episode, decided from plain values: the text of every value
at every row, which series get a plot, which image is shown and what was left out to stay
within a size budget. `trajcore.viewer._episode` reads an `Episode` into these plain values;
`trajcore.viewer._page` puts the result into the HTML template.

Rows: the slider runs over the episode's T+1 observation rows. At row i the page shows
observation i, frame i and info i, and step i, the one taken from that observation: action i,
reward i, terminated i, truncated i and custom data i (the last row has no step). The plots use
the same x: reward i and the return after step i at x = i.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore.viewer._frames import EncodedFrames, as_image_rows, encode_frames, image_shape
from trajcore.viewer._html import block_tags, script_json

__all__ = ["MAX_PLOTS", "EpisodeArrays", "Leaf", "PageContent", "format_row", "page_content"]

MAX_PLOTS = 12
"""Plots beyond reward and return; more scalar columns are listed as not plotted."""

SMALL_ARRAY = 16
"""Arrays of at most this many values are shown in full; larger ones as shape, range and mean."""

MAX_TEXT = 200
"""Characters of a string value shown."""


@dataclass
class Leaf:
    """One recorded value column of an episode, as read.

    Attributes:
        name: shown name, e.g. ``observation/pos``, ``info/episode/r``.
        values: one row per observation row (observations, infos: T+1) or per step (T);
            an array, or a list of str.
        mask: where the value was given (infos, custom data); None: every row.
    """

    name: str
    values: Any
    mask: npt.NDArray[np.bool_] | None = None


@dataclass
class EpisodeArrays:
    """Everything the page needs from one episode, read."""

    title: str
    summary: dict[str, Any]
    observations: list[Leaf]
    actions: list[Leaf]
    rewards: npt.NDArray[np.float64]
    terminations: npt.NDArray[np.bool_]
    truncations: npt.NDArray[np.bool_]
    infos: list[Leaf] = field(default_factory=list)
    data: list[Leaf] = field(default_factory=list)
    frames: npt.NDArray[Any] | None = None
    frame_mask: npt.NDArray[np.bool_] | None = None
    fps: float = 30.0

    @property
    def rows(self) -> int:
        return len(self.rewards) + 1


@dataclass
class PageContent:
    """The page's data: `model` (JSON-able) and the frame blocks (base64 strings)."""

    model: dict[str, Any]
    blocks: list[str]
    notes: list[str]


def _scalar_text(v: Any) -> str:
    if isinstance(v, bool | np.bool_):
        return "True" if v else "False"
    if isinstance(v, float | np.floating):
        return f"{float(v):.6g}"
    if isinstance(v, int | np.integer):
        return str(int(v))
    text = str(v)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _summaries(rows: npt.NDArray[Any]) -> list[str]:
    """Rows of large arrays as dtype, shape, range and mean (computed for all rows at once)."""
    flat = rows.reshape(len(rows), -1)
    low, high = flat.min(axis=1).tolist(), flat.max(axis=1).tolist()
    mean = flat.mean(axis=1, dtype=np.float64).tolist()
    head = f"{rows.dtype} {tuple(rows.shape[1:])}"
    return [
        f"{head}: min {_scalar_text(lo)}, max {_scalar_text(hi)}, mean {_scalar_text(m)}"
        for lo, hi, m in zip(low, high, mean, strict=True)
    ]


def format_row(value: Any) -> str:
    """The text a value shows beside the frame: numbers to 6 significant digits, small arrays in
    full (``[0.0123, -0.5]``), larger ones as dtype, shape, range and mean."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return _scalar_text(value.item())
        if value.size <= SMALL_ARRAY:
            if value.ndim == 1:
                return "[" + ", ".join(_scalar_text(v) for v in value.tolist()) + "]"
            return json.dumps(np.vectorize(_scalar_text, otypes=[object])(value).tolist()).replace('"', "")
        return _summaries(value[None])[0]
    return _scalar_text(value)


def _texts(leaf: Leaf) -> list[str | None]:
    values, mask = leaf.values, leaf.mask
    n = len(values)
    if isinstance(values, np.ndarray) and values.ndim > 1 and values[0].size > SMALL_ARRAY:
        texts: list[str | None] = list(_summaries(values))  # the same text as format_row, all rows at once
    else:
        texts = [format_row(values[i]) for i in range(n)]
    return [t if mask is None or mask[i] else None for i, t in enumerate(texts)]


def _numbers(values: Any, mask: npt.NDArray[np.bool_] | None) -> list[float | None] | None:
    """A scalar numeric column as plot values (None where missing or not finite); None when the
    column is not plottable (strings, arrays, bools)."""
    if not isinstance(values, np.ndarray) or values.ndim != 1 or values.dtype.kind not in "iuf":
        return None
    out: list[float | None] = []
    for i, v in enumerate(values.astype(np.float64).tolist()):
        ok = (mask is None or bool(mask[i])) and math.isfinite(v)
        out.append(float(f"{v:.6g}") if ok else None)
    return out


def _field(group: str, leaf: Leaf, timeline: str) -> dict[str, Any]:
    return {"group": group, "name": leaf.name, "timeline": timeline, "text": _texts(leaf)}


def _image_source(arrays: EpisodeArrays) -> tuple[str, npt.NDArray[np.uint8], npt.NDArray[np.bool_] | None] | None:
    """(what the image is, its rows as (rows, H, W, C) uint8, where present): the rendered
    frames if recorded, else the first image-shaped observation leaf."""
    if arrays.frames is not None:
        layout = image_shape(tuple(arrays.frames.shape[1:]), arrays.frames.dtype)
        if layout is not None:
            return "rendered frames", as_image_rows(arrays.frames, layout), arrays.frame_mask
    for leaf in arrays.observations:
        v = leaf.values
        if isinstance(v, np.ndarray) and (layout := image_shape(tuple(v.shape[1:]), v.dtype)) is not None:
            what = leaf.name + (" (last of the stack)" if layout == "chw" else "")
            return what, as_image_rows(v, layout), None
    return None


def page_content(arrays: EpisodeArrays, *, max_bytes: int | None = None) -> PageContent:
    """Decides what the page shows.

    Args:
        arrays: the episode, read.
        max_bytes: bound of the page's data (frames are thinned to fit, and left out if even one
            does not); None: no bound.

    Returns:
        The page's model, frame blocks and notes on what was left out (also in the model).
    """
    rows = arrays.rows
    notes: list[str] = []
    fields: list[dict[str, Any]] = [_field("observation", leaf, "obs") for leaf in arrays.observations]
    fields += [_field("step", leaf, "step") for leaf in arrays.actions]
    fields += [
        _field("step", Leaf("reward", arrays.rewards), "step"),
        _field("step", Leaf("terminated", arrays.terminations), "step"),
        _field("step", Leaf("truncated", arrays.truncations), "step"),
    ]
    fields += [_field("step", leaf, "step") for leaf in arrays.data]
    fields += [_field("info", leaf, "obs") for leaf in arrays.infos]

    returns = np.cumsum(arrays.rewards, dtype=np.float64)
    plots: list[dict[str, Any]] = [
        {"name": "reward", "timeline": "step", "values": _numbers(arrays.rewards, None)},
        {"name": "return so far", "timeline": "step", "values": _numbers(returns, None)},
    ]
    more: list[str] = []
    for leaf, timeline in [(leaf, "obs") for leaf in arrays.infos] + [(leaf, "step") for leaf in arrays.data]:
        values = _numbers(leaf.values, leaf.mask)
        if values is None:
            continue
        if len(plots) - 2 < MAX_PLOTS:
            plots.append({"name": leaf.name, "timeline": timeline, "values": values})
        else:
            more.append(leaf.name)
    if more:
        notes.append(f"{len(more)} more scalar columns are not plotted: {', '.join(more)}")

    model: dict[str, Any] = {
        "title": arrays.title,
        "summary": arrays.summary,
        "rows": rows,
        "fps": arrays.fps,
        "fields": fields,
        "plots": plots,
        "image": None,
        "notes": notes,
    }
    source = _image_source(arrays)
    if source is None:
        return PageContent(model, [], notes)
    what, images, present = source
    if max_bytes is None:
        return _with_image(model, what, encode_frames(images, present), None)
    # Fit the frames into what the rest leaves; the image's own model and note take a little
    # more, so tighten the frames' share by any overshoot and pack again.
    budget = max_bytes - _data_bytes(model, [])
    for _ in range(8):
        content = _with_image(model, what, encode_frames(images, present, max_bytes=budget), max_bytes)
        over = _data_bytes(content.model, content.blocks) - max_bytes
        if over <= 0:
            return content
        budget -= over
    return _with_image(model, what, None, max_bytes)


def _data_bytes(model: dict[str, Any], blocks: list[str]) -> int:
    """Bytes the page's data takes, written as the page writes it."""
    return len(script_json(model).encode("utf-8")) + len(block_tags(blocks))


def _with_image(model: dict[str, Any], what: str, packed: EncodedFrames | None, max_bytes: int | None) -> PageContent:
    """The content with the packed frames (or, if None, a note that they were left out)."""
    notes = list(model["notes"])
    if packed is None:
        notes.append(f"the {what} are left out: even one does not fit the page's size cap ({_mb(max_bytes)})")
        return PageContent({**model, "notes": notes}, [], notes)
    if packed.stride > 1:
        notes.append(
            f"{what}: every {packed.stride}th of {packed.rows} kept to stay within the size cap "
            f"({_mb(max_bytes)}); a row without its own shows the frame before it"
        )
    return PageContent(
        {**model, "image": _image_model(what, packed), "notes": notes}, [b for _, _, b in packed.blocks], notes
    )


def _image_model(what: str, packed: EncodedFrames) -> dict[str, Any]:
    return {
        "source": what,
        "height": packed.height,
        "width": packed.width,
        "channels": packed.channels,
        "stride": packed.stride,
        "present": [1 if p else 0 for p in packed.present],
        "blocks": [{"first": first, "count": count} for first, count, _ in packed.blocks],
    }


def _mb(n: int | None) -> str:
    return "no cap" if n is None else f"{n / (1 << 20):.2g} MiB"
