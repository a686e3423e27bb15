"""Exports stream: rows come in batches of a fixed size that split episodes where needed, and
the memory an export takes does not grow with the dataset."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from trajcore.formats._columns import choose
from trajcore.formats._read import iter_batches, plan_of


def test_batches_have_the_asked_size_and_the_rows_in_order(recorded: Callable[[str], Path]) -> None:
    with trajcore.open(recorded("vector")) as ds:
        plan = plan_of(ds)
        leaves, _ = choose(plan.leaves, None, 1 << 30)
        reported: list[int] = []
        batches = list(iter_batches(ds, range(ds.num_episodes), plan, leaves, 7, reported.append))
        assert [len(b) for b in batches[:-1]] == [7] * (len(batches) - 1)
        assert 0 < len(batches[-1]) <= 7
        assert reported == [len(b) for b in batches]
        episode = np.concatenate([b.episode for b in batches])
        step = np.concatenate([b.step for b in batches])
        obs = np.concatenate([b.values["obs"] for b in batches])
        even = np.concatenate([b.masks["info/even"] for b in batches])
        lengths = [ep.length for ep in ds.episodes]
        np.testing.assert_array_equal(episode, np.repeat(np.arange(len(lengths)), lengths))
        np.testing.assert_array_equal(step, np.concatenate([np.arange(n) for n in lengths]))
        np.testing.assert_array_equal(obs, np.concatenate([ep.observations[:-1] for ep in ds.episodes]))
        np.testing.assert_array_equal(even, np.concatenate([ep.infos["_even"][1:] for ep in ds.episodes]))


def record_cartpole(path: Path, vector_steps: int) -> None:
    envs = trajcore.RecordVectorEpisodes(gym.make_vec("CartPole-v1", num_envs=8, vectorization_mode="sync"), path)
    envs.action_space.seed(0)
    envs.reset(seed=0)
    for _ in range(vector_steps):
        envs.step(envs.action_space.sample())
    envs.close()


def peak_bytes(src: Path, out: Path, fmt: str) -> int:
    tracemalloc.start()
    try:
        trajcore.export(src, out, fmt, batch_rows=1024 if fmt in ("csv", "parquet") else None)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_memory_does_not_grow_with_the_dataset(fmt: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    if fmt == "parquet":
        pytest.importorskip("pyarrow", reason="pyarrow is optional: Parquet export needs it")
    base = tmp_path_factory.getbasetemp() / "streaming"
    small, large = base / "small", base / "large"
    if not large.exists():
        record_cartpole(small, 1_000)  # 8k env steps
        record_cartpole(large, 4_000)  # 32k env steps
    a = peak_bytes(small, base / f"small.{fmt}", fmt)
    b = peak_bytes(large, base / f"large.{fmt}", fmt)
    assert b < 1.25 * a + (1 << 20), f"{fmt}: peak {a / 2**20:.1f} MiB for 8k steps, {b / 2**20:.1f} MiB for 32k"
