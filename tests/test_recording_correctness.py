"""Recording correctness: one test per defect of the "no silently wrong data" issue. Each failed
on the main branch before the fix; each checks values against what the env produced."""

from __future__ import annotations

import functools
import gc
import types
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from format_decoder import DecodedDataset
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics
from helpers import SpaceEnv
from trajcore.read.records import infos as infos_module
from trajcore.record import session

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


class ClosingEnv(SpaceEnv):
    """Counts `close` calls (shared through a list so sub-envs of a sync vector env report)."""

    def __init__(self, closes: list[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.closes = closes

    def close(self) -> None:
        self.closes.append(1)
        super().close()


def _vec(
    mode: AutoresetMode, n: int = 3, vectorization: str = "sync", p_terminate: float = 0.1, **env_kwargs: Any
) -> VectorEnv[Any, Any, Any]:
    fns = [functools.partial(SpaceEnv, max_steps=4 + i, p_terminate=p_terminate, **env_kwargs) for i in range(n)]
    if vectorization == "sync":
        return SyncVectorEnv(fns, autoreset_mode=mode)
    return AsyncVectorEnv(fns, autoreset_mode=mode)


def _drive(rec: Any, steps: int, mode: AutoresetMode, seed: int = 0) -> None:
    """Steps a vector recorder, resetting ended sub-envs in DISABLED mode."""
    rec.action_space.seed(seed)
    rec.reset(seed=seed)
    for _ in range(steps):
        _, _, term, trunc, _ = rec.step(rec.action_space.sample())
        done = term | trunc
        if mode is AutoresetMode.DISABLED and done.any():
            rec.reset(options={"reset_mask": done})


# --- 1. close ------------------------------------------------------------------------------------


def test_close_closes_sync_sub_envs(tmp_path: Path) -> None:
    closes: list[int] = []
    venv = SyncVectorEnv([functools.partial(ClosingEnv, closes) for _ in range(3)])
    rec = trajcore.RecordVectorEpisodes(venv, tmp_path / "d")
    _drive(rec, 5, AutoresetMode.NEXT_STEP)
    rec.close()
    assert len(closes) == 3, "every sub-env is closed"
    assert venv.closed
    rec.close()  # idempotent
    assert len(closes) == 3


def test_close_stops_async_workers(tmp_path: Path) -> None:
    venv = _vec(AutoresetMode.NEXT_STEP, vectorization="async")
    processes = list(venv.processes)
    rec = trajcore.RecordVectorEpisodes(venv, tmp_path / "d")
    _drive(rec, 5, AutoresetMode.NEXT_STEP)
    rec.close()
    assert venv.closed
    for p in processes:
        p.join(timeout=10)
        assert not p.is_alive(), "an async worker outlived close()"
    assert trajcore.open(tmp_path / "d").num_episodes >= 1


class ForeignVectorEnv:
    """Follows the VectorEnv API without deriving from gymnasium's class."""

    def __init__(self) -> None:
        self.inner = _vec(AutoresetMode.NEXT_STEP)
        self.num_envs = 3
        self.observation_space = self.inner.observation_space
        self.action_space = self.inner.action_space
        self.single_observation_space = self.inner.single_observation_space
        self.single_action_space = self.inner.single_action_space
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}
        self.closed = 0

    def reset(self, **kwargs: Any) -> Any:
        return self.inner.reset(**kwargs)

    def step(self, actions: Any) -> Any:
        return self.inner.step(actions)

    def close(self, **kwargs: Any) -> None:
        self.closed += 1
        self.inner.close()


def test_close_closes_a_foreign_env(tmp_path: Path) -> None:
    env = ForeignVectorEnv()
    rec = trajcore.RecordVectorEpisodes(env, tmp_path / "d")
    _drive(rec, 5, AutoresetMode.NEXT_STEP)
    rec.close()
    assert env.closed == 1


def test_a_failed_constructor_leaves_the_users_env_open(tmp_path: Path) -> None:
    closes: list[int] = []
    venv = SyncVectorEnv([functools.partial(ClosingEnv, closes) for _ in range(2)])
    with pytest.raises(trajcore.InvalidArgumentError):
        trajcore.RecordVectorEpisodes(venv, tmp_path / "d", durability="sometimes")
    gc.collect()  # VectorEnv.__del__ would close an env it thinks is its own
    assert not venv.closed and closes == []
    venv.reset(seed=0)
    venv.step(venv.action_space.sample())  # still usable
    venv.close()
    single = ClosingEnv(closes)
    with pytest.raises(trajcore.InvalidArgumentError):
        trajcore.RecordEpisodes(single, tmp_path / "s", metadata=[1, 2])  # type: ignore[arg-type]
    gc.collect()
    assert closes == [1, 1]  # only the vector env's own close


# --- 2, 3. vector RecordEpisodeStatistics: on the episode it describes, once, at its final row -


@pytest.mark.parametrize("vectorization", ["sync", "async"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_episode_statistics_land_on_their_episode_once(tmp_path: Path, mode: AutoresetMode, vectorization: str) -> None:
    envs = RecordEpisodeStatistics(
        gym.make_vec(
            "CartPole-v1", num_envs=3, vectorization_mode=vectorization, vector_kwargs={"autoreset_mode": mode}
        )
    )
    rec = trajcore.RecordVectorEpisodes(envs, tmp_path / "d")
    given: dict[int, list[tuple[float, int]]] = {0: [], 1: [], 2: []}  # what the wrapper reported
    rec.action_space.seed(0)
    rec.reset(seed=0)
    for _ in range(400):
        _, _, term, trunc, infos = rec.step(rec.action_space.sample())
        if "episode" in infos:
            for i in np.flatnonzero(infos["_episode"]):
                given[int(i)].append((float(infos["episode"]["r"][i]), int(infos["episode"]["l"][i])))
        done = term | trunc
        if mode is AutoresetMode.DISABLED and done.any():
            rec.reset(options={"reset_mask": done})
    rec.close()
    ds = trajcore.open(tmp_path / "d")
    recorded: dict[int, list[tuple[float, int]]] = {0: [], 1: [], 2: []}
    for ep in ds.episodes:
        stats = ep.infos.get("episode")
        if not ep.complete:
            assert stats is None, f"episode {ep.index}: statistics on a running episode"
            continue
        assert stats is not None, f"episode {ep.index}: no statistics"
        present = np.flatnonzero(stats["_r"])
        assert present.tolist() == [ep.length], f"episode {ep.index}: statistics at rows {present}"
        assert np.array_equal(ep.infos["_episode"], stats["_r"])
        assert not np.any(stats["r"][: ep.length]), "rows without statistics read as masked zeros"
        recorded[ep.env_index].append((float(stats["r"][-1]), int(stats["l"][-1])))
        if mode is not AutoresetMode.DISABLED:
            # (gymnasium's vector RecordEpisodeStatistics counts wrong across masked resets.)
            assert (stats["r"][-1], stats["l"][-1]) == (ep.episode_return, ep.length)
    assert sum(len(v) for v in recorded.values()) >= 10
    assert recorded == given, "every reported statistic is recorded, once, in order, on its sub-env"


def test_nested_vector_infos_follow_the_parent_mask(tmp_path: Path) -> None:
    """A nested dict's `_key` applies to every entry below it (no `r == 0.0` rows marked present)."""

    class NestedInfos(gym.vector.VectorWrapper):  # type: ignore[type-arg]
        def step(self, actions: Any) -> Any:
            obs, r, te, tr, infos = self.env.step(actions)
            infos = dict(infos)
            mask = np.array([True, False, True])
            inner_mask = np.array([True, True, False])
            infos["stats"] = {"a": np.array([1.0, 0.0, 3.0]), "b": {"c": np.array([5, 0, 0]), "_c": inner_mask}}
            infos["_stats"] = mask
            return obs, r, te, tr, infos

    rec = trajcore.RecordVectorEpisodes(NestedInfos(_vec(AutoresetMode.NEXT_STEP, infos=False)), tmp_path / "d")
    rec.reset(seed=1)
    rec.step(rec.action_space.sample())
    rec.close()
    by_env = {ep.env_index: ep for ep in trajcore.open(tmp_path / "d").episodes}
    assert set(by_env) == {0, 1, 2}
    a = {i: bool(ep.info_masks["stats"]["a"][1]) for i, ep in by_env.items() if "stats" in ep.info_masks}
    assert a == {0: True, 2: True}
    assert by_env[0].infos["stats"]["a"][1] == 1.0 and by_env[2].infos["stats"]["a"][1] == 3.0
    assert "stats" not in by_env[1].infos  # never present there
    assert by_env[0].info_masks["stats"]["b"]["c"].tolist() == [False, True]
    assert by_env[0].infos["stats"]["b"]["c"][1] == 5
    assert "b" not in by_env[2].info_masks["stats"], "parent mask AND own mask: never present in env 2"


# --- 4. keys x and _x; 1 and "1" ---------------------------------------------------------------


def test_keys_x_and_underscore_x_both_record(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(
        SpaceEnv(infos=False, extra_info=lambda t: {"lives": 5 - t, "_lives": t % 2 == 0}, max_steps=4, p_terminate=0),
        tmp_path / "d",
    )
    env.reset(seed=0)
    for _ in range(4):
        env.step(env.action_space.sample())
    env.close()
    ep = trajcore.open(tmp_path / "d").episodes[0]
    assert ep.infos["lives"].tolist() == [5, 4, 3, 2, 1]
    assert ep.infos["_lives"].tolist() == [True, False, True, False, True], "the env's own _lives keeps its name"
    assert ep.info_masks["lives"].all() and ep.info_masks["_lives"].all()


def test_vector_keys_x_and_underscore_x(tmp_path: Path) -> None:
    """gymnasium vectorizes a sub-env's `_lives` as `_lives` plus its mask `__lives`."""
    venv = SyncVectorEnv(
        [
            functools.partial(SpaceEnv, infos=False, extra_info=lambda t: {"lives": 3, "_lives": 7}, max_steps=3)
            for _ in range(2)
        ]
    )
    rec = trajcore.RecordVectorEpisodes(venv, tmp_path / "d")
    rec.reset(seed=0)
    rec.step(rec.action_space.sample())
    rec.close()
    ep = trajcore.open(tmp_path / "d").episodes[0]
    assert ep.infos["lives"].tolist() == [3, 3]
    assert ep.info_masks["_lives"].all()


def test_keys_1_and_str_1_warn_and_the_first_records(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(
        SpaceEnv(infos=False, extra_info=lambda t: {1: 10 + t, "1": -1}, max_steps=2, p_terminate=0), tmp_path / "d"
    )
    with pytest.warns(trajcore.TrajcoreWarning, match=r"keys 1 and '1'"):
        env.reset(seed=0)
    env.step(env.action_space.sample())
    env.step(env.action_space.sample())
    with pytest.warns(trajcore.TrajcoreWarning, match=r"info entry '1': 3 value"):
        env.close()
    assert trajcore.open(tmp_path / "d").episodes[0].infos["1"].tolist() == [10, 11, 12]


# --- 5. a malformed value never disables a column ----------------------------------------------


def test_a_bad_record_value_raises_at_that_call_and_the_column_goes_on(tmp_path: Path) -> None:
    rec = trajcore.RecordVectorEpisodes(_vec(AutoresetMode.NEXT_STEP, n=4, p_terminate=0, infos=False), tmp_path / "d")
    rec.reset(seed=0)
    with pytest.raises(trajcore.SchemaError, match=r"data/logp.*4"):
        rec.record(logp=np.zeros(3))
    for t in range(3):
        rec.record(logp=np.full(4, t, dtype=np.float32))
        rec.step(rec.action_space.sample())
    with pytest.raises(trajcore.SchemaError, match="data/logp"):
        rec.record(logp=np.zeros((4, 2), dtype=np.float32))
    rec.record(logp=np.full(4, 9, dtype=np.float32))
    rec.step(rec.action_space.sample())
    rec.close()
    ep = next(e for e in trajcore.open(tmp_path / "d").episodes if e.env_index == 0 and e.length >= 4)
    assert ep.data["logp"][:4].tolist() == [0, 1, 2, 9]
    assert ep.data["_logp"][:4].all()


def test_a_bad_info_value_is_masked_with_a_count_and_the_column_goes_on(tmp_path: Path) -> None:
    # Step 1 gives an object; every other step a float.
    def extra(t: int) -> dict[str, Any]:
        return {"x": object() if t == 1 else float(t), "y": object() if t < 2 else t}

    env = trajcore.RecordEpisodes(SpaceEnv(infos=False, extra_info=extra, max_steps=4, p_terminate=0), tmp_path / "d")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env.reset(seed=0)
        for _ in range(4):
            env.step(env.action_space.sample())
        assert env.stats()["values_not_recorded"] == {"info/x": 1, "info/y": 2}
        env.close()
    said = [str(w.message) for w in caught if issubclass(w.category, trajcore.TrajcoreWarning)]
    assert len(said) == 4, said
    assert "info entry 'y': a value is not recorded" in said[0]
    assert "info entry 'x': a value is not recorded" in said[1]
    assert {s.split(":")[1] for s in said[2:]} == {" info entry 'x'", " info entry 'y'"}
    assert "info entry 'y': 2 value(s) were not recorded" in said[3]
    ep = trajcore.open(tmp_path / "d").episodes[0]
    assert ep.info_masks["x"].tolist() == [True, False, True, True, True]
    assert ep.infos["x"].tolist() == [0.0, 0.0, 2.0, 3.0, 4.0]
    # A first value that cannot make a column does not stop a later one from making it.
    assert ep.info_masks["y"].tolist() == [False, False, True, True, True]
    assert ep.infos["y"][2:].tolist() == [2, 3, 4]


# --- 6, 7. discard and metadata after the ending step, every mode ------------------------------


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_discard_and_metadata_after_the_end_reach_the_ended_episode(tmp_path: Path, mode: AutoresetMode) -> None:
    rec = trajcore.RecordVectorEpisodes(_vec(mode, infos=False), tmp_path / "d")
    rec.action_space.seed(0)
    rec.reset(seed=0)
    dropped: list[tuple[int, float]] = []
    tagged: list[tuple[int, float]] = []
    returns = np.zeros(3)
    lengths = np.zeros(3, dtype=int)
    waiting = np.zeros(3, dtype=bool)  # NEXT_STEP: the next step is an autoreset
    for _ in range(120):
        _, reward, term, trunc, _ = rec.step(rec.action_space.sample())
        live = ~waiting
        returns[live] += reward[live]
        lengths[live] += 1
        done = (term | trunc) & live
        for i in np.flatnonzero(done):
            key = (int(lengths[i]), float(returns[i]))
            if len(dropped) <= len(tagged):
                rec.discard(int(i))
                dropped.append(key)
            else:
                rec.set_episode_metadata(int(i), {"tag": "ended", "len": key[0]})
                tagged.append(key)
        returns[done] = 0
        lengths[done] = 0
        if mode is AutoresetMode.NEXT_STEP:
            waiting = done
        if mode is AutoresetMode.DISABLED and done.any():
            rec.reset(options={"reset_mask": done})
    rec.close()
    ds = trajcore.open(tmp_path / "d")
    listed = {(ep.length, ep.episode_return) for ep in ds.episodes if ep.complete}
    assert len(dropped) >= 5
    assert not listed & set(dropped), "a discarded episode is listed"
    got = {(ep.length, ep.episode_return) for ep in ds.episodes if ep.metadata.get("tag") == "ended"}
    assert got == set(tagged)
    for ep in ds.episodes:
        if ep.metadata:
            assert ep.metadata["len"] == ep.length


def test_single_env_discard_after_the_end_and_its_limits(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=3, p_terminate=0), tmp_path / "d")
    env.reset(seed=0)
    for _ in range(3):
        env.step(env.action_space.sample())
    env.discard()  # the episode that just ended
    with pytest.raises(trajcore.InvalidArgumentError, match="none is running or just ended"):
        env.discard()
    env.reset()
    for _ in range(3):
        env.step(env.action_space.sample())
    env.flush()
    with pytest.raises(trajcore.InvalidArgumentError, match="flush"):
        env.discard()
    with pytest.raises(trajcore.InvalidArgumentError, match="flush"):
        env.set_episode_metadata(late=True)
    env.reset()
    env.step(env.action_space.sample())
    env.set_episode_metadata(running=True)
    env.close()
    eps = list(trajcore.open(tmp_path / "d").episodes)
    assert [(e.length, e.complete) for e in eps] == [(3, True), (1, False)]
    assert eps[1].metadata == {"running": True}


# --- 8. an episode with only its reset row is neither listed nor written ------------------------


def test_reset_only_episodes_write_no_rows(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=2, p_terminate=0), tmp_path / "d")
    env.reset(seed=0)
    env.step(env.action_space.sample())
    env.step(env.action_space.sample())
    env.reset()
    env.flush()  # a flush between the reset and close must not write its row either
    env.reset()
    env.close()
    ds = trajcore.open(tmp_path / "d")
    assert [e.length for e in ds.episodes] == [2]
    decoded = DecodedDataset(tmp_path / "d")
    (rid,) = decoded.recordings
    obs = decoded.spec(rid, "obs")
    stored = sum(ref.n_rows for ref, _ in decoded.chunks[(rid, 0, obs["id"])])
    assert stored == 3, "only the listed episode's T+1 observation rows are in the file"


# --- 9. a refused step ends the episodes it touched ---------------------------------------------


def test_a_step_too_big_for_the_ring_ends_the_episodes_incomplete(tmp_path: Path) -> None:
    space = spaces.Box(0, 255, (64, 64), np.uint8)
    rec = trajcore.RecordVectorEpisodes(
        _vec(AutoresetMode.NEXT_STEP, n=2, p_terminate=0, observation_space=space, infos=False),
        tmp_path / "d",
        ring_bytes=1 << 17,
    )
    rec.reset(seed=0)
    for _ in range(2):
        rec.step(rec.action_space.sample())
    rec.record(pad=np.zeros((2, 1 << 16), dtype=np.uint8))
    with pytest.raises(trajcore.InvalidArgumentError, match=r"does not fit.*ended as incomplete"):
        rec.step(rec.action_space.sample())
    for _ in range(40):
        rec.step(rec.action_space.sample())
    rec.close()
    ds = trajcore.open(tmp_path / "d")
    first = [ep for ep in ds.episodes if ep.start_ns == min(e.start_ns for e in ds.episodes)]
    assert sorted((ep.env_index, ep.length, ep.complete) for ep in first) == [(0, 2, False), (1, 2, False)]
    _check_no_shift(ds)


def test_refused_steps_with_block_when_full_false_never_shift_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer that cannot keep up (the core's fault hook: it sleeps 5 ms per step), so that the
    # ring fills and steps are refused on any machine.
    slow = functools.partial(trajcore._core.Recorder, test_faults='{"slow_step_ms": 5}')
    monkeypatch.setattr(session, "_core", types.SimpleNamespace(**{**vars(trajcore._core), "Recorder": slow}))
    space = spaces.Box(0, 255, (128, 128), np.uint8)
    rec = trajcore.RecordVectorEpisodes(
        _vec(AutoresetMode.NEXT_STEP, n=2, observation_space=space, infos=False),
        tmp_path / "d",
        ring_bytes=1 << 16,
        block_when_full=False,
        zstd_level=19,
    )
    rec.reset(seed=0)
    refused = 0
    for t in range(400):
        rec.record(t=np.full(2, t, dtype=np.int64))
        try:
            rec.step(rec.action_space.sample())
        except trajcore.RecorderError as e:
            if "buffer is full" not in str(e):
                raise
            refused += 1
    rec.close()
    assert refused > 0, "the slowed writer fell behind: some steps were refused"
    _check_no_shift(trajcore.open(tmp_path / "d"))


def _check_no_shift(ds: trajcore.Dataset) -> None:
    """SpaceEnv's step counter (info "step") runs 0..T within each episode: a hole or a shift
    inside an episode breaks it."""
    for ep in ds.episodes:
        if "step" in ep.infos:
            assert ep.infos["step"].tolist() == list(range(ep.length + 1)), f"episode {ep.index}"
        if "t" in ep.data:
            t = ep.data["t"]
            assert np.array_equal(np.diff(t), np.ones(len(t) - 1, dtype=t.dtype)), f"episode {ep.index}: {t}"


# --- 10. cycles and depth ----------------------------------------------------------------------


def test_an_info_that_contains_itself_raises_schema_error(tmp_path: Path) -> None:
    def cyclic(t: int) -> dict[str, Any]:
        d: dict[str, Any] = {"a": 1}
        d["self"] = d
        return d

    env = trajcore.RecordEpisodes(SpaceEnv(infos=False, extra_info=cyclic, max_steps=3), tmp_path / "d")
    with pytest.raises(trajcore.SchemaError, match=r"info/self/self.*deeper than 32"):
        env.reset(seed=0)
    env.close()


def test_deep_infos_over_the_bound_raise_and_under_it_read_back(tmp_path: Path) -> None:
    def nest(depth: int) -> dict[str, Any]:
        d: dict[str, Any] = {"leaf": 1}
        for _ in range(depth - 1):
            d = {"n": d}
        return d

    env = trajcore.RecordEpisodes(SpaceEnv(infos=False, extra_info=lambda t: nest(2000), max_steps=3), tmp_path / "a")
    with pytest.raises(trajcore.SchemaError, match="deeper than 32"):
        env.reset(seed=0)
    env.close()
    env = trajcore.RecordEpisodes(
        SpaceEnv(infos=False, extra_info=lambda t: nest(32), max_steps=1, p_terminate=0), tmp_path / "b"
    )
    env.reset(seed=0)
    env.step(env.action_space.sample())
    env.close()
    node = trajcore.open(tmp_path / "b").episodes[0].infos
    for _ in range(31):
        node = node["n"]
    assert node["leaf"].tolist() == [1, 1]


def test_the_reader_bounds_nesting_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = trajcore.RecordEpisodes(
        SpaceEnv(infos=False, extra_info=lambda t: {"a": {"b": {"c": 1}}}, max_steps=1, p_terminate=0), tmp_path / "d"
    )
    env.reset(seed=0)
    env.step(env.action_space.sample())
    env.close()
    monkeypatch.setattr(infos_module, "MAX_INFO_DEPTH", 2)
    with pytest.raises(trajcore.CorruptFileError, match="info/a/b/c"):
        _ = trajcore.open(tmp_path / "d").episodes[0].infos


# --- 11. metadata that is not a mapping --------------------------------------------------------


@pytest.mark.parametrize("metadata", [[1, 2], "hello", 5])
def test_metadata_that_is_not_a_mapping_is_invalid_argument(tmp_path: Path, metadata: Any) -> None:
    with pytest.raises(trajcore.InvalidArgumentError, match=f"metadata must be a mapping.*{type(metadata).__name__}"):
        trajcore.RecordEpisodes(SpaceEnv(), tmp_path / "d", metadata=metadata)
    env = trajcore.RecordEpisodes(SpaceEnv(), tmp_path / "e")
    env.reset(seed=0)
    with pytest.raises(trajcore.InvalidArgumentError, match="episode metadata must be a mapping"):
        env.set_episode_metadata(metadata)
    env.close()


# --- 12. another env into the same directory ---------------------------------------------------


def test_another_env_in_the_same_directory_is_refused_unless_asked(tmp_path: Path) -> None:
    with trajcore.RecordEpisodes(gym.make("CartPole-v1"), tmp_path / "d") as env:
        env.reset(seed=0)
        env.step(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trajcore.RecordEpisodes(gym.make("CartPole-v1"), tmp_path / "d").close()  # the same env: silent
    with pytest.raises(trajcore.InvalidArgumentError, match=r"another observation space.*Box.*allow_mixed_spaces"):
        trajcore.RecordEpisodes(gym.make("MountainCar-v0"), tmp_path / "d")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trajcore.RecordEpisodes(gym.make("MountainCar-v0"), tmp_path / "d", allow_mixed_spaces=True).close()
    said = sorted(str(w.message) for w in caught)
    assert len(said) == 2
    assert "another action space: Discrete(2) there, Discrete(3) here (same columns, other bounds)" in said[0]
    assert "another observation space" in said[1] and "cannot be sampled as one" in said[1]


# --- 13. spaces of other classes ---------------------------------------------------------------


class MissionLike(spaces.Space[str]):
    """A str space that derives from no gymnasium text space (like minigrid's MissionSpace)."""

    def __init__(self) -> None:
        super().__init__(dtype=str)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return "go to the door"

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)


class Opaque(spaces.Space[Any]):
    def __init__(self) -> None:
        super().__init__()


class MyBox(spaces.Box):
    pass


def test_spaces_of_other_classes(tmp_path: Path) -> None:
    obs = spaces.Dict({"mission": MissionLike(), "pos": MyBox(-1, 1, (2,), np.float32)})
    env = trajcore.RecordEpisodes(SpaceEnv(obs, max_steps=2, p_terminate=0), tmp_path / "d")
    env.reset(seed=0)
    env.step(env.action_space.sample())
    env.close()
    ds = trajcore.open(tmp_path / "d")
    assert ds.episodes[0].observations["mission"] == ["go to the door"] * 2
    assert isinstance(ds.observation_space["mission"], spaces.Text)  # type: ignore[index]
    with pytest.raises(trajcore.SchemaError, match=r"Opaque is not one of the spaces.*ObservationWrapper"):
        trajcore.RecordEpisodes(SpaceEnv(spaces.Dict({"x": Opaque()})), tmp_path / "e")


# --- steps with no running episode -------------------------------------------------------------


def test_steps_without_a_running_episode_are_counted_and_warned(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=2, p_terminate=0), tmp_path / "d")
    env.reset(seed=0)
    env.step(env.action_space.sample())
    env.step(env.action_space.sample())  # ends the episode
    with pytest.warns(trajcore.TrajcoreWarning, match="not recorded"):
        env.step(env.action_space.sample())  # no reset: nothing runs
    env.step(env.action_space.sample())
    assert env.stats()["steps_not_recorded"] == 2
    with pytest.warns(trajcore.TrajcoreWarning, match="in all: env 0: 2"):
        env.close()
    assert [e.length for e in trajcore.open(tmp_path / "d").episodes] == [2]
