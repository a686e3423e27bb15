"""``trajcore recover``: copy what of a damaged dataset still reads into a new one."""

from __future__ import annotations

import argparse
import sys
import time

from trajcore.cli._common import Commands, episodes_text

HELP = "copy what of a damaged dataset still reads into a new one"
DESCRIPTION = (
    "Write every intact episode, and the intact prefix of each damaged one (cut before its first unreadable "
    "row, marked incomplete), into a new dataset directory. SRC is only read; DST is written beside its "
    "place and renamed into it when complete, and verifies intact. With a store URL alone (no DST): make "
    "the shards a killed recorder was writing there of the segments it uploaded, and remove those."
)
EXAMPLES = ("runs/damaged runs/saved", "s3://bucket/run")


def run(args: argparse.Namespace) -> int:
    import trajcore

    start = time.perf_counter()
    result = trajcore.recover(args.src, args.dst)
    if args.dst is None:  # a store URL: shards made of a killed recorder's segments
        for shard in result["shards"]:
            done = "was up whole already" if shard["already_up"] else f"{shard['bytes']:,} bytes"
            gap = f", {shard['left_out']} left out past a gap" if shard["left_out"] else ""
            print(f"{shard['url']}: {shard['segments']} segment(s){gap}: {done}", file=sys.stderr)
        # A shard that went up whole before the kill, but not its segments' removal, is not
        # one recovered: said apart, so the count is of shards made of segments.
        whole = sum(shard["already_up"] for shard in result["shards"])
        also = f" ({whole} up whole already: their segments removed)" if whole else ""
        print(f"recovered {len(result['shards']) - whole} shard(s) in {args.src}{also}", file=sys.stderr)
        return 0
    source = result["source"]
    for d in source.damage:
        print(f"{args.src}: {d.file} at byte {d.offset}: {d.why} ({episodes_text(d.episodes)})", file=sys.stderr)
    for file, offset, why in result["recordings_lost"]:
        print(f"{args.src}: recording left out: {file} at byte {offset}: {why}", file=sys.stderr)
    unlisted = source.episodes_lost - len(source.damaged_episodes)
    state = "intact" if source.intact else f"damaged ({len(source.damage)} problem(s))"
    if unlisted:
        state += f"; {unlisted:,} episode(s) were no longer listed (damaged Episode records, or rows lost)"
    print(
        f"recovered {result['whole']:,} episodes whole and {result['cut']:,} intact prefixes (incomplete), "
        f"{result['steps']:,} steps, into {args.dst} ({len(result['shards'])} shard(s)) in "
        f"{time.perf_counter() - start:.1f} s; {result['lost']:,} damaged episode(s) had no intact step; "
        f"the source was {state}",
        file=sys.stderr,
    )
    return 0


def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
    """Adds the command's arguments to its parser."""
    parser.add_argument("src", metavar="SRC", help="a dataset directory or one shard file, or a store URL")
    parser.add_argument(
        "dst", metavar="DST", nargs="?", help="the new dataset directory (must not exist, or be empty); none for a URL"
    )
