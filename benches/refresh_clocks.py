"""What a learner's `ds.refresh()` costs on a live replay buffer, for A/B runs of two builds of
the extension (run it once per build, alternating):

    python benches/refresh_clocks.py DIR [STEPS]

Records CartPole x8 into DIR (emptied first) past a capacity of 100,000 transitions (the
recording evicts), opens it, then prints one JSON line: µs per call of a refresh that finds
nothing new (the recorder idle: the core's `refresh` alone, wall clock), then, over STEPS
(default 4,000) vector steps of the training loop (`envs.step`, `ds.refresh()`,
`ds.sample_transitions(256)`), the thread CPU time of the refresh (mean and median: the mean
holds the refreshes that find news, the median those that find none) and of the batch, and the
refresh's wall-clock median, 90th percentile and mean, and of that mean the part spent waiting
for the recorder of this process to flush (`trajcore._live`; since the core decides when a
refresh waits, only when the writer is behind: `reader_flush.rs`). The
thread clock keeps a shared machine's other load out of the CPU figures.
"""

from __future__ import annotations

import json
import shutil
import sys
import time

import numpy as np
import trajcore
from trajcore import _live
from workloads import cartpole_buffer

NUM_ENVS, CAPACITY, BATCH = 8, 100_000, 256


def main(out: str, steps: int) -> None:
    shutil.rmtree(out, ignore_errors=True)
    envs = cartpole_buffer(out, CAPACITY, NUM_ENVS)
    envs.flush()
    ds = trajcore.open(out)
    core, n = ds._core, 20_000
    start = time.perf_counter_ns()
    for _ in range(n):
        core.refresh()
    idle = (time.perf_counter_ns() - start) / n / 1e3
    refresh_cpu, refresh_wall, sample_cpu, flush_wall = [], [], [], [0]
    flush = _live.flush_recorders

    def timed_flush(key: str) -> None:
        t = time.perf_counter_ns()
        flush(key)
        flush_wall[0] += time.perf_counter_ns() - t

    _live.flush_recorders = timed_flush  # what `Dataset.refresh` calls first
    for i in range(steps):
        envs.step(envs.action_space.sample())
        t, c = time.perf_counter_ns(), time.thread_time_ns()
        ds.refresh()
        refresh_cpu.append(time.thread_time_ns() - c)
        refresh_wall.append(time.perf_counter_ns() - t)
        c = time.thread_time_ns()
        ds.sample_transitions(BATCH, seed=i)
        sample_cpu.append(time.thread_time_ns() - c)
    _live.flush_recorders = flush
    envs.close()
    ds.close()
    cpu, wall, batch = (np.array(x) / 1e3 for x in (refresh_cpu, refresh_wall, sample_cpu))
    figures = {
        "refresh_nothing_new_us": idle,
        "refresh_cpu_mean_us": cpu.mean(),
        "refresh_cpu_median_us": float(np.median(cpu)),
        "refresh_wall_median_us": float(np.median(wall)),
        "refresh_wall_p90_us": float(np.percentile(wall, 90)),
        "refresh_wall_mean_us": wall.mean(),
        "refresh_flush_wall_mean_us": flush_wall[0] / steps / 1e3,
        "batch_cpu_median_us": float(np.median(batch)),
    }
    print(json.dumps({k: round(v, 1) for k, v in figures.items()}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 4_000)
