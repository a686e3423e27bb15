"""The command line, ``trajcore`` (or ``python -m trajcore``): record, info, ls, view, plot,
export, import-minari, convert, verify, recover and bench.

Errors a user can fix (a missing path, an unknown env id, bad JSON, a bad option value) are one
line on stderr and exit status 2, never a traceback; output piped into ``head`` stops quietly.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["main"]

EXIT_USAGE = 2
# `verify`: the dataset is damaged (0: intact).
EXIT_DAMAGED = 1


class UsageError(Exception):
    """A bad argument value: printed as one line, exit status 2."""


def _prog_name(argv0: str) -> str:
    """The name the usage line shows: the console script's (``trajcore``) or ``python -m
    trajcore`` when run as a module."""
    base = os.path.basename(argv0 or "")
    if not base or base in ("__main__.py", "-c", "-m") or base.endswith(".py"):
        return "python -m trajcore"
    return base


def _load_policy(spec: str) -> Callable[[Any], Any]:
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


def _metadata_arg(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as e:
        raise UsageError(f"--metadata is not valid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise UsageError(f"--metadata must be a JSON object, got {text!r}")
    return value


def _make_vec(env_id: str, num_envs: int, vectorization: str, mode: Any) -> Any:
    import gymnasium as gym

    try:
        return gym.make_vec(
            env_id, num_envs=num_envs, vectorization_mode=vectorization, vector_kwargs={"autoreset_mode": mode}
        )
    except gym.error.Error as e:
        raise UsageError(f"cannot make env {env_id!r}: {e}") from None


class _Progress:
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


def _record(args: argparse.Namespace) -> int:
    from gymnasium.vector import AutoresetMode

    import trajcore

    mode = {
        "next_step": AutoresetMode.NEXT_STEP,
        "same_step": AutoresetMode.SAME_STEP,
        "disabled": AutoresetMode.DISABLED,
    }[args.autoreset]
    metadata = {"env_id": args.env_id, "num_envs": args.num_envs, "seed": args.seed, "policy": args.policy or "random"}
    metadata.update(_metadata_arg(args.metadata))
    policy = _load_policy(args.policy) if args.policy else None
    envs = _make_vec(args.env_id, args.num_envs, args.vectorization, mode)
    envs.action_space.seed(args.seed)
    print(
        f"recording {args.env_id} x{args.num_envs} ({args.vectorization}, autoreset {args.autoreset}) "
        f"for {args.steps} vector steps into {args.path}",
        file=sys.stderr,
    )
    progress = _Progress(args.steps * args.num_envs, "steps")
    start = time.perf_counter()
    with trajcore.RecordVectorEpisodes(envs, args.path, metadata, zstd_level=args.zstd_level) as rec:
        obs, _ = rec.reset(seed=args.seed)
        every = max(1, min(1000, args.steps // 100))
        for t in range(args.steps):
            actions = policy(obs) if policy is not None else rec.action_space.sample()
            obs, _, terminations, truncations, _ = rec.step(actions)
            if mode is AutoresetMode.DISABLED:
                done = np.logical_or(terminations, truncations)
                if done.any():
                    obs, _ = rec.reset(options={"reset_mask": done})
            if (t + 1) % every == 0:
                progress.update(every * args.num_envs)
        progress.update((args.steps % every) * args.num_envs)
    progress.close()
    stats = rec.stats()  # after close: everything is written
    elapsed = time.perf_counter() - start
    total = args.steps * args.num_envs
    print(
        f"recorded {total} env steps in {elapsed:.1f} s ({total / max(elapsed, 1e-9):,.0f} env steps/s); "
        f"{stats.get('episodes', 0)} episodes, {_fmt_bytes(stats.get('bytes_written', 0))} written "
        f"({_fmt_bytes(stats.get('bytes_raw', 0))} raw)",
        file=sys.stderr,
    )
    return 0


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _stats(values: np.ndarray[Any, Any]) -> dict[str, float]:
    """Statistics over the finite values; `nan` counts the others (a NaN reward makes a NaN
    return: trajcore records what the env produced)."""
    v = values.astype(np.float64)
    finite = v[np.isfinite(v)]
    out: dict[str, float] = {"nan": int(np.count_nonzero(np.isnan(v)))} if np.isnan(v).any() else {}
    if finite.size == 0:
        return out
    return {
        "mean": float(finite.mean()),
        "std": float(finite.std()),
        "min": float(finite.min()),
        "median": float(np.median(finite)),
        "max": float(finite.max()),
        **out,
    }


def _strict_json(value: Any) -> Any:
    """`value` with non-finite floats as None: JSON has no NaN or infinity, and a report that
    prints them is not JSON any tool can read."""
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict_json(v) for v in value]
    return value


def _column_bytes(ds: Any, summaries: dict[str, np.ndarray[Any, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """Raw and stored bytes per column: exact from the core when it reports them, else the raw
    size of the rows episodes cover (fixed-size columns only; stored size unknown per column)."""
    core = ds._core
    column_stats = getattr(core, "column_stats", None)
    if column_stats is not None:
        merged: dict[str, dict[str, Any]] = {}
        for entry in column_stats():
            row = merged.setdefault(entry["name"], {"name": entry["name"], "raw_bytes": 0, "stored_bytes": 0})
            row["raw_bytes"] += int(entry["raw_bytes"])
            row["stored_bytes"] += int(entry["stored_bytes"])
        for row in merged.values():
            row["ratio"] = row["raw_bytes"] / row["stored_bytes"] if row["stored_bytes"] else None
        return list(merged.values()), True
    rows: dict[str, dict[str, Any]] = {}
    recording = summaries["recording"]
    length = summaries["length"].astype(np.int64)
    for r in range(ds.num_recordings):
        in_rec = recording == r
        steps = int(length[in_rec].sum())
        episodes = int(in_rec.sum())
        for c in core.columns(r):
            if c["dtype"] == "str":
                continue
            n = steps + episodes if c["timeline"] == "obs" else steps
            raw = n * np.dtype(c["dtype"]).itemsize * int(np.prod(c["shape"], dtype=np.int64))
            row = rows.setdefault(c["name"], {"name": c["name"], "raw_bytes": 0, "stored_bytes": None, "ratio": None})
            row["raw_bytes"] += raw
    return list(rows.values()), False


def _split_stats(values: np.ndarray[Any, Any], complete: np.ndarray[Any, Any]) -> dict[str, dict[str, float]]:
    """Statistics of complete and incomplete episodes apart: an episode cut short when the
    recorder closed would otherwise pull the mean length and return down."""
    return {"complete": _stats(values[complete]), "incomplete": _stats(values[~complete])}


def _info(args: argparse.Namespace) -> int:
    import trajcore
    from trajcore._agents import agent_counts, agent_spaces
    from trajcore._meta import env_ids
    from trajcore.formats.summaries import env_step_bounds

    with trajcore.open(args.path) as ds:
        s = ds.summaries()
        disk = sum(ds.shard_sizes)
        columns, exact = _column_bytes(ds, s)
        raw_total = sum(c["raw_bytes"] for c in columns)
        metas = [ds.meta(r) for r in range(ds.num_recordings)]
        complete = s["complete"].astype(bool)
        origins = [_copy_origin(m) for m in metas]
        # A copy was written with autoreset "disabled": how the data was recorded is its origin's.
        modes = [str((o or m).get("autoreset_mode")) for m, o in zip(metas, origins, strict=True)]
        least, most = env_step_bounds(
            s["length"], s["recording"], s["env_index"], complete, [m == "next_step" for m in modes]
        )
        report: dict[str, Any] = {
            "path": ds.path,
            "shards": len(ds.shards),
            "recordings": ds.num_recordings,
            "env_ids": env_ids(metas),
            "num_envs": sorted({int(m.get("num_envs", 1)) for m in metas}),
            "autoreset_modes": sorted(set(modes)),
            "metadata": ds.metadata,
            "agents": agent_counts(ds),
            "agent_spaces": agent_spaces(ds),
            "episodes": ds.num_episodes,
            "complete_episodes": int(np.count_nonzero(complete)),
            "incomplete_episodes": int(np.count_nonzero(~complete)),
            "terminated": int(np.count_nonzero(s["terminated"])),
            "truncated": int(np.count_nonzero(s["truncated"])),
            "steps": ds.num_steps,
            "env_steps": {"min": least, "max": most},
            "env_steps_asked": _env_steps_asked(ds, metas, origins),
            "copied_from": [o for o in origins if o is not None],
            "return": _split_stats(s["episode_return"], complete),
            "length": _split_stats(s["length"], complete),
            "observation_space": str(ds.observation_space),
            "action_space": str(ds.action_space),
            "bytes_on_disk": disk,
            "bytes_raw": raw_total,
            "compression_ratio": raw_total / disk if disk else None,
            "columns": columns,
            "problems": [list(p) for p in ds.problems],
            "episodes_unlisted": ds.episodes_unlisted,
        }
    if args.json:
        print(json.dumps(_strict_json(report), indent=2, allow_nan=False))
        return 0
    out = sys.stdout
    print(f"{report['path']}: {report['shards']} shard(s), {report['recordings']} recording(s)", file=out)
    print(
        f"  env: {', '.join(i or 'no env id' for i in report['env_ids'])}  "
        f"num_envs: {', '.join(map(str, report['num_envs']))}  "
        f"autoreset: {', '.join(report['autoreset_modes'])}",
        file=out,
    )
    print(f"  metadata: {json.dumps(report['metadata'])}", file=out)
    if report["agents"]:
        agents = ", ".join(f"{a} ({n:,} episodes)" for a, n in report["agents"].items())
        print(f"  agents: {len(report['agents'])}: {agents}", file=out)
    for origin in report["copied_from"]:
        when = datetime.datetime.fromtimestamp(int(origin.get("at_ns") or 0) / 1e9, datetime.UTC)
        how = "recovered" if origin.get("how") == "recover" else "converted"
        print(f"  {how} from {origin.get('path')} on {when:%Y-%m-%d %H:%M:%S} UTC", file=out)
    print(
        f"  episodes: {report['episodes']:,}: {report['complete_episodes']:,} complete ({report['terminated']:,} "
        f"terminated, {report['truncated']:,} truncated), {report['incomplete_episodes']:,} incomplete "
        "(still running when the recorder closed or stopped on an error)",
        file=out,
    )
    steps_line = _env_steps_line(report["steps"], least, most, report["env_steps_asked"], "next_step" in modes)
    print(f"  steps: {steps_line}", file=out)
    for name in ("return", "length"):
        for part in ("complete", "incomplete"):
            st = report[name][part]
            if st:
                print(
                    f"  {name} ({part}): mean {st['mean']:.4g}  std {st['std']:.4g}  min {st['min']:.4g}  "
                    f"median {st['median']:.4g}  max {st['max']:.4g}",
                    file=out,
                )
    if report["agent_spaces"]:
        for agent, (obs_space, action_space) in report["agent_spaces"].items():
            print(f"  {agent}: observation space {obs_space}, action space {action_space}", file=out)
    else:
        print(f"  observation space: {report['observation_space']}", file=out)
        print(f"  action space: {report['action_space']}", file=out)
    ratio = report["compression_ratio"]
    print(
        f"  on disk: {_fmt_bytes(disk)}  raw: {_fmt_bytes(raw_total)}" + (f"  ratio: {ratio:.2f}x" if ratio else ""),
        file=out,
    )
    print(f"  columns ({'raw -> stored' if exact else 'raw bytes in episodes'}):", file=out)
    width = max((len(c["name"]) for c in columns), default=0)
    for c in columns:
        line = f"    {c['name']:<{width}}  {_fmt_bytes(c['raw_bytes']):>10}"
        if c["stored_bytes"] is not None:
            r = f"{c['ratio']:.2f}x" if c["ratio"] else "-"
            line += f" -> {_fmt_bytes(c['stored_bytes']):>10}  {r}"
        print(line, file=out)
    for file, offset, why in report["problems"]:
        print(f"  problem: {file} at byte {offset}: {why}", file=out)
    if report["episodes_unlisted"]:
        lost = report["episodes_unlisted"]
        print(f"  lost: {lost:,} episode(s) no longer listed (damaged Episode records, or rows lost)", file=out)
    return 0


def _copy_origin(meta: dict[str, Any]) -> dict[str, Any] | None:
    """What a converted or recovered copy says of the recording it was copied from (None for a
    recording written by a recorder)."""
    user = meta.get("user")
    if not isinstance(user, dict):
        return None
    origin = user.get("converted_from") or user.get("recovered_from")
    return origin if isinstance(origin, dict) else None


def _env_steps_asked(ds: Any, metas: list[dict[str, Any]], origins: list[dict[str, Any] | None]) -> int | None:
    """The env steps the recorders were asked to take: the vector steps each writer's timelog
    counted, times its sub-envs (for a copy, what its origin says); None when a recording has
    neither (its timelog lost, or a copy of one without)."""
    asked = 0
    for r, (meta, origin) in enumerate(zip(metas, origins, strict=True)):
        # A copy's own timelog counts the replay's steps: the origin says what was asked.
        samples = ds.timelog(r) if origin is None else None
        if samples:
            asked += sum(int(s["steps"]) for s in samples) * int(meta.get("num_envs", 1))
        elif origin is not None and isinstance(origin.get("env_steps_asked"), int):
            asked += origin["env_steps_asked"]
        else:
            return None
    return asked


def _env_steps_line(stored: int, least: int, most: int, asked: int | None, next_step: bool) -> str:
    """One line: the env steps asked (or, without timelogs, what the episodes show was taken),
    the steps stored, and why they differ."""
    taken = (
        f"{asked:,} env steps asked"
        if asked is not None
        else (f"{least:,} env steps taken" if least == most else f"{least:,} to {most:,} env steps taken")
    )
    line = f"{taken}, {stored:,} stored (transitions)"
    if (asked if asked is not None else most) == stored:
        return line
    if next_step:
        why = "only reset a sub-env under NEXT_STEP autoreset: an env step without a transition"
    else:
        why = "were taken while a sub-env had no episode running, or in discarded episodes"
    others = f"the {asked - stored:,} others" if asked is not None else "the others"
    return f"{line}: {others} {why}"


def _ls(args: argparse.Namespace) -> int:
    import trajcore
    from trajcore._selection import apply_select, parse_select
    from trajcore.formats.summaries import METRIC_STATS, metric_column, summary_columns

    selection = parse_select(args.select)
    with trajcore.open(args.path) as ds:
        episodes = apply_select(ds, selection)
        cols = summary_columns(ds, episodes.indices)
        names = [n for n in cols if not n.startswith("metrics/") and n != "agent"]
        agents = cols.get("agent")  # multi-agent datasets: whose episode each is
        width = max((len(str(a)) for a in ds.agents), default=0)
        metric_names = list(ds.metrics())
        if not args.json:
            print(
                (f"{'agent':<{width}}  " if agents is not None else "")
                + f"{'index':>7} {'env':>4} {'length':>7} {'return':>11} {'complete':>8}  {'end':<10}  "
                + ("metrics (mean)  " if metric_names else "")
                + "metadata"
            )
        for i in range(len(episodes)):
            row = {n: cols[n][i].item() for n in names}
            if agents is not None:
                row["agent"] = agents[i]
            metrics = {
                m: {stat: cols[metric_column(m, stat)][i].item() for stat in METRIC_STATS}
                for m in metric_names
                if cols[metric_column(m, "count")][i] > 0
            }
            meta = ds._episode_metadata(row["episode"])
            if args.json:
                line = {**row, "metrics": metrics, "metadata": meta}
                print(json.dumps(_strict_json(line), separators=(",", ":"), allow_nan=False))
                continue
            end = "terminated" if row["terminated"] else "truncated" if row["truncated"] else "-"
            means = " ".join(f"{m}={v['mean']:.5g}" for m, v in metrics.items())
            print(
                (f"{row['agent']!s:<{width}}  " if agents is not None else "")
                + f"{row['episode']:>7} {row['env_index']:>4} {row['length']:>7} {row['episode_return']:>11.5g} "
                f"{'yes' if row['complete'] else 'no':>8}  {end:<10}  "
                + (f"{means or '-'}  " if metric_names else "")
                + json.dumps(meta, separators=(",", ":"))
            )
    return 0


def _view(args: argparse.Namespace) -> int:
    import trajcore
    from trajcore.viewer import view

    max_bytes = None if args.max_mb is None else int(args.max_mb * (1 << 20))
    with trajcore.open(args.path) as ds:
        try:
            episode = _view_target(ds, args)
        except IndexError as e:
            raise UsageError(str(e)) from None
        written = view(episode, args.out, max_bytes=max_bytes)
    print(f"wrote {written} ({_fmt_bytes(os.path.getsize(written))})", file=sys.stderr)
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


def _plot(args: argparse.Namespace) -> int:
    import trajcore
    from trajcore._selection import apply_select, parse_select
    from trajcore._store import local_only
    from trajcore.plots import load_timelog, write_plots

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


def _columns_arg(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [c.strip() for c in text.split(",") if c.strip()]
    if not names:
        raise UsageError("--columns is empty: give names separated by commas (e.g. obs,action,reward)")
    return names


def _export(args: argparse.Namespace) -> int:
    from trajcore._output import check_destination
    from trajcore._selection import apply_select, parse_select
    from trajcore.formats import export, format_of
    from trajcore.formats._read import open_for_pass

    fmt = format_of(args.out, args.format)
    if args.columns is not None and fmt not in ("csv", "parquet"):
        raise UsageError(f"--columns applies to csv and parquet; {fmt} exports write every value")
    if fmt != "minari":
        check_destination(args.out, args.force)  # before reading anything
    selection = parse_select(args.select)
    with open_for_pass(args.path) as ds:
        episodes = apply_select(ds, selection)
        progress = _Progress(episodes.num_steps, "steps")
        start = time.perf_counter()
        try:
            result = export(
                episodes,
                args.out,
                fmt,
                columns=_columns_arg(args.columns),
                max_values=args.max_values,
                force=args.force,
                progress=progress.update,
            )
        finally:
            progress.close()
    elapsed = time.perf_counter() - start
    where = result.get("path", args.out)
    size = _size_of(where)
    skipped = f", {result['skipped']} episodes of no step skipped" if result.get("skipped") else ""
    print(
        f"exported {len(episodes):,} episodes, {result['steps']:,} steps to {where} ({fmt}) in {elapsed:.1f} s "
        f"({result['steps'] / max(elapsed, 1e-9):,.0f} steps/s, {_fmt_bytes(size)}){skipped}",
        file=sys.stderr,
    )
    return 0


def _size_of(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
    return os.path.getsize(path) if os.path.exists(path) else 0


def _import_minari(args: argparse.Namespace) -> int:
    from trajcore.formats import import_minari

    start = time.perf_counter()
    progress = _Progress(0, "steps")
    try:
        result = import_minari(
            args.source, args.dst, force=args.force, zstd_level=args.zstd_level, progress=progress.update
        )
    finally:
        progress.close()
    elapsed = time.perf_counter() - start
    print(
        f"imported {result['episodes']:,} episodes, {result['steps']:,} steps from {args.source} into {args.dst} "
        f"in {elapsed:.1f} s",
        file=sys.stderr,
    )
    return 0


def _convert(args: argparse.Namespace) -> int:
    import trajcore
    from trajcore._selection import apply_select, parse_select

    codecs: Any = None
    if args.codecs == "raw":
        codecs = "raw"
    elif args.codecs:
        try:
            codecs = json.loads(args.codecs)
        except ValueError as e:
            raise UsageError(f"--codecs is neither 'raw' nor valid JSON ({e}): {args.codecs!r}") from None
        if not isinstance(codecs, dict):
            raise UsageError(f"--codecs must be 'raw' or a JSON object, got {args.codecs!r}")
    selection = parse_select(args.select)
    with trajcore.open(args.src) as ds:
        episodes = apply_select(ds, selection)
        start = time.perf_counter()
        result = trajcore.convert(
            episodes, args.dst, codecs=codecs, chunk_bytes=args.chunk_bytes, max_shard_bytes=args.max_shard_bytes
        )
    print(
        f"converted {result['episodes']:,} episodes, {result['steps']:,} steps into {len(result['shards'])} shard(s) "
        f"in {time.perf_counter() - start:.1f} s",
        file=sys.stderr,
    )
    return 0


def _episodes_text(episodes: Sequence[int], shown: int = 10) -> str:
    """'episodes 3, 4, 9' (the first few of a long list), or 'no listed episode'."""
    if not episodes:
        return "no listed episode"
    head = ", ".join(str(e) for e in episodes[:shown])
    more = f" and {len(episodes) - shown:,} more" if len(episodes) > shown else ""
    return f"episode{'s' if len(episodes) > 1 else ''} {head}{more}"


def _verify(args: argparse.Namespace) -> int:
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
            f"{report.shards} shard(s), {_fmt_bytes(report.bytes)}, {report.records:,} records checksummed, "
            f"{report.chunks:,} chunks decoded ({_fmt_bytes(report.decoded_bytes)})"
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
                print(f"  {d.file} at byte {d.offset}: {d.why} ({_episodes_text(d.episodes)})")
            print(f"  (keep what still reads: {_prog_name(sys.argv[0])} recover {report.path} NEW_DIR)")
    print(
        f"verified {report.bytes / 1e6:,.1f} MB in {report.seconds:.2f} s ({report.mb_per_s:,.0f} MB/s)",
        file=sys.stderr,
    )
    return 0 if report.intact else EXIT_DAMAGED


def _recover(args: argparse.Namespace) -> int:
    import trajcore

    start = time.perf_counter()
    result = trajcore.recover(args.src, args.dst)
    if args.dst is None:  # a store URL: shards made of a killed recorder's segments
        for shard in result["shards"]:
            done = "was up whole already" if shard["already_up"] else f"{shard['bytes']:,} bytes"
            gap = f", {shard['left_out']} left out past a gap" if shard["left_out"] else ""
            print(f"{shard['url']}: {shard['segments']} segment(s){gap}: {done}", file=sys.stderr)
        print(f"recovered {len(result['shards'])} shard(s) in {args.src}", file=sys.stderr)
        return 0
    source = result["source"]
    for d in source.damage:
        print(f"{args.src}: {d.file} at byte {d.offset}: {d.why} ({_episodes_text(d.episodes)})", file=sys.stderr)
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


def _bench(args: argparse.Namespace) -> int:
    from trajcore.bench import measure_overhead

    vectorization = None if args.vectorization == "none" else args.vectorization
    if vectorization is None and args.num_envs > 1:
        vectorization = "sync"
    record_kwargs: dict[str, Any] = {"zstd_level": args.zstd_level}
    if args.delta:
        record_kwargs["codecs"] = {"obs": {"delta": True, "zstd_level": args.zstd_level}}
    policy = _load_policy(args.policy) if args.policy else None
    if ":" not in args.env:  # a registered id: check it before announcing anything
        import gymnasium as gym

        try:
            gym.spec(args.env)
        except gym.error.Error as e:
            raise UsageError(f"cannot make env {args.env!r}: {e}") from None
    print(
        f"bench {args.env} x{args.num_envs} ({vectorization or 'single env'}): {args.steps} vector steps with "
        f"recording and as many without, in {args.repeats} interleaved segments each",
        file=sys.stderr,
    )
    progress = _Progress(2 * args.steps * args.num_envs, "steps")
    last = [0]

    def advance(done: int, total: int) -> None:
        progress.update((done - last[0]) * args.num_envs)
        last[0] = done

    try:
        result = measure_overhead(
            args.env,
            num_envs=args.num_envs,
            vectorization=vectorization,
            steps=args.steps,
            repeats=args.repeats,
            policy=policy,
            record_kwargs=record_kwargs,
            progress=advance,
            seed=args.seed,
        )
    finally:
        progress.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    print(_bench_table(result))
    return 0


def _bench_table(r: dict[str, Any]) -> str:
    """The figures of `measure_overhead` as a table: median and spread (min..max) over segments."""
    rows = [
        ("env steps/s without recording", "env_steps_per_s_without", ",.0f"),
        ("env steps/s with recording", "env_steps_per_s_with", ",.0f"),
        ("overhead per vector step (us)", "overhead_us_per_vector_step", ".2f"),
        ("overhead per env step (us)", "overhead_us_per_env_step", ".3f"),
        ("overhead (%)", "overhead_pct", ".2f"),
        ("recorder call per vector step (us)", "call_us_per_vector_step", ".2f"),
        ("recorder call per env step (us)", "call_us_per_env_step", ".3f"),
    ]
    if r["num_envs"] == 1:
        rows = [row for row in rows if "vector" not in row[1]]
    width = max(len(name) for name, _, _ in rows)
    lines = [
        f"{r['env']} x{r['num_envs']} ({r['vectorization'] or 'single env'}), {r['steps']} vector steps per loop, "
        f"{r['repeats']} segments",
        f"{'':<{width}}  {'median':>12}  {'spread (min..max)':>24}",
    ]
    for name, key, fmt in rows:
        s = r[key]
        spread = f"{format(s['min'], fmt)}..{format(s['max'], fmt)}"
        lines.append(f"{name:<{width}}  {format(s['median'], fmt):>12}  {spread:>24}")
    ratio = r["compression_ratio"]
    lines.append(
        f"{'bytes written':<{width}}  {_fmt_bytes(r['bytes_written']):>12}  "
        f"(raw {_fmt_bytes(r['bytes_raw'])}" + (f", ratio {ratio:.2f}x)" if ratio else ")")
    )
    lines.append(f"{'peak memory growth':<{width}}  {_fmt_bytes(r['peak_rss_growth_bytes']):>12}")
    lines.append(
        f"{'episodes recorded':<{width}}  {r['episodes']:>12}  (the loop waited for the writer {r['ring_waits']} times)"
    )
    lines.append("(recorder call: the same steps replayed by an env that does no work, with and without the recorder)")
    return "\n".join(lines)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Epilogs as written (examples), and every option's default in its help: appended unless
    the help already says it or the option is required; flags are off by default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or action.required or "default" in text or action.default is argparse.SUPPRESS:
            return text
        if isinstance(action, argparse._StoreTrueAction):
            return text + " (default: off)"
        return text + " (default: %(default)s)"


def _examples(prog: str, *lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {prog} {line}" for line in lines)


_DATASET_HELP = "a dataset directory or one shard file, or a URL (s3://bucket/prefix, https://host/NAME.trj)"


def _parser(prog: str = "trajcore") -> argparse.ArgumentParser:
    import trajcore
    from trajcore._selection import SELECT_HELP
    from trajcore.formats import DEFAULT_MAX_VALUES, FORMATS

    p = argparse.ArgumentParser(
        prog=prog,
        description="Record reinforcement-learning episodes, inspect them, and get them out in other formats.",
        formatter_class=_HelpFormatter,
        epilog=_examples(
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

    def command(name: str, help: str, description: str, *examples: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help,
            description=textwrap.fill(description, 100),
            formatter_class=_HelpFormatter,
            epilog=_examples(f"{prog} {name}", *examples),
        )

    def dataset_arg(parser: argparse.ArgumentParser, **kwargs: Any) -> None:
        parser.add_argument("path", metavar="PATH", help=_DATASET_HELP, **kwargs)

    def select_arg(parser: argparse.ArgumentParser, verb: str) -> None:
        help = f"{verb} only some episodes: {SELECT_HELP} (default: all)"
        parser.add_argument("--select", action="append", metavar="KEY=VALUE", help=help)

    def copy_args(parser: argparse.ArgumentParser) -> None:
        """SRC and DST of a command that writes a new dataset from an existing one."""
        parser.add_argument("src", metavar="SRC", help=_DATASET_HELP)
        parser.add_argument("dst", metavar="DST", help="the new dataset directory (must not exist, or be empty)")

    def json_arg(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print a JSON report")

    def report_command(name: str, help: str, description: str, func: Callable[[argparse.Namespace], int]) -> None:
        """A command that reports on one dataset, as text or (--json) as JSON."""
        parser = command(name, help, description, "runs/cp16", "runs/cp16 --json")
        dataset_arg(parser)
        json_arg(parser)
        parser.set_defaults(func=func)

    r = command(
        "record",
        "record a (vectorized) gymnasium env into a directory",
        "Run a vector env with random actions (or a policy) and record every sub-env episode.",
        "CartPole-v1 --num-envs 16 --steps 100000 runs/cp16",
        "LunarLander-v3 --policy mypolicy:act --metadata '{\"run\": 3}' runs/ll",
    )
    r.add_argument("env_id", metavar="ENV_ID", help="any registered gymnasium env id, e.g. CartPole-v1")
    r.add_argument("path", metavar="PATH", help="directory to write shards into (created if missing), or s3:// prefix")
    r.add_argument("--num-envs", type=int, default=1, help="sub-envs of the vector env")
    r.add_argument("--steps", type=int, default=10_000, help="vector steps to take (env steps = steps x num-envs)")
    r.add_argument("--vectorization", choices=["sync", "async"], default="sync", help="vector env kind")
    r.add_argument(
        "--autoreset", choices=["next_step", "same_step", "disabled"], default="next_step", help="vector autoreset mode"
    )
    r.add_argument(
        "--policy", help="module:callable mapping batched observations to batched actions (default: random actions)"
    )
    r.add_argument("--seed", type=int, default=0, help="seed of the envs' reset and of the action space")
    r.add_argument("--zstd-level", type=int, default=3, help="zstd level of every column")
    r.add_argument("--metadata", help="JSON object merged into the dataset metadata (default: none)")
    r.set_defaults(func=_record)

    report_command(
        "info",
        "summarize a dataset (directory or shard file)",
        "Episodes (complete and incomplete apart), stored and env steps, return and length statistics, spaces, "
        "bytes on disk and per column.",
        _info,
    )

    ls = command(
        "ls",
        "list episodes: index, env, length, return, complete, metadata",
        "One line per episode, in dataset order. Reads the index only (and episode metadata).",
        "runs/cp16",
        "runs/cp16 --select env_index=3 --select complete=true",
        "runs/cp16 --json | head -1",
    )
    dataset_arg(ls)
    select_arg(ls, "keep")
    ls.add_argument("--json", action="store_true", help="one JSON object per episode per line (JSON Lines)")
    ls.set_defaults(func=_ls)

    v = command(
        "view",
        "look at an episode in the browser: frames, slider, values, plots (one HTML file)",
        "Write one self-contained HTML page for an episode (no network: it opens from any disk): the rendered "
        "frame, or the observation when it is an image, a slider, play/pause, speed and arrow keys; the step's "
        "observation, action, reward, flags, infos and custom data beside it; plots of reward, return so far and "
        "every scalar info and custom-data column, with a cursor. Without -o the page is a temporary file opened "
        "in the default browser.",
        "runs/breakout --episode 3",
        "runs/breakout --episode -1 -o last.html",
        "runs/cp16 --episode 0 -o ep0.html --max-mb 20",
        "runs/spread --env-episode 2 -o joint.html",
        "runs/spread --env-episode 2 --agent agent_1",
    )
    dataset_arg(v)
    v.add_argument("--episode", type=int, default=0, help="dataset index of the episode (negative: from the end)")
    v.add_argument(
        "--env-episode",
        type=int,
        metavar="K",
        help="multi-agent datasets: env episode K (ds.env_episodes[K]), every agent's part aligned on the env's "
        "steps, with a picker to show one (default: the page of --episode)",
    )
    v.add_argument(
        "--agent",
        help="multi-agent datasets: this agent's part of --env-episode K, or with --episode N its N-th episode "
        "(default: every agent)",
    )
    v.add_argument(
        "-o",
        "--out",
        metavar="FILE.html",
        help="write the page here, replacing it (default: a temporary file, opened in the default browser)",
    )
    v.add_argument(
        "--max-mb",
        type=float,
        help="cap the page at this many MiB: frames are thinned (every k-th kept) to fit (default: every frame)",
    )
    v.set_defaults(func=_view)

    pl = command(
        "plot",
        "write PNG plots: return/length per episode, histograms, metrics, metadata, timelog",
        "Plot every episode's return and length against wall time and against the episode index (one colour per "
        "sub-env, with a rolling mean), their histograms, duration and env steps per second, the mean of every "
        "episode metric, every numeric episode metadata value, and the recorder's timelog (writer time per stage, "
        "ring fill, producer waits, vector steps per second) stored in the dataset's files, or one saved with "
        "trajcore.plots.save_timelog. Needs matplotlib.",
        "runs/cp16 -o plots/",
        "runs/cp16 --select complete=true --window 50",
        "runs/cp16 --timelog timelog.json -o plots/",
        "--timelog timelog.json",
    )
    dataset_arg(pl, nargs="?")
    pl.add_argument(
        "-o",
        "--out",
        metavar="DIR",
        help="directory of the PNG files, created if missing (default: plots-<PATH's name>)",
    )
    pl.add_argument(
        "--timelog",
        metavar="FILE.json",
        help="plot this timelog, saved by trajcore.plots.save_timelog, instead of the one stored in the dataset "
        "(default: the stored one)",
    )
    pl.add_argument("--window", type=int, help="rolling-mean window in episodes (default: a twentieth, 1 to 100)")
    select_arg(pl, "plot")
    pl.set_defaults(func=_plot)

    e = command(
        "export",
        "write a dataset as csv, jsonl (RLlib), parquet or a minari dataset",
        "Stream a dataset (or some of its episodes) into another format, episode by episode: memory stays bounded. "
        "Rows of csv and parquet are steps (obs before, next_obs/reward/info after); jsonl has one RLlib "
        "SampleBatch per episode; minari writes a dataset minari.load_dataset opens, under MINARI_DATASETS_PATH "
        "(or ~/.minari/datasets).",
        "runs/cp16 cp16.csv",
        "runs/cp16 cp16.parquet --select complete=true",
        "runs/pixels pixels.csv --columns obs,action,reward",
        "runs/cp16 cp16.jsonl --force",
        "runs/cp16 trajcore/cartpole/random-v0 --format minari",
    )
    dataset_arg(e)
    e.add_argument("out", metavar="OUT", help="the file to write, or for minari the dataset id (namespace/name-v0)")
    e.add_argument("--format", choices=FORMATS, help="output format (default: from OUT's extension)")
    select_arg(e, "export")
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
    e.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    e.set_defaults(func=_export)

    m = command(
        "import-minari",
        "write a local minari dataset as a trajcore dataset",
        "Replay every episode of a Minari dataset on this machine (nothing is downloaded) into a new trajcore "
        "dataset; a dataset trajcore exported comes back with its custom data and metadata.",
        "trajcore/cartpole/random-v0 runs/cp16-back",
        "~/.minari/datasets/D4RL/door/human-v2 runs/door",
    )
    m.add_argument("source", metavar="NAME_OR_PATH", help="a minari dataset id found locally, or its directory")
    m.add_argument("dst", metavar="DST", help="the trajcore dataset directory (or s3:// prefix) to create")
    m.add_argument("--zstd-level", type=int, default=3, help="zstd level of every column")
    m.add_argument("--force", action="store_true", help="replace DST if it exists")
    m.set_defaults(func=_import_minari)

    c = command(
        "convert",
        "rewrite a dataset with other codecs (e.g. raw columns for zero-copy training reads)",
        "Copy a dataset (or some of its episodes) into a new directory with other storage per column. DST may "
        "be a store prefix holding no shard (s3://bucket/prefix): the copy is written locally and uploaded.",
        "runs/cp16 runs/cp16-raw --codecs raw",
        'runs/cp16 runs/cp16-obs --codecs \'{"obs": {"zstd_level": 9}}\' --select complete=true',
    )
    copy_args(c)
    c.add_argument(
        "--codecs",
        help="'raw' (every column uncompressed) or a JSON object of per-column codecs "
        "(default: keep each column's codec)",
    )
    c.add_argument("--chunk-bytes", type=int, help="target raw size of a chunk (default: the writer's, 1 MiB)")
    c.add_argument("--max-shard-bytes", type=int, help="a new shard file starts past this size (default: 1 GiB)")
    select_arg(c, "copy")
    c.set_defaults(func=_convert)

    report_command(
        "verify",
        "check every checksum and decode every chunk; exit 1 if damaged",
        "Check a dataset byte by byte: every record's checksum, every chunk decoded (lengths, str offsets "
        "and UTF-8). Damage is listed with its file, byte offset and the episodes it affects (indexes as "
        "'ls' lists them). Exit status 0: intact, 1: damaged, 2: usage error. Throughput on stderr.",
        _verify,
    )

    rc = command(
        "recover",
        "copy what of a damaged dataset still reads into a new one",
        "Write every intact episode, and the intact prefix of each damaged one (cut before its first unreadable "
        "row, marked incomplete), into a new dataset directory. SRC is only read; DST is written beside its "
        "place and renamed into it when complete, and verifies intact. With a store URL alone (no DST): make "
        "the shards a killed recorder was writing there of the segments it uploaded, and remove those.",
        "runs/damaged runs/saved",
        "s3://bucket/run",
    )
    rc.add_argument("src", metavar="SRC", help="a dataset directory or one shard file, or a store URL")
    rc.add_argument(
        "dst", metavar="DST", nargs="?", help="the new dataset directory (must not exist, or be empty); none for a URL"
    )
    rc.set_defaults(func=_recover)

    b = command(
        "bench",
        "measure the recording overhead on an env (with vs without, interleaved)",
        "Run the env loop with and without recording in alternating segments and compare them.",
        "--env CartPole-v1 --num-envs 16 --steps 20000",
        "--env mymod:make_env --json bench.json",
    )
    b.add_argument(
        "--env", required=True, help="a registered gymnasium env id, or module:callable returning an env (required)"
    )
    b.add_argument("--num-envs", type=int, default=1, help="sub-envs of the vector env")
    b.add_argument(
        "--vectorization",
        choices=["sync", "async", "none"],
        help="vector env kind (default: none, a single env, for --num-envs 1; else sync)",
    )
    b.add_argument("--steps", type=int, default=20_000, help="vector steps with recording (and as many without)")
    b.add_argument("--repeats", type=int, default=5, help="interleaved segments per loop")
    b.add_argument(
        "--policy", help="module:callable mapping batched observations to batched actions (default: random actions)"
    )
    b.add_argument("--seed", type=int, default=0, help="seed of the envs and of the random actions")
    b.add_argument("--zstd-level", type=int, default=3, help="zstd level of every column")
    b.add_argument("--delta", action="store_true", help="store observations with the delta filter")
    b.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH (default: no file)")
    b.set_defaults(func=_bench)
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
