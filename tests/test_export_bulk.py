"""Exports read step tables in bulk (a range read per batch) and open a path with a cache that
holds what a read in dataset order has in use: the tables are those of the per-episode read, and
the CLI's export of a path is the API's export, byte for byte (value for value for Parquet)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import trajcore
from trajcore.errors import CorruptFileError, TrajcoreWarning
from trajcore.formats._columns import Plan, choose
from trajcore.formats._read import (
    EXPORT_CACHE_BYTES,
    PASS_CACHE_MAX_BYTES,
    Batch,
    _episode_batches,
    bulk_keys,
    iter_batches,
    open_for_pass,
    pass_cache_bytes,
    plan_of,
)

HERE = os.path.dirname(__file__)


def _multi_shard(path: Path) -> Path:
    """3 CartPole sub-envs in shards of about 20 kB and chunks of 2 kB: episodes run over
    rollovers, and a read in dataset order takes chunks of every sub-env in turn."""
    import gymnasium as gym

    envs = trajcore.RecordVectorEpisodes(
        gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync"),
        path,
        max_shard_bytes=20_000,
        chunk_bytes=2_000,
        flush_interval=0.05,
    )
    envs.action_space.seed(1)
    envs.reset(seed=1)
    for _ in range(1500):
        envs.step(envs.action_space.sample())
    envs.close()
    return path


@pytest.fixture(scope="module")
def multi_shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _multi_shard(tmp_path_factory.mktemp("bulk") / "ds")


def _tables(batches: list[Batch]) -> dict[str, np.ndarray]:
    out: dict[str, list[np.ndarray]] = {}
    for b in batches:
        out.setdefault("episode", []).append(b.episode)
        out.setdefault("env_index", []).append(b.env_index)
        out.setdefault("step", []).append(b.step)
        for name, v in b.values.items():
            out.setdefault(name, []).append(np.asarray(v))
        for name, m in b.masks.items():
            out.setdefault("mask/" + name, []).append(m)
    return {k: np.concatenate(v) for k, v in out.items()}


def _assert_same_tables(bulk: dict[str, np.ndarray], by_episode: dict[str, np.ndarray]) -> None:
    assert bulk.keys() == by_episode.keys()
    for name, want in by_episode.items():
        got = bulk[name]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("name", ["vector", "nested", "cartpole", "multi_shard"])
@pytest.mark.parametrize("rows", [1, 7, 1000])
def test_bulk_batches_are_the_per_episode_rows(
    recorded: Callable[[str], Path], multi_shard: Path, name: str, rows: int
) -> None:
    path = multi_shard if name == "multi_shard" else recorded(name)
    with trajcore.open(path) as ds:
        plan = plan_of(ds)
        leaves, _ = choose(plan.leaves, None, 1 << 30)
        assert bulk_keys(plan, leaves) is not None
        for indices in (range(ds.num_episodes), list(range(ds.num_episodes))[::-2]):
            bulk = list(iter_batches(ds, indices, plan, leaves, rows))
            assert [len(b) for b in bulk[:-1]] == [rows] * (len(bulk) - 1)
            _assert_same_tables(_tables(bulk), _tables(list(_episode_batches(ds, indices, plan, leaves, rows))))


def test_leaves_a_bulk_read_cannot_give_are_read_per_episode() -> None:
    from trajcore.formats._columns import Leaf

    value = Leaf("info", ("x",), "info/x", "float64", (), 1, "info/_x")
    bare = Leaf("data", ("y",), "data/y", "int64", (), 0, None)
    obs = Leaf("obs", (), "obs", "float32", (4,), 0, None)
    nxt = Leaf("next_obs", (), "obs", "float32", (4,), 1, None)
    table = [
        ((obs, nxt, value), [{"obs", "info/x", "info/_x"}], ["obs", "next:obs", "next:info/x", "next:info/_x"]),
        ((obs, value), [{"obs", "info/x", "info/_x"}, {"obs"}], ["obs", "next:info/x", "next:info/_x"]),
        ((obs, value), [{"obs", "info/x"}], None),  # its value without its mask
        ((obs, bare), [{"obs", "data/y"}], ["obs", "data/y"]),
        ((obs, bare), [{"obs", "data/y"}, {"obs"}], None),  # a recording without an unmasked leaf
    ]
    for leaves, columns, want in table:
        plan = Plan(leaves, tuple(frozenset(c) for c in columns))
        assert bulk_keys(plan, leaves) == want, (leaves, columns)


def test_the_pass_cache_holds_two_chunks_per_sub_env_and_column() -> None:
    def stats(*rows: tuple[int, int, int]) -> list[dict[str, int]]:
        return [{"recording": r, "chunks": c, "raw_bytes": b} for r, c, b in rows]

    mib = 1 << 20
    rec, env = np.array([0, 0, 0, 1]), np.array([0, 1, 1, 0])
    table = [
        # (column stats, recording and env_index of each episode, cache)
        (stats((0, 4, 4 * mib)), rec[:3], env[:3], 4 * mib if 4 * mib > EXPORT_CACHE_BYTES else EXPORT_CACHE_BYTES),
        (stats((0, 1, 24 * mib), (0, 2, 6 * mib)), rec[:3], env[:3], 2 * 2 * 27 * mib),
        (stats((0, 1, 24 * mib), (1, 1, 8 * mib)), rec, env, 2 * (2 * 24 + 8) * mib),
        (stats((0, 0, 0)), rec[:3], env[:3], EXPORT_CACHE_BYTES),
        (stats((0, 1, 1 << 40)), rec[:3], env[:3], PASS_CACHE_MAX_BYTES),
        ([], np.zeros(0, np.int64), np.zeros(0, np.int64), EXPORT_CACHE_BYTES),
    ]
    for column_stats, recording, env_index, want in table:
        assert pass_cache_bytes(column_stats, recording, env_index) == want, column_stats


def test_a_path_opens_with_the_pass_cache(multi_shard: Path) -> None:
    with trajcore.open(multi_shard) as ds:
        summary = ds._summary()
        want = pass_cache_bytes(ds._core.column_stats(), summary["recording"], summary["env_index"])
    with open_for_pass(str(multi_shard)) as ds:
        assert ds._core.cache_bytes == want


def _cli(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-m", "trajcore", *args], check=True, capture_output=True, env=env)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("name", ["vector", "multi_shard"])
def test_the_cli_export_of_a_path_is_the_api_export(
    recorded: Callable[[str], Path], multi_shard: Path, tmp_path: Path, fmt: str, name: str
) -> None:
    if fmt == "parquet":
        pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is optional: Parquet export needs it")
    path = multi_shard if name == "multi_shard" else recorded(name)
    cli, api = tmp_path / f"cli.{fmt}", tmp_path / f"api.{fmt}"
    _cli("export", str(path), str(cli))
    with trajcore.open(path) as ds:
        trajcore.export(ds, api)
    if fmt == "parquet":
        assert pq.read_table(cli).equals(pq.read_table(api))
    else:
        assert cli.read_bytes() == api.read_bytes()


def test_a_damaged_episode_fails_the_export_instead_of_being_redrawn(multi_shard: Path, tmp_path: Path) -> None:
    """Without `strict`, a training read redraws the steps of a damaged episode from intact
    ones; a table must not hold them: the export raises, as reading that episode alone does."""
    import shutil

    copy = tmp_path / "ds"
    shutil.copytree(multi_shard, copy)
    shard = sorted(copy.iterdir())[1]
    data = bytearray(shard.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    shard.write_bytes(bytes(data))
    with trajcore.open(copy) as ds, pytest.warns(TrajcoreWarning), pytest.raises(CorruptFileError):
        trajcore.export(ds, tmp_path / "out.csv")
