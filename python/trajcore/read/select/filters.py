"""Which episodes `select` keeps: the filters it takes (one list, which the command line's
``--select`` also parses) and their application to a dataset's summaries, metrics and episode
metadata. Reads the index only: no observation is decompressed."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict

import numpy as np

from trajcore.errors import InvalidArgumentError, TrajcoreWarning
from trajcore.read.multiagent.agents import agent_keep
from trajcore.read.reads import DatasetReads
from trajcore.read.records.provenance import policy_keep
from trajcore.read.select.metrics import metric_keep

__all__ = ["BOUND_FILTERS", "FILTER_KEYS", "FLAG_FILTERS", "EpisodeFilters", "select_indices"]


class EpisodeFilters(TypedDict, total=False):
    """What `select` filters on (bounds are inclusive); summaries and metrics only, except
    `where`, which is called with each remaining episode's metadata dict and keeps it if true.
    An episode whose return is NaN (a NaN reward) passes neither `min_return` nor `max_return`,
    with a warning that says how many were left out. `metrics` bounds episode metrics (see
    `Dataset.metrics`): ``{"data/logp": {"mean": (-1.0, None)}, "info/lives": {"min": (1, 1)}}``
    (inclusive, None for an open end); an episode without a value in the column passes none.
    `agent` keeps the episodes of one agent (a name) or of several (a list of names). `policy`
    keeps the episodes recorded under a policy of that name (or any of a list: see
    `set_policy`), `policy_step` those whose policy step is within ``(low, high)`` (inclusive,
    None for an open end); an episode without one passes neither."""

    env_index: int | Sequence[int] | None
    complete: bool | None
    terminated: bool | None
    truncated: bool | None
    min_return: float | None
    max_return: float | None
    min_length: int | None
    max_length: int | None
    metrics: Mapping[str, Mapping[str, tuple[float | None, float | None]]] | None
    where: Callable[[dict[str, Any]], bool] | None
    agent: str | Sequence[str] | None
    policy: str | Sequence[str] | None
    policy_step: tuple[int | None, int | None] | None


FLAG_FILTERS = ("complete", "terminated", "truncated")
"""Filters on an episode's summary flags: True or False."""

BOUND_FILTERS: dict[str, type[int] | type[float]] = {
    "min_return": float,
    "max_return": float,
    "min_length": int,
    "max_length": int,
}
"""Inclusive bounds on an episode's return and length, with the type of each."""

FILTER_KEYS: tuple[str, ...] = tuple(EpisodeFilters.__annotations__)
"""Every key `select` takes, in the order of `EpisodeFilters`."""


def select_indices(reads: DatasetReads, candidates: Sequence[int], filters: Mapping[str, Any]) -> list[int]:
    """The candidates (dataset indexes, order kept) passing every filter.

    Raises:
        InvalidArgumentError: a key that is not a filter (the message lists them), or a bad
            metric filter.
    """
    unknown = [key for key in filters if key not in FILTER_KEYS]
    if unknown:
        raise InvalidArgumentError(f"select: unknown filter {unknown[0]!r} (filters: {', '.join(FILTER_KEYS)})")
    s = reads.summary()
    keep = np.ones(reads.num_episodes, dtype=np.bool_)
    env_index = filters.get("env_index")
    if env_index is not None:
        keep &= np.isin(s["env_index"], np.atleast_1d(np.asarray(env_index)))
    for name in FLAG_FILTERS:
        value = filters.get(name)
        if value is not None:
            keep &= s[name] == bool(value)
    min_return, max_return = filters.get("min_return"), filters.get("max_return")
    if min_return is not None or max_return is not None:
        returns = s["episode_return"]
        if min_return is not None:
            keep &= returns >= min_return
        if max_return is not None:
            keep &= returns <= max_return
        # A NaN return (a NaN reward: what the env gave) passes no bound; say so.
        nan = int(np.count_nonzero(np.isnan(returns[np.asarray(candidates, dtype=np.int64)])))
        if nan:
            warnings.warn(
                f"trajcore: {nan} episode(s) with a NaN return are left out by min_return/max_return",
                TrajcoreWarning,
                stacklevel=3,
            )
    min_length, max_length = filters.get("min_length"), filters.get("max_length")
    if min_length is not None:
        keep &= s["length"] >= min_length
    if max_length is not None:
        keep &= s["length"] <= max_length
    chosen = np.asarray(candidates, dtype=np.int64)
    metrics = filters.get("metrics")
    if metrics is not None:
        keep &= metric_keep(reads.metric_arrays(), metrics, chosen, stacklevel=4)
    agent = filters.get("agent")
    if agent is not None:
        keep &= agent_keep(reads, agent, s["recording"])
    policy, policy_step = filters.get("policy"), filters.get("policy_step")
    if policy is not None or policy_step is not None:
        # Episode metadata, read for the episodes the index filters kept only.
        kept = chosen[keep[chosen]]
        chosen = kept[policy_keep(reads, kept, policy, policy_step)]
    indices: list[int] = chosen[keep[chosen]].tolist() if len(chosen) else []
    where = filters.get("where")
    if where is not None:
        indices = [i for i in indices if where(reads.episode_metadata(i))]
    return indices
