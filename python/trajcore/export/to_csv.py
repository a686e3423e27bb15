"""CSV export: a header, then one row per step, as a training callback logging steps writes it.

Columns as in every step table (`trajcore.export._columns`): ``episode, env_index, step``, the
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

from trajcore.dataset import Dataset
from trajcore.export._columns import INDEX_COLUMNS, Leaf, Plan, flat_names
from trajcore.export._read import Batch, Progress, iter_batches, rows_per_batch

__all__ = ["write_csv"]


def _strings(values: npt.NDArray[Any]) -> list[str]:
    # numpy's str conversion is the shortest round-trip form per dtype (float32 0.1 -> "0.1"),
    # done in C; per-value Python formatting would dominate the export time.
    return values.astype(str).tolist()  # type: ignore[no-any-return]


def _masked(strings: list[str], mask: npt.NDArray[np.bool_] | None) -> list[str]:
    if mask is None or mask.all():
        return strings
    return [s if m else "" for s, m in zip(strings, mask.tolist(), strict=True)]


def _columns(batch: Batch, leaves: Sequence[Leaf]) -> list[list[str]]:
    cols = [_strings(batch.episode), _strings(batch.env_index), _strings(batch.step)]
    for leaf in leaves:
        values = batch.values[leaf.name]
        mask = batch.masks.get(leaf.name)
        if leaf.dtype == "str":
            cols.append(_masked(list(values), mask))
            continue
        flat = np.asarray(values).reshape(len(batch), -1)
        for k in range(flat.shape[1]):
            cols.append(_masked(_strings(flat[:, k]), mask))
    return cols


def write_csv(
    ds: Dataset,
    indices: Sequence[int],
    path: str,
    plan: Plan,
    leaves: Sequence[Leaf],
    progress: Progress | None = None,
) -> int:
    """Writes the step table of the given episodes to `path` (created or truncated).

    Returns:
        The number of rows written (steps).
    """
    header = list(INDEX_COLUMNS)
    for leaf in leaves:
        header.extend(flat_names(leaf))
    rows = 0
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        # Batches of at most 64k rows keep the per-column string lists small.
        for batch in iter_batches(ds, indices, plan, leaves, min(rows_per_batch(leaves), 1 << 16), progress):
            writer.writerows(zip(*_columns(batch, leaves), strict=True))
            rows += len(batch)
    return rows
