"""Peak resident memory of recording N CartPole steps, run in a fresh process by test_memory.py
(a fresh process: earlier benchmarks' freed memory would otherwise hide growth).

    python benches/memory_probe.py OUT_DIR NUM_ENVS ENV_STEPS [RING_BYTES | envlogger]

`envlogger` records the same steps with EnvLogger (one logger per env, its defaults) instead,
the peer the recording side's memory is held to.

Prints one JSON object: rss_before, peak_growth (bytes), seconds, steps, bytes_written,
ring_waits (times the loop waited for trajcore's writer; None for EnvLogger).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import trajcore
from trajcore.tools.bench import peak_rss_bytes, peak_rss_reset, rss_bytes


def main() -> None:
    out, num_envs, env_steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    peer = len(sys.argv) > 4 and sys.argv[4] == "envlogger"
    kwargs: dict[str, Any] = {"ring_bytes": int(sys.argv[4])} if len(sys.argv) > 4 and not peer else {}
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
    if peer:
        # Imported (and its env adapter built) before the baseline, like trajcore.
        from baselines import envlogger_list

        envlogger_list(lambda: gym.make("CartPole-v1"), 1, None).close()
        import envlogger  # noqa: F401
    peak_rss_reset()
    before = rss_bytes()
    start = time.perf_counter()
    if peer:
        logged = envlogger_list(lambda: gym.make("CartPole-v1"), num_envs, Path(out))
        for i in range(steps):
            logged.step(actions[i % 1024] if num_envs > 1 else [actions[i % 1024]])
        logged.close()
    elif num_envs == 1:
        rec = trajcore.RecordEpisodes(env, out, **kwargs)  # type: ignore[arg-type]
        rec.reset(seed=0)
        for i in range(steps):
            _, _, term, trunc, _ = rec.step(actions[i % 1024])
            if term or trunc:
                rec.reset()
        rec.close()
    else:
        rec = trajcore.RecordVectorEpisodes(env, out, **kwargs)  # type: ignore[assignment]
        rec.reset(seed=0)
        for i in range(steps):
            rec.step(actions[i % 1024])
        rec.close()
    elapsed = time.perf_counter() - start
    if peer:
        written, waits = sum(f.stat().st_size for f in Path(out).rglob("*") if f.is_file()), None
    else:
        written, waits = rec.stats()["bytes_written"], rec.stats()["ring_waits"]
    print(
        json.dumps(
            {
                "rss_before": before,
                "peak_growth": peak_rss_bytes() - before,
                "seconds": elapsed,
                "steps": steps * num_envs,
                "bytes_written": written,
                "ring_waits": waits,
            }
        )
    )


if __name__ == "__main__":
    main()
