"""Parquet export read back with pyarrow.parquet.read_table, compared value by value with what
trajcore.open reads; nesting as structs, arrays as fixed-size lists and tensors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from export_data import NAMES, flat_steps
from trajcore.spaces import escape_key

pa = pytest.importorskip("pyarrow", reason="pyarrow is optional: Parquet export needs it")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is optional: Parquet export needs it")


def flatten_row(prefix: str, value: Any, out: dict[str, Any]) -> None:
    """A `to_pylist` value under the flat naming rule: struct fields (raw keys) escaped and
    '/'-joined, list elements as _k; nulls left out (a value not given)."""
    if value is None:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            flatten_row(f"{prefix}/{escape_key(k)}", v, out)
    elif isinstance(value, list):
        for k, v in enumerate(value):
            out[f"{prefix}_{k}"] = v
    else:
        out[prefix] = value


@pytest.mark.parametrize("name", NAMES)
def test_parquet_reads_back_value_by_value(name: str, recorded: Callable[[str], Path], tmp_path: Path) -> None:
    out = tmp_path / f"{name}.parquet"
    with trajcore.open(recorded(name)) as ds:
        result = trajcore.export(ds, out)
        want = flat_steps(ds)
        observation_space = ds.observation_space
        metadata = ds.metadata
    assert result["left_out"] == []  # Parquet keeps images whole
    table = pq.read_table(out)
    assert table.num_rows == len(want) == result["steps"]
    for i, record in enumerate(table.to_pylist()):
        got: dict[str, Any] = {}
        for key, value in record.items():
            if key in ("info", "data"):
                for k, v in (value or {}).items():
                    flatten_row(f"{key}/{escape_key(k)}", v, got)
            else:
                flatten_row(key, value, got)
        assert got == want[i], f"row {i}"
    info = json.loads(table.schema.metadata[b"trajcore"])
    assert info["metadata"] == metadata
    assert trajcore.spaces.space_from_json(info["observation_space"]) == observation_space
    assert "row i is step i" in info["rows"]


def test_parquet_types_keep_the_nesting(recorded: Callable[[str], Path], tmp_path: Path) -> None:
    out = tmp_path / "nested.parquet"
    trajcore.export(recorded("nested"), out)
    schema = pq.read_schema(out)
    obs = schema.field("obs").type
    assert pa.types.is_struct(obs)
    assert obs.field("pos").type == pa.list_(pa.float32(), 2)
    assert obs.field("grid").type == pa.fixed_shape_tensor(pa.uint8(), [2, 3])
    assert obs.field("name").type == pa.string()
    assert obs.field("a%b").type == pa.int64()
    assert obs.field("t").type == pa.struct([pa.field("0", pa.int64()), pa.field("1", pa.list_(pa.int8(), 2))])
    assert schema.field("action").type.field("1").type == pa.list_(pa.float32(), 2)
    assert schema.field("reward").type == pa.float64()
    assert schema.field("info").type.field("nested").type.field("b").type == pa.list_(pa.float32(), 2)


def test_parquet_images_are_tensors(recorded: Callable[[str], Path], tmp_path: Path) -> None:
    out = tmp_path / "px.parquet"
    with trajcore.open(recorded("pixels")) as ds:
        trajcore.export(ds, out)
        observations = np.concatenate([ep.observations[:-1] for ep in ds.episodes])
        next_observations = np.concatenate([ep.observations[1:] for ep in ds.episodes])
    table = pq.read_table(out)
    obs = table.column("obs").combine_chunks()
    assert obs.type == pa.fixed_shape_tensor(pa.uint8(), [32, 32, 3])
    np.testing.assert_array_equal(obs.to_numpy_ndarray(), observations)
    np.testing.assert_array_equal(table.column("next_obs").combine_chunks().to_numpy_ndarray(), next_observations)


def test_parquet_nulls_where_not_given_and_row_groups(recorded: Callable[[str], Path], tmp_path: Path) -> None:
    out = tmp_path / "vec.parquet"
    with trajcore.open(recorded("vector")) as ds:
        trajcore.export(ds, out, batch_rows=16)
        even = np.concatenate([ep.infos["_even"][1:] for ep in ds.episodes])
        logp = np.concatenate([ep.data["_logp"] for ep in ds.episodes])
        steps = ds.num_steps
    file = pq.ParquetFile(out)
    sizes = [file.metadata.row_group(g).num_rows for g in range(file.metadata.num_row_groups)]
    assert sizes == [16] * (steps // 16) + ([steps % 16] if steps % 16 else [])
    table = pq.read_table(out)
    info = table.column("info").combine_chunks()
    assert info.field("even").is_null().to_numpy(zero_copy_only=False).tolist() == (~even).tolist()
    data = table.column("data").combine_chunks()
    assert data.field("logp").is_null().to_numpy(zero_copy_only=False).tolist() == (~logp).tolist()
