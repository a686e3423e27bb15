"""How far a shard goes past `max_shard_bytes` (issue 23, point 5), the bound FORMAT.md states:
the Chunks records that end past the limit hold at most one chunk per (lane, column), each within
its column's `chunk_bytes` plus two rows; the rest past the limit is the Episode, Timelog, Index
and End records that finish the shard."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import gymnasium as gym
import pytest
import trajcore
from format_decoder import KIND_CHUNKS, KIND_COLUMN, KIND_META, decode_chunk_refs, hop

LIMIT = 40_000
CHUNK = 2048


def _past_the_limit(shard: Path) -> tuple[Counter[tuple[int, int]], list[int]]:
    """(lane, column) of each chunk in a Chunks record that ends past `LIMIT`, and the kinds of
    the other records that do."""
    buf = shard.read_bytes()
    records, _ = hop(buf)
    chunks: Counter[tuple[int, int]] = Counter()
    others = []
    for r in records:
        if r.next <= LIMIT:
            continue
        if r.kind == KIND_CHUNKS:
            chunks.update((c.lane, c.column) for c in decode_chunk_refs(buf, r) if not c.repeat)
        else:
            others.append(r.kind)
    return chunks, others


@pytest.mark.parametrize("flush_interval", [0.01, 1.0])
def test_a_shard_ends_within_the_limit_plus_one_chunk_per_lane_and_column(
    tmp_path: Path, flush_interval: float
) -> None:
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(8)])
    rec = trajcore.RecordVectorEpisodes(
        envs,
        tmp_path / "run",
        max_shard_bytes=LIMIT,
        chunk_bytes=CHUNK,
        flush_interval=flush_interval,
        compact_shards=False,
        codecs={"default": {"zstd_level": None}},
    )
    rec.reset(seed=0)
    for i in range(6000):
        rec.step(rec.action_space.sample())
        if i % 500 == 0:
            time.sleep(0.02)
    rec.close()
    shards = sorted((tmp_path / "run").glob("*.trj"))
    assert len(shards) >= 3
    for shard in shards:
        size = shard.stat().st_size
        chunks, others = _past_the_limit(shard)
        assert all(n == 1 for n in chunks.values()), f"{shard.name}: {chunks.most_common(3)}"
        assert KIND_META not in others and KIND_COLUMN not in others
        if shard != shards[-1]:
            assert size > LIMIT
    with trajcore.open(tmp_path / "run") as ds:
        assert ds.num_episodes > 0
