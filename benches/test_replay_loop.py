"""The training loop of an off-policy learner (the CleanRL/SB3 pattern), per vector step:
`envs.step`, then a batch of 256 transitions, with trajcore as the replay buffer (a recorder
with `capacity_steps`, `ds.refresh()` and `ds.sample_transitions(256)`) against an in-memory
numpy ring buffer of the same capacity filled by hand (obs, next obs, action, reward, done).
The two loops run interleaved in rounds on the same machine, the ratio in one run (no learner
update: the figure is the buffer's cost beside the env's).

- CartPole x8, capacity 100,000 transitions.
- Atari-like pixels: 8 sub-envs of (4, 84, 84) uint8 stacks (`workloads.PixelEnv`, drawn frames
  replayed at almost no cost, so the figure is the buffer's, not an emulator's), capacity
  100,000 transitions. The issue asks for 1M: a numpy ring storing obs and next_obs then takes
  2 x 1M x 28,224 bytes = 56 GB, more than this 24 GB machine has; at 100,000 it takes 5.6 GB.
  Both buffers are filled past their capacity first (the ring wraps, the recording evicts), so
  the rounds run in the steady state. Beside the ratio: the buffer's bytes on disk against the
  ring's RAM, and the peak RSS of a process running the trajcore loop alone with a cache of
  256 MiB (`cache_bytes`), at half, one, one and a half, two and three capacities' worth of
  transitions (anonymous and file-backed apart; the same loop's decoded frames alone would take
  0.7 GB), and the disk it holds: the directory's bytes and those of deleted shards it still has
  open (evicted ones, and the copies of shards it opened before their writer compacted them).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from workloads import dir_bytes, pixel_vector

NUM_ENVS = 8
CAPACITY = 100_000
BATCH = 256
PROBE_CACHE = 256 << 20


class NumpyRing:
    """CleanRL's buffer: preallocated arrays written at a cursor, sampled uniformly."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], dtype: Any = np.float32) -> None:
        self.obs = np.zeros((capacity, *obs_shape), dtype)
        self.next_obs = np.zeros((capacity, *obs_shape), dtype)
        self.actions = np.zeros(capacity, np.int64)
        self.rewards = np.zeros(capacity, np.float32)
        self.dones = np.zeros(capacity, bool)
        self.capacity, self.pos, self.full = capacity, 0, False
        self.rng = np.random.default_rng(0)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.obs, self.next_obs, self.actions, self.rewards, self.dones))

    def add(self, obs: Any, next_obs: Any, actions: Any, rewards: Any, dones: Any) -> None:
        n = len(obs)
        idx = (self.pos + np.arange(n)) % self.capacity
        self.obs[idx], self.next_obs[idx], self.actions[idx] = obs, next_obs, actions
        self.rewards[idx], self.dones[idx] = rewards, dones
        self.full = self.full or self.pos + n >= self.capacity
        self.pos = (self.pos + n) % self.capacity

    def sample(self, n: int) -> dict[str, Any]:
        idx = self.rng.integers(0, self.capacity if self.full else self.pos, n)
        return {
            "observations": self.obs[idx],
            "next_observations": self.next_obs[idx],
            "actions": self.actions[idx],
            "rewards": self.rewards[idx],
            "dones": self.dones[idx],
        }


def _numpy_loop(
    envs: Any, ring: NumpyRing, obs: Any, steps: int, sample: bool = True, split: dict[str, list[float]] | None = None
) -> tuple[float, Any]:
    clock = time.perf_counter_ns
    in_env = 0
    start = clock()
    for _ in range(steps):
        actions = envs.action_space.sample()
        t = clock()
        next_obs, rewards, term, trunc, _ = envs.step(actions)
        in_env += clock() - t
        ring.add(obs, next_obs, actions, rewards, term | trunc)
        obs = next_obs
        if sample:
            ring.sample(BATCH)
    if split is not None:
        split.setdefault("env", []).append(in_env / steps / 1e3)
    return (clock() - start) / steps / 1e9, obs


def _trajcore_loop(
    envs: Any, ds: trajcore.Dataset, steps: int, seed: int, split: dict[str, list[float]] | None = None
) -> float:
    clock = time.perf_counter_ns
    spent = [0, 0, 0]  # the recorded env step, refresh, sample
    start = clock()
    for i in range(steps):
        t0 = clock()
        envs.step(envs.action_space.sample())
        t1 = clock()
        ds.refresh()
        t2 = clock()
        if ds.num_steps:
            ds.sample_transitions(BATCH, seed=seed + i)
        t3 = clock()
        spent[0] += t1 - t0
        spent[1] += t2 - t1
        spent[2] += t3 - t2
    if split is not None:
        for name, ns in zip(("recorded_step", "refresh", "sample"), spent, strict=True):
            split.setdefault(name, []).append(ns / steps / 1e3)
    return (clock() - start) / steps / 1e9


def _compare(make_env: Any, out: Path, steps: int, fill: int, dtype: Any, rounds: int = 6) -> dict[str, Any]:
    plain = make_env()
    recorded = trajcore.RecordVectorEpisodes(make_env(), out, capacity_steps=CAPACITY)
    for e in (plain, recorded):
        e.action_space.seed(0)
    obs, _ = plain.reset(seed=0)
    recorded.reset(seed=0)
    ring = NumpyRing(CAPACITY, plain.single_observation_space.shape, dtype)
    # Both buffers past their capacity (the ring wraps, the recording evicts) before timing.
    _, obs = _numpy_loop(plain, ring, obs, fill, sample=False)
    for _ in range(fill):
        recorded.step(recorded.action_space.sample())
    recorded.flush()
    ds = trajcore.open(out)
    # Warm both.
    _, obs = _numpy_loop(plain, ring, obs, steps)
    _trajcore_loop(recorded, ds, steps, 0)
    ring_s, traj_s = [], []
    split: dict[str, list[float]] = {}
    # CPU time of the process (every thread: the recorder's writer too) per vector step: what
    # a loaded machine's waits leave out of the wall-clock figures.
    cpu_s: dict[str, list[float]] = {}
    for r in range(rounds):
        # Interleaved, alternating which goes first: the machine's noise falls on both.
        for which in ("ring", "trajcore") if r % 2 == 0 else ("trajcore", "ring"):
            cpu = time.process_time()
            if which == "ring":
                t, obs = _numpy_loop(plain, ring, obs, steps, split=split)
                ring_s.append(t)
            else:
                traj_s.append(_trajcore_loop(recorded, ds, steps, r * steps, split))
            cpu_s.setdefault(which, []).append((time.process_time() - cpu) / steps)
    recorded.close()
    plain.close()
    ds.refresh()
    on_disk, buffered = dir_bytes(out), ds.num_steps
    ds.close()
    ring_med, traj_med = statistics.median(ring_s), statistics.median(traj_s)
    ring_cpu, traj_cpu = statistics.median(cpu_s["ring"]), statistics.median(cpu_s["trajcore"])
    # Where a vector step's time goes (µs, medians over rounds; each part also as a ratio to
    # the env step of the same round, which the load moves with it).
    env = split["env"]
    parts = {
        "ring": [r * 1e6 - e for r, e in zip(ring_s, env, strict=True)],  # the ring's add and sample
        "record": [s - e for s, e in zip(split["recorded_step"], env, strict=True)],
        "refresh": split["refresh"],
        "sample": split["sample"],
    }
    split_us = {"env": statistics.median(env), **{k: statistics.median(v) for k, v in parts.items()}}
    per_env = {k: statistics.median(x / e for x, e in zip(v, env, strict=True)) for k, v in parts.items()}
    return {
        "split_us": {k: round(v, 1) for k, v in split_us.items()},
        "split_to_env_step": {k: round(v, 2) for k, v in per_env.items()},
        "numpy_ring_us_per_step": ring_med * 1e6,
        "trajcore_us_per_step": traj_med * 1e6,
        "speed_ratio": ring_med / traj_med,  # the issue asks >= 0.9
        "cpu_us_ring_trajcore": f"{ring_cpu * 1e6:.0f} {traj_cpu * 1e6:.0f}",
        "cpu_ratio": ring_cpu / traj_cpu,
        "ratio_spread": f"{min(ring_s) / max(traj_s):.2f}..{max(ring_s) / min(traj_s):.2f}",
        "evicted_steps": recorded.stats()["evicted_steps"],
        "transitions_on_disk": buffered,
        "disk_bytes": on_disk,
        "numpy_ring_bytes": ring.nbytes,
        "disk_to_ring_ram": on_disk / ring.nbytes,  # pixels: the issue asks <= 0.1
        "load_average": f"{os.getloadavg()[0]:.1f}",
    }


def _cartpole() -> Any:
    return gym.make_vec("CartPole-v1", num_envs=NUM_ENVS, vectorization_mode="sync")


def _pixels() -> Any:
    return pixel_vector(NUM_ENVS)


@pytest.mark.parametrize(
    ("name", "make_env", "dtype", "steps"),
    [("CartPole", _cartpole, np.float32, 2_000), ("Atari-like (4, 84, 84) uint8", _pixels, np.uint8, 300)],
)
def test_loop_against_a_numpy_ring(
    benchmark: Any, report: list[dict[str, Any]], tmp_path: Path, name: str, make_env: Any, dtype: Any, steps: int
) -> None:
    fill = CAPACITY * 5 // 4 // NUM_ENVS
    r = benchmark.pedantic(_compare, args=(make_env, tmp_path / "buffer", steps, fill, dtype), rounds=1, iterations=1)
    row = {"group": "replay buffer", "name": f"{name} x{NUM_ENVS}, capacity {CAPACITY:,}, batch {BATCH}", **r}
    benchmark.extra_info.update(row)
    report.append(row)


def _probe(out: str, vector_steps: list[int]) -> None:
    """Runs the trajcore loop on pixels (capacity `CAPACITY`, a cache of `PROBE_CACHE`) and
    prints, at each of `vector_steps`, the transitions so far, this process's RSS and peak RSS."""

    def status(field: str) -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

    def deleted_but_open() -> tuple[int, int]:
        """Disk bytes of the deleted files this process holds open: shards evicted under it (no
        file of that name left) and shards compacted under it (their rewrite took the name)."""
        evicted = replaced = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
                if target.endswith(" (deleted)"):
                    held = os.fstat(int(fd)).st_blocks * 512
                    if os.path.exists(target.removesuffix(" (deleted)")):
                        replaced += held
                    else:
                        evicted += held
            except OSError:
                pass  # closed meanwhile
        return evicted, replaced

    envs = trajcore.RecordVectorEpisodes(_pixels(), out, capacity_steps=CAPACITY)
    envs.action_space.seed(0)
    envs.reset(seed=0)
    envs.flush()
    ds = trajcore.open(out, cache_bytes=PROBE_CACHE)
    done = 0
    for i, until in enumerate(vector_steps):
        _trajcore_loop(envs, ds, until - done, i * until)
        done = until
        point = {"transitions": until * NUM_ENVS, "peak_rss": status("VmHWM:"), "rss_anon": status("RssAnon:")}
        evicted_open, replaced_open = deleted_but_open()
        point.update(rss_file=status("RssFile:"), evicted_open=evicted_open, replaced_open=replaced_open)
        point.update(rss=status("VmRSS:"), on_disk=dir_bytes(out))
        print(json.dumps(point))
    envs.close()
    ds.close()


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc/self/status (Linux)")
def test_pixel_loop_memory(benchmark: Any, report: list[dict[str, Any]], tmp_path: Path) -> None:
    checkpoints = [k * CAPACITY // 2 // NUM_ENVS for k in (1, 2, 3, 4, 6)]  # 0.5 to 3 capacities
    code = f"import test_replay_loop as t; t._probe({str(tmp_path / 'buffer')!r}, {checkpoints!r})"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), *sys.path])}

    def run() -> list[dict[str, int]]:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    points = benchmark.pedantic(run, rounds=1, iterations=1)
    row: dict[str, Any] = {"group": "replay buffer", "name": f"pixel loop memory, cache {PROBE_CACHE >> 20} MiB"}
    for p in points:
        at = f"{p['transitions'] // 1000}k"
        row[f"rss_mb_{at}"] = f"{p['rss'] / 2**20:.0f} (peak {p['peak_rss'] / 2**20:.0f})"
        row[f"anon_file_mb_{at}"] = f"{p['rss_anon'] / 2**20:.0f}+{p['rss_file'] / 2**20:.0f}"
        held = f"{p['evicted_open'] / 2**20:.0f} evicted + {p['replaced_open'] / 2**20:.0f} compacted"
        row[f"disk_mb_{at}"] = f"{p['on_disk'] / 2**20:.0f}, held deleted: {held}"
    row["load_average"] = f"{os.getloadavg()[0]:.1f}"
    benchmark.extra_info.update(row)
    report.append(row)
