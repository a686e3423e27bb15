"""The facts about a dataset that `trajcore info --json` prints and `trajcore card` writes: counts,
statistics, spaces, bytes, provenance and policies, as plain JSON-able values."""

from __future__ import annotations

from typing import Any

import numpy as np

from trajcore.formats.summaries import env_step_bounds
from trajcore.read.dataset import Dataset
from trajcore.read.multiagent.agents import agent_counts, agent_spaces
from trajcore.read.records.meta import env_ids
from trajcore.read.records.provenance import policy_counts
from trajcore.tools.annotate import annotations_of

__all__ = ["dataset_report"]


def dataset_report(ds: Dataset) -> tuple[dict[str, Any], bool]:
    """The report of an open dataset, and whether its per-column stored bytes are exact (the
    core reports them) rather than estimated from the rows episodes cover."""
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
        "shards": len(ds.shards) - len(annotations_of(ds)),
        "recordings": ds.num_recordings,
        "env_ids": env_ids(metas),
        "num_envs": sorted({int(m.get("num_envs", 1)) for m in metas}),
        "autoreset_modes": sorted(set(modes)),
        "metadata": ds.metadata,
        "agents": agent_counts(ds._reads),
        "agent_spaces": agent_spaces(ds._reads),
        "episodes": ds.num_episodes,
        "complete_episodes": int(np.count_nonzero(complete)),
        "incomplete_episodes": int(np.count_nonzero(~complete)),
        "terminated": int(np.count_nonzero(s["terminated"])),
        "truncated": int(np.count_nonzero(s["truncated"])),
        "steps": ds.num_steps,
        "env_steps": {"min": least, "max": most},
        "env_steps_asked": _env_steps_asked(ds, metas, origins),
        "copied_from": [o for o in origins if o is not None],
        "provenance": ds.provenance,
        "policies": policy_counts(ds._reads),
        "annotations": annotations_of(ds),
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
        "evicted_steps": ds.evicted_steps,
    }
    return report, exact


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
