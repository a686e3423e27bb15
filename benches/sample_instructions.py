r"""A 256-row `sample_transitions` batch on the replay loop's CartPole buffer alone, for A/B runs
of two builds of the extension (run once per build, alternating), counted where the machine has
no hardware counters:

    python benches/sample_instructions.py DIR record     # CartPole x8 past a capacity of 100,000
    python benches/sample_instructions.py DIR clocks     # thread CPU per batch, and the ring's
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=b.cg \
        python3.11 benches/sample_instructions.py DIR batches 2000
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=w.cg \
        python3.11 benches/sample_instructions.py DIR batches 0

(the interpreter's binary, not a pyenv shim: valgrind follows no child). Instructions per batch
are (total of b.cg - total of w.cg) / 2,000; `cg_diff w.cg b.cg` then `cg_annotate` splits them
by function (`valgrind --tool=callgrind --toggle-collect='*PySelection::__pymethod_sample__*'`
keeps the core's call alone). `clocks` prints the thread CPU of 1,000 batches per round (10
rounds: min and median µs per batch) beside the numpy ring's fancy indexing of 256 rows (obs,
next obs, action, reward, done), which a shared machine's load moves less than wall time.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import numpy as np
import trajcore
from workloads import cartpole_buffer

NUM_ENVS, CAPACITY, BATCH = 8, 100_000, 256


def record(out: str) -> None:
    cartpole_buffer(out, CAPACITY, NUM_ENVS).close()


def clocks(ds: trajcore.Dataset) -> None:
    obs = np.zeros((CAPACITY, 4), np.float32)
    columns = (obs, obs.copy(), np.zeros(CAPACITY, np.int64), np.zeros(CAPACITY, np.float32), np.zeros(CAPACITY, bool))
    rng = np.random.default_rng(0)

    def ring(_: int) -> Any:
        idx = rng.integers(0, CAPACITY, BATCH)
        return [c[idx] for c in columns]

    def batch(i: int) -> Any:
        return ds.sample_transitions(BATCH, seed=i)

    rounds: dict[str, list[float]] = {"batch": [], "ring": []}
    for _ in range(10):
        for name, f in (("batch", batch), ("ring", ring)):
            start = time.thread_time_ns()
            for i in range(1_000):
                f(i)
            rounds[name].append((time.thread_time_ns() - start) / 1_000 / 1e3)
    for name, us in rounds.items():
        print(f"{name}: min {min(us):.1f} median {statistics.median(us):.1f} µs of thread CPU")


def main() -> None:
    path, mode = sys.argv[1], sys.argv[2]
    if mode == "record":
        return record(path)
    with trajcore.open(path) as ds:
        for i in range(300):  # the chunk cache and the joined runs filled
            ds.sample_transitions(BATCH, seed=10**6 + i)
        if mode == "clocks":
            return clocks(ds)
        for i in range(int(sys.argv[3])):
            ds.sample_transitions(BATCH, seed=i)


if __name__ == "__main__":
    main()
