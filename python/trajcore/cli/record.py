"""``trajcore record``: record a (vectorized) gymnasium env into a directory."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from trajcore.cli._common import Commands, Progress, UsageError, fmt_bytes, load_policy

HELP = "record a (vectorized) gymnasium env into a directory"
DESCRIPTION = "Run a vector env with random actions (or a policy) and record every sub-env episode."
EXAMPLES = (
    "CartPole-v1 --num-envs 16 --steps 100000 runs/cp16",
    "LunarLander-v3 --policy mypolicy:act --metadata '{\"run\": 3}' runs/ll",
)


def run(args: argparse.Namespace) -> int:
    from gymnasium.vector import AutoresetMode

    import trajcore

    mode = {
        "next_step": AutoresetMode.NEXT_STEP,
        "same_step": AutoresetMode.SAME_STEP,
        "disabled": AutoresetMode.DISABLED,
    }[args.autoreset]
    metadata = {"env_id": args.env_id, "num_envs": args.num_envs, "seed": args.seed, "policy": args.policy or "random"}
    metadata.update(_metadata_arg(args.metadata))
    policy = load_policy(args.policy) if args.policy else None
    envs = _make_vec(args.env_id, args.num_envs, args.vectorization, mode)
    envs.action_space.seed(args.seed)
    print(
        f"recording {args.env_id} x{args.num_envs} ({args.vectorization}, autoreset {args.autoreset}) "
        f"for {args.steps} vector steps into {args.path}",
        file=sys.stderr,
    )
    progress = Progress(args.steps * args.num_envs, "steps")
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
        f"recorded {total} env steps in {elapsed:.1f} s ({total / max(elapsed, 1e-9):,.0f} env steps/s); "
        f"{stats.get('episodes', 0)} episodes, {fmt_bytes(stats.get('bytes_written', 0))} written "
        f"({fmt_bytes(stats.get('bytes_raw', 0))} raw)",
        file=sys.stderr,
    )
    return 0


def _metadata_arg(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as e:
        raise UsageError(f"--metadata is not valid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise UsageError(f"--metadata must be a JSON object, got {text!r}")
    return value


def _make_vec(env_id: str, num_envs: int, vectorization: str, mode: Any) -> Any:
    import gymnasium as gym

    try:
        return gym.make_vec(
            env_id, num_envs=num_envs, vectorization_mode=vectorization, vector_kwargs={"autoreset_mode": mode}
        )
    except gym.error.Error as e:
        raise UsageError(f"cannot make env {env_id!r}: {e}") from None


def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
    """Adds the command's arguments to its parser."""
    parser.add_argument("env_id", metavar="ENV_ID", help="any registered gymnasium env id, e.g. CartPole-v1")
    parser.add_argument(
        "path", metavar="PATH", help="directory to write shards into (created if missing), or s3:// prefix"
    )
    commands.num_envs_arg(parser)
    parser.add_argument("--steps", type=int, default=10_000, help="vector steps to take (env steps = steps x num-envs)")
    parser.add_argument("--vectorization", choices=["sync", "async"], default="sync", help="vector env kind")
    parser.add_argument(
        "--autoreset", choices=["next_step", "same_step", "disabled"], default="next_step", help="vector autoreset mode"
    )
    commands.policy_arg(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed of the envs' reset and of the action space")
    commands.zstd_level_arg(parser)
    parser.add_argument("--metadata", help="JSON object merged into the dataset metadata (default: none)")
