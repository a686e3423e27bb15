"""trajcore on Ray: recording throughput against the number of actors, and read throughput through
Ray Data against the local reader.

    python benches/ray_scaling.py [--actors 1,2] [--num-envs 8] [--steps 20000] [--rounds 3]
                                  [--read-env-steps 1000000] [--cpus N] [--workdir DIR] [--json PATH]

Recording: CartPole-v1, a sync vector env of `--num-envs` sub-envs per actor, random actions,
`--steps` vector steps per actor (`trajcore.ray.Collector.run`, the work of `trajcore.ray.collect`),
all actors of a configuration into one fresh directory, as `collect` does. "alone" is the same
`Collector.run` in this process, without Ray.
For N actors (created and ready before the clock starts) the aggregate rate is all their env
steps over the time from submitting their runs to the last one's return (everything written and
closed); the ratio is that over the alone rate of the same round. Configurations alternate within
each round, so load on the machine hits them alike; the table gives medians over the rounds and
the ratio's spread (min..max).

Reading: CartPole-v1, 16 sub-envs, `--read-env-steps` env steps recorded once in shards of 4 MiB;
then every transition is read (observations, next observations, actions, rewards, flags) by:
the local reader's gather (`ds.transitions[a:b]`, Rust, 64k-step batches); the per-episode path
a Ray read task runs (`trajcore.formats._read.iter_batches`), in this process; and Ray Data
(`trajcore.ray.read_transitions(...).iter_batches(batch_size=65536)`, consumed here), with the
read tasks Ray asks for and with two per CPU. Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np


def recording(actor_counts: list[int], num_envs: int, steps: int, rounds: int, workdir: str) -> list[dict[str, Any]]:
    import ray
    from trajcore.ray import Collector

    remote = ray.remote(num_cpus=1)(Collector)
    rates: dict[str, list[float]] = {"alone": []}
    ratios: dict[int, list[float]] = {n: [] for n in actor_counts}
    for n in actor_counts:
        rates[f"{n} actors"] = []
    env_steps = steps * num_envs
    for r in range(rounds):
        path = os.path.join(workdir, f"alone-{r}")
        started = time.perf_counter()
        Collector("CartPole-v1", path, 0, num_envs, 0, {}, {}).run(steps)
        alone = env_steps / (time.perf_counter() - started)
        rates["alone"].append(alone)
        for n in actor_counts:
            path = os.path.join(workdir, f"actors{n}-{r}")
            actors = [remote.remote("CartPole-v1", path, k, num_envs, k * num_envs, {}, {}) for k in range(n)]
            ray.get([a.__ray_ready__.remote() for a in actors])
            started = time.perf_counter()
            ray.get([a.run.remote(steps) for a in actors])
            rate = n * env_steps / (time.perf_counter() - started)
            for a in actors:
                ray.kill(a)
            rates[f"{n} actors"].append(rate)
            ratios[n].append(rate / alone)
        latest = ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items())
        print(f"  round {r + 1}/{rounds}: {latest}", file=sys.stderr)
    rows = [{"what": "alone (no Ray)", "env_steps_per_s": statistics.median(rates["alone"]), "ratio": 1.0}]
    for n in actor_counts:
        rows.append(
            {
                "what": f"{n} actor{'s' if n > 1 else ''}",
                "env_steps_per_s": statistics.median(rates[f"{n} actors"]),
                "ratio": statistics.median(ratios[n]),
                "ratio_min": min(ratios[n]),
                "ratio_max": max(ratios[n]),
            }
        )
    return rows


def record_cartpole(path: str, env_steps: int) -> None:
    import gymnasium as gym
    import trajcore

    num_envs = 16
    envs = trajcore.RecordVectorEpisodes(
        gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync"),
        path,
        {"bench": "ray read"},
        max_shard_bytes=4 << 20,
    )
    envs.action_space.seed(0)
    envs.reset(seed=0)
    for _ in range(env_steps // num_envs):
        envs.step(envs.action_space.sample())
    envs.close()


def reading(env_steps: int, rounds: int, workdir: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    import ray
    import trajcore
    import trajcore.ray
    from trajcore.formats._columns import choose
    from trajcore.formats._read import iter_batches, plan_of

    path = os.path.join(workdir, "read")
    record_cartpole(path, env_steps)
    keys = ["observations", "next_observations", "actions", "rewards", "terminations", "truncations"]
    columns = ["obs", "next_obs", "action", "reward", "terminated", "truncated"]
    batch = 65536

    def gather() -> int:
        with trajcore.open(path) as ds:
            n = ds.num_steps
            for a in range(0, n, batch):
                ds.transitions.gather(np.arange(a, min(n, a + batch)), keys=keys)
            return n

    def per_episode() -> int:
        with trajcore.open(path) as ds:
            plan = plan_of(ds)
            leaves, _ = choose(plan.leaves, columns, 1 << 62)
            return sum(len(b) for b in iter_batches(ds, range(ds.num_episodes), plan, leaves, batch))

    def ray_data(blocks: int | None) -> int:
        data = trajcore.ray.read_transitions(path, columns=columns, override_num_blocks=blocks)
        return sum(len(b["step"]) for b in data.iter_batches(batch_size=batch, batch_format="numpy"))

    cpus = int(ray.available_resources().get("CPU", 1))
    readers = {
        "local reader, gather (Rust)": gather,
        "local, per-episode path of a read task": per_episode,
        "Ray Data iter_batches (Ray's read tasks: 1 MiB blocks at least)": functools.partial(ray_data, None),
        f"Ray Data iter_batches, override_num_blocks={2 * cpus}": functools.partial(ray_data, 2 * cpus),
    }
    times: dict[str, list[float]] = {k: [] for k in readers}
    steps = 0
    for r in range(rounds):
        for name, read in readers.items():
            started = time.perf_counter()
            steps = read()
            times[name].append(time.perf_counter() - started)
        print(f"  read round {r + 1}/{rounds}", file=sys.stderr)
    with trajcore.open(path) as ds:
        info = {"transitions": ds.num_steps, "episodes": ds.num_episodes, "shards": len(ds.shards)}
    assert steps == info["transitions"]
    local = statistics.median(times["local reader, gather (Rust)"])
    rows = []
    for name, t in times.items():
        rows.append(
            {
                "what": name,
                "transitions_per_s": steps / statistics.median(t),
                "ratio_to_local": local / statistics.median(t),
            }
        )
    return info, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--actors", default="1,2", help="actor counts, comma separated (default 1,2)")
    parser.add_argument("--num-envs", type=int, default=8, help="sub-envs per actor (default 8)")
    parser.add_argument("--steps", type=int, default=20000, help="vector steps per actor (default 20000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every configuration (default 3)")
    parser.add_argument("--read-env-steps", type=int, default=1_000_000, help="env steps of the read dataset")
    parser.add_argument("--cpus", type=int, default=None, help="ray.init(num_cpus=...) (default: the machine's)")
    parser.add_argument("--workdir", default=None, help="where datasets go (default: a temporary directory)")
    parser.add_argument("--json", default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    import ray

    workdir = args.workdir or tempfile.mkdtemp(prefix="trajcore-ray-bench-")
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    try:
        print("recording ...", file=sys.stderr)
        record_rows = recording(
            [int(n) for n in args.actors.split(",")], args.num_envs, args.steps, args.rounds, workdir
        )
        print("reading ...", file=sys.stderr)
        info, read_rows = reading(args.read_env_steps, args.rounds, workdir)
    finally:
        ray.shutdown()
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nRecording: CartPole-v1, {args.num_envs} sub-envs per actor, {args.steps} vector steps per actor")
    print("| configuration | env steps/s (all actors) | ratio to one process alone (min..max) |")
    print("|---|---|---|")
    for row in record_rows:
        spread = f" ({row['ratio_min']:.2f}..{row['ratio_max']:.2f})" if "ratio_min" in row else ""
        print(f"| {row['what']} | {row['env_steps_per_s']:,.0f} | {row['ratio']:.2f}{spread} |")
    print(f"\nReading: {info['transitions']:,} transitions, {info['episodes']:,} episodes, {info['shards']} shards")
    print("| reader | transitions/s | ratio to the local gather |")
    print("|---|---|---|")
    for row in read_rows:
        print(f"| {row['what']} | {row['transitions_per_s']:,.0f} | {row['ratio_to_local']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"recording": record_rows, "reading": {"dataset": info, "rows": read_rows}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
