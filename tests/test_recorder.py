"""RecordEpisodes: what goes in comes back, value by value, over every space type."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from helpers import SpaceEnv, assert_infos_equal, assert_tree_equal, expected_infos, run_single, stack


def check_dataset_against(ds: trajcore.Dataset, episodes: list[Any], env: gym.Env[Any, Any]) -> None:
    assert ds.num_episodes == len(episodes)
    assert ds.num_steps == sum(e.length for e in episodes)
    for got, want in zip(ds.episodes, episodes, strict=True):
        assert got.length == want.length
        assert got.env_index == 0
        assert got.complete
        assert got.terminated == want.terminations[-1]
        assert got.truncated == want.truncations[-1]
        assert got.episode_return == sum(want.rewards)
        assert_tree_equal(got.observations, stack(want.observations, env.observation_space), "observations")
        assert_tree_equal(got.actions, stack(want.actions, env.action_space), "actions")
        assert_tree_equal(got.rewards, np.array(want.rewards, dtype=np.float64), "rewards")
        assert_tree_equal(got.terminations, np.array(want.terminations), "terminations")
        assert_tree_equal(got.truncations, np.array(want.truncations), "truncations")
        assert_infos_equal(got.infos, expected_infos(want.infos))


def test_cartpole_round_trip(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), tmp_path / "cp", metadata={"agent": "random", "seed": 0})
    episodes = run_single(env, episodes=6, seed=0)
    env.close()
    with trajcore.open(tmp_path / "cp") as ds:
        assert ds.metadata == {"agent": "random", "seed": 0}
        assert ds.observation_space == env.observation_space
        assert ds.action_space == env.action_space
        check_dataset_against(ds, episodes, env)
        ep = ds.episodes[0]
        assert ep.observations.shape == (ep.length + 1, 4)
        assert ep.observations.dtype == np.float32
        assert ep.actions.dtype == np.int64
        assert ep.infos == {}
        assert ep.data == {}
        assert ep.start_ns > 0
        assert ep.end_ns >= ep.start_ns


BOX_CASES = {
    "box_f32": spaces.Box(-1.0, 1.0, (3,), np.float32),
    "box_f64_scalar": spaces.Box(-5.0, 5.0, (), np.float64),
    "box_f16": spaces.Box(-2.0, 2.0, (2, 2), np.float16),
    "box_u8_image": spaces.Box(0, 255, (6, 5, 3), np.uint8),
    "box_i16": spaces.Box(-300, 300, (2, 5), np.int16),
    "box_u64": spaces.Box(0, 2**40, (2,), np.uint64),
    "box_i8": spaces.Box(-128, 127, (4,), np.int8),
    "box_bool": spaces.Box(0, 1, (3,), np.bool_),
    "discrete": spaces.Discrete(5, start=-2),
    "discrete_i32": spaces.Discrete(4, dtype=np.int32),
    "multidiscrete": spaces.MultiDiscrete([[2, 3], [4, 5]], dtype=np.int32),
    "multibinary": spaces.MultiBinary([2, 3]),
    "text": spaces.Text(6, min_length=0),
    "dict": spaces.Dict(
        {
            "img": spaces.Box(0, 255, (4, 4), np.uint8),
            "vel": spaces.Box(-1, 1, (2,), np.float32),
            "a/b": spaces.Discrete(3),
        }
    ),
    "tuple": spaces.Tuple([spaces.Discrete(3), spaces.Box(-1, 1, (2,), np.float64), spaces.Text(3)]),
    "deep": spaces.Dict(
        {
            "t": spaces.Tuple(
                [
                    spaces.Dict({"x": spaces.MultiBinary(3), "y": spaces.Tuple([spaces.Discrete(2)])}),
                    spaces.Box(-1, 1, (1,), np.float32),
                ]
            ),
            "s": spaces.Text(4),
        }
    ),
}


@pytest.mark.parametrize("name", sorted(BOX_CASES))
def test_every_space_type_as_observation(tmp_path: Path, name: str) -> None:
    space = BOX_CASES[name]
    env = trajcore.RecordEpisodes(SpaceEnv(space, spaces.Discrete(3)), tmp_path / name)
    episodes = run_single(env, episodes=4, seed=1)
    env.close()
    with trajcore.open(tmp_path / name) as ds:
        assert ds.observation_space == space
        check_dataset_against(ds, episodes, env)


@pytest.mark.parametrize("name", ["box_f32", "box_i16", "multidiscrete", "multibinary", "text", "tuple", "deep"])
def test_every_space_type_as_action(tmp_path: Path, name: str) -> None:
    space = BOX_CASES[name]
    env = trajcore.RecordEpisodes(SpaceEnv(spaces.Box(-1, 1, (2,), np.float32), space), tmp_path / name)
    episodes = run_single(env, episodes=3, seed=2)
    env.close()
    with trajcore.open(tmp_path / name) as ds:
        assert ds.action_space == space
        check_dataset_against(ds, episodes, env)


def test_python_scalars_and_lists_are_cast_to_the_space_dtype(tmp_path: Path) -> None:
    class Plain(gym.Env[Any, Any]):
        observation_space = spaces.Box(-10, 10, (2,), np.float32)
        action_space = spaces.Discrete(3)

        def reset(
            self, *, seed: int | None = None, options: dict[str, Any] | None = None
        ) -> tuple[Any, dict[str, Any]]:
            return [0.5, 1.5], {}

        def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
            return [float(action), -1.0], 1, action == 2, False, {}

    with trajcore.RecordEpisodes(Plain(), tmp_path / "p") as env:
        env.reset()
        for a in [0, 1, 2]:
            env.step(a)
    with trajcore.open(tmp_path / "p") as ds:
        (ep,) = ds.episodes
        assert_tree_equal(ep.observations, np.array([[0.5, 1.5], [0, -1], [1, -1], [2, -1]], dtype=np.float32))
        assert_tree_equal(ep.actions, np.array([0, 1, 2], dtype=np.int64))
        assert_tree_equal(ep.rewards, np.array([1.0, 1.0, 1.0]))
        assert ep.terminated


def test_info_keys_appearing_and_missing_come_with_masks(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=7, p_terminate=0.0), tmp_path / "i")
    episodes = run_single(env, episodes=2, seed=3)
    env.close()
    with trajcore.open(tmp_path / "i") as ds:
        ep = ds.episodes[0]
        assert ep.length == 7
        infos = ep.infos
        # T+1 rows, aligned with the observations: the reset's info first.
        assert_tree_equal(infos["step"], np.arange(8, dtype=np.int64))
        assert_tree_equal(infos["_step"], np.ones(8, dtype=np.bool_))
        assert_tree_equal(infos["_even"], np.arange(8) % 2 == 0)
        # A missing entry reads as zero (and "" for strings), masked out.
        assert_tree_equal(infos["even"], np.where(np.arange(8) % 2 == 0, np.arange(8) / 2 + 0.25, 0.0))
        assert infos["label"] == ["s0", "", "", "s3", "", "", "s6", ""]
        assert_tree_equal(infos["_label"], np.arange(8) % 3 == 0)
        # Nested dict infos come back nested, with an any-present mask beside them.
        assert_tree_equal(infos["_nested"], np.arange(8) > 0)
        assert_tree_equal(infos["nested"]["a"], np.arange(8, dtype=np.int64) * 10)
        assert_tree_equal(infos["nested"]["_a"], np.arange(8) > 0)
        assert_tree_equal(infos["nested"]["b"][3], np.array([3, -3], dtype=np.float32))
        check_dataset_against(ds, episodes, env)


def test_key_first_seen_late_reads_as_absent_in_earlier_episodes(tmp_path: Path) -> None:
    def late(t: int) -> dict[str, Any]:
        return {"late": 7} if t == 5 else {}

    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=3, p_terminate=0.0, extra_info=late), tmp_path / "l")
    env.reset(seed=0)
    for _ in range(3):
        env.step(0)
    env.reset()
    for _ in range(3):
        env.step(0)
    env.close()
    with trajcore.open(tmp_path / "l") as ds:
        assert "late" not in ds.episodes[0].infos
        assert "late" not in ds.episodes[1].infos

    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=8, p_terminate=0.0, extra_info=late), tmp_path / "l2")
    run_single(env, episodes=2, seed=0)
    env.close()
    with trajcore.open(tmp_path / "l2") as ds:
        infos = ds.episodes[0].infos
        assert_tree_equal(infos["late"], np.array([0, 0, 0, 0, 0, 7, 0, 0, 0], dtype=np.int64))
        assert_tree_equal(infos["_late"], np.arange(9) == 5)


def test_unsupported_info_values_are_skipped_with_a_warning_naming_the_key(tmp_path: Path) -> None:
    def odd(t: int) -> dict[str, Any]:
        return {"weird_object": object(), "fine": t} if t == 2 else {"fine": t}

    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=4, p_terminate=0.0, infos=False, extra_info=odd), tmp_path / "w")
    env.reset(seed=0)
    env.step(0)
    with pytest.warns(trajcore.TrajcoreWarning, match="weird_object"):
        env.step(0)
    env.step(0)
    env.step(0)
    with pytest.warns(trajcore.TrajcoreWarning, match=r"'weird_object': 1 value\(s\) were not recorded"):
        env.close()
    with trajcore.open(tmp_path / "w") as ds:
        (ep,) = ds.episodes
        assert sorted(ep.infos) == ["_fine", "fine"]
        assert_tree_equal(ep.infos["fine"], np.arange(5, dtype=np.int64))
        assert ep.complete
        assert ep.length == 4


class BadEnv(gym.Env[Any, Any]):
    """Returns a bad observation at step `bad_at` of episode `bad_episode`."""

    def __init__(self, bad: Any, bad_episode: int = 1, bad_at: int = 4, space: Any = None) -> None:
        self.observation_space = space or spaces.Box(-1, 1, (3,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.bad = bad
        self.bad_episode = bad_episode
        self.bad_at = bad_at
        self.episode = -1
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.episode += 1
        self.t = 0
        return np.full(self.observation_space.shape, 0, self.observation_space.dtype), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        obs = np.full(self.observation_space.shape, self.t, self.observation_space.dtype)
        if self.episode == self.bad_episode and self.t == self.bad_at:
            obs = self.bad
        return obs, 0.5, self.t == 6, False, {}


@pytest.mark.parametrize(
    ("bad", "space", "match"),
    [
        (np.zeros(4, np.float32), None, r"obs.*shape \(3,\)"),
        (np.zeros((3, 1), np.float32), None, r"obs.*shape"),
        (np.array(["a", "b", "c"]), None, r"obs"),
        ("not an array", None, r"obs"),
        (np.array([0.5, 1.5, 2.5]), spaces.Box(0, 100, (3,), np.int32), r"obs.*int32"),
        (np.array([300, 1, 2]), spaces.Box(0, 255, (3,), np.uint8), r"obs"),
    ],
    ids=["longer", "extra-axis", "strings", "str", "float-to-int", "out-of-range"],
)
def test_bad_value_raises_keeps_episode_incomplete_and_resumes(
    tmp_path: Path, bad: Any, space: Any, match: str
) -> None:
    env = trajcore.RecordEpisodes(BadEnv(bad, space=space), tmp_path / "b")
    env.reset()
    for _ in range(6):
        env.step(0)  # episode 0: complete, 6 steps
    env.reset()
    for _ in range(3):
        env.step(1)
    with pytest.raises(trajcore.SchemaError, match=match) as err:
        env.step(1)  # episode 1 step 4: bad
    assert isinstance(err.value, ValueError)
    env.step(1)  # ignored until the next reset
    env.reset()
    for _ in range(6):
        env.step(0)  # episode 2: complete
    env.close()
    with trajcore.open(tmp_path / "b") as ds:
        assert ds.problems == []
        assert [e.length for e in ds.episodes] == [6, 3, 6]
        assert [e.complete for e in ds.episodes] == [True, False, True]
        bad_ep = ds.episodes[1]
        assert not bad_ep.terminated
        assert not bad_ep.truncated
        dtype = env.observation_space.dtype
        assert_tree_equal(bad_ep.observations, np.repeat(np.arange(4, dtype=dtype)[:, None], 3, axis=1))
        assert_tree_equal(bad_ep.actions, np.ones(3, dtype=np.int64))
        assert_tree_equal(ds.episodes[2].observations, np.repeat(np.arange(7, dtype=dtype)[:, None], 3, axis=1))


def test_bad_reward_and_nesting_raise_schema_error(tmp_path: Path) -> None:
    space = spaces.Dict({"a": spaces.Box(-1, 1, (2,), np.float32), "b": spaces.Discrete(2)})
    with trajcore.RecordEpisodes(SpaceEnv(space), tmp_path / "n") as env:
        env.reset(seed=0)
        core = env._native
        good = space.sample()
        with pytest.raises(trajcore.SchemaError, match="b"):
            core.step(0, {"a": good["a"]}, 1.0, False, False, {})
        env.reset(seed=0)
        with pytest.raises(trajcore.SchemaError, match="reward"):
            core.step(0, good, "lots", False, False, {})


def test_incomplete_episode_at_close(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=5, p_terminate=0.0), tmp_path / "c")
    episodes = run_single(env, episodes=2, seed=4)
    obs, _ = env.reset()
    env.step(1)
    env.step(2)
    env.close()
    with trajcore.open(tmp_path / "c") as ds:
        assert ds.num_episodes == 3
        assert [e.complete for e in ds.episodes] == [True, True, False]
        last = ds.episodes[-1]
        assert last.length == 2
        assert not last.terminated
        assert not last.truncated
        assert_tree_equal(last.actions, np.array([1, 2], dtype=np.int64))
        assert_tree_equal(last.observations[0], obs)
        assert ds.num_steps == 12
        assert [e.length for e in ds.episodes[:2]] == [e.length for e in episodes]


def test_episode_without_steps_is_not_kept(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=3, p_terminate=0.0), tmp_path / "z")
    env.reset(seed=0)
    env.reset()
    for _ in range(3):
        env.step(0)
    env.reset()
    env.close()
    with trajcore.open(tmp_path / "z") as ds:
        assert [e.length for e in ds.episodes] == [3]


def test_reset_mid_episode_keeps_it_incomplete(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=9, p_terminate=0.0), tmp_path / "r")
    env.reset(seed=0)
    env.step(0)
    env.step(0)
    env.reset()
    for _ in range(9):
        env.step(0)
    env.close()
    with trajcore.open(tmp_path / "r") as ds:
        assert [(e.length, e.complete) for e in ds.episodes] == [(2, False), (9, True)]


def test_dataset_and_episode_metadata_round_trip(tmp_path: Path) -> None:
    seen: list[trajcore.EpisodeInfo] = []

    def on_end(info: trajcore.EpisodeInfo) -> dict[str, Any]:
        seen.append(info)
        return {"len_seen": info["length"], "ret": info["episode_return"], "last_step": info["info"]["step"]}

    # The first two are read back 1 ulp off by a JSON parser without correct rounding.
    floats = [1.5231286713207461, 0.41774108453945613, 1 / 3, 0.1 + 0.2, 5e-324, 1.7976931348623157e308]
    meta = {
        "agent": "ppo",
        "lr": np.float32(0.25),
        "layers": [64, 64],
        "nested": {"ok": True, "none": None},
        "f": floats,
    }
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=6), tmp_path / "m", meta, episode_metadata=on_end)
    env.reset(seed=5)
    env.set_episode_metadata({"tag": "first"}, score=1)
    env.set_episode_metadata(score=2, extra=[1, 2], floats=floats)  # merges, later values win
    done = False
    while not done:
        _, _, term, trunc, _ = env.step(0)
        done = term or trunc
    episodes = run_single(env, episodes=2, seed=6)
    env.close()
    with trajcore.open(tmp_path / "m") as ds:
        assert ds.metadata == {
            "agent": "ppo",
            "lr": 0.25,
            "layers": [64, 64],
            "nested": {"ok": True, "none": None},
            "f": floats,
        }
        first = ds.episodes[0]
        assert first.metadata == {
            "tag": "first",
            "score": 2,
            "extra": [1, 2],
            "floats": floats,
            "len_seen": first.length,
            "ret": first.episode_return,
            "last_step": first.length,
        }
        for got, want in zip(ds.episodes[1:], episodes, strict=True):
            assert got.metadata == {"len_seen": want.length, "ret": sum(want.rewards), "last_step": want.length}
        assert [s["length"] for s in seen] == [e.length for e in ds.episodes]
        assert all(s["env_index"] == 0 for s in seen)


def test_metadata_must_be_json(tmp_path: Path) -> None:
    with pytest.raises(trajcore.InvalidArgumentError, match="JSON"):
        trajcore.RecordEpisodes(SpaceEnv(), tmp_path / "x", {"f": object()})
    with pytest.raises(trajcore.InvalidArgumentError, match="JSON"):
        trajcore.RecordEpisodes(SpaceEnv(), tmp_path / "x", {"nan": float("nan")})
    with trajcore.RecordEpisodes(SpaceEnv(), tmp_path / "y") as env:
        env.reset(seed=0)
        with pytest.raises(trajcore.InvalidArgumentError, match="JSON"):
            env.set_episode_metadata(bad={1, 2})


def test_recording_twice_into_one_directory_adds_shards(tmp_path: Path) -> None:
    first = trajcore.RecordEpisodes(SpaceEnv(), tmp_path / "d", {"run": 1})
    eps1 = run_single(first, episodes=2, seed=7)
    first.close()
    second = trajcore.RecordEpisodes(SpaceEnv(), tmp_path / "d", {"run": 2})
    eps2 = run_single(second, episodes=3, seed=8)
    second.close()
    with trajcore.open(tmp_path / "d") as ds:
        assert ds.num_recordings == 2
        assert len(ds.shards) == 2
        assert ds.metadata == {"run": 1}
        assert ds.meta(1)["metadata"] == {"run": 2}
        assert [e.recording for e in ds.episodes] == [0, 0, 1, 1, 1]
        check_dataset_against(ds, eps1 + eps2, first)
    # A single shard opens on its own.
    with trajcore.open(second.shard_paths[0]) as one:
        assert one.num_episodes == 3
        assert one.metadata == {"run": 2}


def test_small_max_shard_bytes_splits_into_several_shards(tmp_path: Path) -> None:
    space = spaces.Box(0, 255, (32, 32), np.uint8)
    env = trajcore.RecordEpisodes(
        SpaceEnv(space, max_steps=10), tmp_path / "s", max_shard_bytes=16 << 10, chunk_bytes=4 << 10, zstd_level=None
    )
    episodes = run_single(env, episodes=20, seed=9)
    env.close()
    assert len(env.shard_paths) > 2
    with trajcore.open(tmp_path / "s") as ds:
        assert ds.shards == sorted(ds.shards)
        assert len(ds.shards) == len(env.shard_paths)
        assert ds.num_recordings == 1
        check_dataset_against(ds, episodes, env)


def test_discard_drops_the_running_episode(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=4, p_terminate=0.0), tmp_path / "x")
    env.reset(seed=0)
    env.step(0)
    env.discard()
    env.step(0)  # ignored: the episode is gone
    env.reset()
    for _ in range(4):
        env.step(1)
    env.close()
    with trajcore.open(tmp_path / "x") as ds:
        assert [(e.length, e.complete) for e in ds.episodes] == [(4, True)]
        assert_tree_equal(ds.episodes[0].actions, np.ones(4, dtype=np.int64))


def test_custom_per_step_data(tmp_path: Path) -> None:
    def step_data(action: Any, obs: Any, reward: Any, term: bool, trunc: bool, info: Any) -> dict[str, Any]:
        return {"twice": 2 * int(action)}

    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=5, p_terminate=0.0), tmp_path / "d", step_data=step_data)
    env.reset(seed=0)
    for t in range(5):
        if t % 2 == 0:
            env.record(logp=np.float32(-t), vec=np.array([t, t + 1], dtype=np.int16))
        env.step(t % 3)
    env.close()
    with trajcore.open(tmp_path / "d") as ds:
        data = ds.episodes[0].data
        assert sorted(data) == ["_logp", "_twice", "_vec", "logp", "twice", "vec"]
        assert_tree_equal(data["twice"], np.array([0, 2, 4, 0, 2], dtype=np.int64))
        assert_tree_equal(data["_twice"], np.ones(5, dtype=np.bool_))
        assert_tree_equal(data["logp"], np.array([0, 0, -2, 0, -4], dtype=np.float32))
        assert_tree_equal(data["_logp"], np.array([True, False, True, False, True]))
        assert_tree_equal(data["vec"][4], np.array([4, 5], dtype=np.int16))


def test_close_is_idempotent_closes_the_env_and_refuses_steps(tmp_path: Path) -> None:
    inner = SpaceEnv()
    closed = []
    inner.close = lambda: closed.append(True)  # type: ignore[method-assign]
    env = trajcore.RecordEpisodes(inner, tmp_path / "c")
    env.reset(seed=0)
    env.step(0)
    env.close()
    env.close()
    assert closed == [True]
    assert env.closed
    with pytest.raises(trajcore.RecorderError):
        env._native.step(0, np.zeros(3, np.float32), 0.0, False, False, {})


def test_context_manager_and_flush_make_data_readable(tmp_path: Path) -> None:
    with trajcore.RecordEpisodes(SpaceEnv(max_steps=3, p_terminate=0.0), tmp_path / "f") as env:
        run_single(env, episodes=2, seed=0)
        env.flush()
        with trajcore.open(tmp_path / "f") as ds:
            assert ds.num_episodes == 2
            assert [e.complete for e in ds.episodes] == [True, True]
        stats = env.stats()
        assert stats["steps"] == 6
        assert stats["episodes"] >= 2
    assert env.closed


def test_codecs_options_are_checked(tmp_path: Path) -> None:
    space = spaces.Dict({"img": spaces.Box(0, 255, (8, 8), np.uint8), "v": spaces.Box(-1, 1, (2,), np.float32)})
    codecs: dict[str, Any] = {"obs/img": {"delta": True, "zstd_level": 5}, "info": {"zstd_level": None}}
    env = trajcore.RecordEpisodes(SpaceEnv(space), tmp_path / "k", codecs=codecs)
    episodes = run_single(env, episodes=3, seed=0)
    env.close()
    with trajcore.open(tmp_path / "k") as ds:
        check_dataset_against(ds, episodes, env)
        cols = {c["name"]: c for c in ds._core.columns(0)}
        # Every column states the chunk size it was sealed at (readers bound decoding by it).
        # (8, 8) rows may be stacks of 8 frames: sealed on stored bytes, declaring 8x the raw.
        assert cols["obs/img"]["codec"] == {"delta": True, "zstd_level": 5, "chunk_bytes": 8 << 20}
        assert cols["obs/v"]["codec"] == {"delta": False, "zstd_level": 3, "chunk_bytes": 1 << 20}
    with pytest.raises(trajcore.InvalidArgumentError, match="names no column"):
        trajcore.RecordEpisodes(SpaceEnv(space), tmp_path / "k2", codecs={"obs/nope": {}})
    with pytest.raises(trajcore.InvalidArgumentError, match="unknown option"):
        trajcore.RecordEpisodes(SpaceEnv(space), tmp_path / "k3", codecs={"obs": {"level": 3}})
    with pytest.raises(trajcore.InvalidArgumentError, match="durability"):
        trajcore.RecordEpisodes(SpaceEnv(space), tmp_path / "k4", durability="sometimes")


def test_unsupported_space_is_refused_at_construction(tmp_path: Path) -> None:
    env = SpaceEnv(spaces.Dict({"seq": spaces.Sequence(spaces.Discrete(3))}))
    with pytest.raises(trajcore.SchemaError, match="'obs/seq': Sequence"):
        trajcore.RecordEpisodes(env, tmp_path / "u")


def test_no_warning_on_a_clean_run(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", trajcore.TrajcoreWarning)
        env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), tmp_path / "q")
        run_single(env, episodes=2, seed=0)
        env.close()
        with trajcore.open(tmp_path / "q") as ds:
            assert ds.num_episodes == 2
