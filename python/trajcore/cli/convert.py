"""``trajcore convert``: rewrite a dataset with other codecs (e.g. raw columns for zero-copy training reads)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from typing import Any

from trajcore.cli._common import DATASET_HELP, Commands, UsageError, written_text

HELP = "rewrite a dataset with other codecs (e.g. raw columns for zero-copy training reads)"
DESCRIPTION = (
    "Copy a dataset (or some of its episodes) into a new directory with other storage per column; several "
    "sources (of the same spaces, or of the same values --keys keeps) are merged into one. DST may be a "
    "store prefix holding no shard (s3://bucket/prefix): the copy is written locally and uploaded."
)
EXAMPLES = (
    "runs/cp16 runs/cp16-raw --codecs raw",
    'runs/cp16 runs/cp16-obs --codecs \'{"obs": {"zstd_level": 9}}\' --select complete=true',
    "runs/a runs/b runs/merged --select policy=ppo",
)


def run(args: argparse.Namespace) -> int:
    import trajcore
    from trajcore.read.select.selection import apply_select, parse_select

    codecs: Any = None
    if args.codecs == "raw":
        codecs = "raw"
    elif args.codecs:
        try:
            codecs = json.loads(args.codecs)
        except ValueError as e:
            raise UsageError(f"--codecs is neither 'raw' nor valid JSON ({e}): {args.codecs!r}") from None
        if not isinstance(codecs, dict):
            raise UsageError(f"--codecs must be 'raw' or a JSON object, got {args.codecs!r}")
    selection = parse_select(args.select)
    with contextlib.ExitStack() as stack:
        sources = [apply_select(stack.enter_context(trajcore.open(src)), selection) for src in args.src]
        start = time.perf_counter()
        result = trajcore.convert(
            sources,
            args.dst,
            codecs=codecs,
            chunk_bytes=args.chunk_bytes,
            max_shard_bytes=args.max_shard_bytes,
            keys=args.keys,
        )
    where = f"into {len(result['shards'])} shard(s)"
    elapsed = time.perf_counter() - start
    print(written_text("converted", result["episodes"], result["steps"], where, elapsed), file=sys.stderr)
    return 0


def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
    """Adds the command's arguments to its parser."""
    parser.add_argument("src", metavar="SRC", nargs="+", help=DATASET_HELP + "; several are merged")
    parser.add_argument("dst", metavar="DST", help="the new dataset directory (must not exist, or be empty)")
    parser.add_argument(
        "--codecs",
        help="'raw' (every column uncompressed) or a JSON object of per-column codecs "
        "(default: keep each column's codec)",
    )
    parser.add_argument("--chunk-bytes", type=int, help="target raw size of a chunk (default: the writer's, 1 MiB)")
    parser.add_argument("--max-shard-bytes", type=int, help="a new shard file starts past this size (default: 1 GiB)")
    parser.add_argument(
        "--keys",
        action="append",
        metavar="KEY",
        help="keep only this value (a column name or '/'-bounded prefix: obs/pos, action, info; reward and the "
        "done flags always); repeatable (default: every value)",
    )
    commands.select_arg(parser, "copy")
