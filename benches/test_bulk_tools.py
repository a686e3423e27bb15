"""Every tool reads at the bulk rate (issue 22, point 4): on a CartPole vector recording of
1.5M steps (16 sub-envs, the README's first command at 96k vector steps), in one run:

- Ray Data, ``trajcore.ray.read_transitions(path).iter_batches(batch_size=65536)`` consumed
  here, against the local bulk read ``ds.transitions.blocks(65536)`` of the same transitions
  (the same columns: observations, next observations, actions, rewards, flags) on the same
  cores (`ray.init(num_cpus=os.cpu_count())`, started once, before the clock);
- the CLI's export of the path (``python -m trajcore export PATH OUT``) against the API's,
  ``trajcore.export(trajcore.open(PATH), OUT)``, for parquet, csv and jsonl: each a fresh
  subprocess timed from start to exit (imports, opening and writing), alternating.

    python -m pytest benches/test_bulk_tools.py -p no:cacheprovider --benchmark-only -s

Set ``TRAJCORE_BULK_STEPS`` for another size (vector steps of 16 sub-envs; default 96,000),
``TRAJCORE_BULK_ROUNDS`` for other rounds (default 3 of Ray, 2 of each export).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

GROUP = "bulk tools"
NUM_ENVS = 16
VECTOR_STEPS = int(os.environ.get("TRAJCORE_BULK_STEPS", "96000"))
BATCH = 65_536
ROUNDS = int(os.environ.get("TRAJCORE_BULK_ROUNDS", "3"))
COLUMNS = ["obs", "next_obs", "action", "reward", "terminated", "truncated"]
KEYS = ["observations", "next_observations", "actions", "rewards", "terminations", "truncations"]


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's first command: CartPole-v1, 16 sub-envs, random actions."""
    path = tmp_path_factory.mktemp("bulk") / "cp16"
    record = ["record", "CartPole-v1", "--num-envs", str(NUM_ENVS), "--steps", str(VECTOR_STEPS)]
    subprocess.run(
        [sys.executable, "-m", "trajcore", *record, str(path)],
        check=True,
        capture_output=True,
    )
    return path


def _row(name: str, **figures: Any) -> dict[str, Any]:
    return {"group": GROUP, "name": name, **figures}


def test_ray_read_against_the_local_bulk_read(benchmark: Any, report: list[dict[str, Any]], cartpole: Path) -> None:
    ray = pytest.importorskip("ray")
    import trajcore
    import trajcore.ray

    cpus = os.cpu_count() or 1
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)

    def local() -> int:
        with trajcore.open(cartpole) as ds:
            return sum(len(b["step_index"]) for b in ds.transitions.blocks(BATCH, keys=KEYS))

    def ray_data() -> int:
        data = trajcore.ray.read_transitions(cartpole, columns=COLUMNS)
        return sum(len(b["step"]) for b in data.iter_batches(batch_size=BATCH, batch_format="numpy"))

    def measure() -> dict[str, list[float]]:
        times: dict[str, list[float]] = {"local": [], "ray": []}
        ray_data()  # the workers start, import trajcore and Ray Data's operators once
        for _ in range(ROUNDS):  # interleaved: load on the shared machine hits both alike
            for name, read in (("local", local), ("ray", ray_data)):
                start = time.perf_counter()
                steps = read()
                times[name].append(time.perf_counter() - start)
                times.setdefault("steps", []).append(steps)
        return times

    try:
        times = benchmark.pedantic(measure, rounds=1, iterations=1)
    finally:
        if started_here:
            ray.shutdown()
    steps = int(times["steps"][0])
    assert all(s == steps for s in times["steps"])
    local_rate = steps / statistics.median(times["local"])
    ray_rate = steps / statistics.median(times["ray"])
    ratios = [loc / r for loc, r in zip(times["local"], times["ray"], strict=True)]
    row = _row(
        f"Ray read_transitions vs transitions.blocks, {cpus} CPUs",
        steps=steps,
        local_steps_per_s=local_rate,
        ray_steps_per_s=ray_rate,
        ray_vs_local=ray_rate / local_rate,
        ratio_spread=f"{min(ratios):.3f}..{max(ratios):.3f}",
    )
    report.append(row)
    benchmark.extra_info.update(row)


_API = """
import sys, trajcore
src, out, fmt = sys.argv[1:4]
with trajcore.open(src) as ds:
    trajcore.export(ds, out, fmt, force=True)
"""


def _seconds(command: list[str]) -> float:
    """Wall seconds of a subprocess, start to exit."""
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def _cli_export(src: Path, out: Path, fmt: str) -> float:
    return _seconds([sys.executable, "-m", "trajcore", "export", str(src), str(out), "--format", fmt, "--force"])


def _api_export(src: Path, out: Path, fmt: str) -> float:
    return _seconds([sys.executable, "-c", _API, str(src), str(out), fmt])


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_cli_export_against_the_api(
    benchmark: Any, report: list[dict[str, Any]], cartpole: Path, tmp_path: Path, fmt: str
) -> None:
    if fmt == "parquet":
        pytest.importorskip("pyarrow")

    def measure() -> dict[str, list[float]]:
        times: dict[str, list[float]] = {"cli": [], "api": []}
        for _ in range(max(1, ROUNDS - 1)):
            times["cli"].append(_cli_export(cartpole, tmp_path / f"cli.{fmt}", fmt))
            times["api"].append(_api_export(cartpole, tmp_path / f"api.{fmt}", fmt))
        return times

    times = benchmark.pedantic(measure, rounds=1, iterations=1)
    cli, api = statistics.median(times["cli"]), statistics.median(times["api"])
    row = _row(f"export {fmt}: CLI of the path vs API of trajcore.open", cli_s=cli, api_s=api, cli_vs_api=cli / api)
    report.append(row)
    benchmark.extra_info.update(row)
