"""`RecordEpisodes`: a gymnasium wrapper that records every episode of one env."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, SupportsFloat, Unpack

import gymnasium as gym

from trajcore.record.options import RecordedEnv, env_id_of
from trajcore.record.session import EpisodeInfo, Recording, RecordingOptions

__all__ = ["EpisodeInfo", "RecordEpisodes"]


class RecordEpisodes(Recording, gym.Wrapper[Any, Any, Any, Any]):
    """Records every episode of `env` into the shard files of directory `path`.

    Each `step` makes one call into the Rust core, which checks the values against the schema,
    copies them once into a ring buffer and returns; a writer thread compresses and appends.

    Args:
        env: the env to record (its observation and action spaces fix the columns).
        path: directory receiving the shard files (created if missing; recording again into the
            same directory adds shards).
        metadata: JSON-able dataset metadata (a mapping), read back as `Dataset.metadata`.
        **options: see `trajcore.RecordingOptions` (callbacks, shard and chunk sizes, durability,
            codecs, ring size).

    Raises:
        SchemaError: a space cannot be recorded.
        InvalidArgumentError: an option is invalid, metadata is not a JSON mapping, `path`
            holds recordings of another env (see `allow_mixed_spaces`), or ``render_frames=True``
            for an env whose ``render_mode`` is not ``"rgb_array"``.
        TrajcoreIOError: the directory cannot be created or written.
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        path: str | os.PathLike[str],
        metadata: Mapping[str, Any] | None = None,
        **options: Unpack[RecordingOptions],
    ) -> None:
        super().__init__(env)
        recorded = RecordedEnv(
            env.observation_space,
            env.action_space,
            num_envs=1,
            batched=False,
            autoreset_mode="disabled",
            metadata=metadata,
            env_id=env_id_of(env),
        )
        self._start_recording(
            path,
            recorded,
            options=options,
            renderer=env,
            source=env,
        )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Resets the env and starts a new episode (a running one is kept as incomplete)."""
        return self._record_reset(self.env.reset(seed=seed, options=options), None, seed, options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the env and records the transition with one call into the core.

        Raises:
            SchemaError: a value does not fit its column. The episode so far is kept as
                incomplete; recording resumes at the next `reset`.
            RecorderError: the recorder is closed, or its writer thread failed (or, with
                `block_when_full=False`, the ring is full: the episode ends there, incomplete).
        """
        return self._record_step(action, self.env.step(action))

    def _final(self, i: int, obs: Any, info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The final observation and info of the episode the step that returned them ended."""
        return obs, info

    def set_episode_metadata(self, metadata: Mapping[str, Any] | None = None, /, **kv: Any) -> None:
        """Merges JSON-able values into the metadata of the running episode, or, between the step
        that ended an episode and the next `step` or `reset`, of the episode that just ended.

        Raises:
            InvalidArgumentError: a value is not JSON, no episode runs or just ended, or `flush`
                already wrote the episode that just ended.
        """
        self._set_metadata(0, metadata, kv)

    def discard(self) -> None:
        """Drops the running episode, or, between the step that ended an episode and the next
        `step` or `reset`, the episode that just ended: it will not be listed.

        Raises:
            InvalidArgumentError: no episode runs or just ended, or `flush` already wrote the
                episode that just ended.
        """
        self._recorder.discard(0)

    def close(self) -> None:
        """Writes the running episode (as incomplete), the index and the end record, then closes
        the env. Idempotent."""
        self._close_all(super().close)
