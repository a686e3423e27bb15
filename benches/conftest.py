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
# MuJoCo renders through GLFW by default, which needs a display: without one the frame benches
# abort the whole run. EGL (Mesa's software driver) renders headless.
os.environ.setdefault("MUJOCO_GL", "egl")

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
        if r["group"] == "memory" and r["name"].startswith("trajcore") and "1000k steps" in r["name"]:
            mb = r["peak_rss_growth_MB"]
            out.append(f"RSS growth < 50 MB for 1M steps ({r['name']}): {'met' if mb < 50 else 'MISSED'} ({mb:.1f} MB)")
        if r["group"] == "video export":
            fps = r["export_frames_per_s"]
            out.append(
                f">= 30 fps mp4 export of 84x84 frames on one encoder thread ({r['name']}): "
                f"{'met' if fps >= 30 else 'MISSED'} ({fps:,.0f} frames/s)"
            )
    return out


# Issue 14's ratio targets: (target, group, row name, figure, bound, "min" or "max").
_TORCHRL, _H5PY = "TorchRL LazyMemmapStorage", "h5py (D4RL layout)"
_ATARI, _PIXELS, _CARTPOLE = "read vs peers: atari", "read vs peers: pixels", "read vs peers: cartpole x16 full scan"
_ISSUE14 = [
    ("random 256-batches, Atari, >= 1.5x TorchRL", _ATARI, _TORCHRL, "tc/peer batch rate", 1.5, "min"),
    ("random 256-batches, synthetic pixels, >= 1x TorchRL", _PIXELS, _TORCHRL, "tc/peer batch rate", 1.0, "min"),
    ("full scan, CartPole x16, >= 1x h5py", _CARTPOLE, _H5PY, "tc/peer scan rate", 1.0, "min"),
    ("full scan, Atari, >= 1x TorchRL", _ATARI, _TORCHRL, "tc/peer scan rate", 1.0, "min"),
    ("bytes per step, Atari, <= 0.8x EnvLogger", _ATARI, "EnvLogger 1.2", "tc/peer bytes", 0.8, "max"),
    (
        "file size independent of the recording's pace (live / replayed <= 1.03)",
        "read vs peers: atari recording pace",
        "recorded live",
        "vs replayed",
        1.03,
        "max",
    ),
    (
        "step call with RecordEpisodeStatistics infos <= 1.3x the call without",
        "recording round 2",
        "recorder call, CartPole x16, RecordEpisodeStatistics infos",
        "vs without infos",
        1.3,
        "max",
    ),
    (
        # The call without infos on the same env: CartPole's own loop (below, for information)
        # also counts what RecordEpisodeStatistics's numpy work between calls does to the
        # recorder's caches, infos or not.
        "the same, on a real env loop (against the same env with its infos left out)",
        "recording round 2",
        "recorder call, CartPole x16 real env loop, RecordEpisodeStatistics infos",
        "vs infos left out",
        1.3,
        "max",
    ),
]


def _issue14_targets(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 14's targets, from the rows present (a target whose rows did not run is left out)."""
    by = {(r["group"], r["name"]): r for r in rows}
    out = []
    for what, group, name, key, bound, kind in _ISSUE14:
        value = by.get((group, name), {}).get(key)
        if value is not None:
            ok = value >= bound if kind == "min" else value <= bound
            out.append(f"{what}: {'met' if ok else 'MISSED'} ({value:.3g}x)")
    real = by.get(("recording round 2", "recorder call, CartPole x16 real env loop, RecordEpisodeStatistics infos"))
    if real is not None and "vs without infos" in real:
        out.append(f"(for information) the real env loop against CartPole's own loop: {real['vs without infos']:.3g}x")
    for r in rows:
        if r["group"] == "memory" and "vs EnvLogger" in r:
            ok = "met" if r["vs EnvLogger"] <= 1 else "MISSED"
            out.append(
                f"RSS growth <= EnvLogger's ({r['name']}): {ok} ({r['peak_rss_growth_MB']:.1f} MB, "
                f"{r['vs EnvLogger']:.2f}x EnvLogger's)"
            )
    ext = by.get(("recording round 2", "installed extension"))
    if ext is not None:
        ok = "met" if not ext["debug_sections"] else "MISSED"
        out.append(
            f"installed extension stripped of debug info: {ok} ({ext['MB']:.1f} MB, debug sections: "
            f"{ext['debug_sections'] or 'none'})"
        )
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
    targets14 = _issue14_targets(_RESULTS)
    if targets14:
        terminalreporter.write_line("[targets of issue 14]")
        for line in targets14:
            terminalreporter.write_line("  " + line)
    path = config.getoption("--figures-json")
    if path:
        with open(path, "w") as f:
            json.dump({"rows": _RESULTS, "targets": targets, "targets_issue_14": targets14}, f, indent=2)
            f.write("\n")
