"""Annotations (issue 35): reading a column from a sidecar (`trajcore.annotate`) against the same
values recorded in place as custom data, in one dataset, rounds interleaved: random batches of
transitions (`sample_transitions` with the column as a key) and whole-episode reads of the column.
Target: the sidecar's within 1.1x of in place.

The dataset holds 1M steps whose custom value is 16 float32 (64 MB a column, twice the L3 cache
of the machine the figures were taken on; random values, so zstd stores them about as large), as
episodes of 200 steps written through `trajcore.Writer`; the same values are then annotated.

    python -m pytest benches/test_annotations.py -p no:cacheprovider --benchmark-only -s
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from timing import interleaved

GROUP = "annotations"
STEPS = 1_000_000
EPISODE = 200
WIDTH = 16  # float32 values per step: 64 bytes a row


@pytest.fixture(scope="module")
def annotated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("annotations") / "ds"
    rng = np.random.default_rng(0)
    episodes = STEPS // EPISODE
    values = []
    with trajcore.Writer(path, spaces.Box(-1, 1, (4,)), spaces.Discrete(2)) as w:
        for _ in range(episodes):
            v = rng.standard_normal((EPISODE, WIDTH), dtype=np.float32)
            w.add_episode(
                observations=np.zeros((EPISODE + 1, 4), np.float32),
                actions=np.zeros(EPISODE, np.int64),
                rewards=np.ones(EPISODE),
                terminations=np.arange(EPISODE) == EPISODE - 1,
                truncations=np.zeros(EPISODE, bool),
                data={"inplace": v},
            )
            values.append(v)
    trajcore.annotate(path, "side", values)
    return path


def _row(name: str, times: dict[str, list[float]]) -> dict[str, Any]:
    side, inplace = statistics.median(times["side"]), statistics.median(times["inplace"])
    return {
        "group": GROUP,
        "name": name,
        "sidecar_ms": side * 1e3,
        "in_place_ms": inplace * 1e3,
        "ratio": side / inplace,
        "target": "<= 1.1x",
    }


def test_sampling_with_an_annotated_key(benchmark: Any, report: list[dict[str, Any]], annotated: Path) -> None:
    with trajcore.open(annotated) as ds:
        check = ds.sample_transitions(64, seed=1, keys=["data/side", "data/inplace"])
        np.testing.assert_array_equal(check["data/side"], check["data/inplace"])

        def batch(key: str) -> Any:
            return lambda i: ds.sample_transitions(4096, seed=i, keys=["rewards", key])

        fns = {"side": batch("data/side"), "inplace": batch("data/inplace")}
        times = benchmark.pedantic(lambda: interleaved(fns, 8.0, rounds=5), rounds=1, iterations=1)
    row = _row("sample_transitions 4096, one 16-float column", times)
    benchmark.extra_info.update(row)
    report.append(row)


def test_whole_episode_reads(benchmark: Any, report: list[dict[str, Any]], annotated: Path) -> None:
    with trajcore.open(annotated) as ds:
        core, n = ds._core, ds.num_episodes
        order = np.random.default_rng(2).permutation(n)
        np.testing.assert_array_equal(core.read_column(5, "data/side"), core.read_column(5, "data/inplace"))

        def episode(column: str) -> Any:
            return lambda i: core.read_column(int(order[i % n]), column)

        fns = {"side": episode("data/side"), "inplace": episode("data/inplace")}
        times = benchmark.pedantic(lambda: interleaved(fns, 6.0, rounds=5), rounds=1, iterations=1)
    row = _row("one episode's column (200 x 16 float32), random episodes", times)
    benchmark.extra_info.update(row)
    report.append(row)
