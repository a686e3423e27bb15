"""``trajcore bench``: measure the recording overhead on an env (with vs without, interleaved)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trajcore.cli._common import Commands, Progress, UsageError, fmt_bytes, load_policy

HELP = "measure the recording overhead on an env (with vs without, interleaved)"
DESCRIPTION = "Run the env loop with and without recording in alternating segments and compare them."
EXAMPLES = ("--env CartPole-v1 --num-envs 16 --steps 20000", "--env mymod:make_env --json bench.json")


def run(args: argparse.Namespace) -> int:
    from trajcore.tools.bench import measure_overhead

    vectorization = None if args.vectorization == "none" else args.vectorization
    if vectorization is None and args.num_envs > 1:
        vectorization = "sync"
    record_kwargs: dict[str, Any] = {"zstd_level": args.zstd_level}
    if args.delta:
        record_kwargs["codecs"] = {"obs": {"delta": True, "zstd_level": args.zstd_level}}
    policy = load_policy(args.policy) if args.policy else None
    if ":" not in args.env:  # a registered id: check it before announcing anything
        import gymnasium as gym

        try:
            gym.spec(args.env)
        except gym.error.Error as e:
            raise UsageError(f"cannot make env {args.env!r}: {e}") from None
    print(
        f"bench {args.env} x{args.num_envs} ({vectorization or 'single env'}): {args.steps} vector steps with "
        f"recording and as many without, in {args.repeats} interleaved segments each",
        file=sys.stderr,
    )
    progress = Progress(2 * args.steps * args.num_envs, "steps")
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
        f"{'bytes written':<{width}}  {fmt_bytes(r['bytes_written']):>12}  "
        f"(raw {fmt_bytes(r['bytes_raw'])}" + (f", ratio {ratio:.2f}x)" if ratio else ")")
    )
    lines.append(f"{'peak memory growth':<{width}}  {fmt_bytes(r['peak_rss_growth_bytes']):>12}")
    lines.append(
        f"{'episodes recorded':<{width}}  {r['episodes']:>12}  (the loop waited for the writer {r['ring_waits']} times)"
    )
    lines.append("(recorder call: the same steps replayed by an env that does no work, with and without the recorder)")
    return "\n".join(lines)


def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
    """Adds the command's arguments to its parser."""
    parser.add_argument(
        "--env", required=True, help="a registered gymnasium env id, or module:callable returning an env (required)"
    )
    commands.num_envs_arg(parser)
    parser.add_argument(
        "--vectorization",
        choices=["sync", "async", "none"],
        help="vector env kind (default: none, a single env, for --num-envs 1; else sync)",
    )
    parser.add_argument("--steps", type=int, default=20_000, help="vector steps with recording (and as many without)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved segments per loop")
    commands.policy_arg(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed of the envs and of the random actions")
    commands.zstd_level_arg(parser)
    parser.add_argument("--delta", action="store_true", help="store observations with the delta filter")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH (default: no file)")
