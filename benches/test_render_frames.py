"""Rendered frames (``render_frames=True``): (1) what recording them costs against the render
call itself, on real envs (CartPole, Atari Breakout, MuJoCo Hopper); (2) how frames are best
stored (zstd alone or the delta filter first; 1 MiB or 4 MiB chunks), on the frames those envs
render, replayed by an env that does no work.

(1) Four loops of the same env and actions, in interleaved segments, each segment from a fresh
env (and recorder) to its close (everything written):
  plain   env.step only                      render  env.step + env.render()
  record  RecordEpisodes(render_frames=False) frames  RecordEpisodes(render_frames=True)
The render call costs (render - plain) per step; recording the frame costs (frames - record)
beyond recording the rest, which includes the render call, so the frames' own overhead is
(frames - record) - (render - plain), reported as a fraction of the render call.

(2) Ratio = raw frame bytes / stored bytes (from the index); compress MB/s = raw frame bytes /
seconds the writer spent compressing (from the timelog, `stats()["timelog"]`).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces

# (name, make, steps per segment, segments): MuJoCo renders in software here (EGL on Mesa's
# llvmpipe, about 0.2 s a frame), so it gets few steps.
ENVS: list[tuple[str, Callable[[], gym.Env[Any, Any]], int, int]] = []


def _atari(**kwargs: Any) -> gym.Env[Any, Any]:
    import ale_py

    gym.register_envs(ale_py)
    return gym.make("ALE/Breakout-v5", render_mode="rgb_array", **kwargs)


ENVS = [
    ("CartPole-v1 (600x400)", lambda: gym.make("CartPole-v1", render_mode="rgb_array"), 400, 9),
    ("ALE/Breakout-v5 (210x160)", _atari, 2000, 9),
    ("Hopper-v5 (480x480)", lambda: gym.make("Hopper-v5", render_mode="rgb_array"), 24, 5),
]


def _segment(make: Callable[[], gym.Env[Any, Any]], steps: int, kind: str, out: Path) -> float:
    """Seconds per step of one segment: a fresh env (wrapped for the recording kinds), then timed
    from its reset through `steps` steps to its close (for a recorder: everything written)."""
    env = make()
    if kind in ("record", "frames"):
        env = trajcore.RecordEpisodes(env, out, render_frames=kind == "frames")
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(steps)]
    render = kind == "render"
    start = time.perf_counter()
    env.reset(seed=0)
    if render:
        env.render()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(a)
        if render:
            env.render()
        if terminated or truncated:
            env.reset()
            if render:
                env.render()
    env.close()
    return (time.perf_counter() - start) / steps


@pytest.mark.parametrize(("name", "make", "steps", "segments"), ENVS, ids=[e[0].split()[0] for e in ENVS])
def test_render_frames_overhead(
    benchmark: Any,
    report: list[dict[str, Any]],
    tmp_path: Path,
    name: str,
    make: Callable[[], gym.Env[Any, Any]],
    steps: int,
    segments: int,
) -> None:
    kinds = ("plain", "render", "record", "frames")

    def run() -> dict[str, list[float]]:
        times: dict[str, list[float]] = {k: [] for k in kinds}
        for s in range(segments):
            for kind in kinds if s % 2 == 0 else reversed(kinds):
                out = tmp_path / f"{kind}-{s}"
                times[kind].append(_segment(make, steps, kind, out))
                shutil.rmtree(out, ignore_errors=True)
        return times

    _segment(make, 5, "frames", tmp_path / "warm")  # imports, first render context
    times = benchmark.pedantic(run, rounds=1, iterations=1)
    # Differences within each round of segments (adjacent in time), then their median.
    rounds = list(zip(*(times[k] for k in kinds), strict=True))
    render_cost = statistics.median(r - p for p, r, _, _ in rounds)
    frames_cost = statistics.median((f - rec) - (r - p) for p, r, rec, f in rounds)
    spread = sorted((f - rec) - (r - p) for p, r, rec, f in rounds)
    row = {
        "group": "render_frames overhead",
        "name": name,
        "step_ms": statistics.median(times["plain"]) * 1e3,
        "render_ms": render_cost * 1e3,
        "record_no_frames_ms": statistics.median(rec - p for p, _, rec, _ in rounds) * 1e3,
        "frames_extra_ms": frames_cost * 1e3,
        "frames_extra_vs_render": frames_cost / render_cost,
        "frames_extra_spread_ms": f"{spread[0] * 1e3:.3f}..{spread[-1] * 1e3:.3f}",
        "with_frames_vs_step_and_render": statistics.median(f / r for _, r, _, f in rounds),
    }
    benchmark.extra_info.update(row)
    report.append(row)


class _FrameReplay(gym.Env[Any, Any]):
    """Steps cost nothing; render() gives the captured frames in order (episodes of 500)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"]}
    observation_space = spaces.Discrete(2)
    action_space = spaces.Discrete(2)

    def __init__(self, frames: np.ndarray) -> None:
        self.render_mode = "rgb_array"
        self.frames, self.i, self.t = frames, 0, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.t = 0
        return 0, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.i += 1
        self.t += 1
        return 0, 0.0, False, self.t >= 500, {}

    def render(self) -> np.ndarray:
        return self.frames[self.i % len(self.frames)]  # type: ignore[no-any-return]


def _capture(make: Callable[[], gym.Env[Any, Any]], n: int) -> np.ndarray:
    env = make()
    env.action_space.seed(0)
    env.reset(seed=0)
    frames = [env.render()]
    for _ in range(n - 1):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
        frames.append(env.render())
    env.close()
    return np.stack(frames)


CODECS = {
    "zstd 3, 1 MiB chunks": {"delta": False, "zstd_level": 3, "chunk_bytes": 1 << 20},
    "delta + zstd 3, 1 MiB chunks": {"delta": True, "zstd_level": 3, "chunk_bytes": 1 << 20},
    "zstd 3, 4 MiB chunks": {"delta": False, "zstd_level": 3, "chunk_bytes": 4 << 20},
    "delta + zstd 3, 4 MiB chunks (default)": {"delta": True, "zstd_level": 3, "chunk_bytes": 4 << 20},
}
FRAMES = [(ENVS[0][0], ENVS[0][1], 300), (ENVS[1][0], ENVS[1][1], 1000), (ENVS[2][0], ENVS[2][1], 48)]


@pytest.mark.parametrize(("name", "make", "n"), FRAMES, ids=[e[0].split()[0] for e in FRAMES])
def test_frame_codecs(benchmark: Any, report: list[dict[str, Any]], name: str, make: Any, n: int) -> None:
    frames = _capture(make, n)

    def run() -> list[dict[str, Any]]:
        rows = []
        for codec_name, codec in CODECS.items():
            with tempfile.TemporaryDirectory() as tmp:
                rec = trajcore.RecordEpisodes(_FrameReplay(frames), tmp, render_frames=True, codecs={"render": codec})
                rec.reset(seed=0)
                for _ in range(3 * n - 1):  # every frame three times over: chunks fill up
                    rec.step(0)
                rec.close()
                compress_s = sum(s["compress_s"] for s in rec.stats()["timelog"])
                with trajcore.open(tmp) as ds:
                    stats = {c["name"]: c for c in ds._core.column_stats()}["render/frame"]
            rows.append(
                {
                    "group": "render_frames codecs",
                    "name": f"{name}: {codec_name}",
                    "ratio": stats["raw_bytes"] / stats["stored_bytes"],
                    "compress_MB_per_s": stats["raw_bytes"] / 1e6 / compress_s,
                    "stored_KB_per_frame": stats["stored_bytes"] / 1e3 / (3 * n),
                }
            )
        return rows

    rows = benchmark.pedantic(run, rounds=1, iterations=1)
    for row in rows:
        report.append(row)
    benchmark.extra_info["rows"] = rows
