"""``trajcore info``: summarize a dataset (directory or shard file)."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from typing import Any

from trajcore.cli._common import REPORT_EXAMPLES, Commands, fmt_bytes, strict_json

HELP = "summarize a dataset (directory or shard file)"
DESCRIPTION = (
    "Episodes (complete and incomplete apart), stored and env steps, return and length statistics, spaces, "
    "bytes on disk and per column."
)
EXAMPLES = REPORT_EXAMPLES


def run(args: argparse.Namespace) -> int:
    import trajcore
    from trajcore.tools.report import dataset_report

    with trajcore.open(args.path) as ds:
        report, exact = dataset_report(ds)
    least, most = report["env_steps"]["min"], report["env_steps"]["max"]
    modes, columns = report["autoreset_modes"], report["columns"]
    disk, raw_total = report["bytes_on_disk"], report["bytes_raw"]
    if args.json:
        print(json.dumps(strict_json(report), indent=2, allow_nan=False))
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
    described = [provenance_lines(p) for p in report["provenance"]]
    if described and all(lines == described[0] for lines in described):
        described = described[:1]  # the same for every recording (one run, several writers): once
    for recording, lines in enumerate(described):
        for line in lines:
            print(f"  recording {recording}: {line}" if len(described) > 1 else f"  {line}", file=out)
    for policy in report["policies"]:
        steps = policy["steps"]
        print(
            f"  policy {policy['name'] if policy['name'] is not None else '(no name)'}: {policy['episodes']:,} "
            "episode(s)" + (f", steps {steps[0]:,} to {steps[1]:,}" if steps else ""),
            file=out,
        )
    for a in report["annotations"]:
        state = "read" if a["taken"] else f"not read: {a['problem'] or 'replaced by a later version'}"
        what = f"v{a['version']} ({a['episodes']:,} episodes, per {a['per']})"
        print(f"  annotation data/{a['name']} {what}: {state}", file=out)
    print(
        f"  episodes: {report['episodes']:,}: {report['complete_episodes']:,} complete ({report['terminated']:,} "
        f"terminated, {report['truncated']:,} truncated), {report['incomplete_episodes']:,} incomplete "
        "(still running when the recorder closed or stopped on an error)",
        file=out,
    )
    steps_line = _env_steps_line(report["steps"], least, most, report["env_steps_asked"], "next_step" in modes)
    print(f"  steps: {steps_line}", file=out)
    if report["evicted_steps"]:
        print(f"  evicted: {report['evicted_steps']:,} transitions (oldest shards deleted by capacity_steps)", file=out)
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
        f"  on disk: {fmt_bytes(disk)}  raw: {fmt_bytes(raw_total)}" + (f"  ratio: {ratio:.2f}x" if ratio else ""),
        file=out,
    )
    print(f"  columns ({'raw -> stored' if exact else 'raw bytes in episodes'}):", file=out)
    width = max((len(c["name"]) for c in columns), default=0)
    for c in columns:
        line = f"    {c['name']:<{width}}  {fmt_bytes(c['raw_bytes']):>10}"
        if c["stored_bytes"] is not None:
            r = f"{c['ratio']:.2f}x" if c["ratio"] else "-"
            line += f" -> {fmt_bytes(c['stored_bytes']):>10}  {r}"
        print(line, file=out)
    for file, offset, why in report["problems"]:
        print(f"  problem: {file} at byte {offset}: {why}", file=out)
    if report["episodes_unlisted"]:
        lost = report["episodes_unlisted"]
        print(f"  lost: {lost:,} episode(s) no longer listed (damaged Episode records, or rows lost)", file=out)
    return 0


def provenance_lines(p: dict[str, Any]) -> list[str]:
    """A recording's provenance as short lines of text (what `trajcore info` prints)."""
    lines: list[str] = []
    env = p.get("env") or {}
    spec = env.get("spec") or {}
    if spec:
        kwargs = json.dumps(spec.get("kwargs") or {}, separators=(",", ":"))
        lines.append(
            f"spec: {spec.get('id')} ({spec.get('entry_point')}, version {spec.get('version')}, kwargs {kwargs})"
        )
    if env.get("wrappers"):
        lines.append("wrappers: " + " > ".join(w["class"].rpartition(".")[2] for w in env["wrappers"]))
    vector = p.get("vector")
    if vector:
        lines.append(f"vector: {vector['kind']} of {vector['num_envs']}, autoreset {vector['autoreset_mode']}")
    host = p.get("host")
    versions = p.get("versions") or {}
    if host or versions:
        packages = ", ".join(f"{k} {v}" for k, v in versions.items() if k not in ("python", "python_implementation"))
        where = f"{host['hostname']} ({host['platform']}), " if host else ""
        lines.append(f"host: {where}Python {versions.get('python', '?')}" + (f"; {packages}" if packages else ""))
    command = p.get("command")
    if command:
        lines.append("command: " + " ".join(command.get("argv") or []))
    if "git" in p:
        git = p["git"]
        if git is None:
            lines.append("git: not in a git repository")
        else:
            dirty = {True: " (dirty)", False: "", None: " (dirty: unknown)"}[git.get("dirty")]
            lines.append(f"git: {git.get('commit')}{dirty}")
    return lines


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


def add_arguments(commands: Commands, parser: argparse.ArgumentParser) -> None:
    """Adds the command's arguments to its parser."""
    commands.report_args(parser)
