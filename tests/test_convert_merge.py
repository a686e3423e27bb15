"""`trajcore.convert` of several sources into one dataset, with `select` (issue 35, item 4): every
value, metadata and provenance kept, sources of other spaces refused by name unless `keys`
chooses values they share."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
import trajcore
from trajcore.cli import main
from trajcore.errors import InvalidArgumentError


def _record(path: Path, env_id: str, policy: str, episodes: int) -> None:
    env = trajcore.RecordEpisodes(gym.make(env_id, max_episode_steps=30), path, metadata={"source": policy})
    env.action_space.seed(len(policy))
    env.set_policy(name=policy, step=len(policy))
    for seed in range(episodes):
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            done = terminated or truncated
        env.set_episode_metadata(n=seed)
    env.close()


def _episodes(path: Path) -> list[tuple[object, ...]]:
    with trajcore.open(path) as ds:
        return [
            (
                ep.observations.tolist(),
                ep.actions.tolist(),
                ep.rewards.tolist(),
                ep.terminated,
                ep.truncated,
                ep.metadata,
                ep.provenance,
            )
            for ep in ds.episodes
        ]


def test_sources_merge_with_every_value_metadata_and_provenance(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _record(a, "CartPole-v1", "ppo", 3)
    _record(b, "CartPole-v1", "bc", 4)
    result = trajcore.convert([a, b], tmp_path / "ab")
    assert (result["episodes"], len(result["shards"])) == (7, 2)
    assert _episodes(tmp_path / "ab") == _episodes(a) + _episodes(b)
    with trajcore.open(tmp_path / "ab") as ds, trajcore.open(a) as da, trajcore.open(b) as db:
        assert ds.num_recordings == 2
        assert ds.provenance == da.provenance + db.provenance
        assert [ds.meta(r)["metadata"] for r in range(2)] == [{"source": "ppo"}, {"source": "bc"}]
        assert ds.num_steps == da.num_steps + db.num_steps == result["steps"]

    # The filters of select, on every source; the command line does the same.
    trajcore.convert([a, b], tmp_path / "bc", select={"policy": "bc", "max_length": 20})
    with trajcore.open(tmp_path / "bc") as ds, trajcore.open(b) as db:
        want = [ep.rewards.tolist() for ep in db.select(max_length=20)]
        assert [ep.rewards.tolist() for ep in ds.episodes] == want
        assert all(ep.metadata["policy"]["name"] == "bc" for ep in ds.episodes)
    assert main(["convert", str(a), str(b), str(tmp_path / "cli"), "--select", "policy=ppo"]) == 0
    assert _episodes(tmp_path / "cli") == _episodes(a)


def test_sources_of_other_spaces_or_a_full_destination_are_refused(tmp_path: Path) -> None:
    a, m = tmp_path / "a", tmp_path / "m"
    _record(a, "CartPole-v1", "ppo", 1)
    _record(m, "MountainCar-v0", "dqn", 1)
    with pytest.raises(InvalidArgumentError, match=r"other spaces") as e:
        trajcore.convert([a, m], tmp_path / "out")
    assert str(m) in str(e.value) and str(a) in str(e.value)
    assert not (tmp_path / "out").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("mine")
    with pytest.raises(InvalidArgumentError, match="not an empty directory"):
        trajcore.convert([a, a], tmp_path / "full")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "full", "m"]  # nothing left behind
    with pytest.raises(InvalidArgumentError, match="no source"):
        trajcore.convert([], tmp_path / "none")
    assert len(_episodes(a)) == 1  # the sources are only read


def test_a_bad_option_is_refused_by_name_leaving_nothing(tmp_path: Path) -> None:
    a = tmp_path / "a"
    _record(a, "CartPole-v1", "ppo", 1)
    for options, named in [({"chunk_bytes": 1.5}, "chunk_bytes"), ({"max_shard_bytes": -1}, "max_shard_bytes")]:
        with pytest.raises(InvalidArgumentError, match=f"convert options: {named}: invalid"):
            trajcore.convert(a, tmp_path / "out", **options)  # type: ignore[arg-type]
        assert not (tmp_path / "out").exists()


def test_keys_merge_sources_whose_spaces_differ_on_what_they_share(tmp_path: Path) -> None:
    import numpy as np
    from gymnasium import spaces

    pos = spaces.Box(-1, 1, (2,), np.float32)
    img = spaces.Box(0, 255, (3, 3), np.uint8)
    shapes = {"a": spaces.Dict({"pos": pos, "vel": pos}), "b": spaces.Dict({"pos": pos, "img": img})}
    for name, space in shapes.items():
        with trajcore.Writer(tmp_path / name, space, spaces.Discrete(2)) as w:
            for n in (3, 5):
                obs = {k: np.stack([s.sample() for _ in range(n + 1)]) for k, s in space.spaces.items()}
                w.add_episode(observations=obs, actions=np.arange(n) % 2, rewards=np.ones(n),
                              terminations=np.arange(n) == n - 1, truncations=np.zeros(n, bool),
                              data={"x": np.arange(n)})
    a, b = tmp_path / "a", tmp_path / "b"
    with pytest.raises(InvalidArgumentError, match=r"other spaces.*keys=\[\.\.\.\] chooses the values to keep"):
        trajcore.convert([a, b], tmp_path / "out")
    trajcore.convert([a, b], tmp_path / "out", keys=["obs/pos", "action"])
    with trajcore.open(tmp_path / "out") as ds, trajcore.open(a) as da, trajcore.open(b) as db:
        assert ds.observation_space == spaces.Dict({"pos": pos})
        sources = [*da.episodes, *db.episodes]
        for ep, src in zip(ds.episodes, sources, strict=True):
            assert list(ep.observations) == ["pos"]
            np.testing.assert_array_equal(ep.observations["pos"], src.observations["pos"])
            np.testing.assert_array_equal(ep.actions, src.actions)
            np.testing.assert_array_equal(ep.rewards, src.rewards)
            assert ep.data == {}  # data/x was not kept
    keys = ["--keys", "obs/pos", "--keys", "action"]
    assert main(["convert", str(a), str(b), str(tmp_path / "cli"), *keys]) == 0
    with trajcore.open(tmp_path / "cli") as ds:
        assert ds.observation_space == spaces.Dict({"pos": pos}) and ds.num_episodes == 4
    with pytest.raises(InvalidArgumentError, match="keep no action value"):
        trajcore.convert([a, b], tmp_path / "none", keys=["obs/pos"])
    assert not (tmp_path / "none").exists()
