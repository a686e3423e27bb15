"""The command line: ``python -m trajcore record ...``, ``info ...`` and ``bench ...``."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["main"]


def _load_policy(spec: str) -> Callable[[Any], Any]:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SystemExit(f"--policy must be module:callable, got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise SystemExit(f"--policy {spec!r} is not callable")
    return obj  # type: ignore[no-any-return]


class _Progress:
    """tqdm when it is installed, else a line on stderr about once a second."""

    def __init__(self, total: int, unit: str) -> None:
        self.total = total
        self.done = 0
        self.start = time.perf_counter()
        self.last = self.start
        self.unit = unit
        self.bar: Any = None
        try:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit=unit, unit_scale=True, file=sys.stderr)
        except ImportError:
            pass

    def update(self, n: int) -> None:
        if n <= 0:
            return
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
            return
        now = time.perf_counter()
        if now - self.last >= 1.0 or self.done >= self.total:
            self.last = now
            rate = self.done / max(now - self.start, 1e-9)
            pct = 100.0 * self.done / max(self.total, 1)
            print(f"  {self.done}/{self.total} {self.unit} ({pct:.0f}%), {rate:,.0f} {self.unit}/s", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _record(args: argparse.Namespace) -> int:
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    import trajcore

    mode = {
        "next_step": AutoresetMode.NEXT_STEP,
        "same_step": AutoresetMode.SAME_STEP,
        "disabled": AutoresetMode.DISABLED,
    }[args.autoreset]
    envs = gym.make_vec(
        args.env_id,
        num_envs=args.num_envs,
        vectorization_mode=args.vectorization,
        vector_kwargs={"autoreset_mode": mode},
    )
    metadata = {"env_id": args.env_id, "num_envs": args.num_envs, "seed": args.seed, "policy": args.policy or "random"}
    if args.metadata:
        metadata.update(json.loads(args.metadata))
    policy = _load_policy(args.policy) if args.policy else None
    envs.action_space.seed(args.seed)
    print(
        f"recording {args.env_id} x{args.num_envs} ({args.vectorization}, autoreset {args.autoreset}) "
        f"for {args.steps} vector steps into {args.path}",
        file=sys.stderr,
    )
    progress = _Progress(args.steps * args.num_envs, "steps")
    start = time.perf_counter()
    with trajcore.RecordVectorEpisodes(envs, args.path, metadata, zstd_level=args.zstd_level) as rec:
        obs, _ = rec.reset(seed=args.seed)
        every = max(1, min(1000, args.steps // 100))
        for t in range(args.steps):
            actions = policy(obs) if policy is not None else rec.action_space.sample()
            obs, _, terminations, truncations, _ = rec.step(actions)
            if mode is AutoresetMode.DISABLED:
                done = np.logical_or(terminations, truncations)
                if done.any():
                    obs, _ = rec.reset(options={"reset_mask": done})
            if (t + 1) % every == 0:
                progress.update(every * args.num_envs)
        progress.update((args.steps % every) * args.num_envs)
    progress.close()
    stats = rec.stats()  # after close: everything is written
    elapsed = time.perf_counter() - start
    total = args.steps * args.num_envs
    print(
        f"recorded {total} env steps in {elapsed:.1f} s ({total / max(elapsed, 1e-9):,.0f} steps/s); "
        f"{stats.get('episodes', 0)} episodes, {_fmt_bytes(stats.get('bytes_written', 0))} written "
        f"({_fmt_bytes(stats.get('bytes_raw', 0))} raw)",
        file=sys.stderr,
    )
    return 0


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _stats(values: np.ndarray[Any, Any]) -> dict[str, float]:
    if values.size == 0:
        return {}
    v = values.astype(np.float64)
    return {
        "mean": float(v.mean()),
        "std": float(v.std()),
        "min": float(v.min()),
        "median": float(np.median(v)),
        "max": float(v.max()),
    }


def _column_bytes(ds: Any, summaries: dict[str, np.ndarray[Any, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """Raw and stored bytes per column: exact from the core when it reports them, else the raw
    size of the rows episodes cover (fixed-size columns only; stored size unknown per column)."""
    core = ds._core
    column_stats = getattr(core, "column_stats", None)
    if column_stats is not None:
        merged: dict[str, dict[str, Any]] = {}
        for entry in column_stats():
            row = merged.setdefault(entry["name"], {"name": entry["name"], "raw_bytes": 0, "stored_bytes": 0})
            row["raw_bytes"] += int(entry["raw_bytes"])
            row["stored_bytes"] += int(entry["stored_bytes"])
        for row in merged.values():
            row["ratio"] = row["raw_bytes"] / row["stored_bytes"] if row["stored_bytes"] else None
        return list(merged.values()), True
    rows: dict[str, dict[str, Any]] = {}
    recording = summaries["recording"]
    length = summaries["length"].astype(np.int64)
    for r in range(ds.num_recordings):
        in_rec = recording == r
        steps = int(length[in_rec].sum())
        episodes = int(in_rec.sum())
        for c in core.columns(r):
            if c["dtype"] == "str":
                continue
            n = steps + episodes if c["timeline"] == "obs" else steps
            raw = n * np.dtype(c["dtype"]).itemsize * int(np.prod(c["shape"], dtype=np.int64))
            row = rows.setdefault(c["name"], {"name": c["name"], "raw_bytes": 0, "stored_bytes": None, "ratio": None})
            row["raw_bytes"] += raw
    return list(rows.values()), False


def _info(args: argparse.Namespace) -> int:
    import trajcore

    with trajcore.open(args.path) as ds:
        s = ds.summaries()
        disk = sum(os.path.getsize(p) for p in ds.shards)
        columns, exact = _column_bytes(ds, s)
        raw_total = sum(c["raw_bytes"] for c in columns)
        metas = [ds.meta(r) for r in range(ds.num_recordings)]
        report: dict[str, Any] = {
            "path": ds.path,
            "shards": len(ds.shards),
            "recordings": ds.num_recordings,
            "env_ids": sorted({str((m.get("user") or {}).get("env_id")) for m in metas}),
            "num_envs": sorted({int(m.get("num_envs", 1)) for m in metas}),
            "autoreset_modes": sorted({str(m.get("autoreset_mode")) for m in metas}),
            "metadata": ds.metadata,
            "episodes": ds.num_episodes,
            "complete_episodes": int(np.count_nonzero(s["complete"])) if ds.num_episodes else 0,
            "terminated": int(np.count_nonzero(s["terminated"])) if ds.num_episodes else 0,
            "truncated": int(np.count_nonzero(s["truncated"])) if ds.num_episodes else 0,
            "steps": ds.num_steps,
            "return": _stats(s["episode_return"]) if ds.num_episodes else {},
            "length": _stats(s["length"]) if ds.num_episodes else {},
            "observation_space": str(ds.observation_space),
            "action_space": str(ds.action_space),
            "bytes_on_disk": disk,
            "bytes_raw": raw_total,
            "compression_ratio": raw_total / disk if disk else None,
            "columns": columns,
            "problems": [list(p) for p in ds.problems],
        }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    out = sys.stdout
    print(f"{report['path']}: {report['shards']} shard(s), {report['recordings']} recording(s)", file=out)
    print(
        f"  env: {', '.join(report['env_ids'])}  num_envs: {', '.join(map(str, report['num_envs']))}  "
        f"autoreset: {', '.join(report['autoreset_modes'])}",
        file=out,
    )
    print(f"  metadata: {json.dumps(report['metadata'])}", file=out)
    print(
        f"  episodes: {report['episodes']} ({report['complete_episodes']} complete, "
        f"{report['terminated']} terminated, {report['truncated']} truncated)  steps: {report['steps']}",
        file=out,
    )
    for name in ("return", "length"):
        st = report[name]
        if st:
            print(
                f"  {name}: mean {st['mean']:.4g}  std {st['std']:.4g}  min {st['min']:.4g}  "
                f"median {st['median']:.4g}  max {st['max']:.4g}",
                file=out,
            )
    print(f"  observation space: {report['observation_space']}", file=out)
    print(f"  action space: {report['action_space']}", file=out)
    ratio = report["compression_ratio"]
    print(
        f"  on disk: {_fmt_bytes(disk)}  raw: {_fmt_bytes(raw_total)}" + (f"  ratio: {ratio:.2f}x" if ratio else ""),
        file=out,
    )
    print(f"  columns ({'raw -> stored' if exact else 'raw bytes in episodes'}):", file=out)
    width = max((len(c["name"]) for c in columns), default=0)
    for c in columns:
        line = f"    {c['name']:<{width}}  {_fmt_bytes(c['raw_bytes']):>10}"
        if c["stored_bytes"] is not None:
            r = f"{c['ratio']:.2f}x" if c["ratio"] else "-"
            line += f" -> {_fmt_bytes(c['stored_bytes']):>10}  {r}"
        print(line, file=out)
    for file, offset, why in report["problems"]:
        print(f"  problem: {file} at byte {offset}: {why}", file=out)
    return 0


def _bench(args: argparse.Namespace) -> int:
    from trajcore.bench import measure_overhead

    vectorization = None if args.vectorization == "none" else args.vectorization
    if vectorization is None and args.num_envs > 1:
        vectorization = "sync"
    record_kwargs: dict[str, Any] = {"zstd_level": args.zstd_level}
    if args.delta:
        record_kwargs["codecs"] = {"obs": {"delta": True, "zstd_level": args.zstd_level}}
    policy = _load_policy(args.policy) if args.policy else None
    print(
        f"bench {args.env} x{args.num_envs} ({vectorization or 'single env'}): {args.steps} vector steps with "
        f"recording and as many without, in {args.repeats} interleaved segments each",
        file=sys.stderr,
    )
    progress = _Progress(2 * args.steps * args.num_envs, "steps")
    last = [0]

    def advance(done: int, total: int) -> None:
        progress.update((done - last[0]) * args.num_envs)
        last[0] = done

    try:
        result = measure_overhead(
            args.env,
            num_envs=args.num_envs,
            vectorization=vectorization,
            steps=args.steps,
            repeats=args.repeats,
            policy=policy,
            record_kwargs=record_kwargs,
            progress=advance,
            seed=args.seed,
        )
    finally:
        progress.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    print(_bench_table(result))
    return 0


def _bench_table(r: dict[str, Any]) -> str:
    """The figures of `measure_overhead` as a table: median and spread (min..max) over segments."""
    rows = [
        ("env steps/s without recording", "env_steps_per_s_without", ",.0f"),
        ("env steps/s with recording", "env_steps_per_s_with", ",.0f"),
        ("overhead per vector step (us)", "overhead_us_per_vector_step", ".2f"),
        ("overhead per env step (us)", "overhead_us_per_env_step", ".3f"),
        ("overhead (%)", "overhead_pct", ".2f"),
        ("recorder call per vector step (us)", "call_us_per_vector_step", ".2f"),
        ("recorder call per env step (us)", "call_us_per_env_step", ".3f"),
    ]
    if r["num_envs"] == 1:
        rows = [row for row in rows if "vector" not in row[1]]
    width = max(len(name) for name, _, _ in rows)
    lines = [
        f"{r['env']} x{r['num_envs']} ({r['vectorization'] or 'single env'}), {r['steps']} vector steps per loop, "
        f"{r['repeats']} segments",
        f"{'':<{width}}  {'median':>12}  {'spread (min..max)':>24}",
    ]
    for name, key, fmt in rows:
        s = r[key]
        spread = f"{format(s['min'], fmt)}..{format(s['max'], fmt)}"
        lines.append(f"{name:<{width}}  {format(s['median'], fmt):>12}  {spread:>24}")
    ratio = r["compression_ratio"]
    lines.append(
        f"{'bytes written':<{width}}  {_fmt_bytes(r['bytes_written']):>12}  "
        f"(raw {_fmt_bytes(r['bytes_raw'])}" + (f", ratio {ratio:.2f}x)" if ratio else ")")
    )
    lines.append(f"{'peak memory growth':<{width}}  {_fmt_bytes(r['peak_rss_growth_bytes']):>12}")
    lines.append(
        f"{'episodes recorded':<{width}}  {r['episodes']:>12}  (the loop waited for the writer {r['ring_waits']} times)"
    )
    lines.append("(recorder call: the same steps replayed by an env that does no work, with and without the recorder)")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trajcore", description="Record and inspect RL episodes.")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("record", help="record a (vectorized) gymnasium env into a directory")
    r.add_argument("env_id", help="any registered gymnasium env id, e.g. CartPole-v1")
    r.add_argument("path", help="directory to write shards into (created if missing)")
    r.add_argument("--num-envs", type=int, default=1, help="sub-envs of the vector env (default 1)")
    r.add_argument("--steps", type=int, default=10_000, help="vector steps to take (env steps = steps x num-envs)")
    r.add_argument("--vectorization", choices=["sync", "async"], default="sync")
    r.add_argument("--autoreset", choices=["next_step", "same_step", "disabled"], default="next_step")
    r.add_argument(
        "--policy", help="module:callable mapping batched observations to batched actions (default: random actions)"
    )
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--zstd-level", type=int, default=3)
    r.add_argument("--metadata", help="JSON object merged into the dataset metadata")
    r.set_defaults(func=_record)

    i = sub.add_parser("info", help="summarize a dataset (directory or shard file)")
    i.add_argument("path")
    i.add_argument("--json", action="store_true", help="print a JSON report")
    i.set_defaults(func=_info)

    b = sub.add_parser("bench", help="measure the recording overhead on an env (with vs without, interleaved)")
    b.add_argument("--env", required=True, help="a registered gymnasium env id, or module:callable returning an env")
    b.add_argument("--num-envs", type=int, default=1, help="sub-envs of the vector env (default 1)")
    b.add_argument(
        "--vectorization",
        choices=["sync", "async", "none"],
        help="vector env kind (default: none, a single env, for --num-envs 1; else sync)",
    )
    b.add_argument(
        "--steps", type=int, default=20_000, help="vector steps with recording (and as many without), default 20000"
    )
    b.add_argument("--repeats", type=int, default=5, help="interleaved segments per loop (default 5)")
    b.add_argument(
        "--policy", help="module:callable mapping batched observations to batched actions (default: random actions)"
    )
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--zstd-level", type=int, default=3)
    b.add_argument("--delta", action="store_true", help="store observations with the delta filter")
    b.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    b.set_defaults(func=_bench)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "num_envs", 1) < 1 or getattr(args, "steps", 0) < 0:
        raise SystemExit("--num-envs must be >= 1 and --steps >= 0")
    if args.command == "bench":
        if args.vectorization == "none" and args.num_envs > 1:
            raise SystemExit("--vectorization none takes --num-envs 1")
        if args.steps < 1 or args.repeats < 1:
            raise SystemExit("--steps and --repeats must be >= 1")
    from trajcore.errors import TrajcoreError

    try:
        result: int = args.func(args)
    except TrajcoreError as e:
        print(f"trajcore: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return result
