"""``trajcore export``: write a dataset as csv, jsonl (RLlib), parquet, a minari dataset, mp4 videos or a
LeRobot v3.0 dataset."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from trajcore.cli._common import Commands, Progress, UsageError, fmt_bytes, written_text

HELP = "write a dataset as csv, jsonl (RLlib), parquet, a minari dataset, mp4 videos or a LeRobot dataset"
DESCRIPTION = (
    "Stream a dataset (or some of its episodes) into another format, episode by episode: memory stays bounded. "
    "Rows of csv and parquet are steps (obs before, next_obs/reward/info after); jsonl has one RLlib "
    "SampleBatch per episode; minari writes a dataset minari.load_dataset opens, under MINARI_DATASETS_PATH "
    "(or ~/.minari/datasets); mp4 writes one H.264 video per episode and image key into the directory OUT "
    '(or, with --grid, one per key tiling the sub-envs); it needs PyAV: pip install "trajcore[video]". lerobot '
    "writes a LeRobot v3.0 dataset (Parquet, an H.264 video per camera, meta/, a Hub card README.md) into the "
    "directory OUT; `huggingface-cli upload REPO_ID OUT --repo-type dataset` publishes it."
)
EXAMPLES = (
    "runs/cp16 cp16.csv",
    "runs/cp16 cp16.parquet --select complete=true",
    "runs/pixels pixels.csv --columns obs,action,reward",
    "runs/cp16 cp16.jsonl --force",
    "runs/cp16 trajcore/cartpole/random-v0 --format minari",
    "runs/breakout videos --format mp4 --keys render/frame --grid",
    "runs/robot robot-lerobot --format lerobot --repo-id me/robot --task 'pick the cube'",
)


def _names_arg(text: str | None, option: str = "--columns") -> list[str] | None:
    if text is None:
        return None
    names = [c.strip() for c in text.split(",") if c.strip()]
    if not names:
        example = "obs,action,reward" if option == "--columns" else "render/frame,obs/camera"
        raise UsageError(f"{option} is empty: give names separated by commas (e.g. {example})")
    return names


def run(args: argparse.Namespace) -> int:
    from trajcore.formats import export, format_of
    from trajcore.formats._read import open_for_pass
    from trajcore.read.select.selection import apply_select, parse_select
    from trajcore.tools.output import check_destination

    fmt = "lerobot" if args.format == "lerobot" else format_of(args.out, args.format)
    if args.columns is not None and fmt not in ("csv", "parquet"):
        raise UsageError(f"--columns applies to csv and parquet; {fmt} exports write every value")
    if fmt != "mp4" and (args.keys is not None or args.grid):
        raise UsageError(f"--keys and --grid apply to --format mp4, not {fmt}")
    if fmt not in ("mp4", "lerobot") and args.fps is not None:
        raise UsageError(f"--fps applies to --format mp4 and lerobot, not {fmt}")
    lerobot = _lerobot_options(args)
    if fmt != "lerobot" and lerobot:
        raise UsageError(
            f"--repo-id, --task, --task-key, --images, --pix-fmt and --license apply to --format lerobot, not {fmt}"
        )
    if fmt == "mp4" or (fmt == "lerobot" and not args.images):
        from trajcore.video import av_module

        av_module(f"trajcore export --format {fmt}")  # before reading anything
    if fmt != "minari":
        check_destination(os.path.normpath(args.out), args.force)  # before reading anything
    selection = parse_select(args.select)
    with open_for_pass(args.path) as ds:
        episodes = apply_select(ds, selection)
        progress = Progress(episodes.num_steps, "steps")
        start = time.perf_counter()
        try:
            if fmt == "lerobot":
                from trajcore.tools.lerobot import to_lerobot

                lerobot.setdefault("repo_id", f"local/{os.path.basename(os.path.normpath(args.out))}")
                result = to_lerobot(
                    episodes, args.out, fps=args.fps, force=args.force, progress=progress.update, **lerobot
                )
            else:
                result = export(
                    episodes,
                    args.out,
                    fmt,
                    columns=_names_arg(args.columns),
                    max_values=args.max_values,
                    force=args.force,
                    progress=progress.update,
                    keys=_names_arg(args.keys, "--keys"),
                    fps=args.fps,
                    grid=args.grid,
                )
        finally:
            progress.close()
    elapsed = time.perf_counter() - start
    where = result.get("path", result["out"])
    size = _size_of(where)
    skipped = f", {result['skipped']} episodes of no step skipped" if result.get("skipped") else ""
    if fmt == "mp4":
        skipped = f", {len(result['files'])} videos" + (
            f", {result['skipped']} episode videos of a key not recorded there skipped" if result["skipped"] else ""
        )
    print(
        written_text("exported", len(episodes), result["steps"], f"to {where} ({fmt})", elapsed)
        + f" ({result['steps'] / max(elapsed, 1e-9):,.0f} steps/s, {fmt_bytes(size)}){skipped}",
        file=sys.stderr,
    )
    return 0


def _lerobot_options(args: argparse.Namespace) -> dict[str, Any]:
    """The lerobot options given (`trajcore.to_lerobot`'s keywords)."""
    given = {
        "repo_id": args.repo_id,
        "task": args.task,
        "task_key": args.task_key,
        "pix_fmt": args.pix_fmt,
        "license": args.license,
        "video": False if args.images else None,
    }
    return {k: v for k, v in given.items() if v is not None}


def _size_of(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
    return os.path.getsize(path) if os.path.exists(path) else 0


def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
    """Adds the command's arguments to its parser."""
    from trajcore.formats import DEFAULT_MAX_VALUES, FORMATS

    commands.dataset_arg(parser)
    parser.add_argument(
        "out",
        metavar="OUT",
        help="the file to write, for minari the dataset id (namespace/name-v0), for mp4 and lerobot the directory "
        "to make",
    )
    parser.add_argument("--format", choices=(*FORMATS, "lerobot"), help="output format (default: from OUT's extension)")
    commands.select_arg(parser, "export")
    parser.add_argument(
        "--columns",
        metavar="NAMES",
        help="csv/parquet: values to write, comma-separated names or prefixes such as obs,action,reward,info "
        "(default: all; csv leaves out arrays of more than --max-values values)",
    )
    parser.add_argument(
        "--max-values",
        type=int,
        default=DEFAULT_MAX_VALUES,
        help="csv: largest array written unless named in --columns",
    )
    parser.add_argument(
        "--keys",
        metavar="NAMES",
        help="mp4: image values to write, comma-separated (e.g. render/frame,obs/camera; default: every uint8 "
        "image observation and the rendered frames)",
    )
    parser.add_argument(
        "--fps", type=float, help="mp4, lerobot: frames per second (default: the env's render_fps, else 30)"
    )
    parser.add_argument("--grid", action="store_true", help="mp4: one video per key, a tile per sub-env")
    parser.add_argument("--repo-id", help="lerobot: the Hub id (user/name; default local/<OUT's name>)")
    parser.add_argument(
        "--task", help="lerobot: the task text of episodes whose metadata has none (default: the env id)"
    )
    parser.add_argument("--task-key", help="lerobot: the episode metadata key holding the task text (default: task)")
    parser.add_argument("--images", action="store_true", help="lerobot: cameras as PNG in the Parquet rows, not video")
    parser.add_argument(
        "--pix-fmt",
        choices=("yuv444p", "yuv420p"),
        help="lerobot: the videos' pixel format (default: yuv444p; yuv420p plays in browsers)",
    )
    parser.add_argument("--license", help="lerobot: the card's license (mit, cc-by-4.0, ...; default: unknown)")
    parser.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
