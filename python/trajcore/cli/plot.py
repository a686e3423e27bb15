"""``trajcore plot``: write PNG plots: return/length per episode, histograms, metrics, metadata, timelog."""

from __future__ import annotations

import argparse
import os

from trajcore.cli._common import Commands, UsageError

HELP = "write PNG plots: return/length per episode, histograms, metrics, metadata, timelog"
DESCRIPTION = (
    "Plot every episode's return and length against wall time and against the episode index (one colour per "
    "sub-env, with a rolling mean), their histograms, duration and env steps per second, the mean of every "
    "episode metric, every numeric episode metadata value, and the recorder's timelog (writer time per stage, "
    "ring fill, producer waits, vector steps per second) stored in the dataset's files, or one saved with "
    "trajcore.plots.save_timelog. Needs matplotlib."
)
EXAMPLES = (
    "runs/cp16 -o plots/",
    "runs/cp16 --select complete=true --window 50",
    "runs/cp16 --timelog timelog.json -o plots/",
    "--timelog timelog.json",
)


def run(args: argparse.Namespace) -> int:
    import trajcore
    from trajcore._store import local_only
    from trajcore.plots import load_timelog, write_plots
    from trajcore.read.select.selection import apply_select, parse_select

    if args.path is None and args.timelog is None:
        raise UsageError("give a dataset PATH, --timelog FILE, or both")
    local_only(args.timelog, "--timelog")
    local_only(args.out, "plot's output (-o)")
    timelog = load_timelog(args.timelog) if args.timelog is not None else None
    out = args.out or f"plots-{os.path.basename(os.path.normpath(args.path or 'timelog'))}"
    if args.path is None:
        written = write_plots(None, out, timelog=timelog)
    else:
        with trajcore.open(args.path) as ds:
            episodes = apply_select(ds, parse_select(args.select))
            written = write_plots(episodes, out, timelog=timelog, window=args.window)
    for path in written:
        print(path)
    return 0


def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
    """Adds the command's arguments to its parser."""
    commands.dataset_arg(parser, nargs="?")
    parser.add_argument(
        "-o",
        "--out",
        metavar="DIR",
        help="directory of the PNG files, created if missing (default: plots-<PATH's name>)",
    )
    parser.add_argument(
        "--timelog",
        metavar="FILE.json",
        help="plot this timelog, saved by trajcore.plots.save_timelog, instead of the one stored in the dataset "
        "(default: the stored one)",
    )
    parser.add_argument("--window", type=int, help="rolling-mean window in episodes (default: a twentieth, 1 to 100)")
    commands.select_arg(parser, "plot")
