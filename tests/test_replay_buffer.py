"""A recording with `capacity_steps` is a replay buffer on disk: its directory keeps at most the
capacity in closed shards (plus the open one), deleting the oldest first; what it keeps is what
the env produced; the evictions are counted where any process can read them; a reader in
another process never fails, never warns and never samples an evicted episode after `refresh`;
a recording started on the same directory counts what is there."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from trajcore.errors import InvalidArgumentError, TrajcoreFileNotFoundError, TrajcoreWarning

CAPACITY = 2000
# A capacity-bound recording rolls over at a tenth of its capacity (`shard_steps_limit`); a
# vector step can overshoot that by one transition per sub-env.
SHARD = CAPACITY // 10 + 8


def _record_cartpole(path: Path, vector_steps: int, **options: Any) -> dict[str, Any]:
    envs = trajcore.RecordVectorEpisodes(
        gym.make_vec("CartPole-v1", num_envs=8, vectorization_mode="sync"), path, **options
    )
    envs.reset(seed=0)
    envs.action_space.seed(0)
    for _ in range(vector_steps):
        envs.step(envs.action_space.sample())
    envs.close()
    return envs.stats()


def _shard_steps(path: Path) -> list[int]:
    with trajcore.open(path) as ds:
        return [n for _, n in ds._core.shard_steps]


def test_capacity_keeps_the_newest_transitions_as_recorded(tmp_path: Path) -> None:
    """Recorded twice from the same seeds, bounded and not: the bounded directory holds at most
    the capacity, kept + evicted is everything, and every episode it keeps whole is one of the
    unbounded recording's, value for value (the newest ones)."""
    stats = _record_cartpole(tmp_path / "bounded", 1500, capacity_steps=CAPACITY)
    _record_cartpole(tmp_path / "all", 1500)
    kept = _shard_steps(tmp_path / "bounded")
    assert sum(kept) <= CAPACITY and sum(kept) >= CAPACITY - SHARD, kept
    with trajcore.open(tmp_path / "bounded") as ds, trajcore.open(tmp_path / "all") as full:
        assert stats["evicted_steps"] > 0 and stats["eviction_error"] is None
        assert ds.evicted_steps == stats["evicted_steps"]
        assert ds.evicted_steps + sum(kept) == full.num_steps

        # Whole episodes, matched by sub-env and their rank from the end of that sub-env's list.
        def by_env(d: trajcore.Dataset) -> dict[int, list[Any]]:
            out: dict[int, list[Any]] = {}
            for ep in d.episodes:
                if ep.complete:
                    out.setdefault(ep.env_index, []).append(ep)
            return out

        ours, theirs = by_env(ds), by_env(full)
        compared = 0
        for env, eps in ours.items():
            for mine, ref in zip(reversed(eps), reversed(theirs[env]), strict=False):
                np.testing.assert_array_equal(mine.observations, ref.observations)
                np.testing.assert_array_equal(mine.actions, ref.actions)
                compared += 1
        assert compared >= 50
        # The part of an episode whose start was evicted is listed as a part (incomplete).
        s = ds.summaries()
        assert (s["continued"] & ~s["complete"].astype(bool) == s["continued"]).all()
    info = subprocess.run(
        [sys.executable, "-m", "trajcore", "info", str(tmp_path / "bounded")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"evicted: {stats['evicted_steps']:,} transitions" in info


def live_cartpole_buffer(path: Path, num_envs: int, capacity: int) -> trajcore.RecordVectorEpisodes:
    """A bounded CartPole recording flushed only when asked (no timer: the chunks it cuts do not
    depend on the machine's speed), reset and flushed once: a reader can open it at once."""
    envs = trajcore.RecordVectorEpisodes(
        gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync"),
        path,
        capacity_steps=capacity,
        flush_interval=3600,
    )
    envs.reset(seed=0)
    envs.action_space.seed(0)
    envs.flush()
    return envs


@pytest.mark.parametrize("cache_bytes", [None, 16 << 10])
def test_batches_of_a_live_buffer_hold_what_its_episodes_hold(tmp_path: Path, cache_bytes: int | None) -> None:
    """The training loop over a live buffer, with chunks of a few rows (a flush every 3 vector
    steps) and evictions: every row of every batch is the row its episode holds, read apart
    (`Episode`'s own path). A batch reads small chunks' rows from runs joined in memory, grown
    as chunks come and trimmed as shards go; a cache of 16 KiB leaves those runs room for part
    of the rows only, so batches mix both paths."""
    path = tmp_path / "buffer"
    envs = live_cartpole_buffer(path, num_envs=4, capacity=CAPACITY)
    ds = trajcore.open(path) if cache_bytes is None else trajcore.open(path, cache_bytes=cache_bytes)
    checked = 0
    for i in range(1500):  # 3 capacities
        envs.step(envs.action_space.sample())
        if i % 3 == 0:
            envs.flush()
        ds.refresh()
        if not ds.num_steps:
            continue
        b = ds.sample_transitions(64, seed=i)
        if i % 50:
            continue
        for j, (e, t) in enumerate(zip(b["episode_index"], b["step_index"], strict=True)):
            ep = ds.episodes[int(e)]
            want = (ep.observations[t], ep.observations[t + 1], ep.actions[t], ep.rewards[t], ep.terminations[t])
            keys = ("observations", "next_observations", "actions", "rewards", "terminations")
            for key, w in zip(keys, want, strict=True):
                np.testing.assert_array_equal(b[key][j], w, err_msg=key)
            checked += 1
    envs.close()
    ds.close()
    assert checked == 30 * 64


def test_a_recording_reopened_on_the_directory_counts_what_is_there(tmp_path: Path) -> None:
    path = tmp_path / "buffer"
    first = _record_cartpole(path, 200, capacity_steps=CAPACITY)  # 1600 transitions
    assert first["evicted_steps"] == 0
    second = _record_cartpole(path, 200, capacity_steps=CAPACITY)
    kept = _shard_steps(path)
    assert CAPACITY - SHARD <= sum(kept) <= CAPACITY
    with trajcore.open(path) as ds:
        assert second["evicted_steps"] > 0
        assert ds.evicted_steps == second["evicted_steps"]
        # The first recording's shards went first: what is left of it is older than the second's.
        assert ds.num_recordings in (1, 2)


def test_every_recorder_takes_capacity_steps(tmp_path: Path) -> None:
    single = trajcore.RecordEpisodes(gym.make("CartPole-v1"), tmp_path / "single", capacity_steps=300)
    single.reset(seed=1)
    single.action_space.seed(1)
    for _ in range(3000):
        _, _, term, trunc, _ = single.step(single.action_space.sample())
        if term or trunc:
            single.reset()
    single.close()
    assert single.stats()["evicted_steps"] > 0
    assert sum(_shard_steps(tmp_path / "single")) <= 300

    box = gym.spaces.Box(-1, 1, (3,), np.float32)
    with trajcore.Writer(tmp_path / "writer", box, gym.spaces.Discrete(2), capacity_steps=100) as w:
        for i in range(40):
            n = 25
            w.add_episode(
                observations=np.full((n + 1, 3), i / 100, np.float32),
                actions=np.zeros(n, np.int64),
                rewards=np.ones(n),
                terminations=np.eye(n, dtype=bool)[-1],
                truncations=np.zeros(n, bool),
            )
    assert w.stats()["evicted_steps"] > 0
    with trajcore.open(tmp_path / "writer") as ds:
        assert sum(n for _, n in ds._core.shard_steps) <= 100 + 25
        # The newest episodes are the ones kept.
        assert ds.episodes[-1].observations[0, 0] == pytest.approx(0.39)

    from mpe2 import simple_spread_v3

    env = trajcore.RecordParallelEpisodes(
        simple_spread_v3.parallel_env(max_cycles=25), tmp_path / "spread", capacity_steps=200
    )
    for episode in range(30):
        env.reset(seed=episode)
        while env.agents:
            env.step({a: env.action_space(a).sample() for a in env.agents})
    env.close()
    with trajcore.open(tmp_path / "spread") as ds:
        assert ds.evicted_steps > 0
        per_agent: dict[int, int] = {}
        for r, n in ds._core.shard_steps:
            per_agent[r] = per_agent.get(r, 0) + n
        # Each agent's recorder keeps its own capacity.
        assert all(n <= 200 + 25 for n in per_agent.values()), per_agent


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "10"])
def test_bad_capacity_is_refused_by_name(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="capacity_steps"):
        trajcore.RecordEpisodes(gym.make("CartPole-v1"), tmp_path / "x", capacity_steps=bad)


# Shards of 1,600 transitions: 30 in the run, two thirds of them evicted.
LIVE_CAPACITY = 16_000

WRITER = """
import sys, gymnasium as gym, trajcore
envs = trajcore.RecordVectorEpisodes(
    gym.make_vec("CartPole-v1", num_envs=8, vectorization_mode="sync"), sys.argv[1],
    capacity_steps=int(sys.argv[2]), flush_interval=0.02,
)
envs.reset(seed=0)
envs.action_space.seed(0)
for i in range(int(sys.argv[3])):
    envs.step(envs.action_space.sample())
envs.close()
print(envs.stats()["evicted_steps"])
"""


def test_a_reader_in_another_process_follows_the_evictions(tmp_path: Path) -> None:
    """A recorder in another process evicts while this one refreshes and samples: no error, no
    warning, no row that is not the episode's own, no evicted episode sampled after the refresh
    that found it gone, arrays handed out before an eviction still read, and the directory never
    holds much more than the capacity."""
    path = tmp_path / "live"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(WRITER), str(path), str(LIVE_CAPACITY), "6000"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    deadline = time.monotonic() + 180
    try:
        while not any(path.glob("*.trj")):
            assert time.monotonic() < deadline and proc.poll() in (None, 0)
        ds = None
        while ds is None or ds.num_steps == 0:
            assert time.monotonic() < deadline
            try:
                ds = trajcore.open(path) if ds is None else ds
            except TrajcoreFileNotFoundError:
                continue  # the first shard's header is not written yet
            ds.refresh()
        held = ds.episodes[0].observations  # read before any eviction
        held_copy = held.copy()
        sampled_evicted = rounds = max_on_disk = 0
        with warnings.catch_warnings():
            warnings.simplefilter("error", TrajcoreWarning)
            while proc.poll() is None or rounds == 0:
                assert time.monotonic() < deadline
                ds.refresh()
                rounds += 1
                # Shards of about a tenth of the capacity: at most ten closed ones and the open
                # one, plus the closed ones still compacting (deleted once the writer is done with
                # them: on a loaded machine a few more).
                on_disk = len(list(path.glob("*.trj")))
                max_on_disk = max(max_on_disk, on_disk)
                assert on_disk <= 2 * (10 + 2), on_disk
                if ds.num_steps == 0:
                    continue
                evicted = set(ds.evicted_episodes)
                batch = ds.sample_transitions(64, seed=rounds)
                # What refresh keeps up to date step by step is the listing less the evicted,
                # numbered as a selection of those episodes made from scratch numbers them.
                live = ds.select()
                assert live.indices == [e for e in range(ds.num_episodes) if e not in evicted]
                again = live.sample_transitions(64, seed=rounds, keys=["rewards"])
                np.testing.assert_array_equal(again["episode_index"], batch["episode_index"])
                np.testing.assert_array_equal(again["step_index"], batch["step_index"])
                sampled_evicted += sum(int(e) in evicted for e in batch["episode_index"])
                for e, s, obs in list(
                    zip(batch["episode_index"], batch["step_index"], batch["observations"], strict=True)
                )[:8]:
                    np.testing.assert_array_equal(ds.episodes[int(e)].observations[int(s)], obs)
        assert proc.wait(timeout=60) == 0
        evicted_total = int(proc.stdout.read().strip()) if proc.stdout else 0
        assert evicted_total > 0
        ds.refresh()
        assert sampled_evicted == 0
        assert ds.evicted_episodes, "the reader saw no eviction"
        np.testing.assert_array_equal(held, held_copy)
        assert ds.evicted_steps == evicted_total
        live = ds.num_steps
        with trajcore.open(path) as fresh:
            assert fresh.num_steps <= live + LIVE_CAPACITY // 10 + 8
        ds.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
