"""How much a SIGKILL loses when the writer cannot keep up: a recording of big frames at zstd
level 19 (the writer compresses far slower than the env produces), killed at random times.

For each trial the child prints the wall time of every episode end; after the kill the parent
reads the dataset and reports, over the episodes that ended before the kill but are missing,
how long before the kill they had ended. The durability promise is about `flush_interval`
(1 s here); see docs/recording.md, "Files, durability and storage".

    python benches/durability_kill.py --trials 20 [--python /path/to/other/python]

`--python` runs the children with another interpreter (another trajcore build) to compare.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import sys, time
import numpy as np
import gymnasium as gym
from gymnasium import spaces
import trajcore

class Frames(gym.Env):
    # Precomputed noisy 128x128x3 frames: stepping costs next to nothing, compressing a lot.
    observation_space = spaces.Box(0, 255, (128, 128, 3), np.uint8)
    action_space = spaces.Discrete(2)
    def __init__(self):
        rng = np.random.default_rng(0)
        self.frames = rng.integers(0, 255, (64, 128, 128, 3), dtype=np.uint8)
        self.t = 0
    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self.frames[0], {}
    def step(self, action):
        self.t += 1
        return self.frames[self.t % 64], 1.0, self.t >= 20, False, {}

env = trajcore.RecordEpisodes(Frames(), sys.argv[1], zstd_level=19, flush_interval=1.0)
env.reset(seed=0)
episodes = 0
while True:
    _, _, term, trunc, _ = env.step(0)
    if term or trunc:
        print(episodes, time.time(), flush=True)
        episodes += 1
        env.reset()
"""


def trial(python: str, kill_after: float) -> dict[str, float]:
    import trajcore

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d"
        child = subprocess.Popen([python, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        ends: list[float] = []
        start = time.time()
        while time.time() - start < kill_after:
            line = child.stdout.readline()
            if not line:
                break
            ends.append(float(line.split()[1]))
        child.send_signal(signal.SIGKILL)
        killed_at = time.time()
        child.wait()
        with trajcore.open(path) as ds:
            kept = ds.num_episodes
        lost_ages = [killed_at - t for t in ends[kept:]]
        return {
            "ended": len(ends),
            "kept": kept,
            "oldest_lost_s": max(lost_ages, default=0.0),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--python", default=sys.executable, help="interpreter for the recording children")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    results = [trial(args.python, rng.uniform(4.0, 8.0)) for _ in range(args.trials)]
    worst = max(r["oldest_lost_s"] for r in results)
    print(json.dumps({"python": args.python, "trials": results, "worst_oldest_lost_s": worst}, indent=1))


if __name__ == "__main__":
    main()
