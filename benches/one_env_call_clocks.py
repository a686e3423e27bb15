"""One env's recorder call (`Writer.step`'s native call), thread clock: an `np.int64` action, a
Python float reward and Python bools (the number path of fixed columns), and with an info of one
Python float (`f`) or int (`i`) (the number path of a column made on first sight). Run it with
two builds on PYTHONPATH, interleaved, and compare the medians (ns per call):

    python benches/one_env_call_clocks.py [plain|f|i] [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

import numpy as np
import trajcore
from gymnasium import spaces

INFOS = {"plain": {}, "f": {"x": 1.5}, "i": {"n": 3}}


def main() -> None:
    info = INFOS[sys.argv[1] if len(sys.argv) > 1 else "plain"]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 31
    obs, action = np.zeros(4, np.float32), np.int64(1)
    with tempfile.TemporaryDirectory() as tmp:
        w = trajcore.Writer(tmp + "/r", spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(2))
        w.reset(obs, {})
        native = w._native if w._native is not None else w._recorder
        times = []
        for _ in range(rounds):
            start = time.thread_time_ns()
            for _ in range(2_000):
                native.step(action, obs, 1.0, False, False, info)
            times.append((time.thread_time_ns() - start) / 2_000)
        w.close()
    print(f"{statistics.median(times):.0f}")


if __name__ == "__main__":
    main()
