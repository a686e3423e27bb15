"""`RecordEpisodes`: a gymnasium wrapper that records every episode of one env."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Literal, SupportsFloat, TypedDict

import gymnasium as gym

from trajcore import _core
from trajcore._config import Codec, build_config, env_id_of, to_json

__all__ = ["EpisodeInfo", "RecordEpisodes"]


class EpisodeInfo(TypedDict):
    """What an `episode_metadata` callback receives when an episode ends."""

    env_index: int
    length: int
    episode_return: float
    terminated: bool
    truncated: bool
    observation: Any  # the final observation
    info: dict[str, Any]  # the final info


EpisodeMetadataFn = Callable[[EpisodeInfo], Mapping[str, Any] | None]


class RecordEpisodes(gym.Wrapper[Any, Any, Any, Any]):
    """Records every episode of `env` into the shard files of directory `path`.

    Each `step` makes one call into the Rust core, which checks the values against the schema,
    copies them once into a ring buffer and returns; a writer thread compresses and appends.

    Args:
        env: the env to record (its observation and action spaces fix the columns).
        path: directory receiving the shard files (created if missing; recording again into the
            same directory adds shards).
        metadata: JSON-able dataset metadata, read back as `Dataset.metadata`.
        episode_metadata: called when an episode ends with an `EpisodeInfo`; the mapping it
            returns is merged into that episode's metadata.
        step_data: called after every env step with (action, obs, reward, terminated, truncated,
            info); the mapping it returns is recorded as custom per-step data (like `record`).
        max_shard_bytes: a new shard file starts past this size.
        chunk_bytes: target size of a column chunk before it is sealed (None: the core's default).
        flush_interval: seconds after which pending rows are sealed and written even if a chunk
            is not full: a killed process loses at most about this much.
        durability: "flush" (write to the OS per chunk), "fsync_close", "fsync_chunk" or
            "fsync_interval" (with `fsync_interval` seconds).
        zstd_level: default zstd level of every column; None stores columns raw.
        codecs: per-column storage, keyed by column name or name prefix ("obs", "obs/image",
            "action"), "info" (info entries and custom data) or "default", e.g.
            ``{"obs": {"delta": True, "zstd_level": 3}}``.
        block_when_full: when the ring is full, wait (GIL released) for the writer; if False,
            raise `RecorderError` instead.
        ring_bytes: size of the ring buffer between the caller and the writer thread (None: 16 MiB,
            or 64 steps when steps are larger).

    Raises:
        SchemaError: a space cannot be recorded.
        InvalidArgumentError: an option is invalid, or metadata is not JSON.
        TrajcoreIOError: the directory cannot be created or written.
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        path: str | os.PathLike[str],
        metadata: Mapping[str, Any] | None = None,
        *,
        episode_metadata: EpisodeMetadataFn | None = None,
        step_data: Callable[..., Mapping[str, Any]] | None = None,
        max_shard_bytes: int = 1 << 30,
        chunk_bytes: int | None = None,
        flush_interval: float = 1.0,
        durability: str = "flush",
        fsync_interval: float | None = None,
        zstd_level: int | None = 3,
        codecs: Mapping[str, Codec] | None = None,
        block_when_full: bool = True,
        ring_bytes: int | None = None,
    ) -> None:
        super().__init__(env)
        self._closed = True  # until the core exists, close() has nothing of ours to close
        config = build_config(
            env.observation_space,
            env.action_space,
            num_envs=1,
            batched=False,
            autoreset_mode="disabled",
            metadata=dict(metadata) if metadata is not None else None,
            env_id=env_id_of(env),
            max_shard_bytes=max_shard_bytes,
            chunk_bytes=chunk_bytes,
            flush_interval=flush_interval,
            durability=durability,
            fsync_interval=fsync_interval,
            zstd_level=zstd_level,
            codecs=codecs,
            block_when_full=block_when_full,
            ring_bytes=ring_bytes,
        )
        self._core = _core.Recorder(os.fspath(path), config)
        self._closed = False
        self._episode_metadata = episode_metadata
        self._step_data = step_data
        self._length = 0
        self._return = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Resets the env and starts a new episode (a running one is kept as incomplete)."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._core.reset(obs, info)
        self._length = 0
        self._return = 0.0
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the env and records the transition with one call into the core.

        Raises:
            SchemaError: a value does not fit its column. The episode so far is kept as
                incomplete; recording resumes at the next `reset`.
            RecorderError: the recorder is closed, or its writer thread failed.
        """
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._step_data is not None:
            extra = self._step_data(action, obs, reward, terminated, truncated, info)
            for name, value in extra.items():
                self._core.record(name, value)
        if self._episode_metadata is not None:
            self._length += 1
            self._return += float(reward)
            if terminated or truncated:
                # Set before the step that ends the episode reaches the core, so it lands on it.
                self._call_episode_metadata(obs, bool(terminated), bool(truncated), info)
        self._core.step(action, obs, reward, terminated, truncated, info)
        return obs, reward, terminated, truncated, info

    def _call_episode_metadata(self, obs: Any, terminated: bool, truncated: bool, info: dict[str, Any]) -> None:
        assert self._episode_metadata is not None
        extra = self._episode_metadata(
            {
                "env_index": 0,
                "length": self._length,
                "episode_return": self._return,
                "terminated": terminated,
                "truncated": truncated,
                "observation": obs,
                "info": info,
            }
        )
        if extra:
            self._core.set_episode_metadata(0, to_json(dict(extra), "episode metadata"))

    def record(self, **values: Any) -> None:
        """Custom per-step data for the next `step` (column ``data/<name>``, T rows an episode).

        A name not given at some step reads back masked (``ep.data["_<name>"]`` is False there).
        """
        for name, value in values.items():
            self._core.record(name, value)

    def set_episode_metadata(self, metadata: Mapping[str, Any] | None = None, /, **kv: Any) -> None:
        """Merges JSON-able values into the metadata of the running episode."""
        merged = {**(metadata or {}), **kv}
        self._core.set_episode_metadata(0, to_json(merged, "episode metadata"))

    def discard(self) -> None:
        """Drops the running episode: it will not be listed."""
        self._core.discard(0)

    def flush(self) -> None:
        """Waits until everything recorded so far is in the file (readable by `trajcore.open`)."""
        self._core.flush()

    def stats(self) -> dict[str, int]:
        """Counters of the core: steps, episodes, bytes_raw, bytes_written, ring_capacity, ring_waits."""
        return self._core.stats()

    @property
    def shard_paths(self) -> list[str]:
        """The shard files this recorder wrote so far."""
        return self._core.shard_paths

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Writes the running episode (as incomplete), the index and the end record, then closes
        the env. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._core.close()
        finally:
            super().close()

    def __enter__(self) -> RecordEpisodes:
        return self

    def __exit__(self, *args: object) -> Literal[False]:
        self.close()
        return False
