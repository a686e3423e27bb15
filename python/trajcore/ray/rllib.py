"""`RecordRLlibEpisodes`: an RLlib callback (new API stack, `RLlibCallback`) that records every
episode an EnvRunner completes into a trajcore dataset, one recording per EnvRunner.

    config.callbacks([MyCallback, functools.partial(trajcore.ray.RecordRLlibEpisodes, "runs/ppo")])

Each EnvRunner (an actor of its own) replays the episodes it completed into its own recorder at
the end of each ``sample()`` call (``on_sample_end``, so whatever any callback's
``on_episode_end`` added is there), then flushes: every episode RLlib returned is in the files
when ``sample()`` returns. The recorder closes with the EnvRunner (``algo.stop()``).

Recorded per episode: observations and infos (T + 1 rows), the actions the env got, rewards,
terminated/truncated; as custom data (``ep.data``) RLlib's extra model outputs under their RLlib
names (``action_logp``, ``action_dist_inputs``, ``weights_seq_no``, ...), ``module_action`` when
RLlib changed the RLModule's action before the env got it (``normalize_actions`` /
``clip_actions`` on a Box space), and what your callbacks gave with `record_step`; as episode
metadata ``{"rllib": {"episode_id", "env_index", "env_runner"}}`` and what your callbacks gave
with `set_episode_metadata`. Each recording's dataset metadata names the EnvRunner (``"rllib"``:
worker index, evaluation or not, algorithm, env) and its process (``"ray"``: actor id, host,
node, pid, start time).

Observations are the episode's: an env-to-module connector that writes processed observations
back into the episode (``MeanStdFilter``) changes what is recorded. Episodes RLlib abandons
unfinished (an env that failed and was reset, the EnvRunner stopping) are not recorded.

Multi-agent episodes (`MultiAgentEpisode`) are recorded an episode per agent, in a recording
per agent and EnvRunner (its own spaces; ``Episode.agent``): the agent's observations, infos,
actions (as its module computed them: no normalization is undone), rewards and extra model
outputs, with ``Episode.env_episode`` the multi-agent episode's id and the agent's module id in
``ep.metadata["rllib"]["module_id"]``. The flags are RLlib's: once every agent ended, some
terminated and some truncated, it marks each agent's part terminated too. `record_step` and
`set_episode_metadata` are single-agent only, and the env step of each agent action
(``data/env_step`` of the PettingZoo recorders) is not recorded.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Unpack

from gymnasium import spaces
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.spaces.space_utils import clip_action, get_base_struct_from_space, unsquash_action

from trajcore._store import is_store_url
from trajcore.errors import InvalidArgumentError, SchemaError, TrajcoreWarning
from trajcore.ray._identity import process_identity
from trajcore.ray._rllib_agents import RLlibAgents
from trajcore.ray._rllib_episode import RLlibEpisode, policy_of, record_step, set_episode_metadata
from trajcore.ray._runner import close_on_stop, in_evaluation, runner_metadata
from trajcore.record.env_wrapper import RecordEpisodes
from trajcore.record.options import to_json
from trajcore.record.replay import PlaybackEnv, replay
from trajcore.record.session import RecordingOptions

__all__ = ["RecordRLlibEpisodes", "record_step", "set_episode_metadata"]


class RecordRLlibEpisodes(RLlibCallback):  # type: ignore[misc]  # ray has no type stubs
    """Records every episode each EnvRunner completes into the dataset directory `path` (on a
    cluster, a filesystem every node shares, or a store URL, ``s3://bucket/prefix``, with its
    `storage_options` among the options). RLlib makes its callbacks without arguments: give
    it ``functools.partial(RecordRLlibEpisodes, path, ...)``.

    Args:
        path: the dataset directory; each EnvRunner adds its own recording (its own shards).
        metadata: dataset metadata of every recording (JSON-able); ``"rllib"`` and ``"ray"`` are
            added.
        record_evaluation: also record the evaluation EnvRunners' episodes (their recordings say
            ``"evaluation": true``).
        extra_model_outputs: record RLlib's extra model outputs as custom data.
        **options: `trajcore.RecordingOptions` of each EnvRunner's recorder (``max_shard_bytes``,
            ``codecs``, ...; not the callbacks, which RLlib's own replace). ``capacity_steps``
            bounds each EnvRunner's recording on its own (docs/ray.md).

    Raises:
        InvalidArgumentError: no path, a bad option, metadata that is not JSON.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        record_evaluation: bool = True,
        extra_model_outputs: bool = True,
        **options: Unpack[RecordingOptions],
    ) -> None:
        super().__init__()
        if path is None:
            raise InvalidArgumentError(
                "RecordRLlibEpisodes needs the dataset directory: "
                'config.callbacks(functools.partial(RecordRLlibEpisodes, "runs/ppo"))'
            )
        unknown = sorted(set(options) - set(RecordingOptions.__annotations__))
        refused = sorted({"episode_metadata", "step_data", "render_frames"} & set(options))
        if unknown or refused:
            raise InvalidArgumentError(f"RecordRLlibEpisodes: option(s) {unknown + refused} cannot be used here")
        to_json(dict(metadata or {}), "metadata")
        # A store URL stays one (each EnvRunner records into staging and uploads: see
        # `RecordEpisodes`); a directory is made absolute (the EnvRunners' working directories
        # may differ).
        self.path = str(path).rstrip("/") if is_store_url(path) else os.path.abspath(os.fspath(path))
        self.metadata = dict(metadata or {})
        self.record_evaluation = record_evaluation
        self.extra_model_outputs = extra_model_outputs
        self.options: RecordingOptions = options
        self._recorder: RecordEpisodes | None = None
        self._playback: PlaybackEnv | None = None
        self._env_action: Callable[[Any], Any] | None = None
        self._pending: list[tuple[list[Any], int]] = []
        self._agents = RLlibAgents(self)

    # --- RLlib's calls ----------------------------------------------------------------------

    def on_episode_end(
        self,
        *,
        episode: Any,
        prev_episode_chunks: list[Any] | None = None,
        env_runner: Any = None,
        env_index: int = 0,
        **kwargs: Any,
    ) -> None:
        """Keeps the episode's chunks until the end of ``sample()`` (other callbacks may still
        add to the episode)."""
        if not isinstance(episode, SingleAgentEpisode | MultiAgentEpisode):
            raise InvalidArgumentError(
                f"RecordRLlibEpisodes records single- and multi-agent episodes; got a {type(episode).__name__}"
            )
        if not self.record_evaluation and in_evaluation(env_runner):
            return
        # A copy of the list: RLlib drops its own once the episode's metrics are logged.
        self._pending.append(([*(prev_episode_chunks or []), episode], int(env_index)))

    def on_sample_end(self, *, env_runner: Any = None, **kwargs: Any) -> None:
        """Records the episodes completed during this ``sample()`` call and flushes them."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        worker = getattr(env_runner, "worker_index", None)
        if isinstance(pending[0][0][-1], MultiAgentEpisode):
            self._agents.record(pending, env_runner, worker)
            return
        recorder = self._recorder_for(env_runner, pending[0][0][-1])
        for chunks, env_index in pending:
            self._record(recorder, chunks, env_index, worker)
        recorder.flush()

    # --- recording --------------------------------------------------------------------------

    def _recorder_for(self, env_runner: Any, episode: Any) -> RecordEpisodes:
        if self._recorder is not None:
            return self._recorder
        config = getattr(env_runner, "config", None)
        observation_space, action_space = episode.observation_space, episode.action_space
        if observation_space is None or action_space is None:
            raise InvalidArgumentError("RecordRLlibEpisodes: the RLlib episode has no observation or action space")
        self._env_action = _env_action(config, action_space)
        self._playback = PlaybackEnv(observation_space, action_space, _env_spec(config))
        metadata = {**self.metadata, "rllib": runner_metadata(env_runner), "ray": process_identity()}
        self._recorder = RecordEpisodes(self._playback, self.path, metadata, **self.options)
        close_on_stop(env_runner, self.close)
        return self._recorder

    def _record(self, recorder: RecordEpisodes, chunks: list[Any], env_index: int, worker: int | None) -> None:
        """Replays one episode. A value that cannot be recorded is named in a `TrajcoreWarning`
        rather than stopping the training run (the episode is kept up to there, incomplete); a
        recorder that cannot write (`RecorderError`, `TrajcoreIOError`) raises."""
        episode_id = str(chunks[-1].id_)
        try:
            episode = RLlibEpisode(chunks, self._env_action, self.extra_model_outputs)
            ours = {"episode_id": episode_id, "env_index": env_index, "env_runner": worker}
            meta = {**episode.metadata, "rllib": ours}
            # The episode about to be replayed is the next to begin: it carries this policy.
            recorder.set_policy(**policy_of(episode, getattr(chunks[-1], "module_id", None) or DEFAULT_MODULE_ID))
            assert self._playback is not None
            replay(recorder, self._playback, episode, meta, _warn_data(episode_id))
        except (SchemaError, InvalidArgumentError) as e:  # this episode's values; a failed recorder raises
            warnings.warn(
                f"trajcore: RLlib episode {episode_id} (EnvRunner {worker}, sub-env {env_index}) is not recorded "
                f"whole: {e}",
                TrajcoreWarning,
                stacklevel=2,
            )

    def close(self) -> None:
        """Closes this EnvRunner's recorder (writes its index); idempotent. Called when the
        EnvRunner stops."""
        try:
            if self._recorder is not None:
                self._recorder.close()
        finally:
            self._agents.close()


def _warn_data(episode_id: str) -> Callable[[int, str, SchemaError], None]:
    def warn(step: int, name: str, error: SchemaError) -> None:
        warnings.warn(
            f"trajcore: RLlib episode {episode_id}, step {step}: custom data {name!r} left out: {error}",
            TrajcoreWarning,
            stacklevel=4,
        )

    return warn


def _env_spec(config: Any) -> Any:
    """A spec naming the env, so the recording's env id is RLlib's env name (if it is a str)."""
    from gymnasium.envs.registration import EnvSpec

    env = getattr(config, "env", None)
    return EnvSpec(env) if isinstance(env, str) else None


def _env_action(config: Any, action_space: spaces.Space[Any]) -> Callable[[Any], Any] | None:
    """How RLlib's default module-to-env connector (`NormalizeAndClipActions`) turns the action
    an episode stores into the one the env gets: unsquashed (``normalize_actions``, the default)
    or clipped (``clip_actions``) on Box leaves; None where it leaves actions as they are."""
    if config is None or not getattr(config, "add_default_connectors_to_module_to_env_pipeline", True):
        return None
    normalize, clip = bool(getattr(config, "normalize_actions", False)), bool(getattr(config, "clip_actions", False))
    if not (normalize or clip) or not _has_box(action_space):
        return None
    struct = get_base_struct_from_space(action_space)
    if normalize:
        return lambda action: unsquash_action(action, struct)
    return lambda action: clip_action(action, struct)


def _has_box(space: spaces.Space[Any]) -> bool:
    if isinstance(space, spaces.Box):
        return True
    if isinstance(space, spaces.Dict):
        return any(_has_box(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return any(_has_box(s) for s in space.spaces)
    return False
