"""Plots: each figure's data read back from its artists (found by gid) and compared with the
dataset's summaries, metadata and a recorder's timelog; ``trajcore plot`` writes the PNGs; the
pure series functions on tables of cases; a clear error without matplotlib."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
import trajcore.plots as plots
from trajcore.cli import main
from trajcore.plots._series import episode_series, numeric_metadata, rolling_mean, timelog_series

pytest.importorskip("matplotlib", reason="plots need matplotlib: pip install matplotlib (it is in the test extra)")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """CartPole x3 (episodes of every sub-env, some cut off at close) with numeric, nested and
    string episode metadata; and the recorder's timelog saved as JSON."""
    path = tmp_path_factory.mktemp("plots") / "cp3"
    envs = gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync")
    rec = trajcore.RecordVectorEpisodes(
        envs,
        path,
        episode_metadata=lambda e: {"score": 2 * e["episode_return"], "cfg": {"lr": 0.1 * e["env_index"]}, "name": "x"},
    )
    rec.action_space.seed(0)
    rec.reset(seed=0)
    for t in range(600):
        rec.record(logp=np.full(3, -t / 600))
        rec.step(rec.action_space.sample())
    rec.close()  # closing publishes the last, partial, second: a closed recorder's timelog is whole
    timelog = plots.save_timelog(rec, path.parent / "timelog.json")
    return path, Path(timelog)


def _by_gid(ax: Any) -> dict[str, Any]:
    return {a.get_gid(): a for a in [*ax.collections, *ax.lines, *ax.patches] if a.get_gid()}


def test_returns_per_episode_against_wall_time_and_index(recorded: tuple[Path, Path]) -> None:
    with trajcore.open(recorded[0]) as ds:
        s = ds.summaries()
        fig = plots.per_episode(ds, "return", window=5)
        by_time, by_index = fig.axes
        start = s["start_ns"].min()
        done = s["complete"]
        assert (~done).sum() >= 1, "episodes cut off at close exist"
        for ax, x in ((by_time, (s["end_ns"] - start) / 1e9), (by_index, np.arange(len(s["length"])))):
            artists = _by_gid(ax)
            for e in range(3):
                mine = (s["env_index"] == e) & done
                xy = artists[f"env {e}"].get_offsets()
                assert np.allclose(xy[:, 0], x[mine]) and np.allclose(xy[:, 1], s["episode_return"][mine])
                cut = (s["env_index"] == e) & ~done
                if cut.any():
                    assert np.allclose(artists[f"env {e} incomplete"].get_offsets()[:, 1], s["episode_return"][cut])
            order = np.argsort(x[done], kind="stable")
            line = artists["rolling mean"]
            assert np.allclose(line.get_xdata(), x[done][order])
            assert np.allclose(line.get_ydata(), rolling_mean(s["episode_return"][done][order], 5))
        lengths = plots.per_episode(ds, "length")
        assert np.allclose(
            _by_gid(lengths.axes[1])["env 1"].get_offsets()[:, 1], s["length"][(s["env_index"] == 1) & done]
        )


def test_histograms_metrics_and_metadata(recorded: tuple[Path, Path]) -> None:
    with trajcore.open(recorded[0]) as ds:
        s = ds.summaries()
        done = s["complete"]
        hist = plots.histograms(ds)
        for ax in hist.axes:
            bars = [p for p in ax.patches if p.get_gid() == "histogram"]
            assert sum(p.get_height() for p in bars) == done.sum()
        assert f"{(~done).sum()} incomplete episodes left out" in hist.get_suptitle()

        metrics = plots.metrics(ds)
        duration = (s["end_ns"] - s["start_ns"]) / 1e9
        xy = _by_gid(metrics.axes[0])["env 0"].get_offsets()
        assert np.allclose(xy[:, 1], duration[(s["env_index"] == 0) & done])
        # Then the mean of each stored episode metric, one panel each.
        assert metrics.axes[2].get_ylabel() == "data/logp (mean)"
        logp = ds.metrics()["data/logp"]["mean"]
        assert np.allclose(_by_gid(metrics.axes[2])["env 1"].get_offsets()[:, 1], logp[(s["env_index"] == 1) & done])

        meta = plots.metadata(ds)
        titles = [ax.get_title() for ax in meta.axes if ax.axison]
        assert titles == ["metadata/cfg/lr", "metadata/score"], "numbers only, nested keys flattened"
        score = _by_gid(meta.axes[1])["env 2"].get_offsets()[:, 1]
        assert np.allclose(score, 2 * s["episode_return"][(s["env_index"] == 2) & done])


def test_a_selection_plots_its_episodes_only(recorded: tuple[Path, Path]) -> None:
    with trajcore.open(recorded[0]) as ds:
        fig = plots.per_episode(ds.select(env_index=2, complete=True), "return")
        artists = _by_gid(fig.axes[1])
        assert set(artists) == {"env 2", "rolling mean"}


def test_timelog_figure_from_a_recorder_and_from_its_file(recorded: tuple[Path, Path]) -> None:
    samples = plots.load_timelog(recorded[1])
    assert samples and sum(s["steps"] for s in samples) > 0, "the timelog is not empty after a recording"
    fig = plots.timelog_figure(recorded[1])
    busy, fill, waiting, steps = fig.axes
    series = timelog_series(samples)
    for stage in ("copy", "encode", "compress", "write", "fsync"):
        values, edges, baseline = _by_gid(busy)[stage].get_data()
        assert np.allclose(values - baseline, series.busy[stage])
        assert np.allclose(edges[:-1], [s["t_s"] for s in samples])
    assert np.allclose(_by_gid(fill)["ring fill max"].get_data()[0], [s["ring_fill_max"] for s in samples])
    assert np.allclose(_by_gid(waiting)["producer waiting"].get_data()[0], series.producer_wait)
    rate = _by_gid(steps)["vector steps per second"]
    assert np.allclose(rate.get_data()[0], [s["steps"] / s["dt_s"] for s in samples])


def test_plot_command_writes_the_pngs(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    from PIL import Image

    out = tmp_path / "plots"
    assert main(["plot", str(recorded[0]), "--timelog", str(recorded[1]), "-o", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["histograms.png", "lengths.png", "metadata.png", "metrics.png", "returns.png", "timelog.png"]
    for p in out.iterdir():
        with Image.open(p) as im:
            assert im.format == "PNG" and im.size[0] > 300 and im.size[1] > 200
    only = tmp_path / "timelog-only"
    assert main(["plot", "--timelog", str(recorded[1]), "-o", str(only)]) == 0
    assert [p.name for p in only.iterdir()] == ["timelog.png"]


def test_the_timelog_is_stored_in_the_files(tmp_path: Path) -> None:
    """The samples a recorder publishes live are in its files too, across shard rollovers, read
    back by `Dataset.timelog`, by the independent decoder, and plotted by ``trajcore plot``."""
    import time

    from format_decoder import open_shard

    path = tmp_path / "d"
    rec = trajcore.RecordVectorEpisodes(gym.make_vec("CartPole-v1", num_envs=4), path, max_shard_bytes=150_000)
    rec.reset(seed=0)
    start = time.perf_counter()
    while time.perf_counter() - start < 2.5:
        rec.step(rec.action_space.sample())
    rec.close()
    live = rec.stats()["timelog"]
    with trajcore.open(path, strict=True) as ds:
        assert len(ds.shards) >= 2
        stored = ds.timelog()
        assert len(stored) >= 3 and stored == live
        assert sum(s["steps"] for s in stored) == rec.stats()["steps"], "the last sample is in the file too"
        t = [s["t_s"] for s in stored]
        assert t == sorted(t)
        decoded = [sample for shard in ds.shards for sample in open_shard(shard).timelog]
        assert decoded == stored
        with pytest.raises(trajcore.InvalidArgumentError, match="no recording 1"):
            ds.timelog(1)
    out = tmp_path / "plots"
    assert main(["plot", str(path), "-o", str(out)]) == 0
    assert (out / "timelog.png").exists()
    fig = plots.timelog_figure(trajcore.open(path))
    assert len(_by_gid(fig.axes[0])["compress"].get_data()[0]) == len(stored)


def test_no_timelog_in_the_files_when_asked(tmp_path: Path) -> None:
    from format_decoder import open_shard

    rec = trajcore.RecordEpisodes(gym.make("CartPole-v1"), tmp_path / "d", timelog=False)
    rec.reset(seed=0)
    for _ in range(100):
        _, _, terminated, truncated, _ = rec.step(rec.action_space.sample())
        if terminated or truncated:
            rec.reset()
    rec.close()
    assert rec.stats()["timelog"], "still published live"
    with trajcore.open(tmp_path / "d") as ds:
        assert ds.timelog() == []
        assert all(not open_shard(s).timelog for s in ds.shards)


def test_a_damaged_timelog_record_is_left_out_with_a_warning(tmp_path: Path) -> None:
    from format_decoder import KIND_TIMELOG, open_shard

    rec = trajcore.RecordEpisodes(gym.make("CartPole-v1"), tmp_path / "d")
    rec.reset(seed=0)
    for _ in range(50):
        _, _, terminated, truncated, _ = rec.step(rec.action_space.sample())
        if terminated or truncated:
            rec.reset()
    rec.close()
    (shard,) = rec.shard_paths
    records = [r for r in open_shard(shard).records if r.kind == KIND_TIMELOG]
    assert len(records) == 1
    data = bytearray(Path(shard).read_bytes())
    data[records[0].offset + 24 + 12] ^= 0xFF  # inside the first sample
    Path(shard).write_bytes(bytes(data))
    with trajcore.open(tmp_path / "d") as ds:
        assert ds.num_episodes > 0 and not ds.problems, "episodes are untouched"
        with pytest.warns(trajcore.TrajcoreWarning, match="timelog record payload checksum mismatch"):
            assert ds.timelog() == []
    with trajcore.open(tmp_path / "d", strict=True) as ds, pytest.raises(trajcore.CorruptFileError, match="timelog"):
        ds.timelog()


def test_plot_command_errors(recorded: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot"]) == 2
    assert "give a dataset PATH, --timelog FILE, or both" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"samples": []}))
    assert main(["plot", "--timelog", str(bad)]) == 2
    assert "is not a trajcore timelog" in capsys.readouterr().err
    assert main(["plot", str(recorded[0]), "--window", "0"]) == 2


def test_without_matplotlib_a_clear_error(recorded: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with trajcore.open(recorded[0]) as ds:
        with pytest.raises(trajcore.MissingDependencyError, match="pip install matplotlib") as caught:
            plots.per_episode(ds, "return")
        assert isinstance(caught.value, ImportError)


@pytest.mark.parametrize(
    ("values", "window", "want"),
    [
        ([], 3, []),
        ([1, 2, 3, 4], 1, [1, 2, 3, 4]),
        ([1, 2, 3, 4], 2, [1, 1.5, 2.5, 3.5]),
        ([2, 4, 6], 10, [2, 3, 4]),  # a window longer than the series: the mean so far
        ([1, 1, 1, 5], 3, [1, 1, 1, 7 / 3]),
    ],
)
def test_rolling_mean(values: list[float], window: int, want: list[float]) -> None:
    assert np.allclose(rolling_mean(values, window), want)


def test_numeric_metadata_keeps_numbers_only() -> None:
    flat = [{"a": 1, "b": "x", "c": True}, {"a": 2.5, "d": float("nan")}, {"b": 3, "d": 4}]
    got = numeric_metadata(flat)
    assert list(got) == ["a", "b", "d"], "bools are not numbers here; a key counts once it holds one"
    assert np.allclose(got["a"], [1, 2.5, np.nan], equal_nan=True)
    assert np.allclose(got["b"], [np.nan, np.nan, 3], equal_nan=True)
    assert np.allclose(got["d"], [np.nan, np.nan, 4], equal_nan=True)


def test_episode_series_metrics() -> None:
    s = episode_series(
        {
            "episode": np.array([0, 1]),
            "env_index": np.array([0, 1]),
            "length": np.array([10, 4]),
            "episode_return": np.array([10.0, -1.0]),
            "complete": np.array([True, False]),
            "start_ns": np.array([1_000_000_000, 2_000_000_000]),
            "end_ns": np.array([3_000_000_000, 2_000_000_000]),
        }
    )
    assert np.allclose(s.wall_s, [2.0, 1.0])
    assert np.allclose(s.values["duration_s"], [2.0, 0.0])
    assert np.allclose(s.values["steps_per_s"], [5.0, np.nan], equal_nan=True), "no rate for a zero duration"


def test_a_live_recorder_publishes_a_sample_each_second(tmp_path: Path) -> None:
    import time

    rec = trajcore.RecordEpisodes(gym.make("CartPole-v1"), tmp_path / "live")
    rec.reset(seed=0)
    start = time.perf_counter()
    while time.perf_counter() - start < 1.3:
        _, _, terminated, truncated, _ = rec.step(rec.action_space.sample())
        if terminated or truncated:
            rec.reset()
    live = rec.stats()["timelog"]
    rec.close()
    assert len(live) >= 1 and live[0]["dt_s"] >= 1.0 and live[0]["steps"] > 0
    fig = plots.timelog_figure(rec)
    drawn = len(_by_gid(fig.axes[0])["compress"].get_data()[0])
    assert drawn == len(rec.stats()["timelog"]) >= len(live), "a closed recorder keeps its samples"
