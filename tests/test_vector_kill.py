"""A vector recording killed with SIGKILL: every episode that reached the file reads back,
value for value what the seeded sub-envs produced, and each sub-env's running episode as far as
the last flush listed it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import trajcore

N = 4
CHILD = f"""
import sys, time
import gymnasium as gym
import numpy as np
import trajcore
envs = trajcore.RecordVectorEpisodes(
    gym.make_vec("CartPole-v1", num_envs={N}, vectorization_mode="sync"), sys.argv[1], flush_interval=0.2
)
rng = np.random.default_rng(0)
envs.reset(seed=0)
ended = 0
flushed = False
while True:
    _, _, term, trunc, _ = envs.step(rng.integers(0, 2, {N}))
    ended += int((term | trunc).sum())
    if ended >= 40 and not flushed:
        envs.flush()  # every episode ended so far is in the file now
        print("FLUSHED", ended, flush=True)
        flushed = True
    if flushed:
        time.sleep(0.005)  # keep stepping slowly: the kill lands mid-episode
"""


def replay(steps: int) -> list[list[dict[str, list[object]]]]:
    """Per sub-env, the episodes the same seeded loop produces (next-step autoreset)."""
    envs = gym.make_vec("CartPole-v1", num_envs=N, vectorization_mode="sync")
    rng = np.random.default_rng(0)
    obs, _ = envs.reset(seed=0)
    episodes: list[list[dict[str, list[object]]]] = [[] for _ in range(N)]
    current = [{"obs": [obs[i]], "act": [], "rew": []} for i in range(N)]
    resetting = np.zeros(N, dtype=bool)
    for _ in range(steps):
        actions = rng.integers(0, 2, N)
        obs, rew, term, trunc, _ = envs.step(actions)
        for i in range(N):
            if resetting[i]:
                current[i] = {"obs": [obs[i]], "act": [], "rew": []}
                continue
            current[i]["obs"].append(obs[i])
            current[i]["act"].append(actions[i])
            current[i]["rew"].append(rew[i])
            if term[i] or trunc[i]:
                episodes[i].append(current[i])
        resetting = term | trunc
    envs.close()
    return episodes


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_sigkilled_vector_recording_keeps_every_episode_that_reached_the_file(tmp_path: Path) -> None:
    path = tmp_path / "killed"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("FLUSHED"), f"the child did not record: {line!r}"
    ended = int(line.split()[1])
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    with trajcore.open(path) as ds:
        assert ds.num_episodes >= ended >= 40
        per_env = [ds.select(env_index=i) for i in range(N)]
        want = replay(steps=5000)  # far more than the child made before the kill
        for i in range(N):
            assert 0 < len(per_env[i]) < len(want[i])
            for n, (got, w) in enumerate(zip(per_env[i], want[i], strict=False)):
                assert got.env_index == i
                # The episode running at the kill is listed as far as the last flush took it (a
                # part that continues), its steps the first of the replayed episode's.
                steps = len(w["act"]) if got.complete else got.length
                assert got.complete or (n == len(per_env[i]) - 1 and got.continues and 0 < steps <= len(w["act"]))
                np.testing.assert_array_equal(got.observations, np.array(w["obs"][: steps + 1]))
                np.testing.assert_array_equal(got.actions, np.array(w["act"][:steps]))
                np.testing.assert_array_equal(got.rewards, np.array(w["rew"][:steps]))
        assert len(ds.problems) <= 1  # at most the record the kill cut in half
