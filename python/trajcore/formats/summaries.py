"""Episode rows: what `trajcore ls`, `trajcore.summaries_frame` and the exports' per-episode
metadata show of each episode. One place builds them, so every view lists the same fields."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore.read.dataset import Dataset
from trajcore.read.multiagent.agents import agent_names
from trajcore.read.select.metrics import STATS as METRIC_STATS
from trajcore.spaces import escape_key

__all__ = ["METRIC_STATS", "SUMMARY_FIELDS", "env_step_bounds", "flatten_metadata", "metric_column", "summary_columns"]

SUMMARY_FIELDS = (
    "recording",
    "shard",
    "env_index",
    "episode_id",
    "length",
    "episode_return",
    "complete",
    "terminated",
    "truncated",
    "start_ns",
    "end_ns",
)
"""The index's per-episode summary fields, in the order the views show them."""


def metric_column(name: str, stat: str) -> str:
    """The view column of one statistic of one metric: ``metrics/<name>/<stat>``."""
    return f"metrics/{name}/{stat}"


def summary_columns(ds: Dataset, indices: Sequence[int]) -> dict[str, npt.NDArray[Any]]:
    """One array per field over the given episodes: ``episode`` (the dataset index), then
    `SUMMARY_FIELDS`, then each episode metric's `METRIC_STATS` (``metrics/<name>/<stat>``,
    see `Dataset.metrics`). Read from the index only; nothing is decompressed.

    This is the one place per-episode figures are gathered, so that `summaries_frame`,
    `trajcore ls` and the exports all show the same ones.
    """
    s = ds._reads.summary()
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    out: dict[str, npt.NDArray[Any]] = {"episode": idx}
    for name in SUMMARY_FIELDS:
        out[name] = s[name][idx]
    names = agent_names(ds._reads)
    if names is not None:
        out["agent"] = names[idx]  # multi-agent datasets: whose episode each is
    for name, stats in ds.metrics().items():
        for stat in METRIC_STATS:
            out[metric_column(name, stat)] = stats[stat][idx]
    return out


def flatten_metadata(metadata: Mapping[str, Any], prefix: str = "metadata") -> dict[str, Any]:
    """Nested metadata as flat ``prefix/key/subkey`` entries (keys escaped like column names);
    lists and scalars are kept as values, an empty dict is dropped.

    >>> flatten_metadata({"agent": "ppo", "cfg": {"lr": 0.1}})
    {'metadata/agent': 'ppo', 'metadata/cfg/lr': 0.1}
    """
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        name = f"{prefix}/{escape_key(str(key))}"
        if isinstance(value, Mapping):
            out.update(flatten_metadata(value, name))
        else:
            out[name] = value
    return out


def env_step_bounds(
    length: npt.NDArray[Any],
    recording: npt.NDArray[Any],
    env_index: npt.NDArray[Any],
    complete: npt.NDArray[Any],
    next_step: Sequence[bool],
) -> tuple[int, int]:
    """How many env steps the recorded episodes took, as (least, most): stored steps plus the
    NEXT_STEP autoreset steps, which are env steps but not transitions.

    Under NEXT_STEP, every episode of a sub-env after its first began with an autoreset step:
    one each, known. A sub-env whose last episode is complete may also have taken one more
    autoreset step before the recorder closed (its empty next episode is not stored), or not:
    that is the spread. Episodes dropped with ``discard`` are not counted.

    Args:
        length, recording, env_index, complete: the summary fields, in dataset order.
        next_step: per recording, whether its autoreset mode is NEXT_STEP.
    """
    stored = int(np.sum(length, dtype=np.int64))
    least = most = stored
    last: dict[tuple[int, int], bool] = {}
    counts: dict[tuple[int, int], int] = {}
    for r, e, c in zip(recording.tolist(), env_index.tolist(), complete.tolist(), strict=True):
        if r < len(next_step) and next_step[r]:
            counts[(r, e)] = counts.get((r, e), 0) + 1
            last[(r, e)] = bool(c)  # dataset order is the order episodes ended, per sub-env
    for key, n in counts.items():
        least += n - 1
        most += n - 1 + (1 if last[key] else 0)
    return least, most
