"""pandas views of a dataset, of a selection of its episodes or of one episode: a step table
(`to_pandas`) and an episode table (`summaries_frame`). pandas is optional: without it these
raise `MissingDependencyError`.

Values an env did not give at a step (an info key missing, custom data not recorded) are
missing values (``pd.NA``) in columns of pandas' nullable dtypes (``Int64``, ``Float64``,
``boolean``, ``string``): an int info stays an int, and a NaN the env gave stays a NaN.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore._deps import require
from trajcore.errors import TrajcoreWarning
from trajcore.formats._columns import DEFAULT_MAX_VALUES, Leaf, choose, flat_names
from trajcore.formats._read import Batch, iter_batches, plan_of
from trajcore.formats.summaries import flatten_metadata, summary_columns
from trajcore.read.dataset import Dataset, members
from trajcore.read.episode import Episode
from trajcore.read.episodes import Episodes

__all__ = ["leaf_columns", "left_out_note", "summaries_frame", "to_pandas"]

Source = Dataset | Episodes | Episode
"""What the tables are made of: a dataset (every episode), a selection of episodes, one episode."""


def left_out_note(left_out: Sequence[Leaf], max_values: int, how: str) -> str:
    """The sentence naming the leaves a table left out for their size."""
    names = ", ".join(f"{leaf.name} ({leaf.describe()})" for leaf in left_out)
    return (
        f"left out of the table, more than {max_values} values a row: {names}; "
        f"name them in {how} to include them (one column per element)"
    )


def leaf_columns(leaf: Leaf, values: Any, mask: npt.NDArray[np.bool_] | None) -> dict[str, Any]:
    """A leaf's flat columns (see `flat_names`) as pandas-ready arrays: numpy arrays, or nullable
    pandas arrays where `mask` says a value was not given."""
    pd = require("pandas", "trajcore.to_pandas")
    names = flat_names(leaf)
    if leaf.dtype == "str":
        arr = pd.array(list(values), dtype="string")
        if mask is not None:
            arr[~mask] = pd.NA
        return {names[0]: arr}
    flat = np.asarray(values).reshape(len(values), leaf.size)
    out: dict[str, Any] = {}
    for k, name in enumerate(names):
        col = flat[:, k]
        if mask is None:
            out[name] = col
        elif col.dtype == np.bool_:
            out[name] = pd.arrays.BooleanArray(col, ~mask)
        elif col.dtype.kind in "iu":
            out[name] = pd.arrays.IntegerArray(col, ~mask)
        else:
            # pandas' nullable floats are float32 and float64 only; float16 widens exactly.
            wide = col if col.dtype.itemsize >= 4 else col.astype(np.float32)
            out[name] = pd.arrays.FloatingArray(wide, ~mask)
    return out


def _batch_columns(batch: Batch, leaves: Sequence[Leaf]) -> dict[str, Any]:
    cols: dict[str, Any] = {"episode": batch.episode, "env_index": batch.env_index, "step": batch.step}
    if batch.agent is not None:
        cols["agent"] = batch.agent  # multi-agent datasets: whose step each row is
    for leaf in leaves:
        cols.update(leaf_columns(leaf, batch.values[leaf.name], batch.masks.get(leaf.name)))
    return cols


def to_pandas(source: Source, columns: Sequence[str] | None = None, *, max_values: int | None = None) -> Any:
    """The steps of a dataset, of some of its episodes or of one episode as a pandas DataFrame,
    one row per step: ``episode`` (dataset index), ``env_index``, ``step`` (0 .. T-1 in its
    episode), then the observation before the step (``obs...``), the observation after it
    (``next_obs...``), ``action...``, ``reward``, ``terminated``, ``truncated``, the info the
    step returned (``info/...``; the reset's info is in no row) and the custom data recorded with
    it (``data/...``).

    Nested spaces and infos flatten to ``/``-joined names (``obs/pos``, ``info/episode/r``);
    an array flattens to one column per element in C order (``obs_0`` .. ``obs_3``). Values
    not given at a step (infos, custom data) are missing (``pd.NA``, nullable dtypes).

    Args:
        source: a `Dataset`, `Episodes` (``ds.select(...)``) or one `Episode`.
        columns: the values wanted, by name or '/'-bounded prefix (``["obs", "reward",
            "info"]``); default: every value of at most `max_values` elements.
        max_values: arrays larger than this (default 256: images) are left out unless
            `columns` names them, with a `TrajcoreWarning` naming them (also in
            ``frame.attrs["trajcore"]["left_out"]``).

    Raises:
        MissingDependencyError: pandas is not installed (an `ImportError`).
        InvalidArgumentError: a name in `columns` matches no value.
    """
    pd = require("pandas", "trajcore.to_pandas")
    ds, indices = members(source)
    max_values = DEFAULT_MAX_VALUES if max_values is None else max_values
    plan = plan_of(ds, indices)
    leaves, left_out = choose(plan.leaves, columns, max_values)
    if left_out:
        warnings.warn(left_out_note(left_out, max_values, "columns=[...]"), TrajcoreWarning, stacklevel=3)
    total = int(np.sum(ds._reads.summary()["length"][np.asarray(indices, dtype=np.int64)])) if len(indices) else 0
    frames = [
        pd.DataFrame(_batch_columns(b, leaves), copy=False)
        for b in iter_batches(ds, indices, plan, leaves, rows=max(total, 1))
    ]
    if frames:
        frame = frames[0]
    else:
        none = np.zeros(0, dtype=np.int64)
        empty = Batch(
            episode=none,
            env_index=none,
            step=none,
            values={
                leaf.name: [] if leaf.dtype == "str" else np.zeros((0, *leaf.shape), leaf.dtype) for leaf in leaves
            },
            masks={leaf.name: np.zeros(0, dtype=np.bool_) for leaf in leaves if leaf.mask},
        )
        frame = pd.DataFrame(_batch_columns(empty, leaves))
    frame.attrs["trajcore"] = {
        "rows": "row i is step i: obs before it, next_obs, reward, terminated, truncated and info after it",
        "left_out": [leaf.name for leaf in left_out],
    }
    return frame


def summaries_frame(source: Source) -> Any:
    """One row per episode of a dataset, of some of its episodes or of one episode, as a pandas
    DataFrame: ``episode`` (dataset index), recording, shard, env_index, episode_id, length,
    episode_return, complete, terminated, truncated, start_ns, end_ns, the episode metrics as
    ``metrics/<name>/<stat>`` (see `Dataset.metrics`), ``start_time`` / ``end_time`` (UTC
    datetimes), then the episode metadata flattened into ``metadata/<key>[/<subkey>...]``
    columns (missing where an episode lacks a key). Summaries and metrics come from the index:
    nothing is decompressed.

    Raises:
        MissingDependencyError: pandas is not installed (an `ImportError`).
    """
    pd = require("pandas", "trajcore.summaries_frame")
    ds, indices = members(source)
    cols: dict[str, Any] = dict(summary_columns(ds, indices))
    cols["start_time"] = pd.to_datetime(cols["start_ns"], unit="ns", utc=True)
    cols["end_time"] = pd.to_datetime(cols["end_ns"], unit="ns", utc=True)
    frame = pd.DataFrame(cols)
    metadata = [flatten_metadata(ds._reads.episode_metadata(int(i))) for i in indices]
    if any(metadata):
        meta = pd.DataFrame.from_records(metadata, index=frame.index)
        frame = pd.concat([frame, meta], axis=1)
    return frame
