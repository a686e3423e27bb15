r"""The cached whole-episode read of `ab_revisions.py` alone, for counting its instructions where
the machine has no hardware counters: valgrind's count is the same at any load.

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=read.cg \
        python3.11 benches/episode_instructions.py DIR read 2
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=warm.cg \
        python3.11 benches/episode_instructions.py DIR warm 0

(the interpreter's binary, not a pyenv shim: valgrind follows no child). Instructions per read
are (total of read.cg - total of warm.cg) / (2 * 1,500); `cg_diff warm.cg read.cg` then
`cg_annotate` splits them by function. DIR is a recording such as `ab_revisions.py`'s `cp16`
(`python -m trajcore record CartPole-v1 --num-envs 16 --steps 96000 DIR`).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import trajcore

EPISODES = 1_500


def main() -> None:
    path, mode, passes = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with trajcore.open(path) as ds:
        ids = np.random.default_rng(0).choice(ds.num_episodes, EPISODES, replace=False).tolist()
        for e in ids:  # the chunk cache filled: every read below is served from it
            ep = ds.episodes[e]
            ep.observations, ep.actions, ep.rewards  # noqa: B018 (the reads)
        start = time.process_time()
        for _ in range(passes if mode == "read" else 0):
            for e in ids:
                ep = ds.episodes[e]
                ep.observations, ep.actions, ep.rewards  # noqa: B018 (the reads)
        reads = max(passes * len(ids), 1)
        print(f"{(time.process_time() - start) / reads * 1e6:.2f} µs of process CPU per episode read")


if __name__ == "__main__":
    main()
