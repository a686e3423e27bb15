"""No call blocks forever: every public call that puts something into the recorder's ring refuses
a value that can never fit the ring at once, with `InvalidArgumentError` naming its size and
`ring_bytes` (issue 23, point 2)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import trajcore
from gymnasium import spaces
from helpers import SpaceEnv
from trajcore import InvalidArgumentError

RING = 1 << 16  # the smallest ring a recorder takes
BIG = 4 * RING  # can never fit it
PROMPT_S = 10.0  # far more than any refusal takes; a call that blocks never returns


def prompt(call: Callable[[], Any]) -> BaseException | None:
    """Runs `call` in a daemon thread and returns what it raised (None if it returned); fails the
    test when it is still running after `PROMPT_S` (a daemon thread does not hold up the exit)."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            raised.append(None)
        except BaseException as e:
            raised.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(PROMPT_S)
    assert not thread.is_alive(), f"the call still blocks after {PROMPT_S} s"
    return raised[0]


def assert_refused(call: Callable[[], Any]) -> InvalidArgumentError:
    error = prompt(call)
    assert isinstance(error, InvalidArgumentError), f"expected InvalidArgumentError, got {error!r}"
    message = str(error)
    assert "ring_bytes" in message, message
    assert any(ch.isdigit() for ch in message), message
    return error


def single(tmp_path: Path, info: dict[str, Any] | None = None, **options: Any) -> trajcore.RecordEpisodes:
    extra = {} if info is None else info  # the caller's dict: the test changes it between calls
    env = SpaceEnv(spaces.Box(-1.0, 1.0, (4,), np.float32), infos=False, extra_info=lambda _t: extra)
    return trajcore.RecordEpisodes(env, tmp_path / "run", ring_bytes=RING, **options)


def vector(tmp_path: Path) -> trajcore.RecordVectorEpisodes:
    def make() -> gym.Env[Any, Any]:
        return SpaceEnv(spaces.Box(-1.0, 1.0, (4,), np.float32), infos=False)

    envs = gym.vector.SyncVectorEnv([make, make])
    return trajcore.RecordVectorEpisodes(envs, tmp_path / "run", ring_bytes=RING)


def test_set_episode_metadata_too_big_for_the_ring_is_refused_at_once(tmp_path: Path) -> None:
    env = single(tmp_path)
    env.reset(seed=0)
    error = assert_refused(lambda: env.set_episode_metadata({"s": "y" * BIG}))
    assert str(BIG) in str(error).replace(",", "") or "bytes" in str(error)
    # The recorder goes on: smaller metadata and the steps after are recorded.
    env.set_episode_metadata({"s": "small"})
    env.step(env.action_space.sample())
    env.close()
    ds = trajcore.open(tmp_path / "run")
    assert ds.episodes[0].metadata["s"] == "small"


def test_vector_set_episode_metadata_too_big_for_the_ring_is_refused_at_once(tmp_path: Path) -> None:
    env = vector(tmp_path)
    env.reset(seed=0)
    assert_refused(lambda: env.set_episode_metadata(1, {"s": "y" * BIG}))
    env.step(env.action_space.sample())
    env.close()


def test_episode_metadata_callback_too_big_for_the_ring_is_refused_at_once(tmp_path: Path) -> None:
    env = single(tmp_path, episode_metadata=lambda _episode: {"s": "y" * BIG})
    env.reset(seed=0)

    def run_to_the_end() -> None:
        for _ in range(100):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                return

    assert_refused(run_to_the_end)


def test_info_values_too_big_for_the_ring_are_refused_at_once(tmp_path: Path) -> None:
    info: dict[str, Any] = {}
    env = single(tmp_path, info)
    info["a"] = np.zeros(BIG, np.uint8)
    assert_refused(lambda: env.reset(seed=0))
    info.clear()
    env.reset(seed=1)
    info["b"] = np.zeros(BIG, np.uint8)
    assert_refused(lambda: env.step(env.action_space.sample()))
    info.clear()
    info["a" * BIG] = 1  # a key whose name alone can never fit
    assert_refused(lambda: env.reset(seed=2))
    # The recorder still records what fits.
    info.clear()
    env.reset(seed=3)
    env.step(env.action_space.sample())
    env.close()


def test_custom_data_too_big_for_the_ring_is_refused_at_once(tmp_path: Path) -> None:
    env = single(tmp_path)
    env.reset(seed=0)
    env.record(big=np.zeros(BIG, np.uint8))
    assert_refused(lambda: env.step(env.action_space.sample()))


def test_vector_steps_too_big_for_the_ring_are_refused_at_once(tmp_path: Path) -> None:
    def make() -> gym.Env[Any, Any]:
        return SpaceEnv(spaces.Box(-1.0, 1.0, (BIG // 8,), np.float64), infos=False)

    envs = gym.vector.SyncVectorEnv([make, make])
    env = trajcore.RecordVectorEpisodes(envs, tmp_path / "run", ring_bytes=RING)
    assert_refused(lambda: env.reset(seed=0))


def test_single_steps_too_big_for_the_ring_are_refused_at_once(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(
        SpaceEnv(spaces.Box(-1.0, 1.0, (BIG // 8,), np.float64), infos=False), tmp_path / "run", ring_bytes=RING
    )
    assert_refused(lambda: env.reset(seed=0))
