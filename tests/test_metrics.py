"""Episode metrics: the writer's per-episode count, sum, min and max of every numeric scalar info
and custom-data column equal what the stored rows give, over shards, NaNs and dtypes; `select`
and the CLI filter on them; the tables show them."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from helpers import SpaceEnv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _leaf(tree: dict[str, Any], masks: dict[str, Any], path: list[str]) -> tuple[Any, Any]:
    for part in path:
        tree, masks = tree[part], masks[part]
    return tree, masks


def _expected(ep: trajcore.Episode, name: str) -> dict[str, float] | None:
    """The metric of column `name` computed from the episode's stored rows."""
    kind, *path = name.split("/")
    if kind == "info":
        values, mask = _leaf(ep.infos, ep.info_masks, path)
    else:
        values, mask = ep.data[path[0]], ep.data_masks[path[0]]
    given = [float(v) for v in np.asarray(values)[np.asarray(mask)]]
    if not given:
        return None
    total = 0.0
    for v in given:  # in row order, as the writer sums
        total += v
    finite = [v for v in given if not math.isnan(v)]
    return {
        "count": len(given),
        "sum": total,
        "mean": total / len(given),
        "min": min(finite) if finite else math.nan,
        "max": max(finite) if finite else math.nan,
    }


def _assert_metrics_match(ds: trajcore.Dataset) -> int:
    """Every episode's metrics equal those computed from its rows; returns how many were checked."""
    metrics = ds.metrics()
    checked = 0
    for ep in ds.episodes:
        for name, stats in metrics.items():
            want = _expected(ep, name) if not ep.continued else None
            if want is None:
                assert stats["count"][ep.index] == 0, (ep.index, name)
                assert np.isnan(stats["mean"][ep.index])
                continue
            got = {k: stats[k][ep.index] for k in want}
            for k, v in want.items():
                assert got[k] == v or (math.isnan(v) and math.isnan(got[k])), (ep.index, name, k, got, want)
            assert ep.metrics[name] == pytest.approx(got, nan_ok=True)
            checked += 1
    return checked


def _record_space_env(path: Path, steps: int, **options: Any) -> trajcore.Dataset:
    envs = trajcore.RecordVectorEpisodes(
        gym.vector.SyncVectorEnv([lambda i=i: SpaceEnv(max_steps=20 + 9 * i, p_terminate=0.05) for i in range(3)]),
        path,
        **options,
    )
    envs.action_space.seed(0)
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    for t in range(steps):
        envs.record(
            logp=rng.normal(size=3).astype(np.float32),
            count=np.full(3, t, dtype=np.int16),
            flag=rng.random(3) < 0.5,  # bool: no metric
            vec=rng.normal(size=(3, 2)),  # not scalar: no metric
        )
        envs.step(envs.action_space.sample())
    envs.close()
    return trajcore.open(path, strict=True)


def test_metrics_equal_the_stored_rows(tmp_path: Path) -> None:
    ds = _record_space_env(tmp_path / "d", 400)
    names = set(ds.metrics())
    # Numeric scalar infos and custom data; not str, bool, vectors, obs or rewards.
    assert names == {"data/count", "data/logp", "info/even", "info/nested/a", "info/step"}
    assert _assert_metrics_match(ds) > 100
    ep = ds.episodes[0]
    assert ep.metrics["info/step"]["count"] == ep.length + 1  # the reset's info counts too
    assert ep.metrics["data/logp"]["count"] == ep.length


def test_metrics_over_shard_rollovers_and_a_shard_alone(tmp_path: Path) -> None:
    ds = _record_space_env(tmp_path / "d", 1500, max_shard_bytes=25_000, chunk_bytes=8_000, flush_interval=0.05)
    assert len(ds.shards) > 3
    assert _assert_metrics_match(ds) > 100
    # One later shard opened alone: its parts that began earlier have no metrics (they would
    # cover rows the part does not list); the others equal their rows.
    alone = trajcore.open(ds.shards[2], strict=True)
    assert any(ep.continued for ep in alone.episodes)
    _assert_metrics_match(alone)
    assert all(not ep.metrics for ep in alone.episodes if ep.continued)


def test_nan_and_extreme_values(tmp_path: Path) -> None:
    values = [1.5, math.nan, -2.0, math.inf, 4.0]
    env = trajcore.RecordEpisodes(
        SpaceEnv(
            max_steps=len(values), p_terminate=0.0, infos=False, extra_info=lambda t: {"x": values[t - 1]} if t else {}
        ),
        tmp_path / "d",
    )
    env.reset(seed=0)
    for v in values:
        env.record(big=np.int64(2**62) if v == 4.0 else np.int64(-1))
        env.step(0)
    env.close()
    ds = trajcore.open(tmp_path / "d")
    m = ds.episodes[0].metrics
    assert m["info/x"]["count"] == 5
    assert math.isnan(m["info/x"]["sum"]) and math.isnan(m["info/x"]["mean"])
    assert (m["info/x"]["min"], m["info/x"]["max"]) == (-2.0, math.inf)
    assert m["data/big"]["max"] == float(2**62)
    _assert_metrics_match(ds)
    with pytest.warns(trajcore.TrajcoreWarning, match="NaN metric"):
        assert len(ds.select(metrics={"info/x": {"mean": (None, 10)}})) == 0
    assert len(ds.select(metrics={"info/x": {"min": (-2, -2), "count": (5, 5)}})) == 1


def _cartpole(path: Path) -> trajcore.Dataset:
    envs = trajcore.RecordVectorEpisodes(
        gym.wrappers.vector.RecordEpisodeStatistics(gym.make_vec("CartPole-v1", 4)),
        path,
    )
    envs.reset(seed=0)
    envs.action_space.seed(0)
    for t in range(300):
        envs.record(logp=np.full(4, -t / 100.0))
        envs.step(envs.action_space.sample())
    envs.close()
    return trajcore.open(path)


def test_select_on_metrics(tmp_path: Path) -> None:
    ds = _cartpole(tmp_path / "cp")
    m = ds.metrics()
    assert {"data/logp", "info/episode/r", "info/episode/l"} <= set(m)
    # RecordEpisodeStatistics' return is the episode's return, given once, at its end.
    done = ds.select(complete=True)
    r = m["info/episode/r"]
    assert all(r["count"][i] == 1 and r["sum"][i] == ds.episodes[i].episode_return for i in done.indices)
    want = [i for i in range(len(ds)) if m["data/logp"]["mean"][i] >= -1.0 and m["data/logp"]["max"][i] <= 0]
    got = ds.select(metrics={"data/logp": {"mean": (-1.0, None), "max": (None, 0)}})
    assert got.indices == want and 0 < len(want) < len(ds)
    # Combined with summary filters, and on a subset.
    both = ds.select(complete=True, metrics={"info/episode/r": {"sum": (20, None)}})
    assert both.indices == [i for i in done.indices if r["sum"][i] >= 20]
    assert done.select(metrics={"info/episode/r": {"sum": (20, None)}}).indices == both.indices
    # Incomplete episodes have no RecordEpisodeStatistics entry: no value passes no bound.
    assert not set(ds.select(metrics={"info/episode/r": {"count": (0, None)}}).indices) - set(done.indices)


@pytest.mark.parametrize(
    ("metrics", "match"),
    [
        ({"data/nope": {"mean": (0, 1)}}, r"no episode metric named 'data/nope' \(the dataset has: data/logp"),
        ({"data/logp": {"avg": (0, 1)}}, "unknown statistic 'avg'"),
        ({"data/logp": {"mean": 3}}, r"expected \(low, high\)"),
        ({"data/logp": {"mean": ("a", None)}}, r"expected \(low, high\)"),
        ({"data/logp": (0, 1)}, "expected {stat: "),
        ("data/logp", "expected {name: "),
    ],
)
def test_bad_metric_filters_name_what_is_wrong(tmp_path: Path, metrics: Any, match: str) -> None:
    ds = _cartpole(tmp_path / "cp")
    with pytest.raises(trajcore.InvalidArgumentError, match=match):
        ds.select(metrics=metrics)


def test_tables_and_cli_show_metrics(tmp_path: Path) -> None:
    pytest.importorskip("pandas", reason="summaries_frame needs pandas (an optional dependency)")
    ds = _cartpole(tmp_path / "cp")
    frame = trajcore.summaries_frame(ds)
    m = ds.metrics()
    for stat in ("count", "mean", "sum", "min", "max"):
        np.testing.assert_array_equal(frame[f"metrics/data/logp/{stat}"].to_numpy(), m["data/logp"][stat])
    assert frame.columns.get_loc("metrics/data/logp/count") > frame.columns.get_loc("episode_return")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "trajcore", *args], capture_output=True, text=True, check=False)

    out = cli(
        "ls",
        str(tmp_path / "cp"),
        "--json",
        "--select",
        "metric.data/logp.mean=-1:",
        "--select",
        "metric.data/logp.max=:0",
    )
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["episode"] for r in rows] == ds.select(
        metrics={"data/logp": {"mean": (-1, None), "max": (None, 0)}}
    ).indices
    assert rows[0]["metrics"]["data/logp"] == pytest.approx(ds.episodes[rows[0]["episode"]].metrics["data/logp"])
    table = cli("ls", str(tmp_path / "cp"), "--select", "episodes=0:3")
    assert "metrics (mean)" in table.stdout and "data/logp=" in table.stdout
    for bad, why in [
        ("metric.data/logp.avg=0:1", "STAT one of count, mean"),
        ("metric.data/logp.mean=0", "expected LOW:HIGH"),
        ("metric.data/logp.mean=a:", "expected a number"),
        ("metric.data/none.mean=0:", "no episode metric named 'data/none'"),
    ]:
        out = cli("ls", str(tmp_path / "cp"), "--select", bad)
        assert out.returncode == 2 and why in out.stderr and "Traceback" not in out.stderr, (bad, out.stderr)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.tuples(
            st.booleans(),
            st.floats(allow_nan=True, allow_infinity=True, width=32),
            st.integers(-(2**31), 2**31 - 1),
        ),
        min_size=1,
        max_size=40,
    ),
    dtype=st.sampled_from([np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.uint64]),
)
def test_metrics_property(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[bool, float, int]], dtype: Any
) -> None:
    """Whatever values (and gaps) are recorded, in any numeric dtype, the metrics equal the rows."""
    path = tmp_path_factory.mktemp("m") / "d"
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=len(rows), p_terminate=0.0, infos=False), path)
    env.reset(seed=0)
    floating = np.issubdtype(dtype, np.floating)
    for given_, x, n in rows:
        if given_:
            info = np.iinfo(dtype) if not floating else None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # float16 overflow to inf
                value = dtype(x) if floating else dtype(min(max(n, info.min), info.max))  # type: ignore[union-attr]
                env.record(v=np.asarray(value, dtype=dtype))
        env.step(0)
    env.close()
    ds = trajcore.open(path)
    if not any(g for g, _, _ in rows):
        assert "data/v" not in ds.metrics()
        return
    _assert_metrics_match(ds)
