"""``trajcore annotate``: add a column beside a dataset from a ``.npy`` or ``.npz`` file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal

from trajcore.cli._common import Commands, UsageError

HELP = "add a column beside a dataset, without rewriting it"
DESCRIPTION = (
    "Writes data/NAME as a sidecar file per recording, beside the shards (trajcore.annotate): from a .npy "
    "array with one value per episode (its first axis runs over the episodes, in 'ls' order), or a .npz "
    "archive of one array per episode, keyed by episode index ('0', '1', ... or numpy.savez's arr_0, "
    "arr_1, ...; an episode it lacks gets no value). Annotating NAME again writes a later version."
)
EXAMPLES = ("runs/cp16 success success.npy", "runs/cp16 score scores.npz")


def values_from_file(file: str, num_episodes: int) -> list[Any]:
    """One entry per episode from `file`: a ``.npy`` array whose first axis runs over the
    episodes, or a ``.npz`` archive of arrays keyed by episode index (``"0"``, ``"1"``, ...) or
    in `numpy.savez`'s order (``arr_0``, ``arr_1``, ...); an episode the archive lacks gets no
    value.

    Raises:
        UsageError: not a .npy or .npz file, or keys that name no episode.
    """
    import numpy as np

    path = Path(file)
    if path.suffix == ".npy":
        return list(np.load(path, allow_pickle=False))
    if path.suffix != ".npz":
        raise UsageError(f"{file}: give a .npy or a .npz file")
    values: list[Any] = [None] * num_episodes
    with np.load(path, allow_pickle=False) as archive:
        for key in archive.files:
            index = key.removeprefix("arr_")
            if not index.isdigit() or int(index) >= num_episodes:
                raise UsageError(f"{file}: key {key!r} names no episode (the dataset has {num_episodes})")
            values[int(index)] = archive[key]
    return values


def run(args: argparse.Namespace) -> int:
    import trajcore

    with trajcore.open(args.path) as ds:
        values = values_from_file(args.values, ds.num_episodes)
        per: Literal["step", "episode"] = args.per or ("episode" if args.values.endswith(".npy") else "step")
        for written in trajcore.annotate(ds, args.name, values, per=per):
            print(f"wrote {written}")
    return 0


def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
    """Adds the command's arguments to its parser."""
    parser.add_argument("path", metavar="PATH", help="a dataset directory (local)")
    parser.add_argument("name", metavar="NAME", help="the column's name: data/NAME")
    parser.add_argument("values", metavar="FILE", help="a .npy or .npz file of the values")
    parser.add_argument(
        "--per",
        choices=["step", "episode"],
        default=None,
        help="each entry is a value per step or one per episode (default: episode for .npy, step for .npz)",
    )
