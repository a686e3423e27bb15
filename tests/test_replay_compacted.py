"""A reader following a live recording switches to the compacted rewrite of each shard its
writer closes (`compact_shards`): at the refresh that finds the rewrite it reads the new file
(its chunks, about one per lane and column instead of one per flush) and lets go of the one it
opened. The episodes, their values, the listing's indexes and seeded samples stay what they
were; an `Episode` taken before keeps reading its values."""

from __future__ import annotations

import os
import struct
import warnings
from pathlib import Path
from typing import Any

import format_decoder as fd
import gymnasium as gym
import numpy as np
import pytest
import trajcore

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self (Linux)")

EPISODES, LENGTH = 6, 200
#: The file header's compat flag of a compacted shard (FORMAT.md).
COMPACTED = 1
FIELDS = ("observations", "actions", "rewards", "terminations", "truncations")


def _old_files_held(path: Path) -> int:
    """Files of `path` this process maps or holds open that are no longer under their name
    (a shard's pre-compaction file, replaced by its rewrite)."""
    held: set[str] = set()
    targets = []
    for n in os.listdir("/proc/self/fd"):
        try:
            targets.append(os.readlink(f"/proc/self/fd/{n}"))
        except OSError:
            continue  # closed meanwhile
    with open("/proc/self/maps") as f:
        targets += [" ".join(line.split()[5:]) for line in f if len(line.split()) > 5]
    for target in targets:
        if target.startswith(str(path)) and target.endswith(" (deleted)"):
            held.add(target)
    return len(held)


def _values(ds: trajcore.Dataset) -> dict[int, dict[str, Any]]:
    return {e.episode_id: {k: getattr(e, k) for k in FIELDS} for e in ds.episodes}


def _assert_same(got: dict[int, dict[str, Any]], want: dict[int, dict[str, Any]]) -> None:
    assert len(want) == EPISODES
    _check_same(got, want)


def _check_same(got: dict[int, dict[str, Any]], want: dict[int, dict[str, Any]]) -> None:
    assert sorted(got) == sorted(want) and want
    for episode_id, fields in want.items():
        for k, v in fields.items():
            np.testing.assert_array_equal(got[episode_id][k], v, err_msg=f"episode {episode_id} {k}")


def test_a_live_reader_switches_to_each_compacted_shard(tmp_path: Path) -> None:
    """Pendulum's 200-step episodes recorded in small shards (episodes run over rollovers),
    flushed every 5 steps (chunks cut small), read by a reader refreshing every step. Each
    closed shard is compacted and the reader switches to it: once the recorder is closed, its
    chunk entries are those of a fresh open, no pre-compaction file is mapped or open, every
    episode reads the values the fresh open reads, and a seeded sample is the one it drew before
    the last switch."""
    path = tmp_path / "live"
    env = trajcore.RecordEpisodes(
        gym.make("Pendulum-v1"), path, flush_interval=3600, max_shard_bytes=24 << 10, compact_shards=True
    )
    env.action_space.seed(0)
    env.reset(seed=0)
    ds = trajcore.open(path)
    shared = None  # opened with rows to lay its shared store of decoded chunks out for
    kept = None
    for t in range(EPISODES * LENGTH):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if t % 5 == 0:
            env.flush()
        ds.refresh()
        if t == LENGTH + 50:
            shared = trajcore.open(path)
            assert shared.cache_info["shared_bytes"] > 0
            _values(shared)  # its chunks decoded into their slots
        elif shared is not None and t % 50 == 0:
            shared.refresh()
            _values(shared)
        if kept is None and ds.num_episodes:
            kept = ds.episodes[0]  # taken before its shard was compacted, read after
        if ds.num_steps:
            ds.sample_transitions(32, seed=t)  # the loop reads as it goes
        if (terminated or truncated) and t + 1 < EPISODES * LENGTH:
            env.reset()
    env.flush()
    ds.refresh()
    before = ds.sample_transitions(256, seed=7)  # every episode listed, the last shard not compacted
    env.close()
    stats = env.stats()
    assert stats["shards_compacted"] >= 4, stats
    ds.refresh()
    assert shared is not None
    shared.refresh()
    assert ds.problems == [] and shared.problems == []
    assert _old_files_held(path) == 0
    after = ds.sample_transitions(256, seed=7)
    assert sorted(before) == sorted(after)
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)
    with trajcore.open(path) as fresh:
        assert ds._core.column_stats() == fresh._core.column_stats()
        want = _values(fresh)
    _assert_same(_values(ds), want)
    assert kept is not None
    _assert_same(_values(shared), want)  # the old file's slots are not the rewrite's chunks
    shared.close()
    for k in FIELDS:
        np.testing.assert_array_equal(getattr(kept, k), want[kept.episode_id][k], err_msg=k)
    # Each sampled row is the fresh open's value of its episode and step.
    for i in range(256):
        e = ds.episodes[int(after["episode_index"][i])]
        step = int(after["step_index"][i])
        np.testing.assert_array_equal(after["observations"][i], want[e.episode_id]["observations"][step])
        np.testing.assert_array_equal(after["actions"][i], want[e.episode_id]["actions"][step])
    ds.close()


def _pendulum(path: Path, steps: int, seed: int, **options: Any) -> Path:
    """`steps` of Pendulum recorded in one shard, flushed every 5 steps; its shard file."""
    env = trajcore.RecordEpisodes(gym.make("Pendulum-v1"), path, flush_interval=3600, **options)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    for t in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if t % 5 == 0:
            env.flush()
        if terminated or truncated:
            env.reset()
    env.close()
    (shard,) = path.glob("*.trj")
    return shard


def _as_rewrite_of(shard: Path, other: Path) -> None:
    """Puts the bytes of `other` under the name of `shard` (by a rename, as the writer's
    compaction does), with the header of `shard` marked compacted: to the reader, the rewrite
    of `shard` by its writer."""
    head = bytearray(shard.read_bytes()[:64])
    struct.pack_into("<I", head, 12, struct.unpack_from("<I", head, 12)[0] | COMPACTED)
    struct.pack_into("<I", head, 60, fd.crc32c(head[:60]))
    tmp = shard.with_name(shard.name + ".compacting")
    tmp.write_bytes(bytes(head) + other.read_bytes()[64:])
    os.replace(tmp, shard)


def test_a_rewrite_that_holds_other_rows_is_not_read(tmp_path: Path) -> None:
    """A file put under a shard's name as its compacted rewrite that does not hold the rows the
    reader listed (here: another recording's, with fewer steps) is not switched to: the reader
    warns once and reads on the file it opened, the same values. A true rewrite coming under
    the name later is switched to (the refusal was about that file only)."""
    shard = _pendulum(tmp_path / "ds", 400, 0, compact_shards=False)
    original = tmp_path / "original.trj.bin"
    original.write_bytes(shard.read_bytes())
    other = _pendulum(tmp_path / "other", 300, 1, compact_shards=True)
    ds = trajcore.open(tmp_path / "ds")
    want = _values(ds)
    stats = ds._core.column_stats()
    _as_rewrite_of(shard, other)
    with pytest.warns(trajcore.TrajcoreWarning, match="compacted rewrite, which this dataset does not read"):
        ds.refresh()
    _check_same(_values(ds), want)
    assert ds._core.column_stats() == stats
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds.refresh()  # said once
    _as_rewrite_of(shard, original)  # the same rows, at the same places: a rewrite to switch to
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds.refresh()
    assert _old_files_held(tmp_path / "ds") == 0
    _check_same(_values(ds), want)
    assert ds.problems == []
    ds.close()
