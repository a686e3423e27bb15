"""trajcore.to_pandas / trajcore.summaries_frame (of a dataset, a selection, an episode),
compared value by value with what trajcore.open reads."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from export_data import NAMES, flat_steps, leaf_dtypes

pd = pytest.importorskip("pandas", reason="pandas is optional: to_pandas needs it")


def frame_rows(frame: Any) -> list[dict[str, Any]]:
    """A frame as one dict per row, missing values (pd.NA) left out, numpy values as Python."""
    rows = []
    for record in frame.to_dict("records"):
        rows.append(
            {
                k: (v.item() if isinstance(v, np.generic) else v)
                for k, v in record.items()
                if v is not pd.NA and v is not None
            }
        )
    return rows


def assert_rows_equal(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.keys() == w.keys(), f"row {i}: columns {sorted(set(g) ^ set(w))} differ"
        for k in w:
            assert g[k] == w[k] or (g[k] != g[k] and w[k] != w[k]), f"row {i}, {k}: {g[k]!r} != {w[k]!r}"


@pytest.mark.parametrize("name", NAMES)
def test_to_pandas_equals_the_reader_value_by_value(name: str, recorded: Callable[[str], Path]) -> None:
    with trajcore.open(recorded(name)) as ds:
        want = flat_steps(ds)
        dtypes = leaf_dtypes(ds)
        columns = None if name != "pixels" else ["obs", "next_obs", "action", "reward", "terminated", "truncated"]
        frame = trajcore.to_pandas(ds, columns)
    assert len(frame) == sum(1 for _ in want)
    assert list(frame.columns[:3]) == ["episode", "env_index", "step"]
    assert_rows_equal(frame_rows(frame), want)
    # Plain numpy dtypes where every row has a value; the space's dtype is kept.
    for column, dtype in dtypes.items():
        if column.startswith(("obs", "next_obs", "action")) and dtype is not None:
            assert frame[column].dtype == dtype, column


def test_values_not_given_are_missing_in_nullable_columns(recorded: Callable[[str], Path]) -> None:
    with trajcore.open(recorded("vector")) as ds:
        frame = trajcore.to_pandas(ds)
        ep = ds.episodes[0]
        one = trajcore.to_pandas(ep)
        # "even" is given at even env steps only; step i's info is info row i + 1.
        assert str(frame["info/even"].dtype) == "Float64"
        assert str(frame["info/step"].dtype) == "Int64"
        assert str(frame["data/logp"].dtype) == "Float32"
        mask = ep.infos["_even"][1:]
        assert one["info/even"].isna().to_numpy().tolist() == (~mask).tolist()
        np.testing.assert_array_equal(one["info/even"].dropna().to_numpy(dtype=np.float64), ep.infos["even"][1:][mask])
        assert one["data/logp"].isna().to_numpy().tolist() == (~ep.data["_logp"]).tolist()
        # Keys a sub-env gave only at its 5th step: missing elsewhere, and in episodes that never saw them.
        given = sum(int(e.infos["_only5"][1:].sum()) for e in ds.episodes if "only5" in e.infos)
        assert given > 0
        assert frame["info/only5"].notna().sum() == given
        assert str(frame["info/flag"].dtype) == "boolean"


def test_episode_to_pandas_is_its_rows_of_the_dataset_frame(recorded: Callable[[str], Path]) -> None:
    with trajcore.open(recorded("nested")) as ds:
        frame = trajcore.to_pandas(ds)
        ep = ds.episodes[2]
        one = trajcore.to_pandas(ep)
        sel = trajcore.to_pandas(ds.select(min_length=3))
        chosen = ds.select(min_length=3).indices
        length = ep.length
    part = frame[frame["episode"] == 2].reset_index(drop=True)
    pd.testing.assert_frame_equal(one, part)
    assert len(one) == length
    assert sorted(set(sel["episode"])) == chosen


def test_large_arrays_are_left_out_with_a_warning_unless_named(recorded: Callable[[str], Path]) -> None:
    with trajcore.open(recorded("pixels")) as ds:
        with pytest.warns(trajcore.TrajcoreWarning, match=r"obs \(32x32x3 uint8\), next_obs \(32x32x3 uint8\)"):
            frame = trajcore.to_pandas(ds)
        assert frame.attrs["trajcore"]["left_out"] == ["obs", "next_obs"]
        assert "obs_0" not in frame.columns and "action" in frame.columns
        wide = trajcore.to_pandas(ds, ["obs", "reward"], max_values=10)
        assert list(wide.columns) == ["episode", "env_index", "step"] + [f"obs_{k}" for k in range(3072)] + ["reward"]
        ep = ds.episodes[1]
        pixels = wide[wide["episode"] == 1][[f"obs_{k}" for k in range(3072)]].to_numpy()
        np.testing.assert_array_equal(pixels.reshape(-1, 32, 32, 3), ep.observations[:-1])
        with pytest.raises(trajcore.InvalidArgumentError, match="names no value"):
            trajcore.to_pandas(ds, ["image"])


def test_summaries_frame(recorded: Callable[[str], Path]) -> None:
    with trajcore.open(recorded("vector")) as ds:
        frame = trajcore.summaries_frame(ds)
        s = ds.summaries()
        metas = [ep.metadata for ep in ds.episodes]
        selected = trajcore.summaries_frame(ds.select(env_index=1))
    assert len(frame) == len(s["length"])
    for field in ("env_index", "length", "episode_return", "complete", "terminated", "truncated", "start_ns"):
        np.testing.assert_array_equal(frame[field].to_numpy(), s[field])
    np.testing.assert_array_equal(frame["episode"].to_numpy(), np.arange(len(frame)))
    assert frame["start_time"].iloc[0] == pd.Timestamp(int(s["start_ns"][0]), unit="ns", tz="UTC")
    for i, meta in enumerate(metas):
        if "ret" in meta:
            assert frame["metadata/ret"].iloc[i] == meta["ret"]
            assert frame["metadata/env"].iloc[i] == meta["env"]
        else:  # incomplete episodes never reached the callback
            assert pd.isna(frame["metadata/ret"].iloc[i])
    assert set(selected["env_index"]) == {1}


def test_without_pandas_a_clear_trajcore_error(
    monkeypatch: pytest.MonkeyPatch, recorded: Callable[[str], Path]
) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with trajcore.open(recorded("cartpole")) as ds:
        with pytest.raises(
            trajcore.MissingDependencyError, match=r"needs the optional package 'pandas'.*pip install pandas"
        ):
            trajcore.to_pandas(ds)
        with pytest.raises(ImportError):  # also what a user checking for optional packages catches
            trajcore.summaries_frame(ds)


def test_an_empty_selection_gives_an_empty_frame_with_the_columns(recorded: Callable[[str], Path]) -> None:
    with trajcore.open(recorded("vector")) as ds:
        full = trajcore.to_pandas(ds)
        empty = trajcore.to_pandas(ds.select(min_length=10**6))
        episodes = trajcore.summaries_frame(ds.select(min_length=10**6))
    assert len(empty) == 0 and list(empty.columns) == list(full.columns)
    assert list(empty.dtypes) == list(full.dtypes)
    assert len(episodes) == 0
