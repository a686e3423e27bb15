"""Rows of infos and custom data as the reader gives them (`Episode.infos`, `Episode.data`: a
column per key, a ``_key`` mask beside it, nested dicts nested): which entries were given at a
row. Used by the JSONL export (one info dict per step) and the Minari import (replaying infos)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["given_at"]


def _same(value: Any) -> Any:
    return value


def given_at(fields: Mapping[str, Any], row: int, value: Callable[[Any], Any] = _same) -> dict[str, Any]:
    """The entries given at `row`: each key whose ``_key`` mask is true there (every row for a
    key without a mask), nested dicts as dicts of their given entries; masks are not entries.

    Args:
        fields: an `Episode.infos` / `Episode.data`-like dict of columns.
        row: the row.
        value: applied to each value taken (e.g. to make it JSON, or decode bytes).
    """
    out: dict[str, Any] = {}
    for key, column in fields.items():
        if key.startswith("_") and key[1:] in fields:
            continue  # the mask of `key[1:]`
        mask = fields.get("_" + key)
        if mask is not None and not bool(mask[row]):
            continue
        out[key] = given_at(column, row, value) if isinstance(column, Mapping) else value(column[row])
    return out
