"""``trajcore export``: write a dataset as csv, jsonl (RLlib), parquet or a minari dataset."""

from __future__ import annotations

import argparse
import os
import sys
import time

from trajcore.cli._common import Commands, Progress, UsageError, fmt_bytes


def _columns_arg(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [c.strip() for c in text.split(",") if c.strip()]
    if not names:
        raise UsageError("--columns is empty: give names separated by commas (e.g. obs,action,reward)")
    return names


def run(args: argparse.Namespace) -> int:
    from trajcore.formats import export, format_of
    from trajcore.formats._read import open_for_pass
    from trajcore.read.selection import apply_select, parse_select
    from trajcore.tools.output import check_destination

    fmt = format_of(args.out, args.format)
    if args.columns is not None and fmt not in ("csv", "parquet"):
        raise UsageError(f"--columns applies to csv and parquet; {fmt} exports write every value")
    if fmt != "minari":
        check_destination(args.out, args.force)  # before reading anything
    selection = parse_select(args.select)
    with open_for_pass(args.path) as ds:
        episodes = apply_select(ds, selection)
        progress = Progress(episodes.num_steps, "steps")
        start = time.perf_counter()
        try:
            result = export(
                episodes,
                args.out,
                fmt,
                columns=_columns_arg(args.columns),
                max_values=args.max_values,
                force=args.force,
                progress=progress.update,
            )
        finally:
            progress.close()
    elapsed = time.perf_counter() - start
    where = result.get("path", args.out)
    size = _size_of(where)
    skipped = f", {result['skipped']} episodes of no step skipped" if result.get("skipped") else ""
    print(
        f"exported {len(episodes):,} episodes, {result['steps']:,} steps to {where} ({fmt}) in {elapsed:.1f} s "
        f"({result['steps'] / max(elapsed, 1e-9):,.0f} steps/s, {fmt_bytes(size)}){skipped}",
        file=sys.stderr,
    )
    return 0


def _size_of(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
    return os.path.getsize(path) if os.path.exists(path) else 0


def add_to(commands: Commands) -> None:
    """Adds the command to the parser."""
    from trajcore.formats import DEFAULT_MAX_VALUES, FORMATS

    e = commands.command(
        "export",
        "write a dataset as csv, jsonl (RLlib), parquet or a minari dataset",
        "Stream a dataset (or some of its episodes) into another format, episode by episode: memory stays bounded. "
        "Rows of csv and parquet are steps (obs before, next_obs/reward/info after); jsonl has one RLlib "
        "SampleBatch per episode; minari writes a dataset minari.load_dataset opens, under MINARI_DATASETS_PATH "
        "(or ~/.minari/datasets).",
        "runs/cp16 cp16.csv",
        "runs/cp16 cp16.parquet --select complete=true",
        "runs/pixels pixels.csv --columns obs,action,reward",
        "runs/cp16 cp16.jsonl --force",
        "runs/cp16 trajcore/cartpole/random-v0 --format minari",
    )
    commands.dataset_arg(e)
    e.add_argument("out", metavar="OUT", help="the file to write, or for minari the dataset id (namespace/name-v0)")
    e.add_argument("--format", choices=FORMATS, help="output format (default: from OUT's extension)")
    commands.select_arg(e, "export")
    e.add_argument(
        "--columns",
        metavar="NAMES",
        help="csv/parquet: values to write, comma-separated names or prefixes such as obs,action,reward,info "
        "(default: all; csv leaves out arrays of more than --max-values values)",
    )
    e.add_argument(
        "--max-values",
        type=int,
        default=DEFAULT_MAX_VALUES,
        help="csv: largest array written unless named in --columns",
    )
    e.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    e.set_defaults(func=run)
