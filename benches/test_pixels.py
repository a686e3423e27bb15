"""(b) Pixel recording: 8 sub-envs of (4, 84, 84) uint8 frames, MB/s of raw observation bytes,
against zstd level 1 compressing the same bytes on one thread (this machine's compression ceiling)
and writing them raw; with and without trajcore's delta filter. (c) The same workload through the
baselines users write today and the peers.

Every rate is observation bytes recorded per second of wall time, from the first step until the
recorder is closed (everything compressed and written): the env itself costs almost nothing
(`workloads.PixelEnv`), so the rate is the recorder's.
"""

from __future__ import annotations

import gc
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
import zstandard
from baselines import BASELINES, envlogger_list, minari_list, peer_missing
from workloads import OBS_BYTES, PixelEnv, dir_bytes, pixel_vector

NUM_ENVS = 8
STEP_BYTES = NUM_ENVS * OBS_BYTES  # raw observation bytes of one vector step
MIB = 1 << 20
TRAJCORE_STEPS = 3_000  # 677 MB of frames per run: the recorder's start-up (ring pages) is amortized
ROUNDS = 3
FRAMES_STEPS = 256  # 58 MB of frames for the zstd and raw-write baselines


def _record_trajcore(out: Path, steps: int, delta: bool) -> float:
    """Seconds to record `steps` vector steps (until close returns)."""
    codec: Any = {"obs": {"delta": delta, "zstd_level": 1}}
    env = trajcore.RecordVectorEpisodes(pixel_vector(NUM_ENVS), out, codecs=codec)
    env.reset(seed=0)
    actions = np.zeros(NUM_ENVS, dtype=np.int64)
    start = time.perf_counter()
    for _ in range(steps):
        env.step(actions)
    env.close()
    return time.perf_counter() - start


def _plain_loop(steps: int) -> float:
    env = pixel_vector(NUM_ENVS)
    env.reset(seed=0)
    actions = np.zeros(NUM_ENVS, dtype=np.int64)
    start = time.perf_counter()
    for _ in range(steps):
        env.step(actions)
    elapsed = time.perf_counter() - start
    env.close()
    return elapsed


def _frames(steps: int) -> np.ndarray:
    """The observations of the first `steps` vector steps: (steps, NUM_ENVS, 4, 84, 84)."""
    env = pixel_vector(NUM_ENVS)
    obs, _ = env.reset(seed=0)
    parts = [obs]
    actions = np.zeros(NUM_ENVS, dtype=np.int64)
    for _ in range(steps - 1):
        parts.append(env.step(actions)[0])
    env.close()
    return np.stack(parts)


def _zstd_seconds(data: bytes, passes: int = 3) -> tuple[float, int]:
    """zstd level 1, one thread (threads=0: no worker threads), 1 MiB chunks: seconds per pass
    over `data` and output size."""
    cctx = zstandard.ZstdCompressor(level=1, threads=0)
    view = memoryview(data)
    start = time.perf_counter()
    for _ in range(passes):
        size = sum(len(cctx.compress(view[i : i + MIB])) for i in range(0, len(view), MIB))
    return (time.perf_counter() - start) / passes, size


def _raw_write_seconds(data: bytes, path: Path, times: int) -> float:
    """Writes `data` `times` times in 1 MiB writes (to the OS, no fsync: trajcore's default)."""
    view = memoryview(data)
    start = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(times):
            for i in range(0, len(view), MIB):
                f.write(view[i : i + MIB])
    elapsed = time.perf_counter() - start
    path.unlink()
    return elapsed


_BUSY_ENV = f"""
import sys, time
sys.path.insert(0, {os.path.dirname(__file__)!r})
import numpy as np
from workloads import PixelEnv, pixel_vector
env = pixel_vector({NUM_ENVS}); env.reset(seed=0); a = np.zeros({NUM_ENVS}, dtype=np.int64)
PixelEnv.stacks(); print("ready", flush=True)
end = time.time() + 30
while time.time() < end and not sys.stdin.closed:
    env.step(a)
"""


def _zstd_beside_env_loop(data: bytes) -> float:
    """zstd -1 seconds on `data` while the pixel env loop runs in another process: the ceiling
    for a writer thread that shares the machine with the env loop, as trajcore's does."""
    busy = subprocess.Popen([sys.executable, "-c", _BUSY_ENV], stdout=subprocess.PIPE, stdin=subprocess.PIPE)
    try:
        assert busy.stdout is not None
        busy.stdout.readline()
        return _zstd_seconds(data)[0]
    finally:
        busy.kill()
        busy.wait()


def test_pixel_throughput(benchmark: Any, report: list[dict[str, Any]], tmp_path: Path) -> None:
    PixelEnv.stacks()  # draw the frames before timing anything
    frames = _frames(FRAMES_STEPS)
    # The same bytes in the order the env returns them, and in the order trajcore compresses them
    # (each sub-env's rows together: a chunk holds consecutive rows of one column of one lane).
    step_order = frames.tobytes()
    lane_order = np.ascontiguousarray(frames.transpose(1, 0, 2, 3, 4)).tobytes()
    times = max(1, TRAJCORE_STEPS * STEP_BYTES // len(step_order))
    rates: dict[str, list[float]] = {}
    sizes: dict[str, float] = {}

    def add(key: str, nbytes: float, seconds: float) -> None:
        rates.setdefault(key, []).append(nbytes / seconds)

    def one_round(r: int) -> None:
        gc.collect()
        for key, data in (("zstd_step", step_order), ("zstd_lane", lane_order)):
            t, size = _zstd_seconds(data)
            add(key, len(data), t)
            sizes[key] = size / len(data)
        add("zstd_lane_busy", len(lane_order), _zstd_beside_env_loop(lane_order))
        add("raw", times * len(step_order), _raw_write_seconds(step_order, tmp_path / "raw", times))
        add("env", TRAJCORE_STEPS * STEP_BYTES, _plain_loop(TRAJCORE_STEPS))
        for delta in (False, True):
            out = tmp_path / f"r{r}_{delta}"
            add(f"trajcore{delta}", TRAJCORE_STEPS * STEP_BYTES, _record_trajcore(out, TRAJCORE_STEPS, delta))
            sizes[f"trajcore{delta}"] = dir_bytes(out) / ((TRAJCORE_STEPS + 1) * STEP_BYTES)
            for f in out.iterdir():
                f.unlink()

    benchmark.pedantic(one_round, args=(0,), rounds=1, iterations=1)
    for r in range(1, ROUNDS):
        one_round(r)

    def row(name: str, key: str, command: str) -> dict[str, Any]:
        mbs = statistics.median(rates[key])
        out = {
            "group": "pixels",
            "name": name,
            "MB_per_s": mbs / 1e6,
            "MB_per_s_spread": f"{min(rates[key]) / 1e6:.0f}..{max(rates[key]) / 1e6:.0f}",
            # Per round, so that a slow moment of the machine hits both sides of the ratio.
            "vs_zstd1_lane_order": statistics.median(
                a / b for a, b in zip(rates[key], rates["zstd_lane"], strict=True)
            ),
        }
        if key in sizes:
            out["size_vs_raw"] = sizes[key]
            out["bytes_on_disk_per_step"] = sizes[key] * STEP_BYTES
        out["how"] = command
        return out

    rows = [
        row("zstd -1, step order", "zstd_step", "zstandard level 1, threads=0, 1 MiB chunks of the env's batches"),
        row("zstd -1, lane order", "zstd_lane", "same, each sub-env's rows together (as trajcore chunks them)"),
        row("zstd -1, lane order, env loop running", "zstd_lane_busy", "same, the env loop busy in another process"),
        row("raw write", "raw", "1 MiB writes to a file, no fsync"),
        row("env loop alone (no recording)", "env", "SyncVectorEnv of 8 PixelEnv"),
        row("trajcore zstd 1", "trajcoreFalse", 'codecs={"obs": {"zstd_level": 1}}'),
        row("trajcore delta + zstd 1", "trajcoreTrue", 'codecs={"obs": {"delta": True, "zstd_level": 1}}'),
    ]
    report.extend(rows)
    benchmark.extra_info.update({r["name"]: {k: v for k, v in r.items() if k != "group"} for r in rows})


# (name, most vector steps, seconds budget): slow recorders stop at the time budget.
PIXEL_RECORDERS = [
    ("pickle per episode", 2_000, 3.0),
    ("np.savez_compressed per episode", 1_000, 3.0),
    ("JSON line per step", 200, 3.0),
    ("CSV row per step", 200, 3.0),
    ("EnvLogger 1.2", 1_000, 4.0),
    ("Minari (HDF5)", 1_000, 4.0),
]


@pytest.mark.parametrize(("name", "max_steps", "budget"), PIXEL_RECORDERS)
def test_pixel_recorders(
    benchmark: Any, report: list[dict[str, Any]], tmp_path: Path, name: str, max_steps: int, budget: float
) -> None:
    peer = "envlogger" if name.startswith("EnvLogger") else "minari" if name.startswith("Minari") else None
    if peer is not None and (why := peer_missing(peer)) is not None:
        pytest.skip(why)
    PixelEnv.stacks()
    out = tmp_path / "rec"
    if peer == "envlogger":
        env = envlogger_list(PixelEnv, NUM_ENVS, out)
    elif peer == "minari":
        env = minari_list(PixelEnv, NUM_ENVS, out)
    else:
        env = BASELINES[name](pixel_vector(NUM_ENVS), out)
        env.reset(seed=0)
    actions = np.zeros(NUM_ENVS, dtype=np.int64)
    gc.collect()

    def run() -> tuple[int, float, int]:
        start = time.perf_counter()
        steps = 0
        while steps < max_steps and time.perf_counter() - start < budget:
            for _ in range(10):
                env.step(actions)
            steps += 10
        if peer == "minari":
            for e in env.envs:
                e._flush_to_storage()  # close() deletes the collector's cache: count it first
            size = dir_bytes(out)
            env.close()
        else:
            env.close()
            size = dir_bytes(out)
        return steps, time.perf_counter() - start, size

    steps, elapsed, size = benchmark.pedantic(run, rounds=1, iterations=1)
    row = {
        "group": "pixels",
        "name": name,
        "MB_per_s": steps * STEP_BYTES / elapsed / 1e6,
        "MB_per_s_spread": f"{steps} steps",
        "size_vs_raw": size / ((steps + 1) * STEP_BYTES),
        "bytes_on_disk_per_step": size / (steps + 1),
        "how": "per-env wrapper x8 in a Python loop" if peer else "VectorWrapper (benches/baselines.py)",
    }
    benchmark.extra_info.update(row)
    report.append(row)
