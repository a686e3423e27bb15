"""Export throughput and peak memory per format on a CartPole dataset of 1M env steps.

    python benches/export_throughput.py [--env-steps 1000000] [--workdir DIR] [--formats ...] [--json PATH]

Records CartPole-v1 with 16 sub-envs (random actions, NEXT_STEP autoreset) once into WORKDIR,
then exports it to each format, each in a fresh process so that its peak resident memory is its
own, and prints one row per format: stored steps per second, output MB/s, the raw column bytes
read per second, the output size, and peak resident memory (and its growth over the process
after imports and opening the dataset). ``pandas`` is `trajcore.to_pandas(ds)` (which holds the
whole frame, unlike the streaming exports); ``import-minari`` reads the ``minari`` row's output
back into a new trajcore dataset (its output is that dataset). Not collected by pytest (no
test_ prefix).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

FORMATS = ("csv", "jsonl", "parquet", "minari", "import-minari", "pandas")


def record(path: str, env_steps: int) -> None:
    import gymnasium as gym
    import trajcore

    num_envs = 16
    envs = trajcore.RecordVectorEpisodes(
        gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync"), path, {"bench": "export"}
    )
    envs.action_space.seed(0)
    envs.reset(seed=0)
    for _ in range(env_steps // num_envs):
        envs.step(envs.action_space.sample())
    envs.close()


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
    return os.path.getsize(path)


def one(fmt: str, src: str, workdir: str) -> dict[str, Any]:
    """Runs one export in this process and returns its figures."""
    import trajcore
    from trajcore.formats import EXPORT_CACHE_BYTES
    from trajcore.tools.bench import peak_rss_bytes, peak_rss_reset, rss_bytes

    if fmt in ("parquet",):
        import pyarrow.parquet  # noqa: F401  (imported before the baseline, as a user's process has it)
    if fmt in ("pandas",):
        import pandas  # noqa: F401
    if fmt in ("minari", "import-minari"):
        os.environ["MINARI_DATASETS_PATH"] = os.path.join(workdir, "minari")
        import minari  # noqa: F401
        from minari.dataset._storages import get_minari_storage

        get_minari_storage("hdf5")  # imports h5py and Pillow
    ds = trajcore.open(src, cache_bytes=EXPORT_CACHE_BYTES)
    raw = sum(int(c["raw_bytes"]) for c in ds._core.column_stats())
    peak_rss_reset()
    before = rss_bytes()
    start = time.perf_counter()
    if fmt == "pandas":
        frame = trajcore.to_pandas(ds)
        out_bytes = int(frame.memory_usage(deep=True).sum())
    elif fmt == "import-minari":
        where = os.path.join(workdir, "imported")
        shutil.rmtree(where, ignore_errors=True)
        trajcore.import_minari("bench/cartpole-v0", where)
        out_bytes = _size(where)
    else:
        where = "bench/cartpole-v0" if fmt == "minari" else os.path.join(workdir, f"cartpole.{fmt}")
        result = trajcore.export(ds, where, fmt, force=True)
        where = result.get("path", where)
        out_bytes = _size(where)
    seconds = time.perf_counter() - start
    steps = ds.num_steps
    return {
        "format": fmt,
        "steps": steps,
        "seconds": seconds,
        "steps_per_s": steps / seconds,
        "out_mb_per_s": out_bytes / seconds / 1e6,
        "raw_mb_per_s": raw / seconds / 1e6,
        "out_bytes": out_bytes,
        "peak_rss_bytes": peak_rss_bytes(),
        "rss_before_bytes": before,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env-steps", type=int, default=1_000_000, help="env steps to record (default 1,000,000)")
    p.add_argument("--workdir", help="where the dataset and outputs go (default: a temporary directory, removed)")
    p.add_argument("--formats", default=",".join(FORMATS), help=f"comma-separated (default {','.join(FORMATS)})")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    p.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one format in this process
    p.add_argument("--src", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.src, args.workdir)))
        return
    workdir = args.workdir or tempfile.mkdtemp(prefix="trajcore-export-bench-")
    src = os.path.join(workdir, "cartpole")
    try:
        if not os.path.isdir(src):
            start = time.perf_counter()
            record(src, args.env_steps)
            print(f"recorded {args.env_steps:,} env steps in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        rows = []
        for fmt in args.formats.split(","):
            done = subprocess.run(
                [sys.executable, __file__, "--one", fmt, "--src", src, "--workdir", workdir],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                print(f"{fmt}: failed\n{done.stderr}", file=sys.stderr)
                continue
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(
            f"{'format':<13} {'steps/s':>10} {'out MB/s':>9} {'raw MB/s':>9} {'output':>10} "
            f"{'peak RSS':>9} {'growth':>8}   ({rows[0]['steps']:,} stored steps)"
            if rows
            else "no format ran"
        )
        for r in rows:
            print(
                f"{r['format']:<13} {r['steps_per_s']:>10,.0f} {r['out_mb_per_s']:>9.1f} {r['raw_mb_per_s']:>9.1f} "
                f"{r['out_bytes'] / 2**20:>7.1f} MiB {r['peak_rss_bytes'] / 2**20:>5.0f} MiB "
                f"{(r['peak_rss_bytes'] - r['rss_before_bytes']) / 2**20:>4.0f} MiB"
            )
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=2)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
