"""An info key is never lost because its type widened (issue 23, point 3): a value whose type does
not cast safely to its column's widens the column losslessly (numpy's safe casting and type
promotion), values written before read back in the wider type, and what cannot widen (a str after
a number) keeps the rule of values that do not fit: left out, warned, counted."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import format_decoder as fd
import gymnasium as gym
import numpy as np
import pytest
import trajcore
from format_decoder import KIND_COLUMN
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hostile_files import _rewrite_json


class InfoEnv(gym.Env[Any, Any]):
    """Gives info `{"x": values[t]}` at reset (t = 0) and at each step t; one episode."""

    def __init__(self, values: list[Any]) -> None:
        self.observation_space, self.action_space = spaces.Discrete(2), spaces.Discrete(2)
        self.values, self.t = values, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return 0, {"x": self.values[0]}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return 0, 0.0, False, self.t == len(self.values) - 1, {"x": self.values[self.t]}


def record_gym(path: Path, env_id: str, steps: int) -> list[list[Any]]:
    """Records `steps` steps of a gymnasium env; each episode's `prob` values as given."""
    env = trajcore.RecordEpisodes(gym.make(env_id), path)
    episodes: list[list[Any]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", trajcore.TrajcoreWarning)
        _, info = env.reset(seed=0)
        episodes.append([info["prob"]])
        env.action_space.seed(0)
        for _ in range(steps):
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            episodes[-1].append(info["prob"])
            if terminated or truncated:
                _, info = env.reset()
                episodes.append([info["prob"]])
        env.close()
    return [e for e in episodes if len(e) > 1]


@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "Taxi-v4", "CliffWalking-v1"])
def test_gymnasium_prob_keeps_every_value(tmp_path: Path, env_id: str) -> None:
    given_probs = record_gym(tmp_path / "run", env_id, 300)
    with trajcore.open(tmp_path / "run") as ds:
        complete = [ep for ep in ds.episodes if ep.length > 0]
        assert len(complete) >= len(given_probs) - 1
        for ep, probs in zip(complete, given_probs, strict=False):
            got = np.asarray(ep.infos["prob"])
            assert got.dtype.kind == "f", got.dtype
            assert bool(np.all(ep.infos["_prob"])), "every step's value is recorded"
            np.testing.assert_array_equal(got, np.asarray(probs, dtype=np.float64))


def test_frozenlake_widens_int_to_float(tmp_path: Path) -> None:
    """The issue's case: `prob` is 1 (int) at reset and 0.333 (float) at every step."""
    probs = record_gym(tmp_path / "run", "FrozenLake-v1", 100)
    assert isinstance(probs[0][0], int) and isinstance(probs[0][1], float)
    steps = sum(len(p) - 1 for p in probs)
    with trajcore.open(tmp_path / "run") as ds:
        recorded = sum(int(np.sum(ep.infos["_prob"][1:])) for ep in ds.episodes)
        assert recorded == steps


def test_numpy_dtypes_widen_losslessly(tmp_path: Path) -> None:
    values = [np.bool_(True), np.int32(7), np.int64(2**40), np.float32(0.5), 2.25]
    trajcore_env = trajcore.RecordEpisodes(InfoEnv(values), tmp_path / "run")
    with warnings.catch_warnings():
        warnings.simplefilter("error", trajcore.TrajcoreWarning)
        trajcore_env.reset(seed=0)
        for _ in values[1:]:
            trajcore_env.step(0)
        trajcore_env.close()
    with trajcore.open(tmp_path / "run") as ds:
        got = ds.episodes[0].infos["x"]
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, [1.0, 7.0, 2.0**40, 0.5, 2.25])
    # The independent decoder reads the widened key the same way (FORMAT.md, "Widened columns").
    dec = fd.DecodedDataset(tmp_path / "run")
    value, mask = dec.read_info(0, "info/x")
    assert value.dtype == np.float64 and bool(np.all(mask))
    np.testing.assert_array_equal(value, [1.0, 7.0, 2.0**40, 0.5, 2.25])


def test_int32_then_int64_no_longer_wraps(tmp_path: Path) -> None:
    values = [np.int32(1), np.int64(2**40), np.int64(-3)]
    env = trajcore.RecordEpisodes(InfoEnv(values), tmp_path / "run")
    env.reset(seed=0)
    env.step(0)
    env.step(0)
    env.close()
    with trajcore.open(tmp_path / "run") as ds:
        got = ds.episodes[0].infos["x"]
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, [1, 2**40, -3])


def _kind(v: Any) -> str:
    return "s" if isinstance(v, str) else "b" if isinstance(v, bool) else "i" if isinstance(v, int) else "f"


def expected(values: list[Any]) -> tuple[str, list[bool]]:
    """The key's final kind and which values are recorded: numbers widen bool -> int -> float
    (a Python int or bool fits a float column, a bool an int one); a str after a number, or a
    number after a str, does not fit and cannot widen."""
    kind = _kind(values[0])
    stored = [True]
    for v in values[1:]:
        k = _kind(v)
        if "s" in (kind, k):
            stored.append(kind == k)
        else:
            stored.append(True)
            kind = max(kind, k, key="bif".index)
    return kind, stored


scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, width=64),
    st.text(max_size=5),
)


@settings(max_examples=40, deadline=None)
@given(values=st.lists(scalars, min_size=2, max_size=8))
def test_mixed_sequences_read_back_widened_or_masked(
    tmp_path_factory: pytest.TempPathFactory, values: list[Any]
) -> None:
    path = tmp_path_factory.mktemp("w") / "run"
    kind, stored = expected(values)
    env = trajcore.RecordEpisodes(InfoEnv(values), path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", trajcore.TrajcoreWarning)
        env.reset(seed=0)
        for _ in values[1:]:
            env.step(0)
        env.close()
    warned = any(issubclass(w.category, trajcore.TrajcoreWarning) for w in caught)
    assert warned == (not all(stored))
    with trajcore.open(path) as ds:
        ep = ds.episodes[0]
        got, mask = ep.infos["x"], ep.infos["_x"]
        assert [bool(m) for m in mask] == stored
        final = {"b": np.bool_, "i": np.int64, "f": np.float64}.get(kind)
        for v, m, g in zip(values, stored, got, strict=True):
            if not m:
                continue
            if final is None:
                assert g == v
            else:
                assert np.asarray(g).dtype == np.dtype(final)
                assert g == np.asarray(v).astype(final)


def test_convert_and_recover_keep_widened_keys(tmp_path: Path) -> None:
    record_gym(tmp_path / "run", "FrozenLake-v1", 100)
    trajcore.convert(tmp_path / "run", tmp_path / "raw", codecs="raw")
    trajcore.recover(tmp_path / "run", tmp_path / "rec")
    with trajcore.open(tmp_path / "run") as ds:
        want = [(np.asarray(ep.infos["prob"]), np.asarray(ep.infos["_prob"])) for ep in ds.episodes]
    for copy in ("raw", "rec"):
        with trajcore.open(tmp_path / copy) as ds:
            got = [(np.asarray(ep.infos["prob"]), np.asarray(ep.infos["_prob"])) for ep in ds.episodes]
        assert len(got) == len(want)
        for (gv, gm), (wv, wm) in zip(got, want, strict=True):
            assert gv.dtype == wv.dtype == np.float64
            np.testing.assert_array_equal(gv, wv)
            np.testing.assert_array_equal(gm, wm)


@pytest.mark.parametrize("widens", [999, 0])
def test_a_widens_that_names_no_column_reads_as_a_key_of_its_own(tmp_path: Path, widens: int) -> None:
    """A hostile `widens` (valid checksums) neither hides values nor fails the recording."""
    record_gym(tmp_path / "run", "FrozenLake-v1", 50)

    def rewrite(spec: dict[str, Any]) -> bool:
        if "widens" not in spec:
            return False
        spec.update(widens=widens, codec={})
        return True

    for shard in (tmp_path / "run").glob("*.trj"):
        _rewrite_json(shard, KIND_COLUMN, rewrite)
    with trajcore.open(tmp_path / "run") as ds:
        infos = ds.episodes[0].infos
        assert infos["prob"].dtype == np.int64 and infos["prob%Wfloat64"].dtype == np.float64
