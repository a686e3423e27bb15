"""Plots of a dataset's episodes and of a recorder's timelog (matplotlib, an optional package:
without it, `MissingDependencyError`).

    ds = trajcore.open("runs/cp16")
    plots = trajcore.plots
    plots.per_episode(ds, "return"); plots.per_episode(ds, "length", window=50)
    plots.histograms(ds); plots.metrics(ds); plots.metadata(ds.select(complete=True))
    trajcore.plots.write_plots(ds, "plots/")                  # the same, as PNG files
    trajcore.plots.save_timelog(recorder, "timelog.json")     # a recorder's timings (live or closed)
    trajcore.plots.timelog_figure(recorder)                    # ... or of the JSON file

`_series` decides the numbers (plain values in, plain values out), `_figures` draws them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trajcore.errors import InvalidArgumentError
from trajcore.formats.summaries import flatten_metadata, summary_columns
from trajcore.plots import _figures
from trajcore.plots._series import default_window, episode_series, numeric_metadata, timelog_series
from trajcore.read.dataset import Dataset, members
from trajcore.read.episodes import Episodes
from trajcore.read.records.meta import env_ids

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "TIMELOG_FORMAT",
    "histograms",
    "load_timelog",
    "metadata",
    "metrics",
    "per_episode",
    "save_timelog",
    "timelog_figure",
    "write_plots",
]

TIMELOG_FORMAT = "trajcore-timelog-1"
"""The ``format`` of a timelog JSON file (`save_timelog`)."""


def _title(ds: Dataset) -> str:
    ids = [i for i in env_ids([ds.meta(r) for r in range(ds.num_recordings)]) if i is not None]
    name = os.path.basename(os.path.normpath(ds.path))
    return f"{name} ({', '.join(ids)})" if ids else name


def _series(source: Dataset | Episodes) -> tuple[Dataset, list[int], Any]:
    ds, indices = members(source)
    if not indices:
        raise InvalidArgumentError(f"{ds.path}: no episodes to plot")
    return ds, indices, episode_series(summary_columns(ds, indices))


def per_episode(source: Dataset | Episodes, metric: str = "return", *, window: int | None = None) -> Figure:
    """`metric` ("return", "length", "duration_s" or "steps_per_s") per episode, against wall
    time and against the episode index, one colour per sub-env, with a rolling mean (a window of
    `window` complete episodes; default: a twentieth of them, 1 to 100).

    Raises:
        MissingDependencyError: matplotlib is not installed.
        InvalidArgumentError: no episodes, or an unknown metric.
    """
    ds, _, s = _series(source)
    if metric not in s.values:
        raise InvalidArgumentError(f"unknown metric {metric!r} (known: {', '.join(s.values)})")
    w = window if window is not None else default_window(int(s.complete.sum()))
    return _figures.per_episode_figure(s, metric, max(1, int(w)), _title(ds))


def histograms(source: Dataset | Episodes) -> Figure:
    """Histograms of the return and length of the complete episodes."""
    ds, _, s = _series(source)
    return _figures.histograms_figure(s, _title(ds))


def metrics(source: Dataset | Episodes) -> Figure:
    """Duration and env steps per second of each episode, against its index."""
    ds, _, s = _series(source)
    return _figures.metrics_figure(s, _title(ds))


def metadata(source: Dataset | Episodes) -> Figure:
    """Every numeric episode-metadata value (nested keys as ``metadata/a/b``) against the episode
    index, one panel per key."""
    ds, indices, s = _series(source)
    flat = [flatten_metadata(ds._reads.episode_metadata(i)) for i in indices]
    return _figures.metadata_figure(s, numeric_metadata(flat), _title(ds))


def _samples(source: Any) -> list[dict[str, Any]]:
    """Timelog samples from a recorder (anything with ``stats()``), a dataset (the timelog its
    first recording stored), a list of samples, or the path of a JSON file `save_timelog`
    wrote."""
    if isinstance(source, Dataset):
        return source.timelog(0)
    if hasattr(source, "stats"):
        return list(source.stats()["timelog"])
    if isinstance(source, str | os.PathLike):
        return load_timelog(source)
    if isinstance(source, Sequence) and all(isinstance(s, Mapping) for s in source):
        return [dict(s) for s in source]
    raise InvalidArgumentError(
        f"a timelog is a recorder, a list of samples or a JSON file's path, got {type(source).__name__}"
    )


def save_timelog(source: Any, path: str | os.PathLike[str]) -> str:
    """Writes a recorder's timelog (a live or closed recorder, or its ``stats()["timelog"]``) as
    JSON: ``{"format": "trajcore-timelog-1", "samples": [...]}``. Returns the path."""
    out = os.fspath(path)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"format": TIMELOG_FORMAT, "samples": _samples(source)}, f)
        f.write("\n")
    return out


def load_timelog(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The samples of a timelog JSON file (`save_timelog`).

    Raises:
        InvalidArgumentError: the file is not a trajcore timelog.
    """
    with open(path, encoding="utf-8") as f:
        try:
            doc = json.load(f)
        except ValueError as e:
            raise InvalidArgumentError(f"{os.fspath(path)} is not a trajcore timelog (not JSON: {e})") from None
    if not isinstance(doc, dict) or doc.get("format") != TIMELOG_FORMAT or not isinstance(doc.get("samples"), list):
        raise InvalidArgumentError(f"{os.fspath(path)} is not a trajcore timelog (format {TIMELOG_FORMAT!r})")
    return list(doc["samples"])


def timelog_figure(source: Any, title: str = "recorder") -> Figure:
    """The writer thread's timings over a recording: `source` is a recorder, a dataset (the
    timelog stored in its files, first recording), a list of samples or a timelog JSON file.

    Raises:
        InvalidArgumentError: the timelog has no sample.
    """
    samples = _samples(source)
    if not samples:
        raise InvalidArgumentError("the timelog has no sample yet (the recorder makes one per second, and at close)")
    return _figures.timelog_figure(timelog_series(samples), title)


def write_plots(
    source: Dataset | Episodes | None,
    out_dir: str | os.PathLike[str],
    *,
    timelog: Any = None,
    window: int | None = None,
) -> list[str]:
    """Writes every plot as a PNG into `out_dir` (created if missing; files of these names there
    are replaced): returns.png, lengths.png, histograms.png, metrics.png, metadata.png (when some
    episode metadata is numeric) and timelog.png (the given `timelog`, else the one the
    dataset's files hold: timelog.png for one recording, timelog-<r>.png for each of several).

    Args:
        source: a dataset or a selection of its episodes (None: the timelog only).
        timelog: a recorder, its samples, or a timelog JSON file (`save_timelog`); default:
            the timelog stored in the dataset.
        window: rolling-mean window (see `per_episode`).

    Returns:
        The paths written.

    Raises:
        MissingDependencyError: matplotlib is not installed.
        InvalidArgumentError: nothing to plot.
    """
    figures: list[tuple[str, Figure]] = []
    if source is not None:
        ds, indices, s = _series(source)
        title = _title(ds)
        w = window if window is not None else default_window(int(s.complete.sum()))
        figures.append(("returns", _figures.per_episode_figure(s, "return", max(1, int(w)), title)))
        figures.append(("lengths", _figures.per_episode_figure(s, "length", max(1, int(w)), title)))
        figures.append(("histograms", _figures.histograms_figure(s, title)))
        figures.append(("metrics", _figures.metrics_figure(s, title)))
        numeric = numeric_metadata([flatten_metadata(ds._reads.episode_metadata(i)) for i in indices])
        if numeric:
            figures.append(("metadata", _figures.metadata_figure(s, numeric, title)))
    if timelog is not None:
        figures.append(("timelog", timelog_figure(timelog)))
    elif source is not None:
        stored = [(r, ds.timelog(r)) for r in range(ds.num_recordings)]
        stored = [(r, samples) for r, samples in stored if samples]
        for r, samples in stored:
            name = "timelog" if len(stored) == 1 else f"timelog-{r}"
            figures.append((name, timelog_figure(samples, f"recording {r}")))
    if not figures:
        raise InvalidArgumentError("nothing to plot: give a dataset, a timelog, or both")
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for name, fig in figures:
        path = os.path.join(os.fspath(out_dir), f"{name}.png")
        fig.savefig(path)
        written.append(path)
    return written
