"""``trajcore import-minari``: write a local minari dataset as a trajcore dataset."""

from __future__ import annotations

import argparse

from trajcore.cli._common import Commands, run_import


def run(args: argparse.Namespace) -> int:
    from trajcore.formats import import_minari

    return run_import(import_minari, args)


def add_to(commands: Commands) -> None:
    """Adds the command to the parser."""
    m = commands.command(
        "import-minari",
        "write a local minari dataset as a trajcore dataset",
        "Replay every episode of a Minari dataset on this machine (nothing is downloaded) into a new trajcore "
        "dataset; a dataset trajcore exported comes back with its custom data and metadata.",
        "trajcore/cartpole/random-v0 runs/cp16-back",
        "~/.minari/datasets/D4RL/door/human-v2 runs/door",
    )
    m.add_argument("source", metavar="NAME_OR_PATH", help="a minari dataset id found locally, or its directory")
    m.add_argument("dst", metavar="DST", help="the trajcore dataset directory (or s3:// prefix) to create")
    m.add_argument("--zstd-level", type=int, default=3, help="zstd level of every column")
    m.add_argument("--force", action="store_true", help="replace DST if it exists")
    m.set_defaults(func=run)
