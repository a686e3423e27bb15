"""Test envs and comparison helpers shared by the test modules."""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from format_decoder import HEADER_LEN
from gymnasium import spaces


class SpaceEnv(gym.Env[Any, Any]):
    """A deterministic (given the reset seed) env over arbitrary spaces.

    Observations are samples of the observation space drawn from the env's RNG; rewards are
    random floats; an episode terminates with probability `p_terminate` per step and is
    truncated after `max_steps`. Infos carry: "step" (int, every row), "even" (float, only on
    even steps), "label" (str, every third step), "nested" ({"a": int, "b": float[2]}, only
    after the first step), plus whatever `extra_info` returns.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        observation_space: spaces.Space[Any] | None = None,
        action_space: spaces.Space[Any] | None = None,
        *,
        max_steps: int = 12,
        p_terminate: float = 0.15,
        infos: bool = True,
        extra_info: Callable[[int], Mapping[str, Any]] | None = None,
    ) -> None:
        if observation_space is None:
            observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.observation_space = observation_space
        self.action_space = action_space if action_space is not None else spaces.Discrete(3)
        self.max_steps = max_steps
        self.p_terminate = p_terminate
        self.with_infos = infos
        self.extra_info = extra_info
        self.t = 0

    def _obs(self, salt: Any = None) -> Any:
        # Derive the observation's RNG from the env RNG so it is reproducible per seed; the
        # action takes part so recorded actions matter for what is observed.
        self.observation_space.seed(int(self.np_random.integers(2**31)) ^ (zlib.crc32(repr(salt).encode()) & 0xFFFF))
        return self.observation_space.sample()

    def _info(self) -> dict[str, Any]:
        info: dict[str, Any] = {}
        if not self.with_infos:
            return dict(self.extra_info(self.t)) if self.extra_info is not None else info
        info["step"] = self.t
        if self.t % 2 == 0:
            info["even"] = float(self.t) / 2 + 0.25
        if self.t % 3 == 0:
            info["label"] = f"s{self.t}"
        if self.t > 0:
            info["nested"] = {"a": self.t * 10, "b": np.array([self.t, -self.t], dtype=np.float32)}
        if self.extra_info is not None:
            info.update(self.extra_info(self.t))
        return info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs("reset"), self._info()

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        obs = self._obs(action)
        reward = float(self.np_random.normal())
        terminated = bool(self.np_random.random() < self.p_terminate)
        truncated = not terminated and self.t >= self.max_steps
        return obs, reward, terminated, truncated, self._info()


def assert_tree_equal(got: Any, want: Any, where: str = "") -> None:
    """Value-by-value equality of nested dicts/tuples of arrays (dtype included)."""
    if isinstance(want, Mapping):
        assert isinstance(got, Mapping), f"{where}: expected a dict, got {type(got).__name__}"
        assert list(got.keys()) == list(want.keys()), f"{where}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_tree_equal(got[k], want[k], f"{where}/{k}")
    elif isinstance(want, tuple):
        assert isinstance(got, tuple), f"{where}: expected a tuple, got {type(got).__name__}"
        assert len(got) == len(want), f"{where}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_tree_equal(g, w, f"{where}/{i}")
    elif isinstance(want, list) and (not want or isinstance(want[0], str)):
        assert list(got) == want, f"{where}: {got!r} != {want!r}"
    else:
        w = np.asarray(want)
        g = np.asarray(got)
        assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != {w.dtype}"
        assert g.shape == w.shape, f"{where}: shape {g.shape} != {w.shape}"
        np.testing.assert_array_equal(g, w, err_msg=where)


def stack(items: list[Any], space: spaces.Space[Any]) -> Any:
    """Stacks per-row values the way trajcore returns a column sequence: arrays for fixed-size
    leaves (in the space's dtype), lists of str for Text, nesting kept."""
    if isinstance(space, spaces.Dict):
        return {k: stack([it[k] for it in items], s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(stack([it[i] for it in items], s) for i, s in enumerate(space.spaces))
    if isinstance(space, spaces.Text):
        return [str(it) for it in items]
    shape = () if isinstance(space, spaces.Discrete) else space.shape
    return np.array(items, dtype=space.dtype).reshape((len(items), *shape))


class Episode:
    """What an env produced for one episode, collected by `run_single`."""

    def __init__(self, obs: Any, info: dict[str, Any]) -> None:
        self.observations = [obs]
        self.infos = [info]
        self.actions: list[Any] = []
        self.rewards: list[float] = []
        self.terminations: list[bool] = []
        self.truncations: list[bool] = []

    @property
    def length(self) -> int:
        return len(self.actions)


def run_single(
    env: gym.Env[Any, Any], episodes: int, seed: int, act: Callable[[int], Any] | None = None
) -> list[Episode]:
    """Runs `episodes` full episodes, returning what the env produced (for comparison)."""
    out = []
    env.action_space.seed(seed)
    obs, info = env.reset(seed=seed)
    for _ in range(episodes):
        ep = Episode(obs, info)
        while True:
            action = act(ep.length) if act is not None else env.action_space.sample()
            obs, reward, terminated, truncated, info = env.step(action)
            ep.actions.append(action)
            ep.observations.append(obs)
            ep.infos.append(info)
            ep.rewards.append(float(reward))
            ep.terminations.append(bool(terminated))
            ep.truncations.append(bool(truncated))
            if terminated or truncated:
                break
        out.append(ep)
        obs, info = env.reset()
    return out


def expected_infos(infos: list[dict[str, Any]]) -> dict[str, Any]:
    """The `ep.infos` trajcore should return for these per-row single-env infos: per key an
    array of len(infos) rows (zeros / "" where missing) and a `_key` mask; nested dicts nested
    with an any-present mask. Keys are in first-seen order."""
    keys: list[str] = []
    for info in infos:
        for k in info:
            if k not in keys:
                keys.append(k)
    out: dict[str, Any] = {}
    for k in keys:
        present = np.array([k in info for info in infos])
        values = [info.get(k) for info in infos]
        first = next(v for v in values if v is not None)
        if isinstance(first, dict):
            out[k] = expected_infos([v if v is not None else {} for v in values])
        elif isinstance(first, str):
            out[k] = [v if v is not None else "" for v in values]
        else:
            arr = np.asarray(first)
            dtype = {bool: np.bool_, int: np.int64, float: np.float64}.get(type(first), arr.dtype)
            out[k] = np.array([v if v is not None else np.zeros_like(arr) for v in values], dtype=dtype)
        out["_" + k] = present
    return out


def assert_infos_equal(got: Mapping[str, Any], want: Mapping[str, Any], where: str = "infos") -> None:
    """Compares infos key by key, ignoring key order (columns may come back in another order)."""
    assert sorted(got) == sorted(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
    for k in want:
        if isinstance(want[k], Mapping):
            assert_infos_equal(got[k], want[k], f"{where}/{k}")
        else:
            assert_tree_equal(got[k], want[k], f"{where}/{k}")


class StartTogether(SpaceEnv):
    """A `SpaceEnv` whose first reset waits (at most a minute) until `parties` processes reached
    theirs, each leaving a file in `meeting`: processes started by Ray at different times then
    step at the same time, however loaded the machine. The values are `SpaceEnv`'s."""

    def __init__(self, meeting: str, parties: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._meeting = meeting
        self._parties = parties
        self._met = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if not self._met:
            self._met = True
            open(os.path.join(self._meeting, str(os.getpid())), "w").close()
            deadline = time.monotonic() + 60
            while len(os.listdir(self._meeting)) < self._parties and time.monotonic() < deadline:
                time.sleep(0.01)
        return super().reset(seed=seed, options=options)


def a_shard_started(directory: Path) -> bool:
    """Whether a shard file in `directory` has its header written (the writer creates the file,
    then writes its header: a directory whose only file has none yet holds no shard)."""
    for path in directory.glob("*.trj") if directory.exists() else ():
        try:
            if path.stat().st_size >= HEADER_LEN:
                return True
        except FileNotFoundError:  # replaced by its compaction just now
            continue
    return False
