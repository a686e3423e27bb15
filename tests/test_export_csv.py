"""CSV export read back with the csv module (and pandas when installed), compared value by value
with what trajcore.open reads."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from export_data import NAMES, flat_steps, leaf_dtypes

COLUMNS = {"pixels": ["obs", "next_obs", "action", "reward", "terminated", "truncated"]}


def parse(text: str, dtype: np.dtype[Any] | None) -> Any:
    """A CSV field as the Python value of its column's dtype (the reader knows the dtype from the
    space, as a user would)."""
    if dtype is None:
        return text
    if dtype == np.bool_:
        assert text in ("True", "False"), text
        return text == "True"
    return np.array(text).astype(np.float64 if dtype.kind == "f" else np.int64).astype(dtype).item()


@pytest.mark.parametrize("name", NAMES)
def test_csv_reads_back_value_by_value(name: str, recorded: Callable[[str], Path], tmp_path: Path) -> None:
    out = tmp_path / f"{name}.csv"
    with trajcore.open(recorded(name)) as ds:
        result = trajcore.export(ds, out, columns=COLUMNS.get(name))
        want = flat_steps(ds)
        dtypes = leaf_dtypes(ds)
    assert result["steps"] == len(want)
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(want)
    header = list(rows[0].keys())
    assert header[:3] == ["episode", "env_index", "step"]
    index = {"episode": np.dtype(np.int64), "env_index": np.dtype(np.int64), "step": np.dtype(np.int64)}
    for i, (got, expected) in enumerate(zip(rows, want, strict=True)):
        values = {k: parse(v, {**dtypes, **index}[k]) for k, v in got.items() if v != "" or dtypes.get(k, 0) is None}
        # An empty field is a value not given (or, for a str column, possibly an empty str).
        values = {k: v for k, v in values.items() if not (v == "" and k not in expected)}
        assert values == expected, f"row {i}"


def test_csv_layout_as_a_step_logger_writes_it(recorded: Callable[[str], Path], tmp_path: Path) -> None:
    out = tmp_path / "cp.csv"
    trajcore.export(recorded("cartpole"), out)
    lines = out.read_text().splitlines()
    assert lines[0] == (
        "episode,env_index,step,obs_0,obs_1,obs_2,obs_3,next_obs_0,next_obs_1,next_obs_2,next_obs_3,"
        "action,reward,terminated,truncated"
    )
    first = lines[1].split(",")
    with trajcore.open(recorded("cartpole")) as ds:
        obs = ds.episodes[0].observations
    # float32 values in their shortest form, not as the doubles they convert to.
    assert first[3:7] == [str(v) for v in obs[0]]
    assert first[7:11] == [str(v) for v in obs[1]]
    assert first[13:] == ["False", "False"]


def test_pandas_reads_the_csv(recorded: Callable[[str], Path], tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas", reason="pandas is optional: this reads the CSV with it")
    out = tmp_path / "vec.csv"
    with trajcore.open(recorded("vector")) as ds:
        trajcore.export(ds, out)
        frame = trajcore.to_pandas(ds)
    read = pd.read_csv(out)
    assert list(read.columns) == list(frame.columns)
    for column in frame.columns:
        # pandas reads floats as float64: cast to the recorded dtype, as a reader knowing it does.
        pd.testing.assert_series_equal(read[column].astype(frame[column].dtype), frame[column], obj=column)


def test_csv_columns_and_refusing_to_overwrite(recorded: Callable[[str], Path], tmp_path: Path) -> None:
    out = tmp_path / "px.csv"
    with pytest.warns(trajcore.TrajcoreWarning, match="left out"):
        result = trajcore.export(recorded("pixels"), out)
    assert result["left_out"] == ["obs", "next_obs"]
    assert out.read_text().splitlines()[0] == "episode,env_index,step,action,reward,terminated,truncated"
    with pytest.raises(trajcore.InvalidArgumentError, match="already exists"):
        trajcore.export(recorded("pixels"), out, columns=["obs"])
    trajcore.export(recorded("pixels"), out, columns=["obs"], force=True)
    header = out.read_text().splitlines()[0].split(",")
    assert header == ["episode", "env_index", "step"] + [f"obs_{k}" for k in range(32 * 32 * 3)]
    with pytest.raises(trajcore.InvalidArgumentError, match="names no value"):
        trajcore.export(recorded("pixels"), tmp_path / "other.csv", columns=["pixels"])
    assert not (tmp_path / "other.csv").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["px.csv"]  # no temporary file left behind


def test_an_empty_selection_exports_a_header_only(recorded: Callable[[str], Path], tmp_path: Path) -> None:
    with trajcore.open(recorded("vector")) as ds:
        none = ds.select(min_length=10**6)
        result = trajcore.export(none, tmp_path / "e.csv")
        trajcore.export(none, tmp_path / "e.jsonl")
        full = ds.episodes[:1]
        trajcore.export(full, tmp_path / "one.csv")
    assert result["steps"] == 0 and result["episodes"] == 0
    lines = (tmp_path / "e.csv").read_text().splitlines()
    assert lines == (tmp_path / "one.csv").read_text().splitlines()[:1]
    assert (tmp_path / "e.jsonl").read_text() == ""
