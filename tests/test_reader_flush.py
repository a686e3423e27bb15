"""A refresh in the recording process asks the recorder to flush without waiting for a writer
that is behind, as long as a flush already written covers the steps 100 ms old (the core decides:
rust/core/src/writer/reader_flush.rs has the table tests); it waits only when the promise needs."""

from __future__ import annotations

import functools
import time
import types
from pathlib import Path

import gymnasium as gym
import pytest
import trajcore
from trajcore.record import session

NUM_ENVS = 2
# The core's fault hook: the writer sleeps this long per step, so 5 steps keep it busy 150 ms.
SLOW_STEP_MS = 30


def _wait_until(t: float) -> None:
    """Polls the clock until `t` (the condition the promise is about is time itself)."""
    while time.monotonic() < t:
        pass


def _one_round(path: Path) -> bool | None:
    """Steps, refreshes at once (the first refresh waits: nothing was flushed for it), steps 5
    more times (the slow writer is then 150 ms behind), and refreshes again 50 ms after the first
    (a new flush is due) but within 100 ms of its flush. Every refresh lists every step that
    returned 100 ms before it. Returns whether the second refresh listed every step (it waited
    for the writer), or None when the machine was too slow for the second refresh to fall within
    100 ms of the first."""
    envs = trajcore.RecordVectorEpisodes(
        gym.make_vec("Pendulum-v1", num_envs=NUM_ENVS, vectorization_mode="sync"), path
    )
    envs.reset(seed=0)
    envs.action_space.seed(0)
    returned: list[float] = []  # when each vector step returned

    def step(n: int) -> None:
        for _ in range(n):
            envs.step(envs.action_space.sample())
            returned.append(time.monotonic())

    def refresh() -> float:
        started = time.monotonic()
        ds.refresh()
        old = sum(t <= started - 0.1 for t in returned)
        assert ds.num_steps >= NUM_ENVS * old, (ds.num_steps, old)  # the promise
        return started

    step(2)
    envs.flush()  # the first refresh then waits for an idle writer only
    ds = trajcore.open(path)
    first = refresh()
    assert ds.num_steps == NUM_ENVS * 2
    step(5)
    _wait_until(time.monotonic() + 0.05)
    refresh()
    ended = time.monotonic()
    waited = ds.num_steps == NUM_ENVS * len(returned)
    # The last steps are 100 ms old: this refresh waits for the writer if it must.
    _wait_until(returned[-1] + 0.1)
    refresh()
    assert ds.num_steps == NUM_ENVS * len(returned)
    envs.close()
    ds.close()
    return waited if ended < first + 0.1 else None


def test_a_refresh_does_not_wait_for_a_slow_writer_yet_lists_every_step_100_ms_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = functools.partial(trajcore._core.Recorder, test_faults=f'{{"slow_step_ms": {SLOW_STEP_MS}}}')
    monkeypatch.setattr(session, "_core", types.SimpleNamespace(**{**vars(trajcore._core), "Recorder": slow}))
    outcomes = []
    for attempt in range(5):  # a loaded machine can miss the 50 ms window: try again
        outcomes.append(_one_round(tmp_path / str(attempt)))
        if outcomes[-1] is not None:
            break
    assert outcomes[-1] is False, f"the second refresh waited for the writer (or never ran in time): {outcomes}"
