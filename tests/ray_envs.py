"""Envs and callbacks the RLlib test runs inside Ray's EnvRunner actors (which import this module:
the `ray_local` fixture puts the tests directory on their path)."""

from __future__ import annotations

import os
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import trajcore.ray
from ray.rllib.callbacks.callbacks import RLlibCallback


class EchoInfo(gym.Wrapper[Any, Any, Any, Any]):
    """Puts into each info what the env returned and received at that row: ``obs`` (the
    observation returned with it), ``action`` (the action the step got; at the reset, zeros) and
    ``reward``. The recorded infos then say, from the env's side, which values belong on which
    row."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        zero = np.zeros_like(np.asarray(self.action_space.sample()))
        return obs, {**info, "obs": np.array(obs), "action": zero, "reward": 0.0}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        echo = {"obs": np.array(obs), "action": np.array(action), "reward": float(reward)}
        return obs, reward, terminated, truncated, {**info, **echo}


def echo_env(config: Any) -> gym.Env[Any, Any]:
    return EchoInfo(gym.make(config.get("id", "CartPole-v1")))


class Capture(RLlibCallback):  # type: ignore[misc]
    """A user's callback: gives per-step and per-episode custom data through trajcore, and keeps
    RLlib's own account of each episode it ends (id, return and length as RLlib's metrics compute
    them, the observations and actions its chunks hold) in a pickle per episode under `out`."""

    def __init__(self, out: str) -> None:
        super().__init__()
        self.out = out

    def on_episode_step(self, *, episode: Any, **kwargs: Any) -> None:
        obs = np.asarray(episode.get_observations(-1))
        trajcore.ray.record_step(episode, last_obs_sum=float(obs.sum()))
        if episode.t % 2 == 0:  # t: steps so far, over all the episode's chunks
            trajcore.ray.record_step(episode, even=int(episode.t))

    def on_episode_end(self, *, episode: Any, prev_episode_chunks: list[Any], **kwargs: Any) -> None:
        chunks = [*prev_episode_chunks, episode]
        trajcore.ray.set_episode_metadata(episode, chunks=len(chunks), tag="done")
        observations = [np.asarray(chunks[0].get_observations(0))]
        actions = []
        for c in chunks:
            observations += [np.asarray(o) for o in list(c.get_observations())[1:]]
            actions += [np.asarray(a) for a in c.get_actions()]
        account = {
            "id": str(episode.id_),
            "return": sum(c.get_return() for c in chunks),
            "length": sum(len(c) for c in chunks),
            "terminated": bool(episode.is_terminated),
            "truncated": bool(episode.is_truncated),
            "observations": np.stack(observations),
            "actions": np.stack(actions),
        }
        with open(os.path.join(self.out, f"{episode.id_}.pkl"), "wb") as f:
            pickle.dump(account, f)


def echo_multi_agent_env(config: Any) -> Any:
    """`EchoAgents` (imported here: this module is imported by RLlib's actors)."""
    from ray.rllib.env.multi_agent_env import MultiAgentEnv

    class EchoAgents(MultiAgentEnv):  # type: ignore[misc]
        """Two agents with their own observation spaces, ending at different steps ("b" is
        terminated at step 5, "a" truncated at step 8); each info echoes the agent's
        observation, action and reward of that row, as `EchoInfo` does."""

        def __init__(self) -> None:
            super().__init__()
            self.possible_agents = ["a", "b"]
            self.agents = list(self.possible_agents)
            self.observation_spaces = {
                "a": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
                "b": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            }
            self.action_spaces = {"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(3)}
            self.rng = np.random.default_rng(0)
            self.t = 0

        def _obs(self, agent: str) -> Any:
            return self.rng.uniform(-1, 1, self.observation_spaces[agent].shape).astype(np.float32)

        def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, Any]:
            self.rng = np.random.default_rng(seed)
            self.t = 0
            self.agents = list(self.possible_agents)
            obs = {a: self._obs(a) for a in self.agents}
            return obs, {a: {"obs": obs[a], "action": np.int64(0), "reward": 0.0} for a in self.agents}

        def step(self, actions: dict[str, Any]) -> tuple[Any, ...]:
            self.t += 1
            obs, rewards, terms, truncs, infos = {}, {}, {}, {}, {}
            for agent, action in actions.items():
                obs[agent] = self._obs(agent)
                rewards[agent] = float(self.rng.normal())
                terms[agent] = agent == "b" and self.t == 5
                truncs[agent] = agent == "a" and self.t == 8
                infos[agent] = {"obs": obs[agent], "action": np.int64(action), "reward": rewards[agent]}
            self.agents = [a for a in self.agents if not (terms.get(a) or truncs.get(a))]
            terms["__all__"] = False
            truncs["__all__"] = not self.agents
            return obs, rewards, terms, truncs, infos

    return EchoAgents()
