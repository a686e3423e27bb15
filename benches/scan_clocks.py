"""Scans in blocks (`transitions[a:b]`, each block touched as a trainer would), for A/B runs of two
builds of the extension (run it once per build, alternating, on the same datasets):

    python benches/scan_clocks.py DIR

DIR receives, the first time, a pixel dataset (20,000 steps of (4, 84, 84) uint8 stacks of
`workloads.PixelEnv`, 8 sub-envs: 58 MB a 1,024-step block with next observations, 231 MB a
4,096-step one); the CartPole scans read `read_clocks.py`'s dataset in DIR (run that once
first). Prints one JSON line: the process's CPU time of a whole scan in seconds (every thread's),
the median of 5 rounds after one that warms the caches. Blocks of 16 MB and more take their
memory from the batch block pool (`trajcore_core::reader::BlockPool`).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import trajcore
from workloads import pixel_vector


def _pixels(root: Path) -> Path:
    path = root / "pixels"
    if not path.exists():
        rec = trajcore.RecordVectorEpisodes(pixel_vector(8), path)
        rec.reset(seed=0)
        for a in np.random.default_rng(0).integers(0, 4, (20_000 // 8, 8)):
            rec.step(a)
        rec.close()
    return path


def _scan(ds: trajcore.Dataset, block: int, rounds: int = 5) -> float:
    times = []
    for r in range(rounds + 1):
        start = time.process_time()
        for first in range(0, ds.num_steps, block):
            batch = ds.transitions[first : min(first + block, ds.num_steps)]
            float(batch["observations"][-1].flat[0])
        if r:  # the first round warms the caches
            times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    root = Path(sys.argv[1])
    out: dict[str, float] = {}
    with trajcore.open(_pixels(root)) as ds:
        out |= {f"pixels {block}": _scan(ds, block) for block in (1024, 4096)}
    for kind in ("zstd", "raw"):
        path = root / f"cartpole_1M_{kind}"
        if path.exists():
            with trajcore.open(path) as ds:
                out |= {f"cartpole {kind} {block}": _scan(ds, block) for block in (1 << 19, ds.num_steps)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
