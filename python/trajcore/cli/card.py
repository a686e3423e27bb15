"""``trajcore card``: write a dataset card (``README.md``, Hugging Face's conventions) beside the data."""

from __future__ import annotations

import argparse

from trajcore.cli._common import Commands


def run(args: argparse.Namespace) -> int:
    from trajcore.tools.card import write_card

    written = write_card(
        args.path, output=args.output, license=args.license, pretty_name=args.name, overwrite=args.force
    )
    print(f"wrote {written}")
    return 0


def add_to(commands: Commands) -> None:
    """Adds the command to the parser."""
    card = commands.command(
        "card",
        "write a dataset card (README.md) beside the data",
        "A YAML header (license, tags, task, size category: Hugging Face's dataset-card conventions), then the "
        "spaces, episode and step counts, return statistics, the provenance and how to load the data with "
        "trajcore, pandas and Minari: the facts 'info --json' gives.",
        "runs/cp16",
        "runs/cp16 --license mit --name 'CartPole, random policy' --force",
    )
    commands.dataset_arg(card)
    card.add_argument("--license", default="unknown", help="the license identifier of the header (e.g. mit, cc-by-4.0)")
    card.add_argument("--name", default=None, help="the card's title (pretty_name; default: from the env ids)")
    card.add_argument(
        "--output", default=None, help="the file to write (default: README.md in the dataset's directory)"
    )
    card.add_argument("--force", action="store_true", help="overwrite the card if it exists")
    card.set_defaults(func=run)
