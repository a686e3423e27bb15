"""Infos and custom data as a reader gives them back: the recorded columns (``info/<path>``,
``data/<name>``, each with its mask column) nested like the keys, and gymnasium's shape of
masked values (``infos["_key"]`` beside ``infos["key"]``). Plain values in, plain values out:
reading the columns is the caller's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore import _core
from trajcore.errors import CorruptFileError
from trajcore.spaces import unescape_key

__all__ = ["MAX_INFO_DEPTH", "Field", "column_fields", "nest", "with_masks"]

MAX_INFO_DEPTH: int = _core.MAX_INFO_DEPTH


@dataclass
class Field:
    """A recorded value column (info entry or custom data) and where it goes in the nested dict."""

    path: tuple[str, ...]
    column: str
    mask: str | None


def column_fields(columns: list[dict[str, Any]], prefix: str) -> list[Field]:
    """The value columns under `prefix` (``"info/"``, ``"data/"``) of a recording's column specs,
    each with its path of keys and its mask column."""
    by_id = {c["id"]: c["name"] for c in columns if "id" in c}

    def name_of(ref: Any) -> str | None:
        if ref is None:
            return None
        return ref if isinstance(ref, str) else by_id.get(ref)

    out = []
    for c in columns:
        name = c["name"]
        if not name.startswith(prefix) or c.get("mask_of") is not None:
            continue
        path = tuple(unescape_key(p) for p in name[len(prefix) :].split("/"))
        out.append(Field(path, name, name_of(c.get("mask"))))
    return out


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
        if mask is not None and not np.any(mask):
            continue
        node, mask_node = values, masks
        for part in f.path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break  # the key held a plain value at some steps and a dict at others
            node, mask_node = child, mask_node.setdefault(part, {})
        else:
            node[f.path[-1]] = read(f.column)
            if mask is not None:
                mask_node[f.path[-1]] = mask
    return values, masks


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
