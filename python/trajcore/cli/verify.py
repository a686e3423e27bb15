"""``trajcore verify``: check every checksum and decode every chunk; exit 1 if damaged."""

from __future__ import annotations

import argparse
import json
import sys

from trajcore.cli._common import EXIT_DAMAGED, REPORT_EXAMPLES, Commands, episodes_text, fmt_bytes, prog_name

HELP = "check every checksum and decode every chunk; exit 1 if damaged"
DESCRIPTION = (
    "Check a dataset byte by byte: every record's checksum, every chunk decoded (lengths, str offsets "
    "and UTF-8). Damage is listed with its file, byte offset and the episodes it affects (indexes as "
    "'ls' lists them). Exit status 0: intact, 1: damaged, 2: usage error. Throughput on stderr."
)
EXAMPLES = REPORT_EXAMPLES


def run(args: argparse.Namespace) -> int:
    import trajcore

    report = trajcore.verify(args.path)
    if args.json:
        print(
            json.dumps(
                {
                    "path": report.path,
                    "intact": report.intact,
                    "damage": [
                        {
                            "file": d.file,
                            "offset": d.offset,
                            "why": d.why,
                            "episodes": list(d.episodes),
                            "unlisted": d.unlisted,
                        }
                        for d in report.damage
                    ],
                    "damaged_episodes": report.damaged_episodes,
                    "episodes_lost": report.episodes_lost,
                    "shards": report.shards,
                    "bytes": report.bytes,
                    "records": report.records,
                    "chunks": report.chunks,
                    "decoded_bytes": report.decoded_bytes,
                    "seconds": report.seconds,
                    "mb_per_s": report.mb_per_s,
                },
                indent=2,
            )
        )
    else:
        what = (
            f"{report.shards} shard(s), {fmt_bytes(report.bytes)}, {report.records:,} records checksummed, "
            f"{report.chunks:,} chunks decoded ({fmt_bytes(report.decoded_bytes)})"
        )
        if report.intact:
            print(f"{report.path}: intact: {what}")
        else:
            affected = report.damaged_episodes
            unlisted = report.episodes_lost - len(affected)
            print(
                f"{report.path}: DAMAGED: {len(report.damage)} problem(s), {report.episodes_lost:,} episode(s) lost "
                f"({len(affected):,} listed episode(s) affected, {unlisted:,} no longer listed); {what}"
            )
            for d in report.damage:
                print(f"  {d.file} at byte {d.offset}: {d.why} ({episodes_text(d.episodes)})")
            print(f"  (keep what still reads: {prog_name(sys.argv[0])} recover {report.path} NEW_DIR)")
    print(
        f"verified {report.bytes / 1e6:,.1f} MB in {report.seconds:.2f} s ({report.mb_per_s:,.0f} MB/s)",
        file=sys.stderr,
    )
    return 0 if report.intact else EXIT_DAMAGED


def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
    """Adds the command's arguments to its parser."""
    commands.report_args(parser)
