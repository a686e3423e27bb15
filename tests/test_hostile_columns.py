"""Hostile Column records with valid checksums (issue 23, point 4): a row of more than
`MAX_AXES` axes, and a mask column renamed to another column's name, are damage named with the
file and the Column record's offset (`CorruptFileError`), never a numpy `ValueError` or
`TypeError`; the rest of the recording reads. `verify` also checks the spaces the Meta record
describes against the columns (a rewritten dtype or shape, a shard cut right after its Meta)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from format_decoder import KIND_COLUMN, hop
from gymnasium import spaces
from helpers import SpaceEnv
from test_hostile_files import _record, _rewrite_json

LONG = "k" * 160  # a long key, so that a rewrite has room for many axes


def _rewrite_column(shard: Path, column: str, /, **change: Any) -> None:
    """Rewrites the Column record of `column` with `change` (its codec dropped for room),
    checksums resealed."""

    def rewrite(spec: dict[str, Any]) -> bool:
        if spec["name"] != column:
            return False
        spec.update(change, codec={})
        return True

    _rewrite_json(shard, KIND_COLUMN, rewrite)


def _names_file_and_offset(error: BaseException, shard: Path) -> None:
    assert str(shard) in str(error)
    assert re.search(r"byte offset [1-9][0-9]*", str(error)), str(error)


def test_a_row_of_more_than_the_axes_bound(tmp_path: Path) -> None:
    shard = _record(tmp_path / "d", extra_info=lambda _t: {LONG: 1})
    _rewrite_column(shard, "info/" + LONG, name="info/x", shape=[1] * 65)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", trajcore.TrajcoreWarning)
        ds = trajcore.open(shard)
    ep = ds.episodes[0]
    with pytest.raises(trajcore.CorruptFileError):
        _ = ep.infos
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

    _rewrite_column(shard, "info/_step", name=new_name)
    with pytest.warns(trajcore.TrajcoreWarning, match="unique|must be named"):
        ds = trajcore.open(shard)
    ep = ds.episodes[0]
    with pytest.raises(trajcore.CorruptFileError) as e:
        _ = ep.infos
    _names_file_and_offset(e.value, shard)
    assert not trajcore.verify(shard).intact
    if new_name != "obs":
        assert ep.observations.shape == (6, 3), "the rest reads"


@pytest.mark.parametrize("change", [{"dtype": "int32"}, {"shape": [1, 3]}])
def test_verify_checks_the_spaces_against_the_columns(tmp_path: Path, change: dict[str, Any]) -> None:
    """A Column record rewritten with valid checksums: every chunk still decodes, but the space the
    Meta record describes no longer matches, which `ds.observation_space` trips on."""
    shard = _record(tmp_path / "d")

    _rewrite_column(shard, "obs", **change)
    with trajcore.open(shard) as ds:
        with pytest.raises(trajcore.CorruptFileError):
            _ = ds.observation_space
        n = ds.num_episodes
    report = trajcore.verify(shard)
    assert not report.intact
    (damage,) = [d for d in report.damage if "obs space" in d.why]
    assert damage.episodes == tuple(range(n))


def test_verify_reports_a_shard_cut_right_after_its_meta_record(tmp_path: Path) -> None:
    shard = _record(tmp_path / "d")
    buf = shard.read_bytes()
    records, _ = hop(buf)
    first_column = min(r.offset for r in records if r.kind == KIND_COLUMN)
    shard.write_bytes(buf[:first_column])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", trajcore.TrajcoreWarning)
        with trajcore.open(shard) as ds:
            assert ds.num_episodes == 0
            with pytest.raises(trajcore.CorruptFileError):
                _ = ds.observation_space
        assert not trajcore.verify(shard).intact
