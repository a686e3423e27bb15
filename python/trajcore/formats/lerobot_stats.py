"""The statistics of a LeRobot v3.0 dataset (``meta/stats.json`` and the ``stats/...`` columns of
the episodes table), as LeRobot 0.4 computes them (``lerobot.datasets.compute_stats``):

- per episode and feature: ``min``, ``max``, ``mean``, ``std`` (population), ``count`` (rows) and
  the quantiles ``q01``, ``q10``, ``q50``, ``q90``, ``q99``, per element of a vector;
- images and videos: per channel, over every pixel of a sample of the episode's frames (LeRobot's
  `sample_indices`: all of them up to 100, then about n^0.75), scaled to [0, 1], shaped (3, 1, 1);
  ``count`` is the number of frames sampled;
- the dataset's: the episodes' aggregated as LeRobot aggregates them (`aggregate`): min of mins,
  max of maxes, the count-weighted mean, the pooled variance, count-weighted quantiles.

One difference, on purpose: quantiles are exact (the inverted CDF: the least value with at least
that share of the rows at or below it) where LeRobot estimates the same from a 5000-bin histogram
(within 1/5000 of the value range of each other; the tests compare them).

Plain arrays in, plain dicts out: nothing here reads or writes a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["QUANTILES", "aggregate", "feature_stats", "image_sample", "image_stats", "jsonable"]

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
"""LeRobot's default quantiles, written ``q01`` .. ``q99``."""

Stats = dict[str, npt.NDArray[Any]]


def _quantile_key(q: float) -> str:
    return f"q{round(q * 100):02d}"


def feature_stats(values: npt.NDArray[Any]) -> Stats:
    """The statistics of one episode's rows of a feature, (rows, n) (or (rows,) for a scalar
    feature, given as (rows, 1)), per element; bools keep bool min and max as LeRobot's do."""
    rows = values.reshape(len(values), -1)
    as_float = rows.astype(np.float64)
    stats: Stats = {
        "min": rows.min(axis=0),
        "max": rows.max(axis=0),
        "mean": as_float.mean(axis=0),
        "std": as_float.std(axis=0),
        "count": np.array([len(rows)], dtype=np.int64),
    }
    if len(rows) < 2:
        # LeRobot: too few rows for quantiles; each is the mean.
        stats.update({_quantile_key(q): stats["mean"].copy() for q in QUANTILES})
    else:
        quantiles = np.quantile(as_float, QUANTILES, axis=0, method="inverted_cdf")
        stats.update({_quantile_key(q): quantiles[i] for i, q in enumerate(QUANTILES)})
    return stats


def image_sample(rows: int) -> npt.NDArray[np.int64]:
    """Which of an episode's `rows` frames LeRobot's statistics look at (`sample_indices`)."""
    n = rows if rows < 100 else max(100, min(int(rows**0.75), 10_000))
    return np.round(np.linspace(0, rows - 1, n)).astype(np.int64)


def image_stats(frames: npt.NDArray[np.uint8]) -> Stats:
    """The statistics of sampled (N, H, W, 3) uint8 frames: per channel, scaled to [0, 1],
    each of shape (3, 1, 1). From each channel's histogram of its 256 values: the same figures
    `feature_stats` gives over every pixel, without sorting them."""
    channels = frames.shape[-1]
    counts = np.stack([np.bincount(frames[..., c].ravel(), minlength=256) for c in range(channels)])
    values = np.arange(256, dtype=np.float64)
    total = counts.sum(axis=1)
    mean = counts @ values / total
    variance = (counts * (values[None, :] - mean[:, None]) ** 2).sum(axis=1) / total
    cumulative = counts.cumsum(axis=1)
    stats: Stats = {
        "min": np.argmax(counts > 0, axis=1).astype(np.float64),
        "max": (255 - np.argmax(counts[:, ::-1] > 0, axis=1)).astype(np.float64),
        "mean": mean,
        "std": np.sqrt(variance),
    }
    for q in QUANTILES:
        # The inverted CDF: the least value with at least q of the pixels at or below it.
        stats[_quantile_key(q)] = np.argmax(cumulative >= q * total[:, None], axis=1).astype(np.float64)
    out: Stats = {k: (v / 255.0).reshape(-1, 1, 1) for k, v in stats.items()}
    out["count"] = np.array([len(frames)], dtype=np.int64)
    return out


def aggregate(episodes: Sequence[Stats]) -> Stats:
    """One feature's statistics over episodes (LeRobot's `aggregate_feature_stats`)."""
    means = np.stack([s["mean"] for s in episodes])
    counts = np.stack([s["count"] for s in episodes]).astype(np.float64)
    total = counts.sum(axis=0)
    while counts.ndim < means.ndim:
        counts = counts[..., None]
    mean = (means * counts).sum(axis=0) / total
    variances = np.stack([s["std"] ** 2 for s in episodes])
    variance = ((variances + (means - mean) ** 2) * counts).sum(axis=0) / total
    out: Stats = {
        "min": np.min(np.stack([s["min"] for s in episodes]), axis=0),
        "max": np.max(np.stack([s["max"] for s in episodes]), axis=0),
        "mean": mean,
        "std": np.sqrt(variance),
        "count": total.astype(np.int64),
    }
    for q in QUANTILES:
        key = _quantile_key(q)
        out[key] = (np.stack([s[key] for s in episodes]) * counts).sum(axis=0) / total
    return out


def jsonable(stats: Stats) -> dict[str, Any]:
    """Statistics as JSON values (nested lists), as ``meta/stats.json`` holds them."""
    return {k: np.asarray(v).tolist() for k, v in stats.items()}
