"""The decisions of the exports, on plain values (no file): the step-table plan and its naming
rule, leaf choice, batching, env-step counting, metadata flattening, --select parsing and the
usage line's program name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import trajcore
from trajcore.cli import _prog_name
from trajcore.formats._columns import Leaf, RecordingColumns, choose, flat_names, make_plan
from trajcore.formats.summaries import env_step_bounds, flatten_metadata
from trajcore.read.select.selection import parse_select


def col(name: str, dtype: str, shape: list[int], timeline: str = "obs", **extra: Any) -> dict[str, Any]:
    return {"name": name, "dtype": dtype, "shape": shape, "timeline": timeline, **extra}


FLAGS = [
    col("reward", "float64", [], "step"),
    col("terminated", "bool", [], "step"),
    col("truncated", "bool", [], "step"),
]


def recording(obs: Any, columns: list[dict[str, Any]], action: Any = None) -> RecordingColumns:
    action = action or {"leaf": "action"}
    base = [col("action", "int64", [], "step")] if action == {"leaf": "action"} else []
    specs = [{**c, "id": i} for i, c in enumerate(columns + base + FLAGS)]
    return RecordingColumns(obs, action, specs)


NESTED = {
    "dict": [
        ["pos", {"leaf": "obs/pos"}],
        ["a/b", {"leaf": "obs/a%2Fb"}],
        ["t", {"tuple": [{"leaf": "obs/t/0"}, {"leaf": "obs/t/1"}]}],
        ["img", {"leaf": "obs/img"}],
    ]
}
NESTED_COLUMNS = [
    col("obs/pos", "float32", [2]),
    col("obs/a%2Fb", "int64", []),
    col("obs/t/0", "int64", []),
    col("obs/t/1", "int8", [3]),
    col("obs/img", "uint8", [2, 2, 3]),
]


def test_bare_box_names_are_obs_0_to_n() -> None:
    plan = make_plan([recording({"leaf": "obs"}, [col("obs", "float32", [4])])])
    names = [n for leaf in plan.leaves for n in flat_names(leaf)]
    assert names == [
        "obs_0",
        "obs_1",
        "obs_2",
        "obs_3",
        "next_obs_0",
        "next_obs_1",
        "next_obs_2",
        "next_obs_3",
        "action",
        "reward",
        "terminated",
        "truncated",
    ]
    obs, nxt = plan.leaves[0], plan.leaves[1]
    assert (obs.column, obs.first_row, nxt.column, nxt.first_row) == ("obs", 0, "obs", 1)


def test_nested_names_paths_escapes_and_c_order() -> None:
    plan = make_plan([recording(NESTED, NESTED_COLUMNS)])
    obs = [leaf for leaf in plan.leaves if leaf.group == "obs"]
    assert [leaf.path for leaf in obs] == [("pos",), ("a/b",), ("t", "0"), ("t", "1"), ("img",)]
    assert [leaf.name for leaf in obs] == ["obs/pos", "obs/a%2Fb", "obs/t/0", "obs/t/1", "obs/img"]
    assert flat_names(obs[3]) == ["obs/t/1_0", "obs/t/1_1", "obs/t/1_2"]
    assert flat_names(obs[4])[:4] == ["obs/img_0", "obs/img_1", "obs/img_2", "obs/img_3"]
    assert len(flat_names(obs[4])) == 12
    assert next(leaf.name for leaf in plan.leaves if leaf.group == "next_obs") == "next_obs/pos"


def test_infos_and_data_are_the_union_over_recordings_with_their_masks() -> None:
    first = recording(
        {"leaf": "obs"},
        [
            col("obs", "float32", [1]),
            col("info/step", "int64", [], mask=100),
            {**col("info/_step", "bool", []), "mask_of": 99},
            col("data/logp", "float32", [], "step", mask="data/_logp"),
        ],
    )
    first.columns[1]["mask"] = first.columns[2]["id"]  # masks are referred to by id in the file
    second = recording({"leaf": "obs"}, [col("obs", "float32", [1]), col("info/nested/x", "float64", [2])])
    plan = make_plan([first, second])
    info = [leaf for leaf in plan.leaves if leaf.group in ("info", "data")]
    assert [(leaf.name, leaf.mask, leaf.first_row) for leaf in info] == [
        ("info/step", "info/_step", 1),
        ("info/nested/x", None, 1),
        ("data/logp", "data/_logp", 0),
    ]
    assert "info/step" in plan.columns_of[0] and "info/step" not in plan.columns_of[1]


def test_recordings_that_cannot_share_a_table_are_refused() -> None:
    a = recording({"leaf": "obs"}, [col("obs", "float32", [4])])
    b = recording({"leaf": "obs"}, [col("obs", "float32", [5])])
    with pytest.raises(trajcore.InvalidArgumentError, match="recording 1 has other observation columns"):
        make_plan([a, b])
    c = recording({"leaf": "obs"}, [col("obs", "float32", [4]), col("info/x", "int64", [])])
    d = recording({"leaf": "obs"}, [col("obs", "float32", [4]), col("info/x", "float64", [])])
    with pytest.raises(trajcore.SchemaError, match="'info/x' is scalar int64 in one recording and scalar float64"):
        make_plan([c, d])


def test_two_values_with_one_column_name_are_refused() -> None:
    tree = {"dict": [["a", {"leaf": "obs/a"}], ["a_0", {"leaf": "obs/a_0"}]]}
    with pytest.raises(trajcore.SchemaError, match="share the table column 'obs/a_0'"):
        make_plan([recording(tree, [col("obs/a", "int64", [2]), col("obs/a_0", "int64", [])])])


def test_choose_by_size_and_by_name() -> None:
    plan = make_plan([recording(NESTED, NESTED_COLUMNS)])
    kept, left = choose(plan.leaves, None, max_values=4)
    assert [leaf.name for leaf in left] == ["obs/img", "next_obs/img"]
    assert "obs/pos" in [leaf.name for leaf in kept]
    kept, left = choose(plan.leaves, ["obs/img", "reward", "episode"], max_values=4)
    assert [leaf.name for leaf in kept] == ["obs/img", "reward"] and left == []
    kept, _ = choose(plan.leaves, ["obs/t"], 4)
    assert [leaf.name for leaf in kept] == ["obs/t/0", "obs/t/1"]
    kept, _ = choose(plan.leaves, ["obs"], 4)  # a prefix is '/'-bounded: next_obs is not obs
    assert {leaf.group for leaf in kept} == {"obs"}
    with pytest.raises(trajcore.InvalidArgumentError, match="'obs/po' names no value"):
        choose(plan.leaves, ["obs/po"], 4)


def test_an_empty_info_or_data_group_selects_nothing() -> None:
    """A dataset whose env gave no info and that recorded no custom data (CartPole): asking for
    every info or data value asks for none, as the exports page's own example does; a name inside
    a group, or a group name misspelt, still names no value."""
    plan = make_plan([recording(NESTED, NESTED_COLUMNS)])
    assert not [leaf for leaf in plan.leaves if leaf.group in ("info", "data")]
    kept, _ = choose(plan.leaves, ["reward", "info", "data"], 4)
    assert [leaf.name for leaf in kept] == ["reward"]
    for name in ("info/episode", "infos", "data/logp"):
        with pytest.raises(trajcore.InvalidArgumentError, match=f"'{name}' names no value"):
            choose(plan.leaves, [name], 4)


def test_leaf_describe() -> None:
    assert Leaf("obs", (), "obs", "uint8", (64, 64, 3), 0, None).describe() == "64x64x3 uint8"


@pytest.mark.parametrize(
    ("rows", "recording_", "env", "complete", "next_step", "want"),
    [
        ([5, 3], [0, 0], [0, 0], [True, False], [True], (9, 9)),  # one autoreset step between
        ([5, 3], [0, 0], [0, 0], [True, True], [True], (9, 10)),  # maybe one more after the last
        ([5, 3], [0, 0], [0, 1], [True, True], [True], (8, 10)),  # two sub-envs, one episode each
        ([5, 3], [0, 0], [0, 0], [True, True], [False], (8, 8)),  # SAME_STEP: every env step stored
        ([5, 3, 2], [0, 1, 1], [0, 0, 0], [True, True, False], [False, True], (11, 11)),
        ([], [], [], [], [True], (0, 0)),
    ],
)
def test_env_step_bounds(
    rows: list[int],
    recording_: list[int],
    env: list[int],
    complete: list[bool],
    next_step: list[bool],
    want: tuple[int, int],
) -> None:
    got = env_step_bounds(
        np.array(rows, dtype=np.int64),
        np.array(recording_, dtype=np.int64),
        np.array(env, dtype=np.int64),
        np.array(complete, dtype=bool),
        next_step,
    )
    assert got == want


def test_flatten_metadata() -> None:
    assert flatten_metadata({"a": 1, "cfg": {"lr": 0.1, "net": {"w": [1, 2]}}, "x/y": None, "e": {}}) == {
        "metadata/a": 1,
        "metadata/cfg/lr": 0.1,
        "metadata/cfg/net/w": [1, 2],
        "metadata/x%2Fy": None,
    }


@pytest.mark.parametrize(
    ("exprs", "filters", "other"),
    [
        (["env_index=0,3"], {"env_index": [0, 3]}, {}),
        (["complete=true", "truncated=NO"], {"complete": True, "truncated": False}, {}),
        (["min_return=1.5", "max_length=10"], {"min_return": 1.5, "max_length": 10}, {}),
        (["recording=1"], {}, {"recording": [1]}),
        (["episodes=2:10:2"], {}, {"episodes": slice(2, 10, 2)}),
        (["episodes=-5:"], {}, {"episodes": slice(-5, None)}),
        (["episodes=3,1"], {}, {"episodes": [3, 1]}),
        (["metadata.cfg.lr=0.1", "metadata.agent=ppo"], {}, {"metadata": [(("cfg", "lr"), 0.1), (("agent",), "ppo")]}),
        (['metadata.tag="1"'], {}, {"metadata": [(("tag",), "1")]}),
    ],
)
def test_parse_select(exprs: list[str], filters: dict[str, Any], other: dict[str, Any]) -> None:
    sel = parse_select(exprs)
    assert dict(sel.filters) == filters
    for key, value in other.items():
        assert getattr(sel, key) == value


@pytest.mark.parametrize(
    ("expr", "match"),
    [
        ("complete", "expected KEY=VALUE"),
        ("colour=red", "unknown key 'colour'"),
        ("complete=maybe", "expected true or false"),
        ("min_length=ten", "expected an integer"),
        ("min_return=x", "expected a number"),
        ("env_index=a,b", "expected integers"),
        ("episodes=1:2:3:4", "START:STOP"),
    ],
)
def test_parse_select_errors(expr: str, match: str) -> None:
    with pytest.raises(trajcore.InvalidArgumentError, match=match):
        parse_select([expr])


@pytest.mark.parametrize(
    ("argv0", "prog"),
    [
        ("/venv/bin/trajcore", "trajcore"),
        ("/repo/python/trajcore/__main__.py", "python -m trajcore"),
        ("-m", "python -m trajcore"),
        ("", "python -m trajcore"),
    ],
)
def test_prog_name(argv0: str, prog: str) -> None:
    assert _prog_name(argv0) == prog
