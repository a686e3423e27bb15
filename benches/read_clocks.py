"""The reads `test_reading.py` times, each timed alone in one process, for A/B runs of two builds
of the extension (run it once per build, alternating, on the same dataset):

    python benches/read_clocks.py DIR [ROUNDS]

DIR receives, the first time, a CartPole-like dataset of 1M transitions over 16 lanes (zstd, as
`test_reading.py` writes it) and its raw conversion. Prints one JSON line: the median over
ROUNDS rounds (default 21) of µs of the process's CPU time per call (every thread's: gathers
run on a pool; CPU time keeps a shared machine's other load out) of a random batch of 256
transitions (`sample_transitions`), a random single step (`ds.transitions[i]`), a batch of 64
windows of 16 steps, a block of 65,536 consecutive steps (`transitions[a:b]`), and one
episode's observations, actions and rewards.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import trajcore
from gymnasium import spaces
from test_reading import LARGE, _write


def _dataset(root: Path) -> dict[str, Path]:
    zstd, raw = root / "cartpole_1M_zstd", root / "cartpole_1M_raw"
    if not raw.exists():
        _write(zstd, LARGE, spaces.Box(-np.inf, np.inf, (4,), np.float32), seed=1, zstd_level=3)
        trajcore.convert(zstd, raw, codecs="raw")
    return {"zstd": zstd, "raw": raw}


def _calls(ds: trajcore.Dataset) -> dict[str, tuple[Callable[[int], Any], int]]:
    """name -> (call of round-robin argument i, calls per timing)."""
    rng = np.random.default_rng(0)
    steps = rng.integers(0, ds.num_steps, 1 << 14).tolist()
    episodes = rng.integers(0, ds.num_episodes, 1 << 10).tolist()
    windows = ds.sequences(16)
    block = 65_536
    t = ds.transitions
    starts = [(i * block) % (ds.num_steps - block) for i in range(1 << 10)]
    return {
        "batch256": (lambda i: ds.sample_transitions(256, seed=i), 200),
        "step": (lambda i: t[steps[i % len(steps)]], 4096),
        "windows64x16": (lambda i: windows[np.arange(i * 64, i * 64 + 64) % len(windows)], 200),
        "block65536": (lambda i: t[starts[i % len(starts)] : starts[i % len(starts)] + block], 4),
        "episode": (lambda i: _episode(ds, episodes[i % len(episodes)]), 2000),
    }


def _episode(ds: trajcore.Dataset, e: int) -> None:
    ep = ds.episodes[e]
    _ = ep.observations, ep.actions, ep.rewards


def main() -> None:
    root = Path(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 21
    out: dict[str, float] = {}
    for kind, path in _dataset(root).items():
        ds = trajcore.open(path)
        calls = _calls(ds)
        times: dict[str, list[float]] = {name: [] for name in calls}
        for r in range(rounds + 1):
            for name, (call, n) in calls.items():
                start = time.process_time()
                for i in range(r * n, r * n + n):
                    call(i)
                if r:  # the first round warms the caches
                    times[name].append((time.process_time() - start) / n * 1e6)
        out |= {f"{name} {kind}": statistics.median(v) for name, v in times.items()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
