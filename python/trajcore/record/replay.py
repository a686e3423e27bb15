"""Replaying an episode that already happened into a recorder: the Minari import and the RLlib
callback (`trajcore.ray`) both hand finished episodes to `RecordEpisodes` this way, so they are
checked, split into columns and written exactly like a live env's.

An episode to replay is any object with the rows of `PlayedEpisode`; `PlaybackEnv` is the env
that gives those rows back to the recorder, and `replay` drives one episode through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import gymnasium as gym
from gymnasium import spaces

from trajcore.errors import SchemaError
from trajcore.record.env_wrapper import RecordEpisodes

__all__ = ["PlaybackEnv", "PlayedEpisode", "replay", "value_row"]


def value_row(tree: Any, t: int) -> Any:
    """Row t of a batched (nested) value: a Dict space's dict and a Tuple space's tuple of
    per-leaf arrays (or sequences) kept as such around each leaf's row; bytes decoded to str
    (Minari's HDF5 storage gives str values back as bytes)."""
    if isinstance(tree, Mapping):
        return {k: value_row(v, t) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(value_row(v, t) for v in tree)
    row = tree[t]
    return row.decode("utf-8") if isinstance(row, bytes) else row


class PlayedEpisode(Protocol):
    """One finished episode, row by row: observation and info rows 0 .. T (the reset's, then
    one per step), step rows 0 .. T-1."""

    @property
    def length(self) -> int:
        """T, the number of steps."""
        ...

    def observation(self, t: int) -> Any: ...

    def info(self, t: int) -> dict[str, Any]: ...

    def action(self, t: int) -> Any: ...

    def reward(self, t: int) -> float: ...

    def terminated(self, t: int) -> bool: ...

    def truncated(self, t: int) -> bool: ...

    def data(self, t: int) -> Mapping[str, Any]:
        """The custom data recorded with step t (``record(name=value)`` before that step)."""
        ...


class PlaybackEnv(gym.Env[Any, Any]):
    """An env that plays back one `PlayedEpisode` at a time, so a replay records through
    `RecordEpisodes` like any env (the action given to `step` is the episode's own)."""

    def __init__(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any], spec: Any = None) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.spec = spec  # its id, if any, is stored as the recording's env id
        self._episode: PlayedEpisode | None = None
        self._t = 0

    def load(self, episode: PlayedEpisode) -> None:
        """The episode the next `reset` starts."""
        self._episode = episode

    @property
    def episode(self) -> PlayedEpisode:
        if self._episode is None:
            raise RuntimeError("PlaybackEnv: load() an episode before reset()")
        return self._episode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self._t = 0
        return self.episode.observation(0), self.episode.info(0)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        ep, t = self.episode, self._t
        self._t += 1
        return ep.observation(t + 1), ep.reward(t), ep.terminated(t), ep.truncated(t), ep.info(t + 1)


DataError = Callable[[int, str, SchemaError], None]
"""Called with (step, name, error) when a custom-data value cannot be recorded."""


def replay(
    recorder: RecordEpisodes,
    playback: PlaybackEnv,
    episode: PlayedEpisode,
    metadata: Mapping[str, Any] | None = None,
    on_data_error: DataError | None = None,
    start_lost: bool = False,
) -> None:
    """Records `episode` through `recorder`, which must wrap `playback`.

    Args:
        metadata: merged into the episode's metadata.
        start_lost: the episode is a part whose start is lost (a copy of a trajcore part listed
            on its own): it is recorded incomplete, keeping the flags its last step ends with.
        on_data_error: called instead of raising when a custom-data value cannot be recorded;
            that value is then left out (its row reads as not given) and the episode goes on.

    Raises:
        SchemaError: a value does not fit its column (the episode ends there, incomplete), or a
            custom-data value cannot be recorded and `on_data_error` is None.
    """
    playback.load(episode)
    recorder.reset()
    if start_lost and episode.length > 0:
        recorder._recorder.mark_start_lost(0)
    if metadata:
        recorder.set_episode_metadata(metadata)
    for t in range(episode.length):
        for name, value in episode.data(t).items():
            try:
                recorder.record(**{name: value})
            except SchemaError as e:
                if on_data_error is None:
                    raise
                on_data_error(t, name, e)
        recorder.step(episode.action(t))
