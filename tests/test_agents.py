"""PettingZoo recording: every agent's part of each env episode, value by value against an
independent capture of what the env returned (MPE's simple_spread and simple_tag, Knights Archers
Zombies, tic-tac-toe and connect four), per-agent reads, and PettingZoo's own API tests passing on
the wrapped envs."""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from helpers import Episode, assert_infos_equal, assert_tree_equal, expected_infos, stack
from mpe2 import simple_spread_v3, simple_tag_v3
from pettingzoo import ParallelEnv
from pettingzoo.butterfly import knights_archers_zombies_v11
from pettingzoo.classic import connect_four_v3, tictactoe_v3
from pettingzoo.test import api_test, parallel_api_test
from trajcore.read.multiagent.env_episodes import EnvEpisodes
from trajcore.read.multiagent.joint_plan import group_env_episodes, plan_joint


class Want(Episode):
    """One agent's part of one env episode, as the env returned it (with the env step of each
    of its actions)."""

    def __init__(self, obs: Any, info: dict[str, Any]) -> None:
        super().__init__(obs, info)
        self.env_steps: list[int] = []

    def add(self, action: Any, at: int, obs: Any, reward: Any, term: bool, trunc: bool, info: dict[str, Any]) -> None:
        self.actions.append(action)
        self.env_steps.append(at)
        self.observations.append(obs)
        self.rewards.append(float(reward))
        self.terminations.append(bool(term))
        self.truncations.append(bool(trunc))
        self.infos.append(info)


def _copy(value: Any) -> Any:
    # The env may reuse its arrays: the capture keeps what they held then.
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value.copy() if isinstance(value, np.ndarray) else value


def run_parallel(env: Any, episodes: int, seed: int) -> list[dict[Any, Want]]:
    """Plays `episodes` env episodes with seeded random actions; per env episode, each agent's part."""
    out = []
    for e in range(episodes):
        observations, infos = env.reset(seed=seed + e)
        for i, agent in enumerate(env.possible_agents):
            env.action_space(agent).seed(seed + 100 * e + i)
        parts = {a: Want(_copy(o), dict(infos.get(a, {}))) for a, o in observations.items()}
        t = 0
        while env.agents:
            actions = {a: env.action_space(a).sample() for a in env.agents}
            observations, rewards, terms, truncs, infos = env.step(actions)
            for a, action in actions.items():
                if a in observations:
                    parts[a].add(
                        action, t, _copy(observations[a]), rewards[a], terms[a], truncs[a], dict(infos.get(a, {}))
                    )
            for a, o in observations.items():
                if a not in parts:
                    parts[a] = Want(_copy(o), dict(infos.get(a, {})))
            t += 1
        out.append(parts)
    return out


def run_aec(env: Any, episodes: int, seed: int) -> list[dict[Any, Want]]:
    """Plays `episodes` env episodes of an AEC env with seeded random legal actions."""
    out = []
    for e in range(episodes):
        env.reset(seed=seed + e)
        rng = np.random.default_rng(seed + e)
        parts: dict[Any, Want] = {}
        pending: dict[Any, tuple[Any, int]] = {}
        for turn, agent in enumerate(env.agent_iter()):
            obs, reward, term, trunc, info = env.last()
            if agent not in parts:
                parts[agent] = Want(_copy(obs), dict(info))
            elif agent in pending:
                action, at = pending.pop(agent)
                parts[agent].add(action, at, _copy(obs), reward, term, trunc, dict(info))
            if term or trunc:
                action = None
            else:
                action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
                pending[agent] = (action, turn)
            env.step(action)
        out.append(parts)
    return out


def check_against(ds: trajcore.Dataset, wants: list[dict[Any, Want]], env: Any) -> None:
    """Every agent's episode of every env episode, value by value; env episodes told apart."""
    by_part = {(ep.env_episode, ep.agent): ep for ep in ds.episodes}
    env_episodes = list(dict.fromkeys(ep.env_episode for ep in ds.episodes))
    assert len(env_episodes) == len(wants)
    assert len(by_part) == ds.num_episodes == sum(len(parts) for parts in wants)
    for env_episode, parts in zip(env_episodes, wants, strict=True):
        for agent, want in parts.items():
            ep = by_part[(env_episode, agent)]
            where = f"env episode {env_episode}, {agent}"
            obs_space, action_space = env.observation_space(agent), env.action_space(agent)
            assert ep.length == len(want.actions), where
            assert ep.complete == (want.terminations[-1] or want.truncations[-1]), where
            assert_tree_equal(ep.observations, stack(want.observations, obs_space), f"{where}: observations")
            assert_tree_equal(ep.actions, stack(want.actions, action_space), f"{where}: actions")
            assert_tree_equal(ep.rewards, np.array(want.rewards, dtype=np.float64), f"{where}: rewards")
            assert_tree_equal(ep.terminations, np.array(want.terminations), f"{where}: terminations")
            assert_tree_equal(ep.truncations, np.array(want.truncations), f"{where}: truncations")
            assert_tree_equal(ep.data["env_step"], np.array(want.env_steps, dtype=np.int64), f"{where}: env_step")
            if any(want.infos):
                assert_infos_equal(ep.infos, expected_infos(want.infos), f"{where}: infos")
            else:
                assert ep.infos == {}


def record_parallel(make: Callable[[], Any], path: Path, episodes: int, seed: int) -> tuple[list[dict[Any, Want]], Any]:
    env = trajcore.RecordParallelEpisodes(make(), path, metadata={"env": "test"})
    try:
        wants = run_parallel(env, episodes, seed)
    finally:
        env.close()
    # The capture of the recorded run is what the env alone returns for the same seeds.
    alone = run_parallel(make(), episodes, seed)
    for got, want in zip(wants, alone, strict=True):
        assert list(got) == list(want)
        for agent in want:
            assert_tree_equal(got[agent].rewards, want[agent].rewards, f"{agent} rewards")
    return wants, make()


def test_simple_spread_every_agent_value_by_value(tmp_path: Path) -> None:
    def make() -> Any:
        return simple_spread_v3.parallel_env(N=3, max_cycles=15)

    wants, env = record_parallel(make, tmp_path / "spread", episodes=3, seed=0)
    with trajcore.open(tmp_path / "spread") as ds:
        assert ds.agents == ["agent_0", "agent_1", "agent_2"]
        assert ds.metadata == {"env": "test"}
        check_against(ds, wants, env)
        assert all(ep.truncated and ep.length == 15 for ep in ds.episodes)
        # Every reader path works per agent: sampling, sequences, exports.
        one = ds.select(agent="agent_1")
        assert len(one) == 3 and {ep.agent for ep in one} == {"agent_1"}
        batch = one.sample_transitions(64, seed=0)
        assert batch["observations"].shape == (64, 18)
        assert set(np.unique(batch["episode_index"])) <= set(one.indices)
        assert ds.sample_sequences(8, length=5, seed=0)["observations"].shape == (8, 5, 18)
        table = trajcore.to_pandas(ds.select(agent=["agent_0", "agent_2"]))
        assert len(table) == 2 * 3 * 15


def test_simple_tag_heterogeneous_spaces(tmp_path: Path) -> None:
    def make() -> Any:
        return simple_tag_v3.parallel_env(num_good=1, num_adversaries=2, num_obstacles=1, max_cycles=12)

    wants, env = record_parallel(make, tmp_path / "tag", episodes=2, seed=5)
    with trajcore.open(tmp_path / "tag") as ds:
        check_against(ds, wants, env)
        assert sorted(ds.agents) == ["adversary_0", "adversary_1", "agent_0"]
        adversary_shape = env.observation_space("adversary_0").shape
        good_shape = env.observation_space("agent_0").shape
        assert adversary_shape != good_shape
        # One agent's episodes, or agents of the same spaces, sample with their own columns.
        assert ds.select(agent="agent_0").sample_transitions(16, seed=1)["observations"].shape == (16, *good_shape)
        both = ds.select(agent=["adversary_0", "adversary_1"]).sample_transitions(16, seed=1)
        assert both["next_observations"].shape == (16, *adversary_shape)
        for ep in ds.select(agent="agent_0"):
            assert ep.observations.shape == (ep.length + 1, *good_shape)
        with pytest.raises(trajcore.SchemaError, match="recordings disagree"):
            ds.sample_transitions(4, seed=0)  # all agents at once: their columns differ


def test_agents_terminating_at_different_times(tmp_path: Path) -> None:
    def make() -> Any:
        return knights_archers_zombies_v11.parallel_env(max_cycles=200, spawn_delay=3, line_death=True)

    wants, env = record_parallel(make, tmp_path / "kaz", episodes=2, seed=0)
    ends = {agent: len(want.actions) for agent, want in wants[0].items()}
    assert len(set(ends.values())) > 1, ends  # the agents did leave at different steps
    with trajcore.open(tmp_path / "kaz") as ds:
        check_against(ds, wants, env)
        assert all(ep.terminated for ep in ds.episodes)


def test_tictactoe_and_connect_four_turns_and_masks(tmp_path: Path) -> None:
    for name, make in (("ttt", tictactoe_v3.env), ("c4", connect_four_v3.env)):
        env = trajcore.RecordAECEpisodes(make(), tmp_path / name)
        wants = run_aec(env, episodes=3, seed=1)
        env.close()
        alone = run_aec(make(), episodes=3, seed=1)
        for got, want in zip(wants, alone, strict=True):
            for agent in want:
                assert_tree_equal(got[agent].env_steps, want[agent].env_steps, f"{agent} turns")
        with trajcore.open(tmp_path / name) as ds:
            check_against(ds, wants, make())
            assert ds.agents == list(make().possible_agents)  # in the order they first acted
            for env_episode in {ep.env_episode for ep in ds.episodes}:
                eps = [ep for ep in ds.episodes if ep.env_episode == env_episode]
                turns = np.sort(np.concatenate([ep.data["env_step"] for ep in eps]))
                # The agents' turns interleave into the env's: 0, 1, 2, ... one agent each.
                assert_tree_equal(turns, np.arange(len(turns), dtype=np.int64), "turns")
                moves = 9 if name == "ttt" else 7
                assert all(ep.observations["action_mask"].shape == (ep.length + 1, moves) for ep in eps)


class Arrivals(ParallelEnv[str, Any, Any]):
    """A Parallel env whose agents come and go: ``scout`` joins at step 2, ``worker`` leaves at
    step 3 without ending (no observation) and ``leader`` terminates at step 4; their spaces
    differ (a Dict with a Text, an image, a Tuple), their infos nest and come and go."""

    metadata: ClassVar[dict[str, Any]] = {"name": "arrivals_v0", "render_modes": []}

    def __init__(self) -> None:
        self.possible_agents = ["leader", "worker", "scout"]
        self._spaces = {
            "leader": spaces.Dict({"pos": spaces.Box(-1.0, 1.0, (2,), np.float32), "note": spaces.Text(5)}),
            "worker": spaces.Box(0, 255, (4, 4, 3), np.uint8),
            "scout": spaces.Tuple((spaces.Discrete(4), spaces.Box(-1.0, 1.0, (1,), np.float64))),
        }
        self.agents: list[str] = []
        self.t = 0
        self.rng = np.random.default_rng(0)

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self._spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return spaces.Discrete(3) if agent != "scout" else spaces.MultiBinary(2)

    def _obs(self, agent: str) -> Any:
        space = self._spaces[agent]
        space.seed(int(self.rng.integers(2**31)))
        return space.sample()

    def _info(self, agent: str) -> dict[str, Any]:
        info: dict[str, Any] = {"t": self.t}
        if self.t % 2:
            info["detail"] = {"odd": self.t * 1.5, "mask": np.array([self.t % 3 == 0, True])}
        return info

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, Any]:
        self.rng = np.random.default_rng(seed)
        self.t = 0
        self.agents = ["leader", "worker"]
        return {a: self._obs(a) for a in self.agents}, {a: self._info(a) for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[Any, Any, Any, Any, Any]:
        self.t += 1
        if self.t == 2:
            self.agents.append("scout")
        if self.t == 3:
            self.agents.remove("worker")
        live = list(self.agents)
        obs = {a: self._obs(a) for a in live}
        rewards = {a: float(self.rng.normal()) for a in live}
        terms = {a: a == "leader" and self.t == 4 for a in live}
        truncs = {a: self.t == 6 for a in live}
        infos = {a: self._info(a) for a in live}
        self.agents = [a for a in live if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos


def test_agents_joining_late_leaving_early_with_their_own_spaces(tmp_path: Path) -> None:
    env = trajcore.RecordParallelEpisodes(Arrivals(), tmp_path / "arr")
    wants = run_parallel(env, episodes=2, seed=3)
    env.close()
    with trajcore.open(tmp_path / "arr") as ds:
        check_against(ds, wants, Arrivals())
        got = {(ep.agent, ep.length, ep.complete, ep.terminated) for ep in ds.episodes}
        assert got == {("leader", 4, True, True), ("worker", 2, False, False), ("scout", 4, True, False)}
        scout = ds.select(agent="scout")
        assert scout[0].data["env_step"].tolist() == [2, 3, 4, 5]
        assert isinstance(ds.select(agent="leader")[0].observations["note"], list)


def test_options_metadata_discard_and_existing_directories(tmp_path: Path) -> None:
    ended: list[tuple[str, int]] = []

    def on_end(info: Any) -> dict[str, Any]:
        ended.append((info["agent"], info["length"]))
        return {"agent_seen": info["agent"]}

    env = trajcore.RecordParallelEpisodes(
        simple_spread_v3.parallel_env(N=2, max_cycles=5),
        tmp_path / "o",
        episode_metadata=on_end,
        durability="fsync_close",
    )
    env.reset(seed=0)
    env.record("agent_0", logp=-0.5)
    env.set_episode_metadata("agent_1", coach="x")
    while env.agents:
        env.step({a: env.action_space(a).sample() for a in env.agents})
    env.discard("agent_1")
    with pytest.raises(trajcore.InvalidArgumentError, match="has not appeared"):
        env.record("nobody", x=1)
    env.close()
    assert sorted(ended) == [("agent_0", 5), ("agent_1", 5)]
    with trajcore.open(tmp_path / "o") as ds:
        assert [ep.agent for ep in ds.episodes] == ["agent_0"]  # agent_1's was discarded
        ep = ds.episodes[0]
        assert ep.metadata["agent_seen"] == "agent_0" and ep.metadata["env_episode"] == ep.env_episode
        assert ep.data["logp"][0] == -0.5 and ep.data["_logp"].tolist() == [True, False, False, False, False]
    # The same agents with other spaces are refused in that directory, as for a recorder.
    with pytest.raises(trajcore.InvalidArgumentError, match="holds recordings of another observation space"):
        trajcore.RecordParallelEpisodes(simple_spread_v3.parallel_env(N=3, max_cycles=5), tmp_path / "o")
    with pytest.raises(trajcore.InvalidArgumentError, match="render_frames"):
        trajcore.RecordParallelEpisodes(simple_spread_v3.parallel_env(N=2), tmp_path / "p", render_frames=True)


def test_pettingzoo_api_tests_pass_on_the_wrapped_envs(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the API tests warn about the envs' own choices
        parallel = trajcore.RecordParallelEpisodes(simple_spread_v3.parallel_env(N=3, max_cycles=30), tmp_path / "p")
        parallel_api_test(parallel, num_cycles=100)
        parallel.close()
        aec = trajcore.RecordAECEpisodes(tictactoe_v3.env(), tmp_path / "a")
        api_test(aec, num_cycles=100)
        aec.close()
    for name in ("p", "a"):
        with trajcore.open(tmp_path / name) as ds:
            assert ds.num_episodes > 0 and ds.agents
            counts: dict[Any, int] = defaultdict(int)
            for ep in ds.episodes:
                counts[ep.env_episode] += 1
            assert set(counts.values()) == {len(ds.agents)}


def test_tools_show_agents_and_exports_carry_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import subprocess
    import sys

    import minari
    import pyarrow.parquet as pq

    def make() -> Any:
        return simple_tag_v3.parallel_env(num_good=1, num_adversaries=2, num_obstacles=1, max_cycles=4)

    path = tmp_path / "tag"
    wants, _ = record_parallel(make, path, episodes=2, seed=2)
    info = subprocess.run(
        [sys.executable, "-m", "trajcore", "info", str(path), "--json"], capture_output=True, text=True
    )
    report = json.loads(info.stdout)
    assert report["agents"] == {"adversary_0": 2, "adversary_1": 2, "agent_0": 2}
    assert report["agent_spaces"]["agent_0"] == [str(make().observation_space("agent_0")), "Discrete(5)"]
    text = subprocess.run([sys.executable, "-m", "trajcore", "info", str(path)], capture_output=True, text=True).stdout
    assert "agents: 3: adversary_0 (2 episodes)" in text
    ls = subprocess.run([sys.executable, "-m", "trajcore", "ls", str(path), "--json"], capture_output=True, text=True)
    rows = [json.loads(line) for line in ls.stdout.splitlines()]
    assert len(rows) == sum(len(parts) for parts in wants)
    selected = subprocess.run(
        [sys.executable, "-m", "trajcore", "ls", str(path), "--json", "--select", "agent=agent_0,adversary_1"],
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert sorted({json.loads(line)["agent"] for line in selected}) == ["adversary_1", "agent_0"] and len(selected) == 4
    with trajcore.open(path) as ds:
        assert [r["agent"] for r in rows] == [ep.agent for ep in ds.episodes]
        good = ds.select(agent="agent_0")
        steps = sum(ep.length for ep in good)
        frame = trajcore.to_pandas(good)
        assert list(frame.columns[:4]) == ["episode", "env_index", "step", "agent"]
        assert (frame["agent"] == "agent_0").all() and len(frame) == steps
        assert list(trajcore.summaries_frame(ds)["agent"]) == [ep.agent for ep in ds.episodes]
        adversaries = ds.select(agent=["adversary_0", "adversary_1"])
        trajcore.export(adversaries, tmp_path / "adv.parquet")
        table = pq.read_table(tmp_path / "adv.parquet")
        assert table.column("agent").to_pylist() == [ep.agent for ep in adversaries for _ in range(ep.length)]
        trajcore.export(good, tmp_path / "good.csv")
        header, first = (tmp_path / "good.csv").read_text().splitlines()[:2]
        assert header.startswith("episode,env_index,step,agent,obs_0") and first.split(",")[3] == "agent_0"
        trajcore.export(good, tmp_path / "good.jsonl")
        lines = [json.loads(line) for line in (tmp_path / "good.jsonl").read_text().splitlines()]
        assert [line["agent_id"][0] for line in lines] == ["agent_0", "agent_0"]
        # Minari has no multi-agent format: one agent's episodes (or agents of one space) only.
        monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
        with pytest.raises(trajcore.InvalidArgumentError, match="or select one agent"):
            trajcore.export(ds, "agents/tag-v0", format="minari")
        trajcore.export(good, "agents/good-v0", format="minari")
        back = minari.load_dataset("agents/good-v0")
        assert back.total_episodes == 2
        first_episode = next(back.iterate_episodes())
        np.testing.assert_array_equal(first_episode.observations, good[0].observations)


def test_env_episodes_align_agents_on_the_env_steps(tmp_path: Path) -> None:
    env = trajcore.RecordParallelEpisodes(Arrivals(), tmp_path / "arr")
    wants = run_parallel(env, episodes=2, seed=4)
    env.close()
    aec = trajcore.RecordAECEpisodes(tictactoe_v3.env(), tmp_path / "ttt")
    turns = run_aec(aec, episodes=1, seed=0)
    aec.close()
    with trajcore.open(tmp_path / "arr") as ds:
        assert len(ds.env_episodes) == 2
        for joint, parts in zip(ds.env_episodes, wants, strict=True):
            assert sorted(joint.agents) == sorted(parts)
            assert joint.length == 6  # the truncation step of the agents still there
            t = joint.transitions()
            for agent, want in parts.items():
                acted = np.zeros(6, dtype=bool)
                acted[want.env_steps] = True
                assert_tree_equal(t["acted"][agent], acted, agent)
                assert_tree_equal(t["rewards"][agent][acted], np.array(want.rewards), agent)
                assert not t["rewards"][agent][~acted].any()
                space = Arrivals().observation_space(agent)
                got_obs = t["observations"][agent]
                want_obs = stack(want.observations[:-1], space)
                if agent == "leader":
                    assert_tree_equal(got_obs["pos"][acted], want_obs["pos"], agent)
                    assert [got_obs["note"][k] for k in np.flatnonzero(acted)] == want_obs["note"]
                elif agent == "scout":
                    assert_tree_equal(
                        t["next_observations"][agent][1][acted], stack(want.observations[1:], space)[1], agent
                    )
                else:
                    assert_tree_equal(got_obs[acted], want_obs, agent)
            for k, who in enumerate(joint.order):
                assert sorted(who) == sorted(a for a, want in parts.items() if k in want.env_steps)
    with trajcore.open(tmp_path / "ttt") as ds:
        (joint,) = ds.env_episodes
        # AEC: one agent per turn, alternating; the actions at their turns.
        assert all(len(who) == 1 for who in joint.order)
        for agent, want in turns[0].items():
            assert [k for k, who in enumerate(joint.order) if who == [agent]] == want.env_steps
            assert_tree_equal(joint.actions[agent][want.env_steps], np.array(want.actions, dtype=np.int64), agent)


@pytest.mark.usefixtures("ray_local")
def test_ray_data_reads_one_agent_of_agents_with_their_own_spaces(tmp_path: Path) -> None:
    import trajcore.ray

    def make() -> Any:
        return simple_tag_v3.parallel_env(num_good=1, num_adversaries=1, num_obstacles=1, max_cycles=6)

    record_parallel(make, tmp_path / "tag", episodes=2, seed=1)
    with trajcore.open(tmp_path / "tag") as ds:
        good = ds.select(agent="agent_0")
        rows = trajcore.ray.read_transitions(good).take_all()
        assert len(rows) == sum(ep.length for ep in good)
        assert {row["agent"] for row in rows} == {"agent_0"}
        want = np.concatenate([ep.observations[:-1] for ep in good])
        rows.sort(key=lambda row: (row["episode"], row["step"]))
        np.testing.assert_array_equal(np.stack([row["obs"] for row in rows]), want)


def test_joint_transitions_are_drawn_from_the_aligned_env_episodes(tmp_path: Path) -> None:
    env = trajcore.RecordParallelEpisodes(Arrivals(), tmp_path / "arr")
    run_parallel(env, episodes=3, seed=7)
    env.close()
    with trajcore.open(tmp_path / "arr") as ds:
        joint = ds.env_episodes
        batch = joint.sample_transitions(40, seed=3)
        again = joint.sample_transitions(40, seed=3)
        assert_tree_equal(batch["env_step"], again["env_step"], "same seed")
        assert batch["observations"]["worker"].shape == (40, 4, 4, 3)
        assert len(batch["observations"]["leader"]["note"]) == 40
        for i, (k, s) in enumerate(zip(batch["env_episode"].tolist(), batch["env_step"].tolist(), strict=True)):
            t = joint[k].transitions()
            for agent in t["acted"]:
                assert batch["acted"][agent][i] == t["acted"][agent][s]
                assert batch["rewards"][agent][i] == t["rewards"][agent][s]
            assert_tree_equal(batch["actions"]["scout"][i], t["actions"]["scout"][s], "scout action")
        with pytest.raises(trajcore.InvalidArgumentError, match="no env step"):
            EnvEpisodes(ds, []).sample_transitions(1, seed=0)


def test_the_joint_plan_from_plain_values() -> None:
    """Env episodes laid end to end; each agent's step numbers count within its own episodes."""
    steps = {0: np.array([0, 1, 2]), 1: np.array([1, 2]), 2: np.array([0]), 3: np.array([0, 2, 3])}
    listed = [(0, "a", 7), (1, "b", 7), (2, "a", 8), (3, "b", 8), (4, None, 8), (5, "a", None)]
    ids, members = group_env_episodes(listed)
    assert ids == [7, 8] and members == [{"a": 0, "b": 1}, {"a": 2, "b": 3}]
    plan = plan_joint(members, ids, steps, np.array([0, 3, 5, 6, 9, 9]))
    assert plan.agents == ["a", "b"]
    assert plan.lengths.tolist() == [3, 4] and plan.starts.tolist() == [0, 3] and plan.num_rows == 7
    assert plan.episodes["a"].tolist() == [0, 2] and plan.episodes["b"].tolist() == [1, 3]
    # a: episode 0's steps are 0..2, episode 2's step is 3; b: episode 1's 0..1, episode 3's 2..4.
    assert plan.steps["a"].tolist() == [0, 1, 2, 3, -1, -1, -1]
    assert plan.steps["b"].tolist() == [-1, 0, 1, 2, -1, 3, 4]
    assert plan.numbers["a"].tolist() == [0, 1, 2, 5, -1, -1, -1]  # as the dataset numbers them
    assert plan.numbers["b"].tolist() == [-1, 3, 4, 6, -1, 7, 8]
    with pytest.raises(trajcore.InvalidArgumentError, match="one env step twice"):
        plan_joint([{"a": 0}], [7], {0: np.array([0, 0])}, np.array([0]))
    empty = plan_joint([], [], {}, np.zeros(0, dtype=np.int64))
    assert empty.num_rows == 0 and empty.agents == []


def test_the_joint_plan_is_made_once_and_again_after_refresh(tmp_path: Path) -> None:
    def record(episodes: int, seed: int) -> None:
        env = trajcore.RecordParallelEpisodes(simple_spread_v3.parallel_env(max_cycles=4), tmp_path / "spread")
        run_parallel(env, episodes=episodes, seed=seed)
        env.close()

    record(2, seed=0)
    with trajcore.open(tmp_path / "spread") as ds:
        joint = ds.env_episodes
        assert len(joint) == 2 and ds.env_episodes._plan is joint._plan  # planned once
        record(3, seed=5)
        assert len(ds.env_episodes) == 2  # the dataset as opened, until refresh
        assert ds.refresh() == 9
        again = ds.env_episodes
        assert len(again) == 5 and again._plan is not joint._plan
        batch = again.sample_transitions(200, seed=1)
        assert set(batch["env_episode"].tolist()) == set(range(5))
        for i, (k, s) in enumerate(zip(batch["env_episode"].tolist(), batch["env_step"].tolist(), strict=True)):
            t = again[k].transitions()
            for agent in t["acted"]:
                assert batch["acted"][agent][i] == t["acted"][agent][s]
                np.testing.assert_array_equal(batch["observations"][agent][i], t["observations"][agent][s])
                np.testing.assert_array_equal(batch["next_observations"][agent][i], t["next_observations"][agent][s])
                assert batch["rewards"][agent][i] == t["rewards"][agent][s]
