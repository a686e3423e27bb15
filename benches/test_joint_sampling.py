"""Joint multi-agent sampling (issue 33, point 5): `ds.env_episodes.sample_transitions(256)`
against `ds.sample_transitions(256)` on the same dataset, at 2,000 and 100,000 env episodes, calls
interleaved in rounds. The joint batch reads every agent's row at each of its 256 env steps (3
agents here: up to 3x the rows of the plain batch). The plan (which episodes make each env
episode, where each agent acted) is made at the first call and kept: its time is reported apart.

The dataset: a Parallel env of 3 agents with 8 float32 observations, env episodes of 10 env steps
in which the third agent leaves after 4 (so the joint rows hold steps where an agent did not
act), recorded with `RecordParallelEpisodes`.

    python -m pytest benches/test_joint_sampling.py -p no:cacheprovider --benchmark-only -s
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import pytest
import trajcore
from agents_env import Swarm
from timing import interleaved

BATCH = 256
LENGTH = 10
GROUP = "joint sampling"


def _trio() -> Swarm:
    """3 agents for `LENGTH` env steps, the third leaving after 4."""
    return Swarm(length=LENGTH, names=["a", "b", "c"], leaves={"c": 4})


def _record(path: Path, env_episodes: int) -> None:
    env = trajcore.RecordParallelEpisodes(_trio(), path)
    actions = {a: 0 for a in env.possible_agents}
    for _ in range(env_episodes):
        env.reset()
        while env.agents:
            env.step({a: actions[a] for a in env.agents})
    env.close()


@pytest.mark.parametrize("env_episodes", [2_000, 100_000])
def test_joint_sampling_against_plain_sampling(
    benchmark: Any, report: list[dict[str, Any]], tmp_path: Path, env_episodes: int
) -> None:
    path = tmp_path / "trio"
    _record(path, env_episodes)

    def measure() -> dict[str, Any]:
        with trajcore.open(path) as ds:
            start = time.perf_counter()
            joint = ds.env_episodes
            joint.sample_transitions(BATCH, seed=0)
            plan_s = time.perf_counter() - start
            times = interleaved(
                {
                    "plain": lambda i: ds.sample_transitions(BATCH, seed=i),
                    "joint": lambda i: ds.env_episodes.sample_transitions(BATCH, seed=i),
                },
                seconds=6.0,
            )
        plain, joint_t = statistics.median(times["plain"]), statistics.median(times["joint"])
        ratios = [j / p for j, p in zip(times["joint"], times["plain"], strict=True)]
        return {
            "env_episodes": env_episodes,
            "plain_ms": plain * 1e3,
            "joint_ms": joint_t * 1e3,
            "joint_over_plain": statistics.median(ratios),
            "ratio_spread": f"{min(ratios):.2f}..{max(ratios):.2f}",
            "plan_s": plan_s,
        }

    r = benchmark.pedantic(measure, rounds=1, iterations=1)
    row = {"group": GROUP, "name": f"{env_episodes:,} env episodes, 3 agents, batch {BATCH}", **r}
    benchmark.extra_info.update(row)
    report.append(row)
