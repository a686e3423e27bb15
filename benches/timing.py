"""Timing helpers shared by the benchmarks: calls of several functions interleaved in rounds, so a
slow moment of the (shared, noisy) machine hits every side of a ratio alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def interleaved(fns: dict[str, Callable[[int], Any]], seconds: float, rounds: int = 5) -> dict[str, list[float]]:
    """Seconds per call of each function, `rounds` rounds interleaved (call i gets argument i)."""
    out: dict[str, list[float]] = {k: [] for k in fns}
    calls = dict.fromkeys(fns, 0)
    for _ in range(rounds):
        for name, fn in fns.items():
            n, start = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - start) < seconds / rounds or n < 2:
                fn(calls[name])
                calls[name] += 1
                n += 1
            out[name].append(elapsed / n)
    return out


def interleaved_latencies(fns: dict[str, Callable[[int], Any]], calls: int, rounds: int = 5) -> dict[str, list[float]]:
    """Seconds of each single call of each function: `rounds` rounds of `calls // rounds` calls
    of each function in turn (call i gets argument i)."""
    out: dict[str, list[float]] = {k: [] for k in fns}
    per_round = max(1, calls // rounds)
    for r in range(rounds):
        for name, fn in fns.items():
            for i in range(r * per_round, (r + 1) * per_round):
                start = time.perf_counter_ns()
                fn(i)
                out[name].append((time.perf_counter_ns() - start) * 1e-9)
    return out
