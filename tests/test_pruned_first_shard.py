"""A dataset whose first shard was pruned (FORMAT.md: shards missing before the first present one
of a recording are not damage) opens and verifies; `recover` and `convert` copy every episode and
every part of one it lists (issue 23, point 4): a part whose start was in the pruned shard is
copied as an incomplete episode."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import trajcore
from format_decoder import KIND_EPISODE, hop


def _record_pruned(path: Path) -> None:
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(4)])
    rec = trajcore.RecordVectorEpisodes(envs, path, max_shard_bytes=8000, flush_interval=0.01, compact_shards=False)
    rec.reset(seed=0)
    rec.action_space.seed(0)
    for i in range(2000):
        rec.step(rec.action_space.sample())
        if i % 100 == 0:
            time.sleep(0.02)  # the flush timer writes, so shards fill and roll over
    rec.close()
    shards = sorted(path.glob("*.trj"))
    assert len(shards) >= 3
    shards[0].unlink()


def _rows(ep: Any) -> tuple[Any, ...]:
    return (ep.env_index, ep.length, np.asarray(ep.observations), np.asarray(ep.actions), np.asarray(ep.rewards))


def test_recover_and_convert_copy_every_listed_episode_and_part(tmp_path: Path) -> None:
    _record_pruned(tmp_path / "run")
    assert trajcore.verify(tmp_path / "run").intact
    with trajcore.open(tmp_path / "run") as ds:
        want = [_rows(ep) for ep in ds.episodes]
        parts = sum(1 for ep in ds.episodes if not ep.complete and (ep.terminated or ep.truncated))
    assert parts > 0, "the pruned shard held the start of some listed part"
    trajcore.recover(tmp_path / "run", tmp_path / "rec")
    trajcore.convert(tmp_path / "run", tmp_path / "conv")
    for copy in ("rec", "conv"):
        with trajcore.open(tmp_path / copy) as ds:
            got = sorted(
                (
                    (
                        ep.env_index,
                        ep.length,
                        np.asarray(ep.observations),
                        np.asarray(ep.actions),
                        np.asarray(ep.rewards),
                    )
                    for ep in ds.episodes
                ),
                key=lambda e: (e[0], e[2].tobytes()),
            )
            assert len(got) == len(want), copy
            for g, w in zip(got, sorted(want, key=lambda e: (e[0], e[2].tobytes())), strict=True):
                assert g[:2] == w[:2]
                for a, b in zip(g[2:], w[2:], strict=True):
                    np.testing.assert_array_equal(a, b)
            # A part is no whole episode: it is copied as an incomplete one.
            assert sum(1 for ep in ds.episodes if not ep.complete) >= parts


def test_verify_reports_a_middle_shard_that_lost_its_end(tmp_path: Path) -> None:
    """A closed recording's middle shard cut at a record boundary (Episode records, Index and End
    gone) is damage that names the episodes lost, though every record left is intact."""
    _record_pruned(tmp_path / "run")  # pruning the first shard keeps the rest as they were
    with trajcore.open(tmp_path / "run") as ds:
        before = ds.num_episodes
    shards = sorted((tmp_path / "run").glob("*.trj"))
    middle = shards[len(shards) // 2]
    buf = middle.read_bytes()
    records, _ = hop(buf)
    episode_records = [r.offset for r in records if r.kind == KIND_EPISODE]
    cut = episode_records[0]  # a record boundary: every Episode record of the shard after it
    middle.write_bytes(buf[:cut])
    with trajcore.open(tmp_path / "run") as ds:
        lost = before - ds.num_episodes
    assert lost > 0
    report = trajcore.verify(tmp_path / "run")
    assert not report.intact
    (damage,) = [d for d in report.damage if "without its End record" in d.why]
    assert damage.file == str(middle) and damage.offset == cut
    assert f"({lost} episode(s) of the recording are missing" in damage.why
