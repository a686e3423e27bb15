"""The benchmark workloads: 16 CartPole sub-envs, 8 sub-envs of (4, 84, 84) uint8 frames (drawn),
and 8 sub-envs of real Atari frame stacks (ALE Breakout), captured once and replayed.

`PixelEnv` draws Atari-like frames: a static shaded background with a few soft-edged objects
moving smoothly (not noise, which no codec can shrink, and not zeros, which every codec shrinks
to nothing). An observation is the last 4 frames, as Atari agents stack them. The frames are
drawn once per class (a period of `PERIOD` frames; each sub-env starts at its own phase), so
stepping costs almost nothing and the benchmark measures the recorder, not the drawing.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

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


def cartpole_buffer(out: str, capacity: int, num_envs: int, fill: bool = True) -> Any:
    """The replay benches' buffer: CartPole x`num_envs` recorded into `out` with
    `capacity_steps=capacity`, seeded, reset and (with `fill`) stepped to 1.25 capacities (it has
    evicted); returned open, the recorder's envs ready for more steps."""
    import trajcore  # the benches that only time peers run without it

    envs = trajcore.RecordVectorEpisodes(cartpole_vector(num_envs), out, capacity_steps=capacity)
    envs.action_space.seed(0)
    envs.reset(seed=0)
    for _ in range(capacity * 5 // 4 // num_envs if fill else 0):
        envs.step(envs.action_space.sample())
    return envs


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


ATARI_ID = "ALE/Breakout-v5"


def atari_missing() -> str | None:
    """Why the Atari workload cannot run here, or None when it can."""
    try:
        import ale_py  # noqa: F401
    except Exception as e:
        why = f"{type(e).__name__}: {e}"
        install = "pip install ale-py opencv-python-headless"
        return f"ale-py is not installed or does not import ({why}); to measure it: {install}"
    return None


def atari_env() -> gym.Env[Any, Any]:
    """ALE Breakout as Atari agents see it: `AtariPreprocessing` (84x84 gray, frame skip 4, no-op
    starts) and `FrameStackObservation(4)`: (4, 84, 84) uint8 observations."""
    import ale_py
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    gym.register_envs(ale_py)
    return FrameStackObservation(AtariPreprocessing(gym.make(ATARI_ID, frameskip=1)), STACK)


def atari_vector(num_envs: int = 8) -> SyncVectorEnv:
    return SyncVectorEnv([atari_env] * num_envs, autoreset_mode=AutoresetMode.NEXT_STEP)


@dataclass
class Stream:
    """What a vector env (NEXT_STEP autoreset) returned from one reset over `steps` steps of the
    recorded actions: everything a recorder sees, to be replayed at no cost (`StreamVectorEnv`)."""

    reset_obs: np.ndarray  # (num_envs, *obs)
    reset_info: dict[str, Any]
    actions: np.ndarray  # (steps, num_envs)
    obs: np.ndarray  # (steps, num_envs, *obs)
    rewards: np.ndarray  # (steps, num_envs)
    terminations: np.ndarray
    truncations: np.ndarray
    infos: list[dict[str, Any]]
    observation_space: spaces.Space[Any]
    action_space: spaces.Space[Any]

    @property
    def steps(self) -> int:
        return len(self.actions)

    @property
    def num_envs(self) -> int:
        return int(self.actions.shape[1])


def capture_stream(env: VectorEnv[Any, Any, Any], steps: int, seed: int = 0) -> Stream:
    """Steps `env` `steps` times from ``reset(seed=seed)`` with seeded random actions."""
    env.action_space.seed(seed)
    reset_obs, reset_info = env.reset(seed=seed)
    actions = np.stack([env.action_space.sample() for _ in range(steps)])
    obs = np.empty((steps, *reset_obs.shape), dtype=reset_obs.dtype)
    rewards, terms, truncs, infos = [], [], [], []
    for t in range(steps):
        o, r, te, tr, info = env.step(actions[t])
        obs[t] = o
        rewards.append(r)
        terms.append(te)
        truncs.append(tr)
        infos.append(info)
    return Stream(
        np.array(reset_obs),
        reset_info,
        actions,
        obs,
        np.stack(rewards),
        np.stack(terms),
        np.stack(truncs),
        infos,
        env.single_observation_space,
        env.single_action_space,
    )


def cache_dir() -> Path:
    """Where captured streams are kept between runs: $TRAJCORE_BENCH_CACHE, else
    ~/.cache/trajcore-bench."""
    return Path(os.environ.get("TRAJCORE_BENCH_CACHE") or Path.home() / ".cache" / "trajcore-bench")


def atari_stream(steps: int, num_envs: int = 8, seed: int = 0) -> Stream:
    """`steps` vector steps of `atari_vector(num_envs)`, captured once (about 7 ms a step here)
    and kept in `cache_dir()` (zstd-like compression of numpy's npz: ~1% of the raw frames)."""
    import ale_py

    path = cache_dir() / f"breakout-{ale_py.__version__}-{gym.__version__}-{num_envs}x{steps}-seed{seed}.npz"
    if path.exists():
        with np.load(path) as z:
            rest = pickle.loads(z["rest"].tobytes())  # our own cache file
            return Stream(z["reset_obs"], actions=z["actions"], obs=z["obs"], rewards=z["rewards"], **rest)
    env = atari_vector(num_envs)
    try:
        stream = capture_stream(env, steps, seed)
    finally:
        env.close()
    rest = {
        "reset_info": stream.reset_info,
        "terminations": stream.terminations,
        "truncations": stream.truncations,
        "infos": stream.infos,
        "observation_space": stream.observation_space,
        "action_space": stream.action_space,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez_compressed(
        buf,
        reset_obs=stream.reset_obs,
        actions=stream.actions,
        obs=stream.obs,
        rewards=stream.rewards,
        rest=np.frombuffer(pickle.dumps(rest), dtype=np.uint8),
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(path)
    return stream


def pixel_stream(steps: int, num_envs: int = 8, seed: int = 0) -> Stream:
    """`steps` vector steps of `pixel_vector(num_envs)` (drawn, not cached: it is cheap)."""
    env = pixel_vector(num_envs)
    try:
        return capture_stream(env, steps, seed)
    finally:
        env.close()


class StreamVectorEnv(VectorEnv[Any, Any, Any]):
    """Replays a `Stream` (NEXT_STEP autoreset), ignoring the actions it is given: an env that
    does no work, so a loop over it measures the recorder."""

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.NEXT_STEP}  # type: ignore[misc]

    def __init__(self, stream: Stream) -> None:
        self.stream, self.t = stream, 0
        self.num_envs = stream.num_envs
        self.single_observation_space = stream.observation_space
        self.single_action_space = stream.action_space
        self.observation_space = gym.vector.utils.batch_space(stream.observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(stream.action_space, self.num_envs)

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        self.t = 0
        return self.stream.reset_obs, self.stream.reset_info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        s, t = self.stream, self.t
        self.t += 1
        return s.obs[t], s.rewards[t], s.terminations[t], s.truncations[t], s.infos[t]


def lane_episodes(stream: Stream, lane: int) -> list[tuple[np.ndarray, list[int]]]:
    """Sub-env `lane`'s episodes in a stream, as (observation rows, stream steps of its
    transitions): NEXT_STEP autoreset, so the step after an episode ends starts the next one."""
    episodes: list[tuple[np.ndarray, list[int]]] = []
    first, steps = stream.reset_obs[lane], list[int]()
    for t in range(stream.steps):
        if steps and (stream.terminations[t - 1, lane] or stream.truncations[t - 1, lane]):
            episodes.append((first, steps))
            first, steps = stream.obs[t, lane], []
            continue
        steps.append(t)
    if steps:
        episodes.append((first, steps))
    return episodes
