"""Peak resident memory of recording N CartPole steps, run in a fresh process by test_memory.py
(a fresh process: earlier benchmarks' freed memory would otherwise hide growth).

    python benches/memory_probe.py OUT_DIR NUM_ENVS ENV_STEPS [RING_BYTES]

Prints one JSON object: rss_before, peak_growth (bytes), seconds, steps, bytes_written.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np
import trajcore
from trajcore.bench import peak_rss_bytes, peak_rss_reset, rss_bytes


def main() -> None:
    out, num_envs, env_steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    kwargs: dict[str, Any] = {"ring_bytes": int(sys.argv[4])} if len(sys.argv) > 4 else {}
    steps = env_steps // num_envs
    rng = np.random.default_rng(0)
    if num_envs == 1:
        env: object = gym.make("CartPole-v1")
        actions = rng.integers(0, 2, size=1024).tolist()
    else:
        env = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync")
        actions = list(rng.integers(0, 2, size=(1024, num_envs)))
    # Everything but the recorder exists and has run before the baseline is taken.
    env.reset(seed=0)  # type: ignore[attr-defined]
    for i in range(2000):
        _, _, term, trunc, _ = env.step(actions[i % 1024])  # type: ignore[attr-defined]
        if num_envs == 1 and (term or trunc):
            env.reset()  # type: ignore[attr-defined]
    peak_rss_reset()
    before = rss_bytes()
    start = time.perf_counter()
    if num_envs == 1:
        rec = trajcore.RecordEpisodes(env, out, **kwargs)  # type: ignore[arg-type]
        rec.reset(seed=0)
        for i in range(steps):
            _, _, term, trunc, _ = rec.step(actions[i % 1024])
            if term or trunc:
                rec.reset()
    else:
        rec = trajcore.RecordVectorEpisodes(env, out, **kwargs)  # type: ignore[assignment]
        rec.reset(seed=0)
        for i in range(steps):
            rec.step(actions[i % 1024])
    rec.close()
    elapsed = time.perf_counter() - start
    stats = rec.stats()
    print(
        json.dumps(
            {
                "rss_before": before,
                "peak_growth": peak_rss_bytes() - before,
                "seconds": elapsed,
                "steps": steps * num_envs,
                "bytes_written": stats["bytes_written"],
            }
        )
    )


if __name__ == "__main__":
    main()
