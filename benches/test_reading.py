"""Reading for training (issue 4): random batches of 256 transitions (CartPole-like, 84x84
pixels stored raw), a full sequential scan, a random single step, and batch cost at two dataset
sizes 10x apart, each against the naive path (one episode at a time from Python, building the
same transition arrays) measured in the same run, rounds interleaved. The scan also shows
iterating episodes as read (zero-copy views for raw columns), which builds no transitions.

Datasets are written straight through `_core.Recorder` with synthetic values (16 lanes,
CartPole-like episode lengths), so building them takes seconds: what is measured is reading.

    python -m pytest benches/test_reading.py -p no:cacheprovider --benchmark-only -s
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from timing import interleaved as _interleaved
from trajcore import _core
from trajcore.record.options import RecordedEnv, build_config

LANES = 16
BATCH = 256
SMALL, LARGE, HUGE = 100_000, 1_000_000, 10_000_000  # CartPole steps: sizes 10x apart
PIXEL_STEPS = 20_000  # 84x84 uint8 frames: ~280 MB of observation rows
GROUP = "reading"


def _write(
    path: Path,
    steps: int,
    obs: spaces.Box,
    seed: int,
    zstd_level: int | None,
    mean_length: float = 22.0,
    max_shard_bytes: int = 256 << 20,
    chunk_bytes: int | None = None,
) -> None:
    """`steps` transitions over 16 lanes (next-step autoreset), episodes of CartPole-like lengths
    (geometric, `mean_length` on average)."""
    recorded = RecordedEnv(
        obs,
        spaces.Discrete(2),
        num_envs=LANES,
        batched=True,
        autoreset_mode="next_step",
        metadata={"synthetic": True},
        env_id=None,
    )
    config = build_config(
        recorded,
        max_shard_bytes=max_shard_bytes,
        chunk_bytes=chunk_bytes,
        flush_interval=1.0,
        durability="flush",
        fsync_interval=None,
        zstd_level=zstd_level,
        codecs=None,
        block_when_full=True,
        ring_bytes=64 << 20,
    )
    rec = _core.Recorder(str(path), config)
    rng = np.random.default_rng(seed)
    shape = (LANES, *obs.shape)
    pool = (
        rng.normal(size=(64, *shape)).astype(obs.dtype)
        if obs.dtype == np.float32
        else rng.integers(0, 255, size=(64, *shape), dtype=np.uint8)
    )
    rec.reset(pool[0], {})
    left = rng.geometric(1 / mean_length, size=LANES)  # steps to the end of each lane's episode
    restart = np.zeros(LANES, dtype=bool)
    recorded = 0
    i = 0
    while recorded < steps:
        i += 1
        done = left == 1
        left = np.where(restart, rng.geometric(1 / mean_length, size=LANES), left - 1)
        recorded += int((~restart).sum())
        rec.step(
            rng.integers(0, 2, size=LANES),
            pool[i % 64],
            np.ones(LANES),
            done & ~restart,
            np.zeros(LANES, dtype=bool),
            {},
        )
        restart = done & ~restart
    rec.close()


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reading")
    box = spaces.Box(-np.inf, np.inf, (4,), np.float32)
    paths = {
        "cartpole 1M zstd": (LARGE, box, 3),
        "cartpole 100k zstd": (SMALL, box, 3),
        # Written raw directly (420 MB): both it and the 1M one are far beyond the CPU caches.
        "cartpole 10M raw": (HUGE, box, None),
        "pixels 84x84 raw": (PIXEL_STEPS, spaces.Box(0, 255, (84, 84), np.uint8), None),
    }
    out = {}
    for name, (steps, space, level) in paths.items():
        out[name] = root / name.replace(" ", "_")
        _write(out[name], steps, space, seed=len(out), zstd_level=level)
    # The same steps in 10x the episodes (mean length 2.2), 16x the chunks (64 KiB) and tens of
    # shards (a shard rolls over past 1 MiB when chunks are sealed).
    out["cartpole 1M raw, 10x episodes, 16x chunks, 36 shards"] = root / "cartpole_1M_raw_many"
    _write(out["cartpole 1M raw, 10x episodes, 16x chunks, 36 shards"], LARGE, box, 7, None, 2.2, 1 << 20, 64 << 10)
    # The recorded-compressed CartPole datasets converted to raw columns, as for training.
    for size in ("1M", "100k"):
        out[f"cartpole {size} raw"] = root / f"cartpole_{size}_raw"
        trajcore.convert(out[f"cartpole {size} zstd"], out[f"cartpole {size} raw"], codecs="raw")
    return out


def _nbytes(batch: Any) -> int:
    if isinstance(batch, dict):
        return sum(_nbytes(v) for v in batch.values())
    if isinstance(batch, tuple):
        return sum(_nbytes(v) for v in batch)
    return int(batch.nbytes)


def _naive_batch(ds: trajcore.Dataset, episodes: np.ndarray, steps: np.ndarray) -> dict[str, Any]:
    """What users write without a batched reader: each transition from its episode, in Python."""
    obs, nxt, act, rew, term, trunc = [], [], [], [], [], []
    for e, t in zip(episodes.tolist(), steps.tolist(), strict=True):
        ep = ds.episodes[e]
        o = ep.observations
        obs.append(o[t])
        nxt.append(o[t + 1])
        act.append(ep.actions[t])
        rew.append(ep.rewards[t])
        term.append(ep.terminations[t])
        trunc.append(ep.truncations[t])
    return {
        "observations": np.stack(obs),
        "actions": np.array(act),
        "rewards": np.array(rew),
        "next_observations": np.stack(nxt),
        "terminations": np.array(term),
        "truncations": np.array(trunc),
    }


def _locate(ends: np.ndarray, steps: Any) -> tuple[np.ndarray, np.ndarray]:
    """(episodes, steps within them) of global step numbers, from the episodes' cumulative
    lengths `ends`."""
    steps = np.asarray(steps)
    episodes = np.searchsorted(ends, steps, side="right")
    return episodes, steps - np.concatenate([[0], ends])[episodes]


def _row(name: str, **figures: Any) -> dict[str, Any]:
    return {"group": GROUP, "name": name, **figures}


@pytest.mark.parametrize(
    "name", ["cartpole 1M zstd", "cartpole 1M raw", "cartpole 100k zstd", "cartpole 100k raw", "pixels 84x84 raw"]
)
def test_random_batches(benchmark: Any, report: list[dict[str, Any]], datasets: dict[str, Path], name: str) -> None:
    ds = trajcore.open(datasets[name])
    ends = np.cumsum(ds.summaries()["length"])
    pairs = [_locate(ends, np.random.default_rng(i).integers(0, ds.num_steps, BATCH)) for i in range(64)]
    batch_bytes = _nbytes(ds.sample_transitions(BATCH, seed=0))
    ds.sample_transitions(4096, seed=1)  # warm the page cache and the chunk cache

    def measure() -> dict[str, list[float]]:
        return _interleaved(
            {
                "trajcore": lambda i: ds.sample_transitions(BATCH, seed=i),
                "naive": lambda i: _naive_batch(ds, *pairs[i % 64]),
            },
            seconds=4.0 if name.startswith("pixels") else 2.0,
        )

    t = benchmark.pedantic(measure, rounds=1, iterations=1)
    fast, naive = statistics.median(t["trajcore"]), statistics.median(t["naive"])
    row = _row(
        f"random batch of {BATCH}, {name}",
        steps=ds.num_steps,
        us_per_batch=fast * 1e6,
        spread_us=f"{min(t['trajcore']) * 1e6:.0f}..{max(t['trajcore']) * 1e6:.0f}",
        transitions_per_s=BATCH / fast,
        MB_per_s=batch_bytes / fast / 1e6,
        naive_transitions_per_s=BATCH / naive,
        speedup_vs_naive=naive / fast,
    )
    benchmark.extra_info.update(row)
    report.append(row)


def test_single_step_latency(benchmark: Any, report: list[dict[str, Any]], datasets: dict[str, Path]) -> None:
    loop = 4096  # steps per timed call: the loop, not the harness, is what is timed
    rows = []
    for name in ("cartpole 1M zstd", "cartpole 1M raw"):
        ds = trajcore.open(datasets[name])
        index = np.random.default_rng(0).integers(0, ds.num_steps, 1 << 16).tolist()
        steps = ds.transitions
        for g in index[:4096]:
            steps[g]  # touch the chunks (cache, page cache)

        def fast_loop(i: int, steps: Any = steps, index: list[int] = index) -> None:
            start = (i * loop) % len(index)
            for g in index[start : start + loop]:
                steps[g]

        ends = np.cumsum(ds.summaries()["length"])

        def naive_loop(i: int, ds: trajcore.Dataset = ds, index: list[int] = index, ends: Any = ends) -> None:
            start = (i * loop) % len(index)
            episodes, ts = _locate(ends, index[start : start + loop // 16])
            for e, t in zip(episodes.tolist(), ts.tolist(), strict=True):
                ep = ds.episodes[e]
                ep.observations[t], ep.actions[t], ep.rewards[t], ep.observations[t + 1]

        t = _interleaved({"trajcore": fast_loop, "naive": naive_loop}, seconds=3.0)
        t = {"trajcore": [x / loop for x in t["trajcore"]], "naive": [x / (loop // 16) for x in t["naive"]]}
        fast, slow = statistics.median(t["trajcore"]), statistics.median(t["naive"])
        rows.append(
            _row(
                f"random single step (ds.transitions[i]), {name}",
                steps=ds.num_steps,
                us_per_step=fast * 1e6,
                spread_us=f"{min(t['trajcore']) * 1e6:.2f}..{max(t['trajcore']) * 1e6:.2f}",
                naive_us_per_step=slow * 1e6,
                speedup_vs_naive=slow / fast,
            )
        )
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    benchmark.extra_info.update(rows[0])
    report.extend(rows)


@pytest.mark.parametrize("name", ["cartpole 1M zstd", "cartpole 1M raw", "pixels 84x84 raw"])
def test_sequential_scan(benchmark: Any, report: list[dict[str, Any]], datasets: dict[str, Path], name: str) -> None:
    ds = trajcore.open(datasets[name])
    # 1024 pixel transitions (14 MB) per call: larger batches exceed glibc's 32 MB limit for
    # reusing freed blocks and page-fault their fresh memory on every call.
    chunk = 1024 if name.startswith("pixels") else 65536

    def batched(_: int) -> int:
        total = 0
        for start in range(0, ds.num_steps, chunk):
            total += _nbytes(ds.transitions[start : min(start + chunk, ds.num_steps)])
        return total

    def naive(_: int) -> int:
        """Episode by episode, copied into the same transition arrays."""
        total = 0
        for ep in ds.episodes:
            o = ep.observations
            parts = (o[:-1].copy(), o[1:].copy(), ep.actions.copy(), ep.rewards.copy())
            parts += (ep.terminations.copy(), ep.truncations.copy())
            total += sum(p.nbytes for p in parts)
        return total

    def views(_: int) -> int:
        """Episode by episode, as read (zero-copy views where stored raw): no transition arrays."""
        total = 0
        for ep in ds.episodes:
            total += ep.observations.nbytes + ep.actions.nbytes + ep.rewards.nbytes
            total += ep.terminations.nbytes + ep.truncations.nbytes
        return total

    scanned = batched(0)
    fns = {"trajcore": batched, "naive": naive, "views": views}
    t = benchmark.pedantic(lambda: _interleaved(fns, 6.0, rounds=3), rounds=1)
    fast, slow = statistics.median(t["trajcore"]), statistics.median(t["naive"])
    row = _row(
        f"full scan in order, {name}",
        steps=ds.num_steps,
        s_per_scan=fast,
        transitions_per_s=ds.num_steps / fast,
        MB_per_s=scanned / fast / 1e6,
        naive_transitions_per_s=ds.num_steps / slow,
        speedup_vs_naive=slow / fast,
        episode_views_transitions_per_s=ds.num_steps / statistics.median(t["views"]),
    )
    benchmark.extra_info.update(row)
    report.append(row)


def test_batch_cost_does_not_grow_with_size(
    benchmark: Any, report: list[dict[str, Any]], datasets: dict[str, Path]
) -> None:
    rows = []
    for a_name, b_name in (
        ("cartpole 100k zstd", "cartpole 1M zstd"),
        ("cartpole 100k raw", "cartpole 1M raw"),
        ("cartpole 1M raw", "cartpole 10M raw"),
        ("cartpole 1M raw", "cartpole 1M raw, 10x episodes, 16x chunks, 36 shards"),
    ):
        small, large = trajcore.open(datasets[a_name]), trajcore.open(datasets[b_name])
        for d in (small, large):
            d.sample_transitions(1 << 16, seed=99)  # warm both alike
        t = _interleaved(
            {
                "small": lambda i, d=small: d.sample_transitions(BATCH, seed=i),
                "large": lambda i, d=large: d.sample_transitions(BATCH, seed=i),
            },
            seconds=3.0,
            rounds=6,
        )
        a, b = statistics.median(t["small"]), statistics.median(t["large"])
        rows.append(
            _row(
                f"batch cost, {a_name} vs {b_name.split(' ', 1)[1]}",
                episodes=f"{small.num_episodes:,} vs {large.num_episodes:,}",
                shards=f"{len(small.shards)} vs {len(large.shards)}",
                us_per_batch_small=a * 1e6,
                us_per_batch_10x=b * 1e6,
                ratio_10x=b / a,
            )
        )
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    report.extend(rows)


def test_reading_targets(benchmark: Any, report: list[dict[str, Any]]) -> None:
    """The issue's targets, from the rows above (runs last: pytest keeps file order)."""
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    by = {r["name"]: r for r in report if r["group"] == GROUP}
    checks = []
    cp = by.get(f"random batch of {BATCH}, cartpole 1M zstd")
    cp_raw = by.get(f"random batch of {BATCH}, cartpole 1M raw")
    if cp and cp_raw:
        best = max(cp["transitions_per_s"], cp_raw["transitions_per_s"])
        checks.append(
            (
                ">= 5M transitions/s, CartPole batches of 256",
                cp["transitions_per_s"] >= 5e6,
                f"{cp['transitions_per_s'] / 1e6:.1f}M/s recorded zstd, {cp_raw['transitions_per_s'] / 1e6:.1f}M/s "
                f"converted raw (best {best / 1e6:.1f}M/s)",
            )
        )
    px = by.get(f"random batch of {BATCH}, pixels 84x84 raw")
    if px:
        checks.append(
            (
                ">= 300k transitions/s, raw 84x84 batches",
                px["transitions_per_s"] >= 3e5,
                f"{px['transitions_per_s'] / 1e3:.0f}k/s, {px['MB_per_s']:.0f} MB/s",
            )
        )
    for name in ("cartpole 1M zstd", "cartpole 1M raw"):
        one = by.get(f"random single step (ds.transitions[i]), {name}")
        if one:
            checks.append(
                ("random single step < 2 us", one["us_per_step"] < 2.0, f"{one['us_per_step']:.2f} us ({name})")
            )
    # Both sizes beyond the CPU caches (34 MB and 340 MB of rows): what the index and the chunk
    # lookups cost. From 100k (3.4 MB, inside the 32 MB L3) to 1M the memory hierarchy shows.
    size = by.get("batch cost, cartpole 1M raw vs 10M raw")
    if size:
        r = size["ratio_10x"]
        checks.append(("batch cost flat with size (10x the steps: <= 1.25x)", r <= 1.25, f"{r:.2f}x, 1M vs 10M steps"))
    many = by.get("batch cost, cartpole 1M raw vs 1M raw, 10x episodes, 16x chunks, 36 shards")
    if many:
        r = many["ratio_10x"]
        checks.append(("batch cost flat with episodes/chunks/shards (<= 1.25x)", r <= 1.25, f"{r:.2f}x, same 1M steps"))
    for name in ("cartpole 100k zstd vs 1M zstd", "cartpole 100k raw vs 1M raw"):
        row = by.get(f"batch cost, {name}")
        if row:
            checks.append(("  (for scale) 100k -> 1M", row["ratio_10x"] <= 1.25, f"{row['ratio_10x']:.2f}x ({name})"))
    for target, met, figure in checks:
        report.append({"group": "reading targets", "name": target, "met": "met" if met else "MISSED", "figure": figure})
    assert checks, "run with the benchmarks above"
