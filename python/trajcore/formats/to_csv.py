"""CSV export: a header, then one row per step, as a training callback logging steps writes it.

Columns as in every step table (`trajcore.formats._columns`): ``episode, env_index, step``, the
observation leaves before the step (``obs_0 .. obs_n``, arrays flattened in C order), after it
(``next_obs_0 ..``), the action, ``reward``, ``terminated``, ``truncated``, infos and custom
data. Numbers are written in the shortest form that reads back to the same value in their dtype
(a float32 ``0.1`` as ``0.1``); bools as ``True`` / ``False``; a value not given at a step (an
info key, custom data) as an empty field. Standard library only: no optional package.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore.formats._columns import INDEX_COLUMNS, Leaf, flat_names
from trajcore.formats._read import Batch, StepTable
from trajcore.read.multiagent.agents import agent_names

__all__ = ["write_csv"]


def _strings(values: npt.NDArray[Any]) -> list[str]:
    if values.dtype.kind in "iu":
        return list(map(str, values.tolist()))
    if values.dtype == np.bool_:
        return np.where(values, "True", "False").tolist()  # type: ignore[no-any-return]
    # numpy's str conversion of floats is the shortest form that reads back to the same value
    # in their own dtype (float32 0.1 -> "0.1", not the double "0.10000000149011612").
    return values.astype(str).tolist()  # type: ignore[no-any-return]


def _masked(strings: list[str], mask: npt.NDArray[np.bool_] | None) -> list[str]:
    if mask is None or mask.all():
        return strings
    return [s if m else "" for s, m in zip(strings, mask.tolist(), strict=True)]


def _columns(batch: Batch, leaves: Sequence[Leaf]) -> list[list[str]]:
    cols = [_strings(batch.episode), _strings(batch.env_index), _strings(batch.step)]
    if batch.agent is not None:
        cols.append([str(a) for a in batch.agent.tolist()])
    for leaf in leaves:
        values = batch.values[leaf.name]
        mask = batch.masks.get(leaf.name)
        if leaf.dtype == "str":
            cols.append(_masked(list(values), mask))
            continue
        flat = np.asarray(values).reshape(len(batch), leaf.size)
        for k in range(flat.shape[1]):
            cols.append(_masked(_strings(flat[:, k]), mask))
    return cols


def write_csv(table: StepTable, path: str, batch_rows: int | None = None) -> int:
    """Writes the step table to `path` (created or truncated).

    Args:
        batch_rows: rows formatted per write (default: about 8 MiB of values, at most 16k rows).

    Returns:
        The number of rows written (steps).
    """
    header = list(INDEX_COLUMNS) + (["agent"] if agent_names(table.ds._reads) is not None else [])
    for leaf in table.leaves:
        header.extend(flat_names(leaf))
    rows = 0
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        # Rows are formatted a batch at a time as lists of str, about 60 bytes each: batches of
        # at most 16k rows keep that small.
        for batch in table.batches(batch_rows, 8 << 20, 16 << 10):
            writer.writerows(zip(*_columns(batch, table.leaves), strict=True))
            rows += len(batch)
    return rows
