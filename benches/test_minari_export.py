"""Minari export (issue 33, point 6): `trajcore.export(ds, id, "minari")` against Minari's own
`DataCollector` writing the same episodes, in one run.

The dataset is the README's recording (`trajcore record CartPole-v1 --num-envs 16`), at
`TRAJCORE_MINARI_STEPS` vector steps (default 20,000: about 14k episodes; the README's 100,000
give 69k). The `DataCollector` side replays those episodes (held in memory, read before the
clock starts) through a gymnasium env that returns the recorded observations, rewards and flags
for the recorded actions, then `create_dataset`: its time includes its per-step checks and
buffering, which trajcore has done while recording; the replay env alone is timed too.

The export's own time is split into reading the episodes (trajcore, `Episode` arrays and
metadata) and Minari's HDF5 storage writing them (`MinariStorage.update_episodes` and
`update_episode_metadata`), by timing the reads alone.

    python -m pytest benches/test_minari_export.py -p no:cacheprovider --benchmark-only -s
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from trajcore.formats.to_minari import _episode_metadata, episode_infos
from trajcore.read.episode import Episode

minari = pytest.importorskip("minari", reason="the Minari export needs minari (pip install '.[minari]')")
pytest.importorskip("jax", reason="Minari's DataCollector needs minari[create] (docs/BENCHMARKS.md)")

STEPS = int(os.environ.get("TRAJCORE_MINARI_STEPS", "20000"))
GROUP = "minari export"


class Replay(gym.Env[Any, Any]):
    """Plays recorded episodes back, in order, one per reset."""

    def __init__(self, episodes: list[tuple[Any, ...]], observation_space: Any, action_space: Any) -> None:
        self.episodes, self.next_episode, self.t = episodes, 0, 0
        self.observation_space, self.action_space = observation_space, action_space
        self.current: tuple[Any, ...] = episodes[0]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.current = self.episodes[self.next_episode]
        self.next_episode += 1
        self.t = 0
        return self.current[0][0], {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, _, rewards, terms, truncs = self.current
        self.t += 1
        t = self.t - 1
        return obs[self.t], float(rewards[t]), bool(terms[t]), bool(truncs[t]), {}


def _replay(env: Any, episodes: list[tuple[Any, ...]]) -> None:
    for _, actions, *_ in episodes:
        env.reset()
        for a in actions:
            env.step(a)


def test_minari_export_against_minari_data_collector(
    benchmark: Any, report: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from minari import DataCollector

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    path = tmp_path / "cp16"
    command = [sys.executable, "-m", "trajcore", "record", "CartPole-v1", "--num-envs", "16", "--steps", str(STEPS)]
    subprocess.run([*command, str(path)], check=True, capture_output=True)

    def measure() -> dict[str, Any]:
        with trajcore.open(path) as ds:
            indices = [i for i in range(ds.num_episodes) if ds.episodes[i].length > 0]
            start = time.perf_counter()
            trajcore.export(ds, "bench/cartpole/trajcore-v0", "minari")
            export_s = time.perf_counter() - start
            # The export's reads alone: what it takes from trajcore for each episode.
            start = time.perf_counter()
            for i in indices:
                ep = Episode(ds, i)
                read = (ep.observations, ep.actions, ep.rewards, ep.terminations, ep.truncations)
                assert len(read[0]) == ep.length + 1
                episode_infos(ep)
                _episode_metadata(ep)
            read_s = time.perf_counter() - start
            episodes = [
                (ep.observations, ep.actions, ep.rewards, ep.terminations, ep.truncations)
                for ep in (Episode(ds, i) for i in indices)
            ]
            spaces = (ds.observation_space, ds.action_space)
        start = time.perf_counter()
        _replay(Replay(episodes, *spaces), episodes)
        env_s = time.perf_counter() - start
        collector = DataCollector(Replay(episodes, *spaces))
        start = time.perf_counter()
        _replay(collector, episodes)
        collector.create_dataset("bench/cartpole/collector-v0", algorithm_name="replay")
        collector_s = time.perf_counter() - start
        collector.close()
        root = tmp_path / "minari" / "bench" / "cartpole"
        sizes = {
            name: sum(f.stat().st_size for f in (root / name).rglob("*") if f.is_file())
            for name in ("trajcore-v0", "collector-v0")
        }
        written = minari.load_dataset("bench/cartpole/trajcore-v0")
        assert (
            written.total_episodes == len(episodes) == minari.load_dataset("bench/cartpole/collector-v0").total_episodes
        )
        return {
            "episodes": len(episodes),
            "steps": int(sum(len(e[1]) for e in episodes)),
            "export_s": export_s,
            "export_read_s": read_s,
            "export_minari_storage_s": export_s - read_s,
            "collector_s": collector_s,
            "collector_minus_env_s": collector_s - env_s,
            "export_over_collector": export_s / collector_s,
            "episodes_per_s": len(episodes) / export_s,
            "export_mb": sizes["trajcore-v0"] / 1e6,
            "collector_mb": sizes["collector-v0"] / 1e6,
            "trajcore_mb": sum(f.stat().st_size for f in path.glob("*.trj")) / 1e6,
        }

    r = benchmark.pedantic(measure, rounds=1, iterations=1)
    row = {"group": GROUP, "name": f"CartPole x16, {STEPS:,} vector steps", **r}
    benchmark.extra_info.update(row)
    report.append(row)
    assert np.isfinite(r["export_over_collector"])
