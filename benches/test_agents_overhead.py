"""Multi-agent recording overhead: `RecordParallelEpisodes` against the env alone, per agent step,
for 2, 8 and 64 agents (a synthetic Parallel env that does almost no work, so the figure is the
recorder's own cost), and MPE's simple_spread with 2 and 8 agents (a real env's share)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import pytest
import trajcore
from agents_env import Swarm


def _run(env: Any, steps: int, actions: dict[str, Any]) -> float:
    """Seconds per env step of `steps` steps (reset when the episode ends)."""
    start = time.perf_counter()
    for _ in range(steps):
        env.step(actions)
        if not env.agents:
            env.reset()
    return (time.perf_counter() - start) / steps


def _overhead(make: Any, n: int, steps: int, out: Path, repeats: int = 6) -> dict[str, Any]:
    plain, recorded = make(), trajcore.RecordParallelEpisodes(make(), out)
    plain.reset(seed=0)
    recorded.reset(seed=0)
    actions = {a: 0 for a in plain.possible_agents}
    _run(plain, steps // 10, actions)  # warm both (the recorder's writers start at the first reset)
    _run(recorded, steps // 10, actions)
    without, with_ = [], []
    for r in range(repeats):
        # Interleaved, alternating which goes first: the machine's noise falls on both.
        for env in (plain, recorded) if r % 2 == 0 else (recorded, plain):
            (without if env is plain else with_).append(_run(env, steps // repeats, actions))
    recorded.close()
    per_agent = [(w - p) / n * 1e6 for w, p in zip(with_, without, strict=True)]
    return {
        "env_us_per_step": statistics.median(without) * 1e6,
        "recorded_us_per_step": statistics.median(with_) * 1e6,
        "overhead_us_per_agent_step": statistics.median(per_agent),
        "overhead_spread": f"{min(per_agent):.2f}..{max(per_agent):.2f}",
        "overhead_pct": (statistics.median(with_) / statistics.median(without) - 1) * 100,
    }


@pytest.mark.parametrize(("n", "steps"), [(2, 30_000), (8, 12_000), (64, 2_000)])
def test_swarm_overhead_per_agent_step(
    benchmark: Any, report: list[dict[str, Any]], tmp_path: Path, n: int, steps: int
) -> None:
    r = benchmark.pedantic(_overhead, args=(lambda: Swarm(n), n, steps, tmp_path / "swarm"), rounds=1, iterations=1)
    row = {"group": "agents", "name": f"synthetic Parallel env, {n} agents", **r}
    benchmark.extra_info.update(row)
    report.append(row)


@pytest.mark.parametrize(("n", "steps"), [(2, 6_000), (8, 1_500)])
def test_simple_spread_overhead_per_agent_step(
    benchmark: Any, report: list[dict[str, Any]], tmp_path: Path, n: int, steps: int
) -> None:
    from mpe2 import simple_spread_v3

    def make() -> Any:
        return simple_spread_v3.parallel_env(N=n, max_cycles=100)

    r = benchmark.pedantic(_overhead, args=(make, n, steps, tmp_path / "spread"), rounds=1, iterations=1)
    row = {"group": "agents", "name": f"MPE simple_spread, {n} agents", **r}
    benchmark.extra_info.update(row)
    report.append(row)
