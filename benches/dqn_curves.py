"""Issue 34, point 6: `examples/dqn.py` trained with the trajcore buffer and with the in-memory
numpy buffer, over the same seeds, everything else the same: do the learning curves agree within
the seeds' spread, and how fast does each loop run?

Runs are interleaved (seed 1 trajcore then numpy, seed 2 numpy then trajcore, ...), each in this
process one after the other, so the machine's load falls on both buffers alike. Per run: the
mean episodic return over the last 20% of the env steps, the curve binned into tenths of the
steps, and the loop's env steps per second (the training loop from the first step to the last,
updates included; the recorder's final close not counted).

The verdict: the trajcore runs' mean last-20% return lies within the numpy runs' spread (min to
max over the seeds), and so does each bin of the trajcore runs' mean curve (the bins outside are
counted).

    python benches/dqn_curves.py [--seeds 1,2,3] [--total-steps 100000] [--json dqn.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import dqn

BINS = 10


def _summary(returns: list[tuple[int, float]], total: int) -> dict[str, Any]:
    steps = np.array([s for s, _ in returns])
    values = np.array([r for _, r in returns])
    edges = np.linspace(0, total, BINS + 1)
    binned = [float(values[(steps >= a) & (steps < b)].mean()) if ((steps >= a) & (steps < b)).any() else float("nan")
              for a, b in itertools.pairwise(edges)]
    return {"episodes": len(returns), "last_20pct_mean": float(values[steps >= 0.8 * total].mean()), "binned": binned}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--total-steps", type=int, default=100_000)
    p.add_argument("--json", help="write every figure here")
    opts = p.parse_args()
    seeds = [int(s) for s in opts.seeds.split(",")]
    work = Path(tempfile.mkdtemp(prefix="dqn-curves-"))
    runs: dict[str, list[dict[str, Any]]] = {"trajcore": [], "numpy": []}
    try:
        for k, seed in enumerate(seeds):
            for buffer in ("trajcore", "numpy") if k % 2 == 0 else ("numpy", "trajcore"):
                args = dqn.parse_args(["--buffer", buffer, "--seed", str(seed), "--total-steps", str(opts.total_steps),
                                       "--dir", str(work / f"buffer-{seed}")])
                returns, steps_per_s = dqn.train(args)
                run = {"seed": seed, "steps_per_s": steps_per_s, **_summary(returns, opts.total_steps)}
                runs[buffer].append(run)
                print(f"{buffer:8} seed {seed}: last 20% mean return {run['last_20pct_mean']:.1f}, "
                      f"{steps_per_s:,.0f} env steps/s, binned {[round(b) for b in run['binned']]}", flush=True)
                shutil.rmtree(work / f"buffer-{seed}", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    numpy_last = [r["last_20pct_mean"] for r in runs["numpy"]]
    trajcore_last = [r["last_20pct_mean"] for r in runs["trajcore"]]
    low, high = min(numpy_last), max(numpy_last)
    curves = {b: np.array([r["binned"] for r in rs]) for b, rs in runs.items()}
    traj_mean_curve = curves["trajcore"].mean(0)
    outside = [i for i in range(BINS)
               if not curves["numpy"][:, i].min() <= traj_mean_curve[i] <= curves["numpy"][:, i].max()]
    speed = [t["steps_per_s"] / n["steps_per_s"] for t, n in zip(runs["trajcore"], runs["numpy"], strict=True)]
    verdict = {
        "numpy_last_20pct_range": [low, high],
        "trajcore_last_20pct_mean": statistics.mean(trajcore_last),
        "within_spread": low <= statistics.mean(trajcore_last) <= high,
        "bins_outside_spread": outside,
        "numpy_mean_curve": curves["numpy"].mean(0).round(1).tolist(),
        "trajcore_mean_curve": traj_mean_curve.round(1).tolist(),
        "speed_ratio_per_seed": speed,
        "load_average": os.getloadavg(),
    }
    print(json.dumps(verdict, indent=1))
    if opts.json:
        Path(opts.json).write_text(json.dumps({"total_steps": opts.total_steps, "runs": runs, "verdict": verdict},
                                              indent=1) + "\n")


if __name__ == "__main__":
    main()
