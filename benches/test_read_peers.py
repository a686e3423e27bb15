"""(h) Reading pixels and scanning columns against the peers (issue 14), in one run.

Workloads, each recorded by trajcore with its defaults (`RecordVectorEpisodes`, zstd 3):

- **atari**: ALE Breakout, `AtariPreprocessing` + `FrameStackObservation(4)`, 8 sub-envs, 2,000
  vector steps of seeded random actions (~16k transitions), captured once into
  `workloads.cache_dir()` and replayed (`workloads.StreamVectorEnv`);
- **pixels**: the synthetic moving-object frames of `workloads.PixelEnv`, 8 sub-envs, 2,000 steps;
- **cartpole**: 16 CartPole sub-envs, 1M env steps, for the full scan against h5py;
- **atari live**: the same Atari steps recorded from the live env (7 ms a vector step instead of
  microseconds): what the recording's pace does to the file size.

The peers hold the same transitions, read back from trajcore's dataset: TorchRL's
`LazyMemmapStorage` in a `TensorDictReplayBuffer` (uncompressed memory-mapped files, transitions
with ``("next", "observation")`` as its collectors write them), h5py (one uncompressed file of
D4RL's layout: observations, next_observations, actions, rewards, terminations, truncations),
numpy arrays of that layout in RAM (the memory-speed ceiling) and, for bytes per step only,
EnvLogger 1.2 (one logger per sub-env, fed each sub-env's episodes). A peer that does not import
is skipped with the reason.

What is measured, through each system's public API, every system in turn in each round:

- random batch: 256 transitions (observations, actions, rewards, next observations, flags) drawn
  uniformly: `Dataset.sample_transitions(256)`; `rb.sample()`; h5py reads 256 distinct sorted
  indices (it needs them increasing); numpy fancy indexing;
- full scan: every transition in order, in blocks of 1,024 (CartPole: the whole range in one call):
  `ds.transitions[a:b]`; ``rb[a:b].clone()`` (`rb[a:b]` alone is a lazy view of the map);
  ``dataset[a:b]`` per h5py dataset; numpy ``a[a:b].copy()``. CartPole also scans trajcore in
  the file's order, ``ds.transitions.blocks(n, order="file")`` (one block): the same
  transitions, each once, grouped by sub-env (each sub-env's episodes in the order recorded),
  with ``episode_index`` and ``step_index``; the peers' rows (and ``transitions[a:b]``) are in
  step order (the sub-envs' steps interleaved). That row is the target's ratio;
- random single step: one transition, each call timed alone (p50 and p90): `ds.transitions[i]`;
  ``rb[i].clone()``; ``dataset[i]``; ``a[i].copy()``;
- bytes per step: bytes on disk (numpy: in memory) over transitions stored.

Ratios are trajcore / peer, paired round by round: above 1 means trajcore is faster for rates,
below 1 means trajcore is faster (latency) or smaller (bytes).

    python -m pytest benches/test_read_peers.py -p no:cacheprovider --benchmark-only -s [--figures-json f.json]
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from baselines import envlogger_env, peer_missing
from timing import interleaved, interleaved_latencies
from workloads import (
    Stream,
    StreamVectorEnv,
    atari_missing,
    atari_stream,
    atari_vector,
    cartpole_vector,
    dir_bytes,
    lane_episodes,
    pixel_stream,
)

BATCH = 256
BLOCK = 1024  # transitions per scan call (pixel rows: 57 MB a block with next observations)
VECTOR_STEPS = 2_000  # x 8 sub-envs
CARTPOLE_STEPS = 1_000_000 // 16  # x 16 sub-envs
KEYS = ("observations", "actions", "rewards", "next_observations", "terminations", "truncations")
_STREAMS: dict[str, Stream] = {}  # the Atari stream, shared by the replayed and the live run


def _missing(name: str) -> str | None:
    """Why peer `name` cannot run here (a reason for the table), or None."""
    try:
        if name == "torchrl":
            import tensordict  # noqa: F401
            import torch  # noqa: F401
            import torchrl  # noqa: F401
        elif name == "h5py":
            import h5py  # noqa: F401
        elif name == "envlogger":
            return peer_missing("envlogger")
    except Exception as e:
        return f"{name} does not import ({type(e).__name__}: {e}); to measure it: pip install {name}"
    return None


def _blocks(ds: trajcore.Dataset, block: int = 16 * BLOCK) -> Iterator[dict[str, np.ndarray]]:
    """Every transition of `ds` in order, as numpy arrays of the peers' keys."""
    for start in range(0, ds.num_steps, block):
        batch = ds.transitions[start : min(start + block, ds.num_steps)]
        yield {k: np.asarray(batch[k]) for k in KEYS}


class Trajcore:
    """The dataset through its public reading API."""

    name = "trajcore"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ds = trajcore.open(path)
        self.n = self.ds.num_steps

    def batch(self, i: int) -> Any:
        return self.ds.sample_transitions(BATCH, seed=i)

    def rows(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        return {k: np.asarray(v) for k, v in self.ds.transitions[idx].items() if k in KEYS}

    def scan(self, block: int) -> None:
        for start in range(0, self.n, block):
            self.ds.transitions[start : min(start + block, self.n)]

    def step(self, i: int) -> Any:
        return self.ds.transitions[i]

    def nbytes(self) -> int:
        return dir_bytes(self.path)

    def close(self) -> None:
        self.ds.close()


class TrajcoreFileOrder(Trajcore):
    """The same dataset scanned in the file's order (`blocks(order="file")`): every transition
    once, grouped by sub-env instead of interleaved in step order."""

    name = "trajcore, file order"

    def scan(self, block: int) -> None:
        for _ in self.ds.transitions.blocks(block, order="file"):
            pass


class TorchRL:
    """TorchRL's uncompressed memory-mapped storage in a replay buffer (uniform sampling)."""

    name = "TorchRL LazyMemmapStorage"

    def __init__(self, path: Path, ds: trajcore.Dataset) -> None:
        import torch
        from tensordict import TensorDict
        from torchrl.data import LazyMemmapStorage, TensorDictReplayBuffer

        self.path, self.n, self.torch = path, ds.num_steps, torch
        self.rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(self.n, scratch_dir=str(path)), batch_size=BATCH)
        for b in _blocks(ds):
            t = {k: torch.from_numpy(v) for k, v in b.items()}
            self.rb.extend(
                TensorDict(
                    {
                        "observation": t["observations"],
                        "action": t["actions"],
                        "reward": t["rewards"],
                        "terminated": t["terminations"],
                        "truncated": t["truncations"],
                        "next": {"observation": t["next_observations"]},
                    },
                    batch_size=[len(b["actions"])],
                )
            )

    def batch(self, i: int) -> Any:
        return self.rb.sample()

    def rows(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        td = self.rb[self.torch.from_numpy(idx)]
        names = {"observations": "observation", "actions": "action", "rewards": "reward"}
        out = {k: td[v].numpy() for k, v in names.items()}
        out["next_observations"] = td["next", "observation"].numpy()
        return out

    def scan(self, block: int) -> None:
        for start in range(0, self.n, block):
            self.rb[start : min(start + block, self.n)].clone()

    def step(self, i: int) -> Any:
        return self.rb[i].clone()

    def nbytes(self) -> int:
        return dir_bytes(self.path)

    def close(self) -> None:
        pass


class H5py:
    """One uncompressed HDF5 file of D4RL's layout (a dataset per key, a row per transition)."""

    name = "h5py (D4RL layout)"

    def __init__(self, path: Path, ds: trajcore.Dataset) -> None:
        import h5py

        self.path, self.n = path, ds.num_steps
        with h5py.File(path, "w") as f:
            start = 0
            for b in _blocks(ds):
                for k, v in b.items():
                    if k not in f:
                        f.create_dataset(k, shape=(self.n, *v.shape[1:]), dtype=v.dtype)
                    f[k][start : start + len(v)] = v
                start += len(b["actions"])
        self.file = h5py.File(path, "r")
        self.sets = [self.file[k] for k in KEYS]
        self.rng = np.random.default_rng(0)

    def batch(self, i: int) -> Any:
        idx = np.sort(self.rng.choice(self.n, BATCH, replace=False))  # h5py reads increasing indices
        return [d[idx] for d in self.sets]

    def rows(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        return {k: self.file[k][idx] for k in KEYS}

    def scan(self, block: int) -> None:
        for start in range(0, self.n, block):
            for d in self.sets:
                d[start : min(start + block, self.n)]

    def step(self, i: int) -> Any:
        return [d[i] for d in self.sets]

    def nbytes(self) -> int:
        return self.path.stat().st_size

    def close(self) -> None:
        self.file.close()


class InMemory:
    """The same layout as numpy arrays in RAM: the memory-speed ceiling."""

    name = "numpy arrays in RAM"

    def __init__(self, ds: trajcore.Dataset) -> None:
        parts = list(_blocks(ds))
        self.arrays = {k: np.concatenate([p[k] for p in parts]) for k in KEYS}
        self.n = ds.num_steps
        self.rng = np.random.default_rng(0)

    def batch(self, i: int) -> Any:
        idx = self.rng.integers(0, self.n, BATCH)
        return [a[idx] for a in self.arrays.values()]

    def rows(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        return {k: a[idx] for k, a in self.arrays.items()}

    def scan(self, block: int) -> None:
        for start in range(0, self.n, block):
            for a in self.arrays.values():
                a[start : min(start + block, self.n)].copy()

    def step(self, i: int) -> Any:
        return [a[i].copy() for a in self.arrays.values()]

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    def close(self) -> None:
        self.arrays.clear()


def _record(env: Any, path: Path, actions: np.ndarray, seed: int = 0) -> float:
    """Records `env` with trajcore's defaults over `actions`; seconds from reset to close."""
    start = time.perf_counter()
    rec = trajcore.RecordVectorEpisodes(env, path)
    rec.reset(seed=seed)
    for a in actions:
        rec.step(a)
    rec.close()
    return time.perf_counter() - start


def _stream(workload: str) -> Stream:
    if workload not in _STREAMS:
        _STREAMS[workload] = atari_stream(VECTOR_STEPS) if workload == "atari" else pixel_stream(VECTOR_STEPS)
    return _STREAMS[workload]


class _LaneReplay(gym.Env[np.ndarray, np.int64]):
    """One sub-env of a stream as a single env (for the loggers that wrap one env each)."""

    def __init__(self, stream: Stream, lane: int) -> None:
        self.s, self.lane = stream, lane
        self.observation_space, self.action_space = stream.observation_space, stream.action_space
        self.episodes = iter(lane_episodes(stream, lane))
        self.steps: Iterator[int] = iter(())

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        first, steps = next(self.episodes)
        self.steps = iter(steps)
        return first, {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        t, s = next(self.steps), self.s
        return (
            s.obs[t, self.lane],
            float(s.rewards[t, self.lane]),
            bool(s.terminations[t, self.lane]),
            bool(s.truncations[t, self.lane]),
            {},
        )


def _envlogger_bytes_per_step(stream: Stream, out: Path) -> float:
    """EnvLogger (its defaults), one logger per sub-env fed that sub-env's episodes."""
    transitions = 0
    for lane in range(stream.num_envs):
        episodes = lane_episodes(stream, lane)
        env = envlogger_env(_LaneReplay(stream, lane), out / f"env{lane}")
        for _, steps in episodes:
            env.reset()
            for t in steps:
                env.step(stream.actions[t, lane])
            transitions += len(steps)
        env.close()
    return dir_bytes(out) / transitions


def _same_data(tc: Trajcore, peers: list[Any]) -> None:
    """Every peer holds what trajcore holds (a sample of rows, compared value for value)."""
    idx = np.sort(np.random.default_rng(1).choice(tc.n, 64, replace=False))
    ours = tc.rows(idx)
    for p in peers:
        theirs = p.rows(idx)
        for k in ("observations", "next_observations", "actions", "rewards"):
            assert np.array_equal(np.asarray(theirs[k]).reshape(ours[k].shape), ours[k]), (p.name, k)


def _measure(systems: list[Any], block: int, seconds: float) -> dict[str, dict[str, list[float]]]:
    """Per system: seconds per batch, per scan and per single step (every call), interleaved."""
    gc.collect()
    for s in systems:  # warm the page cache and trajcore's chunk cache alike
        s.scan(block)
        s.batch(0)
    fns = {s.name: s for s in systems}
    batch = interleaved({k: s.batch for k, s in fns.items()}, seconds)
    scan = interleaved({k: (lambda _, s=s: s.scan(block)) for k, s in fns.items()}, seconds, rounds=3)
    rng = np.random.default_rng(2)
    picks = {k: rng.integers(0, s.n, 2000).tolist() for k, s in fns.items()}
    step = interleaved_latencies({k: (lambda i, s=s, p=picks[k]: s.step(p[i])) for k, s in fns.items()}, 2000)
    return {"batch": batch, "scan": scan, "step": step}


def _paired(ours: list[float], theirs: list[float]) -> float:
    """Median over rounds of theirs / ours (seconds): trajcore's speed over the peer's."""
    return statistics.median(b / a for a, b in zip(ours, theirs, strict=True))


def _rows(group: str, systems: list[Any], t: dict[str, dict[str, list[float]]], extra: dict[str, Any]) -> list[dict]:
    ours = systems[0]
    rows = []
    for s in systems:
        batch, scan = t["batch"][s.name], t["scan"][s.name]
        p50 = statistics.median(t["step"][s.name])
        p90 = statistics.quantiles(t["step"][s.name], n=10)[-1]
        row: dict[str, Any] = {
            "group": group,
            "name": s.name,
            "steps": s.n,
            "batch_transitions_per_s": BATCH / statistics.median(batch),
            "scan_steps_per_s": s.n / statistics.median(scan),
            "step_p50_us": p50 * 1e6,
            "step_p90_us": p90 * 1e6,
            "bytes_per_step": s.nbytes() / s.n,
        }
        if s is not ours:
            row["tc/peer batch rate"] = _paired(t["batch"][ours.name], batch)
            row["tc/peer scan rate"] = _paired(t["scan"][ours.name], scan)
            row["tc/peer step p50"] = statistics.median(t["step"][ours.name]) / p50
            row["tc/peer bytes"] = ours.nbytes() / s.nbytes()
        rows.append(row)
    for name, value in extra.items():
        rows.append({"group": group, "name": name, **value})
    return rows


@pytest.mark.parametrize("workload", ["atari", "pixels"])
def test_read_peers_pixels(benchmark: Any, report: list[dict[str, Any]], tmp_path: Path, workload: str) -> None:
    if workload == "atari" and (why := atari_missing()) is not None:
        pytest.skip(why)
    stream = _stream(workload)
    _record(StreamVectorEnv(stream), tmp_path / "trajcore", stream.actions)
    tc = Trajcore(tmp_path / "trajcore")
    systems: list[Any] = [tc]
    skipped: dict[str, Any] = {}
    for name, make in (
        ("torchrl", lambda: TorchRL(tmp_path / "torchrl", tc.ds)),
        ("h5py", lambda: H5py(tmp_path / "d4rl.h5", tc.ds)),
    ):
        why = _missing(name)
        if why is None:
            systems.append(make())
        else:
            skipped[name] = {"skipped": why}
    systems.append(InMemory(tc.ds))
    if (why := _missing("envlogger")) is None:
        size = _envlogger_bytes_per_step(stream, tmp_path / "envlogger")
        skipped["EnvLogger 1.2"] = {"bytes_per_step": size, "tc/peer bytes": tc.nbytes() / tc.n / size}
    else:
        skipped["EnvLogger 1.2"] = {"skipped": why}
    _same_data(tc, systems[1:])
    t = benchmark.pedantic(_measure, args=(systems, BLOCK, 4.0), rounds=1, iterations=1)
    rows = _rows(f"read vs peers: {workload}", systems, t, skipped)
    for s in systems:
        s.close()
    benchmark.extra_info.update({r["name"]: {k: v for k, v in r.items() if k != "group"} for r in rows})
    report.extend(rows)


def test_read_peers_atari_live(benchmark: Any, report: list[dict[str, Any]], tmp_path: Path) -> None:
    """The Atari steps recorded live (the env's pace) and replayed (as fast as the recorder
    goes): the same values, and how much the file size depends on the pace."""
    if (why := atari_missing()) is not None:
        pytest.skip(why)
    stream = _stream("atari")

    def both() -> dict[str, float]:
        live = _record(atari_vector(stream.num_envs), tmp_path / "live", stream.actions)
        replayed = _record(StreamVectorEnv(stream), tmp_path / "replayed", stream.actions)
        return {"live": live, "replayed": replayed}

    seconds = benchmark.pedantic(both, rounds=1, iterations=1)
    sizes = {}
    for name in ("live", "replayed"):
        with trajcore.open(tmp_path / name) as ds:
            sizes[name] = (ds.num_steps, dir_bytes(tmp_path / name))
    assert sizes["live"][0] == sizes["replayed"][0], "the live env did not replay the cached steps"
    per_step = {k: b / n for k, (n, b) in sizes.items()}
    rows = [
        {
            "group": "read vs peers: atari recording pace",
            "name": f"recorded {name}",
            "steps": sizes[name][0],
            "seconds": seconds[name],
            "bytes_per_step": per_step[name],
            "vs replayed": per_step[name] / per_step["replayed"],
        }
        for name in ("live", "replayed")
    ]
    report.extend(rows)


def test_read_peers_cartpole_scan(benchmark: Any, report: list[dict[str, Any]], tmp_path: Path) -> None:
    """16 CartPole sub-envs, 1M env steps: a full scan as one call over the whole range, in the
    file's order (the first row, what ratios are taken against) and in step order."""
    actions = np.random.default_rng(0).integers(0, 2, size=(CARTPOLE_STEPS, 16))
    _record(cartpole_vector(16), tmp_path / "trajcore", actions)
    tc = TrajcoreFileOrder(tmp_path / "trajcore")
    systems: list[Any] = [tc, Trajcore(tmp_path / "trajcore")]
    extra: dict[str, Any] = {}
    if (why := _missing("h5py")) is None:
        systems.append(H5py(tmp_path / "d4rl.h5", tc.ds))
    else:
        extra["h5py (D4RL layout)"] = {"skipped": why}
    systems.append(InMemory(tc.ds))
    _same_data(tc, systems[1:])
    fns: dict[str, Callable[[int], Any]] = {s.name: (lambda _, s=s: s.scan(s.n)) for s in systems}
    for fn in fns.values():
        fn(0)
    scan = benchmark.pedantic(lambda: interleaved(fns, 8.0, rounds=5), rounds=1, iterations=1)
    rows = []
    for s in systems:
        row: dict[str, Any] = {
            "group": "read vs peers: cartpole x16 full scan",
            "name": s.name,
            "steps": s.n,
            "scan_steps_per_s": s.n / statistics.median(scan[s.name]),
            "bytes_per_step": s.nbytes() / s.n,
        }
        if s is not tc:
            row["tc/peer scan rate"] = _paired(scan[tc.name], scan[s.name])
        rows.append(row)
    rows += [{"group": "read vs peers: cartpole x16 full scan", "name": k, **v} for k, v in extra.items()]
    for s in systems:
        s.close()
    report.extend(rows)
