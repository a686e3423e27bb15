"""Benchmarks: run with `python -m pytest benches -p no:cacheprovider --benchmark-only -s`.

Every figure is a ratio measured in one run (with vs without trajcore, interleaved, or trajcore vs
a baseline on the same workload in the same session), because the machine is shared and noisy;
absolute numbers are printed for scale only.

Each benchmark appends a row (a dict with "group" and "name") to the `report` fixture and puts the
same figures in `benchmark.extra_info`. The terminal summary prints one table per group, then the
issue's targets, and ``--figures-json PATH`` writes every row as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

# The bench modules import each other (workloads, baselines) as top-level modules.
sys.path.insert(0, os.path.dirname(__file__))
# OpenBLAS (numpy's) keeps worker threads spinning after a call: on a 2-core machine they take
# the core the recorder's writer thread needs. No benchmark here uses BLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

_RESULTS: list[dict[str, Any]] = []


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--figures-json", metavar="PATH", help="write every benchmark figure as JSON to PATH")


@pytest.fixture(scope="session")
def report() -> list[dict[str, Any]]:
    return _RESULTS


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def _targets(rows: list[dict[str, Any]]) -> list[str]:
    """The issue's targets, from the rows present (a target whose rows did not run is left out)."""
    by = {(r["group"], r["name"]): r for r in rows}
    out = []
    cp = by.get(("overhead", "trajcore CartPole x16 sync"))
    if cp:
        call, e2e = cp["call_us_per_vector_step"], cp["overhead_us_per_vector_step"]
        ok = "met" if call <= 1.5 else "MISSED"
        out.append(
            f"<= 1.5 us per vector step of 16 CartPole sub-envs: {ok} (recorder call {call:.2f} us; "
            f"end to end {e2e:.2f} us, spread {cp['overhead_us_spread']})"
        )
    pix = {r["name"]: r for r in rows if r["group"] == "pixels"}
    zstd, plain = pix.get("zstd -1, lane order"), pix.get("trajcore zstd 1")
    delta, step = pix.get("trajcore delta + zstd 1"), pix.get("zstd -1, step order")
    busy = pix.get("zstd -1, lane order, env loop running")
    if zstd and plain and delta and step and busy:
        for r in (plain, delta):
            share = r["vs_zstd1_lane_order"]
            ok = "met" if share >= 0.9 else "MISSED"
            out.append(
                f">= 90% of single-thread zstd-1 on the same bytes ({r['name']}): {ok} ({100 * share:.0f}% of "
                f"lane order; {100 * r['MB_per_s'] / step['MB_per_s']:.0f}% of step order; "
                f"{100 * r['MB_per_s'] / busy['MB_per_s']:.0f}% of lane order beside the env loop)"
            )
    env_logger = pix.get("EnvLogger 1.2")
    if delta and env_logger:
        size = delta["bytes_on_disk_per_step"] / env_logger["bytes_on_disk_per_step"]
        speed = delta["MB_per_s"] / env_logger["MB_per_s"]
        ok = "met" if size <= 1.0 and speed >= 5.0 else "MISSED"
        out.append(f"delta files <= EnvLogger's at >= 5x its speed: {ok} (size {size:.2f}x, speed {speed:.1f}x)")
    for r in rows:
        if r["group"] == "memory":
            mb = r["peak_rss_growth_MB"]
            out.append(f"RSS growth < 50 MB for 1M steps ({r['name']}): {'met' if mb < 50 else 'MISSED'} ({mb:.1f} MB)")
    return out


def pytest_terminal_summary(terminalreporter: Any, config: Any) -> None:
    if not _RESULTS:
        return
    terminalreporter.section("trajcore figures (ratios measured in this run)")
    terminalreporter.write_line(f"load average at the end (1, 5, 15 min): {os.getloadavg()}")
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in _RESULTS:
        groups.setdefault(row["group"], []).append(row)
    for group, rows in groups.items():
        keys = [k for k in dict.fromkeys(k for r in rows for k in r) if k != "group"]
        cells = [[_fmt(r.get(k, "")) for k in keys] for r in rows]
        widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
        terminalreporter.write_line(f"[{group}]")
        terminalreporter.write_line("  ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)))
        for c in cells:
            terminalreporter.write_line("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)))
        terminalreporter.write_line("")
    targets = _targets(_RESULTS)
    if targets:
        terminalreporter.write_line("[targets of issue 5]")
        for line in targets:
            terminalreporter.write_line("  " + line)
    path = config.getoption("--figures-json")
    if path:
        with open(path, "w") as f:
            json.dump({"rows": _RESULTS, "targets": targets}, f, indent=2)
            f.write("\n")
