"""Gymnasium spaces as trajcore columns, layout trees and JSON.

A space becomes one column per leaf (Box, Discrete, MultiDiscrete, MultiBinary, Text) and a
layout tree that says how the leaves nest (Dict, Tuple), so a reader can give back the same
structure the env produced:

- tree: ``{"leaf": column_name}`` | ``{"dict": [[key, tree], ...]}`` | ``{"tuple": [tree, ...]}``
- column names: the prefix for a bare leaf (``"obs"``), else ``"obs/<key>/<index>/..."`` with
  ``/`` in a Dict key written ``%2F``, ``%`` written ``%25`` and a leading ``_`` written ``%5F``
  so names split unambiguously and never look like a mask column.

Gymnasium has no JSON form of its spaces, so `space_to_json` / `space_from_json` are defined here
for the supported spaces (Box keeps its low/high bounds); the recorder stores that JSON in the
file and `trajcore.open` rebuilds ``observation_space`` / ``action_space`` from it.
"""

from __future__ import annotations

import math
import string
from typing import Any, TypedDict

import numpy as np
from gymnasium import spaces

from trajcore import _core
from trajcore.errors import SchemaError, TrajcoreError

__all__ = [
    "ColumnDict",
    "escape_key",
    "space_bounds",
    "space_columns",
    "space_from_json",
    "space_to_json",
    "unescape_key",
]

# The numpy dtypes a fixed-size column can have (the core's dtype names).
SUPPORTED_DTYPES = frozenset(
    [
        "bool",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
    ]
)

_UNSUPPORTED = (spaces.Sequence, spaces.Graph, spaces.OneOf)

_UNSUPPORTED_WHY = {
    "Sequence": "its length varies from step to step",
    "Graph": "its node and edge counts vary from step to step",
    "OneOf": "the sub-space it holds varies from step to step",
}


class _ColumnBase(TypedDict):
    name: str
    dtype: str
    shape: list[int]
    timeline: str


class ColumnDict(_ColumnBase, total=False):
    """A column spec as the core's config JSON takes it."""

    id: int
    codec: dict[str, Any]


def escape_key(key: str) -> str:
    """A Dict key as one component of a column name: '%' -> %25, '/' -> %2F (so '/' separates
    nesting levels) and a leading '_' -> %5F (so no key is named like a mask column). The core's
    rule, the one info keys and custom data names follow too."""
    return _core.escape_key(key)


def unescape_key(part: str) -> str:
    """Inverse of `escape_key`."""
    return _core.unescape_key(part)


def space_columns(space: spaces.Space[Any], prefix: str, timeline: str) -> tuple[list[ColumnDict], Any]:
    """The leaf columns and the layout tree of `space`.

    Args:
        space: a gymnasium space (the per-env space for vector envs).
        prefix: the column name of a bare leaf and the first component of nested ones
            ("obs" or "action").
        timeline: "obs" (T+1 rows an episode) or "step" (T rows).

    Returns:
        (columns in depth-first order, layout tree).

    Raises:
        SchemaError: a space (or a sub-space) cannot be recorded; the message names the space
            and where it sits (its column name).
    """
    columns: list[ColumnDict] = []
    tree = _walk(space, prefix, timeline, columns)
    return columns, tree


def space_bounds(space: spaces.Space[Any], prefix: str) -> dict[str, dict[str, Any]]:
    """The inclusive bounds of the values of each discrete leaf of `space` (Discrete,
    MultiDiscrete, MultiBinary), by column name, as the core's ``value_bounds`` takes them
    (``{"low": [...], "high": [...], "space": text}``, one pair or one per element): the core
    refuses a value outside them (an action 7 for a ``Discrete(3)``). Box bounds are not
    enforced (an env's values outside its Box are its real values)."""
    bounds: dict[str, dict[str, Any]] = {}
    _walk(space, prefix, "obs", [], bounds)
    return bounds


def _leaf_bounds(space: spaces.Space[Any]) -> dict[str, Any] | None:
    """A discrete leaf's bounds (see `space_bounds`), or None: not discrete, or bounds beyond int64."""
    if isinstance(space, spaces.Discrete):
        low, high = [int(space.start)], [int(space.start) + int(space.n) - 1]
    elif isinstance(space, spaces.MultiDiscrete):
        start = np.broadcast_to(np.asarray(space.start), np.shape(space.nvec)).ravel()
        nvec = np.asarray(space.nvec).ravel()
        low = [int(v) for v in start]
        high = [int(a) + int(n) - 1 for a, n in zip(start, nvec, strict=True)]
    elif isinstance(space, spaces.MultiBinary):
        low, high = [0], [1]
    else:
        return None
    if not low or any(not -(2**63) <= v < 2**63 for v in low + high):
        return None
    return {"low": low, "high": high, "space": str(space)}


def _walk(
    space: spaces.Space[Any],
    name: str,
    timeline: str,
    out: list[ColumnDict],
    bounds: dict[str, dict[str, Any]] | None = None,
) -> Any:
    if isinstance(space, spaces.Dict):
        items = []
        for key, sub in space.spaces.items():
            if not isinstance(key, str):
                raise SchemaError(f"'{name}': Dict space keys must be str, got {key!r}")
            items.append([key, _walk(sub, f"{name}/{escape_key(key)}", timeline, out, bounds)])
        return {"dict": items}
    if isinstance(space, spaces.Tuple):
        return {"tuple": [_walk(sub, f"{name}/{i}", timeline, out, bounds) for i, sub in enumerate(space.spaces)]}
    if isinstance(space, spaces.Text):
        out.append({"name": name, "dtype": "str", "shape": [], "timeline": timeline})
        return {"leaf": name}
    if isinstance(space, spaces.Box | spaces.Discrete | spaces.MultiDiscrete | spaces.MultiBinary):
        dtype = np.dtype(space.dtype)
        if dtype.name not in SUPPORTED_DTYPES:
            raise SchemaError(
                f"'{name}': {space} has dtype {dtype}, which trajcore cannot store "
                f"(supported: {', '.join(sorted(SUPPORTED_DTYPES))})"
            )
        shape = [] if isinstance(space, spaces.Discrete) else [int(d) for d in space.shape]
        out.append({"name": name, "dtype": dtype.name, "shape": shape, "timeline": timeline})
        if bounds is not None and (leaf_bounds := _leaf_bounds(space)) is not None:
            bounds[name] = leaf_bounds
        return {"leaf": name}
    declared = _declared_leaf(space)
    if declared is not None:
        dtype_name, declared_shape = declared
        out.append({"name": name, "dtype": dtype_name, "shape": list(declared_shape), "timeline": timeline})
        return {"leaf": name}
    kind = type(space).__name__
    if kind in _UNSUPPORTED_WHY:
        raise SchemaError(f"'{name}': {kind} spaces are not supported ({_UNSUPPORTED_WHY[kind]}): {space}")
    raise SchemaError(
        f"'{name}': {kind} is not one of the spaces trajcore records (Box, Discrete, MultiDiscrete, "
        "MultiBinary, Text, Dict, Tuple, or a subclass of one) and declares no dtype and shape to store it "
        f"as: {space}. Derive it from one of those spaces, give it a numpy dtype and a shape (or a str dtype "
        "for text), or convert the observation with a gymnasium ObservationWrapper"
    )


def _declared_leaf(space: spaces.Space[Any]) -> tuple[str, tuple[int, ...]] | None:
    """(column dtype, shape) of a space that is none of gymnasium's but declares what its values
    are through `dtype` and `shape` (minigrid's `MissionSpace` declares str), or None."""
    if isinstance(space, _UNSUPPORTED):
        return None
    try:
        dtype = np.dtype(space.dtype) if space.dtype is not None else None
    except TypeError:
        return None
    if dtype is None:
        return None
    if dtype.kind == "U" and not space.shape:
        return "str", ()
    shape = space.shape
    if dtype.name in SUPPORTED_DTYPES and shape is not None and all(isinstance(d, int | np.integer) for d in shape):
        return dtype.name, tuple(int(d) for d in shape)
    return None


# --- JSON ------------------------------------------------------------------------------------


def space_to_json(space: spaces.Space[Any]) -> dict[str, Any]:
    """A JSON-able description of a supported space, exact enough to rebuild it.

    Non-finite bounds are written as the strings "inf", "-inf", "nan" (strict JSON has no such
    numbers); uniform bounds are written once.

    Raises:
        SchemaError: the space is not supported.
    """
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": [[k, space_to_json(s)] for k, s in space.spaces.items()]}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    if isinstance(space, spaces.Text):
        return {
            "type": "Text",
            "min_length": int(space.min_length),
            "max_length": int(space.max_length),
            "charset": "".join(sorted(space.character_set)),
        }
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "dtype": np.dtype(space.dtype).name,
            "shape": [int(d) for d in space.shape],
            "low": _encode_array(space.low),
            "high": _encode_array(space.high),
        }
    if isinstance(space, spaces.Discrete):
        return {
            "type": "Discrete",
            "n": int(space.n),
            "start": int(space.start),
            "dtype": np.dtype(space.dtype).name,
        }
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": np.asarray(space.nvec).tolist(),
            "start": np.asarray(space.start).tolist(),
            "dtype": np.dtype(space.dtype).name,
        }
    if isinstance(space, spaces.MultiBinary):
        n = space.n
        # MultiBinary(5) and MultiBinary([5]) differ (n is kept as given); keep the form.
        return {"type": "MultiBinary", "n": int(n) if isinstance(n, int | np.integer) else [int(d) for d in n]}
    declared = _declared_leaf(space)
    if declared is not None:
        # Stored as the space it declares itself to be; its own class is kept for the record.
        dtype_name, shape = declared
        origin = f"{type(space).__module__}.{type(space).__qualname__}"
        if dtype_name == "str":
            return {"type": "Text", "min_length": 0, "max_length": None, "charset": None, "declared_by": origin}
        return {
            "type": "Box",
            "dtype": dtype_name,
            "shape": list(shape),
            "low": {"fill": _encode_scalar(_lowest(np.dtype(dtype_name)))},
            "high": {"fill": _encode_scalar(_highest(np.dtype(dtype_name)))},
            "declared_by": origin,
        }
    raise SchemaError(f"{type(space).__name__} spaces are not supported: {space}")


def _lowest(dtype: np.dtype[Any]) -> Any:
    if dtype.kind == "f":
        return float("-inf")
    return False if dtype.kind == "b" else int(np.iinfo(dtype).min)


def _highest(dtype: np.dtype[Any]) -> Any:
    if dtype.kind == "f":
        return float("inf")
    return True if dtype.kind == "b" else int(np.iinfo(dtype).max)


def space_from_json(desc: dict[str, Any]) -> spaces.Space[Any]:
    """Rebuilds a space written by `space_to_json`.

    Raises:
        SchemaError: the description is not one `space_to_json` writes.
    """
    try:
        kind = desc["type"]
        if kind == "Dict":
            return spaces.Dict({k: space_from_json(s) for k, s in desc["spaces"]})
        if kind == "Tuple":
            return spaces.Tuple([space_from_json(s) for s in desc["spaces"]])
        if kind == "Text":
            if desc["charset"] is None:
                # A text space of another class (see `_declared_leaf`): any printable text.
                return spaces.Text(desc["max_length"] or 4096, min_length=desc["min_length"], charset=string.printable)
            return spaces.Text(desc["max_length"], min_length=desc["min_length"], charset=desc["charset"])
        if kind == "Box":
            dtype = np.dtype(desc["dtype"])
            shape = tuple(desc["shape"])
            low = _decode_array(desc["low"], shape, dtype)
            high = _decode_array(desc["high"], shape, dtype)
            return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
        if kind == "Discrete":
            return spaces.Discrete(desc["n"], start=desc["start"], dtype=desc["dtype"])
        if kind == "MultiDiscrete":
            return spaces.MultiDiscrete(
                np.array(desc["nvec"], dtype=desc["dtype"]),
                dtype=desc["dtype"],
                start=np.array(desc["start"], dtype=desc["dtype"]),
            )
        if kind == "MultiBinary":
            return spaces.MultiBinary(desc["n"])
    except (KeyError, TypeError, ValueError) as e:
        raise SchemaError(f"invalid space description {desc!r}: {e}") from e
    raise SchemaError(f"unknown space type in description {desc!r}")


def space_from_json_text(desc: Any) -> str:
    """A stored space description as text for messages: the space, or the description itself
    when it does not describe one."""
    try:
        return str(space_from_json(desc))
    except TrajcoreError:
        return str(desc)


def _encode_scalar(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def _decode_scalar(x: Any) -> Any:
    return float(x) if isinstance(x, str) else x


def _encode_array(a: np.ndarray[Any, Any]) -> dict[str, Any]:
    flat = np.asarray(a).ravel()
    # tolist() gives Python ints for integer dtypes (exact for (u)int64) and exact doubles for floats.
    values = flat.astype(np.int64 if flat.dtype == np.bool_ else flat.dtype).tolist()
    if flat.size > 0 and np.array_equal(flat, np.full_like(flat, flat[0]), equal_nan=flat.dtype.kind == "f"):
        return {"fill": _encode_scalar(values[0])}
    return {"values": [_encode_scalar(v) for v in values]}


def _decode_array(enc: dict[str, Any], shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    if "fill" in enc:
        return np.full(shape, _decode_scalar(enc["fill"]), dtype=dtype)
    return np.array([_decode_scalar(v) for v in enc["values"]], dtype=dtype).reshape(shape)
