"""Training reads of frame stacks at a scale far beyond a fixed cache: trajcore against a bare
numpy memmap of the same transitions (what a user would write themselves, D4RL's layout:
observations and next observations stored as stacks, actions, rewards).

The dataset: `TRAJCORE_SCALE_STEPS` transitions (default 160,000) of `workloads.PixelEnv`
(moving shapes on 84x84 uint8 frames, (4, 84, 84) stacks), 8 sub-envs, recorded with trajcore's
defaults; its decoded frames (~7 KB a step) are over 1 GiB, 4x the old fixed 256 MiB cache.
Reported in one run, each against the memmap:

- random 256-transition batches over the first pass (cold: a fresh open, an empty trajcore
  cache, and the OS page cache dropped first where this process may, root on Linux; the report
  says whether it was), one epoch of all transitions in random order, and warm (after a pass);
- a `DataLoader` with 0 and 2 workers (fork; `TRAJCORE_SCALE_WORKERS`), batches of 256 through
  a `BatchSampler`;
- the PSS (proportional set size: shared pages counted once in all) of the workers;
- bytes per step on disk (EnvLogger's only where `envlogger` is installed).

Run by hand at full size:
`python -m pytest benches/test_read_scale.py -p no:cacheprovider --benchmark-only -s`;
`TRAJCORE_SCALE_STEPS=8000` runs it small; `TRAJCORE_SCALE_WORKERS=0,8,15` sets the loaders'
worker counts (default 0,2). For a memmap larger than memory (480,000 steps make
26 GB), set `TRAJCORE_SCALE_COLD_BATCHES=200`: the memmap's first pass reads from disk.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from workloads import dir_bytes, pixel_vector

STEPS = int(os.environ.get("TRAJCORE_SCALE_STEPS", "160000"))
# Batches of the first pass measured (default: a whole epoch). A memmap larger than memory reads
# every row from disk, so an epoch of it takes long: cap it for that size.
COLD_BATCHES = int(os.environ.get("TRAJCORE_SCALE_COLD_BATCHES", "0")) or None
# The DataLoader worker counts measured (0: in the main process); the 16-core machine runs 8 and 15.
WORKERS = tuple(int(w) for w in os.environ.get("TRAJCORE_SCALE_WORKERS", "0,2").split(","))
NUM_ENVS = 8
BATCH = 256
KEYS = ("observations", "next_observations", "actions", "rewards")


def _record(path: Path) -> None:
    rec = trajcore.RecordVectorEpisodes(pixel_vector(NUM_ENVS), path)
    rec.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 4, (STEPS // NUM_ENVS, NUM_ENVS))
    for a in actions:
        rec.step(a)
    rec.close()


class Memmap:
    """The same transitions as one .npy memmap per key (D4RL's layout)."""

    def __init__(self, root: Path, ds: trajcore.Dataset) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        n, at = ds.num_steps, 0
        out: dict[str, np.memmap] = {}
        for block in ds.transitions.blocks(16_384, keys=list(KEYS)):
            for k in KEYS:
                v = np.asarray(block[k])
                if k not in out:
                    out[k] = np.lib.format.open_memmap(root / f"{k}.npy", "w+", v.dtype, (n, *v.shape[1:]))
                out[k][at : at + len(v)] = v
            at += len(block["actions"])
        for m in out.values():
            m.flush()
        self.open()

    def open(self) -> None:
        self.arrays = {k: np.load(self.root / f"{k}.npy", mmap_mode="r") for k in KEYS}

    def rows(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        return {k: a[idx] for k, a in self.arrays.items()}


class MemmapDataset:
    """A map-style torch dataset over the memmap, a batch per `BatchSampler` item."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.arrays: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return STEPS

    def __getitem__(self, index: list[int]) -> Any:
        import torch

        if self.arrays is None:
            self.arrays = {k: np.load(self.root / f"{k}.npy", mmap_mode="r") for k in KEYS}
        idx = np.asarray(index, dtype=np.int64)
        return {k: torch.from_numpy(a[idx]) for k, a in self.arrays.items()}


def _rate(read: Callable[[np.ndarray], Any], batches: list[np.ndarray], rows: int | None = None) -> float:
    """Transitions per second over `batches` (`rows` of them, default full batches)."""
    start = time.perf_counter()
    for idx in batches:
        read(idx)
    return (rows or len(batches) * BATCH) / (time.perf_counter() - start)


def _drop_page_cache() -> bool:
    """Writes dirty pages out and drops the OS page cache, where this process may (root on
    Linux); whether it did."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
    except OSError:
        return False
    return True


def _pss(pid: int) -> int:
    """Proportional set size of a process (bytes), RSS where smaps_rollup is unreadable."""
    for name, field in (("smaps_rollup", "Pss:"), ("status", "VmRSS:")):
        try:
            with open(f"/proc/{pid}/{name}") as f:
                for line in f:
                    if line.startswith(field):
                        return int(line.split()[1]) * 1024
        except OSError:
            continue
    return 0


def _loader_rate(make: Callable[[int], Any], workers: int, batches: int) -> tuple[float, int]:
    """Batches per second of a DataLoader with `workers` (after a few to start them), and the
    summed PSS of its workers at the end."""
    loader = make(workers)
    it: Iterator[Any] = iter(loader)
    for _ in range(8):
        next(it)
    start = time.perf_counter()
    for _ in range(batches):
        next(it)
    rate = batches / (time.perf_counter() - start)
    pss = sum(_pss(w.pid) for w in getattr(it, "_workers", []))
    del it
    return rate, pss


@pytest.mark.benchmark(group="read scale")
def test_read_scale(benchmark: Any, report: list[dict[str, Any]], tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler
    from trajcore.torch import TransitionDataset, loader

    path = tmp_path / "tc"
    started = time.perf_counter()
    _record(path)
    record_s = time.perf_counter() - started
    with trajcore.open(path) as ds:
        n = ds.num_steps
        mm = Memmap(tmp_path / "mm", ds)
    memmap_s = time.perf_counter() - started - record_s
    print(f"\nread scale: recorded in {record_s:.0f} s, memmap written in {memmap_s:.0f} s", flush=True)
    rng = np.random.default_rng(1)
    rounds = max(2, min(40, n // (BATCH * 4)))

    def draw() -> list[np.ndarray]:
        return [rng.integers(0, n, BATCH) for _ in range(rounds)]

    # Cold: the first pass (one epoch in random order) after a fresh open, the page cache dropped.
    epoch = list(np.array_split(rng.permutation(n), max(1, n // BATCH)))[:COLD_BATCHES]
    dropped = _drop_page_cache()
    ds = trajcore.open(path)
    cold_tc = _rate(lambda i: ds.transitions.gather(i, keys=list(KEYS)), epoch, sum(map(len, epoch)))
    _drop_page_cache()
    mm.open()
    cold_mm = _rate(mm.rows, epoch, sum(map(len, epoch)))
    print(f"read scale: first pass {cold_tc:,.0f} against {cold_mm:,.0f} transitions/s", flush=True)
    if COLD_BATCHES:  # the pass was cut short: finish it, in file order, before the warm figures
        for a in range(0, n, 4096):
            rows = np.arange(a, min(a + 4096, n))
            ds.transitions.gather(rows, keys=list(KEYS))
            mm.rows(rows)
    first = draw()
    got, want = ds.transitions.gather(first[0], keys=list(KEYS)), mm.rows(first[0])
    assert all(np.array_equal(got[k], want[k]) for k in KEYS)
    warm_tc, warm_mm = [], []
    for _ in range(5):
        b = draw()
        warm_tc.append(_rate(lambda i: ds.transitions.gather(i, keys=list(KEYS)), b))
        warm_mm.append(_rate(mm.rows, b))
    info = ds.cache_info

    loader_batches = min(300, n // BATCH - 8)  # after 8 to start the workers, within one epoch

    def gen() -> Any:
        return torch.Generator().manual_seed(0)

    def tc_loader(workers: int) -> Any:
        ctx = "fork" if workers else None
        data = TransitionDataset(ds, keys=list(KEYS))
        return loader(data, BATCH, generator=gen(), num_workers=workers, multiprocessing_context=ctx)

    def mm_loader(workers: int) -> Any:
        ctx = "fork" if workers else None
        sampler = BatchSampler(RandomSampler(range(n), generator=gen()), BATCH, drop_last=False)
        data: Any = MemmapDataset(mm.root)
        return DataLoader(data, batch_size=None, sampler=sampler, num_workers=workers, multiprocessing_context=ctx)

    loaders = {}
    for workers in WORKERS:
        tc_rate, tc_pss = _loader_rate(tc_loader, workers, loader_batches)
        mm_rate, mm_pss = _loader_rate(mm_loader, workers, loader_batches)
        loaders[workers] = (tc_rate, mm_rate, tc_pss, mm_pss)
    benchmark.pedantic(lambda: ds.transitions.gather(first[0], keys=list(KEYS)), rounds=1, iterations=1)

    frames_bytes = n * 84 * 84
    row: dict[str, Any] = {
        "group": "read scale",
        "name": f"trajcore vs memmap, {n:,} Atari-like stacks",
        "decoded_frames_GiB": frames_bytes / 2**30,
        "cache_lru_bytes": info["lru_bytes"],
        "cache_shared_bytes": info["shared_bytes"],
        "page_cache_dropped": dropped,
        "random_cold_ratio": cold_tc / cold_mm,
        "random_cold_tc_per_s": cold_tc,
        "random_cold_mm_per_s": cold_mm,
        "random_warm_ratio": float(np.median(warm_tc) / np.median(warm_mm)),
        "random_warm_tc_per_s": float(np.median(warm_tc)),
        "random_warm_mm_per_s": float(np.median(warm_mm)),
        "bytes_per_step": dir_bytes(path) / n,
        "memmap_bytes_per_step": dir_bytes(mm.root) / n,
    }
    for w, (tc_rate, mm_rate, tc_pss, mm_pss) in loaders.items():
        row[f"loader{w}_ratio"] = tc_rate / mm_rate
        row[f"loader{w}_tc_batches_per_s"] = tc_rate
        row[f"loader{w}_mm_batches_per_s"] = mm_rate
        if w:
            row[f"loader{w}_tc_workers_pss_MiB"] = tc_pss / 2**20
            row[f"loader{w}_mm_workers_pss_MiB"] = mm_pss / 2**20
    benchmark.extra_info.update(row)
    report.append(row)
    ds.close()
