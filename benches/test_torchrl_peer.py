"""Issue 34, point 7: trajcore against TorchRL on TorchRL's own replay-buffer benchmark.

TorchRL's `benchmarks/test_replaybuffer_benchmark.py::test_rb_sample` (pytorch/rl) samples
batches of 256 from a `TensorDictReplayBuffer(storage=LazyMemmapStorage(size),
sampler=RandomSampler())` whose rows are ``{"a": 5 float32, ("b", "c"): 3x32x32 uint8}``, all
zeros, size 10,000; their published figure is about 3,470 batches/s (pytorch/rl PR #3705). The
same buffer here, beside trajcore holding the same rows (recorded with `trajcore.Writer`, its
defaults; a batch is ``ds.sample_transitions(256, keys=["observations"])``: the same two arrays),
on three workloads:

- **their benchmark**: 10,000 rows of zeros, exactly theirs;
- **their shapes at scale**: `TRAJCORE_TORCHRL_ROWS` rows (default 1,000,000: a 3.1 GB memmap),
  of images instead of zeros (32x32 RGB scaled from `workloads.PixelEnv`'s moving shapes; "a"
  smooth floats), which no codec shrinks to nothing;
- **Atari stacks**: `TRAJCORE_TORCHRL_STACKS` transitions (default 100,000) of (4, 84, 84)
  uint8 stacks of `workloads.PixelEnv`, 8 sub-envs recorded by `RecordVectorEpisodes`; TorchRL
  holds them as its collectors write transitions (observation, ``("next", "observation")``,
  action, reward, terminated, truncated: a 5.6 GB memmap), and trajcore's batch is its default
  transition (the same arrays).

Per workload, in one run: bytes on disk of each; the sample rate warm (both systems in turn, 5
rounds, the median); and the first pass (`COLD_BATCHES` batches after each side's files are
dropped from the OS page cache: closed, `fsync`, `posix_fadvise(DONTNEED)`, then opened afresh,
so trajcore's decoded-chunk cache starts empty too; `fincore` says how much stayed resident).
TorchRL runs with `torch.set_num_threads(1)`, its faster setting here; trajcore with its
defaults. The report says whether each memmap fits the page cache (the machine's memory): where it does, the
warm figure is what a training run sees after its first pass.

    python -m pytest benches/test_torchrl_peer.py -p no:cacheprovider --benchmark-only -s

`TRAJCORE_TORCHRL_ROWS=20000 TRAJCORE_TORCHRL_STACKS=8000` runs it small. TorchRL (and
tensordict) come with the test extra (``pip install ".[test]"``).
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from timing import interleaved
from workloads import PixelEnv, dir_bytes, pixel_vector

BATCH = 256
ROWS = int(os.environ.get("TRAJCORE_TORCHRL_ROWS", "1000000"))
STACKS = int(os.environ.get("TRAJCORE_TORCHRL_STACKS", "100000"))
COLD_BATCHES = 100
EPISODE = 1_000  # rows per Writer episode (the shapes workloads have no episodes of their own)
BLOCK = 8_192  # rows per `extend` into TorchRL's storage


def _images(start: int, n: int) -> dict[str, np.ndarray]:
    """Rows `start` to `start + n` of the shapes workload: "a" smooth floats, "c" 32x32 RGB frames
    (three consecutive frames of the moving shapes as the channels)."""
    frames = PixelEnv.stacks()[:, -1]  # (PERIOD, 84, 84)
    small = frames[:, np.linspace(0, 83, 32).astype(int)][:, :, np.linspace(0, 83, 32).astype(int)]
    i = np.arange(start, start + n)
    rgb = np.stack([small[(i + k) % len(small)] for k in range(3)], axis=1)
    a = np.sin(i[:, None] / 50.0 + np.arange(5)[None, :]).astype(np.float32)
    return {"a": a, "c": rgb}


def _zeros(start: int, n: int) -> dict[str, np.ndarray]:
    return {"a": np.zeros((n, 5), np.float32), "c": np.zeros((n, 3, 32, 32), np.uint8)}


def _record_rows(path: Path, rows: int, make: Callable[[int, int], dict[str, np.ndarray]]) -> None:
    """The rows as observations of episodes of `EPISODE` steps (each episode's last observation is
    the next episode's first row, so every row is a step's observation)."""
    space = spaces.Dict(
        {"a": spaces.Box(-1, 1, (5,), np.float32), "b": spaces.Dict({"c": spaces.Box(0, 255, (3, 32, 32), np.uint8)})}
    )
    with trajcore.Writer(path, space, spaces.Discrete(2)) as w:
        for start in range(0, rows, EPISODE):
            t = min(EPISODE, rows - start)
            r = make(start, t + 1)
            w.add_episode(
                observations={"a": r["a"], "b": {"c": r["c"]}},
                actions=np.zeros(t, np.int64),
                rewards=np.zeros(t),
                terminations=np.zeros(t, bool),
                truncations=np.arange(t) == t - 1,
            )


def _record_stacks(path: Path, steps: int) -> None:
    num_envs = 8
    rec = trajcore.RecordVectorEpisodes(pixel_vector(num_envs), path)
    rec.reset(seed=0)
    for a in np.random.default_rng(0).integers(0, 4, (steps // num_envs, num_envs)):
        rec.step(a)
    rec.close()


def _stack_blocks(ds: trajcore.Dataset) -> Iterator[dict[str, Any]]:
    """The dataset's transitions as TorchRL's collectors write them, in blocks."""
    import torch

    for start in range(0, ds.num_steps, BLOCK):
        b = ds.transitions[start : min(start + BLOCK, ds.num_steps)]
        t = {k: torch.from_numpy(np.ascontiguousarray(b[k])) for k in
             ("observations", "actions", "rewards", "terminations", "truncations", "next_observations")}
        yield {
            "observation": t["observations"],
            "action": t["actions"],
            "reward": t["rewards"],
            "terminated": t["terminations"],
            "truncated": t["truncations"],
            ("next", "observation"): t["next_observations"],
        }


class TorchRL:
    """`TensorDictReplayBuffer(storage=LazyMemmapStorage(n), sampler=RandomSampler())`, as their
    benchmark makes it, filled in blocks; saved (`dumps`, in place) so it can be opened afresh
    over the same files (`loads` maps them: no copy)."""

    def __init__(self, root: Path, n: int, blocks: Iterator[dict[Any, Any]]) -> None:
        from tensordict import TensorDict

        self.root, self.n = root, n
        self.rb = self._make()
        for b in blocks:
            self.rb.extend(TensorDict(b, batch_size=[len(next(iter(b.values())))]))
        self.rb.dumps(root)

    def _make(self) -> Any:
        from torchrl.data import LazyMemmapStorage, TensorDictReplayBuffer
        from torchrl.data.replay_buffers import RandomSampler

        storage = LazyMemmapStorage(self.n, scratch_dir=str(self.root / "storage"))
        return TensorDictReplayBuffer(storage=storage, sampler=RandomSampler(), batch_size=BATCH)

    def sample(self, i: int) -> Any:
        return self.rb.sample()

    def close(self) -> None:
        self.rb = None

    def reopen(self) -> None:
        self.rb = self._make()
        self.rb.loads(self.root)


class Trajcore:
    def __init__(self, root: Path, keys: list[str] | None) -> None:
        self.root, self.keys = root, keys
        self.ds: trajcore.Dataset | None = trajcore.open(root)

    def sample(self, i: int) -> Any:
        assert self.ds is not None
        return self.ds.sample_transitions(BATCH, seed=i, keys=self.keys)

    def close(self) -> None:
        if self.ds is not None:
            self.ds.close()
        self.ds = None

    def reopen(self) -> None:
        self.ds = trajcore.open(self.root)


def _drop_from_page_cache(root: Path) -> int | None:
    """Drops `root`'s files from the OS page cache (a file no process maps); the bytes still
    resident afterwards, by `fincore` (None where it is missing)."""
    files = [f for f in root.rglob("*") if f.is_file()]
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    if shutil.which("fincore") is None:
        return None
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", *map(str, files)],
                         capture_output=True, text=True, check=True).stdout
    return sum(int(x) for x in out.split())


def _first_pass(side: Any, root: Path) -> tuple[float, int | None]:
    """Batches per second over the first `COLD_BATCHES` after the files left the page cache."""
    side.close()
    gc.collect()
    resident = _drop_from_page_cache(root)
    side.reopen()
    start = time.perf_counter()
    for i in range(COLD_BATCHES):
        side.sample(10_000_000 + i)
    return COLD_BATCHES / (time.perf_counter() - start), resident


def _mem_total() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))


def _compare(tmp: Path, workload: str) -> dict[str, Any]:
    import torch

    # TorchRL's gather is a torch indexing op: on this shared 2-core machine it runs 3x to 5x
    # faster on one thread than on torch's default two (threads waiting on each other).
    torch.set_num_threads(1)

    traj_root, torchrl_root = tmp / "trajcore", tmp / "torchrl"
    if workload == "stacks":
        n = STACKS
        _record_stacks(traj_root, n)
        with trajcore.open(traj_root) as ds:
            n = ds.num_steps
            peer = TorchRL(torchrl_root, n, _stack_blocks(ds))
        keys = None
    else:
        n = 10_000 if workload == "their benchmark" else ROWS
        make = _zeros if workload == "their benchmark" else _images
        _record_rows(traj_root, n, make)
        blocks = (
            {"a": torch.from_numpy(r["a"]), ("b", "c"): torch.from_numpy(r["c"])}
            for r in (make(s, min(BLOCK, n - s)) for s in range(0, n, BLOCK))
        )
        peer = TorchRL(torchrl_root, n, blocks)
        keys = ["observations"]
    ours = Trajcore(traj_root, keys)
    try:
        # The same arrays in both batches.
        a, b = ours.sample(0), peer.sample(0)
        assert len(b) == BATCH and len(a["episode_index"]) == BATCH
        warm = interleaved({"trajcore": ours.sample, "TorchRL": peer.sample}, seconds=20.0, rounds=5)
        rate = {k: 1 / statistics.median(v) for k, v in warm.items()}
        cold_peer, peer_resident = _first_pass(peer, torchrl_root)
        cold_ours, ours_resident = _first_pass(ours, traj_root)
    finally:
        ours.close()
    peer_bytes, our_bytes = dir_bytes(torchrl_root), dir_bytes(traj_root)
    row = {
        "rows": n,
        "TorchRL_MB": peer_bytes / 1e6,
        "trajcore_MB": our_bytes / 1e6,
        "bytes_ratio": our_bytes / peer_bytes,
        "memmap_fits_page_cache": peer_bytes < _mem_total(),
        "TorchRL_batches_per_s": rate["TorchRL"],
        "trajcore_batches_per_s": rate["trajcore"],
        "warm_ratio": rate["trajcore"] / rate["TorchRL"],
        "warm_ratio_spread": f"{min(warm['TorchRL']) / max(warm['trajcore']):.2f}.."
        f"{max(warm['TorchRL']) / min(warm['trajcore']):.2f}",
        "first_pass_TorchRL": cold_peer,
        "first_pass_trajcore": cold_ours,
        "first_pass_ratio": cold_ours / cold_peer,
        "resident_MB_after_drop": "unknown" if peer_resident is None or ours_resident is None
        else f"{peer_resident / 1e6:.0f} / {ours_resident / 1e6:.0f}",
    }
    shutil.rmtree(tmp, ignore_errors=True)
    return row


@pytest.mark.parametrize("workload", ["their benchmark", "their shapes at scale", "stacks"])
def test_against_torchrl_memmap(benchmark: Any, report: list[dict[str, Any]], tmp_path: Path, workload: str) -> None:
    r = benchmark.pedantic(_compare, args=(tmp_path / "w", workload), rounds=1, iterations=1)
    name = {"their benchmark": "TorchRL's benchmark: 10,000 rows of zeros, 5 float32 + 3x32x32 uint8",
            "their shapes at scale": f"their shapes, {ROWS:,} rows of images",
            "stacks": f"(4, 84, 84) uint8 stacks, {STACKS:,} transitions"}[workload]
    row = {"group": "replay buffer vs TorchRL", "name": name, **r}
    benchmark.extra_info.update(row)
    report.append(row)
