"""Recording overhead on CartPole: one env (issue 2) and 16 sync sub-envs (issue 3), plus the
on-disk size against the raw bytes recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from overhead import interleaved, run_loop

import trajcore


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir())


@pytest.mark.parametrize("num_envs", [1, 16])
def test_cartpole_overhead(benchmark: Any, tmp_path: Path, report: list[dict[str, Any]], num_envs: int) -> None:
    single = num_envs == 1
    steps = 20_000 if single else 5_000
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, size=(1000,) if single else (1000, num_envs))
    out = tmp_path / "rec"

    def plain() -> Any:
        if single:
            return gym.make("CartPole-v1")
        return gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync")

    def recorded() -> Any:
        if single:
            return trajcore.RecordEpisodes(plain(), out)
        return trajcore.RecordVectorEpisodes(plain(), out)

    fig = interleaved(plain, recorded, actions, steps, repeats=7, single=single)
    # pytest-benchmark's own timing: the recorded loop alone.
    env = recorded()
    env.reset(seed=1)
    benchmark.pedantic(run_loop, args=(env, actions, 1000, single), rounds=5)
    env.close()

    written = _dir_bytes(out)
    stats_raw = _raw_bytes(out)
    row = {
        "bench": f"cartpole_x{num_envs}",
        "env_steps_per_s_without": round(num_envs / fig["without_s"]),
        "env_steps_per_s_with": round(num_envs / fig["with_s"]),
        "overhead_us_per_call": round(fig["overhead_s"] * 1e6, 2),
        "overhead_us_range": f"{fig['overhead_min_s'] * 1e6:.2f}..{fig['overhead_max_s'] * 1e6:.2f}",
        "overhead_pct": round(100 * fig["overhead_s"] / fig["without_s"], 2),
        "bytes_on_disk": written,
        "raw_bytes": stats_raw,
        "compression_ratio": round(stats_raw / written, 2),
    }
    benchmark.extra_info.update(row)
    report.append(row)


def _raw_bytes(path: Path) -> int:
    """Bytes of every recorded value as numpy holds them (the size without trajcore's format)."""
    total = 0
    with trajcore.open(path) as ds:
        for ep in ds.episodes:
            for part in (ep.observations, ep.actions, ep.rewards, ep.terminations, ep.truncations):
                total += sum(np.asarray(a).nbytes for a in _leaves(part))
    return total


def _leaves(tree: Any) -> list[Any]:
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in _leaves(v)]
    if isinstance(tree, tuple):
        return [x for v in tree for x in _leaves(v)]
    return [tree]

