"""Compaction of closed shards (`compact_shards`): a recording whose flush timer cut its chunks
small (a slow env; here `flush()` every few steps, which seals the same way) is rewritten at close
into the chunks a fast recording makes. Every value reads back the same, through trajcore and
through the independent decoder; the file is as small as the fast recording's; shards that
roll over, frame stacks and a reader holding the file while it is replaced all keep working."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import format_decoder as fd
import gymnasium as gym
import numpy as np
import trajcore
from gymnasium.wrappers import FrameStackObservation
from gymnasium.wrappers.vector import RecordEpisodeStatistics
from helpers import assert_tree_equal
from test_format_decoder import compare_with_trajcore
from test_frame_stacks import FrameEnv

NUM_ENVS, STEPS = 4, 3_000


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.suffix == ".trj")


def chunk_count(path: Path) -> int:
    return sum(len(shard.chunks) for shard in fd.DecodedDataset(path).shards)


def record_vector(path: Path, flush_every: int | None, **options: Any) -> dict[str, Any]:
    """16-step-episode-ish CartPole x4 with `RecordEpisodeStatistics` infos; `flush_every`: seal
    everything every so many steps, as a slow env's flush timer does."""
    env = RecordEpisodeStatistics(gym.make_vec("CartPole-v1", num_envs=NUM_ENVS, vectorization_mode="sync"))
    # No flush timer: on a loaded machine the 1 s default would cut the "fast" recording's chunks
    # too, and then it compacts like the slow one (the test compares against a run cut by no timer).
    options.setdefault("flush_interval", 3600.0)
    rec = trajcore.RecordVectorEpisodes(env, path, **options)
    rec.reset(seed=0)
    rng = np.random.default_rng(0)
    for t in range(STEPS):
        rec.step(rng.integers(0, 2, NUM_ENVS))
        if flush_every and t % flush_every == 0:
            rec.flush()
    rec.close()
    stats: dict[str, Any] = rec.stats()
    return stats


def episodes(path: Path) -> list[dict[str, Any]]:
    with trajcore.open(path) as ds:
        return [
            {
                "env": e.env_index,
                "obs": e.observations,
                "actions": e.actions,
                "rewards": e.rewards,
                "terminated": e.terminations,
                "truncated": e.truncations,
                "infos": without_times(e.infos),
                "complete": e.complete,
            }
            for e in ds.episodes
        ]


def without_times(infos: dict[str, Any]) -> dict[str, Any]:
    """The infos less `RecordEpisodeStatistics`' wall-clock episode times, which differ per run."""
    episode = infos.get("episode")
    if not isinstance(episode, dict):
        return infos
    return {**infos, "episode": {k: v for k, v in episode.items() if k not in ("t", "_t")}}


def assert_same_episodes(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert len(got) == len(want) > 0
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_tree_equal(g, w, f"episode {i}")


def test_a_timer_cut_recording_is_compacted_to_the_fast_one(tmp_path: Path) -> None:
    fast = record_vector(tmp_path / "fast", None)
    cut = record_vector(tmp_path / "cut", 15, compact_shards=False)
    compacted = record_vector(tmp_path / "compacted", 15)
    assert fast["shards_compacted"] == 0 and cut["shards_compacted"] == 0
    assert compacted["shards_compacted"] == 1 and compacted["compaction_error"] is None
    sizes = {name: dir_bytes(tmp_path / name) for name in ("fast", "cut", "compacted")}
    # The flush every 15 steps makes ~200 chunks per column and lane; compaction undoes them.
    assert sizes["cut"] > 1.5 * sizes["fast"]
    assert sizes["compacted"] <= 1.03 * sizes["fast"]
    # What it saved, of about what the uncompacted run's file holds (timings differ per run).
    assert 0.9 * (sizes["cut"] - sizes["compacted"]) < compacted["bytes_compacted"] < sizes["cut"]
    assert compacted["bytes_written"] <= sizes["compacted"] < 1.03 * sizes["fast"]
    assert chunk_count(tmp_path / "compacted") <= chunk_count(tmp_path / "fast") + NUM_ENVS
    want = episodes(tmp_path / "fast")
    for name in ("cut", "compacted"):
        assert_same_episodes(episodes(tmp_path / name), want)
    compare_with_trajcore(tmp_path / "compacted")
    assert trajcore.verify(tmp_path / "compacted").intact
    assert not any(p.name.endswith(".compacting") for p in (tmp_path / "compacted").iterdir())
    # The header is the closed shard's, with compat flag COMPACTED (bit 0) added.
    (shard,) = fd.DecodedDataset(tmp_path / "compacted").shards
    (plain,) = fd.DecodedDataset(tmp_path / "cut").shards
    assert shard.header.compat_flags == 1 and plain.header.compat_flags == 0


def test_shards_that_roll_over_are_each_compacted(tmp_path: Path) -> None:
    """Episodes running at a rollover continue in the next shard (a repeated observation row
    there); each closed shard is compacted on its own and reads back the same."""
    cut = record_vector(tmp_path / "cut", 10, compact_shards=False, max_shard_bytes=96 << 10)
    compacted = record_vector(tmp_path / "compacted", 10, max_shard_bytes=96 << 10)
    shards = sorted((tmp_path / "compacted").glob("*.trj"))
    assert len(shards) >= 3 and len(shards) == len(sorted((tmp_path / "cut").glob("*.trj")))
    assert compacted["shards_compacted"] == len(shards), compacted
    assert cut["shards_compacted"] == 0
    assert dir_bytes(tmp_path / "compacted") < dir_bytes(tmp_path / "cut")
    assert_same_episodes(episodes(tmp_path / "compacted"), episodes(tmp_path / "cut"))
    assert trajcore.verify(tmp_path / "compacted").intact
    compare_with_trajcore(tmp_path / "compacted")


def test_frame_stacks_are_sealed_again_as_frames(tmp_path: Path) -> None:
    """A frame-stack column (codec 3) sealed again keeps each frame once: as small as recorded
    fast, every stack exact."""

    def record(path: Path, flush_every: int | None, **options: Any) -> list[np.ndarray]:
        rec = trajcore.RecordEpisodes(FrameStackObservation(FrameEnv((12, 10)), 4), path, **options)
        obs, _ = rec.reset(seed=1)
        seen = [obs.copy()]
        for t in range(2_000):
            obs, _, term, trunc, _ = rec.step(0)
            seen.append(obs.copy())
            if term or trunc:
                obs, _ = rec.reset()
                seen.append(obs.copy())
            if flush_every and t % flush_every == 0:
                rec.flush()
        rec.close()
        return seen

    seen = record(tmp_path / "fast", None, chunk_bytes=4096)
    assert_frames_equal = np.testing.assert_array_equal
    for name, every in (("cut", 7), ("compacted", 7)):
        got = record(tmp_path / name, every, chunk_bytes=4096, compact_shards=name == "compacted")
        assert_frames_equal(np.stack(got), np.stack(seen))
    sizes = {name: dir_bytes(tmp_path / name) for name in ("fast", "cut", "compacted")}
    assert sizes["compacted"] <= 1.03 * sizes["fast"] < sizes["cut"]
    want = episodes(tmp_path / "fast")
    assert_same_episodes(episodes(tmp_path / "compacted"), want)
    codecs = {ref.codec for shard in fd.DecodedDataset(tmp_path / "compacted").shards for ref in shard.chunks}
    assert fd.CODEC_STACK | fd.CODEC_ZSTD << 8 in codecs
    compare_with_trajcore(tmp_path / "compacted")


def test_a_reader_holding_the_shard_reads_on_without_a_notice(tmp_path: Path) -> None:
    """A reader that opened the recording while it ran keeps its file (complete, the same rows)
    when the compacted one replaces it: no 'replaced' notice, and a reopen reads the new one."""
    env = gym.make_vec("CartPole-v1", num_envs=NUM_ENVS, vectorization_mode="sync")
    rec = trajcore.RecordVectorEpisodes(env, tmp_path / "ds")
    rec.reset(seed=0)
    for t in range(2_000):
        rec.step(np.zeros(NUM_ENVS, dtype=np.int64))
        if t % 10 == 0:
            rec.flush()
    reader = trajcore.open(tmp_path / "ds")
    (shard,) = (tmp_path / "ds").glob("*.trj")
    before = os.stat(shard).st_ino
    rec.close()
    assert rec.stats()["shards_compacted"] == 1
    assert os.stat(shard).st_ino != before  # replaced by the compacted file
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reader.refresh()
    assert reader.problems == []
    # The episodes running when the reader opened are listed where it listed them then (their
    # end listed them whole in place), a reopen lists them where they ended: the same episodes.
    def ordered(episodes: Any) -> list[Any]:
        listed = [(e.env_index, e.actions, e.observations) for e in episodes]
        return sorted(listed, key=lambda e: (e[0], e[2].tobytes()))

    live = ordered(reader.episodes)
    reader.close()
    with trajcore.open(tmp_path / "ds") as ds:
        reopened = ordered(ds.episodes)
    assert len(live) == len(reopened) > 0
    for (a, b, c), (x, y, z) in zip(live, reopened, strict=True):
        assert a == x
        np.testing.assert_array_equal(b, y)
        np.testing.assert_array_equal(c, z)


def test_a_compacted_file_keeps_damage_local(tmp_path: Path) -> None:
    """Compaction batches as a recording does: a Chunks record holds at most one chunk of each
    (lane, column), and each Episode record follows the chunks holding its episodes' rows (not
    all at the end), so a cut keeps what lies before it and a flipped chunk costs its episodes."""
    from gymnasium import spaces
    from helpers import SpaceEnv

    # Frames of noise (3 KB a step, 4 sub-envs): the compacted file spans several of compaction's
    # 8 MiB windows, after each of which the episodes of the window are written.
    box = spaces.Box(0, 255, (32, 32, 3), np.uint8)
    envs = gym.vector.SyncVectorEnv([lambda: SpaceEnv(box, max_steps=30, infos=False) for _ in range(4)])
    path = tmp_path / "compacted"
    with trajcore.RecordVectorEpisodes(envs, path, flush_interval=3600.0) as rec:
        rec.reset(seed=0)
        rec.action_space.seed(0)
        for t in range(2500):
            rec.step(rec.action_space.sample())
            if t % 3 == 0:
                rec.flush()
    assert rec.stats()["shards_compacted"] == 1
    (shard,) = sorted(path.glob("*.trj"))
    buf = shard.read_bytes()
    records, _ = fd.hop(buf)
    for r in records:
        if r.kind == fd.KIND_CHUNKS:
            keys = [(c.lane, c.column) for c in fd.decode_chunk_refs(buf, r)]
            assert len(keys) == len(set(keys)), f"record at {r.offset}"
    kinds = [r.kind for r in records if r.kind in (fd.KIND_CHUNKS, fd.KIND_EPISODE)]
    first_episode_record = kinds.index(fd.KIND_EPISODE)
    assert fd.KIND_CHUNKS in kinds[first_episode_record:], "episode records interleave with chunks"
    with trajcore.open(path) as ds:
        total = ds.num_episodes
    # A cut at half the file (a killed copy): the episodes before it stay listed and intact, less
    # about a window's (8 MiB of this ~30 MB file).
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / shard.name).write_bytes(buf[: len(buf) // 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", trajcore.TrajcoreWarning)
        with trajcore.open(cut, verify=True) as ds:
            assert 0.15 * total < ds.num_episodes < 0.6 * total, (ds.num_episodes, total)
    # A flipped byte in one chunk: the episodes with rows in it, a few of the hundreds.
    refs = [c for r in records if r.kind == fd.KIND_CHUNKS for c in fd.decode_chunk_refs(buf, r)]
    victim = max(refs, key=lambda c: c.stored_len)
    flipped = bytearray(buf)
    flipped[victim.data_offset + victim.stored_len // 2] ^= 0x01
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / shard.name).write_bytes(bytes(flipped))
    report = trajcore.verify(damaged)
    (d,) = report.damage
    assert d.offset == victim.data_offset
    assert 0 < report.episodes_lost < 0.1 * total, (report.episodes_lost, total)
