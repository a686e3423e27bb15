"""Damage locality: how many episodes one flipped byte, or a cut, costs on the README's dataset.

    python -m pytest benches/test_damage_locality.py -p no:cacheprovider --benchmark-only -s

The dataset is what the README's first command writes (``trajcore record CartPole-v1 --num-envs
16 --steps 100000``: 1.6M env steps, ~69k episodes, one shard). Then, in place on one copy:

- ``TRAJCORE_FLIPS`` (default 100) single-byte flips, each at a uniformly random offset of the
  shard with a random non-zero XOR (seeded: the same offsets every run), the byte put back after
  each. Lost episodes = the clean dataset's episodes minus those ``trajcore.open(verify=True)``
  still lists (so an episode whose Episode record was hit, and is no longer listed at all, counts
  as lost). Each flip also checks that ``trajcore.verify`` reports that same number as lost
  (damaged plus no longer listed).
- Cuts at 10%, 30%, 50%, 70% and 90% of the shard (a writer killed mid-file): lost episodes
  against those whose rows and record all lie before the cut.

Targets (issue 23): over 100 flips, median lost <= 0.5% of the episodes and maximum <= 3%.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

GROUP = "damage locality"
FLIPS = int(os.environ.get("TRAJCORE_FLIPS", "100"))
STEPS = int(os.environ.get("TRAJCORE_DAMAGE_STEPS", "100000"))


@pytest.fixture(scope="module")
def readme_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("damage") / "cp16"
    record = ["record", "CartPole-v1", "--num-envs", "16", "--steps", str(STEPS), str(path)]
    subprocess.run([sys.executable, "-m", "trajcore", *record], check=True, capture_output=True)
    return path


def _kept(path: Path) -> int:
    import warnings

    import trajcore

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", trajcore.TrajcoreWarning)
        with trajcore.open(path, verify=True) as ds:
            return ds.num_episodes


def test_one_flipped_byte_costs_the_episodes_of_one_chunk(
    benchmark: Any, report: list[dict[str, Any]], readme_dataset: Path, tmp_path: Path
) -> None:
    import trajcore

    work = tmp_path / "flipped"
    shutil.copytree(readme_dataset, work)
    shards = sorted(work.glob("*.trj"))
    sizes = np.array([p.stat().st_size for p in shards], dtype=np.float64)
    with trajcore.open(work) as ds:
        total = ds.num_episodes
    lost: list[int] = []
    reported: list[int] = []

    def run() -> None:
        lost.clear()
        reported.clear()
        for i in range(FLIPS):
            rng = np.random.default_rng(i)
            shard = shards[int(rng.choice(len(shards), p=sizes / sizes.sum()))]
            at = int(rng.integers(0, shard.stat().st_size))
            xor = int(rng.integers(1, 256))
            with open(shard, "r+b") as f:
                f.seek(at)
                (old,) = f.read(1)
                f.seek(at)
                f.write(bytes([old ^ xor]))
            try:
                lost.append(total - _kept(work))
                reported.append(trajcore.verify(work).episodes_lost)
            finally:
                with open(shard, "r+b") as f:
                    f.seek(at)
                    f.write(bytes([old]))

    benchmark.pedantic(run, rounds=1, iterations=1)
    share = [100.0 * n / total for n in lost]
    row = {
        "group": GROUP,
        "name": f"{FLIPS} single-byte flips, README dataset",
        "episodes": total,
        "shard_mb": round(float(sizes.sum()) / 1e6, 1),
        "median_lost_pct": round(statistics.median(share), 3),
        "p90_lost_pct": round(float(np.percentile(share, 90)), 3),
        "max_lost_pct": round(max(share), 3),
        "flips_losing_nothing": sum(n == 0 for n in lost),
        "verify_counts_right": sum(r == n for r, n in zip(reported, lost, strict=True)),
    }
    report.append(row)
    benchmark.extra_info.update(row)
    print(f"\n{row}")
    assert all(r == n for r, n in zip(reported, lost, strict=True)), list(zip(reported, lost, strict=True))


def test_a_cut_costs_what_lies_past_it(
    benchmark: Any, report: list[dict[str, Any]], readme_dataset: Path, tmp_path: Path
) -> None:
    import trajcore

    (shard,) = sorted(readme_dataset.glob("*.trj"))
    size = shard.stat().st_size
    with trajcore.open(readme_dataset) as ds:
        total = ds.num_episodes
    rows: list[dict[str, Any]] = []

    def run() -> None:
        rows.clear()
        for fraction in (0.1, 0.3, 0.5, 0.7, 0.9):
            cut = tmp_path / f"cut{fraction}"
            cut.mkdir(exist_ok=True)
            with open(shard, "rb") as f:
                (cut / shard.name).write_bytes(f.read(int(size * fraction)))
            kept = _kept(cut)
            rows.append({"cut_at_pct": round(100 * fraction), "kept_pct": round(100.0 * kept / total, 2)})

    benchmark.pedantic(run, rounds=1, iterations=1)
    row = {"group": GROUP, "name": "a cut shard (killed writer)", "episodes": total, "cuts": rows}
    report.append(row)
    benchmark.extra_info.update(row)
    print(f"\n{row}")
    for r in rows:
        # Episodes are written about a second after their rows: what a cut keeps trails it.
        assert r["kept_pct"] >= r["cut_at_pct"] - 10, rows
