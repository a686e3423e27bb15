"""Hostile Column records with valid checksums (issue 23, point 4): a row of more than
`MAX_AXES` axes, and a mask column renamed to another column's name, are damage named with the
file and the Column record's offset (`CorruptFileError`), never a numpy `ValueError` or
`TypeError`; the rest of the recording reads."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from format_decoder import KIND_COLUMN
from gymnasium import spaces
from helpers import SpaceEnv
from test_hostile_files import _record, _rewrite_json

LONG = "k" * 160  # a long name, so that a rewrite has room for many axes


def _record_data(path: Path) -> Path:
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=5, p_terminate=0), path)
    env.reset(seed=0)
    for _ in range(12):
        env.record(**{LONG: 1})
        _, _, te, tr, _ = env.step(env.action_space.sample())
        if te or tr:
            env.reset()
    env.close()
    (shard,) = path.glob("*.trj")
    return shard


def _names_file_and_offset(error: BaseException, shard: Path) -> None:
    assert str(shard) in str(error)
    assert re.search(r"byte offset [1-9][0-9]*", str(error)), str(error)


def test_a_row_of_more_than_the_axes_bound(tmp_path: Path) -> None:
    shard = _record_data(tmp_path / "d")

    def many_axes(spec: dict[str, Any]) -> bool:
        if spec["name"] == "data/" + LONG:
            spec["name"], spec["shape"], spec["codec"] = "data/x", [1] * 65, {}
            return True
        return False

    _rewrite_json(shard, KIND_COLUMN, many_axes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", trajcore.TrajcoreWarning)
        ds = trajcore.open(shard)
    ep = ds.episodes[0]
    with pytest.raises(trajcore.CorruptFileError):
        _ = ep.data
    # The Column record itself is named, where it lies and why.
    (problem,) = [p for p in ds.problems if "axes" in p[2]]
    assert problem[0] == str(shard) and problem[1] > 0
    assert ep.observations.shape == (6, 3), "the rest reads"
    assert not trajcore.verify(shard).intact


def test_the_writer_refuses_rows_of_more_than_the_axes_bound(tmp_path: Path) -> None:
    space = spaces.Box(0, 1, (1,) * 33, np.float32)
    with pytest.raises(trajcore.SchemaError, match="axes"):
        trajcore.RecordEpisodes(SpaceEnv(space), tmp_path / "d")


@pytest.mark.parametrize("new_name", ["info/_even", "info/step", "obs"])
def test_a_mask_renamed_to_another_columns_name(tmp_path: Path, new_name: str) -> None:
    shard = _record(tmp_path / "d")

    def rename(spec: dict[str, Any]) -> bool:
        if spec["name"] == "info/_step":
            spec["name"] = new_name
            return True
        return False

    _rewrite_json(shard, KIND_COLUMN, rename)
    with pytest.warns(trajcore.TrajcoreWarning, match="unique|must be named"):
        ds = trajcore.open(shard)
    ep = ds.episodes[0]
    with pytest.raises(trajcore.CorruptFileError) as e:
        _ = ep.infos
    _names_file_and_offset(e.value, shard)
    assert not trajcore.verify(shard).intact
    if new_name != "obs":
        assert ep.observations.shape == (6, 3), "the rest reads"
