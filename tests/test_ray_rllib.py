"""The RLlib callback (`trajcore.ray.RecordRLlibEpisodes`): PPO trained for a couple of
iterations on a local Ray records every episode its EnvRunners complete, checked against RLlib's
own account of each episode (return, length, observations, actions), RLlib's training metrics,
and the env's own account of each row (echoed in its infos); plus the joining of episode chunks
and the custom-data calls, without a cluster."""

from __future__ import annotations

import functools
import glob
import json
import os
import pickle
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.rllib", reason="the RLlib callback needs ray[rllib] (CI installs ray[data,rllib])")
pytest.importorskip("torch", reason="RLlib's PPO needs torch")

import gymnasium as gym
import trajcore
import trajcore.ray
from format_decoder import index_chain
from gymnasium import spaces
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.tune.registry import register_env
from ray_envs import Capture, echo_env
from trajcore.ray._rllib_episode import RLlibEpisode


def ppo(env: str, path: Path, out: Path, record: dict[str, Any] | None = None, **env_runners: Any) -> Any:
    register_env("echo", echo_env)
    return (
        PPOConfig()
        .environment("echo", env_config={"id": env})
        # Half a CPU per EnvRunner, so that they and a learner fit in the 2 CPUs of `ray_local`.
        .env_runners(num_cpus_per_env_runner=0.5, **env_runners)
        # The learner in an actor of its own: making its torch optimizer imports triton, which
        # crashes a process that has rendered MuJoCo through EGL (Mesa's LLVM), as this test
        # process has if tests/test_frames.py ran before.
        .learners(num_learners=1)
        .training(train_batch_size_per_learner=256, minibatch_size=64, num_epochs=1)
        # trajcore's callback first: it records at the end of sample(), after every callback's
        # on_episode_end, so Capture's episode metadata is in.
        .callbacks(
            [
                functools.partial(trajcore.ray.RecordRLlibEpisodes, str(path), metadata={"exp": "t"}, **(record or {})),
                functools.partial(Capture, str(out)),
            ]
        )
        .debugging(seed=0)
    )


def accounts(out: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for name in glob.glob(str(out / "*.pkl")):
        with open(name, "rb") as f:
            account = pickle.load(f)
        found[account["id"]] = account
    return found


def assert_rows_echo_the_env(ep: trajcore.Episode, where: str) -> None:
    """The env's own account of each row (its infos) against the recorded values."""
    np.testing.assert_array_equal(ep.infos["obs"], ep.observations, err_msg=f"{where} observations")
    np.testing.assert_array_equal(ep.infos["action"][1:], ep.actions, err_msg=f"{where} actions")
    np.testing.assert_array_equal(ep.infos["reward"][1:], ep.rewards, err_msg=f"{where} rewards")


@pytest.mark.usefixtures("ray_local")
def test_ppo_cartpole_records_every_episode_rllib_completed(tmp_path: Path) -> None:
    path, out = tmp_path / "ds", tmp_path / "accounts"
    out.mkdir()
    algo = ppo("CartPole-v1", path, out, num_env_runners=2, num_envs_per_env_runner=2).build_algo()
    try:
        for _ in range(2):
            result = algo.train()
    finally:
        algo.stop()  # stops the EnvRunners, which closes their recorders
    rllib = accounts(out)
    lifetime = result["env_runners"]["num_episodes_lifetime"]
    with trajcore.open(path) as ds:
        assert ds.problems == []
        assert len(rllib) == lifetime == ds.num_episodes > 10
        assert ds.num_recordings == 2  # one per EnvRunner
        runners = sorted(ds.meta(r)["metadata"]["rllib"]["env_runner"] for r in range(2))
        assert runners == [1, 2]
        for r in range(2):
            meta = ds.meta(r)["metadata"]
            assert meta["exp"] == "t"
            assert meta["rllib"]["algorithm"] == "PPO" and meta["rllib"]["evaluation"] is False
            assert meta["ray"]["actor_id"] and meta["ray"]["host"]
        for shard in ds.shards:  # closed with the EnvRunner: an End record and the whole index
            with open(shard, "rb") as f:
                assert index_chain(f.read()) is not None, shard
        seen = set()
        for ep in ds.episodes:
            meta = ep.metadata
            rid = meta["rllib"]["episode_id"]
            where = f"episode {ep.index} (RLlib {rid})"
            want = rllib[rid]
            seen.add(rid)
            assert ep.complete and (ep.terminated, ep.truncated) == (want["terminated"], want["truncated"]), where
            assert ep.length == want["length"], where
            assert ep.episode_return == want["return"], where
            np.testing.assert_array_equal(ep.observations, want["observations"], err_msg=where)
            np.testing.assert_array_equal(ep.actions, want["actions"], err_msg=where)
            assert_rows_echo_the_env(ep, where)
            # The user's custom data: per step (given at every step, or every other one) and
            # per episode.
            assert ep.data["last_obs_sum"].dtype == np.float64
            np.testing.assert_allclose(ep.data["last_obs_sum"], ep.observations[1:].sum(axis=1), rtol=1e-6)
            even = np.arange(1, ep.length + 1) % 2 == 0
            assert ep.data["_even"].tolist() == even.tolist(), where
            assert ep.data["even"][even].tolist() == np.arange(1, ep.length + 1)[even].tolist(), where
            assert meta["tag"] == "done" and meta["chunks"] >= 1, where
            assert meta["rllib"]["env_index"] in (0, 1) and meta["rllib"]["env_runner"] in (1, 2), where
            # RLlib's extra model outputs, one per step.
            assert ep.data["action_logp"].shape == (ep.length,) and ep.data["_action_logp"].all(), where
            assert ep.data["action_dist_inputs"].shape == (ep.length, 2), where
            # The policy behind it, filled by the callback: the module, and the version of its
            # weights that took the first action.
            assert meta["policy"] == {"name": "default_policy", "step": int(ep.data["weights_seq_no"][0])}, where
        assert seen == set(rllib)
        assert len({ep.metadata["policy"]["step"] for ep in ds.episodes}) >= 2  # weights synced between iterations
        assert len(ds.select(policy="default_policy", policy_step=(0, None))) == ds.num_episodes
        # Some episodes ran over a sample() call (RLlib returned them in chunks) and were joined.
        assert any(ep.metadata["chunks"] > 1 for ep in ds.episodes)


@pytest.mark.usefixtures("ray_local")
def test_each_env_runner_keeps_its_capacity(tmp_path: Path) -> None:
    """`capacity_steps` bounds each EnvRunner's recording (one capacity per EnvRunner): both
    write into one directory at once, each keeps at most the capacity of its newest transitions
    (plus a shard), the evictions of both are counted in one log, and what is kept is what
    RLlib completed, value for value."""
    assert_each_env_runner_keeps_its_capacity(tmp_path / "ds", tmp_path)


@pytest.mark.usefixtures("ray_local")
def test_each_env_runner_keeps_its_capacity_in_one_store_prefix(tmp_path: Path, s3: Any) -> None:
    """The test above with a store prefix: each EnvRunner's recording holds a lease in the prefix
    while it records, so neither counts or deletes the other's shards, and their eviction logs
    (one each) add up."""
    url = f"s3://{s3.bucket()}/bounded"
    assert_each_env_runner_keeps_its_capacity(url, tmp_path, storage_options=s3.options)


def assert_each_env_runner_keeps_its_capacity(path: Any, tmp_path: Path, **store: Any) -> None:
    out = tmp_path / "accounts"
    out.mkdir()
    capacity = 100
    record = {"capacity_steps": capacity, **store}
    config = ppo("CartPole-v1", path, out, record, num_env_runners=2, num_envs_per_env_runner=2)
    algo = config.build_algo()
    try:
        for _ in range(3):
            algo.train()
    finally:
        algo.stop()
    rllib = accounts(out)
    with trajcore.open(path, **store) as ds:
        assert ds.problems == []
        assert ds.num_recordings == 2
        kept = [0, 0]
        for r, n in ds._core.shard_steps:
            kept[r] += n
        assert all(0 < k <= capacity + capacity // 10 + 2 for k in kept), kept
        assert ds.evicted_steps > 0
        assert ds.evicted_steps + sum(kept) == sum(a["length"] for a in rllib.values())
        for ep in ds.episodes:
            if ep.complete:
                want = rllib[ep.metadata["rllib"]["episode_id"]]
                np.testing.assert_array_equal(ep.observations, want["observations"])
                np.testing.assert_array_equal(ep.actions, want["actions"])


@pytest.mark.usefixtures("ray_local")
def test_box_actions_are_recorded_as_the_env_got_them(tmp_path: Path) -> None:
    path, out = tmp_path / "ds", tmp_path / "accounts"
    out.mkdir()
    config = ppo("Pendulum-v1", path, out, num_env_runners=1, num_envs_per_env_runner=1)
    config = config.training(train_batch_size_per_learner=400).evaluation(
        evaluation_interval=1,
        evaluation_num_env_runners=1,
        evaluation_duration=1,
        evaluation_duration_unit="episodes",
        evaluation_config={"num_cpus_per_env_runner": 0.5},
    )
    algo = config.build_algo()
    try:
        algo.train()
    finally:
        algo.stop()
    with trajcore.open(path) as ds:
        assert ds.problems == []
        evaluation = [ds.meta(r)["metadata"]["rllib"]["evaluation"] for r in range(ds.num_recordings)]
        assert sorted(evaluation) == [False, True]
        assert ds.num_episodes >= 3  # 400 steps of 200-step episodes, and one evaluation episode
        for ep in ds.episodes:
            where = f"episode {ep.index}"
            assert_rows_echo_the_env(ep, where)  # the unsquashed action, as the env got it
            assert ep.actions.dtype == np.float32
            module = ep.data["module_action"]
            assert not np.array_equal(module, ep.actions), where
            space = gym.make("Pendulum-v1").action_space
            unsquashed = np.clip(space.low + (module + 1.0) * (space.high - space.low) / 2.0, space.low, space.high)
            np.testing.assert_array_equal(unsquashed, ep.actions, err_msg=where)


# --- without a cluster ----------------------------------------------------------------------


OBS = spaces.Dict({"x": spaces.Box(-1, 1, (2,), np.float32), "k": spaces.Discrete(3)})


def episode_in_chunks(numpy_first: bool) -> tuple[list[Any], list[Any]]:
    """A 5-step episode cut after 3 steps (as sample() does), with the observations it saw."""
    rng = np.random.default_rng(0)
    seen = [{"x": rng.random(2, dtype=np.float32), "k": int(rng.integers(3))} for _ in range(6)]
    ep = SingleAgentEpisode(observation_space=OBS, action_space=spaces.Discrete(2))
    ep.add_env_reset(seen[0], {"i": 0})
    for t in range(3):
        ep.add_env_step(seen[t + 1], t % 2, float(t), {"i": t + 1}, extra_model_outputs={"action_logp": -0.5 * t})
        trajcore.ray.record_step(ep, t=t)
    trajcore.ray.set_episode_metadata(ep, first=1)
    rest = ep.cut(len_lookback_buffer=2)
    if numpy_first:
        ep.to_numpy()
    for t in range(3, 5):
        done = t == 4
        rest.add_env_step(
            seen[t + 1], t % 2, float(t), {"i": t + 1}, terminated=done, extra_model_outputs={"action_logp": -0.5 * t}
        )
        trajcore.ray.record_step(rest, t=t)
    trajcore.ray.set_episode_metadata(rest, last=2)
    return [ep, rest], seen


@pytest.mark.parametrize("numpy_first", [False, True])
def test_chunks_join_into_the_whole_episode(numpy_first: bool) -> None:
    chunks, seen = episode_in_chunks(numpy_first)
    ep = RLlibEpisode(chunks)
    assert ep.length == 5 and ep.terminated(4) and not ep.terminated(3) and not ep.truncated(4)
    for t in range(6):
        got = ep.observation(t)
        np.testing.assert_array_equal(got["x"], seen[t]["x"])
        assert int(got["k"]) == seen[t]["k"]
        assert ep.info(t) == {"i": t}
    assert [int(ep.action(t)) for t in range(5)] == [0, 1, 0, 1, 0]
    assert [ep.reward(t) for t in range(5)] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert [ep.data(t) for t in range(5)] == [{"action_logp": -0.5 * t, "t": t} for t in range(5)]
    assert ep.metadata == {"first": 1, "last": 2}
    assert RLlibEpisode(chunks, extra_model_outputs=False).data(2) == {"t": 2}


def test_chunks_that_do_not_join_are_refused() -> None:
    chunks, _ = episode_in_chunks(False)
    with pytest.raises(trajcore.InvalidArgumentError, match="a chunk is missing"):
        RLlibEpisode(chunks[1:])
    other = SingleAgentEpisode(observation_space=OBS, action_space=spaces.Discrete(2))
    with pytest.raises(trajcore.InvalidArgumentError, match="several RLlib episodes"):
        RLlibEpisode([chunks[0], other])


def test_custom_data_calls_refuse_what_cannot_be_recorded() -> None:
    ep = SingleAgentEpisode(observation_space=OBS, action_space=spaces.Discrete(2))
    ep.add_env_reset(OBS.sample(), {})
    with pytest.raises(trajcore.InvalidArgumentError, match="no step yet"):
        trajcore.ray.record_step(ep, x=1)
    ep.add_env_step(OBS.sample(), 0, 1.0, {}, extra_model_outputs={"action_logp": 0.0})
    with pytest.raises(trajcore.InvalidArgumentError, match="'_x'"):
        trajcore.ray.record_step(ep, _x=1)
    with pytest.raises(trajcore.InvalidArgumentError, match="taken"):
        trajcore.ray.record_step(ep, action_logp=1.0)
    with pytest.raises(trajcore.SchemaError, match="data/x"):
        trajcore.ray.record_step(ep, x={"a": object()})
    with pytest.raises(trajcore.InvalidArgumentError, match="JSON"):
        trajcore.ray.set_episode_metadata(ep, x=object())
    with pytest.raises(trajcore.InvalidArgumentError, match="'rllib'"):
        trajcore.ray.set_episode_metadata(ep, rllib=1)
    assert ep.custom_data.get("trajcore", {"steps": {}})["steps"] == {}
    with pytest.raises(trajcore.InvalidArgumentError, match="dataset directory"):
        trajcore.ray.RecordRLlibEpisodes()
    with pytest.raises(trajcore.InvalidArgumentError, match="step_data"):
        trajcore.ray.RecordRLlibEpisodes("x", step_data=lambda *a: {})  # type: ignore[call-arg]
    assert json.loads(json.dumps(trajcore.ray.RecordRLlibEpisodes("x").metadata)) == {}
    assert not os.path.exists("x")  # nothing is written before an episode ends


def finished_episode(obs: list[Any], data: list[dict[str, Any]]) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(observation_space=BOX, action_space=spaces.Discrete(2))
    ep.add_env_reset(obs[0], {})
    for t, o in enumerate(obs[1:]):
        ep.add_env_step(o, 1, 1.0, {"t": t + 1}, terminated=t == len(obs) - 2)
        if data[t]:
            trajcore.ray.record_step(ep, **data[t])
    return ep


BOX = spaces.Box(-1, 1, (2,), np.float32)


def test_values_that_cannot_be_recorded_are_named_and_training_goes_on(tmp_path: Path) -> None:
    callback = trajcore.ray.RecordRLlibEpisodes(tmp_path / "ds")
    stopped = []
    runner = SimpleNamespace(config=None, worker_index=3, num_envs=1, stop=lambda: stopped.append(True))
    good = [np.zeros(2, np.float32), np.ones(2, np.float32), np.full(2, 0.5, np.float32)]
    episodes = [
        finished_episode(good, [{"x": 1.5}, {"x": 2.5}]),
        finished_episode(good, [{"x": 3.5}, {"x": "not a float"}]),  # custom data that does not fit
        # An observation that does not fit, at the second step:
        finished_episode([*good[:2], np.zeros(3, np.float32), good[2]], [{}, {}, {}]),
        finished_episode(good, [{"x": 4.5}, {"x": 5.5}]),  # and recording goes on
    ]
    for env_index, ep in enumerate(episodes):
        callback.on_episode_end(episode=ep, prev_episode_chunks=[], env_runner=runner, env_index=env_index)
    with pytest.warns(trajcore.TrajcoreWarning) as caught:
        callback.on_sample_end(env_runner=runner, samples=episodes)
    messages = [str(w.message) for w in caught]
    assert any(f"episode {episodes[1].id_}, step 1: custom data 'x' left out" in m for m in messages), messages
    assert any(f"episode {episodes[2].id_} (EnvRunner 3, sub-env 2) is not recorded whole" in m for m in messages)
    runner.stop()  # the EnvRunner stopping closes the recorder, then stops
    assert stopped == [True]
    with trajcore.open(tmp_path / "ds") as ds:
        assert ds.problems == []
        first, second, third, fourth = ds.episodes
        assert first.complete and first.data["x"].tolist() == [1.5, 2.5]
        assert second.complete and second.data["_x"].tolist() == [True, False] and second.data["x"][0] == 3.5
        assert (not third.complete and third.length == 0) or third.length < 2  # ended where its value did not fit
        assert fourth.complete and fourth.data["x"].tolist() == [4.5, 5.5]
        assert [ep.metadata["rllib"]["env_index"] for ep in ds.episodes] == [0, 1, 2, 3]


def test_the_callback_records_into_a_store(s3: Any) -> None:
    """An s3:// path stays a URL (each EnvRunner stages and uploads), with its storage_options."""
    url = f"s3://{s3.bucket()}/rllib"
    callback = trajcore.ray.RecordRLlibEpisodes(url, storage_options=s3.options)
    runner = SimpleNamespace(config=None, worker_index=1, num_envs=1, stop=lambda: None)
    good = [np.zeros(2, np.float32), np.ones(2, np.float32), np.full(2, 0.5, np.float32)]
    episode = finished_episode(good, [{"x": 1.5}, {"x": 2.5}])
    callback.on_episode_end(episode=episode, prev_episode_chunks=[], env_runner=runner, env_index=0)
    callback.on_sample_end(env_runner=runner, samples=[episode])
    runner.stop()
    callback.close()
    assert not os.path.exists("s3:"), "no local directory named after the URL"
    with trajcore.open(url, storage_options=s3.options) as ds:
        (recorded,) = ds.episodes
        np.testing.assert_array_equal(recorded.observations, np.stack(good))
        assert recorded.data["x"].tolist() == [1.5, 2.5]


@pytest.mark.usefixtures("ray_local")
def test_multi_agent_ppo_records_an_episode_per_agent(tmp_path: Path) -> None:
    from ray_envs import echo_multi_agent_env

    register_env("echo_agents", echo_multi_agent_env)
    path = tmp_path / "ma"
    config = (
        PPOConfig()
        .environment("echo_agents")
        .env_runners(num_env_runners=1, num_cpus_per_env_runner=0.5)
        .learners(num_learners=1)
        .multi_agent(policies={"pa", "pb"}, policy_mapping_fn=lambda agent, episode, **kw: "p" + agent)
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .callbacks(functools.partial(trajcore.ray.RecordRLlibEpisodes, str(path)))
        .debugging(seed=0)
    )
    algo = config.build_algo()
    try:
        for _ in range(2):
            algo.train()
    finally:
        algo.stop()
    with trajcore.open(path) as ds:
        assert sorted(ds.agents) == ["a", "b"]
        by_env_episode: dict[str, list[trajcore.Episode]] = {}
        for ep in ds.episodes:
            by_env_episode.setdefault(ep.env_episode, []).append(ep)
            assert ep.metadata["rllib"]["module_id"] == "p" + ep.agent
            assert ep.metadata["policy"]["name"] == "p" + ep.agent
            assert_rows_echo_the_env(ep, f"episode {ep.index} ({ep.agent})")
        assert len(by_env_episode) >= 128 // 8  # every sampled env episode, each agent once
        for parts in by_env_episode.values():
            got = sorted((ep.agent, ep.length, ep.terminated, ep.truncated) for ep in parts)
            # RLlib's account of the flags: once every agent ended, some terminated and some
            # truncated, it marks the episode and each agent's part terminated ("a" too).
            assert got == [("a", 8, True, True), ("b", 5, True, False)]
        assert ds.select(agent="b").sample_transitions(8, seed=0)["observations"].shape == (8, 2)
