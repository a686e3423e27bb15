"""A learner sees fresh transitions, running episodes included: in the recording process, every
transition whose step returned 100 ms before its `refresh()`; in another process, within the
recorder's flush interval; with the bytes on disk of a recording no one read while it ran
(within 5%)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import trajcore
from helpers import a_shard_started


def _wait_until(t: float) -> None:
    """Polls the clock until `t` (the condition the promise is about is time itself)."""
    while time.monotonic() < t:
        pass


def test_in_process_refresh_sees_running_episodes(tmp_path: Path) -> None:
    """Pendulum's episodes run 200 steps: after 150 steps none has ended, and a refresh 100 ms
    after the last step lists every one of them, each row the env's."""
    envs = trajcore.RecordVectorEpisodes(gym.make_vec("Pendulum-v1", num_envs=4, vectorization_mode="sync"), tmp_path)
    obs, _ = envs.reset(seed=0)
    envs.action_space.seed(0)
    seen = [obs]
    envs.flush()
    ds = trajcore.open(tmp_path)
    for round_ in range(3):
        for _ in range(50):
            obs, *_ = envs.step(envs.action_space.sample())
            seen.append(obs)
        stepped = time.monotonic()
        _wait_until(stepped + 0.1)
        ds.refresh()
        steps = 50 * (round_ + 1)
        assert ds.num_steps == 4 * steps, (round_, ds.num_steps)
        assert ds.num_episodes == 4
        s = ds.summaries()
        assert (s["length"] == steps).all() and not s["complete"].any() and s["continues"].all()
        for ep in ds.episodes:
            want = np.stack([o[ep.env_index] for o in seen])
            np.testing.assert_array_equal(ep.observations, want)
        batch = ds.sample_transitions(64, seed=round_)
        assert batch["step_index"].max() < steps
    envs.close()
    # Closed: each episode listed once, whole, incomplete (a fresh open lists the same).
    ds.refresh()
    with trajcore.open(tmp_path) as fresh:
        assert fresh.num_episodes == ds.num_episodes == 4
        assert fresh.num_steps == ds.num_steps == 4 * 150


WRITER = """
import sys, gymnasium as gym, trajcore
envs = trajcore.RecordVectorEpisodes(
    gym.make_vec("Pendulum-v1", num_envs=4, vectorization_mode="sync"), sys.argv[1], flush_interval=0.5
)
envs.reset(seed=0)
envs.action_space.seed(0)
for _ in range(int(sys.argv[2])):
    envs.step(envs.action_space.sample())
print("stepped", flush=True)
sys.stdin.readline()  # stays open, not stepping, until the test says
envs.close()
"""


def test_another_process_sees_running_episodes_within_the_flush_interval(tmp_path: Path) -> None:
    """A recorder in another process steps Pendulum (episodes of 200 steps) 120 times and waits:
    with no flush called and no episode ended, this process lists every transition, each
    running episode as far as it went (`continues`), value for value, once the recorder's timed
    flush (every 0.5 s) wrote it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(WRITER), str(tmp_path / "d"), "120"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "stepped"
        stepped = time.monotonic()
        ds = None
        # Within the flush interval (0.5 s) of the last step; the margin is for a loaded machine.
        deadline = stepped + 0.5 + 4.5
        while ds is None or ds.num_steps < 4 * 120:
            assert time.monotonic() < deadline, f"{ds.num_steps if ds else 0} of {4 * 120} transitions seen"
            if ds is None and a_shard_started(tmp_path / "d"):
                ds = trajcore.open(tmp_path / "d")
            elif ds is not None:
                ds.refresh()
        seen_after = time.monotonic() - stepped
        assert ds.num_steps == 4 * 120 and ds.num_episodes == 4
        s = ds.summaries()
        assert not s["complete"].any() and s["continues"].all() and (s["length"] == 120).all()
        # The same seeded loop here: the same values.
        envs = gym.make_vec("Pendulum-v1", num_envs=4, vectorization_mode="sync")
        obs, _ = envs.reset(seed=0)
        envs.action_space.seed(0)
        seen, actions = [obs], []
        for _ in range(120):
            actions.append(envs.action_space.sample())
            seen.append(envs.step(actions[-1])[0])
        for ep in ds.episodes:
            np.testing.assert_array_equal(ep.observations, np.stack([o[ep.env_index] for o in seen]))
            np.testing.assert_array_equal(ep.actions, np.stack([a[ep.env_index] for a in actions]))
        proc.stdin.write("close\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
        ds.refresh()
        assert ds.num_episodes == 4 and ds.num_steps == 4 * 120  # listed whole, in place
        print(f"seen {seen_after:.2f} s after the last step")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.trj"))


def test_bytes_stay_within_5_percent_of_a_recording_no_one_read(tmp_path: Path) -> None:
    """The same steps recorded twice, once with a learner refreshing after every vector step
    (a flush, with progress parts, every 50 ms at most): within 5% of the bytes."""
    sizes = []
    for read in (False, True):
        path = tmp_path / ("read" if read else "alone")
        envs = trajcore.RecordVectorEpisodes(gym.make_vec("Pendulum-v1", num_envs=8, vectorization_mode="sync"), path)
        envs.reset(seed=0)
        envs.action_space.seed(0)
        envs.flush()
        ds = trajcore.open(path)
        for _ in range(3000):
            envs.step(envs.action_space.sample())
            if read:
                ds.refresh()
        envs.close()
        ds.close()
        sizes.append(_dir_bytes(path))
    assert sizes[1] <= 1.05 * sizes[0], sizes


def test_timed_flushes_parts_are_dropped_when_the_shard_closes(tmp_path: Path) -> None:
    """A recorder whose timed flush comes every millisecond writes a progress part of each
    running episode at nearly every step; the shard's compaction keeps only the latest record of
    each episode, so the closed recording takes within 5% of the bytes of one with no timed
    flush at all (and no part)."""
    import format_decoder as fd

    sizes = []
    for flush_interval in (3600.0, 0.001):
        path = tmp_path / str(flush_interval)
        envs = gym.make_vec("Pendulum-v1", num_envs=8, vectorization_mode="sync")
        with trajcore.RecordVectorEpisodes(envs, path, flush_interval=flush_interval) as rec:
            rec.reset(seed=0)
            rec.action_space.seed(0)
            for _ in range(3000):
                rec.step(rec.action_space.sample())
        stats = rec.stats()
        sizes.append(_dir_bytes(path))
        # One record per episode: 8 sub-envs x 15 episodes of 200 steps.
        (shard,) = fd.DecodedDataset(path).shards
        ids = [e.episode_id for e, _ in shard.episodes]
        assert sorted(ids) == list(range(8 * 15)), (flush_interval, len(ids))
    assert stats["shards_compacted"] == 1
    assert sizes[1] <= 1.05 * sizes[0], sizes


def test_an_episode_discarded_after_a_refresh_listed_it_leaves_sampling(tmp_path: Path) -> None:
    """A refresh lists the running episode; `discard` drops it: the next refresh samples only
    what a fresh open lists (the dropped listing stays readable at its index)."""
    env = trajcore.RecordEpisodes(gym.make("Pendulum-v1"), tmp_path)
    env.reset(seed=0)
    env.action_space.seed(0)
    env.flush()
    ds = trajcore.open(tmp_path)
    for _ in range(40):
        env.step(env.action_space.sample())
    _wait_until(time.monotonic() + 0.1)
    ds.refresh()
    assert ds.num_steps == 40
    dropped = ds.episodes[0].observations
    env.discard()
    env.reset()
    for _ in range(5):
        env.step(env.action_space.sample())
    _wait_until(time.monotonic() + 0.1)
    ds.refresh()
    assert ds.num_steps == 5 and ds.evicted_episodes == [0]
    assert (ds.sample_transitions(32, seed=0)["episode_index"] == 1).all()
    np.testing.assert_array_equal(ds.episodes[0].observations, dropped)
    env.close()
    ds.refresh()
    with trajcore.open(tmp_path) as fresh:
        assert fresh.num_steps == ds.num_steps == 5


def test_an_episode_a_timed_flush_listed_then_discarded_at_its_end_is_listed_nowhere(tmp_path: Path) -> None:
    """Pendulum's 200 steps with a flush every millisecond: a timed flush lists the episode that
    just ended (held: `discard` still reaches it) as a part, its flag truncated. Discarded at its
    end, it is listed nowhere: a discard notice follows its part."""
    import format_decoder as fd

    env = trajcore.RecordEpisodes(gym.make("Pendulum-v1"), tmp_path, flush_interval=0.001)
    env.reset(seed=0)
    env.action_space.seed(0)
    truncated = False
    while not truncated:
        *_, truncated, _ = env.step(env.action_space.sample())

    # Read with the test decoder: a refresh in this process would flush, making the episode final.
    def part_of_the_end() -> bool:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            shards = [fd.open_shard(p) for p in env.shard_paths if a_shard_started(tmp_path)]
        return any(e.continues and e.length == 200 and e.truncated for s in shards for e, _ in s.episodes)

    deadline = time.monotonic() + 30
    while not part_of_the_end():
        assert time.monotonic() < deadline, "no timed flush listed the ended episode"
    env.discard()
    env.reset()
    for _ in range(5):
        env.step(env.action_space.sample())
    env.close()
    with trajcore.open(tmp_path) as fresh:
        assert fresh.num_episodes == 1 and fresh.num_steps == 5
