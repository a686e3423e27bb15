"""Property test: random nested spaces and random data round-trip value by value."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import trajcore
import trajcore.spaces
from gymnasium import spaces
from helpers import SpaceEnv, assert_infos_equal, assert_tree_equal, expected_infos, run_single, stack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Every dtype a column can have, as the package says (each round-trips).
DTYPES = sorted(trajcore.spaces.SUPPORTED_DTYPES)
shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)
keys = st.text(alphabet="ab/%_. x", min_size=1, max_size=4)


@st.composite
def boxes(draw: st.DrawFn) -> spaces.Box:
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(shapes)
    if dtype == np.bool_:
        return spaces.Box(0, 1, shape, dtype)
    if dtype.kind == "f":
        low = draw(st.sampled_from([-np.inf, -10.0, 0.0]))
        return spaces.Box(low, draw(st.sampled_from([np.inf, 1.0, 100.0])), shape, dtype)
    info = np.iinfo(dtype)
    return spaces.Box(max(int(info.min), -1000), min(int(info.max), 1000), shape, dtype)


leaves = st.one_of(
    boxes(),
    st.builds(spaces.Discrete, st.integers(1, 50), start=st.integers(-5, 5)),
    st.builds(
        spaces.MultiDiscrete,
        st.lists(st.integers(2, 9), min_size=1, max_size=3),
        dtype=st.sampled_from(["int32", "int64", "uint8"]),
    ),
    st.builds(spaces.MultiBinary, st.one_of(st.integers(1, 4), st.lists(st.integers(1, 3), min_size=1, max_size=2))),
    st.builds(spaces.Text, st.integers(1, 6), min_length=st.integers(0, 1)),
)


def nested(children: st.SearchStrategy[spaces.Space[Any]]) -> st.SearchStrategy[spaces.Space[Any]]:
    return st.one_of(
        st.dictionaries(keys, children, min_size=1, max_size=3).map(spaces.Dict),
        st.lists(children, min_size=1, max_size=3).map(spaces.Tuple),
    )


space_strategy = st.recursive(leaves, nested, max_leaves=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    obs_space=space_strategy,
    act_space=space_strategy,
    seed=st.integers(0, 2**31 - 1),
    episodes=st.integers(1, 3),
)
def test_random_spaces_round_trip(obs_space: Any, act_space: Any, seed: int, episodes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = trajcore.RecordEpisodes(SpaceEnv(obs_space, act_space, max_steps=5, p_terminate=0.3), Path(tmp) / "p")
        want = run_single(env, episodes=episodes, seed=seed)
        env.close()
        with trajcore.open(Path(tmp) / "p") as ds:
            assert ds.observation_space == obs_space
            assert ds.action_space == act_space
            assert ds.num_episodes == episodes
            for got, w in zip(ds.episodes, want, strict=True):
                assert got.length == w.length
                assert_tree_equal(got.observations, stack(w.observations, obs_space), "observations")
                assert_tree_equal(got.actions, stack(w.actions, act_space), "actions")
                assert_tree_equal(got.rewards, np.array(w.rewards), "rewards")
                assert_infos_equal(got.infos, expected_infos(w.infos))


info_values = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, width=64),
    st.booleans(),
    st.text(max_size=5),
)


@settings(max_examples=25, deadline=None)
@given(rows=st.lists(st.dictionaries(st.sampled_from(["a", "b", "c/d", "_e"]), info_values, max_size=4), min_size=2))
def test_random_info_rows_round_trip(rows: list[dict[str, Any]]) -> None:
    # Each key keeps the type of its first value (others would be skipped with a warning).
    first: dict[str, type] = {}
    for row in rows:
        for k, v in row.items():
            first.setdefault(k, type(v))
    rows = [{k: v for k, v in row.items() if type(v) is first[k]} for row in rows]

    class InfoEnv(SpaceEnv):
        def _info(self) -> dict[str, Any]:
            return dict(rows[min(self.t, len(rows) - 1)])

    with tempfile.TemporaryDirectory() as tmp:
        env = trajcore.RecordEpisodes(InfoEnv(max_steps=len(rows) - 1, p_terminate=0.0), Path(tmp) / "i")
        want = run_single(env, episodes=1, seed=0)
        env.close()
        with trajcore.open(Path(tmp) / "i") as ds:
            assert_infos_equal(ds.episodes[0].infos, expected_infos(want[0].infos))
