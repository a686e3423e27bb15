"""The training feed: a DQN-sized conv net (Nature DQN: 3 conv + 2 linear layers, a TD step on
observations and next observations) trained from random 256-transition batches of (4, 84, 84)
frame stacks, fed three ways, steps/s of each and their ratios to the first, measured
interleaved in one run:

(a) batches already on the device: the transitions' stacks held there as tensors, a batch
    drawn by index (the ceiling: no feeding at all);
(b) trajcore's DataLoader path, `trajcore.torch.loader` over a `TransitionDataset` (workers,
    pinned memory and non_blocking copies on CUDA);
(c) `trajcore.torch.DeviceTransitions`: the frames once and frame ids on the device, a batch
    gathered there.

    TRAJCORE_BENCH_DEVICE=cuda python -m pytest benches/test_device_feed.py -p no:cacheprovider --benchmark-only -s

Environment: TRAJCORE_BENCH_DEVICE (default cuda if available, else cpu),
TRAJCORE_BENCH_FEED_STEPS (vector steps of 8 sub-envs recorded, default 2,000 on CPU and
20,000 on CUDA), TRAJCORE_BENCH_FEED_WORKERS (loader workers, default min(8, cores - 1)).
On a CPU the net's own step dominates every side, so the ratios there say little about a GPU.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from workloads import pixel_vector

torch = pytest.importorskip("torch", reason="the training feed needs torch")
from torch import nn  # noqa: E402
from trajcore.torch import DeviceTransitions, TransitionDataset, loader  # noqa: E402

BATCH = 256
KEYS = ["observations", "actions", "rewards", "next_observations", "terminations"]


def _device() -> torch.device:
    return torch.device(os.environ.get("TRAJCORE_BENCH_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))


def _nature_dqn(actions: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(4, 32, 8, stride=4),
        nn.ReLU(),
        nn.Conv2d(32, 64, 4, stride=2),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(3136, 512),
        nn.ReLU(),
        nn.Linear(512, actions),
    )


class Trainer:
    """One DQN step per batch (the target is the net itself: the feed is what is measured)."""

    def __init__(self, device: torch.device) -> None:
        torch.manual_seed(0)
        self.net = _nature_dqn(4).to(device)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-4)

    def step(self, b: dict[str, Any]) -> None:
        q = self.net(b["observations"].float() / 255.0).gather(1, b["actions"].long()[:, None])[:, 0]
        with torch.no_grad():
            best = self.net(b["next_observations"].float() / 255.0).max(1).values
            target = b["rewards"].float() + 0.99 * (~b["terminations"]).float() * best
        loss = nn.functional.smooth_l1_loss(q, target)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


def _record(path: Path, steps: int) -> trajcore.Dataset:
    rec = trajcore.RecordVectorEpisodes(pixel_vector(8), path)
    rec.action_space.seed(0)
    rec.reset(seed=0)
    for _ in range(steps):
        rec.step(rec.action_space.sample())
    rec.close()
    return trajcore.open(path)


class OnDevice:
    """(a): every transition's stacks as device tensors, a batch by index."""

    def __init__(self, ds: trajcore.Dataset, device: torch.device) -> None:
        self.device = device
        whole = ds.transitions.gather(np.arange(ds.num_steps), keys=KEYS)
        self.data = {k: torch.from_numpy(np.ascontiguousarray(v)).to(device) for k, v in whole.items() if k in KEYS}
        self.n = ds.num_steps

    def next(self) -> dict[str, Any]:
        idx = torch.randint(0, self.n, (BATCH,), device=self.device)
        return {k: v.index_select(0, idx) for k, v in self.data.items()}


class Loader:
    """(b): `trajcore.torch.loader`, batches copied to the device as they come."""

    def __init__(self, ds: trajcore.Dataset, device: torch.device, workers: int) -> None:
        cuda = device.type == "cuda"
        extra: dict[str, Any] = {"persistent_workers": True, "prefetch_factor": 4} if workers else {}
        self.loader = loader(
            TransitionDataset(ds, keys=KEYS), BATCH, num_workers=workers, pin_memory=cuda, drop_last=True, **extra
        )
        self.device, self.non_blocking = device, cuda
        self.it = iter(self.loader)

    def next(self) -> dict[str, Any]:
        try:
            b = next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            b = next(self.it)
        return {k: b[k].to(self.device, non_blocking=self.non_blocking) for k in KEYS}


class Held:
    """(c): `DeviceTransitions`."""

    def __init__(self, ds: trajcore.Dataset, device: torch.device) -> None:
        self.held = DeviceTransitions(ds, device, keys=KEYS)

    def next(self) -> dict[str, Any]:
        return self.held.sample(BATCH)


def _steps_per_s(feed: Any, trainer: Trainer, device: torch.device, steps: int) -> float:
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        trainer.step(feed.next())
    sync()
    return steps / (time.perf_counter() - start)


def test_device_feed(benchmark: Any, report: list[dict[str, Any]], tmp_path: Path) -> None:
    device = _device()
    cuda = device.type == "cuda"
    vector_steps = int(os.environ.get("TRAJCORE_BENCH_FEED_STEPS") or (20_000 if cuda else 2_000))
    workers = int(os.environ.get("TRAJCORE_BENCH_FEED_WORKERS") or min(8, max(0, (os.cpu_count() or 1) - 1)))
    ds = _record(tmp_path / "d", vector_steps)
    feeds = {
        "(a) batches on the device": OnDevice(ds, device),
        "(b) trajcore.torch.loader": Loader(ds, device, workers),
        "(c) DeviceTransitions": Held(ds, device),
    }
    held_bytes = feeds["(c) DeviceTransitions"].held.nbytes  # type: ignore[attr-defined]
    trainer = Trainer(device)
    steps = 200 if cuda else 10
    for feed in feeds.values():  # warm: cuDNN's choices, the loader's workers, first chunks
        _steps_per_s(feed, trainer, device, max(2, steps // 10))

    def measure() -> dict[str, list[float]]:
        out: dict[str, list[float]] = {name: [] for name in feeds}
        for _ in range(3):  # rounds interleaved: a slow moment hits every side alike
            for name, feed in feeds.items():
                out[name].append(_steps_per_s(feed, trainer, device, steps))
        return out

    rates = benchmark.pedantic(measure, rounds=1, iterations=1)
    best = {name: max(r) for name, r in rates.items()}
    base = best["(a) batches on the device"]
    stack_bytes = 2 * ds.num_steps * 4 * 84 * 84
    rows = [
        {
            "group": "device feed",
            "name": name,
            "device": str(device),
            "transitions": ds.num_steps,
            "workers": workers if name.startswith("(b)") else 0,
            "steps_per_s": best[name],
            "ratio_to_a": best[name] / base,
            **({"held_bytes": held_bytes, "stacks_bytes": stack_bytes} if name.startswith("(c)") else {}),
        }
        for name in feeds
    ]
    benchmark.extra_info.update({r["name"]: {k: v for k, v in r.items() if k != "group"} for r in rows})
    report.extend(rows)
    for r in rows:
        print(r)
