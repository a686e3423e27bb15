"""What the viewer page shows of an episode, decided from plain values: the text of every value
at every row, which series get a plot, which image is shown and what was left out to stay
within a size budget. `trajcore.viewer._episode` reads an `Episode` into these plain values;
`trajcore.viewer._page` puts the result into the HTML template.

Rows: the slider runs over the episode's T+1 observation rows. At row i the page shows
observation i, frame i and info i, and step i, the one taken from that observation: action i,
reward i, terminated i, truncated i and custom data i (the last row has no step). The plots use
the same x: reward i and the return after step i at x = i.

Images: the rendered frames if recorded, and every image-shaped leaf of the observation (a
top-level image, or the image leaves of a Dict or Tuple), each drawn as frames.

Agents (`env_page_content`): one page for the agents of an env episode, each agent's values put
at the env steps (`trajcore.viewer._env_episode` aligns them); rows are env steps, and an agent's
values are missing at the rows where it did not act. Every field, plot and image says its agent.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore.viewer._frames import EncodedFrames, as_image_rows, encode_frames, image_shape, is_code_grid
from trajcore.viewer._html import block_tags, script_json

__all__ = [
    "MAX_PLOTS",
    "EpisodeArrays",
    "Leaf",
    "PageContent",
    "env_page_content",
    "format_row",
    "image_sources",
    "page_content",
]

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
    agent: str | None = None
    """The agent whose episode this is, on a page of an env episode's agents (None: a page of one
    episode)."""
    step_mask: npt.NDArray[np.bool_] | None = None
    """Per step, whether the agent acted there (aligned on env steps); None: every step."""

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


def _field(group: str, leaf: Leaf, timeline: str, agent: str | None) -> dict[str, Any]:
    field = {"group": group, "name": leaf.name, "timeline": timeline, "text": _texts(leaf)}
    return field if agent is None else {**field, "agent": agent}


_ImageSource = tuple[str | None, str, npt.NDArray[np.uint8], npt.NDArray[np.bool_] | None]
"""(agent, what the image is, its rows as (rows, H, W, C) uint8, where present)."""


def image_sources(arrays: EpisodeArrays) -> list[_ImageSource]:
    """The rendered frames if recorded, then every image-shaped leaf of a Dict or Tuple
    observation; an image observation (not in a Dict or Tuple) only without frames: an Atari
    observation is mostly the frame again, and would double the page."""
    out: list[_ImageSource] = []
    if arrays.frames is not None:
        layout = image_shape(tuple(arrays.frames.shape[1:]), arrays.frames.dtype)
        if layout is not None:
            out.append((arrays.agent, "rendered frames", as_image_rows(arrays.frames, layout), arrays.frame_mask))
    for leaf in arrays.observations:
        if out and leaf.name == "observation":  # the whole observation (a leaf's name has a '/')
            continue
        v = leaf.values
        if isinstance(v, np.ndarray) and (layout := image_shape(tuple(v.shape[1:]), v.dtype)) is not None:
            what = leaf.name + (" (last of the stack)" if layout == "chw" else "")
            if is_code_grid(v):
                what += f" (codes 0..{int(v.max())}, stretched to be seen)"
            out.append((arrays.agent, what, as_image_rows(v, layout), leaf.mask))
    return out


def _fields_and_plots(arrays: EpisodeArrays, more: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One episode's fields and plots (names of scalar columns past `MAX_PLOTS` go to `more`)."""
    agent, acted = arrays.agent, arrays.step_mask
    fields: list[dict[str, Any]] = [_field("observation", leaf, "obs", agent) for leaf in arrays.observations]
    fields += [_field("step", leaf, "step", agent) for leaf in arrays.actions]
    fields += [
        _field("step", Leaf("reward", arrays.rewards, acted), "step", agent),
        _field("step", Leaf("terminated", arrays.terminations, acted), "step", agent),
        _field("step", Leaf("truncated", arrays.truncations, acted), "step", agent),
    ]
    fields += [_field("step", leaf, "step", agent) for leaf in arrays.data]
    fields += [_field("info", leaf, "obs", agent) for leaf in arrays.infos]

    returns = np.cumsum(arrays.rewards, dtype=np.float64)  # carried over the steps it did not act at
    plots: list[dict[str, Any]] = [
        {"name": "reward", "timeline": "step", "values": _numbers(arrays.rewards, acted)},
        {"name": "return so far", "timeline": "step", "values": _numbers(returns, None)},
    ]
    for leaf, timeline in [(leaf, "obs") for leaf in arrays.infos] + [(leaf, "step") for leaf in arrays.data]:
        values = _numbers(leaf.values, leaf.mask)
        if values is None:
            continue
        if len(plots) - 2 < MAX_PLOTS:
            plots.append({"name": leaf.name, "timeline": timeline, "values": values})
        else:
            more.append(leaf.name if agent is None else f"{agent} {leaf.name}")
    if agent is not None:
        plots = [{**p, "agent": agent} for p in plots]
    return fields, plots


def page_content(arrays: EpisodeArrays, *, max_bytes: int | None = None) -> PageContent:
    """Decides what the page shows.

    Args:
        arrays: the episode, read.
        max_bytes: bound of the page's data (frames are thinned to fit, and left out if even one
            does not); None: no bound.

    Returns:
        The page's model, frame blocks and notes on what was left out (also in the model).
    """
    return _content([arrays], arrays.title, arrays.summary, max_bytes)


def env_page_content(
    parts: list[EpisodeArrays], title: str, summary: dict[str, Any], *, max_bytes: int | None = None
) -> PageContent:
    """What the page of an env episode shows: every agent's episode (`parts`, each with its
    `agent`, aligned on the same env-step rows), one after the other; the page can show one.

    Args:
        parts: each agent's episode, read and aligned (`trajcore.viewer._env_episode`).
        title, summary: the page's heading.
        max_bytes: as `page_content`'s (every agent's images share it).
    """
    return _content(parts, title, summary, max_bytes)


def _content(parts: list[EpisodeArrays], title: str, summary: dict[str, Any], max_bytes: int | None) -> PageContent:
    """The page of one episode (one part, no agent) or of an env episode's agents."""
    notes: list[str] = []
    fields: list[dict[str, Any]] = []
    plots: list[dict[str, Any]] = []
    more: list[str] = []
    for arrays in parts:
        part_fields, part_plots = _fields_and_plots(arrays, more)
        fields += part_fields
        plots += part_plots
    if more:
        notes.append(f"{len(more)} more scalar columns are not plotted: {', '.join(more)}")

    agents = [a.agent for a in parts if a.agent is not None]
    model: dict[str, Any] = {
        "title": title,
        "summary": summary,
        "rows": parts[0].rows,
        "fps": parts[0].fps,
        "fields": fields,
        "plots": plots,
        "image": None,
        "notes": notes,
    }
    if agents:
        model["agents"] = agents
    sources = [s for arrays in parts for s in image_sources(arrays)]
    if not sources:
        return PageContent(model, [], notes)
    if max_bytes is None:
        return _with_images(model, sources, [encode_frames(rows, present) for _, _, rows, present in sources], None)
    # Fit the frames into what the rest leaves (each image a share by its raw size); the images'
    # own models and notes take a little more, so tighten the frames' share by any overshoot and
    # pack again.
    budget = max_bytes - _data_bytes(model, [])
    raw = np.array([rows.nbytes for _, _, rows, _ in sources], dtype=np.float64)
    for _ in range(8):
        shares = (budget * raw / raw.sum()).astype(np.int64).tolist()
        packed = [
            encode_frames(rows, present, max_bytes=share)
            for (_, _, rows, present), share in zip(sources, shares, strict=True)
        ]
        content = _with_images(model, sources, packed, max_bytes)
        over = _data_bytes(content.model, content.blocks) - max_bytes
        if over <= 0:
            return content
        budget -= over
    return _with_images(model, sources, [None] * len(sources), max_bytes)


def _data_bytes(model: dict[str, Any], blocks: list[str]) -> int:
    """Bytes the page's data takes, written as the page writes it."""
    return len(script_json(model).encode("utf-8")) + len(block_tags(blocks))


def _with_images(
    model: dict[str, Any], sources: list[_ImageSource], packs: list[EncodedFrames | None], max_bytes: int | None
) -> PageContent:
    """The content with the packed images: the first as ``image`` (the large one), the others as
    ``more_images``; an image packed as None is left out, and a note says so."""
    notes = list(model["notes"])
    images: list[dict[str, Any]] = []
    blocks: list[str] = []
    for (agent, what, _, _), packed in zip(sources, packs, strict=True):
        named = what if agent is None else f"{agent} {what}"
        if packed is None:
            notes.append(f"the {named} are left out: even one does not fit the page's size cap ({_mb(max_bytes)})")
            continue
        if packed.stride > 1:
            notes.append(
                f"{named}: every {packed.stride}th of {packed.rows} kept to stay within the size cap "
                f"({_mb(max_bytes)}); a row without its own shows the frame before it"
            )
        images.append(_image_model(agent, what, packed, offset=len(blocks)))
        blocks += [b for _, _, b in packed.blocks]
    first = images[0] if images else None
    return PageContent({**model, "image": first, "more_images": images[1:], "notes": notes}, blocks, notes)


def _image_model(agent: str | None, what: str, packed: EncodedFrames, offset: int) -> dict[str, Any]:
    """An image's part of the model; its blocks are the page's blocks from `offset` on."""
    return {
        "agent": agent,
        "offset": offset,
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
