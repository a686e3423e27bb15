"""Filtering episodes on their metrics (`Dataset.select(metrics=...)`): pure logic over the
metric arrays, no I/O.

A filter maps a metric name to bounds per statistic, ``{"data/logp": {"mean": (-1.0, None)}}``:
inclusive, ``None`` for an open end. An episode without a value in the column (count 0) passes
no bound on it; neither does a NaN statistic (a NaN the env or the user gave), which is warned.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore.errors import InvalidArgumentError, TrajcoreWarning

STATS = ("count", "mean", "sum", "min", "max")
"""The statistics of an episode metric, in the order the views show them."""

Bounds = tuple[float | None, float | None]
MetricFilters = Mapping[str, Mapping[str, Bounds]]


def _bounds(name: str, stat: str, bounds: Any) -> Bounds:
    try:
        lo, hi = bounds
        return (None if lo is None else float(lo), None if hi is None else float(hi))
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"metrics[{name!r}][{stat!r}] = {bounds!r}: expected (low, high) bounds, None for an open end"
        ) from None


def metric_keep(
    metrics: Mapping[str, Mapping[str, npt.NDArray[Any]]],
    filters: MetricFilters,
    candidates: npt.NDArray[np.int64],
    stacklevel: int,
) -> npt.NDArray[np.bool_]:
    """A mask over all episodes: those passing every bound (only `candidates` are counted in
    the NaN warning).

    Raises:
        InvalidArgumentError: an unknown metric name (the message lists those the dataset has),
            an unknown statistic, or bounds that are not a pair of numbers.
    """
    if not isinstance(filters, Mapping):
        raise InvalidArgumentError(f"metrics={filters!r}: expected {{name: {{stat: (low, high)}}}}")
    n = len(next(iter(metrics.values()))["count"]) if metrics else 0
    keep = np.ones(n, dtype=np.bool_)
    nan = 0
    for name, by_stat in filters.items():
        if name not in metrics:
            known = ", ".join(sorted(metrics)) or "none: no numeric scalar info or custom data was recorded"
            raise InvalidArgumentError(f"metrics: no episode metric named {name!r} (the dataset has: {known})")
        if not isinstance(by_stat, Mapping):
            raise InvalidArgumentError(f"metrics[{name!r}] = {by_stat!r}: expected {{stat: (low, high)}}")
        column = metrics[name]
        keep &= column["count"] > 0
        for stat, bounds in by_stat.items():
            if stat not in STATS:
                raise InvalidArgumentError(f"metrics[{name!r}]: unknown statistic {stat!r} (one of {', '.join(STATS)})")
            lo, hi = _bounds(name, stat, bounds)
            values = column[stat]
            if lo is not None:
                keep &= values >= lo
            if hi is not None:
                keep &= values <= hi
            if len(candidates):
                nan += int(np.count_nonzero(np.isnan(values[candidates]) & (column["count"][candidates] > 0)))
    if nan:
        warnings.warn(
            f"trajcore: {nan} NaN metric value(s) (a NaN the env or caller gave) failed the metrics bounds",
            TrajcoreWarning,
            stacklevel=stacklevel,
        )
    return keep
