r"""Single calls of `ab_revisions.py`'s workloads alone, for counting their instructions where
the machine has no hardware counters: valgrind's count is the same at any load.

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=read.cg \
        python3.11 benches/episode_instructions.py DIR read 2
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=warm.cg \
        python3.11 benches/episode_instructions.py DIR warm 0

(the interpreter's binary, not a pyenv shim: valgrind follows no child; with
`OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0` in the environment: numpy's BLAS threads spin while
valgrind runs one thread at a time, which moved one import's count by 30M from run to run, and the
hash seed orders dicts and sets). Instructions per read
are (total of read.cg - total of warm.cg) / (2 * 1,500); `cg_diff warm.cg read.cg` then
`cg_annotate` splits them by function. DIR is a recording such as `ab_revisions.py`'s `cp16`
(`python -m trajcore record CartPole-v1 --num-envs 16 --steps 96000 DIR`).

Modes (`DIR MODE N`), each counted against the mode named after it:
- `read N`: 1,500 cached episodes read N times (`observations`, `actions`, `rewards`, as
  `ab_revisions.py` reads them), against `warm 0` (the same without the timed loop);
- `open N`: `trajcore.open(DIR)` N times (each closed), against `imported`;
- `verify N`: `trajcore.verify(DIR)` N times, against `imported`;
- `imported`: `import trajcore` alone, against `bare` (with the package's bytecode compiled,
  `python -m compileall -q python/trajcore`, as an installed wheel has it: with
  `PYTHONDONTWRITEBYTECODE` set, a worktree's import compiles every module from source);
- `bare`: the interpreter alone (DIR and N are not used: `- bare 0`).

`valgrind --tool=callgrind` with the same arguments, then `callgrind_annotate --inclusive=yes`,
gives the core's functions their inclusive counts (`Dataset::open_with`, `Catalog::take_in`).
"""

from __future__ import annotations

import sys
import time

EPISODES = 1_500


def _episodes(path: str, mode: str, passes: int) -> None:
    import numpy as np
    import trajcore

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


def _calls(path: str, mode: str, times: int) -> None:
    import trajcore

    start = time.process_time()
    for _ in range(times):
        if mode == "open":
            trajcore.open(path).close()
        elif mode == "verify":
            assert trajcore.verify(path).intact, path
    print(f"{(time.process_time() - start) / max(times, 1) * 1e3:.2f} ms of process CPU per {mode}")


def main() -> None:
    path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode in ("read", "warm"):
        _episodes(path, mode, n)
    elif mode in ("open", "verify", "imported"):
        _calls(path, mode, n)
    elif mode != "bare":
        raise SystemExit(f"unknown mode {mode!r}: read, warm, open, verify, imported or bare")


if __name__ == "__main__":
    main()
