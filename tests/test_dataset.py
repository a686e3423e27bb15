"""trajcore.open: errors, damage, indexing, filtering, refresh, pickling."""

from __future__ import annotations

import os
import pickle
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from helpers import SpaceEnv, assert_tree_equal, run_single


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """Two recordings (one shard each) with 5 + 4 episodes of various lengths."""
    path = tmp_path / "ds"
    for seed, n in ((10, 5), (11, 4)):
        env = trajcore.RecordEpisodes(SpaceEnv(max_steps=9, p_terminate=0.2), path, {"seed": seed})
        run_single(env, episodes=n, seed=seed)
        env.close()
    return path


def test_missing_path_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(trajcore.TrajcoreFileNotFoundError) as err:
        trajcore.open(tmp_path / "nope")
    assert isinstance(err.value, FileNotFoundError)
    assert isinstance(err.value, trajcore.TrajcoreError)
    assert isinstance(err.value, trajcore.TrajcoreIOError)
    assert "nope" in str(err.value)


@pytest.mark.parametrize(
    "content",
    [b"", b"hello, not a trajcore file at all" * 10, b"TRAJCORE" + b"\0" * 8, b"TRAJCORE" + os.urandom(200)],
    ids=["empty", "text", "short-header", "bad-header-crc"],
)
def test_a_file_that_is_not_trajcore_raises_corrupt_file_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "fake.trajcore"
    path.write_bytes(content)
    with pytest.raises(trajcore.CorruptFileError) as err:
        trajcore.open(path)
    assert isinstance(err.value, ValueError)
    assert "fake.trajcore" in str(err.value)


def test_episodes_sequence(recorded: Path) -> None:
    with trajcore.open(recorded) as ds:
        eps = ds.episodes
        assert len(eps) == ds.num_episodes == len(ds) == 9
        assert [e.index for e in eps] == list(range(9))
        assert eps[-1].index == 8
        assert eps[-9].index == 0
        assert [e.index for e in eps[2:7:2]] == [2, 4, 6]
        assert [e.index for e in eps[::-1]] == list(range(8, -1, -1))
        assert [e.index for e in eps[1:][1:3]] == [2, 3]
        with pytest.raises(IndexError):
            eps[9]
        with pytest.raises(IndexError):
            eps[-10]
        assert sum(e.length for e in eps) == ds.num_steps


def test_summaries_match_episodes(recorded: Path) -> None:
    with trajcore.open(recorded) as ds:
        s = ds.summaries()
        for key in ("recording", "env_index", "length", "episode_return", "complete", "terminated", "truncated"):
            assert len(s[key]) == 9, key
        for i, ep in enumerate(ds.episodes):
            assert ep.length == s["length"][i] == len(ep.rewards)
            assert ep.episode_return == s["episode_return"][i] == sum(ep.rewards.tolist())  # in step order
            assert ep.terminated == bool(ep.terminations[-1]) == s["terminated"][i]
            assert ep.truncated == bool(ep.truncations[-1]) == s["truncated"][i]
            assert ep.recording == s["recording"][i]
        assert list(s["recording"]) == [0] * 5 + [1] * 4
        assert len(set(zip(s["recording"].tolist(), s["episode_id"].tolist(), strict=True))) == 9


def test_select_filters_on_summaries(recorded: Path) -> None:
    with trajcore.open(recorded) as ds:
        s = ds.summaries()
        lengths, returns = s["length"], s["episode_return"]
        mid = float(np.median(returns))
        assert ds.select(min_return=mid).indices == np.flatnonzero(returns >= mid).tolist()
        assert (
            ds.select(max_return=mid, min_length=3).indices
            == np.flatnonzero((returns <= mid) & (lengths >= 3)).tolist()
        )
        assert ds.select(max_length=4).indices == np.flatnonzero(lengths <= 4).tolist()
        assert ds.select(terminated=True).indices == np.flatnonzero(s["terminated"]).tolist()
        assert ds.select(truncated=True).indices == np.flatnonzero(s["truncated"]).tolist()
        assert ds.select(complete=True).indices == list(range(9))
        assert ds.select(complete=False).indices == []
        assert ds.select(env_index=0).indices == list(range(9))
        assert ds.select(env_index=[1, 2]).indices == []
        picked = ds.select(where=lambda m: m.get("even") is True)
        assert picked.indices == []
        assert [e.index for e in ds.select(min_length=1)] == list(range(9))


def test_select_names_an_unknown_filter_and_lists_the_filters(recorded: Path) -> None:
    from trajcore.read.select.filters import FILTER_KEYS

    with trajcore.open(recorded) as ds:
        for select in (ds.select, ds.episodes.select):
            with pytest.raises(trajcore.InvalidArgumentError, match="unknown filter 'episodes'") as caught:
                select(episodes=range(5))  # type: ignore[call-arg]
            assert all(key in str(caught.value) for key in FILTER_KEYS)
            assert "_filter" not in str(caught.value)


def test_open_takes_its_flags_by_keyword_only(recorded: Path) -> None:
    with pytest.raises(TypeError):
        trajcore.open(recorded, True)  # type: ignore[misc]


def test_select_where_reads_episode_metadata(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(
        SpaceEnv(max_steps=3, p_terminate=0.0), tmp_path / "w", episode_metadata=lambda e: {"n": e["length"] * 0}
    )
    env.reset(seed=0)
    for k in range(4):
        env.set_episode_metadata(k=k)
        for _ in range(3):
            env.step(0)
        env.reset()
    env.close()
    with trajcore.open(tmp_path / "w") as ds:
        assert ds.select(where=lambda m: m["k"] % 2 == 1).indices == [1, 3]
        assert [e.metadata for e in ds.episodes] == [{"k": k, "n": 0} for k in range(4)]


def test_pickle_reopens_by_path(recorded: Path) -> None:
    with trajcore.open(recorded, cache_bytes=1 << 20) as ds:
        clone = pickle.loads(pickle.dumps(ds))
        assert isinstance(clone, trajcore.Dataset)
        assert clone.path == ds.path
        assert clone.num_episodes == ds.num_episodes
        for a, b in zip(ds.episodes, clone.episodes, strict=True):
            assert_tree_equal(a.observations, b.observations)
            assert_tree_equal(a.infos["step"], b.infos["step"])
        assert len(pickle.dumps(ds)) < 1000  # path and options, not data
        clone.close()


def test_observation_and_action_space_rebuilt(recorded: Path) -> None:
    with trajcore.open(recorded) as ds:
        assert ds.observation_space == spaces.Box(-1.0, 1.0, (3,), np.float32)
        assert ds.action_space == spaces.Discrete(3)
        assert ds.meta(0)["num_envs"] == 1


def test_closed_dataset_refuses_reads_but_cached_arrays_stay(recorded: Path) -> None:
    ds = trajcore.open(recorded)
    ep = ds.episodes[0]
    obs = ep.observations
    ds.close()
    assert_tree_equal(ep.observations, obs)
    with pytest.raises(trajcore.TrajcoreError, match="closed"):
        ds.num_episodes  # noqa: B018


def test_a_selection_that_sampled_refuses_reads_once_its_dataset_is_closed(recorded: Path) -> None:
    """The core's selection an `Episodes` reads through (kept from its first read) holds the
    reader: closing the dataset lets go of it, and the next read says the dataset is closed."""
    ds = trajcore.open(recorded)
    some = ds.episodes[1:3]
    batch = some.sample_transitions(16, seed=0)
    assert set(batch["episode_index"].tolist()) <= {1, 2}
    assert some.transitions[0]["episode_index"] == 1
    ds.close()
    with pytest.raises(trajcore.TrajcoreError, match="closed"):
        some.sample_transitions(16, seed=0)
    with pytest.raises(trajcore.TrajcoreError, match="closed"):
        some.num_steps  # noqa: B018


def _truncate_tail(path: str, cut: int) -> None:
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - cut)


def test_damaged_shard_warns_and_keeps_data_before_the_damage(recorded: Path) -> None:
    with trajcore.open(recorded) as ds:
        shards = ds.shards
        want = [(e.length, e.episode_return) for e in ds.episodes]
        obs0 = ds.episodes[0].observations
    # Cutting into the last record of the second shard: its end record and final index are gone.
    _truncate_tail(shards[1], 5)
    with pytest.warns(trajcore.TrajcoreWarning, match=rf"{Path(shards[1]).name}.*offset \d+") as caught:
        ds = trajcore.open(recorded)
    with ds:
        assert len(caught) >= 1
        assert len(ds.problems) == 1
        file, offset, why = ds.problems[0]
        assert Path(file).name == Path(shards[1]).name
        assert 0 < offset < os.path.getsize(shards[1])
        assert why
        assert [(e.length, e.episode_return) for e in ds.episodes] == want
        assert_tree_equal(ds.episodes[0].observations, obs0)
    with pytest.raises(trajcore.CorruptFileError, match=Path(shards[1]).name):
        trajcore.open(recorded, strict=True)
    # The undamaged shard alone opens without a warning.
    with trajcore.open(shards[0], strict=True) as first:
        assert first.num_episodes == 5


def test_flipped_bytes_are_detected_and_other_data_still_reads(recorded: Path) -> None:
    with trajcore.open(recorded) as ds:
        shard = ds.shards[1]
        first = [ep.observations for ep in ds.episodes[:5]]
        later = [(ep.observations, ep.rewards) for ep in ds.episodes[5:]]
    size = os.path.getsize(shard)
    data = Path(shard).read_bytes()
    detected = 0
    for pos in range(64, size, max(1, size // 40)):  # past the header: a bad header refuses the file
        damaged = bytearray(data)
        damaged[pos] ^= 0x5A
        Path(shard).write_bytes(damaged)
        with warnings.catch_warnings(record=True) as caught, trajcore.open(recorded) as ds:
            warnings.simplefilter("always")
            # The intact shard always reads in full.
            for ep, want in zip(ds.episodes[:5], first, strict=True):
                assert_tree_equal(ep.observations, want)
            # In the damaged one, every episode reads back right or raises CorruptFileError.
            for ep in ds.episodes[5:]:
                try:
                    got = (ep.observations, ep.rewards)
                except trajcore.CorruptFileError:
                    detected += 1
                    continue
                assert any(np.array_equal(got[0], o) and np.array_equal(got[1], r) for o, r in later), (
                    f"flip at {pos}: an episode read back wrong without an error"
                )
            if ds.problems:
                detected += 1
                assert caught
    Path(shard).write_bytes(data)
    assert detected > 0


def test_refresh_picks_up_new_episodes(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=4, p_terminate=0.0), tmp_path / "live")
    run_single(env, episodes=2, seed=0)
    env.flush()
    with trajcore.open(tmp_path / "live") as ds:
        assert ds.num_episodes == 2
        run_single(env, episodes=3, seed=1)
        env.flush()
        assert ds.refresh() == 3
        assert ds.num_episodes == 5
        assert len(ds.episodes) == 5
        assert len(ds.summaries()["length"]) == 5
        env.close()
        ds.refresh()
        assert [e.complete for e in ds.episodes] == [True] * 5


def record_cartpole(path: Path, steps: int, **options: Any) -> None:
    """Random CartPole steps through RecordEpisodes, resetting at episode ends."""
    env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), path, **options)
    env.reset(seed=0)
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    env.close()


def test_column_stats_come_from_the_index(tmp_path: Path) -> None:
    record_cartpole(tmp_path / "ds", 3000)
    with trajcore.open(tmp_path / "ds") as ds:
        stats = {s["name"]: s for s in ds._core.column_stats()}
        assert {"obs", "action", "reward", "terminated", "truncated"} <= set(stats)
        # T+1 rows of 4 float32 an episode, plus the reset row of an episode with no step at close.
        obs_rows = stats["obs"]["raw_bytes"] // 16
        assert ds.num_steps + ds.num_episodes <= obs_rows <= ds.num_steps + ds.num_episodes + 1
        assert stats["reward"]["raw_bytes"] == ds.num_steps * 8
        assert stats["reward"]["stored_bytes"] < stats["reward"]["raw_bytes"] / 20  # constant 1.0 compresses
        on_disk = sum(f.stat().st_size for f in (tmp_path / "ds").iterdir())
        assert sum(s["stored_bytes"] for s in stats.values()) < on_disk


def test_chunk_size_and_codec_are_per_column_choices(tmp_path: Path) -> None:
    record_cartpole(
        tmp_path / "ds",
        5000,
        codecs={"obs": {"zstd_level": None, "chunk_bytes": 4096}, "action": {"chunk_bytes": 1 << 16}},
        chunk_bytes=1 << 20,
    )
    with trajcore.open(tmp_path / "ds") as ds:
        stats = {s["name"]: s for s in ds._core.column_stats()}
        obs_rows = ds.num_steps + ds.num_episodes
        assert stats["obs"]["chunks"] >= obs_rows * 16 // 4096  # sealed every 4 KiB
        assert stats["obs"]["stored_bytes"] == stats["obs"]["raw_bytes"]  # stored raw
        assert stats["action"]["chunks"] < stats["obs"]["chunks"]
        # An episode whose rows sit in one raw chunk comes back as a read-only view of the map.
        assert any(not ep.observations.flags.writeable for ep in ds.episodes[:10])
        with pytest.raises(trajcore.InvalidArgumentError, match="chunk_bytes"):
            trajcore.RecordEpisodes(gym.make("CartPole-v1"), tmp_path / "bad", codecs={"obs": {"chunk_bytes": 0}})
