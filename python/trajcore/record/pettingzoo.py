"""Recording PettingZoo envs: `RecordParallelEpisodes` (the Parallel API) and `RecordAECEpisodes`
(AEC: agents acting in turn). Needs ``pettingzoo``.

Each agent's part of an env episode is an episode of the dataset, written by a `trajcore.Writer`
of that agent (one recording per agent, with the agent's own spaces; FORMAT.md, "Agents"):
``Episode.agent`` names the agent, ``Episode.env_episode`` is the id every agent of one env
episode shares, and ``ep.data["env_step"]`` says at which env step (Parallel) or turn (AEC,
counted over every agent's turns) each of the agent's actions was taken: the turn order.

    env = trajcore.RecordParallelEpisodes(simple_spread_v3.parallel_env(), "runs/spread")
    with trajcore.open("runs/spread") as ds:
        ds.agents                                   # ['agent_0', 'agent_1', 'agent_2']
        ds.select(agent="agent_0").sample_transitions(256, seed=0)
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import Any, Unpack

from pettingzoo.utils.env import AECEnv, ParallelEnv
from pettingzoo.utils.wrappers import BaseParallelWrapper, BaseWrapper

from trajcore._store import is_store_url, recover_store
from trajcore.errors import InvalidArgumentError
from trajcore.read.multiagent.agents import ENV_EPISODE_KEY, ENV_STEP
from trajcore.record.manual import Writer
from trajcore.record.provenance import policy_metadata, reset_metadata
from trajcore.record.session import RecordingOptions, check_existing_recordings

__all__ = ["RecordAECEpisodes", "RecordParallelEpisodes"]


class _AgentWriters:
    """The writers of a multi-agent recording, one per agent, each made when its agent first
    appears; the agents' running episodes and the env episode they belong to."""

    def __init__(self, env: Any, path: str | os.PathLike[str], metadata: Any, options: RecordingOptions) -> None:
        if options.get("render_frames"):
            raise InvalidArgumentError("render_frames is not supported by the multi-agent recorders (yet)")
        if is_store_url(path) and options.get("capacity_steps") is not None:
            # One recorder per agent, each counting and evicting its agent's shards only, with its
            # own eviction log object. What a killed recorder left is made into shards now, before
            # any agent's recorder writes segments there (they start as their agents appear).
            recover_store(os.fspath(path), options.get("storage_options"), skip_live=True)
        self._env = env
        self._path = path
        self._metadata = metadata
        self._options = options
        self._env_id = (getattr(env, "metadata", None) or {}).get("name")
        self.writers: dict[Any, Writer] = {}
        self.running: set[Any] = set()
        self.started: set[Any] = set()  # the agents whose episode of this env episode started
        self._session = uuid.uuid4().hex[:12]
        self._count = -1
        self.env_episode: str | None = None
        self.at = 0  # the env step (Parallel) or turn (AEC) of the env episode: ``ep.data["env_step"]``
        self.pending: dict[Any, tuple[Any, int]] = {}  # AEC: each agent's action and its turn, awaiting its outcome
        self._reset: tuple[Any, Any] = (None, None)  # the seed and options of the env episode's reset
        self._policy: dict[str, Any] | None = None  # what set_policy gave, for agents appearing later
        allow_mixed = bool(options.get("allow_mixed_spaces", False))
        for agent in getattr(env, "possible_agents", None) or []:
            # Each agent's spaces against that agent's recordings already in `path`.
            check_existing_recordings(
                path, env.observation_space(agent), env.action_space(agent), allow_mixed=allow_mixed, agent=str(agent)
            )

    def writer(self, agent: Any) -> Writer:
        w = self.writers.get(agent)
        if w is None:
            options: dict[str, Any] = dict(self._options)
            callback = options.get("episode_metadata")
            if callback is not None:
                if not callable(callback):
                    raise InvalidArgumentError(f"episode_metadata must be callable, got {type(callback).__name__}")
                # The callback gets the agent's name beside the `EpisodeInfo` fields.
                options["episode_metadata"] = lambda episode: callback({**episode, "agent": agent})
            w = Writer(
                self._path,
                self._env.observation_space(agent),
                self._env.action_space(agent),
                self._metadata,
                env_id=self._env_id,
                agent=str(agent),
                _check_existing=False,  # checked for every possible agent at construction
                _source=self._env,
                **options,
            )
            if self._policy is not None:
                w.set_policy(**self._policy)
            self.writers[agent] = w
        return w

    def new_env_episode(self, seed: Any = None, options: Mapping[str, Any] | None = None) -> None:
        """Ends the agents' running episodes (incomplete) and starts the next env episode, that a
        reset given `seed` and `options` started."""
        self._reset = (seed, options)
        for agent in self.running:
            self.writers[agent].end_episode()
        self.running.clear()
        self.started.clear()
        self._count += 1
        self.env_episode = f"{self._session}-{self._count}"
        self.at = 0
        self.pending.clear()

    def start(self, agent: Any, obs: Any, info: Mapping[str, Any] | None) -> None:
        w = self.writer(agent)
        w.reset(obs, info)
        seeds = reset_metadata(*self._reset, 0, 1) if w._record_seeds else {}
        w.set_episode_metadata({ENV_EPISODE_KEY: self.env_episode, **seeds})
        self.running.add(agent)
        self.started.add(agent)

    def step(self, agent: Any, action: Any, at: int, *step: Any) -> None:
        """Records the agent's step (action taken at env step or turn `at`, then obs, reward,
        terminated, truncated, info); an ended episode leaves the running ones."""
        if self.writers[agent].step(action, *step, data={ENV_STEP: at}):
            self.running.discard(agent)

    def set_policy(self, agent: Any, policy: dict[str, Any]) -> None:
        """Gives the episodes begun from now on the policy (of one agent, or every agent with
        `agent` None: also those that appear later)."""
        if agent is None:
            self._policy = policy
            for w in self.writers.values():
                w.set_policy(**policy)
        else:
            self.writer(agent).set_policy(**policy)

    def end(self, agent: Any) -> None:
        """Ends the agent's running episode as incomplete (it left without ending it)."""
        self.writers[agent].end_episode()
        self.running.discard(agent)


class _MultiAgentRecording:
    """What both recorders offer beside the env's API: custom data, metadata, discard, flush,
    stats and close, per agent. Its constructor is both recorders': the PettingZoo wrapper after it
    in the MRO wraps `env`."""

    env: Any  # the env recorded (the PettingZoo wrapper's)

    def __init__(
        self,
        env: ParallelEnv | AECEnv,
        path: str | os.PathLike[str],
        metadata: Mapping[str, Any] | None = None,
        **options: Unpack[RecordingOptions],
    ) -> None:
        super().__init__(env)  # type: ignore[call-arg]  # the PettingZoo wrapper's
        self._rec = _AgentWriters(env, path, metadata, options)

    def _writer(self, agent: Any) -> Writer:
        try:
            return self._rec.writers[agent]
        except KeyError:
            raise InvalidArgumentError(f"agent {agent!r} has not appeared in the env yet") from None

    def record(self, agent: Any, **values: Any) -> None:
        """Custom per-step data of `agent` for its next step (column ``data/<name>``)."""
        self._writer(agent).record(**values)

    def set_episode_metadata(self, agent: Any, metadata: Mapping[str, Any] | None = None, /, **kv: Any) -> None:
        """Merges JSON-able values into the metadata of `agent`'s running episode (or of the one
        its last step ended, until its next step)."""
        self._writer(agent).set_episode_metadata(metadata, **kv)

    def set_policy(
        self,
        name: str | None = None,
        step: int | None = None,
        checkpoint: Any = None,
        *,
        agent: Any = None,
        **extra: Any,
    ) -> None:
        """Names the policy acting from now on (see `RecordEpisodes.set_policy`): of `agent`, or
        of every agent (`agent` None, the default, agents that appear later included). The
        episodes each agent begins after this call carry it; running ones keep theirs.

        Raises:
            InvalidArgumentError: a value of the wrong type, or not JSON.
        """
        policy_metadata(name, step, checkpoint, extra)  # checks the values once, for every agent
        self._rec.set_policy(agent, {"name": name, "step": step, "checkpoint": checkpoint, **extra})

    def discard(self, agent: Any) -> None:
        """Drops `agent`'s running episode (or the one its last step ended): it is not listed."""
        self._writer(agent).discard()
        self._rec.running.discard(agent)

    def flush(self) -> None:
        """Waits until everything recorded so far is in the files."""
        for w in self._rec.writers.values():
            w.flush()

    def stats(self) -> dict[Any, dict[str, Any]]:
        """Each agent's writer's counters (see `RecordEpisodes.stats`), by agent."""
        return {agent: w.stats() for agent, w in self._rec.writers.items()}

    @property
    def shard_paths(self) -> list[str]:
        return [p for w in self._rec.writers.values() for p in w.shard_paths]

    def close(self) -> None:
        """Writes the running episodes (incomplete), closes every writer, then the env."""
        try:
            errors = []
            for w in self._rec.writers.values():
                try:
                    w.close()
                except Exception as e:  # every writer is closed; the first failure is raised
                    errors.append(e)
            if errors:
                raise errors[0]
        finally:
            self.env.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()


class RecordParallelEpisodes(_MultiAgentRecording, BaseParallelWrapper):  # type: ignore[misc]  # untyped base
    """Records every agent's episodes of a PettingZoo Parallel env into directory `path`.

    An agent's episode starts at the reset (or at the first step that returns its observation,
    for an agent that joins later) and ends at its step that is terminated or truncated; an
    agent that leaves without either, or is still running at the next reset or at `close`, ends
    incomplete. Infos are each agent's own; action masks are recorded where the env puts them
    (in the observation or the info).

    Args:
        env: the Parallel env (its ``observation_space(agent)`` and ``action_space(agent)``).
        path: directory receiving the shard files.
        metadata: JSON-able dataset metadata.
        **options: see `trajcore.RecordingOptions` (``render_frames`` is not supported here);
            ``episode_metadata`` also gets ``"agent"``, ``step_data`` is called per agent step.

    Raises:
        SchemaError: a space cannot be recorded. InvalidArgumentError: an option is invalid,
            or `path` holds recordings of an agent with other spaces.
    """

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, Any]:
        observations, infos = self.env.reset(seed=seed, options=options)
        self._rec.new_env_episode(seed, options)
        for agent, obs in observations.items():
            self._rec.start(agent, obs, infos.get(agent))
        return observations, infos

    def step(self, actions: dict[Any, Any]) -> tuple[Any, Any, Any, Any, Any]:
        result: tuple[Any, Any, Any, Any, Any] = self.env.step(actions)
        observations, rewards, terminations, truncations, infos = result
        rec = self._rec
        running, writers, data = rec.running, rec.writers, {ENV_STEP: rec.at}
        for agent, action in actions.items():  # a call per agent step: kept lean
            if agent not in running:
                continue  # no episode of it runs (it ended, or never started): nothing to record
            if agent not in observations:
                rec.end(agent)  # left without an observation: its episode ends here, incomplete
                continue
            ended = writers[agent].step(
                action,
                observations[agent],
                rewards[agent],
                terminations[agent],
                truncations[agent],
                infos.get(agent),
                data=data,
            )
            if ended:
                running.discard(agent)
        for agent, obs in observations.items():
            if agent not in rec.started:
                rec.start(agent, obs, infos.get(agent))  # joined at this step
        rec.at += 1
        return result


class RecordAECEpisodes(_MultiAgentRecording, BaseWrapper):  # type: ignore[misc]  # untyped base
    """Records every agent's episodes of a PettingZoo AEC env (agents acting in turn) into
    directory `path`.

    An agent's step is what lies between two of its turns: the action it took at the first, and
    what `last()` gave it at the next (observation, reward accumulated since, terminated,
    truncated, info). Its episode starts at its first turn and ends at the turn that finds it
    terminated or truncated (the one that takes the ``None`` action). ``ep.data["env_step"]``
    is the turn of each action, counted over every agent's turns of the env episode: merging
    the agents' episodes by it gives the order in which they acted.

    Args and Raises: as `RecordParallelEpisodes`.
    """

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.env.reset(seed=seed, options=options)
        self._rec.new_env_episode(seed, options)

    def step(self, action: Any) -> None:
        agent = self.env.agent_selection
        obs, reward, terminated, truncated, info = self.env.last()
        rec = self._rec
        pending = rec.pending.pop(agent, None)
        if pending is not None and agent in rec.running:
            rec.step(agent, pending[0], pending[1], obs, reward, terminated, truncated, info)
        elif agent not in rec.started and not (terminated or truncated):
            rec.start(agent, obs, info)  # its first turn of this env episode
        if agent in rec.running and action is not None:
            rec.pending[agent] = (action, rec.at)
        rec.at += 1
        self.env.step(action)
