"""Every shard stands on its own: opened alone (copied, moved, the others deleted) it opens
without a warning and lists the episodes, or the parts of episodes, whose rows it holds, value
for value the rows of the whole episode."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from format_decoder import DecodedDataset, frame, hop
from helpers import SpaceEnv

MAX_SHARD = 20_000
CHUNK = 8_000


def _record(path: Path, steps: int = 1500) -> trajcore.Dataset:
    envs = trajcore.RecordVectorEpisodes(
        gym.vector.SyncVectorEnv([lambda i=i: SpaceEnv(max_steps=30 + 17 * i, p_terminate=0.01) for i in range(3)]),
        path,
        max_shard_bytes=MAX_SHARD,
        chunk_bytes=CHUNK,
        flush_interval=30,  # only the flushes below cut chunks: the same shards on any machine
    )
    envs.action_space.seed(0)
    envs.reset(seed=0)
    for t in range(steps):
        envs.record(t=np.full(3, t, dtype=np.int64))
        envs.step(envs.action_space.sample())
        if t % 50 == 25:
            # What the timer's flushes would do, at fixed steps: a shard rolls over only at a
            # flush, so the shards (at least 5) do not depend on the machine's load.
            envs.flush()
    envs.close()
    return trajcore.open(path, strict=True)


def _columns(ep: trajcore.Episode) -> dict[str, Any]:
    return {
        "obs": ep.observations,
        "action": ep.actions,
        "reward": ep.rewards,
        "t": ep.data["t"],
        "step": ep.infos["step"],
        "_even": _mask(ep, "even"),
        "_label": _mask(ep, "label"),
    }


def _mask(ep: trajcore.Episode, key: str) -> Any:
    """Where the episode has info `key` (all False when it never does)."""
    return ep.info_masks.get(key, np.zeros(ep.length + 1, dtype=bool))


def _check_parts(parts: list[trajcore.Episode], whole: dict[int, trajcore.Episode]) -> int:
    """Each part equals the slice of its whole episode; returns the steps they hold."""
    steps = 0
    for ep in parts:
        full = whole[ep.episode_id]
        assert ep.env_index == full.env_index
        mine, theirs = _columns(ep), _columns(full)
        # Where the part starts in the whole episode: its first step is the whole's step k.
        k = int(ep.data["t"][0] - full.data["t"][0]) if ep.length else 0
        for name, value in mine.items():
            rows = len(value)
            want = theirs[name][k : k + rows]
            if isinstance(value, list):
                assert value == list(want), name
            else:
                np.testing.assert_array_equal(value, want, err_msg=f"episode {ep.episode_id} {name}")
        # A shortened episode is a part; a part may hold every step of its episode (the shard
        # before holds only its reset observation when the rollover came right after the reset).
        assert ep.is_part or ep.length == full.length
        assert not (ep.is_part and ep.complete)
        steps += ep.length
    return steps


def test_every_shard_opens_alone_and_the_parts_add_up(tmp_path: Path) -> None:
    ds = _record(tmp_path / "d")
    shards = [Path(p) for p in ds.shards]
    assert len(shards) >= 5
    assert not any(ep.is_part for ep in ds.episodes), "with every shard, episodes are whole"
    whole = {ep.episode_id: ep for ep in ds.episodes}
    total = 0
    parts = 0
    for shard in shards:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            alone = trajcore.open(shard, strict=True)
        assert alone.num_episodes >= 1, f"{shard.name} lists nothing"
        total += _check_parts(list(alone.episodes), whole)
        parts += sum(ep.is_part for ep in alone.episodes)
    assert total == ds.num_steps, "every step in exactly one shard"
    assert parts >= 2, "episodes ran over rollovers"


def test_shards_stay_near_their_size_limit(tmp_path: Path) -> None:
    ds = _record(tmp_path / "d")
    for shard in ds.shards[:-1]:
        buf = Path(shard).read_bytes()
        records, _ = hop(buf)
        biggest_chunks = max(r.next - r.offset for r in records if r.kind == 3)
        # The rollover comes after the write that crossed the limit (at most one message later
        # while an episode that just ended is held); it seals what is buffered, then adds the
        # episode records, the index and the end record.
        assert len(buf) <= MAX_SHARD + 2 * biggest_chunks + 8_000, f"{shard}: {len(buf)} bytes"


def test_pruning_old_shards_and_copying_one(tmp_path: Path) -> None:
    ds = _record(tmp_path / "d")
    whole = {ep.episode_id: ep for ep in ds.episodes}
    shards = [Path(p) for p in ds.shards]
    kept = tmp_path / "kept"
    kept.mkdir()
    for shard in shards[len(shards) // 2 :]:
        shutil.copy(shard, kept / shard.name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pruned = trajcore.open(kept, strict=True)
    assert pruned.num_episodes >= 1 and not pruned.problems
    steps = _check_parts(list(pruned.episodes), whole)
    assert 0 < steps < ds.num_steps
    assert sum(ep.is_part for ep in pruned.episodes) <= 3, "at most one part per sub-env at the cut"
    # One shard moved elsewhere reads the same.
    moved = tmp_path / "moved.trj"
    shutil.move(str(shards[1]), moved)
    _check_parts(list(trajcore.open(moved, strict=True).episodes), whole)


def test_a_hole_in_the_shards_is_reported(tmp_path: Path) -> None:
    ds = _record(tmp_path / "d")
    shards = [Path(p) for p in ds.shards]
    shards[2].unlink()
    with pytest.warns(trajcore.TrajcoreWarning, match="missing"):
        holed = trajcore.open(tmp_path / "d")
    whole = {ep.episode_id: ep for ep in ds.episodes}
    _check_parts(list(holed.episodes), whole)


def test_the_decoder_reads_parts_as_the_reader_does(tmp_path: Path) -> None:
    ds = _record(tmp_path / "d", steps=800)
    for shard in ds.shards:
        dec = DecodedDataset(shard)
        alone = trajcore.open(shard)
        assert len(dec.episodes) == alone.num_episodes
        for i, (e, ep) in enumerate(zip(dec.episodes, alone.episodes, strict=True)):
            assert (e.fixed.length, e.fixed.lane) == (ep.length, ep.env_index), i
            np.testing.assert_array_equal(dec.read(i, "obs"), ep.observations)
            assert frame(dec.shards[0].buf, e.fixed.record_offset) is not None


def test_a_truncated_shard_never_makes_a_mask_say_present(tmp_path: Path) -> None:
    """Shard 1 of several cut in half: what is listed reads exactly as before the damage, and a
    mask never says "present" for a value that is not in the file."""
    ds = _record(tmp_path / "d")
    intact = {ep.episode_id: ep for ep in ds.episodes}
    damaged_dir = tmp_path / "damaged"
    shutil.copytree(tmp_path / "d", damaged_dir)
    victim = sorted(damaged_dir.iterdir())[1]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    with pytest.warns(trajcore.TrajcoreWarning):
        damaged = trajcore.open(damaged_dir)
    assert damaged.problems
    assert 0 < damaged.num_episodes < ds.num_episodes
    for ep in damaged.episodes:
        full = intact[ep.episode_id]
        k = int(ep.data["t"][0] - full.data["t"][0])
        for which in ("infos", "data"):
            masks = getattr(ep, "info_masks" if which == "infos" else "data_masks")
            values = getattr(ep, which)
            full_masks = getattr(full, "info_masks" if which == "infos" else "data_masks")
            full_values = getattr(full, which)
            for key, mask in masks.items():
                if isinstance(mask, dict):
                    continue
                want_mask = full_masks[key][k : k + len(mask)]
                np.testing.assert_array_equal(mask, want_mask, err_msg=f"{which}/{key}")
                got = np.asarray(values[key])[mask]
                want = np.asarray(full_values[key])[k : k + len(mask)][mask]
                np.testing.assert_array_equal(got, want, err_msg=f"{which}/{key}")
