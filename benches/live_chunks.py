"""What a reader following a bounded recording holds and what its batches cost, for A/B runs of
two builds of the extension (run it once per build, alternating):

    python benches/live_chunks.py DIR

CartPole x8 recorded with `capacity_steps=100_000` into DIR (emptied first), 2,000 vector steps
before a reader opens it, then 16,000 more (past one capacity: shards closed, compacted and
evicted under the reader) with `ds.refresh()` and `ds.sample_transitions(256)` after each, as the
training loop of `test_replay_loop.py` does. Prints one JSON line: the chunk entries the reader
holds then (`column_stats`: where a batch's rows are looked up), and the median over 7 rounds of
µs of the process's CPU time per `sample_transitions(256)` (500 calls a round, nothing recorded
meanwhile).
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time

import gymnasium as gym
import trajcore


def main(out: str) -> None:
    shutil.rmtree(out, ignore_errors=True)
    vector = gym.make_vec("CartPole-v1", num_envs=8, vectorization_mode="sync")
    envs = trajcore.RecordVectorEpisodes(vector, out, capacity_steps=100_000)
    envs.action_space.seed(0)
    envs.reset(seed=0)
    for _ in range(2_000):
        envs.step(envs.action_space.sample())
    envs.flush()
    ds = trajcore.open(out)
    for i in range(16_000):
        envs.step(envs.action_space.sample())
        ds.refresh()
        if ds.num_steps:
            ds.sample_transitions(256, seed=i)
    ds.refresh()
    chunks = sum(c["chunks"] for c in ds._core.column_stats())
    rounds = []
    for _ in range(7):
        start = time.process_time()
        for i in range(500):
            ds.sample_transitions(256, seed=i)
        rounds.append((time.process_time() - start) / 500 * 1e6)
    print(json.dumps({"chunk_entries": chunks, "sample_cpu_us": round(statistics.median(rounds), 1)}))
    envs.close()
    ds.close()
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1])
