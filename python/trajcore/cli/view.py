"""``trajcore view``: look at an episode in the browser: frames, slider, values, plots (one HTML file)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from trajcore.cli._common import Commands, UsageError, fmt_bytes

HELP = "look at an episode in the browser: frames, slider, values, plots (one HTML file)"
DESCRIPTION = (
    "Write one self-contained HTML page for an episode (no network: it opens from any disk): the rendered "
    "frame, or the observation when it is an image, a slider, play/pause, speed and arrow keys; the step's "
    "observation, action, reward, flags, infos and custom data beside it; plots of reward, return so far and "
    "every scalar info and custom-data column, with a cursor. Without -o the page is a temporary file opened "
    "in the default browser."
)
EXAMPLES = (
    "runs/breakout --episode 3",
    "runs/breakout --episode -1 -o last.html",
    "runs/cp16 --episode 0 -o ep0.html --max-mb 20",
    "runs/spread --env-episode 2 -o joint.html",
    "runs/spread --env-episode 2 --agent agent_1",
)


def run(args: argparse.Namespace) -> int:
    import trajcore
    from trajcore.viewer import view

    max_bytes = None if args.max_mb is None else int(args.max_mb * (1 << 20))
    with trajcore.open(args.path) as ds:
        try:
            episode = _view_target(ds, args)
        except IndexError as e:
            raise UsageError(str(e)) from None
        written = view(episode, args.out, max_bytes=max_bytes, video=False if args.no_video else None)
    print(f"wrote {written} ({fmt_bytes(os.path.getsize(written))})", file=sys.stderr)
    return 0


def _view_target(ds: Any, args: argparse.Namespace) -> Any:
    """The episode `trajcore view` shows: --episode N (of --agent's episodes with --agent), or
    every agent of --env-episode K (only --agent's part of it with --agent)."""
    if args.agent is not None and args.agent not in ds.agents:
        raise UsageError(f"--agent {args.agent!r}: not an agent of this dataset (agents: {ds.agents or 'none'})")
    if args.env_episode is None:
        episodes = ds.episodes if args.agent is None else ds.select(agent=args.agent)
        return episodes[args.episode]
    if not ds.agents:
        raise UsageError("--env-episode: this dataset has no agents (it is not a multi-agent recording)")
    joint = ds.env_episodes[args.env_episode]
    if args.agent is None:
        return joint
    if args.agent not in joint.episodes:
        raise UsageError(
            f"--agent {args.agent!r} has no part in env episode {args.env_episode} (agents: {joint.agents})"
        )
    return joint.episodes[args.agent]


def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
    """Adds the command's arguments to its parser."""
    commands.dataset_arg(parser)
    parser.add_argument("--episode", type=int, default=0, help="dataset index of the episode (negative: from the end)")
    parser.add_argument(
        "--env-episode",
        type=int,
        metavar="K",
        help="multi-agent datasets: env episode K (ds.env_episodes[K]), every agent's part aligned on the env's "
        "steps, with a picker to show one (default: the page of --episode)",
    )
    parser.add_argument(
        "--agent",
        help="multi-agent datasets: this agent's part of --env-episode K, or with --episode N its N-th episode "
        "(default: every agent)",
    )
    parser.add_argument(
        "-o",
        "--out",
        metavar="FILE.html",
        help="write the page here, replacing it (default: a temporary file, opened in the default browser)",
    )
    parser.add_argument(
        "--max-mb",
        type=float,
        help="cap the page at this many MiB: frames are thinned (every k-th kept) to fit (default: every frame)",
    )
    parser.add_argument(
        "--no-video",
        action="store_true",
        help="write no MP4 beside the page (by default, where PyAV is installed, the page's image is also written "
        "as FILE.mp4 and the page links to it)",
    )
