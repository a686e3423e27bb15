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
