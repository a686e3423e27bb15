"""Ray Data read tasks over a dataset in an S3 store against the same dataset on local disk: per
task, the requests it makes, the bytes it fetches and its rows a second.

    python benches/ray_store_reads.py [--env-steps 400000] [--rounds 3] [--tasks 3]

CartPole-v1, 16 sub-envs, random actions, `--env-steps` env steps recorded into shards of 2 MB
and put in a moto S3 server on loopback (tests/s3_server.py: moto[server] and boto3). Each read
task of `TrajcoreDatasource` (all columns) runs alone in a fresh Ray worker process (a runtime env
of its own), so it opens the dataset itself, as a task on a node that shares nothing does; its
time is the task's own (open and read), not Ray's scheduling. Local and store alternate within
each round. moto answers in Python on the same two cores: a store on a network is another
machine, slower per request and faster per byte. Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import gymnasium as gym
import ray
import trajcore
from trajcore import _core
from trajcore.ray.datasource import TrajcoreDatasource

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from s3_server import s3_server


@ray.remote(max_calls=1)
def _timed(task: Any) -> tuple[int, float, int, int]:
    """(rows, seconds, requests, bytes fetched) of one read task."""
    before = _core.remote_stats()
    start = time.perf_counter()
    rows = sum(block.num_rows for block in task())
    seconds = time.perf_counter() - start
    after = _core.remote_stats()
    return rows, seconds, after[0] - before[0], after[1] - before[1]


def _in_fresh_worker(task: Any) -> tuple[int, float, int, int]:
    env = {"env_vars": {"TRAJCORE_BENCH_FRESH": uuid.uuid4().hex}}
    result: tuple[int, float, int, int] = ray.get(_timed.options(runtime_env=env).remote(task))
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env-steps", type=int, default=400_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tasks", type=int, default=3, help="read parallelism asked of the datasource")
    args = p.parse_args()
    local = Path(tempfile.mkdtemp(prefix="trajcore-bench-")) / "cp"
    envs = gym.make_vec("CartPole-v1", num_envs=16, vectorization_mode="sync")
    with trajcore.RecordVectorEpisodes(envs, local, max_shard_bytes=2_000_000) as rec:
        rec.reset(seed=0)
        for _ in range(args.env_steps // 16):
            rec.step(rec.action_space.sample())
    with trajcore.open(local) as ds:
        print(f"dataset: {ds.num_steps:,} steps, {len(ds.shards)} shards, {sum(ds.shard_sizes) / 1e6:.1f} MB")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    rates: dict[str, list[float]] = {"local": [], "store": []}
    with s3_server() as s3:
        bucket = s3.bucket()
        s3.upload(local, bucket, "cp")
        sources = {
            "local": TrajcoreDatasource(local),
            "store": TrajcoreDatasource(f"s3://{bucket}/cp", storage_options=s3.options),
        }
        for rnd in range(args.rounds):
            for name, source in sources.items():
                runs = [_in_fresh_worker(task) for task in source.get_read_tasks(args.tasks)]
                rows, seconds = sum(r[0] for r in runs), sum(r[1] for r in runs)
                rates[name].append(rows / seconds)
                print(
                    f"round {rnd} {name}: {len(runs)} tasks, {rows:,} rows in {seconds:.2f} s of task time "
                    f"({rows / seconds / 1e6:.2f} M steps/s); requests per task {[r[2] for r in runs]}, "
                    f"MB fetched per task {[round(r[3] / 1e6, 2) for r in runs]}"
                )
    ray.shutdown()
    local_rate, store_rate = (statistics.median(rates[k]) for k in ("local", "store"))
    print(
        f"median: local {local_rate / 1e6:.2f} M steps/s, store {store_rate / 1e6:.2f} M steps/s "
        f"({store_rate / local_rate:.2f}x)"
    )


if __name__ == "__main__":
    main()
