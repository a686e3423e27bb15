"""The command line, ``trajcore`` (or ``python -m trajcore``): record, info, ls, view, plot,
export, import-minari, import-lerobot, convert, annotate, verify, recover, card and bench.

Errors a user can fix (a missing path, an unknown env id, bad JSON, a bad option value) are one
line on stderr and exit status 2, never a traceback; output piped into ``head`` stops quietly.

One module per command (`record`, `info`, `ls`, ...: a `_common.Command`, its help, its arguments
and its ``run``); `_common` holds what they share."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from trajcore.cli import (
    annotate,
    bench,
    card,
    convert,
    export,
    import_lerobot,
    import_minari,
    info,
    ls,
    plot,
    record,
    recover,
    verify,
    view,
)
from trajcore.cli._common import EXIT_USAGE, Command, Commands, HelpFormatter, UsageError, examples_text
from trajcore.cli._common import prog_name as _prog_name

__all__ = ["main"]

# In the order `--help` lists them.
COMMANDS: tuple[Command, ...] = (
    record,
    info,
    ls,
    view,
    plot,
    export,
    import_minari,
    import_lerobot,
    convert,
    annotate,
    verify,
    recover,
    card,
    bench,
)


def _parser(prog: str = "trajcore") -> argparse.ArgumentParser:
    import trajcore

    p = argparse.ArgumentParser(
        prog=prog,
        description="Record reinforcement-learning episodes, inspect them, and get them out in other formats.",
        formatter_class=HelpFormatter,
        epilog=examples_text(
            prog,
            "record CartPole-v1 --num-envs 16 --steps 100000 runs/cp16",
            "info runs/cp16",
            "ls runs/cp16 --select complete=true --select min_return=100",
            "view runs/cp16 --episode 3",
            "plot runs/cp16 -o plots/",
            "export runs/cp16 cp16.parquet",
            "import-minari D4RL/door/human-v2 runs/door",
            "verify runs/cp16",
        )
        + "\n\nrun '%(prog)s COMMAND --help' for a command's options",
    )
    p.add_argument(
        "--version",
        action="version",
        version=f"trajcore {trajcore.__version__} (file format {'.'.join(map(str, trajcore.FORMAT_VERSION))})",
        help="print the version and exit",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = Commands(sub, prog)
    for command in COMMANDS:
        commands.add(command)
    return p


def _check(args: argparse.Namespace) -> None:
    if getattr(args, "num_envs", 1) < 1:
        raise UsageError("--num-envs must be >= 1")
    if getattr(args, "steps", 0) < 0:
        raise UsageError("--steps must be >= 0")
    if args.command == "bench":
        if args.vectorization == "none" and args.num_envs > 1:
            raise UsageError("--vectorization none takes --num-envs 1")
        if args.steps < 1 or args.repeats < 1:
            raise UsageError("--steps and --repeats must be >= 1")
    if args.command == "export" and args.max_values < 1:
        raise UsageError("--max-values must be >= 1")
    if args.command == "view" and args.max_mb is not None and args.max_mb <= 0:
        raise UsageError("--max-mb must be > 0")
    if args.command == "plot" and args.window is not None and args.window < 1:
        raise UsageError("--window must be >= 1")


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (2 for a usage error)."""
    import gymnasium

    from trajcore.errors import TrajcoreError

    prog = _prog_name(sys.argv[0])
    args = _parser(prog).parse_args(argv)

    def one_line_warning(message: Any, category: Any, *_: Any, **__: Any) -> None:
        print(f"{prog}: warning: {message}", file=sys.stderr)

    shown, warnings.showwarning = warnings.showwarning, one_line_warning
    try:
        _check(args)
        result: int = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return result
    except BrokenPipeError:
        # The reader (`| head`) has gone: stop quietly, and keep Python from failing again when
        # it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except UsageError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
    except TrajcoreError as e:
        print(f"{prog}: error: {type(e).__name__}: {e}", file=sys.stderr)
    except gymnasium.error.Error as e:
        print(f"{prog}: error: {type(e).__name__}: {e}", file=sys.stderr)
    except OSError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
    finally:
        warnings.showwarning = shown
    return EXIT_USAGE
