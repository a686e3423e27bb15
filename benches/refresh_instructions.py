r"""The refreshes of a live replay buffer that find news, alone, for counting their instructions
where the machine has no hardware counters (valgrind's count is the same at any load):

    python benches/refresh_instructions.py DIR fill
    cp -a DIR A && cp -a DIR B      # one copy per build
    valgrind --tool=callgrind --callgrind-out-file=news.cg \
        --toggle-collect='trajcore_core::reader::dataset::Dataset::refresh' \
        --dump-after='trajcore_core::reader::dataset::Dataset::refresh' \
        python3.11 benches/refresh_instructions.py A news 6

(the interpreter's binary, not a pyenv shim: valgrind follows no child). `fill` records CartPole
x8 past a capacity of 100,000 transitions (the recording evicts); `news` reopens a recorder on
the directory (it counts what is there), opens the dataset, then N times: 550 vector steps (the
steps between two of a learner's in-process flushes at about 100 µs a step), a flush, a pause
for the directory's time to settle, and one refresh. Each refresh's instructions are in its own
dump (`news.cg.K`, the `summary:` line; the first two are the refreshes that find nothing); those
that met a shard rollover (a new shard, the compacted rewrite of the closed one, an eviction)
cost more. `callgrind_annotate --inclusive=yes news.cg.K` splits one by function.
"""

from __future__ import annotations

import shutil
import sys
import time

import trajcore
from workloads import cartpole_buffer

NUM_ENVS, CAPACITY, STEPS_PER_FLUSH = 8, 100_000, 550


def main() -> None:
    out, mode = sys.argv[1], sys.argv[2]
    if mode == "fill":
        shutil.rmtree(out, ignore_errors=True)
    envs = cartpole_buffer(out, CAPACITY, NUM_ENVS, fill=mode == "fill")
    if mode == "fill":
        envs.close()
        return
    envs.flush()
    ds = trajcore.open(out)
    core = ds._core  # the core's refresh alone (no flush of this process's recorder)
    core.refresh()
    time.sleep(0.06)  # the directory's time settled: the next refresh does not list it
    core.refresh()
    for _ in range(int(sys.argv[3])):
        for _ in range(STEPS_PER_FLUSH):
            envs.step(envs.action_space.sample())
        envs.flush()
        time.sleep(0.06)
        core.refresh()
    envs.close()
    ds.close()


if __name__ == "__main__":
    main()
