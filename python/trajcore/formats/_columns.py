"""The columns of a step table and their names: one rule for pandas, CSV and Parquet.

A *leaf* is one recorded value per step, read from one trajcore column. Row i of a step table is
step i of its episode, a transition:

- ``obs/...``: the observation the action was chosen on (observation row i);
- ``next_obs/...``: the observation the step returned (observation row i + 1);
- ``action/...``, ``reward``, ``terminated``, ``truncated``: step i;
- ``info/...``: the info the step returned, beside ``next_obs`` (info row i + 1). The reset's info
  (row 0) is in no row: a step table has T rows, and the reset is not a step;
- ``data/...``: the custom data recorded with step i (``record`` before ``step``).

Names: the group, then the path inside the space or the info dict, joined by ``/`` (Dict keys
escaped as in trajcore column names, Tuple items by position): ``obs``, ``next_obs/pos``,
``action/0``, ``info/episode/r``, ``data/logp``. An array leaf flattens to one column per
element in C order, ``<name>_<k>``: ``obs_0`` .. ``obs_3`` for CartPole, ``obs/grid_0`` ..
``obs/grid_8`` for a 3x3 grid. Parquet keeps the nesting instead (struct fields named by the same
path components) and the arrays whole.

Everything here takes and returns plain values (column specs, layout trees): the reading is in
`trajcore.formats._read`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trajcore import _core
from trajcore.errors import InvalidArgumentError, SchemaError
from trajcore.read.records.infos import column_fields
from trajcore.spaces import escape_key

__all__ = [
    "DEFAULT_MAX_VALUES",
    "GROUPS",
    "INDEX_COLUMNS",
    "Leaf",
    "Plan",
    "RecordingColumns",
    "choose",
    "flat_names",
    "make_plan",
]

INDEX_COLUMNS = ("episode", "env_index", "step")
"""Every step table starts with these: the episode's index in the dataset, its sub-env, and
the step number inside the episode (0 .. T-1)."""

GROUPS = ("obs", "next_obs", "action", "reward", "terminated", "truncated", "info", "data")

DEFAULT_MAX_VALUES = 256
"""Array leaves with more values than this (images) are left out of flat tables unless asked
for by name: 64x64x3 pixels would otherwise make 12,288 columns twice over (obs and next_obs)."""


@dataclass(frozen=True)
class Leaf:
    """One table leaf.

    Attributes:
        group: one of `GROUPS`.
        path: components inside the group, unescaped (``()`` for a bare leaf such as CartPole's
            ``obs``; ``("pos",)``; ``("0",)`` for a Tuple item).
        column: the trajcore column the values come from (``obs`` feeds ``obs`` and ``next_obs``).
        dtype: numpy dtype name, or ``"str"``.
        shape: shape of one row's value.
        first_row: which row of the column holds step 0's value (1 for ``next_obs`` and infos).
        mask: the column saying at which rows the value was given (infos, custom data), if any.
        wider: the columns (with their masks) that continue `column` in wider types, in order
            (a key whose later values did not fit its first value's type; `trajcore.read.records.infos.Field`):
            the leaf reads them merged into one, of `dtype`, the widest.
    """

    group: str
    path: tuple[str, ...]
    column: str
    dtype: str
    shape: tuple[int, ...]
    first_row: int
    mask: str | None
    wider: tuple[tuple[str, str | None], ...] = ()

    @property
    def name(self) -> str:
        """The leaf's name: group and path joined by '/' (see the module docstring)."""
        return "/".join([self.group, *(escape_key(p) for p in self.path)])

    @property
    def on_obs_timeline(self) -> bool:
        """Whether the leaf's column has a row per observation (T + 1 an episode: observations
        and infos) rather than per step (T: actions, rewards, flags, custom data)."""
        return self.group in ("obs", "next_obs", "info")

    @property
    def size(self) -> int:
        """Values in one row (1 for a scalar or a str)."""
        return math.prod(self.shape)

    def describe(self) -> str:
        """Shape and dtype as a person reads them: ``64x64x3 uint8``."""
        dims = "x".join(map(str, self.shape)) if self.shape else "scalar"
        return f"{dims} {self.dtype}"


def flat_names(leaf: Leaf) -> list[str]:
    """The flat-table column names of a leaf: its name for a scalar, ``<name>_<k>`` for each
    element of an array, in C order."""
    if not leaf.shape:
        return [leaf.name]
    return [f"{leaf.name}_{k}" for k in range(leaf.size)]


@dataclass(frozen=True)
class RecordingColumns:
    """What the plan needs from one recording: its layout trees and column specs (as
    `_core.Dataset.columns` gives them)."""

    observation: Any
    action: Any
    columns: Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class Plan:
    """Every leaf a dataset's step tables can have, in table order, and the columns each
    recording has (an episode of a recording without an info key reads it as never given)."""

    leaves: tuple[Leaf, ...]
    columns_of: tuple[frozenset[str], ...]


def _space_leaves(rec: RecordingColumns, which: str) -> list[tuple[tuple[str, ...], str, str, tuple[int, ...]]]:
    tree = rec.observation if which == "observation" else rec.action
    if tree is None:
        raise SchemaError(f"a recording's Meta record has no {which} layout: its {which}s cannot be tabulated")
    specs = {c["name"]: c for c in rec.columns}
    paths = [(tuple(str(p) for p in path), col) for path, col in _core.layout_leaves(json.dumps(tree))]
    out = []
    for path, column in paths:
        spec = specs.get(column)
        if spec is None:
            raise SchemaError(f"the {which} layout names column {column!r}, which the recording does not have")
        out.append((path, column, str(spec["dtype"]), tuple(int(d) for d in spec["shape"])))
    return out


def _value_leaves(rec: RecordingColumns, group: str) -> list[Leaf]:
    """Info or custom-data leaves (value columns, not their masks), grouped as the reader groups
    them: a widened key is one leaf of its widest dtype (`column_fields`)."""
    specs = {c["name"]: c for c in rec.columns}
    first_row = 1 if group == "info" else 0
    out = []
    for f in column_fields(rec.columns, group + "/"):
        spec = specs[f.column]
        widest = specs[f.wider[-1][0]] if f.wider else spec
        shape = tuple(int(d) for d in spec["shape"])
        out.append(Leaf(group, f.path, f.column, str(widest["dtype"]), shape, first_row, f.mask, tuple(f.wider)))
    return out


def _joined(known: Leaf, leaf: Leaf) -> Leaf | None:
    """One leaf for a key two recordings have (`known` from the earlier): the same dtype and
    shape, or, where either widened the key, the numpy promotion of both dtypes when each casts
    safely to it (a recording whose values never outgrew the first type beside one whose did);
    None where one table cannot hold both."""
    wider = tuple(dict.fromkeys(known.wider + leaf.wider))
    if (known.dtype, known.shape) == (leaf.dtype, leaf.shape):
        return dataclasses.replace(known, wider=wider)
    if not wider or known.shape != leaf.shape or "str" in (known.dtype, leaf.dtype):
        return None
    promoted = np.promote_types(known.dtype, leaf.dtype)
    if not all(np.can_cast(d, promoted, "safe") for d in (known.dtype, leaf.dtype)):
        return None
    return dataclasses.replace(known, dtype=str(promoted), wider=wider)


def make_plan(recordings: Sequence[RecordingColumns]) -> Plan:
    """The leaves of a dataset's step tables.

    Observation and action leaves come from the first recording; every other recording must
    have the same ones (a table has one schema). Info and custom-data leaves are the union over
    the recordings, in the order first seen.

    Args:
        recordings: one entry per recording of the dataset, in order.

    Returns:
        The plan; its leaves are in table order (`GROUPS`).

    Raises:
        InvalidArgumentError: recordings differ in their observation or action columns.
        SchemaError: an info or data column has different dtypes or shapes in two recordings,
            or a layout is missing.
    """
    if not recordings:
        return Plan((), ())
    first = recordings[0]
    spaces = {which: _space_leaves(first, which) for which in ("observation", "action")}
    for r, rec in enumerate(recordings[1:], start=1):
        for which in ("observation", "action"):
            if _space_leaves(rec, which) != spaces[which]:
                raise InvalidArgumentError(
                    f"recording {r} has other {which} columns than recording 0: one table cannot hold both; "
                    f"export them apart (select recording=0, then recording={r})"
                )
    leaves: list[Leaf] = []
    for path, column, dtype, shape in spaces["observation"]:
        leaves.append(Leaf("obs", path, column, dtype, shape, 0, None))
    for path, column, dtype, shape in spaces["observation"]:
        leaves.append(Leaf("next_obs", path, column, dtype, shape, 1, None))
    for path, column, dtype, shape in spaces["action"]:
        leaves.append(Leaf("action", path, column, dtype, shape, 0, None))
    leaves.append(Leaf("reward", (), "reward", "float64", (), 0, None))
    leaves.append(Leaf("terminated", (), "terminated", "bool", (), 0, None))
    leaves.append(Leaf("truncated", (), "truncated", "bool", (), 0, None))
    for group in ("info", "data"):
        seen: dict[str, Leaf] = {}
        for rec in recordings:
            for leaf in _value_leaves(rec, group):
                known = seen.get(leaf.column)
                joined = leaf if known is None else _joined(known, leaf)
                if known is not None and joined is None:
                    raise SchemaError(
                        f"column {leaf.column!r} is {known.describe()} in one recording and {leaf.describe()} in "
                        "another: one table cannot hold both"
                    )
                seen[leaf.column] = joined or leaf
        leaves.extend(seen.values())
    _check_unique(leaves)
    return Plan(tuple(leaves), tuple(frozenset(c["name"] for c in rec.columns) for rec in recordings))


def _check_unique(leaves: Sequence[Leaf]) -> None:
    # "obs/a" element 0 and a Dict key "a_0" would both be "obs/a_0": refuse rather than write
    # a table with two columns of one name.
    owner: dict[str, str] = {name: "the index" for name in INDEX_COLUMNS}
    for leaf in leaves:
        for name in flat_names(leaf):
            if name in owner:
                raise SchemaError(
                    f"two values would share the table column {name!r} ({owner[name]} and {leaf.name}); "
                    "rename the Dict key or info entry"
                )
            owner[name] = leaf.name


def choose(leaves: Sequence[Leaf], columns: Sequence[str] | None, max_values: int) -> tuple[list[Leaf], list[Leaf]]:
    """The leaves a table keeps, and those left out for their size.

    Args:
        leaves: the plan's leaves, in table order.
        columns: None for every leaf of at most `max_values` values; else the leaves wanted, each
            named by a leaf name or a '/'-bounded prefix of one (``"obs"``, ``"info"``,
            ``"next_obs/image"``, ``"data/logp"``), whatever their size. The index columns are
            always kept. ``"info"`` and ``"data"`` (the groups a recording may have no value of)
            select nothing in a dataset that has none.
        max_values: the size bound applied when `columns` is None.

    Returns:
        (kept, left out), both in table order. Nothing is left out when `columns` is given.

    Raises:
        InvalidArgumentError: a name matches no leaf (but for an empty ``"info"`` or ``"data"``
            group); the message lists the leaf names.
    """
    if columns is None:
        kept = [leaf for leaf in leaves if leaf.size <= max_values]
        return kept, [leaf for leaf in leaves if leaf.size > max_values]
    wanted = [str(c).strip().strip("/") for c in columns]
    wanted = [w for w in wanted if w and w not in INDEX_COLUMNS]
    for w in wanted:
        if w not in _MAY_BE_EMPTY and not any(_matches(leaf.name, w) for leaf in leaves):
            raise InvalidArgumentError(
                f"column {w!r} names no value of this dataset (names: {', '.join(leaf.name for leaf in leaves)}; "
                f"a '/'-bounded prefix such as 'obs' or 'info' takes every value below it)"
            )
    return [leaf for leaf in leaves if any(_matches(leaf.name, w) for w in wanted)], []


# Groups whose values depend on what the env gave and what was recorded: asking for every value
# of one selects none where a dataset has none.
_MAY_BE_EMPTY = ("info", "data")


def _matches(name: str, selector: str) -> bool:
    return name == selector or name.startswith(selector + "/")
