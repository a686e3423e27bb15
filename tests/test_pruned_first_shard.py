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


def _record_pruned(path: Path, compact_shards: bool = False) -> None:
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(4)])
    rec = trajcore.RecordVectorEpisodes(
        envs, path, max_shard_bytes=8000, flush_interval=0.01, compact_shards=compact_shards
    )
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


def _parts(ds: trajcore.Dataset) -> list[tuple[Any, ...]]:
    """The parts listed on their own (incomplete, ended by the env): their rows and flags."""
    return sorted(
        (
            (
                ep.env_index,
                ep.length,
                np.asarray(ep.observations).tobytes(),
                ep.terminated,
                ep.truncated,
                np.asarray(ep.terminations).tolist(),
                np.asarray(ep.truncations).tolist(),
            )
            for ep in ds.episodes
            if not ep.complete and (ep.terminated or ep.truncated)
        ),
    )


def test_a_part_keeps_its_flags_through_every_copy(tmp_path: Path) -> None:
    """Issue 33, point 1: a part listed on its own ends as its episode did (its last step
    terminated or truncated): recover, convert, compaction and the exports keep those flags, and
    keep it incomplete (it is no whole episode)."""
    _record_pruned(tmp_path / "run")
    with trajcore.open(tmp_path / "run") as ds:
        want = _parts(ds)
    assert want and any(p[3] for p in want), "a part the env terminated"
    for p in want:
        assert p[5][-1] == p[3] and p[6][-1] == p[4], "the source's own rows say how it ended"
    trajcore.recover(tmp_path / "run", tmp_path / "rec")
    trajcore.convert(tmp_path / "run", tmp_path / "conv")
    for copy in ("rec", "conv"):
        assert trajcore.verify(tmp_path / copy).intact, copy
        with trajcore.open(tmp_path / copy) as ds:
            assert _parts(ds) == want, copy
        # A copy of a copy too (its parts now begin in its own first shard).
        trajcore.convert(tmp_path / copy, tmp_path / f"{copy}2")
        with trajcore.open(tmp_path / f"{copy}2") as ds:
            assert _parts(ds) == want, f"{copy} copied again"


def test_a_part_keeps_its_flags_through_compaction(tmp_path: Path) -> None:
    """Shards compacted as they seal (their Episode records rewritten), the first one pruned
    after: each part still ends as the env ended it, and is incomplete."""
    _record_pruned(tmp_path / "run", compact_shards=True)
    with trajcore.open(tmp_path / "run") as ds:
        got = _parts(ds)
        assert ds.num_episodes > len(got) > 0
    assert any(p[3] for p in got)
    for p in got:
        assert (p[5][-1], p[6][-1]) == (p[3], p[4])
        assert not any(p[5][:-1]) and not any(p[6][:-1])


def test_a_part_keeps_its_flags_through_the_exports(tmp_path: Path) -> None:
    import json

    import pyarrow.parquet as pq

    _record_pruned(tmp_path / "run")
    with trajcore.open(tmp_path / "run") as ds:
        parts = [ep for ep in ds.episodes if not ep.complete and ep.terminated]
        assert parts
        trajcore.export(ds, tmp_path / "run.parquet")
        trajcore.export(ds, tmp_path / "run.jsonl")
        table = pq.read_table(tmp_path / "run.parquet").to_pydict()
        lines = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
        for ep in parts:
            rows = [i for i, e in enumerate(table["episode"]) if e == ep.index]
            assert [table["terminated"][i] for i in rows] == np.asarray(ep.terminations).tolist()
            assert table["terminated"][rows[-1]] is True
            (line,) = [x for x in lines if x["eps_id"][0] == ep.index]
            assert line["terminateds"][-1] is True


def test_a_part_keeps_its_flags_through_minari(tmp_path: Path, monkeypatch: Any) -> None:
    import minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    _record_pruned(tmp_path / "run")
    with trajcore.open(tmp_path / "run") as ds:
        trajcore.export(ds, "trajcore-test/parts-v0", "minari")
        episodes = [ep for ep in ds.episodes if ep.length > 0]
        loaded = minari.load_dataset("trajcore-test/parts-v0")
        metas = list(loaded.storage.get_episode_metadata(range(len(episodes))))
        parts = 0
        for got, ep, meta in zip(loaded.iterate_episodes(), episodes, metas, strict=True):
            np.testing.assert_array_equal(got.terminations, ep.terminations)
            np.testing.assert_array_equal(got.truncations, ep.truncations)
            if not ep.complete and ep.terminated:
                parts += 1
                assert got.terminations[-1]
                assert bool(meta["trajcore"]["terminated"]) and not bool(meta["trajcore"]["complete"])
        assert parts > 0
        want = _parts(ds)
    # And back: a part again, not a whole episode (one env: the sub-env index is not kept).
    trajcore.import_minari("trajcore-test/parts-v0", tmp_path / "back")
    with trajcore.open(tmp_path / "back") as back:
        assert sorted(p[1:] for p in _parts(back)) == sorted(p[1:] for p in want)
