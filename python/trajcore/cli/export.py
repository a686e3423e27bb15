"""``trajcore export``: write a dataset as csv, jsonl (RLlib), parquet, a minari dataset or mp4 videos."""

from __future__ import annotations

import argparse
import os
import sys
import time

from trajcore.cli._common import Commands, Progress, UsageError, fmt_bytes


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
    from trajcore.read.selection import apply_select, parse_select
    from trajcore.tools.output import check_destination

    fmt = format_of(args.out, args.format)
    if args.columns is not None and fmt not in ("csv", "parquet"):
        raise UsageError(f"--columns applies to csv and parquet; {fmt} exports write every value")
    if fmt != "mp4" and (args.keys is not None or args.fps is not None or args.grid):
        raise UsageError(f"--keys, --fps and --grid apply to --format mp4, not {fmt}")
    if fmt == "mp4":
        from trajcore.video import av_module

        av_module("trajcore export --format mp4")  # before reading anything
    if fmt != "minari":
        check_destination(os.path.normpath(args.out), args.force)  # before reading anything
    selection = parse_select(args.select)
    with open_for_pass(args.path) as ds:
        episodes = apply_select(ds, selection)
        progress = Progress(episodes.num_steps, "steps")
        start = time.perf_counter()
        try:
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
        f"exported {len(episodes):,} episodes, {result['steps']:,} steps to {where} ({fmt}) in {elapsed:.1f} s "
        f"({result['steps'] / max(elapsed, 1e-9):,.0f} steps/s, {fmt_bytes(size)}){skipped}",
        file=sys.stderr,
    )
    return 0


def _size_of(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
    return os.path.getsize(path) if os.path.exists(path) else 0


def add_to(commands: Commands) -> None:
    """Adds the command to the parser."""
    from trajcore.formats import DEFAULT_MAX_VALUES, FORMATS

    e = commands.command(
        "export",
        "write a dataset as csv, jsonl (RLlib), parquet, a minari dataset or mp4 videos",
        "Stream a dataset (or some of its episodes) into another format, episode by episode: memory stays bounded. "
        "Rows of csv and parquet are steps (obs before, next_obs/reward/info after); jsonl has one RLlib "
        "SampleBatch per episode; minari writes a dataset minari.load_dataset opens, under MINARI_DATASETS_PATH "
        "(or ~/.minari/datasets); mp4 writes one H.264 video per episode and image key into the directory OUT "
        '(or, with --grid, one per key tiling the sub-envs); it needs PyAV: pip install "trajcore[video]".',
        "runs/cp16 cp16.csv",
        "runs/cp16 cp16.parquet --select complete=true",
        "runs/pixels pixels.csv --columns obs,action,reward",
        "runs/cp16 cp16.jsonl --force",
        "runs/cp16 trajcore/cartpole/random-v0 --format minari",
        "runs/breakout videos --format mp4 --keys render/frame --grid",
    )
    commands.dataset_arg(e)
    e.add_argument(
        "out",
        metavar="OUT",
        help="the file to write, for minari the dataset id (namespace/name-v0), for mp4 the directory to make",
    )
    e.add_argument("--format", choices=FORMATS, help="output format (default: from OUT's extension)")
    commands.select_arg(e, "export")
    e.add_argument(
        "--columns",
        metavar="NAMES",
        help="csv/parquet: values to write, comma-separated names or prefixes such as obs,action,reward,info "
        "(default: all; csv leaves out arrays of more than --max-values values)",
    )
    e.add_argument(
        "--max-values",
        type=int,
        default=DEFAULT_MAX_VALUES,
        help="csv: largest array written unless named in --columns",
    )
    e.add_argument(
        "--keys",
        metavar="NAMES",
        help="mp4: image values to write, comma-separated (e.g. render/frame,obs/camera; default: every uint8 "
        "image observation and the rendered frames)",
    )
    e.add_argument("--fps", type=float, help="mp4: frames per second (default: the env's render_fps, else 30)")
    e.add_argument("--grid", action="store_true", help="mp4: one video per key, a tile per sub-env")
    e.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    e.set_defaults(func=run)
