"""A training loop killed with SIGKILL loses no transition whose step returned more than the
flush interval before the kill (a transition, not an episode: those of running episodes too),
and a loop started again on the same directory continues the buffer: its capacity counts the
old and the new data, the old data is read and sampled, the eviction count goes on.

The loop runs in a real subprocess over a real gymnasium vector env, with `capacity_steps`:
`RecordVectorEpisodes`, then per vector step `refresh()` and `sample_transitions(256)` (the
learner in the recording process), or no reader at all (an actor whose learner is elsewhere:
only the recorder's timed flushes put its steps in the files). It tells the test, through its
stdout pipe, what each step gave (before the recorder records it) and when the step returned;
the test kills it on one of those messages and compares the files with them, value for value.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pytest
import trajcore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

N = 8
CAPACITY = 1600  # a shard every 160 transitions (20 vector steps)
FLUSH = 0.2

LOOP = f"""
import json, sys, time
import gymnasium as gym
import numpy as np
import trajcore

path, run, seed, learner = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "learner"
pause_at, stop_at, env_id, capacity = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], int(sys.argv[8])

def say(**message):
    sys.stdout.write(json.dumps(message) + "\\n")
    sys.stdout.flush()

class Report(gym.vector.VectorWrapper):
    '''Says what each step gave before the recorder (the wrapper above) records it.'''
    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        say(reset=obs.tolist())
        return obs, info
    def step(self, actions):
        out = self.env.step(actions)
        obs, rew, term, trunc, _ = out
        say(actions=actions.tolist(), obs=obs.tolist(), rew=rew.tolist(), term=term.tolist(), trunc=trunc.tolist())
        return out

# Pendulum's episodes run as long as the loop does (no time limit): every step is a running
# episode's.
limit = {{"max_episode_steps": 10**9}} if env_id == "Pendulum-v1" else {{}}
envs = trajcore.RecordVectorEpisodes(
    Report(gym.make_vec(env_id, num_envs={N}, vectorization_mode="sync", **limit)), path,
    capacity_steps=capacity, flush_interval={FLUSH}, metadata={{"run": run}},
)
envs.reset(seed=seed)
envs.action_space.seed(seed)
ds = None
if learner:
    envs.flush()
    ds = trajcore.open(path)
step = 0
while step != stop_at:
    envs.step(envs.action_space.sample())
    say(returned=time.monotonic())
    step += 1
    if ds is not None:
        ds.refresh()
        if ds.num_steps:
            batch = ds.sample_transitions(256, seed=step)
            assert len(batch["rewards"]) == 256
    if step == pause_at:
        say(paused=step)
        sys.stdin.readline()
envs.close()
say(closed=envs.stats()["evicted_steps"])
"""


@dataclass
class Transition:
    obs: np.ndarray
    action: Any
    reward: float
    next_obs: np.ndarray
    ended: bool
    returned: float = float("inf")  # when its step returned (unknown: not said before the kill)


@dataclass
class Loop:
    """A training loop in a subprocess and what it said, per sub-env the transitions its steps
    gave (next-step autoreset: the step after an episode's end is the reset, no transition)."""

    proc: subprocess.Popen[str]
    transitions: list[list[Transition]] = field(default_factory=lambda: [[] for _ in range(N)])
    steps: int = 0
    _last: list[Transition] = field(default_factory=list)
    _obs: np.ndarray | None = None
    _resetting: np.ndarray = field(default_factory=lambda: np.zeros(N, dtype=bool))

    @classmethod
    def start(
        cls,
        path: Path,
        run: str,
        seed: int,
        learner: bool,
        pause_at: int = -1,
        stop_at: int = -1,
        env_id: str = "CartPole-v1",
        capacity: int = CAPACITY,
    ) -> Loop:
        args = [path, run, seed, "learner" if learner else "actor", pause_at, stop_at, env_id, capacity]
        proc = subprocess.Popen(
            [sys.executable, "-c", LOOP, *map(str, args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        return cls(proc)

    @property
    def out(self) -> IO[str]:
        assert self.proc.stdout is not None
        return self.proc.stdout

    def take(self, line: str) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(line)
        if "reset" in message:
            self._obs = np.array(message["reset"], dtype=np.float32)
        elif "actions" in message:
            assert self._obs is not None
            obs = np.array(message["obs"], dtype=np.float32)
            self._last = []
            for i in range(N):
                if self._resetting[i]:
                    continue
                ended = bool(message["term"][i] or message["trunc"][i])
                action = np.asarray(message["actions"][i])
                t = Transition(self._obs[i], action, message["rew"][i], obs[i], ended)
                self.transitions[i].append(t)
                self._last.append(t)
            self._resetting = np.logical_or(message["term"], message["trunc"])
            self._obs = obs
        elif "returned" in message:
            for t in self._last:
                t.returned = message["returned"]
            self.steps += 1
        return message

    def until(self, stop: Any) -> dict[str, Any]:
        """Reads messages until `stop(message)` holds (the loop must not end first)."""
        for line in self.out:
            message = self.take(line)
            if stop(message):
                return message
        raise AssertionError(f"the loop ended after {self.steps} steps (exit {self.proc.wait(timeout=60)})")

    def kill(self) -> float:
        """SIGKILL; reads what it said before dying. Returns when the kill was sent."""
        killed = time.monotonic()
        self.proc.send_signal(signal.SIGKILL)
        for line in self.out:
            self.take(line)
        assert self.proc.wait(timeout=60) == -signal.SIGKILL
        return killed

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def transitions_of(ds: trajcore.Dataset, env: int, run: str) -> list[tuple[Any, ...]]:
    """Sub-env `env`'s transitions in the files, recording `run`'s, in the order they were
    stepped; a running episode (its latest listing, `continues`) only last."""
    s = ds.summaries()
    runs = [ds.meta(r)["metadata"]["run"] for r in range(ds.num_recordings)]
    mine = [i for i in range(ds.num_episodes) if s["env_index"][i] == env and runs[s["recording"][i]] == run]
    out: list[tuple[Any, ...]] = []
    # An episode whose first shard was evicted is listed per surviving shard (`continued`).
    for n, i in enumerate(sorted(mine, key=lambda i: (s["start_ns"][i], s["shard"][i]))):
        ep = ds.episodes[i]
        # Incomplete: a part whose start was evicted, or the last (running at the kill).
        assert ep.complete or ep.continued or n == len(mine) - 1, f"env {env}: episode {i}"
        obs, act, rew = ep.observations, ep.actions, ep.rewards
        for j in range(ep.length):
            # Whether the step ended the episode, as far as the files know (None: they cannot
            # know yet, the running episode's last step).
            last = j == ep.length - 1
            ended = None if last and ep.continues else last and (ep.terminated or ep.truncated)
            out.append((obs[j], act[j], rew[j], obs[j + 1], ended))
    return out


def check_files_hold(ds: trajcore.Dataset, loop: Loop, run: str, until: float | None) -> list[int]:
    """Per sub-env, `run`'s transitions in `ds` are a stretch of what the loop's steps gave,
    value for value, from the first one not evicted on, holding every one whose step returned
    more than `FLUSH` before `until` (the kill, or when `ds` was opened; `None` after a close:
    every one). Returns where each sub-env's stretch starts (those before it were evicted)."""
    starts = []
    for env in range(N):
        said, held = loop.transitions[env], transitions_of(ds, env, run)
        assert held, f"env {env}: nothing in the files"
        first = held[0]
        start = next(
            (k for k, t in enumerate(said) if (t.obs == first[0]).all() and (t.action == first[1]).all()),
            None,
        )
        assert start is not None, f"env {env}: the first transition in the files was never stepped"
        assert len(held) <= len(said) - start, f"env {env}: more transitions in the files than stepped"
        for k, (obs, action, reward, next_obs, ended) in enumerate(held):
            t = said[start + k]
            where = f"env {env}, transition {start + k}"
            np.testing.assert_array_equal(obs, t.obs, err_msg=where)
            np.testing.assert_array_equal(next_obs, t.next_obs, err_msg=where)
            np.testing.assert_array_equal(action, t.action.astype(action.dtype), err_msg=where)
            assert reward == np.float64(t.reward).astype(type(reward)), where
            assert ended is None or ended == t.ended, where
        due = [k for k, t in enumerate(said) if until is None or t.returned < until - FLUSH]
        lost = [k for k in due if k >= start + len(held)]
        if lost and until is not None:
            ago = until - said[lost[0]].returned
            raise AssertionError(f"env {env}: transitions {lost[:5]}... ({len(lost)}) lost, the first {ago:.3f} s old")
        assert not lost, f"env {env}: transitions {lost[:5]}... ({len(lost)}) lost"
        starts.append(start)
    return starts


def open_settled(path: Path) -> tuple[trajcore.Dataset, int, float]:
    """The dataset, opened while no eviction was logged, the evictions counted then (a paused
    loop's last shard may still be compacting, then evicting the oldest: a log read later may
    count a shard the listing holds), and when it was opened."""

    def logged() -> int:
        log = path / "trajcore-evictions.json"
        return int(json.loads(log.read_text())["evicted_steps"]) if log.exists() else 0

    for _ in range(100):
        before, opened = logged(), time.monotonic()
        ds = trajcore.open(path)
        if ds.evicted_steps == before:
            return ds, before, opened
        ds.close()
    raise AssertionError("the eviction log kept changing")


@pytest.mark.parametrize(
    ("learner", "env_id", "capacity"),
    [(True, "CartPole-v1", CAPACITY), (False, "Pendulum-v1", 10**7)],
    ids=["learner-in-process", "actor-only-running-episodes"],
)
def test_a_kill_loses_no_transition_older_than_the_flush_interval(
    tmp_path: Path, learner: bool, env_id: str, capacity: int
) -> None:
    """Killed mid-loop after some flush intervals of stepping: every transition whose step
    returned more than `FLUSH` before the kill is in the files, value for value; what is not
    there was evicted (counted). With a learner in the loop (its refreshes flush too), CartPole's
    short episodes over many evicted shards; without one, Pendulum's episodes that never end and
    no shard rollover: only the recorder's timed flushes list their steps."""
    loop = Loop.start(tmp_path / "buf", "first", seed=0, learner=learner, env_id=env_id, capacity=capacity)
    try:
        first = loop.until(lambda m: "returned" in m)["returned"]
        # Some flush intervals (and, bounded, several evictions), then kill mid-step.
        loop.until(lambda m: "returned" in m and m["returned"] > first + 4 * FLUSH and loop.steps * N > 2 * CAPACITY)
        killed = loop.kill()
    finally:
        loop.stop()
    with trajcore.open(tmp_path / "buf") as ds:
        starts = check_files_hold(ds, loop, "first", killed)
        assert ds.evicted_steps == sum(starts)
        assert len(ds.problems) <= 1  # at most the record the kill cut in half
        s = ds.summaries()
        if capacity == CAPACITY:
            assert ds.evicted_steps > 0
            assert s["continues"].any(), "the running episodes are listed"
            assert ds.num_steps <= CAPACITY + 2 * (CAPACITY // 10 + N)  # the closed shards, and the open one
        else:
            assert ds.num_episodes == N and s["continues"].all() and not s["complete"].any()
            assert ds.num_steps > 0
        batch = ds.sample_transitions(256, seed=0)
        assert len(batch["rewards"]) == 256


def test_a_restarted_loop_continues_the_buffer(tmp_path: Path) -> None:
    """The loop killed, then started again on the same directory (another seed): it counts what
    is there (old and new data within the capacity), reads and samples the old data, and goes on
    evicting it, oldest first, with the count going on from where the killed loop left it."""
    path = tmp_path / "buf"
    first = Loop.start(path, "first", seed=0, learner=True)
    try:
        first.until(lambda m: "returned" in m and first.steps * N > 2 * CAPACITY)
        killed = first.kill()
    finally:
        first.stop()
    with trajcore.open(path) as ds:
        check_files_hold(ds, first, "first", killed)
        # What the shards hold: the listed transitions, and the rows of running episodes that a
        # chunk took to the file after their last flush (not listed: younger than a flush interval).
        evicted_before, held_before = ds.evicted_steps, sum(n for _, n in ds._core.shard_steps)
        listed_before = ds.num_steps
        assert listed_before <= held_before
    assert held_before > CAPACITY // 2

    # Three shards' worth of new steps: the old data is still mostly there.
    second = Loop.start(path, "second", seed=1, learner=True, pause_at=60, stop_at=400)
    try:
        second.until(lambda m: "paused" in m)
        ds, evicted, opened = open_settled(path)
        with ds:
            runs = [ds.meta(r)["metadata"]["run"] for r in range(ds.num_recordings)]
            assert set(runs) == {"first", "second"}
            # The old data: the newest of it, value for value; its evictions counted on.
            starts = check_files_hold(ds, first, "first", killed)
            assert evicted == sum(starts) > evicted_before
            check_files_hold(ds, second, "second", opened)
            # Old and new together within the capacity (plus the shard being written, and the
            # one a rollover may just have closed while its predecessors are deleted).
            assert ds.num_steps <= CAPACITY + 2 * (CAPACITY // 10 + N)
            s = ds.summaries()
            old = np.array([runs[r] == "first" for r in s["recording"]])
            assert 0 < s["length"][old].sum() < listed_before
            batch = ds.sample_transitions(4096, seed=0)
            assert old[batch["episode_index"]].any() and not old[batch["episode_index"]].all()
        assert second.proc.stdin is not None
        second.proc.stdin.write("go\n")
        second.proc.stdin.flush()
        closed = second.until(lambda m: "closed" in m)
        assert second.proc.wait(timeout=60) == 0
    finally:
        second.stop()
    with trajcore.open(path) as ds:
        # 400 steps (3,200 transitions) later, the old data is all gone, counted.
        assert [ds.meta(r)["metadata"]["run"] for r in range(ds.num_recordings)] == ["second"]
        starts = check_files_hold(ds, second, "second", None)
        assert ds.evicted_steps == held_before + evicted_before + sum(starts)
        assert closed["closed"] == held_before + sum(starts)  # this recording's evictions
        assert ds.num_steps <= CAPACITY + CAPACITY // 10 + N
        assert ds.problems == []
