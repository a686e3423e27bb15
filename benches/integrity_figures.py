"""Figures of the integrity tools: `verify` throughput on a ~1 GB pixel dataset, and the time
`trajcore.open` takes on a 10M-step CartPole dataset (16 sub-envs).

    python benches/integrity_figures.py WORK_DIR [--pixel-gb 1.0] [--cartpole-steps 10000000]

Records the two datasets into WORK_DIR unless they are there already, then measures:

- ``trajcore.verify`` on each dataset, with its files in the page cache (warm) and dropped from
  it (cold: ``posix_fadvise(DONTNEED)`` on every shard after a ``sync``, no root needed), as MB
  (10^6 bytes) of shard files per second; and ``trajcore verify`` as a user runs it (a new
  process, the command's own figure, which includes opening);
- ``trajcore.open`` (lenient, the default) and ``trajcore.open(verify=True)`` of the CartPole
  dataset, warm and cold.

Medians of ``--repeats`` runs. The pixel dataset: `workloads.PixelEnv` frame stacks (4, 84, 84)
with 3 bits of per-pixel noise (sensor-like, so zstd shrinks them about 2.5x rather than the
300x of a noiseless Atari screen: each MB of file then decodes to a few MB, as recorded camera
or emulator frames do), 8 sub-envs, zstd level 3 with the delta filter. The CartPole dataset is
what ``trajcore record CartPole-v1 --num-envs 16`` writes. ``--noiseless-mb`` adds the noiseless
frames (about 30x smaller compressed), where decoding, not reading, bounds the rate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import trajcore
from workloads import PixelEnv

NOISE_PERIOD = 1024  # noise frames cycled: 29 MB, far beyond zstd's window, so it stays noise


class NoisyPixelEnv(PixelEnv):
    """`PixelEnv` stacks with 3 low bits of noise per pixel (drawn once, cycled)."""

    _noise: np.ndarray | None = None

    @classmethod
    def noise(cls) -> np.ndarray:
        if cls._noise is None:
            rng = np.random.default_rng(0)
            cls._noise = rng.integers(0, 8, size=(NOISE_PERIOD, *PixelEnv.stacks().shape[1:]), dtype=np.uint8)
        return cls._noise

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        noise = self.noise()[(self._phase * 7 + self._t) % NOISE_PERIOD]
        return obs + noise, reward, terminated, truncated, info


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.glob("*.trj"))


def record_pixels(path: Path, target_bytes: int, noise: bool = True) -> None:
    envs = gym.vector.SyncVectorEnv([NoisyPixelEnv if noise else PixelEnv for _ in range(8)])
    codecs = {"obs": {"delta": True, "zstd_level": 3}}
    start = time.perf_counter()
    with trajcore.RecordVectorEpisodes(envs, path, {"bench": "noisy pixels"}, codecs=codecs) as rec:
        rec.reset(seed=0)
        actions = np.zeros(8, dtype=np.int64)
        t = 0
        while True:
            rec.step(actions)
            t += 1
            if t % 500 == 0:
                rec.flush()
                if _size(path) >= target_bytes:
                    break
    print(f"recorded {t * 8:,} pixel steps, {_size(path) / 1e6:,.0f} MB in {time.perf_counter() - start:.0f} s")


def record_cartpole(path: Path, steps: int) -> None:
    vector_steps = steps // 16
    cmd = [sys.executable, "-m", "trajcore", "record", "CartPole-v1", "--num-envs", "16"]
    subprocess.run([*cmd, "--steps", str(vector_steps), str(path)], check=True)


def drop_cache(path: Path) -> None:
    """Evicts the shard files from the page cache (clean pages only: `sync` first)."""
    os.sync()
    for p in path.glob("*.trj"):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm_cache(path: Path) -> None:
    for p in path.glob("*.trj"):
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def timed(fn: Any, repeats: int, cold: bool, path: Path) -> tuple[float, Any]:
    """Median seconds of `fn()` over `repeats` runs, and its last result."""
    times = []
    result = None
    for _ in range(repeats):
        drop_cache(path) if cold else warm_cache(path)
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def verify_figures(name: str, path: Path, repeats: int) -> dict[str, Any]:
    size = _size(path)
    out: dict[str, Any] = {"dataset": name, "bytes": size, "shards": len(list(path.glob("*.trj")))}
    for cold in (False, True):
        seconds, report = timed(lambda: trajcore.verify(path), repeats, cold, path)
        assert report.intact, report.damage[:3]
        key = "cold" if cold else "warm"
        out[f"verify_{key}_s"] = seconds
        out[f"verify_{key}_mb_per_s"] = size / 1e6 / seconds
        out["decoded_bytes"] = report.decoded_bytes
        out["chunks"] = report.chunks
    warm_cache(path)
    done = subprocess.run(
        [sys.executable, "-m", "trajcore", "verify", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    out["cli_stderr"] = done.stderr.strip()
    return out


def open_figures(path: Path, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with trajcore.open(path) as ds:
        out["episodes"], out["steps"] = ds.num_episodes, ds.num_steps
    for cold in (False, True):
        key = "cold" if cold else "warm"
        seconds, _ = timed(lambda: trajcore.open(path).close(), repeats, cold, path)
        out[f"open_{key}_s"] = seconds
        seconds, _ = timed(lambda: trajcore.open(path, verify=True).close(), max(1, repeats // 2), cold, path)
        out[f"open_verify_{key}_s"] = seconds
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("work", type=Path)
    p.add_argument("--pixel-gb", type=float, default=1.0)
    p.add_argument("--cartpole-steps", type=int, default=10_000_000)
    p.add_argument(
        "--noiseless-mb",
        type=float,
        default=0,
        help="also verify a noiseless PixelEnv dataset of this many MB (compressed ~30x: decoding dominates)",
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    pixels, cartpole = args.work / "pixels", args.work / "cartpole16"
    if not pixels.exists():
        record_pixels(pixels, int(args.pixel_gb * 1e9))
    if not cartpole.exists():
        record_cartpole(cartpole, args.cartpole_steps)
    figures = {
        "machine": {"cpus": os.cpu_count(), "verify_threads": trajcore._core.num_threads()},
        "pixels": verify_figures("pixels", pixels, args.repeats),
        "cartpole": {**verify_figures("cartpole", cartpole, args.repeats), **open_figures(cartpole, args.repeats)},
    }
    if args.noiseless_mb:
        noiseless = args.work / "pixels-noiseless"
        if not noiseless.exists():
            record_pixels(noiseless, int(args.noiseless_mb * 1e6), noise=False)
        figures["pixels_noiseless"] = verify_figures("pixels-noiseless", noiseless, args.repeats)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
