"""(d) Peak memory: recording 1 million CartPole steps must grow resident memory by < 50 MB, and
(issue 14) by no more than EnvLogger's on the same steps.

Each case runs `memory_probe.py` in a fresh process, so memory freed by earlier benchmarks (and
kept by the allocator) cannot hide growth. The ring of 16 MiB (the default before issue 14) is
measured beside the default. EnvLogger is slow: it and trajcore are compared on 200k steps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from baselines import peer_missing

PROBE = os.path.join(os.path.dirname(__file__), "memory_probe.py")
STEPS = 1_000_000
PEER_STEPS = 200_000
# EnvLogger's growth per env count, from its rows (run first), for trajcore's rows of as many steps.
_ENVLOGGER_MB: dict[int, float] = {}


@pytest.mark.parametrize(
    ("num_envs", "how", "steps"),
    [
        (1, "envlogger", PEER_STEPS),
        (16, "envlogger", PEER_STEPS),
        (1, None, PEER_STEPS),
        (16, None, PEER_STEPS),
        (1, None, STEPS),
        (16, None, STEPS),
        (1, 16 << 20, STEPS),
        (16, 16 << 20, STEPS),
    ],
    ids=[
        "EnvLogger 1 env, 200k",
        "EnvLogger 16 envs, 200k",
        "1 env, 200k",
        "16 envs, 200k",
        "1 env",
        "16 envs sync",
        "1 env, ring_bytes 16 MiB",
        "16 envs, ring_bytes 16 MiB",
    ],
)
def test_peak_memory(
    benchmark: Any, report: list[dict[str, Any]], tmp_path: Path, num_envs: int, how: int | str | None, steps: int
) -> None:
    if how == "envlogger" and (why := peer_missing("envlogger")) is not None:
        pytest.skip(why)
    args = [sys.executable, PROBE, str(tmp_path / "rec"), str(num_envs), str(steps)]
    if how is not None:
        args.append(str(how))

    def probe() -> dict[str, Any]:
        done = subprocess.run(args, capture_output=True, text=True, timeout=600, check=True)
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    r = benchmark.pedantic(probe, rounds=1, iterations=1)
    who = "EnvLogger 1.2" if how == "envlogger" else "trajcore"
    ring = f", ring_bytes {how >> 20} MiB" if isinstance(how, int) else ", defaults" if how is None else ""
    name = f"{who} CartPole x{num_envs}, {steps // 1000}k steps{ring}"
    row = {
        "group": "memory",
        "name": name,
        "peak_rss_growth_MB": r["peak_growth"] / 1e6,
        "rss_before_MB": r["rss_before"] / 1e6,
        "env_steps_per_s": r["steps"] / r["seconds"],
        "MB_written": r["bytes_written"] / 1e6,
        "command": " ".join(["python benches/memory_probe.py OUT", *args[3:]]),
    }
    if how == "envlogger":
        _ENVLOGGER_MB[num_envs] = row["peak_rss_growth_MB"]
    elif steps == PEER_STEPS and num_envs in _ENVLOGGER_MB:
        row["vs EnvLogger"] = row["peak_rss_growth_MB"] / _ENVLOGGER_MB[num_envs]
    if r["ring_waits"] is not None:
        row["ring_waits"] = r["ring_waits"]
    benchmark.extra_info.update(row)
    report.append(row)
