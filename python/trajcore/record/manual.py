"""`Writer`: records episodes from any loop (a robot's control loop, a simulator with its own API,
another library's dataset) with the recorders' core: the same checks, options, metadata, custom
data and durability, without a gymnasium env.

    with trajcore.Writer("runs/robot", obs_space, action_space) as w:
        w.add_episode(observations=obs, actions=act, rewards=rew, terminations=term, truncations=trunc)
        w.reset(obs0, info0)                      # or step by step, in a live loop
        w.step(action, obs1, reward, terminated, truncated, info1)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

import numpy as np
from gymnasium import spaces

from trajcore.errors import InvalidArgumentError, SchemaError, TrajcoreError
from trajcore.read.multiagent.agents import ENV_EPISODE_KEY
from trajcore.record.options import RecordedEnv
from trajcore.record.session import Recording, RecordingOptions, _short
from trajcore.record.vector_wrapper import _env_info, _env_item

__all__ = ["Writer"]


class _Frames:
    """The Writer's renderer: ``render()`` gives the frame handed to the call being recorded."""

    render_mode = "rgb_array"

    def __init__(self) -> None:
        self.frame: Any = None
        self.metadata: dict[str, Any] = {}  # no render_fps: the viewer's default speed

    def render(self) -> Any:
        return self.frame


class Writer(Recording):
    """Writes episodes into the shard files of directory `path`, read back by `trajcore.open` like
    a recorder's: whole episodes as arrays (`add_episode`, Minari's names: T+1 observations, T of
    the rest) or one step at a time (`reset`, then `step`).

    Args:
        path: directory receiving the shard files (created if missing; adding shards if not empty).
        observation_space, action_space: the spaces of the values (as rich as the recorders take:
            Box, Discrete, MultiDiscrete, MultiBinary, Text, nested in Dict and Tuple).
        metadata: JSON-able dataset metadata, read back as `Dataset.metadata`.
        env_id: the id stored as the env's (``ds.meta()["user"]["env_id"]``).
        agent: the name of the agent whose episodes these are (``Episode.agent``,
            ``Dataset.select(agent=...)``); several writers, one per agent, may write into one
            directory, each with its own spaces.
        **options: see `trajcore.RecordingOptions`. With ``render_frames=True`` the frames are
            the ``frame`` arguments (T+1 ``frames`` for `add_episode`).

    Raises:
        SchemaError: a space cannot be recorded.
        InvalidArgumentError: an option is invalid, metadata is not a JSON mapping, or `path`
            holds recordings of other spaces (of the same agent; see `allow_mixed_spaces`).
        TrajcoreIOError: the directory cannot be created or written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        metadata: Mapping[str, Any] | None = None,
        *,
        env_id: str | None = None,
        agent: str | None = None,
        _check_existing: bool = True,
        _source: Any = None,
        **options: Unpack[RecordingOptions],
    ) -> None:
        for what, space in (("observation_space", observation_space), ("action_space", action_space)):
            if not isinstance(space, spaces.Space):
                raise InvalidArgumentError(f"{what} must be a gymnasium space, got {type(space).__name__}")
        if agent is not None and not isinstance(agent, str):
            raise InvalidArgumentError(f"agent must be a str (the agent's name), got {type(agent).__name__}")
        self.observation_space = observation_space
        self.action_space = action_space
        self.agent = agent
        self._frames = _Frames()
        recorded = RecordedEnv(
            observation_space,
            action_space,
            num_envs=1,
            batched=False,
            autoreset_mode="disabled",
            metadata=metadata,
            env_id=env_id,
            agent=agent,
        )
        self._start_recording(
            path, recorded, options=options, renderer=self._frames, source=_source, check_existing=_check_existing
        )

    # --- step by step ---------------------------------------------------------------------

    def reset(self, observation: Any, info: Mapping[str, Any] | None = None, *, frame: Any = None) -> None:
        """Starts an episode with its first observation (and info); a running one is kept as
        incomplete.

        Raises:
            SchemaError: a value does not fit its column (nothing is started).
            RecorderError: the writer is closed, or its writer thread failed.
        """
        self._frames.frame = frame
        self._record_reset((observation, dict(info or {})), None)

    def step(
        self,
        action: Any,
        observation: Any,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: Mapping[str, Any] | None = None,
        *,
        data: Mapping[str, Any] | None = None,
        frame: Any = None,
    ) -> bool:
        """Records one step of the running episode: the action taken and what followed it;
        `data`: custom values of this step (as `record`). Returns whether the step ended the
        episode (terminated or truncated): `set_episode_metadata` and `discard` then reach it
        until the next `step` or `reset`.

        Raises:
            SchemaError: a value does not fit its column; the episode so far is kept as
                incomplete, and the next `reset` starts another.
            RecorderError: the writer is closed, or its writer thread failed.
        """
        # The hot path of the multi-agent recorders (a call per agent step): no copy, no wrapper.
        info = {} if info is None else info if isinstance(info, dict) else dict(info)
        recorder = self._native if self._native is not None else self._recorder
        if data:
            for name, value in data.items():
                recorder.record(name, value)
        if self._step_data is not None:
            self._record_step_data(action, observation, reward, terminated, truncated, info)
        ended = recorder.step(
            action, observation, reward, terminated, truncated, info, frame if self._render_frames else None
        )
        if ended is not None:
            self._report_ended(ended, observation, info)
        return bool(terminated or truncated)

    def _final(self, i: int, obs: Any, info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        return obs, info

    def set_episode_metadata(self, metadata: Mapping[str, Any] | None = None, /, **kv: Any) -> None:
        """Merges JSON-able values into the metadata of the running episode, or, between the step
        that ended an episode and the next `step` or `reset`, of that episode.

        Raises:
            InvalidArgumentError: a value is not JSON, no episode runs or just ended, or `flush`
                already wrote the episode that just ended.
        """
        self._set_metadata(0, metadata, kv)

    def discard(self) -> None:
        """Drops the running episode (or the one the last step ended): it will not be listed.

        Raises:
            InvalidArgumentError: no episode runs or just ended, or `flush` already wrote it.
        """
        self._recorder.discard(0)

    def end_episode(self) -> None:
        """Ends the running episode now, as incomplete (neither terminated nor truncated: the
        loop stopped it). Does nothing when none runs."""
        self._recorder.abort(0)

    def close(self) -> None:
        """Writes the running episode (as incomplete), the index and the end record. Idempotent."""
        self._close_all(lambda: None)

    # --- whole episodes -------------------------------------------------------------------

    def add_episode(
        self,
        observations: Any,
        actions: Any,
        rewards: Any,
        terminations: Any,
        truncations: Any,
        infos: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        data: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        frames: Any = None,
        env_episode: Any = None,
    ) -> None:
        """Writes one episode of T steps, given as arrays (Minari's names and shapes).

        Args:
            observations: T+1 rows (the reset's first), nested like the observation space: a
                dict of arrays for a Dict space, a tuple for a Tuple, a list of str for Text.
            actions: T rows, nested like the action space.
            rewards, terminations, truncations: T values each (T >= 1). Only the last step may be
                terminated or truncated; an episode that is neither is stored as incomplete.
            infos: T+1 infos, as a list of dicts or as a dict of arrays of T+1 rows (nested
                dicts nest; a bool ``_key`` beside ``key`` says at which rows it was given).
            data: custom per-step data, name -> T rows (a bool ``_name`` beside says where).
            metadata: JSON-able metadata of this episode (`Episode.metadata`).
            frames: T+1 rendered frames (needs ``render_frames=True``).
            env_episode: the env episode this agent's episode is part of (`Episode.env_episode`).

        Raises:
            InvalidArgumentError: a length is not T+1 (observations, infos, frames) or T (the
                rest; T is what most arguments give, and the one that differs is named), a step
                before the last is terminated or truncated, data or metadata is not a mapping.
                Nothing is written.
            SchemaError: a value does not fit its column (the message names it and the row:
                outside its discrete space, beyond its float type's range, a key the Dict space
                lacks), or rewards are not numbers, flags not bools. Nothing of the episode is
                listed.
        """
        n = _steps(self.observation_space, observations, self.action_space, actions, rewards, terminations, truncations)
        if n == 0:
            # The core lists episodes of at least one step (a reset alone is not an episode).
            raise InvalidArgumentError("add_episode: an episode needs at least one step (rewards is empty)")
        _check_rows(self.observation_space, observations, n + 1, "observations", "T+1")
        _check_rows(self.action_space, actions, n, "actions", "T")
        # Numbers as given: the core casts them into the reward column by its one rule.
        rewards = _numbers(rewards, n, "rewards", "biuf", "numbers")
        ends = [
            _numbers(v, n, name, "biu", "bools").astype(np.bool_)
            for v, name in ((terminations, "terminations"), (truncations, "truncations"))
        ]
        for name, flags, given in (("terminations", ends[0], terminations), ("truncations", ends[1], truncations)):
            if not np.array_equal(flags, np.asarray(given)):
                raise SchemaError(f"add_episode: {name} must be bools (or 0 and 1), got {_short(given)}")
        early = np.flatnonzero(ends[0][:-1] | ends[1][:-1])
        if len(early):
            raise InvalidArgumentError(
                f"add_episode: step {int(early[0])} of {n} is terminated or truncated: an episode ends at its last "
                "step (split the arrays into episodes there)"
            )
        if data is not None and not isinstance(data, Mapping):
            raise InvalidArgumentError(
                f"add_episode: data must be a mapping of name -> T rows, got {type(data).__name__}: {_short(data)}"
            )
        info_at = _rows_of_infos(infos, n + 1)
        data_rows = _data_rows(data or {}, n)
        if frames is not None and _length(frames, "frames") != n + 1:
            raise InvalidArgumentError(
                f"add_episode: frames has {_length(frames, 'frames')} rows, expected T+1 = {n + 1}"
            )
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidArgumentError(f"add_episode: metadata must be a mapping, got {type(metadata).__name__}")

        def frame_at(t: int) -> Any:
            return None if frames is None else frames[t]

        t = -1
        try:
            self.reset(_env_item(observations, 0, self.observation_space), info_at(0), frame=frame_at(0))
            for t in range(n):
                step_data = {name: v for name, (v, mask) in data_rows.items() if mask is None or mask[t]}
                self.step(
                    _env_item(actions, t, self.action_space),
                    _env_item(observations, t + 1, self.observation_space),
                    rewards[t],
                    bool(ends[0][t]),
                    bool(ends[1][t]),
                    info_at(t + 1),
                    data={name: v[t] for name, v in step_data.items()},
                    frame=frame_at(t + 1),
                )
        except TrajcoreError as e:
            self._drop_failed()
            where = "the reset row (observations[0], infos[0])" if t < 0 else f"step {t}"
            raise type(e)(f"add_episode: {where}: {e}") from e
        extra = {**(metadata or {}), **({} if env_episode is None else {ENV_EPISODE_KEY: env_episode})}
        if extra:
            self.set_episode_metadata(extra)
        if not (ends[0][-1] or ends[1][-1]):
            self.end_episode()

    def _drop_failed(self) -> None:
        """Drops the episode a refused value cut short (the core ended it as incomplete)."""
        with contextlib.suppress(InvalidArgumentError):  # refused at the reset: no episode was started
            self._recorder.discard(0)


def _length(value: Any, what: str) -> int:
    try:
        return len(value)
    except TypeError:
        raise InvalidArgumentError(
            f"add_episode: {what} must be a sequence of rows, got {type(value).__name__}"
        ) from None


def _flat(value: Any, n: int, what: str) -> np.ndarray[Any, Any]:
    a = np.asarray(value)
    if a.shape != (n,):
        raise InvalidArgumentError(f"add_episode: {what} must be {n} values (T), got shape {a.shape}")
    return a


def _numbers(value: Any, n: int, what: str, kinds: str, expected: str) -> np.ndarray[Any, Any]:
    """`value` as T values of numpy kinds `kinds` (`expected` says what they are).

    Raises:
        InvalidArgumentError: not T values.
        SchemaError: values of another kind (strings, dicts, complex numbers), naming `what`.
    """
    try:
        a = _flat(value, n, what)
    except (TypeError, ValueError) as e:
        if isinstance(e, TrajcoreError):
            raise
        raise SchemaError(f"add_episode: {what} must be {n} {expected}, got {_short(value)} ({e})") from None
    if a.dtype.kind not in kinds:
        raise SchemaError(f"add_episode: {what} must be {expected}, got {a.dtype} values: {_short(value)}")
    return a


def _steps(
    observation_space: spaces.Space[Any],
    observations: Any,
    action_space: spaces.Space[Any],
    actions: Any,
    rewards: Any,
    terminations: Any,
    truncations: Any,
) -> int:
    """T, the episode's step count, as most of the arguments give it (observations T+1 rows, the
    rest T), so that the one whose length differs is the one named.

    Raises:
        InvalidArgumentError: an argument is not a sequence of rows, or its length differs from
            what the others give (naming it, its length and the others').
    """
    given = {
        "rewards": (_length(rewards, "rewards"), 0),
        "actions": (_leaf_rows(action_space, actions, "actions"), 0),
        "terminations": (_length(terminations, "terminations"), 0),
        "truncations": (_length(truncations, "truncations"), 0),
        "observations": (_leaf_rows(observation_space, observations, "observations"), 1),
    }
    implied = [rows - extra for rows, extra in given.values() if rows is not None]
    n = max(implied, key=implied.count)  # the most common; the first of those on a tie (rewards)
    for name, (rows, extra) in given.items():
        if rows is not None and rows - extra != n:
            agree = [k for k, (r, x) in given.items() if r is not None and r - x == n]
            why = f"T = {n} as {', '.join(agree)} give it"
            if name in ("actions", "observations"):
                count = "T+1" if extra else "T"
                raise InvalidArgumentError(
                    f"add_episode: {name} has {rows} rows, expected {count} = {n + extra} ({why})"
                )
            raise InvalidArgumentError(f"add_episode: {name} must be {n} values ({why}), got {rows}")
    return n


def _leaf_rows(space: spaces.Space[Any], tree: Any, what: str) -> int | None:
    """The row count of the first leaf of `tree` (nested like `space`); None when the nesting
    does not match (`_check_rows` says how)."""
    while isinstance(space, spaces.Dict | spaces.Tuple) and len(space.spaces):
        first: Any = next(iter(space.spaces)) if isinstance(space, spaces.Dict) else 0
        try:
            tree, space = tree[first], space.spaces[first]
        except (KeyError, IndexError, TypeError):
            return None
    if isinstance(space, spaces.Dict | spaces.Tuple):
        return None
    return _length(tree, what)


def _check_rows(space: spaces.Space[Any], tree: Any, n: int, what: str, count: str) -> None:
    """Checks that every leaf of `tree` (nested like `space`) has `n` rows of the space's shape.

    Raises:
        InvalidArgumentError: a leaf does not have `n` rows, or the nesting differs from the space.
        SchemaError: a leaf's rows do not have the space's shape.
    """
    if isinstance(space, spaces.Dict):
        if not isinstance(tree, Mapping):
            raise InvalidArgumentError(
                f"add_episode: {what} must be a dict of arrays (a Dict space), got {type(tree).__name__}"
            )
        missing = [k for k in space.spaces if k not in tree]
        if missing:
            raise InvalidArgumentError(f"add_episode: {what} has no key {missing[0]!r} of the space")
        extra = [k for k in tree if k not in space.spaces]
        if extra:
            # As the recorders refuse it: a key the space lacks would otherwise be dropped.
            raise SchemaError(
                f"add_episode: {what} has the key {extra[0]!r}, which is not in the space (keys "
                f"{', '.join(map(repr, space.spaces))}): add it to the space, or give it as data or infos"
            )
        for key, sub in space.spaces.items():
            _check_rows(sub, tree[key], n, f"{what}[{key!r}]", count)
        return
    if isinstance(space, spaces.Tuple):
        if not isinstance(tree, Sequence) or len(tree) != len(space.spaces):
            raise InvalidArgumentError(
                f"add_episode: {what} must be a tuple of {len(space.spaces)} arrays (a Tuple space)"
            )
        for i, sub in enumerate(space.spaces):
            _check_rows(sub, tree[i], n, f"{what}[{i}]", count)
        return
    rows = _length(tree, what)
    if rows != n:
        raise InvalidArgumentError(f"add_episode: {what} has {rows} rows, expected {count} = {n}")
    if isinstance(space, spaces.Text):
        return
    shape = np.shape(tree)[1:]
    expected = tuple(space.shape) if space.shape is not None else ()
    if shape != expected:
        raise SchemaError(f"add_episode: {what}: rows of shape {shape}, the space's are {expected} ({space})")


def _rows_of_infos(infos: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None, n: int) -> Any:
    """A function of the row giving that row's info dict."""
    if infos is None:
        return lambda t: {}
    if isinstance(infos, Mapping):
        for key, value in _info_leaves(infos, "infos"):
            if _length(value, key) != n:
                raise InvalidArgumentError(f"add_episode: {key} has {len(value)} rows, expected T+1 = {n}")
        return lambda t: _env_info(infos, t)
    if _length(infos, "infos") != n:
        raise InvalidArgumentError(f"add_episode: infos has {len(infos)} dicts, expected T+1 = {n}")
    bad = [i for i, d in enumerate(infos) if not isinstance(d, Mapping)]
    if bad:
        raise InvalidArgumentError(f"add_episode: infos[{bad[0]}] is a {type(infos[bad[0]]).__name__}, not a dict")
    return lambda t: dict(infos[t])


def _info_leaves(tree: Mapping[str, Any], where: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in tree.items():
        name = f"{where}[{key!r}]"
        out.extend(_info_leaves(value, name) if isinstance(value, Mapping) else [(name, value)])
    return out


def _data_rows(data: Mapping[str, Any], n: int) -> dict[str, tuple[Any, Any]]:
    """name -> (T rows, mask or None) of custom data given for a whole episode; a bool ``_name``
    beside ``name`` is its mask (as `Episode.data` gives them)."""
    out: dict[str, tuple[Any, Any]] = {}
    for name, value in data.items():
        if name.startswith("_") and name[1:] in data:
            continue
        if _length(value, f"data[{name!r}]") != n:
            raise InvalidArgumentError(f"add_episode: data[{name!r}] has {len(value)} rows, expected T = {n}")
        mask = data.get("_" + name)
        out[name] = (value, None if mask is None else _flat(mask, n, f"data['_{name}']").astype(np.bool_))
    return out
