"""The numbers the plots draw, decided from plain values (summary arrays, metadata dicts, timelog
samples): nothing here reads a file or draws."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "STAGES",
    "EpisodeSeries",
    "TimelogSeries",
    "default_window",
    "episode_series",
    "numeric_metadata",
    "rolling_mean",
    "timelog_series",
]

STAGES = ("copy", "encode", "compress", "write", "fsync")
"""The writer thread's stages, in the order they are stacked (see rust/core/src/writer/timelog.rs)."""


def rolling_mean(values: npt.ArrayLike, window: int) -> npt.NDArray[np.float64]:
    """The mean of each value and the `window` - 1 before it (fewer at the start).

    >>> rolling_mean([1, 2, 3, 4], 2).tolist()
    [1.0, 1.5, 2.5, 3.5]
    """
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return v
    window = max(1, int(window))
    sums = np.cumsum(v)
    out = sums.copy()
    out[window:] = sums[window:] - sums[:-window]
    counts = np.minimum(np.arange(1, v.size + 1), window)
    result: npt.NDArray[np.float64] = out / counts
    return result


def default_window(n: int) -> int:
    """A rolling-mean window that smooths without hiding trends: a twentieth of the episodes,
    between 1 and 100."""
    return max(1, min(100, n // 20))


@dataclass
class EpisodeSeries:
    """Per-episode values of a dataset (or a selection), in dataset order.

    Attributes:
        episode: dataset indexes (the x of "per episode index" plots).
        env_index: the sub-env of each (one colour each).
        wall_s: seconds from the first episode's start to each episode's end.
        values: per metric name, one value per episode (return, length, duration_s, ...).
        complete: whether each episode ended (not cut off when its recorder closed).
        stored: the episode metrics the writer stored (`Dataset.metrics`), mean per episode by
            column name (NaN where an episode has no value).
    """

    episode: npt.NDArray[np.int64]
    env_index: npt.NDArray[np.int64]
    wall_s: npt.NDArray[np.float64]
    values: dict[str, npt.NDArray[np.float64]]
    complete: npt.NDArray[np.bool_]
    stored: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)


def episode_series(summaries: Mapping[str, npt.NDArray[Any]]) -> EpisodeSeries:
    """The per-episode metrics from summary columns (as `summary_columns` gives them): return,
    length, duration (s, reset to end) and env steps per second of each episode, and the mean
    of each stored episode metric (``metrics/<name>/mean``)."""
    start = summaries["start_ns"].astype(np.int64)
    end = summaries["end_ns"].astype(np.int64)
    origin = int(start.min()) if start.size else 0
    duration = (end - start).astype(np.float64) / 1e9
    length = summaries["length"].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(duration > 0, length / duration, np.nan)
    return EpisodeSeries(
        episode=summaries["episode"].astype(np.int64),
        env_index=summaries["env_index"].astype(np.int64),
        wall_s=(end - origin).astype(np.float64) / 1e9,
        values={
            "return": summaries["episode_return"].astype(np.float64),
            "length": length,
            "duration_s": duration,
            "steps_per_s": rate,
        },
        complete=summaries["complete"].astype(np.bool_),
        stored={
            key[len("metrics/") : -len("/mean")]: np.asarray(values, dtype=np.float64)
            for key, values in summaries.items()
            if key.startswith("metrics/") and key.endswith("/mean")
        },
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(float(value)) else None


def numeric_metadata(flat: Sequence[Mapping[str, Any]]) -> dict[str, npt.NDArray[np.float64]]:
    """Every metadata key holding a number in at least one episode: one value per episode (NaN
    where it has none or a non-number), keys in the order first seen.

    Args:
        flat: per episode, its metadata flattened (``metadata/cfg/lr``: see `flatten_metadata`).
    """
    keys: list[str] = []
    for meta in flat:
        for key, value in meta.items():
            if key not in keys and _number(value) is not None:
                keys.append(key)
    out: dict[str, npt.NDArray[np.float64]] = {}
    for key in keys:
        column = [_number(meta.get(key)) for meta in flat]
        out[key] = np.array([np.nan if v is None else v for v in column], dtype=np.float64)
    return out


@dataclass
class TimelogSeries:
    """A timelog as the plots draw it: per sample, its start (s since recording started) and the
    fraction of its span each stage took, the ring's fill and the producer's waits.

    Attributes:
        t_s: start of each sample; dt_s: its span.
        busy: per stage (`STAGES`), the fraction of the span the writer thread spent there.
        ring_fill, ring_fill_max: fractions of the ring in use (at the sample's end, most seen).
        producer_wait: fraction of the span the producer (the env loop) waited.
        waits: producer waits (ring full or pacing) per second.
        vector_steps_per_s: vector steps (one step of every sub-env) the writer took off the
            ring per second.
    """

    t_s: npt.NDArray[np.float64]
    dt_s: npt.NDArray[np.float64]
    busy: dict[str, npt.NDArray[np.float64]]
    ring_fill: npt.NDArray[np.float64]
    ring_fill_max: npt.NDArray[np.float64]
    producer_wait: npt.NDArray[np.float64]
    waits: npt.NDArray[np.float64]
    vector_steps_per_s: npt.NDArray[np.float64]


def timelog_series(samples: Sequence[Mapping[str, Any]]) -> TimelogSeries:
    """Per-second rates and fractions of timelog samples (as `stats()["timelog"]` gives them)."""

    def column(key: str) -> npt.NDArray[np.float64]:
        return np.array([float(s.get(key, 0.0)) for s in samples], dtype=np.float64)

    dt = np.maximum(column("dt_s"), 1e-9)
    return TimelogSeries(
        t_s=column("t_s"),
        dt_s=dt,
        busy={stage: column(f"{stage}_s") / dt for stage in STAGES},
        ring_fill=column("ring_fill"),
        ring_fill_max=column("ring_fill_max"),
        producer_wait=column("producer_wait_s") / dt,
        waits=(column("ring_waits") + column("backlog_waits")) / dt,
        vector_steps_per_s=column("steps") / dt,
    )
