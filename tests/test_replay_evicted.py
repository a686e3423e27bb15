"""What a reader of a bounded recording (`capacity_steps`) holds of the shards it deleted: a
loop that refreshes and samples lets go of each one at the refresh that finds it deleted (its
file, its map, where its chunks were), so what it holds stays bounded by what the capacity
keeps; an `Episode` taken before the eviction keeps its shards and reads its values; an episode
whose first shards were deleted is listed once, as the part the others hold."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from test_replay_buffer import live_cartpole_buffer
from trajcore.errors import InvalidArgumentError

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self (Linux)")


def _held(path: Path) -> dict[str, int]:
    """Shards of `path` this process holds: `evicted` files open (a descriptor or a map) whose
    name is gone from the directory, `mapped_kb` resident pages of every shard map."""
    gone: set[str] = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        name = target.removesuffix(" (deleted)")
        if name.startswith(str(path)) and name.endswith(".trj") and not os.path.exists(name):
            gone.add(name)
    mapped_kb, current = 0, None
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                name = " ".join(fields[5:]).removesuffix(" (deleted)") if len(fields) > 5 else ""
                current = name if name.startswith(str(path)) else None
                if current and not os.path.exists(current):
                    gone.add(current)
            elif current and fields[0] == "Rss:":
                mapped_kb += int(fields[1])
    return {"evicted": len(gone), "mapped_kb": mapped_kb}


def _chunks(ds: trajcore.Dataset) -> int:
    return sum(c["chunks"] for c in ds._core.column_stats())


CAPACITY = 4000


def test_a_loop_that_keeps_no_episode_holds_no_evicted_shard(tmp_path: Path) -> None:
    """The training loop (step, refresh, sample) over three capacities: once the recorder is
    done, a refresh leaves no deleted shard open or mapped, and what the reader keeps per chunk
    and per mapped page at three capacities is what it kept at one (the buffer is full at both;
    before, both grew with every transition recorded). The recorder flushes every 10 vector
    steps, and only then (no timer), so the chunks it cuts do not depend on the machine's speed."""
    path = tmp_path / "buffer"
    envs = live_cartpole_buffer(path, num_envs=8, capacity=CAPACITY)
    ds = trajcore.open(path)
    marks: list[dict[str, int]] = []
    for _ in range(3):
        for i in range(CAPACITY // 8):
            envs.step(envs.action_space.sample())
            if i % 10 == 0:
                envs.flush()
                ds.refresh()
            if ds.num_steps:
                ds.sample_transitions(256, seed=i)
        marks.append({"chunks": _chunks(ds), **_held(path)})
    envs.close()
    ds.refresh()
    assert envs.stats()["evicted_steps"] >= CAPACITY, envs.stats()
    assert _held(path)["evicted"] == 0
    one, three = marks[0], marks[2]
    # At one capacity the buffer just filled; from then on the chunks listed (those of the shards
    # kept, and one entry per lane and column for all the evicted ones) and the shard pages
    # mapped stay within 1.2x (holding what was evicted, they took 3x).
    assert three["chunks"] <= 1.2 * one["chunks"], marks
    assert three["mapped_kb"] <= 1.2 * one["mapped_kb"] + 256, marks
    ds.sample_transitions(256, seed=0)  # still samples
    ds.close()


def _pendulum(path: Path, episodes: int, **options: Any) -> None:
    """Pendulum's 200-step episodes, `episodes` of them, actions from a seeded space."""
    env = trajcore.RecordEpisodes(gym.make("Pendulum-v1"), path, **options)
    env.action_space.seed(0)
    env.reset(seed=0)
    for _ in range(episodes * 200):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()


def test_an_episode_whose_first_shards_were_evicted_is_listed_once(tmp_path: Path) -> None:
    """A capacity of 100 steps rolls shards over every 10: an episode of 200 spans 20 shards, and
    the ones it began in are deleted. A fresh open lists it once, as the part the surviving
    shards hold (continued, not complete), with the values it had in an unbounded recording;
    samples come from those rows only."""
    _pendulum(tmp_path / "bounded", 2, capacity_steps=100)
    _pendulum(tmp_path / "all", 2)
    with trajcore.open(tmp_path / "bounded") as ds, trajcore.open(tmp_path / "all") as full:
        assert len(ds._core.shard_steps) >= 9
        ids = [e.episode_id for e in ds.episodes]
        assert len(ids) == len(set(ids)) == 1, [(e.episode_id, e.length, e.continued) for e in ds.episodes]
        part = ds.episodes[0]
        assert part.continued and not part.complete and part.is_part
        assert ds.num_steps == part.length <= 100 + 10
        whole = full.episodes[part.episode_id]
        np.testing.assert_array_equal(part.observations, whole.observations[-(part.length + 1) :])
        np.testing.assert_array_equal(part.actions, whole.actions[-part.length :])
        np.testing.assert_array_equal(part.rewards, whole.rewards[-part.length :])
        assert part.truncated == whole.truncated
        assert part.episode_return == pytest.approx(whole.rewards[-part.length :].sum())
        batch = ds.sample_transitions(64, seed=0)
        assert (batch["episode_index"] == 0).all()
        np.testing.assert_array_equal(batch["observations"], part.observations[batch["step_index"]])


def test_an_episode_taken_before_the_eviction_reads_its_values(tmp_path: Path) -> None:
    """An `Episode` taken before the writer deleted its shard, and not read until after, reads
    the values it was listed with; one taken from the listing after the dataset let go of the
    shard fails, naming the eviction; and once the first is dropped, a refresh lets go of its
    shards too."""
    path = tmp_path / "buffer"
    envs = trajcore.RecordVectorEpisodes(
        gym.make_vec("CartPole-v1", num_envs=8, vectorization_mode="sync"), path, capacity_steps=CAPACITY
    )
    envs.reset(seed=0)
    envs.action_space.seed(0)
    for _ in range(CAPACITY // 8 // 2):
        envs.step(envs.action_space.sample())
    envs.flush()
    ds = trajcore.open(path)
    kept = ds.episodes[0]  # taken, not read
    with trajcore.open(path) as before:
        want = {k: getattr(before.episodes[0], k).copy() for k in ("observations", "actions", "rewards")}
    first_shard = min(path.glob("*.trj"))
    for i in range(3 * CAPACITY // 8):
        envs.step(envs.action_space.sample())
        ds.refresh()
        ds.sample_transitions(32, seed=i)
    envs.close()
    ds.refresh()
    assert not os.path.exists(first_shard), "the writer deleted the first shard"
    evicted = ds.evicted_episodes
    assert 0 in evicted and len(evicted) > 100
    for k, v in want.items():
        np.testing.assert_array_equal(getattr(kept, k), v)
    assert _held(path)["evicted"] >= 1  # the kept episode's shard
    # The last episode evicted is in a later shard than the kept one's: let go of.
    with pytest.raises(InvalidArgumentError, match="evicted"):
        _ = ds.episodes[evicted[-1]].observations
    del kept
    ds.refresh()
    assert _held(path)["evicted"] == 0
    with pytest.raises(InvalidArgumentError, match="evicted"):
        _ = ds.episodes[0].rewards
    # So does a batch over a selection that holds it (the buffer itself samples what it keeps).
    with pytest.raises(InvalidArgumentError, match="evicted"):
        ds.episodes[0:3].sample_transitions(4, seed=0)
    assert len(ds.sample_transitions(256, seed=0)["rewards"]) == 256
    ds.close()
