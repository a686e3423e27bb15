"""A writer killed with SIGKILL loses at most its last second; the GIL is released while the
recorder waits on the writer thread."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from helpers import assert_tree_equal, run_single, stack

CHILD = """
import sys, time
import gymnasium as gym
import trajcore
env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), sys.argv[1], {"child": True}, flush_interval=0.2)
env.action_space.seed(0)
env.reset(seed=0)
episodes = 0
while True:
    _, _, term, trunc, _ = env.step(env.action_space.sample())
    if term or trunc:
        episodes += 1
        if episodes == 25:
            env.flush()  # every episode ended so far is in the file now
            print("FLUSHED", episodes, flush=True)
        env.reset()
        if episodes >= 25:
            time.sleep(0.01)  # keep stepping slowly: the kill lands mid-episode
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_sigkilled_writer_keeps_every_flushed_episode(tmp_path: Path) -> None:
    path = tmp_path / "killed"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True, env={**os.environ}
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("FLUSHED"), f"the child did not record: {line!r}"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    # What the same seeded run produces, without a recorder.
    env = gym.make("CartPole-v1")
    with trajcore.open(path) as ds:
        assert ds.metadata == {"child": True}
        assert ds.num_episodes >= 25
        want = run_single(env, episodes=ds.num_episodes, seed=0)
        for got, w in zip(ds.episodes, want, strict=True):
            assert got.complete
            assert got.length == w.length
            assert_tree_equal(got.observations, stack(w.observations, env.observation_space))
            assert_tree_equal(got.actions, np.array(w.actions, dtype=np.int64))
            assert_tree_equal(got.rewards, np.array(w.rewards))
        # A recovered (unfinished) file is not damage: no problem for a clean kill between records,
        # at most one for a record cut in half.
        assert len(ds.problems) <= 1


class BigFrames(gym.Env[np.ndarray, int]):
    """Returns precomputed 128x128x3 frames: stepping costs next to nothing, so the writer thread
    (zstd level 19) falls far behind and flush() has real waiting to do."""

    observation_space = spaces.Box(0, 255, (128, 128, 3), np.uint8)
    action_space = spaces.Discrete(2)

    def __init__(self) -> None:
        self.frames = np.random.default_rng(0).integers(0, 255, (8, 128, 128, 3), dtype=np.uint8)
        self.t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self.t = 0
        return self.frames[0], {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self.frames[self.t % 8], 1.0, False, self.t >= 50, {}


def test_another_thread_runs_while_the_recorder_waits(tmp_path: Path) -> None:
    """The counter thread only advances during flush() if it releases the GIL while waiting for
    the writer thread to compress the backlog."""
    env = trajcore.RecordEpisodes(
        BigFrames(), tmp_path / "gil", zstd_level=19, ring_bytes=256 << 20, flush_interval=60.0
    )
    env.reset()
    for _ in range(3):
        for _ in range(50):
            env.step(0)
        env.reset()

    counter = [0]
    stop = threading.Event()
    started = threading.Event()

    def count() -> None:
        started.set()
        while not stop.is_set():
            counter[0] += 1

    thread = threading.Thread(target=count)
    thread.start()
    try:
        started.wait()
        before = counter[0]
        start = time.perf_counter()
        env.flush()
        elapsed = time.perf_counter() - start
        during = counter[0] - before
    finally:
        stop.set()
        thread.join()
    env.close()
    assert elapsed > 0.05, f"too little work to tell ({elapsed:.3f} s)"
    # With the GIL held through flush() the counter could not move at all.
    assert during > 10_000, f"the other thread ran {during} times in {elapsed:.3f} s"
    with trajcore.open(tmp_path / "gil") as ds:
        assert ds.num_episodes == 3
        assert ds.num_steps == 150
        assert_tree_equal(ds.episodes[1].observations[3], env.unwrapped.frames[3])
