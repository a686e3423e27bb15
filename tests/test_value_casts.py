"""Property tests of the step path's fast conversions: numbers cast into float32/float64 columns
in Rust (an env's float32 or integer rewards and observations) and numpy scalars read without a
0-d array must store exactly what numpy's own cast stores."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
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
    ds, ep = _record(env)
    with ds, np.errstate(over="ignore"):  # float64 beyond float32's range casts to inf, as in numpy
        _same(np.asarray(ep.observations), np.stack(obs).astype(target))
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
