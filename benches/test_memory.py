"""(d) Peak memory: recording 1 million CartPole steps must grow resident memory by < 50 MB.

Each case runs `memory_probe.py` in a fresh process, so memory freed by earlier benchmarks (and
kept by the allocator) cannot hide growth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PROBE = os.path.join(os.path.dirname(__file__), "memory_probe.py")
STEPS = 1_000_000


@pytest.mark.parametrize(
    ("num_envs", "ring_bytes"),
    [(1, None), (16, None), (1, 16 << 20)],
    ids=["1 env", "16 envs sync", "1 env, ring_bytes 16 MiB"],
)
def test_peak_memory_1m_steps(
    benchmark: Any, report: list[dict[str, Any]], tmp_path: Path, num_envs: int, ring_bytes: int | None
) -> None:
    args = [sys.executable, PROBE, str(tmp_path / "rec"), str(num_envs), str(STEPS)]
    if ring_bytes is not None:
        args.append(str(ring_bytes))

    def probe() -> dict[str, Any]:
        done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=True)
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    r = benchmark.pedantic(probe, rounds=1, iterations=1)
    name = f"CartPole x{num_envs}, 1M steps" + (f", ring_bytes {ring_bytes >> 20} MiB" if ring_bytes else ", defaults")
    row = {
        "group": "memory",
        "name": name,
        "peak_rss_growth_MB": r["peak_growth"] / 1e6,
        "rss_before_MB": r["rss_before"] / 1e6,
        "env_steps_per_s": r["steps"] / r["seconds"],
        "MB_written": r["bytes_written"] / 1e6,
        "command": " ".join(["python benches/memory_probe.py OUT", *args[3:]]),
    }
    benchmark.extra_info.update(row)
    report.append(row)
