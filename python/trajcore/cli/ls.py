"""``trajcore ls``: list episodes: index, env, length, return, complete, metadata."""

from __future__ import annotations

import argparse
import json

from trajcore.cli._common import Commands, strict_json

HELP = "list episodes: index, env, length, return, complete, metadata"
DESCRIPTION = "One line per episode, in dataset order. Reads the index only (and episode metadata)."
EXAMPLES = ("runs/cp16", "runs/cp16 --select env_index=3 --select complete=true", "runs/cp16 --json | head -1")


def run(args: argparse.Namespace) -> int:
    import trajcore
    from trajcore.formats.summaries import METRIC_STATS, metric_column, summary_columns
    from trajcore.read.records.provenance import policy_label
    from trajcore.read.records.provenance_keys import POLICY_KEY
    from trajcore.read.select.selection import apply_select, parse_select

    selection = parse_select(args.select)
    with trajcore.open(args.path) as ds:
        episodes = apply_select(ds, selection)
        cols = summary_columns(ds, episodes.indices)
        names = [n for n in cols if not n.startswith("metrics/") and n != "agent"]
        agents = cols.get("agent")  # multi-agent datasets: whose episode each is
        width = max((len(str(a)) for a in ds.agents), default=0)
        metric_names = list(ds.metrics())
        metas = [ds._reads.episode_metadata(i) for i in episodes.indices]
        policies = [policy_label(m) for m in metas]
        policy_width = max((len(p) for p in policies), default=0)
        if not args.json:
            print(
                (f"{'agent':<{width}}  " if agents is not None else "")
                + f"{'index':>7} {'env':>4} {'length':>7} {'return':>11} {'complete':>8}  {'end':<10}  "
                + ("metrics (mean)  " if metric_names else "")
                + (f"{'policy':<{policy_width}}  " if policy_width else "")
                + "metadata"
            )
        for i in range(len(episodes)):
            row = {n: cols[n][i].item() for n in names}
            if agents is not None:
                row["agent"] = agents[i]
            metrics = {
                m: {stat: cols[metric_column(m, stat)][i].item() for stat in METRIC_STATS}
                for m in metric_names
                if cols[metric_column(m, "count")][i] > 0
            }
            meta = metas[i]
            if args.json:
                line = {**row, "metrics": metrics, "policy": meta.get(POLICY_KEY), "metadata": meta}
                print(json.dumps(strict_json(line), separators=(",", ":"), allow_nan=False))
                continue
            end = "terminated" if row["terminated"] else "truncated" if row["truncated"] else "-"
            means = " ".join(f"{m}={v['mean']:.5g}" for m, v in metrics.items())
            print(
                (f"{row['agent']!s:<{width}}  " if agents is not None else "")
                + f"{row['episode']:>7} {row['env_index']:>4} {row['length']:>7} {row['episode_return']:>11.5g} "
                f"{'yes' if row['complete'] else 'no':>8}  {end:<10}  "
                + (f"{means or '-'}  " if metric_names else "")
                + (f"{policies[i]:<{policy_width}}  " if policy_width else "")
                + json.dumps(meta, separators=(",", ":"))
            )
    return 0


def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
    """Adds the command's arguments to its parser."""
    commands.dataset_arg(parser)
    commands.select_arg(parser, "keep")
    parser.add_argument("--json", action="store_true", help="one JSON object per episode per line (JSON Lines)")
