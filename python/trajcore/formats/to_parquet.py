"""Parquet export through pyarrow: one row per step, the nesting of the spaces kept.

Columns (rows as in every step table, see `trajcore.formats._columns`): ``episode``,
``env_index``, ``step`` (int64), then ``obs``, ``next_obs``, ``action``, ``reward``,
``terminated``, ``truncated``, ``info`` and ``data`` (the last two only when the dataset has
infos / custom data). Each value is typed by its leaf:

- a scalar: its Arrow type (``int64``, ``float32``, ``bool``, ...); Text: ``string``;
- a 1-d array: ``fixed_size_list<dtype>[n]``;
- an array of 2 or more dimensions: the canonical ``arrow.fixed_shape_tensor`` extension type
  (``to_numpy_ndarray()`` gives it back shaped); its storage is a ``fixed_size_list`` of the
  flattened values in C order, which readers without the extension see;
- a Dict or Tuple: a ``struct`` with one field per key (Tuple items named ``"0"``, ``"1"``, ...);
  ``info`` and ``data`` are structs of their keys the same way.

A value the env did not give at a step (an info key, custom data) is null. Row groups hold about
32 MiB of values (at most 64k rows), zstd-compressed; the index columns are dictionary-encoded.
The file's key-value metadata has one key, ``trajcore``: a JSON object with the observation and
action spaces (as `trajcore.spaces` writes them), the dataset metadata, the env id, the source
path, the row rule and the leaves.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from trajcore._deps import require
from trajcore.formats._columns import GROUPS, Leaf
from trajcore.formats._read import Batch, StepTable
from trajcore.read.dataset import Dataset
from trajcore.read.multiagent.agents import agent_names

__all__ = ["METADATA_KEY", "file_metadata", "write_parquet"]

METADATA_KEY = b"trajcore"


def _pa() -> Any:
    return require("pyarrow", "Parquet export")


def _leaf_type(leaf: Leaf) -> Any:
    pa = _pa()
    if leaf.dtype == "str":
        return pa.string()
    scalar = pa.from_numpy_dtype(np.dtype(leaf.dtype))
    if not leaf.shape:
        return scalar
    if len(leaf.shape) == 1:
        return pa.list_(scalar, leaf.shape[0])
    return pa.fixed_shape_tensor(scalar, list(leaf.shape))


def _leaf_array(leaf: Leaf, values: Any, mask: np.ndarray[Any, Any] | None) -> Any:
    pa = _pa()
    nulls = None if mask is None else pa.array(~mask)
    kind = _leaf_type(leaf)
    if leaf.dtype == "str":
        return pa.array(list(values), type=kind, mask=None if mask is None else ~mask)
    arr = np.ascontiguousarray(values)
    if not leaf.shape:
        return pa.array(arr, type=kind, mask=None if mask is None else ~mask)
    storage = pa.FixedSizeListArray.from_arrays(pa.array(arr.reshape(-1)), leaf.size, mask=nulls)
    if len(leaf.shape) == 1:
        return storage
    return pa.ExtensionArray.from_storage(kind, storage)


def _nest(entries: list[tuple[tuple[str, ...], Any]], make_struct: Any) -> Any:
    """Builds the nested value of a group from (path, leaf value) pairs in order: a bare leaf
    (empty path) is itself; otherwise a struct per path component."""
    if len(entries) == 1 and entries[0][0] == ():
        return entries[0][1]
    children: dict[str, list[tuple[tuple[str, ...], Any]]] = {}
    for path, value in entries:
        children.setdefault(path[0], []).append((path[1:], value))
    return make_struct([(name, _nest(sub, make_struct)) for name, sub in children.items()])


def _schema(leaves: Sequence[Leaf], agents: bool = False) -> Any:
    pa = _pa()
    fields = [pa.field(name, pa.int64(), nullable=False) for name in ("episode", "env_index", "step")]
    if agents:
        fields.append(pa.field("agent", pa.string()))  # multi-agent datasets: whose step each row is
    for group in GROUPS:
        entries = [(leaf.path, _leaf_type(leaf)) for leaf in leaves if leaf.group == group]
        if entries:
            kind = _nest(entries, lambda items: pa.struct([pa.field(n, t) for n, t in items]))
            fields.append(pa.field(group, kind))
    return pa.schema(fields)


def _table(batch: Batch, leaves: Sequence[Leaf], schema: Any) -> Any:
    pa = _pa()
    columns: list[Any] = [pa.array(batch.episode), pa.array(batch.env_index), pa.array(batch.step)]
    if batch.agent is not None:
        columns.append(pa.array(batch.agent.tolist(), pa.string()))
    for group in GROUPS:
        entries = [
            (leaf.path, _leaf_array(leaf, batch.values[leaf.name], batch.masks.get(leaf.name)))
            for leaf in leaves
            if leaf.group == group
        ]
        if entries:
            columns.append(
                _nest(entries, lambda items: pa.StructArray.from_arrays([a for _, a in items], [n for n, _ in items]))
            )
    return pa.Table.from_arrays(columns, schema=schema)


def file_metadata(ds: Dataset, leaves: Sequence[Leaf]) -> dict[str, Any]:
    """The JSON object stored under the ``trajcore`` key of the file's key-value metadata."""
    user = (ds.meta(0).get("user") or {}) if ds.num_recordings else {}
    return {
        "format": "trajcore step table 1",
        "source": ds.path,
        "env_id": user.get("env_id"),
        "observation_space": user.get("observation_space"),
        "action_space": user.get("action_space"),
        "metadata": ds.metadata,
        "rows": "row i is step i of its episode: obs before it; next_obs, reward, terminated, truncated "
        "and info after it; data recorded with it",
        "leaves": [{"name": leaf.name, "dtype": leaf.dtype, "shape": list(leaf.shape)} for leaf in leaves],
    }


def write_parquet(table: StepTable, path: str, batch_rows: int | None = None) -> int:
    """Writes the step table to the Parquet file `path`, one row group per batch of about
    32 MiB of values.

    Args:
        batch_rows: rows per row group (default: about 32 MiB of values, at most 64k rows).

    Returns:
        The number of rows written (steps).

    Raises:
        MissingDependencyError: pyarrow is not installed.
    """
    require("pyarrow.parquet", "Parquet export")
    import pyarrow.parquet as pq

    leaves = table.leaves
    agents = agent_names(table.ds._reads) is not None
    schema = _schema(leaves, agents).with_metadata({METADATA_KEY: json.dumps(file_metadata(table.ds, leaves)).encode()})
    rows = 0
    # Dictionary encoding pays on the index columns (few distinct values, long runs); on
    # observations it is tried, fails and costs memory for every row group.
    with pq.ParquetWriter(
        path, schema, compression="zstd", use_dictionary=["episode", "env_index", "step", "agent"]
    ) as writer:
        for batch in table.batches(batch_rows, 32 << 20, 64 << 10):
            arrow = _table(batch, leaves, schema)
            writer.write_table(arrow, row_group_size=len(arrow))
            rows += len(batch)
    return rows
