"""JSON Lines export (RLlib's offline JSON shape) read back with json, compared value by value
with what trajcore.open reads."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from export_data import NAMES, steps
from helpers import assert_tree_equal

RLLIB_KEYS = {
    "type",
    "obs",
    "new_obs",
    "actions",
    "rewards",
    "terminateds",
    "truncateds",
    "infos",
    "t",
    "eps_id",
    "env_id",
    "agent_index",
}


def at(column: Any, t: int, like: Any) -> Any:
    """Row t of a column-major JSON column, typed like the reader's value `like`."""
    if isinstance(like, Mapping):
        return {k: at(column[k], t, v) for k, v in like.items()}
    if isinstance(like, tuple):
        return tuple(at(c, t, v) for c, v in zip(column, like, strict=True))
    if isinstance(like, str):
        return column[t]
    return np.asarray(column[t], dtype=np.asarray(like).dtype)


def typed(value: Any, like: Any) -> Any:
    """A JSON info value typed like the reader's."""
    if isinstance(like, Mapping):
        return {k: typed(value[k], like[k]) for k in like}
    if isinstance(like, str):
        return value
    return np.asarray(value, dtype=np.asarray(like).dtype)


@pytest.mark.parametrize("name", NAMES)
def test_jsonl_reads_back_value_by_value(name: str, recorded: Callable[[str], Path], tmp_path: Path) -> None:
    out = tmp_path / f"{name}.jsonl"
    with trajcore.open(recorded(name)) as ds:
        result = trajcore.export(ds, out)
        want = list(steps(ds))
        lengths = [ep.length for ep in ds.episodes]
        env_index = [ep.env_index for ep in ds.episodes]
    lines = out.read_text().splitlines()
    assert len(lines) == len(lengths)  # one SampleBatch per episode
    assert result["steps"] == sum(lengths)
    got_steps = 0
    for i, line in enumerate(lines):
        batch = json.loads(line)
        n = lengths[i]
        assert set(batch) >= RLLIB_KEYS, sorted(RLLIB_KEYS - set(batch))
        assert batch["type"] == "SampleBatch"
        for key in set(batch) - {"type", "obs", "new_obs", "actions"}:  # those are nested: checked by `at`
            assert len(batch[key]) == n, key
        assert batch["t"] == list(range(n))
        assert batch["eps_id"] == [i] * n
        assert batch["env_id"] == [env_index[i]] * n
        assert batch["agent_index"] == [0] * n
        for t in range(n):
            s = want[got_steps + t]
            assert_tree_equal(at(batch["obs"], t, s["obs"]), s["obs"], f"ep {i} obs {t}")
            assert_tree_equal(at(batch["new_obs"], t, s["next_obs"]), s["next_obs"], f"ep {i} new_obs {t}")
            assert_tree_equal(at(batch["actions"], t, s["action"]), s["action"], f"ep {i} actions {t}")
            assert batch["rewards"][t] == s["reward"]
            assert batch["terminateds"][t] == s["terminated"]
            assert batch["truncateds"][t] == s["truncated"]
            info = batch["infos"][t]
            assert sorted(info) == sorted(s["info"]), f"ep {i} infos {t}"
            for key, value in s["info"].items():
                assert_tree_equal(typed(info[key], value), value, f"ep {i} info {key} {t}")
            for key, value in s["data"].items():
                assert_tree_equal(np.asarray(batch[key][t], dtype=np.asarray(value).dtype), value)
            data_keys = set(batch) - RLLIB_KEYS
            for key in data_keys:  # not recorded at this step: null
                if key not in s["data"]:
                    assert batch[key][t] is None
        got_steps += n
    assert got_steps == len(want)


def test_jsonl_custom_data_columns(recorded: Callable[[str], Path], tmp_path: Path) -> None:
    out = tmp_path / "vec.jsonl"
    trajcore.export(recorded("vector"), out, "jsonl")
    batch = json.loads(out.read_text().splitlines()[0])
    assert {"logp", "count"} <= set(batch)
    assert None in batch["logp"] or len(batch["logp"]) == 1  # recorded at even vector steps only
    with pytest.raises(trajcore.InvalidArgumentError, match="columns apply to csv and parquet"):
        trajcore.export(recorded("vector"), tmp_path / "x.jsonl", columns=["obs"])
