"""``trajcore import-lerobot``: write a local LeRobot v3.0 dataset as a trajcore dataset."""

from __future__ import annotations

import argparse
import sys
import time

from trajcore.cli._common import Commands, Progress


def run(args: argparse.Namespace) -> int:
    from trajcore.formats import from_lerobot

    start = time.perf_counter()
    progress = Progress(0, "steps")
    try:
        result = from_lerobot(
            args.source, args.dst, force=args.force, zstd_level=args.zstd_level, progress=progress.update
        )
    finally:
        progress.close()
    elapsed = time.perf_counter() - start
    print(
        f"imported {result['episodes']:,} episodes, {result['steps']:,} steps from {args.source} into {args.dst} "
        f"in {elapsed:.1f} s",
        file=sys.stderr,
    )
    return 0


def add_to(commands: Commands) -> None:
    """Adds the command to the parser."""
    m = commands.command(
        "import-lerobot",
        "write a local LeRobot v3.0 dataset as a trajcore dataset",
        "Read a LeRobot v3.0 dataset on this machine (Parquet and MP4; LeRobot itself is not needed, nothing is "
        "downloaded) into a new trajcore dataset: an episode per LeRobot episode, its task in the episode's "
        "metadata; 'trajcore export DST OUT --format lerobot' writes the same features back.",
        "~/.cache/huggingface/lerobot/lerobot/pusht runs/pusht",
    )
    m.add_argument("source", metavar="ROOT", help="the LeRobot dataset's directory (holding meta/info.json)")
    m.add_argument("dst", metavar="DST", help="the trajcore dataset directory to create")
    m.add_argument("--zstd-level", type=int, default=3, help="zstd level of every column")
    m.add_argument("--force", action="store_true", help="replace DST if it exists")
    m.set_defaults(func=run)
