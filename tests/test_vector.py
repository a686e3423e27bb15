"""RecordVectorEpisodes: every autoreset mode, sync and async, compared value by value with the
same sub-envs recorded alone through RecordEpisodes."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from helpers import SpaceEnv, assert_infos_equal, assert_tree_equal

N = 3
SEED = 100
DICT_SPACE = spaces.Dict(
    {
        "pos": spaces.Box(-1, 1, (2,), np.float32),
        "grid": spaces.Box(0, 255, (3, 3), np.uint8),
        "t": spaces.Tuple([spaces.Discrete(4), spaces.MultiBinary(2)]),
        "name": spaces.Text(5),
    }
)
ACTION_SPACE = spaces.Tuple([spaces.Discrete(3), spaces.Box(-1, 1, (2,), np.float32)])


def make_env(i: int, obs_space: Any = None, act_space: Any = None) -> SpaceEnv:
    # Sub-envs end at different times, by termination and by truncation.
    return SpaceEnv(obs_space, act_space, max_steps=4 + 3 * i, p_terminate=0.12)


def make_vec(mode: AutoresetMode, vectorization: str, obs_space: Any = None, act_space: Any = None) -> Any:
    fns = [functools.partial(make_env, i, obs_space, act_space) for i in range(N)]
    if vectorization == "sync":
        return SyncVectorEnv(fns, autoreset_mode=mode)
    # gymnasium's shared-memory transport turns Text observations into "00000"; pipes keep them.
    return AsyncVectorEnv(fns, autoreset_mode=mode, shared_memory=obs_space is None)


def record_both(
    tmp_path: Path, mode: AutoresetMode, vectorization: str, steps: int, obs_space: Any = None, act_space: Any = None
) -> tuple[trajcore.Dataset, list[trajcore.Dataset]]:
    """Records `steps` vector steps, and replays each sub-env's transitions on a single env."""
    venv = make_vec(mode, vectorization, obs_space, act_space)
    rec = trajcore.RecordVectorEpisodes(
        venv,
        tmp_path / "vec",
        {"mode": mode.value},
        episode_metadata=lambda e: {"ret": e["episode_return"], "len": e["length"], "env": e["env_index"]},
    )
    singles = [
        trajcore.RecordEpisodes(
            make_env(i, obs_space, act_space),
            tmp_path / f"single{i}",
            episode_metadata=lambda e, i=i: {"ret": e["episode_return"], "len": e["length"], "env": i},
        )
        for i in range(N)
    ]
    rec.action_space.seed(SEED)
    rec.reset(seed=SEED)
    for i, s in enumerate(singles):
        s.reset(seed=SEED + i)
    resetting = np.zeros(N, dtype=bool)  # NEXT_STEP: this step is a reset for these sub-envs
    for t in range(steps):
        actions = rec.action_space.sample()
        rec.record(t=np.full(N, t, dtype=np.int32))
        _, _, terms, truncs, _ = rec.step(actions)
        done = terms | truncs
        for i, s in enumerate(singles):
            if mode is AutoresetMode.NEXT_STEP and resetting[i]:
                continue
            action_i = tuple(a[i] for a in actions) if isinstance(actions, tuple) else actions[i]
            s.record(t=np.int32(t))
            _, _, term, trunc, _ = s.step(action_i)
            assert (term, trunc) == (terms[i], truncs[i]), f"sub-env {i} diverged at step {t}"
            if term or trunc:
                s.reset()
        if mode is AutoresetMode.NEXT_STEP:
            resetting = done
        elif mode is AutoresetMode.DISABLED and done.any():
            rec.reset(options={"reset_mask": done})
    rec.close()
    for s in singles:
        s.close()
    return trajcore.open(tmp_path / "vec"), [trajcore.open(tmp_path / f"single{i}") for i in range(N)]


def compare(vec: trajcore.Dataset, singles: list[trajcore.Dataset]) -> None:
    assert vec.num_episodes == sum(s.num_episodes for s in singles)
    assert vec.num_steps == sum(s.num_steps for s in singles)
    for i, single in enumerate(singles):
        mine = vec.select(env_index=i)
        assert len(mine) == single.num_episodes, f"env {i}"
        assert single.num_episodes >= 2, "the test should see several episodes per sub-env"
        for k, (got, want) in enumerate(zip(mine, single.episodes, strict=True)):
            where = f"env {i} episode {k}"
            assert got.env_index == i
            assert (got.length, got.complete, got.terminated, got.truncated) == (
                want.length,
                want.complete,
                want.terminated,
                want.truncated,
            ), where
            assert got.episode_return == want.episode_return, where
            assert_tree_equal(got.observations, want.observations, f"{where} observations")
            assert_tree_equal(got.actions, want.actions, f"{where} actions")
            assert_tree_equal(got.rewards, want.rewards, f"{where} rewards")
            assert_tree_equal(got.terminations, want.terminations, f"{where} terminations")
            assert_tree_equal(got.truncations, want.truncations, f"{where} truncations")
            assert_infos_equal(got.infos, want.infos, f"{where} infos")
            assert_infos_equal(got.data, want.data, f"{where} data")
            if got.complete:
                assert got.metadata == want.metadata == {"ret": got.episode_return, "len": got.length, "env": i}
    # Incomplete episodes (running at close) come last.
    complete = vec.summaries()["complete"]
    assert not np.any(complete[np.argmin(complete) :]) or complete.all()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_vector_matches_single_envs(tmp_path: Path, mode: AutoresetMode, vectorization: str) -> None:
    vec, singles = record_both(tmp_path, mode, vectorization, steps=40)
    with vec:
        assert vec.meta(0)["num_envs"] == N
        assert vec.meta(0)["autoreset_mode"] == {"NextStep": "next_step", "SameStep": "same_step"}.get(
            mode.value, "disabled"
        )
        assert vec.metadata == {"mode": mode.value}
        compare(vec, singles)
    for s in singles:
        s.close()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_vector_dict_tuple_spaces_match_single_envs(tmp_path: Path, mode: AutoresetMode) -> None:
    vec, singles = record_both(tmp_path, mode, "sync", steps=30, obs_space=DICT_SPACE, act_space=ACTION_SPACE)
    with vec:
        assert vec.observation_space == DICT_SPACE
        assert vec.action_space == ACTION_SPACE
        compare(vec, singles)
        ep = vec.episodes[0]
        assert isinstance(ep.observations["name"], list)
        assert ep.observations["grid"].shape == (ep.length + 1, 3, 3)
    for s in singles:
        s.close()


def test_async_dict_space_matches(tmp_path: Path) -> None:
    vec, singles = record_both(
        tmp_path, AutoresetMode.SAME_STEP, "async", steps=25, obs_space=DICT_SPACE, act_space=ACTION_SPACE
    )
    with vec:
        compare(vec, singles)
    for s in singles:
        s.close()


def test_cartpole_make_vec_next_step_episodes(tmp_path: Path) -> None:
    envs = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
    rec = trajcore.RecordVectorEpisodes(envs, tmp_path / "cp")
    rec.action_space.seed(0)
    obs, _ = rec.reset(seed=0)
    first_obs = obs.copy()
    ended = 0
    resets = 0  # NEXT_STEP: the step after an episode ends is that sub-env's reset
    prev_done = np.zeros(4, dtype=bool)
    for _ in range(300):
        resets += int(np.sum(prev_done))
        _, _, term, trunc, _ = rec.step(rec.action_space.sample())
        prev_done = term | trunc
        ended += int(np.sum(prev_done))
    rec.close()
    with trajcore.open(tmp_path / "cp") as ds:
        s = ds.summaries()
        assert int(np.sum(s["complete"])) == ended
        assert int(np.sum(~s["complete"])) == 4  # one running episode per sub-env at close
        assert ds.num_steps + resets == 300 * 4  # no autoreset step is a transition
        for i in range(4):
            first = ds.select(env_index=i)[0]
            assert_tree_equal(first.observations[0], first_obs[i])
            # CartPole rewards are 1 per step and episodes end by termination or truncation.
            assert first.episode_return == first.length
        for ep in ds.episodes:
            assert len(ep.rewards) == ep.length
            assert ep.observations.shape == (ep.length + 1, 4)
            if ep.complete:
                assert ep.terminations[-1] or ep.truncations[-1]
                assert not np.any(ep.terminations[:-1] | ep.truncations[:-1])


def test_vector_infos_nested_episode_statistics(tmp_path: Path) -> None:
    envs = gym.make_vec(
        "CartPole-v1", num_envs=2, vectorization_mode="sync", wrappers=[gym.wrappers.RecordEpisodeStatistics]
    )
    rec = trajcore.RecordVectorEpisodes(envs, tmp_path / "st")
    rec.action_space.seed(1)
    rec.reset(seed=1)
    finals: dict[int, list[float]] = {0: [], 1: []}
    for _ in range(120):
        _, _, _, _, infos = rec.step(rec.action_space.sample())
        if "episode" in infos:
            for i in np.flatnonzero(infos["_episode"]):
                finals[int(i)].append(float(infos["episode"]["r"][i]))
    rec.close()
    with trajcore.open(tmp_path / "st") as ds:
        for i in (0, 1):
            done = [e for e in ds.select(env_index=i) if e.complete]
            assert len(done) == len(finals[i]) > 0
            for ep, r in zip(done, finals[i], strict=True):
                infos = ep.infos
                assert infos["_episode"][-1]
                assert not infos["_episode"][:-1].any()
                assert infos["episode"]["r"][-1] == r == ep.episode_return
                assert infos["episode"]["_r"][-1]
                assert infos["episode"]["l"][-1] == ep.length


def test_discard_and_metadata_per_sub_env(tmp_path: Path) -> None:
    envs = make_vec(AutoresetMode.NEXT_STEP, "sync")
    rec = trajcore.RecordVectorEpisodes(envs, tmp_path / "d")
    rec.reset(seed=0)
    rec.set_episode_metadata(1, {"who": "one"}, extra=1)
    rec.discard(2)
    rec.step(np.zeros(N, dtype=np.int64))
    rec.close()
    with trajcore.open(tmp_path / "d") as ds:
        assert sorted(e.env_index for e in ds.episodes) == [0, 1]
        assert ds.select(env_index=1)[0].metadata == {"who": "one", "extra": 1}
        assert ds.select(env_index=0)[0].metadata == {}


def test_autoreset_mode_absent_warns_and_unknown_is_refused(tmp_path: Path) -> None:
    envs = make_vec(AutoresetMode.NEXT_STEP, "sync")
    envs.metadata = {k: v for k, v in envs.metadata.items() if k != "autoreset_mode"}
    with pytest.warns(trajcore.TrajcoreWarning, match="NEXT_STEP"):
        rec = trajcore.RecordVectorEpisodes(envs, tmp_path / "a")
    assert rec.autoreset_mode == "next_step"
    rec.close()
    envs = make_vec(AutoresetMode.NEXT_STEP, "sync")
    envs.metadata = {**envs.metadata, "autoreset_mode": "SometimesStep"}
    with pytest.raises(trajcore.InvalidArgumentError, match="SometimesStep"):
        trajcore.RecordVectorEpisodes(envs, tmp_path / "b")
    envs.close()
    for value, want in (("SameStep", "same_step"), ("same_step", "same_step"), (AutoresetMode.DISABLED, "disabled")):
        envs = make_vec(AutoresetMode.NEXT_STEP, "sync")
        envs.metadata = {**envs.metadata, "autoreset_mode": value}
        with warnings.catch_warnings():
            warnings.simplefilter("error", trajcore.TrajcoreWarning)
            rec = trajcore.RecordVectorEpisodes(envs, tmp_path / f"c{want}")
        assert rec.autoreset_mode == want
        rec.close()


class ForeignVectorEnv:
    """Follows the VectorEnv API without deriving from gymnasium's class."""

    def __init__(self) -> None:
        self._inner = make_vec(AutoresetMode.SAME_STEP, "sync")
        self.num_envs = N
        self.observation_space = self._inner.observation_space
        self.action_space = self._inner.action_space
        self.single_observation_space = self._inner.single_observation_space
        self.single_action_space = self._inner.single_action_space
        self.metadata = {"autoreset_mode": "SameStep"}

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        return self._inner.reset(seed=seed, options=options)

    def step(self, actions: Any) -> Any:
        return self._inner.step(actions)

    def close(self, **kwargs: Any) -> None:
        self._inner.close()


def test_foreign_vector_env_is_recorded(tmp_path: Path) -> None:
    rec = trajcore.RecordVectorEpisodes(ForeignVectorEnv(), tmp_path / "f")
    rec.action_space.seed(SEED)
    rec.reset(seed=SEED)
    for _ in range(30):
        rec.step(rec.action_space.sample())
    rec.close()
    with trajcore.open(tmp_path / "f") as ds:
        assert ds.meta(0)["autoreset_mode"] == "same_step"
        assert ds.num_episodes >= N
        assert ds.num_steps == 30 * N  # same-step autoreset: every step is a transition


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_episode_metadata_reports_the_episodes_the_file_holds(tmp_path: Path, mode: AutoresetMode) -> None:
    # The core says which episodes a step ended: the callback's lengths and returns are the
    # file's, and a discarded episode's end is not reported.
    seen: list[tuple[int, int, float, bool, bool]] = []

    def on_end(e: trajcore.EpisodeInfo) -> dict[str, Any]:
        seen.append((e["env_index"], e["length"], e["episode_return"], e["terminated"], e["truncated"]))
        return {"n": len(seen)}

    rec = trajcore.RecordVectorEpisodes(make_vec(mode, "sync"), tmp_path / "d", episode_metadata=on_end)
    rec.action_space.seed(SEED)
    rec.reset(seed=SEED)
    for t in range(60):
        if t == 3:
            rec.discard(1)  # its running episode: skipped to its end, never listed
        _, _, terms, truncs, _ = rec.step(rec.action_space.sample())
        done = terms | truncs
        if mode is AutoresetMode.DISABLED and done.any():
            rec.reset(options={"reset_mask": done})
    rec.close()
    with trajcore.open(tmp_path / "d") as ds:
        complete = [e for e in ds.episodes if e.complete]
        listed = sorted(complete, key=lambda e: e.metadata["n"])
        assert [e.metadata["n"] for e in listed] == list(range(1, len(seen) + 1))
        got = [(e.env_index, e.length, e.episode_return, e.terminated, e.truncated) for e in listed]
        assert got == seen
        assert len(seen) >= 2 * N


def test_episode_metadata_gets_the_sub_envs_own_final_observation_and_info(tmp_path: Path) -> None:
    # Each ended episode's callback sees its sub-env's entries of the step's infos (here
    # RecordEpisodeStatistics's, whose counts match the file's) and its observation alone.
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    seen: list[trajcore.EpisodeInfo] = []
    venv = RecordEpisodeStatistics(gym.make_vec("CartPole-v1", num_envs=N, vectorization_mode="sync"))
    rec = trajcore.RecordVectorEpisodes(venv, tmp_path / "d", episode_metadata=seen.append)
    rec.action_space.seed(SEED)
    rec.reset(seed=SEED)
    for _ in range(60):
        rec.step(rec.action_space.sample())
    rec.close()
    assert len(seen) >= N
    for e in seen:
        assert e["observation"].shape == rec.single_observation_space.shape
        assert e["info"]["episode"]["l"] == e["length"]
        assert e["info"]["episode"]["r"] == pytest.approx(e["episode_return"])
