"""The figures, drawn with matplotlib's object-oriented API (a `Figure`, no pyplot: no global
state, no GUI backend; a notebook shows a returned figure, ``savefig`` writes a PNG).

Every artist a test or a user may look for has a gid (``artist.get_gid()``): ``env 3`` (one
sub-env's complete episodes), ``env 3 incomplete``, ``rolling mean``, ``histogram``, and in the
timelog a stage name (``compress``), ``ring fill``, ``ring fill max``, ``producer waiting``,
``vector steps per second`` (a vector step: one step of every sub-env, what the recorder takes
from the ring at a time)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from trajcore._deps import require
from trajcore.plots._series import STAGES, EpisodeSeries, TimelogSeries, rolling_mean

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "histograms_figure",
    "metadata_figure",
    "metrics_figure",
    "per_episode_figure",
    "timelog_figure",
]

LABELS = {
    "return": "return",
    "length": "length (steps)",
    "duration_s": "duration (s, reset to end)",
    "steps_per_s": "env steps per second",
}

MAX_LEGEND_ENVS = 10


def _figure(nrows: int, ncols: int, width: float = 5.2, height: float = 3.3) -> tuple[Figure, Any]:
    require("matplotlib", "trajcore's plots")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained", dpi=100)
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def _env_colors(envs: npt.NDArray[np.int64]) -> Callable[[int], Any]:
    """One colour per sub-env: tab10 for up to 10 sub-envs, a continuous map beyond."""
    from matplotlib import colormaps

    top = int(envs.max()) if envs.size else 0
    if top < 10:
        tab = colormaps["tab10"]
        return lambda e: tab(e % 10)
    cmap = colormaps["viridis"]
    return lambda e: cmap(e / top)


def _scatter_by_env(ax: Axes, x: npt.NDArray[Any], y: npt.NDArray[Any], s: EpisodeSeries) -> None:
    """One colour per sub-env; incomplete episodes (cut off when the recorder closed) as crosses."""
    color = _env_colors(s.env_index)
    envs = sorted(set(s.env_index.tolist()))
    legend = len(envs) <= MAX_LEGEND_ENVS
    crosses = False
    for e in envs:
        mine = s.env_index == e
        done = mine & s.complete
        if done.any():
            label = f"env {e}" if legend else "_"
            ax.scatter(x[done], y[done], s=9, color=color(e), label=label, gid=f"env {e}")
        cut = mine & ~s.complete
        if cut.any():
            label = "incomplete" if not crosses else "_"
            ax.scatter(x[cut], y[cut], s=16, marker="x", color=color(e), label=label, gid=f"env {e} incomplete")
            crosses = True
    if not legend:
        ax.text(0.01, 0.99, f"{len(envs)} sub-envs, one colour each", transform=ax.transAxes, va="top", fontsize=8)


def per_episode_figure(s: EpisodeSeries, metric: str, window: int, title: str) -> Figure:
    """`metric` per episode against the wall time it ended and against its index, one colour per
    sub-env (incomplete episodes as crosses), with the rolling mean of the complete ones."""
    fig, axes = _figure(1, 2)
    y = s.values[metric]
    for ax, x, xlabel in (
        (axes[0][0], s.wall_s, "wall time at the episode's end (s since the first episode began)"),
        (axes[0][1], s.episode.astype(np.float64), "episode index"),
    ):
        _scatter_by_env(ax, x, y, s)
        done = s.complete
        if done.any():
            order = np.argsort(x[done], kind="stable")
            xs, ys = x[done][order], y[done][order]
            mean = rolling_mean(ys, window)
            ax.plot(xs, mean, color="black", linewidth=1.5, label=f"rolling mean ({window})", gid="rolling mean")
        ax.legend(fontsize=7, markerscale=1.5, loc="best")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(LABELS.get(metric, metric))
        ax.grid(alpha=0.3)
    fig.suptitle(f"{title}: {LABELS.get(metric, metric)} per episode (black: rolling mean of complete episodes)")
    return fig


def histograms_figure(s: EpisodeSeries, title: str) -> Figure:
    """Histograms of the return and the length of the complete episodes."""
    fig, axes = _figure(1, 2)
    done = s.complete
    left_out = int((~done).sum())
    for ax, metric in ((axes[0][0], "return"), (axes[0][1], "length")):
        values = s.values[metric][done]
        bins = min(50, max(5, int(np.sqrt(values.size))))
        ax.hist(values, bins=bins, color="#4c72b0", label=metric, gid="histogram")
        ax.set_xlabel(LABELS[metric])
        ax.set_ylabel("episodes")
        ax.grid(alpha=0.3)
    note = f" ({left_out} incomplete episodes left out)" if left_out else ""
    fig.suptitle(f"{title}: {int(done.sum())} complete episodes{note}")
    return fig


def metrics_figure(s: EpisodeSeries, title: str) -> Figure:
    """The other per-episode metrics against the episode index: duration, env steps per second,
    then the mean of every episode metric the writer stored (info entries, custom data)."""
    panels = [(LABELS["duration_s"], s.values["duration_s"]), (LABELS["steps_per_s"], s.values["steps_per_s"])]
    panels += [(f"{name} (mean)", values) for name, values in s.stored.items()]
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = _figure(nrows, ncols)
    flat = [ax for row in axes for ax in row]
    for ax, (label, values) in zip(flat, panels, strict=False):
        _scatter_by_env(ax, s.episode.astype(np.float64), values, s)
        ax.set_xlabel("episode index")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    for ax in flat[len(panels) :]:
        ax.set_axis_off()
    fig.suptitle(f"{title}: per-episode metrics")
    return fig


def metadata_figure(s: EpisodeSeries, metadata: dict[str, npt.NDArray[np.float64]], title: str) -> Figure:
    """One panel per numeric episode-metadata key, against the episode index."""
    n = max(1, len(metadata))
    ncols = min(3, n)
    nrows = -(-n // ncols)
    fig, axes = _figure(nrows, ncols, width=4.4, height=3.0)
    flat = [ax for row in axes for ax in row]
    for ax, (key, values) in zip(flat, metadata.items(), strict=False):
        _scatter_by_env(ax, s.episode.astype(np.float64), values, s)
        if len(metadata) == 1:
            ax.legend(fontsize=7, loc="best")
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("episode index")
        ax.grid(alpha=0.3)
    for ax in flat[len(metadata) :]:
        ax.set_axis_off()
    if not metadata:
        flat[0].text(0.5, 0.5, "no numeric episode metadata", ha="center", va="center", transform=flat[0].transAxes)
    fig.suptitle(f"{title}: numeric episode metadata")
    return fig


def timelog_figure(t: TimelogSeries, title: str) -> Figure:
    """The writer thread's time per stage per second (stacked), the ring's fill, how long the
    producer waited and the steps written per second; each sample drawn over its span."""
    fig, axes = _figure(4, 1, width=9.0, height=2.3)
    edges = np.append(t.t_s, t.t_s[-1] + t.dt_s[-1]) if t.t_s.size else np.zeros(1)
    ax = axes[0][0]
    base = np.zeros(t.t_s.size)
    for stage in STAGES:
        top = base + t.busy[stage]
        ax.stairs(top, edges, baseline=base, fill=True, label=stage, gid=stage, alpha=0.85)
        base = top
    ax.set_ylabel("writer busy\n(fraction of each s)")
    ax.set_ylim(0, max(1.0, float(base.max()) if base.size else 1.0))
    ax.legend(fontsize=7, loc="upper right", ncols=len(STAGES))
    ax = axes[1][0]
    ax.stairs(t.ring_fill, edges, label="ring fill (end of the second)", gid="ring fill")
    ax.stairs(t.ring_fill_max, edges, label="ring fill (most)", gid="ring fill max", alpha=0.6)
    ax.set_ylabel("ring fill")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, loc="upper right")
    ax = axes[2][0]
    ax.stairs(t.producer_wait, edges, color="#c44e52", label="producer waiting", gid="producer waiting")
    ax.set_ylabel("producer waiting\n(fraction of each s)")
    ax.set_ylim(0, max(0.05, float(t.producer_wait.max()) * 1.1 if t.t_s.size else 0.05))
    ax.legend(fontsize=7, loc="upper right")
    ax = axes[3][0]
    ax.stairs(
        t.vector_steps_per_s, edges, color="black", label="vector steps per second", gid="vector steps per second"
    )
    ax.set_ylabel("vector steps / s")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since the recorder started")
    ax.legend(fontsize=7, loc="upper right")
    for row in axes:
        row[0].grid(alpha=0.3)
    fig.suptitle(f"{title}: writer timelog ({t.t_s.size} samples)")
    return fig
