"""The benchmark workloads: 16 CartPole sub-envs, and 8 sub-envs of (4, 84, 84) uint8 frames.

`PixelEnv` draws Atari-like frames: a static shaded background with a few soft-edged objects
moving smoothly (not noise, which no codec can shrink, and not zeros, which every codec shrinks
to nothing). An observation is the last 4 frames, as Atari agents stack them. The frames are
drawn once per class (a period of `PERIOD` frames; each sub-env starts at its own phase), so
stepping costs almost nothing and the benchmark measures the recorder, not the drawing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

FRAME = (84, 84)
STACK = 4
PERIOD = 512  # frames before the motion repeats: 14 MiB of frames, far beyond zstd's window
EPISODE = 200  # steps, then truncated


def _draw_frames(period: int) -> np.ndarray:
    h, w = FRAME
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    background = 40 + 50 * (y / h) + 10 * np.sin(x / 9.0)  # shading and a soft stripe pattern
    t = np.arange(period, dtype=np.float32)[:, None, None]
    frames = np.broadcast_to(background, (period, h, w)).copy()
    # Objects on closed paths whose periods divide `period`, so frame `period` is frame 0 again.
    for k, (radius, level, fx, fy) in enumerate([(7.0, 200.0, 1, 2), (5.0, 150.0, 3, 1), (10.0, 90.0, 2, 3)]):
        cx = w / 2 + (w / 2 - 12) * np.sin(2 * np.pi * fx * t / period + k)
        cy = h / 2 + (h / 2 - 12) * np.cos(2 * np.pi * fy * t / period + 2 * k)
        d = np.sqrt((x - cx) ** 2 + (y - cy) ** 2)
        frames += level * np.clip(radius - d, 0.0, 1.5) / 1.5  # soft edge over 1.5 pixels
    # A paddle sliding along the bottom.
    px = (w / 2 + (w / 2 - 10) * np.sin(2 * np.pi * 4 * t / period)).astype(np.int64)
    for i in range(period):
        frames[i, h - 6 : h - 3, max(0, px[i, 0, 0] - 8) : px[i, 0, 0] + 8] = 230
    out: np.ndarray = np.clip(frames, 0, 255).astype(np.uint8)
    return out


class PixelEnv(gym.Env[np.ndarray, np.int64]):
    """(4, 84, 84) uint8 observations of smoothly moving shapes; 4 actions; episodes of `EPISODE`."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}  # type: ignore[misc]
    _stacks: ClassVar[np.ndarray | None] = None

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 255, (STACK, *FRAME), np.uint8)
        self.action_space = spaces.Discrete(4)
        self._t = 0
        self._phase = 0

    @classmethod
    def stacks(cls) -> np.ndarray:
        """Every stacked observation of one period: (PERIOD, 4, 84, 84), 14 MiB, drawn once."""
        if cls._stacks is None:
            frames = _draw_frames(PERIOD)
            idx = (np.arange(PERIOD)[:, None] + np.arange(-STACK + 1, 1)[None, :]) % PERIOD
            cls._stacks = frames[idx]
        return cls._stacks

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._phase = int(self.np_random.integers(PERIOD))
        self._t = 0
        return self.stacks()[self._phase], {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        obs = self.stacks()[(self._phase + self._t) % PERIOD]
        return obs, float(action == self._t % 4), False, self._t >= EPISODE, {}


OBS_BYTES = STACK * FRAME[0] * FRAME[1]  # per sub-env step


def pixel_vector(num_envs: int = 8) -> SyncVectorEnv:
    return SyncVectorEnv([PixelEnv] * num_envs, autoreset_mode=AutoresetMode.NEXT_STEP)


def cartpole_vector(num_envs: int = 16) -> Any:
    return gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync")


class ListVectorEnv:
    """Steps a list of single envs in a Python loop, resetting each one whose episode ended (the
    way loggers that wrap one env each, EnvLogger and Minari, are used on many envs).

    `done(result)` says whether a step result ends the episode; `reset` and `step` are the
    envs' own (gymnasium or dm_env)."""

    def __init__(self, envs: Sequence[Any], done: Callable[[Any], bool], reset: Callable[[Any], Any]) -> None:
        self.envs, self._done, self._reset = list(envs), done, reset
        self.num_envs = len(self.envs)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[list[Any], dict[str, Any]]:
        return [self._reset(e) for e in self.envs], {}

    def step(self, actions: Any) -> tuple[list[Any], None, None, None, dict[str, Any]]:
        out = []
        for env, a in zip(self.envs, actions, strict=True):
            result = env.step(a)
            if self._done(result):
                self._reset(env)
            out.append(result)
        return out, None, None, None, {}

    def close(self) -> None:
        for env in self.envs:
            env.close()


def gym_list(
    make: Callable[[], gym.Env[Any, Any]], num_envs: int, wrap: Callable[[Any, int], Any] | None = None
) -> Any:
    """A `ListVectorEnv` of gymnasium envs, each wrapped by `wrap(env, index)` if given."""
    envs = [make() for _ in range(num_envs)]
    if wrap is not None:
        envs = [wrap(e, i) for i, e in enumerate(envs)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    return ListVectorEnv(envs, lambda r: bool(r[2] or r[3]), lambda e: e.reset()[0])


def dir_bytes(path: Any) -> int:
    """Bytes of every file under `path`."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


# Raw bytes of one CartPole sub-env step as numpy holds the values: observation 4 x float32,
# action int64, reward float64, terminated and truncated bools.
CARTPOLE_STEP_BYTES = 16 + 8 + 8 + 1 + 1
