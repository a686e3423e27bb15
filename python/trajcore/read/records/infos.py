"""Infos and custom data as a reader gives them back: the recorded columns (``info/<path>``,
``data/<name>``, each with its mask column) nested like the keys, and gymnasium's shape of
masked values (``infos["_key"]`` beside ``infos["key"]``). Plain values in, plain values out:
reading the columns is the caller's."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore import _core
from trajcore.errors import CorruptFileError
from trajcore.spaces import unescape_key

__all__ = ["MAX_INFO_DEPTH", "Field", "column_fields", "nest", "widen", "with_masks"]

MAX_INFO_DEPTH: int = _core.MAX_INFO_DEPTH


@dataclass
class Field:
    """A recorded value column (info entry or custom data) and where it goes in the nested dict."""

    path: tuple[str, ...]
    column: str
    mask: str | None
    #: The columns (with their masks) that continue it with wider types, in order: a key whose
    #: later values did not fit its first value's type (FORMAT.md, "Widened columns").
    wider: list[tuple[str, str | None]] = field(default_factory=list)


def column_fields(columns: Sequence[Mapping[str, Any]], prefix: str) -> list[Field]:
    """The value columns under `prefix` (``"info/"``, ``"data/"``) of a recording's column specs,
    each with its path of keys and its mask column."""
    by_id = {c["id"]: c["name"] for c in columns if "id" in c}

    def name_of(ref: Any) -> str | None:
        if ref is None:
            return None
        return ref if isinstance(ref, str) else by_id.get(ref)

    out: dict[Any, Field] = {}  # by column id (by name for a spec without one)
    for c in columns:
        name = c["name"]
        if not name.startswith(prefix) or c.get("mask_of") is not None:
            continue
        base = _widened_base(out, c)
        if base is not None:
            base.wider.append((name, name_of(c.get("mask"))))
            out[c.get("id", name)] = base
            continue
        path = tuple(unescape_key(p) for p in name[len(prefix) :].split("/"))
        out[c.get("id", name)] = Field(path, name, name_of(c.get("mask")))
    unique = {id(f): f for f in out.values()}
    return list(unique.values())


def _widened_base(fields: dict[Any, Field], column: Mapping[str, Any]) -> Field | None:
    """The field a widened column continues: the one of the earlier masked value column its
    `widens` names (FORMAT.md, "Widened columns"); None for a column that widens none, or names
    no such column (it then reads as a key of its own, as a reader without `widens` reads it)."""
    widens = column.get("widens")
    if not isinstance(widens, int) or column.get("mask") is None or widens >= column.get("id", -1):
        return None
    base = fields.get(widens)
    return base if base is not None and base.mask is not None else None


def nest(fields: list[Field], read: Callable[[str], Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(values, masks) of `fields`, each column read with `read`, nested like the keys. A key
    never present (its mask all false) is left out of both.

    Raises:
        CorruptFileError: a column name nests deeper than the recorder allows (`where` names
            the dataset in the message).
    """
    values: dict[str, Any] = {}
    masks: dict[str, Any] = {}
    for f in fields:
        if len(f.path) > MAX_INFO_DEPTH:
            raise CorruptFileError(
                f"{where}: column '{f.column}' nests {len(f.path)} levels deep; recorders write at most "
                f"{MAX_INFO_DEPTH}"
            )
        mask = read(f.mask) if f.mask is not None else None
        wider = [(read(c), read(m) if m else None) for c, m in f.wider]
        if mask is not None and not np.any(mask) and not any(m is not None and np.any(m) for _, m in wider):
            continue
        node, mask_node = values, masks
        for part in f.path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break  # the key held a plain value at some steps and a dict at others
            node, mask_node = child, mask_node.setdefault(part, {})
        else:
            value = read(f.column)
            for wider_value, wider_mask in wider:
                value, mask = widen(value, mask, wider_value, wider_mask, f.column)
            node[f.path[-1]] = value
            if mask is not None:
                mask_node[f.path[-1]] = mask
    return values, masks


def widen(value: Any, mask: Any, wider: Any, wider_mask: Any, column: str) -> tuple[Any, Any]:
    """A key's values and mask with those of the column that continues it with a wider type:
    each row from the column that holds it, every row in the wider type.

    Raises:
        CorruptFileError: the two columns do not stack (another row shape, a type that does not
            cast safely to the wider one, a missing mask).
    """
    value, wider = np.asarray(value), np.asarray(wider)
    if (
        mask is None
        or wider_mask is None
        or value.shape != wider.shape
        or not np.can_cast(value.dtype, wider.dtype, "safe")
        or value.dtype.kind in "OUS"
    ):
        raise CorruptFileError(
            f"column '{column}' is widened by a column of another shape or of a type it does not cast safely to"
        )
    here = np.asarray(wider_mask, dtype=bool)
    out = value.astype(wider.dtype)
    out[here] = wider[here]
    return out, np.asarray(mask, dtype=bool) | here


def with_masks(values: dict[str, Any], masks: dict[str, Any]) -> dict[str, Any]:
    """gymnasium's shape of vector infos: each key's values with its mask beside it as
    ``_key``, a nested dict with an any-present ``_key``. A recorded key named ``_key`` keeps its
    name; that mask is then only in the masks tree (`Episode.info_masks`)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        out[key] = with_masks(value, masks.get(key, {})) if isinstance(value, dict) else value
    for key, value in values.items():
        mask = _any_present(masks.get(key, {})) if isinstance(value, dict) else masks.get(key)
        if mask is not None and "_" + key not in values:
            out["_" + key] = mask
    return out


def _any_present(masks: dict[str, Any]) -> npt.NDArray[np.bool_] | None:
    """True where any mask below is (None without masks)."""
    combined: npt.NDArray[np.bool_] | None = None
    for mask in masks.values():
        sub = _any_present(mask) if isinstance(mask, dict) else mask
        if sub is not None:
            combined = sub.copy() if combined is None else combined | sub
    return combined
