"""Property tests of the step path's fast conversions: numbers cast into float32/float64 columns
in Rust (an env's float32 or integer rewards and observations) and numpy scalars read without a
0-d array must store exactly what numpy's own cast stores; a value the cast would change (beyond
the column's range, outside a discrete space, a key the space lacks) is refused by name, the same
way through every recorder and `Writer` (issue 33, points 2 and 3)."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# What the Rust cast takes (native order), and float16, which stays numpy's.
SOURCES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64"]
SOURCES += ["uint8", "uint16", "uint32", "uint64", "bool"]


class ValuesEnv(gym.Env[Any, Any]):
    """Returns the given observations, rewards and infos one step after another."""

    def __init__(self, space: spaces.Box, obs: list[Any], rewards: list[Any], infos: list[dict[str, Any]]) -> None:
        self.observation_space, self.action_space = space, spaces.Discrete(2)
        self.obs, self.rewards, self.infos, self.t = obs, rewards, infos, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.t = 0
        return self.obs[0], dict(self.infos[0])

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        self.t += 1
        return self.obs[self.t], self.rewards[self.t - 1], False, self.t == len(self.obs) - 1, dict(self.infos[self.t])


def _record(env: ValuesEnv) -> Any:
    tmp = tempfile.mkdtemp()
    rec = trajcore.RecordEpisodes(env, Path(tmp) / "r")
    rec.reset(seed=0)
    for _ in range(len(env.obs) - 1):
        rec.step(0)
    rec.close()
    ds = trajcore.open(Path(tmp) / "r")
    return ds, ds.episodes[0]


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype
    assert got.tobytes() == want.tobytes() or np.array_equal(got, want, equal_nan=True)


@st.composite
def arrays_of(draw: st.DrawFn, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    return draw(hnp.arrays(np.dtype(dtype), shape))


@settings(max_examples=60, deadline=None)
@given(
    source=st.sampled_from(SOURCES),
    target=st.sampled_from(["float32", "float64"]),
    rows=st.integers(2, 5),
    data=st.data(),
)
def test_numbers_cast_into_float_columns_as_numpy_casts_them(source: str, target: str, rows: int, data: Any) -> None:
    obs = [data.draw(arrays_of(source, (3,))) for _ in range(rows)]
    rewards = [data.draw(arrays_of(source, ())) for _ in range(rows - 1)]
    env = ValuesEnv(spaces.Box(-np.inf, np.inf, (3,), np.dtype(target)), obs, rewards, [{}] * rows)
    with np.errstate(over="ignore"):
        stored = np.stack(obs).astype(target)
    if np.any(np.isinf(stored) & np.isfinite(np.stack(obs))):
        # A finite float64 beyond float32's range would be stored as inf: refused, by name.
        with pytest.raises(trajcore.SchemaError, match=r"column 'obs': value .* is out of range for float32"):
            _record(env)
        return
    ds, ep = _record(env)
    with ds:
        _same(np.asarray(ep.observations), stored)
        _same(np.asarray(ep.rewards), np.stack(rewards).astype("float64"))


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from(SOURCES), other=st.sampled_from(SOURCES), rows=st.integers(3, 6), data=st.data())
def test_numpy_scalar_infos_round_trip(dtype: str, other: str, rows: int, data: Any) -> None:
    """A numpy scalar info keeps its dtype; a later scalar of another dtype is cast to it when
    numpy's safe casting allows, and otherwise widens the key to numpy's promoted dtype (issue 23,
    point 3): every value reads back, the earlier ones in the wider dtype."""
    values = [data.draw(arrays_of(dtype, ()))[()] for _ in range(rows)]
    values[-1] = data.draw(arrays_of(other, ()))[()]
    obs = [np.zeros(1, np.float32)] * rows
    env = ValuesEnv(spaces.Box(-1, 1, (1,), np.float32), obs, [0.0] * (rows - 1), [{"x": v} for v in values])
    stored = (
        np.dtype(dtype) if np.can_cast(np.dtype(other), np.dtype(dtype), "safe") else np.promote_types(dtype, other)
    )
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error", trajcore.TrajcoreWarning)
        ds, ep = _record(env)
    with ds:
        got = np.asarray(ep.infos["x"])
        _same(got[:-1], np.array(values[:-1], dtype=dtype).astype(stored))
        assert bool(ep.infos["_x"][-1])
        _same(got[-1:], np.array([values[-1]]).astype(stored))


class AnyActionEnv(gym.Env[Any, Any]):
    """Takes any action (as an env that does not check them) and returns the observations given,
    one a step, with reward `reward`."""

    def __init__(self, observation_space: spaces.Space[Any], obs: list[Any], reward: Any = 0.0) -> None:
        self.observation_space, self.action_space = observation_space, spaces.Discrete(3)
        self.obs, self.reward, self.t = obs, reward, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.t = 0
        return self.obs[0], {}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        self.t = min(self.t + 1, len(self.obs) - 1)
        return self.obs[self.t], self.reward, False, False, {}


DICT = spaces.Dict({"pos": spaces.Box(-1, 1, (2,), np.float32), "door": spaces.Discrete(2)})
GOOD = {"pos": np.zeros(2, np.float32), "door": 1}


def _stacked(bad_obs: dict[str, Any]) -> dict[str, Any]:
    """Rows GOOD then `bad_obs`, key by key (a key only `bad_obs` has: its value twice)."""
    return {k: np.stack([GOOD.get(k, v), v]) for k, v in bad_obs.items()}


class Inject(gym.vector.VectorWrapper):
    """Returns `obs` and `rewards` from its steps once they are set (the wrapped env's before)."""

    obs: Any = None
    rewards: Any = None

    def step(self, actions: Any) -> Any:
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        if self.obs is not None:
            obs, rewards = self.obs, self.rewards
        return obs, rewards, terminations, truncations, infos


def _refused_by_every_recorder(
    tmp_path: Path, space: spaces.Space[Any], bad_obs: Any, action: Any, reward: Any, match: str
) -> None:
    """A step of `bad_obs`, `action` and `reward` raises SchemaError matching `match` through
    RecordEpisodes, RecordVectorEpisodes (2 sub-envs) and Writer (step and add_episode), and the
    step is not in the file: the episode before it stays, ended incomplete."""
    env = trajcore.RecordEpisodes(AnyActionEnv(space, [GOOD, GOOD, bad_obs], reward=0.0), tmp_path / "one")
    env.reset(seed=0)
    env.step(0)
    env.unwrapped.reward = reward
    with pytest.raises(trajcore.SchemaError, match=match):
        env.step(action)
    env.close()
    with trajcore.open(tmp_path / "one") as ds:
        (ep,) = ds.episodes
        assert ep.length == 1 and not ep.complete

    # Sub-env 1's values as a vector env returns them (gymnasium's own vector envs would cast or
    # drop them before the recorder sees them: an env of another library need not).
    envs = Inject(gym.vector.SyncVectorEnv([lambda: AnyActionEnv(space, [GOOD] * 3)] * 2))
    venv = trajcore.RecordVectorEpisodes(envs, tmp_path / "vec")
    venv.reset(seed=0)
    venv.step(np.zeros(2, np.int64))
    envs.obs, envs.rewards = _stacked(bad_obs), np.array([0, reward])
    with pytest.raises(trajcore.SchemaError, match=match):
        venv.step(np.array([0, action]))
    venv.close()
    with trajcore.open(tmp_path / "vec") as ds:
        assert [ep.length for ep in ds.episodes] == [1, 1]

    with trajcore.Writer(tmp_path / "writer", space, spaces.Discrete(3)) as w:
        w.reset(GOOD)
        with pytest.raises(trajcore.SchemaError, match=match):
            w.step(action, bad_obs, reward, False, False)
        with pytest.raises(trajcore.SchemaError, match=match):
            w.add_episode(_stacked(bad_obs), np.array([action]), np.array([reward]), [True], [False])
    with trajcore.open(tmp_path / "writer") as ds:
        assert ds.num_episodes == 0  # the step refused ended an episode of no step; add_episode lists none


def test_an_observation_key_the_space_lacks_is_refused_by_name(tmp_path: Path) -> None:
    """Issue 33, point 2: never dropped without a word."""
    bad = {**GOOD, "extra": 0.5}
    _refused_by_every_recorder(tmp_path, DICT, bad, 0, 0.0, r"key 'extra'.*not in the space")


def test_a_value_outside_its_discrete_space_is_refused_by_name(tmp_path: Path) -> None:
    """Issue 33, point 3: an action 7 of a Discrete(3) is no action of it."""
    _refused_by_every_recorder(tmp_path, DICT, GOOD, 7, 0.0, r"column 'action': .*value 7 is not in Discrete\(3\)")
    bad = {"pos": np.zeros(2, np.float32), "door": 2}
    _refused_by_every_recorder(
        tmp_path / "obs", DICT, bad, 0, 0.0, r"column 'obs/door': .*value 2 is not in Discrete\(2\)"
    )


def test_a_float_beyond_its_column_is_refused_by_name(tmp_path: Path) -> None:
    """Issue 33, point 3: 1e40 into a float32 column would be stored as inf."""
    bad = {"pos": np.array([1e40, 0.0]), "door": 1}
    _refused_by_every_recorder(tmp_path, DICT, bad, 0, 0.0, r"column 'obs/pos': value 1e40 is out of range for float32")


def test_complex_rewards_are_refused_by_name(tmp_path: Path) -> None:
    """Issue 33, point 3: a complex reward would lose its imaginary part."""
    _refused_by_every_recorder(tmp_path, DICT, GOOD, 0, np.complex128(1 + 2j), r"reward.*complex")


@pytest.mark.parametrize(
    ("space", "values", "bad", "match"),
    [
        (spaces.MultiDiscrete([3, 5]), [[2, 4], [0, 0]], [2, 5], r"element 1: value 5 is not in MultiDiscrete"),
        (spaces.MultiBinary(3), [[0, 1, 1]], [0, 2, 1], r"element 1: value 2 is not in MultiBinary\(3\)"),
        (spaces.Discrete(3, start=-1), [-1, 1], 2, r"value 2 is not in Discrete\(3, start=-1\)"),
        (spaces.Box(0, 10, (2,), np.int32), [[0, 1]], np.array([2**40, 0]), r"int64 with values it does not hold"),
        (spaces.Box(-1, 1, (), np.float16), [0.5], np.float32(7e4), r"beyond the range of float16"),
    ],
)
def test_every_value_of_a_space_records_and_others_are_named(
    tmp_path: Path, space: spaces.Space[Any], values: list[Any], bad: Any, match: str
) -> None:
    """The discrete spaces' bounds, integer casts that would wrap and float casts that would
    overflow: every value the space takes reads back as given; the others raise SchemaError."""
    with trajcore.Writer(tmp_path / "w", space, spaces.Discrete(2)) as w:
        w.reset(values[0])
        for v in values[1:]:
            w.step(0, v, 0.0, False, False)
        with pytest.raises(trajcore.SchemaError, match=match):
            w.step(0, bad, 0.0, False, False)
    with trajcore.open(tmp_path / "w") as ds:
        if len(values) > 1:
            got = np.asarray(ds.episodes[0].observations)
            np.testing.assert_array_equal(got, np.asarray(values, dtype=space.dtype))


def test_a_float_info_beyond_its_column_widens_it(tmp_path: Path) -> None:
    """Infos have their own answer to a value their column cannot hold: the column widens
    (docs/recording.md, "Infos"). 1e40 after float32 values widens the key to float64 and reads
    back as given, never as inf."""
    rec = trajcore.RecordEpisodes(
        ValuesEnv(
            spaces.Box(-1, 1, (1,), np.float32),
            [np.zeros(1, np.float32)] * 3,
            [0.0, 0.0],
            [{"x": np.float32(1)}, {"x": 1e40}, {"x": np.float32(2)}],
        ),
        tmp_path / "r",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", trajcore.TrajcoreWarning)
        rec.reset(seed=0)
        rec.step(0)
        rec.step(0)
        rec.close()
    with trajcore.open(tmp_path / "r") as ds:
        x = ds.episodes[0].infos["x"]
        assert x.dtype == np.float64 and x.tolist() == [1.0, 1e40, 2.0]
