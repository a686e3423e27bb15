"""``trajcore import-lerobot``: write a local LeRobot v3.0 dataset as a trajcore dataset."""

from __future__ import annotations

import argparse

from trajcore.cli._common import Commands, run_import


def run(args: argparse.Namespace) -> int:
    from trajcore.formats import from_lerobot

    return run_import(from_lerobot, args)


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
