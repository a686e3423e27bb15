"""Recording through the envs and wrappers people really run, compared value by value twice:
with a capture of everything the wrapped env returned (split into episodes by the independent
model in `capture.py`, infos included), and with a replay of every recorded episode's actions on
a fresh unwrapped env of the same id and seed."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from capture import assert_matches, record_vector
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers.vector import NormalizeObservation, RecordEpisodeStatistics

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


def _row(tree: Any, t: int) -> Any:
    """Row t of a column tree as read back (dicts/tuples of arrays, lists of str)."""
    if isinstance(tree, dict):
        return {k: _row(v, t) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_row(v, t) for v in tree)
    return tree[t]


def _same(got: Any, want: Any, where: str) -> None:
    if isinstance(want, dict):
        for k in want:
            _same(got[k], want[k], f"{where}/{k}")
    elif isinstance(want, tuple):
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{where}/{k}")
    elif isinstance(want, str):
        assert got == want, where
    else:
        assert np.array_equal(np.asarray(got), np.asarray(want)), f"{where}: {got!r} != {want!r}"


def assert_replays(ds: trajcore.Dataset, make_env: Callable[[int], gym.Env[Any, Any]], seed: int) -> int:
    """Replays every sub-env's recorded episodes, in order, on a fresh env of its own (reset with
    `seed + index` first, then without a seed, as gymnasium's autoreset does) and checks every
    recorded observation, reward and flag. Returns the number of steps replayed."""
    steps = 0
    for i in sorted({ep.env_index for ep in ds.episodes}):
        env = make_env(i)
        for k, ep in enumerate(e for e in ds.episodes if e.env_index == i):
            where = f"sub-env {i} episode {k}"
            obs, _ = env.reset(seed=seed + i if k == 0 else None)
            _same(_row(ep.observations, 0), obs, f"{where} reset observation")
            for t in range(ep.length):
                obs, reward, terminated, truncated, _ = env.step(_row(ep.actions, t))
                _same(_row(ep.observations, t + 1), obs, f"{where} observation {t + 1}")
                assert ep.rewards[t] == float(reward), f"{where} reward {t}"
                assert (ep.terminations[t], ep.truncations[t]) == (terminated, truncated), f"{where} flags {t}"
                steps += 1
        env.close()
    return steps


# --- CartPole with gymnasium's vector wrappers ---------------------------------------------------


def _cartpole(i: int = 0) -> gym.Env[Any, Any]:
    return gym.make("CartPole-v1", max_episode_steps=30)  # TimeLimit: truncations as well


@pytest.mark.parametrize("vectorization", ["sync", "async"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_record_episode_statistics(tmp_path: Path, mode: AutoresetMode, vectorization: str) -> None:
    venv = gym.make_vec(
        "CartPole-v1",
        num_envs=3,
        vectorization_mode=vectorization,
        vector_kwargs={"autoreset_mode": mode},
        max_episode_steps=30,
    )
    rec = trajcore.RecordVectorEpisodes(RecordEpisodeStatistics(venv), tmp_path / "d")
    _, expected = record_vector(rec, 300, seed=5)
    ds = trajcore.open(tmp_path / "d")
    assert sum(e.complete for e in expected) >= 15
    assert_matches(ds, expected, rec.single_observation_space)
    assert assert_replays(ds, _cartpole, seed=5) == ds.num_steps


def test_normalize_observation(tmp_path: Path) -> None:
    venv = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync", max_episode_steps=25)
    rec = trajcore.RecordVectorEpisodes(RecordEpisodeStatistics(NormalizeObservation(venv)), tmp_path / "d")
    _, expected = record_vector(rec, 200, seed=1)
    ds = trajcore.open(tmp_path / "d")
    assert_matches(ds, expected, rec.single_observation_space)
    # Normalized: not what CartPole itself returns, but what the wrapped env gave the caller.
    assert not np.allclose(ds.episodes[0].observations[1:], 0)


def test_time_limit_single_env(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(_cartpole(), tmp_path / "d")
    env.action_space.seed(3)
    env.reset(seed=3)
    for _ in range(200):
        _, _, te, tr, _ = env.step(env.action_space.sample())
        if te or tr:
            env.reset()
    env.close()
    ds = trajcore.open(tmp_path / "d")
    assert any(ep.truncated for ep in ds.episodes) and any(ep.terminated for ep in ds.episodes)
    assert assert_replays(ds, _cartpole, seed=3) == ds.num_steps


# --- ALE: Atari preprocessing and frame stacks ----------------------------------------------------

ale_py = pytest.importorskip("ale_py", reason="ale-py is not installed (.ci/run installs it)")
gym.register_envs(ale_py)


def _breakout(i: int = 0) -> gym.Env[Any, Any]:
    env = gym.make("ALE/Breakout-v5", frameskip=1, max_episode_steps=240)
    env = gym.wrappers.AtariPreprocessing(env, frame_skip=4, screen_size=84, noop_max=10)
    return gym.wrappers.FrameStackObservation(env, 4)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.name)
def test_ale_frame_stacks(tmp_path: Path, mode: AutoresetMode) -> None:
    venv = SyncVectorEnv([functools.partial(_breakout, i) for i in range(2)], autoreset_mode=mode)
    rec = trajcore.RecordVectorEpisodes(RecordEpisodeStatistics(venv), tmp_path / "d")
    assert rec.single_observation_space.shape == (4, 84, 84)
    _, expected = record_vector(rec, 150, seed=11)
    ds = trajcore.open(tmp_path / "d")
    assert sum(e.complete for e in expected) >= 2
    assert_matches(ds, expected, rec.single_observation_space)
    assert "lives" in ds.episodes[0].infos
    assert assert_replays(ds, _breakout, seed=11) == ds.num_steps


# --- MuJoCo --------------------------------------------------------------------------------------

mujoco = pytest.importorskip("mujoco", reason="gymnasium[mujoco] is not installed (.ci/run installs it)")


def _hopper(i: int = 0) -> gym.Env[Any, Any]:
    return gym.make("Hopper-v5", max_episode_steps=40)


def test_mujoco_vector_same_step(tmp_path: Path) -> None:
    venv = SyncVectorEnv([functools.partial(_hopper, i) for i in range(2)], autoreset_mode=AutoresetMode.SAME_STEP)
    rec = trajcore.RecordVectorEpisodes(RecordEpisodeStatistics(venv), tmp_path / "d")
    _, expected = record_vector(rec, 120, seed=2)
    ds = trajcore.open(tmp_path / "d")
    assert sum(e.complete for e in expected) >= 3
    assert_matches(ds, expected, rec.single_observation_space)
    assert {"x_position", "reward_forward"} <= set(ds.episodes[0].infos)
    assert assert_replays(ds, _hopper, seed=2) == ds.num_steps


def test_mujoco_single_env(tmp_path: Path) -> None:
    make = functools.partial(gym.make, "HalfCheetah-v5", max_episode_steps=30)
    env = trajcore.RecordEpisodes(make(), tmp_path / "d")
    env.action_space.seed(0)
    env.reset(seed=0)
    for _ in range(75):
        _, _, te, tr, _ = env.step(env.action_space.sample())
        if te or tr:
            env.reset()
    env.close()
    ds = trajcore.open(tmp_path / "d")
    assert [ep.length for ep in ds.episodes] == [30, 30, 15]
    assert assert_replays(ds, lambda i: make(), seed=0) == 75


# --- MiniGrid: a Dict observation with a text space of its own class ------------------------------

minigrid = pytest.importorskip("minigrid", reason="minigrid is not installed (.ci/run installs it)")


def _minigrid(i: int = 0) -> gym.Env[Any, Any]:
    return gym.make("MiniGrid-Empty-5x5-v0", max_steps=20)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_minigrid(tmp_path: Path, mode: AutoresetMode) -> None:
    venv = SyncVectorEnv([functools.partial(_minigrid, i) for i in range(3)], autoreset_mode=mode)
    rec = trajcore.RecordVectorEpisodes(RecordEpisodeStatistics(venv), tmp_path / "d")
    _, expected = record_vector(rec, 100, seed=4)
    ds = trajcore.open(tmp_path / "d")
    assert sum(e.complete for e in expected) >= 6
    # MissionSpace is no gymnasium text space but declares str values: read back as Text.
    assert isinstance(ds.observation_space["mission"], spaces.Text)  # type: ignore[index]
    assert_matches(ds, expected, ds.observation_space)
    assert ds.episodes[0].observations["mission"][0] == "get to the green goal square"
    assert assert_replays(ds, _minigrid, seed=4) == ds.num_steps
