"""(a) Recording overhead on CartPole (one env, and 16 sync sub-envs: the issue's target), and
(c) the same 16-sub-env workload through the baselines users write today and the peers."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from baselines import BASELINES, envlogger_list, minari_list, peer_missing
from trajcore.tools.bench import EnvLoop, measure_overhead, run_interleaved
from workloads import CARTPOLE_STEP_BYTES, cartpole_vector, dir_bytes


@pytest.mark.parametrize(("num_envs", "steps"), [(1, 200_000), (16, 60_000)])
def test_cartpole_overhead(benchmark: Any, report: list[dict[str, Any]], num_envs: int, steps: int) -> None:
    kwargs = {"num_envs": num_envs, "vectorization": "sync" if num_envs > 1 else None, "steps": steps, "repeats": 10}
    r = benchmark.pedantic(measure_overhead, args=("CartPole-v1",), kwargs=kwargs, rounds=1, iterations=1)
    name = f"trajcore CartPole x{num_envs}" + (" sync" if num_envs > 1 else "")
    o = r["overhead_us_per_vector_step"]
    row = {
        "group": "overhead",
        "name": name,
        "env_steps_per_s_without": r["env_steps_per_s_without"]["median"],
        "env_steps_per_s_with": r["env_steps_per_s_with"]["median"],
        "overhead_us_per_vector_step": o["median"],
        "overhead_us_spread": f"{o['min']:.2f}..{o['max']:.2f}",
        "overhead_pct": r["overhead_pct"]["median"],
        "call_us_per_vector_step": r["call_us_per_vector_step"]["median"],
        "call_us_spread": f"{r['call_us_per_vector_step']['min']:.2f}..{r['call_us_per_vector_step']['max']:.2f}",
        "call_us_per_env_step": r["call_us_per_env_step"]["median"],
        "compression_ratio": r["compression_ratio"],
        "peak_rss_growth_MB": r["peak_rss_growth_bytes"] / 1e6,
        "command": f"python -m trajcore bench --env CartPole-v1 --num-envs {num_envs} --steps {steps} --repeats 10",
    }
    benchmark.extra_info.update(row)
    report.append(row)


# (name, vector steps per loop): slow recorders get fewer steps, so the run stays short.
CARTPOLE_RECORDERS = [
    ("trajcore", 20_000),
    ("pickle per episode", 10_000),
    ("np.savez_compressed per episode", 10_000),
    ("JSON line per step", 4_000),
    ("CSV row per step", 4_000),
    ("EnvLogger 1.2", 2_000),
    ("Minari (HDF5)", 1_000),
]


def _cartpole_pair(name: str, out: Path) -> tuple[Any, Any]:
    """(plain, recorded) 16-sub-env loops of the same kind for recorder `name`."""
    if name.startswith("EnvLogger"):
        make = lambda: gym.make("CartPole-v1")  # noqa: E731
        return envlogger_list(make, 16, None), envlogger_list(make, 16, out)
    if name.startswith("Minari"):
        make = lambda: gym.make("CartPole-v1")  # noqa: E731
        return minari_list(make, 16, None), minari_list(make, 16, out)
    wrapper = trajcore.RecordVectorEpisodes if name == "trajcore" else BASELINES[name]
    recorded = wrapper(cartpole_vector(), out)
    recorded.reset(seed=0)
    plain = cartpole_vector()
    plain.reset(seed=0)
    return plain, recorded


@pytest.mark.parametrize(("name", "steps"), CARTPOLE_RECORDERS)
def test_cartpole_x16_recorders(
    benchmark: Any, report: list[dict[str, Any]], tmp_path: Path, name: str, steps: int
) -> None:
    peer = "envlogger" if name.startswith("EnvLogger") else "minari" if name.startswith("Minari") else None
    if peer is not None and (why := peer_missing(peer)) is not None:
        pytest.skip(why)
    out = tmp_path / "rec"
    plain_env, recorded_env = _cartpole_pair(name, out)
    actions = list(np.random.default_rng(0).integers(0, 2, size=(1024, 16)))
    plain = EnvLoop(plain_env, False, actions, None, None)
    recorded = EnvLoop(recorded_env, False, actions, None, None)
    gc.collect()
    plain.run(200)
    recorded.run(200)
    repeats = 5
    without, with_ = benchmark.pedantic(run_interleaved, args=(plain, recorded, steps, repeats), rounds=1, iterations=1)
    if name.startswith("Minari"):
        for e in recorded_env.envs:
            e._flush_to_storage()  # close() deletes the collector's cache: count it first
        on_disk = dir_bytes(out)
    recorded_env.close()
    plain_env.close()
    if not name.startswith("Minari"):
        on_disk = dir_bytes(out)
    env_steps = 16 * (200 + steps // repeats * repeats)
    overhead = sorted((w - p) * 1e6 for w, p in zip(with_, without, strict=True))
    med_plain = float(np.median(without))
    row = {
        "group": "CartPole x16 sync: recorders",
        "name": name,
        "env_steps_per_s_without": 16 / med_plain,
        "env_steps_per_s_with": 16 / float(np.median(with_)),
        "overhead_us_per_vector_step": float(np.median(overhead)),
        "overhead_us_spread": f"{overhead[0]:.1f}..{overhead[-1]:.1f}",
        "overhead_us_per_env_step": float(np.median(overhead)) / 16,
        "overhead_pct": 100 * float(np.median(overhead)) * 1e-6 / med_plain,
        "bytes_on_disk_per_env_step": on_disk / env_steps,
        "size_vs_raw": on_disk / (env_steps * CARTPOLE_STEP_BYTES),
    }
    benchmark.extra_info.update(row)
    report.append(row)
