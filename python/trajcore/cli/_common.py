"""What the commands share: the usage error, the progress line, number formats, and the shapes
of their help and arguments (`Commands`, which adds each `Command` module to the parser)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

EXIT_USAGE = 2
# `verify`: the dataset is damaged (0: intact).
EXIT_DAMAGED = 1


def prog_name(argv0: str) -> str:
    """The name the usage line shows: the console script's (``trajcore``) or ``python -m
    trajcore`` when run as a module."""
    base = os.path.basename(argv0 or "")
    if not base or base in ("__main__.py", "-c", "-m") or base.endswith(".py"):
        return "python -m trajcore"
    return base


def episodes_text(episodes: Sequence[int], shown: int = 10) -> str:
    """'episodes 3, 4, 9' (the first few of a long list), or 'no listed episode'."""
    if not episodes:
        return "no listed episode"
    head = ", ".join(str(e) for e in episodes[:shown])
    more = f" and {len(episodes) - shown:,} more" if len(episodes) > shown else ""
    return f"episode{'s' if len(episodes) > 1 else ''} {head}{more}"


class UsageError(Exception):
    """A bad argument value: printed as one line, exit status 2."""


def load_policy(spec: str) -> Callable[[Any], Any]:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"--policy must be module:callable, got {spec!r}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise UsageError(f"--policy {spec!r}: cannot import {module_name!r}: {e}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"--policy {spec!r}: {module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise UsageError(f"--policy {spec!r} is not callable")
    return obj  # type: ignore[no-any-return]


class Progress:
    """tqdm when it is installed, else a line on stderr about once a second (total 0: unknown).
    Nothing is shown before the first step, so a command that fails while checking its
    arguments prints its one error line only."""

    def __init__(self, total: int, unit: str) -> None:
        self.total = total
        self.done = 0
        self.start = time.perf_counter()
        self.last = self.start
        self.unit = unit
        self.bar: Any = None
        self._tqdm: Any = None
        try:
            from tqdm import tqdm

            self._tqdm = tqdm
        except ImportError:
            pass

    def update(self, n: int) -> None:
        if n <= 0:
            return
        self.done += n
        if self._tqdm is not None:
            if self.bar is None:
                self.bar = self._tqdm(total=self.total or None, unit=self.unit, unit_scale=True, file=sys.stderr)
            self.bar.update(n)
            return
        now = time.perf_counter()
        if now - self.last >= 1.0 or (self.total and self.done >= self.total):
            self.last = now
            rate = self.done / max(now - self.start, 1e-9)
            of = f"/{self.total} {self.unit} ({100.0 * self.done / self.total:.0f}%)" if self.total else f" {self.unit}"
            print(f"  {self.done}{of}, {rate:,.0f} {self.unit}/s", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_import(name: str, args: argparse.Namespace) -> int:
    """An `import-*` command: `trajcore.formats.<name>(source, dst, ...)` under a progress bar,
    then what came in."""
    importer: Callable[..., dict[str, Any]] = getattr(importlib.import_module("trajcore.formats"), name)
    start = time.perf_counter()
    progress = Progress(0, "steps")
    try:
        result = importer(args.source, args.dst, force=args.force, zstd_level=args.zstd_level, progress=progress.update)
    finally:
        progress.close()
    elapsed = time.perf_counter() - start
    where = f"from {args.source} into {args.dst}"
    print(written_text("imported", result["episodes"], result["steps"], where, elapsed), file=sys.stderr)
    return 0


def written_text(verb: str, episodes: int, steps: int, where: str, seconds: float) -> str:
    """What a command that wrote episodes says when done: '<verb> N episodes, M steps <where> in
    T s'."""
    return f"{verb} {episodes:,} episodes, {steps:,} steps {where} in {seconds:.1f} s"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def strict_json(value: Any) -> Any:
    """`value` with non-finite floats as None: JSON has no NaN or infinity, and a report that
    prints them is not JSON any tool can read."""
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    return value


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Epilogs as written (examples), and every option's default in its help: appended unless
    the help already says it or the option is required; flags are off by default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or action.required or "default" in text or action.default is argparse.SUPPRESS:
            return text
        if isinstance(action, argparse._StoreTrueAction):
            return text + " (default: off)"
        return text + " (default: %(default)s)"


def examples_text(prog: str, *lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {prog} {line}" for line in lines)


DATASET_HELP = "a dataset directory or one shard file, or a URL (s3://bucket/prefix, https://host/NAME.trj)"


class Command(Protocol):
    """A command's module (`trajcore.cli.record`, ...), named as the command is (``import_minari``:
    ``import-minari``): its one-line help, its description, examples of its arguments, the
    arguments it adds to its parser and the function that runs it (returning the exit status)."""

    # Read-only (properties), so that a module's tuple of two examples is a `tuple[str, ...]`.
    @property
    def __name__(self) -> str: ...
    @property
    def HELP(self) -> str: ...
    @property
    def DESCRIPTION(self) -> str: ...
    @property
    def EXAMPLES(self) -> tuple[str, ...]: ...

    def add_arguments(self, commands: Commands, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class Commands:
    """Adds the commands to the parser, each with the same shapes of help and arguments."""

    def __init__(self, sub: Any, prog: str) -> None:
        self._sub = sub
        self._prog = prog

    def add(self, command: Command) -> None:
        """Adds `command` to the parser: its help, description and examples, its arguments, and
        its `run` as what the parsed arguments call."""
        name = command.__name__.rpartition(".")[2].replace("_", "-")
        parser: argparse.ArgumentParser = self._sub.add_parser(
            name,
            help=command.HELP,
            description=textwrap.fill(command.DESCRIPTION, 100),
            formatter_class=HelpFormatter,
            epilog=examples_text(f"{self._prog} {name}", *command.EXAMPLES),
        )
        command.add_arguments(self, parser)
        parser.set_defaults(func=command.run)

    def dataset_arg(self, parser: argparse.ArgumentParser, **kwargs: Any) -> None:
        parser.add_argument("path", metavar="PATH", help=DATASET_HELP, **kwargs)

    def select_arg(self, parser: argparse.ArgumentParser, verb: str) -> None:
        from trajcore.read.select.selection import SELECT_HELP

        help = f"{verb} only some episodes: {SELECT_HELP} (default: all)"
        parser.add_argument("--select", action="append", metavar="KEY=VALUE", help=help)

    def copy_args(self, parser: argparse.ArgumentParser) -> None:
        """SRC and DST of a command that writes a new dataset from an existing one."""
        parser.add_argument("src", metavar="SRC", help=DATASET_HELP)
        parser.add_argument("dst", metavar="DST", help="the new dataset directory (must not exist, or be empty)")

    def json_arg(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print a JSON report")

    def zstd_level_arg(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--zstd-level", type=int, default=3, help="zstd level of every column")

    def num_envs_arg(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--num-envs", type=int, default=1, help="sub-envs of the vector env")

    def policy_arg(self, parser: argparse.ArgumentParser) -> None:
        """--policy, read by `load_policy`."""
        parser.add_argument(
            "--policy", help="module:callable mapping batched observations to batched actions (default: random actions)"
        )

    def report_args(self, parser: argparse.ArgumentParser) -> None:
        """The arguments of a command that reports on one dataset, as text or (--json) as JSON
        (its examples: `REPORT_EXAMPLES`)."""
        self.dataset_arg(parser)
        self.json_arg(parser)


REPORT_EXAMPLES = ("runs/cp16", "runs/cp16 --json")


def import_command(
    importer: str, source: tuple[str, str], dst: str
) -> tuple[Callable[[argparse.Namespace], int], Callable[[Commands, argparse.ArgumentParser], None]]:
    """The ``run`` and ``add_arguments`` of an `import-*` command: `run_import` with the importer
    of `trajcore.formats` named `importer`; SOURCE (metavar, help), DST (help), the level and
    --force."""

    def run(args: argparse.Namespace) -> int:
        return run_import(importer, args)

    def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("source", metavar=source[0], help=source[1])
        parser.add_argument("dst", metavar="DST", help=dst)
        commands.zstd_level_arg(parser)
        parser.add_argument("--force", action="store_true", help="replace DST if it exists")

    return run, add_arguments
