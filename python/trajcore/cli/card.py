"""``trajcore card``: write a dataset card (``README.md``, Hugging Face's conventions) beside the data."""

from __future__ import annotations

import argparse

from trajcore.cli._common import Commands

HELP = "write a dataset card (README.md) beside the data"
DESCRIPTION = (
    "A YAML header (license, tags, task, size category: Hugging Face's dataset-card conventions), then the "
    "spaces, episode and step counts, return statistics, the provenance and how to load the data with "
    "trajcore, pandas and Minari: the facts 'info --json' gives."
)
EXAMPLES = ("runs/cp16", "runs/cp16 --license mit --name 'CartPole, random policy' --force")


def run(args: argparse.Namespace) -> int:
    from trajcore.tools.card import write_card

    written = write_card(
        args.path, output=args.output, license=args.license, pretty_name=args.name, overwrite=args.force
    )
    print(f"wrote {written}")
    return 0


def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
    """Adds the command's arguments to its parser."""
    commands.dataset_arg(parser)
    parser.add_argument(
        "--license", default="unknown", help="the license identifier of the header (e.g. mit, cc-by-4.0)"
    )
    parser.add_argument("--name", default=None, help="the card's title (pretty_name; default: from the env ids)")
    parser.add_argument(
        "--output", default=None, help="the file to write (default: README.md in the dataset's directory)"
    )
    parser.add_argument("--force", action="store_true", help="overwrite the card if it exists")
