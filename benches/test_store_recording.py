"""Recording to object storage (issue 24): what the open shard's segments cost in bandwidth. A
CartPole x16 (sync) recording of about 20 seconds to a real S3 server on loopback (moto's
standalone server), at the default flush interval (1 s): bytes uploaded (segments, then each
sealed shard whole) against the bytes the store holds at the end, and the requests made (counted
by the core's client, `_core.remote_stats`).

    python -m pytest benches/test_store_recording.py -p no:cacheprovider --benchmark-only -s
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from trajcore import _core

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
pytest.importorskip("moto.server", reason="needs moto[server] and boto3 (pip install '.[test]')")
from s3_server import S3, s3_server

SECONDS = 20.0
NUM_ENVS = 16


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    with s3_server() as server:
        yield server


def _timed_recorder(at: str, capacity: int, s3: S3) -> tuple[Any, float, int]:
    """A bounded CartPole recorder on `at`, with the seconds and store requests making it took."""
    requests = _core.remote_stats()[0]
    start = time.perf_counter()
    rec = trajcore.RecordVectorEpisodes(
        gym.make_vec("CartPole-v1", num_envs=NUM_ENVS, vectorization_mode="sync"),
        at,
        capacity_steps=capacity,
        flush_interval=0.1,
        storage_options=s3.options,
    )
    return rec, time.perf_counter() - start, _core.remote_stats()[0] - requests


def test_segment_bandwidth(benchmark: Any, report: list[dict[str, Any]], s3: S3) -> None:
    bucket = s3.bucket()
    url = f"s3://{bucket}/cp16"

    def record() -> tuple[int, int, int]:
        requests = _core.remote_stats()[0]
        rec = trajcore.RecordVectorEpisodes(
            gym.make_vec("CartPole-v1", num_envs=NUM_ENVS, vectorization_mode="sync"), url, storage_options=s3.options
        )
        rng = np.random.default_rng(0)
        rec.reset(seed=0)
        start, steps = time.monotonic(), 0
        while time.monotonic() - start < SECONDS:
            rec.step(rng.integers(0, 2, NUM_ENVS))
            steps += 1
        rec.close()
        return rec.stats()["bytes_uploaded"], _core.remote_stats()[0] - requests, steps

    uploaded, requests, steps = benchmark.pedantic(record, rounds=1, iterations=1)
    stored = sum(o["Size"] for o in s3.client.list_objects_v2(Bucket=bucket)["Contents"])
    row = {
        "group": "object storage recording",
        "name": f"CartPole x{NUM_ENVS} sync, {SECONDS:.0f} s, flush 1 s",
        "vector_steps": steps,
        "bytes_stored": stored,
        "bytes_uploaded": uploaded,
        "uploaded_per_stored": uploaded / stored,
        "requests": requests,
    }
    benchmark.extra_info.update(row)
    report.append(row)


@pytest.mark.parametrize("num_shards", [8, 32, 128])
def test_bounded_reopen_cost(
    benchmark: Any, report: list[dict[str, Any]], s3: S3, tmp_path_factory: pytest.TempPathFactory, num_shards: int
) -> None:
    """A bounded recording reopened on a prefix of `num_shards` shards (issue 34): what making
    the recorder costs (it opens the prefix to count its shards, reads its eviction log),
    against making one on an empty prefix, and what evicting three quarters of the prefix
    costs (the deletions, at the first shard the recorder closes: here at `close`, which waits
    the flush interval between the log and the deletions, 0.1 s)."""
    source = tmp_path_factory.getbasetemp() / "reopen-source"
    if not source.exists():  # CartPole x16, 128 shards of about 16 KiB
        rec = trajcore.RecordVectorEpisodes(
            gym.make_vec("CartPole-v1", num_envs=NUM_ENVS, vectorization_mode="sync"), source, max_shard_bytes=16384
        )
        rng = np.random.default_rng(0)
        rec.reset(seed=0)
        while len(list(source.glob("*.trj"))) <= 128:
            rec.step(rng.integers(0, 2, NUM_ENVS))
        rec.close()
    shards = sorted(source.glob("*.trj"))[:num_shards]
    bucket = s3.bucket()
    for shard in shards:
        s3.client.upload_file(str(shard), bucket, f"buf/{shard.name}")
    with trajcore.open(source) as ds:
        held = sum(n for _, n in ds._core.shard_steps[:num_shards])
    capacity = held // 4
    url = f"s3://{bucket}/buf"

    empty, empty_s, _ = _timed_recorder(f"s3://{bucket}/empty", capacity, s3)
    empty.close()

    def reopen_and_evict() -> tuple[float, int, float, int]:
        rec, reopen_s, reopen_requests = _timed_recorder(url, capacity, s3)
        rng = np.random.default_rng(1)
        rec.reset(seed=1)
        for _ in range(capacity // 10 // NUM_ENVS + 2):  # one shard closed past the capacity's tenth
            rec.step(rng.integers(0, 2, NUM_ENVS))
        requests = _core.remote_stats()[0]
        start = time.perf_counter()
        rec.close()
        return reopen_s, reopen_requests, time.perf_counter() - start, _core.remote_stats()[0] - requests

    reopen_s, reopen_requests, close_s, close_requests = benchmark.pedantic(reopen_and_evict, rounds=1, iterations=1)
    left = [o["Key"] for o in s3.client.list_objects_v2(Bucket=bucket, Prefix="buf/")["Contents"]]
    evicted = num_shards - len([k for k in left if k.split("/")[-1] in {s.name for s in shards}])
    row = {
        "group": "bounded recording reopened on a store prefix",
        "name": f"{num_shards} shards, {held:,} transitions, capacity {capacity:,}",
        "reopen_s": reopen_s,
        "reopen_requests": reopen_requests,
        "reopen_per_empty": reopen_s / empty_s,
        "shards_evicted": evicted,
        "close_with_evictions_s": close_s,
        "close_requests": close_requests,
    }
    benchmark.extra_info.update(row)
    report.append(row)


@pytest.mark.parametrize("num_recorders", [1, 4])
def test_shared_prefix_cost(benchmark: Any, report: list[dict[str, Any]], s3: S3, num_recorders: int) -> None:
    """`num_recorders` bounded recorders at once on one prefix (issue 34; Ray actors, EnvRunners
    and the agents of a multi-agent recorder share a prefix so), each made while the others
    record: what making one costs (its lease, the probe of the store's clock that tells the
    others' leases fresh, the listing and count of the prefix's shards), in time and requests;
    what a reader's `evicted_steps` costs once each recording has its own eviction log (one
    listing, one request per log); the same with one recorder in the same run."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/shared"
    capacity = 4_000  # shards of 400 transitions: about 25 vector steps of CartPole x16
    recorders: list[Any] = []
    rng = np.random.default_rng(0)

    def make_all() -> tuple[float, float]:
        spent, requests = 0.0, 0
        for k in range(num_recorders):
            rec, seconds, asked = _timed_recorder(url, capacity, s3)
            spent += seconds
            requests += asked
            rec.reset(seed=k)
            recorders.append(rec)
            # The others record on while this one starts: their shards are in the prefix.
            for _ in range(600 // num_recorders):
                for r in recorders:
                    r.step(rng.integers(0, 2, NUM_ENVS))
        return spent / num_recorders, requests / num_recorders

    make_s, make_requests = benchmark.pedantic(make_all, rounds=1, iterations=1)
    for rec in recorders:
        rec.close()
    with trajcore.open(url, storage_options=s3.options) as ds:
        before = _core.remote_stats()[0]
        start = time.perf_counter()
        evicted = ds.evicted_steps
        read_s, read_requests = time.perf_counter() - start, _core.remote_stats()[0] - before
        kept = ds.num_steps
    row = {
        "group": "bounded recorders sharing a store prefix",
        "name": f"{num_recorders} recorder(s), CartPole x{NUM_ENVS}, capacity {capacity:,} each",
        "make_s": make_s,
        "make_requests": make_requests,
        "evicted_steps_read_s": read_s,
        "evicted_steps_requests": read_requests,
        "kept": kept,
        "evicted": evicted,
        "bounded": kept <= num_recorders * (capacity + capacity // 10 + NUM_ENVS),
    }
    benchmark.extra_info.update(row)
    report.append(row)


@pytest.mark.parametrize("bounded", [False, True])
def test_start_and_close_cost(benchmark: Any, report: list[dict[str, Any]], s3: S3, bounded: bool) -> None:
    """What making a recorder on an empty store prefix and closing it cost, in time and store
    requests, unbounded and bounded (issue 34: every recorder to a store holds a lease, which
    its upload thread puts first and deletes at close), the median of 5 recorders, each
    recording 100 vector steps of CartPole x16 at a flush interval of 0.1 s."""
    bucket = s3.bucket()
    made: list[tuple[float, int, float, int]] = []

    def start_and_close() -> None:
        for k in range(5):
            requests = _core.remote_stats()[0]
            start = time.perf_counter()
            rec = trajcore.RecordVectorEpisodes(
                gym.make_vec("CartPole-v1", num_envs=NUM_ENVS, vectorization_mode="sync"),
                f"s3://{bucket}/p{k}",
                capacity_steps=100_000 if bounded else None,
                flush_interval=0.1,
                storage_options=s3.options,
            )
            make_s, make_requests = time.perf_counter() - start, _core.remote_stats()[0] - requests
            rng = np.random.default_rng(k)
            rec.reset(seed=k)
            for _ in range(100):
                rec.step(rng.integers(0, 2, NUM_ENVS))
            requests = _core.remote_stats()[0]
            start = time.perf_counter()
            rec.close()
            made.append((make_s, make_requests, time.perf_counter() - start, _core.remote_stats()[0] - requests))

    benchmark.pedantic(start_and_close, rounds=1, iterations=1)
    make_s, make_requests, close_s, close_requests = (float(np.median(column)) for column in zip(*made, strict=True))
    row = {
        "group": "a recorder's start and close on a store prefix",
        "name": f"{'bounded' if bounded else 'unbounded'} CartPole x{NUM_ENVS}, 100 steps",
        "make_s": make_s,
        "make_requests": make_requests,
        "close_s": close_s,
        "close_requests": close_requests,
    }
    benchmark.extra_info.update(row)
    report.append(row)
