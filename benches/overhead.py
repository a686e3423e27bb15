"""Interleaved timing of an env loop with and without recording."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def run_loop(env: Any, actions: np.ndarray, steps: int, single: bool) -> float:
    """Seconds for `steps` env steps with pre-drawn actions (resetting a single env at episode end)."""
    n = len(actions)
    start = time.perf_counter()
    if single:
        for i in range(steps):
            _, _, terminated, truncated, _ = env.step(actions[i % n])
            if terminated or truncated:
                env.reset()
    else:
        for i in range(steps):
            env.step(actions[i % n])
    return time.perf_counter() - start


def interleaved(
    make_plain: Callable[[], Any],
    make_recorded: Callable[[], Any],
    actions: np.ndarray,
    steps: int,
    repeats: int,
    single: bool,
) -> dict[str, float]:
    """Median seconds per step without and with recording, alternating runs so that load on the
    machine hits both alike. Both envs are made once and reset with the same seed."""
    plain, recorded = make_plain(), make_recorded()
    plain.reset(seed=0)
    recorded.reset(seed=0)
    without, with_ = [], []
    for _ in range(repeats):
        without.append(run_loop(plain, actions, steps, single) / steps)
        with_.append(run_loop(recorded, actions, steps, single) / steps)
    recorded.close()
    plain.close()
    overheads = [w - p for w, p in zip(with_, without, strict=True)]
    return {
        "without_s": statistics.median(without),
        "with_s": statistics.median(with_),
        "overhead_s": statistics.median(overheads),
        "overhead_min_s": min(overheads),
        "overhead_max_s": max(overheads),
    }
