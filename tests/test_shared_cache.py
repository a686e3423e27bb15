"""The decoded-chunk cache shared by the processes reading a dataset: data-loader workers,
forked and spawned, read the same values as one process, decode each chunk once between them,
and a worker killed while reading leaves the store usable (no read waits forever)."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import time
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from gymnasium.wrappers import FrameStackObservation

torch = pytest.importorskip("torch", reason="torch is not installed (trajcore.torch is optional)")
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler  # noqa: E402
from torch.utils.data import Dataset as TorchDataset  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork and memfd: POSIX")


class MovingDot(gym.Env[np.ndarray, np.int64]):
    """16x16 uint8 frames of a dot moving along a path that depends on the episode."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}  # type: ignore[misc]

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 255, (16, 16), np.uint8)
        self.action_space = spaces.Discrete(4)
        self.t, self.phase = 0, 0

    def _frame(self) -> np.ndarray:
        frame = np.full((16, 16), 30, np.uint8)
        frame[(self.t + self.phase) % 16, (3 * self.t + self.phase) % 16] = 220
        return frame

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.t, self.phase = 0, int(self.np_random.integers(16))
        return self._frame(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self._frame(), float(action), False, self.t >= 40, {}


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 2,000 frame-stack transitions in small chunks (dozens of them)."""
    path = tmp_path_factory.mktemp("shared") / "d"
    rec = trajcore.RecordEpisodes(FrameStackObservation(MovingDot(), 4), path, chunk_bytes=2048)
    rec.reset(seed=0)
    for _ in range(2000):
        _, _, term, trunc, _ = rec.step(rec.action_space.sample())
        if term or trunc:
            rec.reset()
    rec.close()
    return path


def expected(path: Path) -> dict[str, np.ndarray]:
    """Every transition read by one process without any cache."""
    with trajcore.open(path, cache_bytes=0) as ds:
        assert ds.cache_info["shared_bytes"] == 0
        return dict(ds.transitions.gather(np.arange(ds.num_steps)))


class Probe(TorchDataset[tuple[Any, ...]]):
    """Batches of transitions, each with the reading process's pid and decode count."""

    def __init__(self, ds: trajcore.Dataset) -> None:
        self.ds = ds

    def __len__(self) -> int:
        return int(self.ds.num_steps)

    def __getitem__(self, index: list[int]) -> tuple[Any, ...]:
        idx = np.asarray(index, dtype=np.int64)
        batch = self.ds.transitions.gather(idx)
        info = self.ds.cache_info
        return idx, batch["observations"], batch["next_observations"], os.getpid(), info["decodes"]


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_share_one_decoded_copy(stacks: Path, context: str) -> None:
    want = expected(stacks)
    with trajcore.open(stacks) as single:
        single.transitions.gather(np.arange(single.num_steps))
        chunks = single.cache_info["decodes"]  # one process reading everything once
    assert chunks > 20
    with trajcore.open(stacks) as ds:
        assert ds.cache_info["shared_bytes"] > 0
        sampler = BatchSampler(SequentialSampler(range(ds.num_steps)), 64, drop_last=False)
        loader: DataLoader[Any] = DataLoader(
            Probe(ds), batch_size=None, sampler=sampler, num_workers=2, multiprocessing_context=context
        )
        decodes: dict[int, int] = {}
        seen = 0
        for idx, obs, next_obs, pid, count in loader:
            idx = np.asarray(idx)
            assert np.array_equal(np.asarray(obs), want["observations"][idx])
            assert np.array_equal(np.asarray(next_obs), want["next_observations"][idx])
            decodes[int(pid)] = max(decodes.get(int(pid), 0), int(count))
            seen += len(idx)
        assert seen == ds.num_steps and len(decodes) == 2
        # Each chunk decoded once between the workers, not once per worker.
        assert sum(decodes.values()) == chunks, decodes
        # The parent shares the store too: everything is there already.
        got = ds.transitions.gather(np.arange(ds.num_steps))
        assert ds.cache_info["decodes"] == 0
        for key in ("observations", "next_observations", "actions", "rewards"):
            assert np.array_equal(got[key], want[key]), key


def _read_forever(ds: trajcore.Dataset, seed: int, reading: Any) -> None:
    """Gathers forever; sets `reading` after its first `1 + seed` batches (the parent kills it
    then, somewhere in the batches that follow, maybe mid-write of a slot)."""
    rng = np.random.default_rng(seed)
    for _ in range(1 + seed):
        ds.transitions.gather(rng.integers(0, ds.num_steps, 64))
    reading.set()
    while True:
        ds.transitions.gather(rng.integers(0, ds.num_steps, 64))


def test_a_killed_reader_leaves_the_store_usable(stacks: Path) -> None:
    want = expected(stacks)
    fork = multiprocessing.get_context("fork")
    for seed in range(3):
        with trajcore.open(stacks) as ds:
            reading = fork.Event()
            child = fork.Process(target=_read_forever, args=(ds, seed, reading))
            child.start()
            assert reading.wait(timeout=120), "the child reads"
            assert child.pid is not None
            os.kill(child.pid, signal.SIGKILL)
            child.join()
            start = time.monotonic()
            got = ds.transitions.gather(np.arange(ds.num_steps))
            # A slot the child held is taken back at once (its pid is gone): no bounded wait.
            assert time.monotonic() - start < 30
            assert np.array_equal(got["observations"], want["observations"])
            assert np.array_equal(got["next_observations"], want["next_observations"])


def test_plain_pickle_reopens_and_an_explicit_bound_keeps_a_private_cache(stacks: Path) -> None:
    want = expected(stacks)
    with trajcore.open(stacks) as ds:
        copy = pickle.loads(pickle.dumps(ds))
        assert copy.cache_info["shared_bytes"] == ds.cache_info["shared_bytes"] > 0
        copy.transitions.gather(np.arange(copy.num_steps))
        assert ds.cache_info["decodes"] == 0 and copy.cache_info["decodes"] > 0, "its own store"
        copy.close()
    with trajcore.open(stacks, cache_bytes=64 << 10) as small:
        assert small.cache_info == {"lru_bytes": 64 << 10, "shared_bytes": 0, "decodes": 0}
        got = small.transitions.gather(np.arange(small.num_steps))
        assert np.array_equal(got["observations"], want["observations"])
