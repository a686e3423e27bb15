"""What a recording's Meta record says, checked before it is used: a hostile or damaged file
with valid checksums must raise `CorruptFileError`, never a `KeyError`, a `TypeError` from deep
inside the reader, or a 4 TiB allocation for a space declared with an absurd shape."""

from __future__ import annotations

import math
from typing import Any

from gymnasium import spaces

from trajcore.errors import CorruptFileError, TrajcoreError
from trajcore.spaces import space_columns, space_from_json

__all__ = ["DEFAULT_FPS", "rebuild_space", "render_fps"]

DEFAULT_FPS = 30.0
"""Frames per second of a recording that stored no ``render_fps`` (the viewer's 1x, a video's rate)."""

#: Layout trees nest no deeper than this (spaces nest a few levels in practice).
MAX_LAYOUT_DEPTH = 64
#: A space's leaf may not hold more elements than a row of a column may (1 GiB of bytes).
MAX_ELEMENTS = 1 << 30


def rebuild_space(
    desc: Any, columns: list[dict[str, Any]], prefix: str, timeline: str, where: str
) -> spaces.Space[Any]:
    """The space a Meta record describes, checked against the recording's columns.

    Raises:
        CorruptFileError: the description is malformed, declares absurd sizes, or does not
            match the columns the file holds (`where` names the file and record).
    """
    why = _size_problem(desc)
    if why is None:
        try:
            space = space_from_json(desc)
            made, _ = space_columns(space, prefix, timeline)
        except (TrajcoreError, TypeError, ValueError, KeyError, OverflowError, MemoryError) as e:
            why = f"it cannot be rebuilt: {e}"
        else:
            have = {c["name"]: (c["dtype"], list(c["shape"]), c["timeline"]) for c in columns}
            for c in made:
                if have.get(c["name"]) != (c["dtype"], list(c["shape"]), c["timeline"]):
                    why = f"its leaf {c['name']!r} does not match the column the file holds"
                    break
            else:
                return space
    raise CorruptFileError(f"{where}: the {prefix} space description is invalid: {why}")


def _size_problem(desc: Any, depth: int = 0) -> str | None:
    """Checks sizes before anything is allocated."""
    if depth > MAX_LAYOUT_DEPTH:
        return "nested too deep"
    if not isinstance(desc, dict):
        return f"expected an object, got {_short(desc)}"
    for key in ("shape", "n"):
        shape = desc.get(key)
        if isinstance(shape, list):
            if not all(isinstance(d, int) and 0 <= d <= MAX_ELEMENTS for d in shape):
                return f"{key} {_short(shape)} is not a list of sizes"
            if math.prod(shape) > MAX_ELEMENTS:
                return f"{key} {_short(shape)} declares more than {MAX_ELEMENTS} elements"
    inner = desc.get("spaces")
    if isinstance(inner, list):
        for item in inner:
            sub = item[1] if isinstance(item, list) and len(item) == 2 else item
            why = _size_problem(sub, depth + 1)
            if why:
                return why
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def env_ids(metas: list[dict[str, Any]]) -> list[str | None]:
    """The env ids of recordings' Meta records, sorted, each once: None (JSON null) for a
    recording of an env without a registered id (a vector env made from callables, CleanRL's way),
    never the text "None"."""
    ids = {(m.get("user") or {}).get("env_id") if isinstance(m, dict) else None for m in metas}
    known = sorted(str(i) for i in ids if i is not None)
    return [*known, *([None] if None in ids else [])]


def render_fps(meta: dict[str, Any]) -> float:
    """The frame rate a recording's env declared for its rendering (``render_fps``, stored by
    the recorder), else `DEFAULT_FPS`: the viewer plays at it, the video export encodes at it."""
    user = meta.get("user") or {}
    fps = user.get("render_fps") if isinstance(user, dict) else None
    return float(fps) if isinstance(fps, int | float) and not isinstance(fps, bool) and fps > 0 else DEFAULT_FPS
