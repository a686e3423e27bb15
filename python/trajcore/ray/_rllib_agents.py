"""RLlib's multi-agent episodes (`MultiAgentEpisode`) recorded by `RecordRLlibEpisodes`: an
episode per agent, written by a `trajcore.Writer` of that agent (one per agent and EnvRunner),
like the PettingZoo recorders' (FORMAT.md, "Agents")."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Protocol

from trajcore.errors import InvalidArgumentError, SchemaError, TrajcoreWarning
from trajcore.ray._identity import process_identity
from trajcore.ray._rllib_episode import RLlibEpisode, policy_of
from trajcore.ray._runner import close_on_stop, runner_metadata
from trajcore.read.multiagent.agents import ENV_EPISODE_KEY
from trajcore.record.manual import Writer
from trajcore.record.session import RecordingOptions

__all__ = ["RLlibAgents"]


class Callback(Protocol):
    """What the writers read of their callback, `trajcore.ray.RecordRLlibEpisodes` (read when used:
    the callback's attributes are the truth)."""

    path: str
    metadata: dict[str, Any]
    options: RecordingOptions
    extra_model_outputs: bool

    def close(self) -> None: ...


class RLlibAgents:
    """The writers of one EnvRunner's multi-agent episodes, one per agent, made at its first episode."""

    def __init__(self, callback: Callback) -> None:
        self._callback = callback
        self.writers: dict[Any, Writer] = {}

    def record(self, pending: Sequence[tuple[list[Any], int]], env_runner: Any, worker: int | None) -> None:
        """Records each agent's part of each finished multi-agent episode, then flushes."""
        for chunks, env_index in pending:
            last = chunks[-1]
            episode_id = str(last.id_)
            agents = list(dict.fromkeys(a for c in chunks for a in c.agent_episodes))
            for agent in agents:
                parts = [c.agent_episodes[agent] for c in chunks if agent in c.agent_episodes]
                parts = [p for p in parts if len(p) or p is parts[0]]  # a chunk where it did not act adds nothing
                ours = {
                    "episode_id": episode_id,
                    "agent_episode_id": str(parts[-1].id_),
                    "module_id": _json_id(last.module_for(agent)),
                    "env_index": env_index,
                    "env_runner": worker,
                }
                try:
                    writer = self._writer(agent, last, env_runner)
                    episode = RLlibEpisode(parts, None, self._callback.extra_model_outputs)
                    writer.set_policy(**policy_of(episode, last.module_for(agent)))
                    _play(writer, episode, {"rllib": ours, ENV_EPISODE_KEY: episode_id})
                except (SchemaError, InvalidArgumentError) as e:  # its values; a failed writer raises
                    warnings.warn(
                        f"trajcore: RLlib episode {episode_id}, agent {agent!r} (EnvRunner {worker}) is not recorded "
                        f"whole: {e}",
                        TrajcoreWarning,
                        stacklevel=3,
                    )
        for writer in self.writers.values():
            writer.flush()

    def _writer(self, agent: Any, episode: Any, env_runner: Any) -> Writer:
        writer = self.writers.get(agent)
        if writer is not None:
            return writer
        observation_space = (episode.observation_space or {}).get(agent)
        action_space = (episode.action_space or {}).get(agent)
        if observation_space is None or action_space is None:
            raise InvalidArgumentError(f"RecordRLlibEpisodes: agent {agent!r} of the RLlib episode has no spaces")
        cb = self._callback
        metadata = {**cb.metadata, "rllib": runner_metadata(env_runner), "ray": process_identity()}
        env = getattr(getattr(env_runner, "config", None), "env", None)
        if not self.writers:
            close_on_stop(env_runner, cb.close)
        writer = self.writers[agent] = Writer(
            cb.path,
            observation_space,
            action_space,
            metadata,
            env_id=env if isinstance(env, str) else None,
            agent=str(agent),
            **cb.options,
        )
        return writer

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()


def _play(writer: Writer, episode: RLlibEpisode, metadata: dict[str, Any]) -> None:
    """Writes one agent's episode; a custom-data value that cannot be recorded is left out with a
    warning naming it (as for single-agent episodes)."""
    writer.reset(episode.observation(0), episode.info(0))
    writer.set_episode_metadata({**episode.metadata, **metadata})
    for t in range(episode.length):
        for name, value in episode.data(t).items():
            try:
                writer.record(**{name: value})
            except SchemaError as e:
                warnings.warn(
                    f"trajcore: RLlib episode {episode.id}, step {t}: custom data {name!r} left out: {e}",
                    TrajcoreWarning,
                    stacklevel=4,
                )
        ended = writer.step(
            episode.action(t),
            episode.observation(t + 1),
            episode.reward(t),
            episode.terminated(t),
            episode.truncated(t),
            episode.info(t + 1),
        )
        if ended:
            return
    writer.end_episode()  # neither terminated nor truncated: an agent RLlib stopped with the episode


def _json_id(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)
