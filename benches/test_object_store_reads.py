"""Reading from object storage (issue 24): the same datasets on local disk and in a real S3
server on loopback (moto's standalone server), opened and read through trajcore's own client.

For random batches of 256 transitions and a full scan in order: requests and bytes fetched per
batch against the stored (compressed) bytes of the chunks the batch needed (the aim: at most 2x),
and the rate against the local files, rounds interleaved. For open(): requests and seconds, cold
(first open in the process) and again (the per-process cache). Requests and bytes are counted by
the core's client (`_core.remote_stats`), not estimated.

The per-process cache of fetched bytes is bounded (64 MiB: below the pixel dataset's size), and
the decoded-chunk cache is off on both sides. Loopback has no latency, and moto copies a whole
object to answer each range request (a cost of the test server, growing with the object's size):
times here say little about a real store; requests and bytes are what a real link pays for.

    python -m pytest benches/test_object_store_reads.py -p no:cacheprovider --benchmark-only -s
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Read once, on the first fetch: set before anything of trajcore's fetches.
os.environ.setdefault("TRAJCORE_REMOTE_CACHE_BYTES", str(64 << 20))

import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from test_reading import BATCH, _nbytes, _write
from timing import interleaved
from trajcore import _core
from trajcore._store import configure

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
pytest.importorskip("moto.server", reason="needs moto[server] and boto3 (pip install '.[test]')")
from s3_server import S3, s3_server

GROUP = "object storage"
DATASETS = {
    # name: (steps, observation space, zstd level)
    "cartpole 1M zstd": (1_000_000, spaces.Box(-np.inf, np.inf, (4,), np.float32), 3),
    "pixels 84x84 raw": (10_000, spaces.Box(0, 255, (84, 84), np.uint8), None),
    "cartpole 10M raw": (10_000_000, spaces.Box(-np.inf, np.inf, (4,), np.float32), None),
}


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    with s3_server() as server:
        yield server


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory, s3: S3) -> dict[str, tuple[Path, str]]:
    """Each dataset's local directory and its URL in the bucket."""
    root = tmp_path_factory.mktemp("object_store")
    bucket = s3.bucket()
    out = {}
    for i, (name, (steps, space, level)) in enumerate(DATASETS.items()):
        path = root / name.replace(" ", "_")
        _write(path, steps, space, seed=i, zstd_level=level)
        prefix = name.replace(" ", "_")
        s3.upload(path, bucket, prefix)
        out[name] = (path, f"s3://{bucket}/{prefix}")
    configure(f"s3://{bucket}", s3.options)  # the client's options, without a request
    return out


def _stats() -> np.ndarray:
    return np.array(_core.remote_stats()[:3], dtype=np.int64)  # requests, bytes, chunk bytes


def _report(benchmark: Any, report: list[dict[str, Any]], name: str, **figures: Any) -> None:
    """One row of the report, also kept in the benchmark's extra info."""
    row = {"group": GROUP, "name": name, **figures}
    benchmark.extra_info.update(row)
    report.append(row)


@dataclass
class AgainstLocal:
    """The same read from the store and from local files, interleaved: the store's requests and
    bytes summed over its `reads`, and the median seconds of one read on each side."""

    reads: int
    requests: int
    fetched: int
    needed: int
    s3_s: float
    local_s: float

    def figures(self, per: str, size: tuple[str, float], time: tuple[str, float]) -> dict[str, Any]:
        """The figures per read (`per`: "batch", "scan"), bytes in `size` and seconds in `time`
        units (name, how many in one)."""
        (size_unit, in_size), (time_unit, in_time) = size, time
        return {
            f"requests_per_{per}": self.requests / self.reads,
            f"{size_unit}_fetched_per_{per}": self.fetched / self.reads / in_size,
            f"{size_unit}_chunks_needed_per_{per}": self.needed / self.reads / in_size,
            "fetched_over_needed": self.fetched / max(self.needed, 1),
            f"s3_{time_unit}_per_{per}": self.s3_s * in_time,
            f"local_{time_unit}_per_{per}": self.local_s * in_time,
            "s3_over_local_time": self.s3_s / self.local_s,
        }


def _against_local(
    benchmark: Any, remote: Callable[[int], Any], local: Callable[[int], Any], **timing: Any
) -> AgainstLocal:
    """`remote(i)` against `local(i)`, interleaved (`timing`: `interleaved`'s), counting the
    store's requests and bytes of each remote read."""
    counts: list[np.ndarray] = []

    def counted(i: int) -> None:
        before = _stats()
        remote(i)
        counts.append(_stats() - before)

    t = benchmark.pedantic(lambda: interleaved({"s3": counted, "local": local}, **timing), rounds=1, iterations=1)
    requests, fetched, needed = np.sum(counts, axis=0)
    return AgainstLocal(
        len(counts), int(requests), int(fetched), int(needed), statistics.median(t["s3"]), statistics.median(t["local"])
    )


@contextmanager
def _both(stored: tuple[Path, str]) -> Iterator[tuple[trajcore.Dataset, trajcore.Dataset]]:
    """The local copy and the store's, without a decoded-chunk cache (every read decodes)."""
    path, url = stored
    with trajcore.open(path, cache_bytes=0) as local, trajcore.open(url, cache_bytes=0) as remote:
        yield local, remote


@pytest.mark.parametrize("name", list(DATASETS))
def test_open(benchmark: Any, report: list[dict[str, Any]], stored: dict[str, tuple[Path, str]], name: str) -> None:
    path, url = stored[name]

    def measure() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for when in ("cold", "again"):
            before, start = _stats(), time.perf_counter()
            with trajcore.open(url) as ds:
                out[when] = (time.perf_counter() - start, *(_stats() - before)[:2], ds.num_steps)
        start = time.perf_counter()
        trajcore.open(path).close()
        out["local"] = time.perf_counter() - start
        return out

    t = benchmark.pedantic(measure, rounds=1, iterations=1)
    shards = len(list(path.glob("*.trj")))
    _report(
        benchmark,
        report,
        f"open(), {name}",
        steps=t["cold"][3],
        shards=shards,
        dataset_MB=sum(f.stat().st_size for f in path.glob("*.trj")) / 1e6,
        cold_ms=t["cold"][0] * 1e3,
        cold_requests=int(t["cold"][1]),
        cold_MB_fetched=t["cold"][2] / 1e6,
        again_ms=t["again"][0] * 1e3,
        again_requests=int(t["again"][1]),
        local_ms=t["local"] * 1e3,
    )


@pytest.mark.parametrize("name", ["cartpole 1M zstd", "pixels 84x84 raw"])
def test_random_batches(
    benchmark: Any, report: list[dict[str, Any]], stored: dict[str, tuple[Path, str]], name: str
) -> None:
    with _both(stored[name]) as (local, remote):
        batch_bytes = _nbytes(remote.sample_transitions(BATCH, seed=0))
        c = _against_local(
            benchmark,
            lambda i: remote.sample_transitions(BATCH, seed=1000 + i),
            lambda i: local.sample_transitions(BATCH, seed=1000 + i),
            seconds=4.0,
        )
    _report(
        benchmark,
        report,
        f"random batch of {BATCH}, {name}",
        batches=c.reads,
        batch_payload_KB=batch_bytes / 1e3,
        **c.figures("batch", ("KB", 1e3), ("ms", 1e3)),
    )


@pytest.mark.parametrize("name", ["cartpole 1M zstd", "pixels 84x84 raw"])
def test_full_scan(
    benchmark: Any, report: list[dict[str, Any]], stored: dict[str, tuple[Path, str]], name: str
) -> None:
    path = stored[name][0]
    block = 1024 if name.startswith("pixels") else 65536

    def scan(ds: trajcore.Dataset) -> int:
        total = 0
        for start in range(0, ds.num_steps, block):
            total += _nbytes(ds.transitions[start : min(start + block, ds.num_steps)])
        return total

    with _both(stored[name]) as (local, remote):
        c = _against_local(benchmark, lambda _: scan(remote), lambda _: scan(local), seconds=10.0, rounds=3)
    stored_bytes = sum(f.stat().st_size for f in path.glob("*.trj"))
    _report(
        benchmark,
        report,
        f"full scan in order, {name}",
        scans=c.reads,
        dataset_MB=stored_bytes / 1e6,
        **c.figures("scan", ("MB", 1e6), ("s", 1)),
    )
