"""Collection from many processes into one dataset (`trajcore.ray.collect`) on a local Ray: two
actors record at the same time into one directory, and each actor's recording reads back exactly
what its envs produced (an independent capture of the same seeded env run, `capture.py`)."""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("ray", reason="trajcore.ray needs ray[data] (CI installs ray[data,rllib])")

import trajcore
import trajcore.ray
from capture import Capture, assert_episode
from export_data import NESTED_ACTION, NESTED_OBS
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from helpers import SpaceEnv, StartTogether

pytestmark = pytest.mark.usefixtures("ray_local")

ENV = functools.partial(SpaceEnv, NESTED_OBS, NESTED_ACTION, max_steps=25, p_terminate=0.05)


def captured(seed: int, num_envs: int, steps: int) -> list[Any]:
    """What an actor's vector env produces for `seed` (the same env, seeds and random actions as
    `Collector.run`), split into episodes without trajcore."""
    envs = SyncVectorEnv([ENV] * num_envs, autoreset_mode=AutoresetMode.NEXT_STEP)
    cap = Capture(AutoresetMode.NEXT_STEP, num_envs, envs.single_observation_space, envs.single_action_space)
    obs, infos = envs.reset(seed=seed)
    envs.action_space.seed(seed)
    cap.reset(obs, infos)
    for _ in range(steps):
        actions = envs.action_space.sample()
        obs, rewards, terms, truncs, infos = envs.step(actions)
        cap.step(actions, obs, rewards, terms, truncs, infos)
    envs.close()
    return cap.close()


def test_two_actors_record_into_one_directory_exactly(tmp_path: Path) -> None:
    path = tmp_path / "ds"
    meeting = tmp_path / "meeting"  # the actors step at the same time, however late Ray starts one
    meeting.mkdir()
    ds = trajcore.ray.collect(
        functools.partial(StartTogether, str(meeting), 2, *ENV.args, **ENV.keywords),
        path,
        num_actors=2,
        num_envs_per_actor=3,
        steps=400,
        seed=10,
        metadata={"run": "t"},
        max_shard_bytes=25_000,  # shards roll over while both actors write
        chunk_bytes=4_000,
        flush_interval=0.05,
    )
    with ds:
        assert ds.problems == []
        assert ds.num_recordings == 2
        names = [os.path.basename(s) for s in ds.shards]
        assert len(names) == len(set(names)) > 2  # each recorder its own shards, several each
        metas = [ds.meta(r)["metadata"] for r in range(2)]
        assert sorted(m["ray"]["actor_index"] for m in metas) == [0, 1]
        for m in metas:
            assert m["run"] == "t"
            assert m["ray"]["actor_id"] and m["ray"]["host"] and m["ray"]["pid"] != os.getpid()
            assert m["ray"]["start_time"] > 0
        assert metas[0]["ray"]["actor_id"] != metas[1]["ray"]["actor_id"]
        assert metas[0]["ray"]["pid"] != metas[1]["ray"]["pid"]
        # They recorded at the same time: each recording's episodes began before the other's ended.
        s = ds.summaries()
        spans = [(s["start_ns"][s["recording"] == r].min(), s["end_ns"][s["recording"] == r].max()) for r in range(2)]
        assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]
        assert_each_actor_recorded_exactly(ds, 10, 3, 400)
        assert ds.num_steps == sum(e.length for e in ds.episodes)


def assert_actions(got: Any, want: list[Any], where: str) -> None:
    np.testing.assert_array_equal(got[0], np.array([a[0] for a in want]), err_msg=where)
    np.testing.assert_array_equal(got[1], np.array([a[1] for a in want]), err_msg=where)


def test_a_policy_is_used_and_bad_arguments_are_refused(tmp_path: Path) -> None:
    ds = trajcore.ray.collect(
        "CartPole-v1",
        tmp_path / "cp",
        num_actors=1,
        num_envs_per_actor=2,
        steps=50,
        policy=lambda obs: np.ones(len(obs), dtype=np.int64),
    )
    with ds:
        assert ds.num_recordings == 1 and ds.num_steps == 100 - (ds.num_episodes - 2)  # NEXT_STEP resets
        assert all(ep.actions.tolist() == [1] * ep.length for ep in ds.episodes)
    for kwargs, match in (
        ({"num_actors": 0}, "num_actors"),
        ({"num_envs_per_actor": 1.5}, "num_envs_per_actor"),
        ({"steps": -1}, "steps"),
        ({"policy": 3}, "policy"),
        ({"zstd_levl": 3}, "zstd_levl"),
    ):
        with pytest.raises(trajcore.InvalidArgumentError, match=match):
            trajcore.ray.collect("CartPole-v1", tmp_path / "bad", **{"steps": 1, **kwargs})
    assert not (tmp_path / "bad").exists()


def test_an_actor_error_is_raised_after_every_actor_finished(tmp_path: Path) -> None:
    trajcore.ray.collect("CartPole-v1", tmp_path / "ds", num_actors=1, steps=5).close()
    with pytest.raises(trajcore.InvalidArgumentError, match="holds recordings of another"):
        trajcore.ray.collect("Acrobot-v1", tmp_path / "ds", num_actors=2, steps=5)


def assert_each_actor_recorded_exactly(ds: trajcore.Dataset, seed: int, num_envs: int, steps: int) -> None:
    """Each recording of `ds` holds exactly what its actor's envs produced (`captured` of the
    seed `collect` gave the actor)."""
    for r in range(ds.num_recordings):
        k = ds.meta(r)["metadata"]["ray"]["actor_index"]
        want = captured(seed + num_envs * k, num_envs, steps)
        for i in range(num_envs):
            got = [ep for ep in ds.episodes if ep.recording == r and ep.env_index == i]
            expected = [e for e in want if e.env_index == i]
            assert len(got) == len(expected) > 3, f"actor {k} sub-env {i}"
            for n, (g, w) in enumerate(zip(got, expected, strict=True)):
                assert_episode(g, w, NESTED_OBS, f"actor {k} sub-env {i} episode {n}")
                assert_actions(g.actions, w.actions, f"actor {k} sub-env {i} episode {n}")


def test_more_actors_than_cpus_take_turns_and_finish(tmp_path: Path) -> None:
    """8 actors on the 2 CPUs of `ray_local`: actors that finished give their CPU back, so the
    others start. Run in a thread with a deadline, so a regression fails instead of hanging."""
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            path = tmp_path / "cp"
            done["ds"] = trajcore.ray.collect("CartPole-v1", path, num_actors=8, num_envs_per_actor=2, steps=60)
        except BaseException as e:
            done["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=300)
    assert not thread.is_alive(), "collect with 8 actors on 2 CPUs did not finish in 300 s"
    assert "error" not in done, done.get("error")
    with done["ds"] as ds:
        assert ds.problems == []
        assert ds.num_recordings == 8
        assert sorted(ds.meta(r)["metadata"]["ray"]["actor_index"] for r in range(8)) == list(range(8))
        for r in range(8):
            k = ds.meta(r)["metadata"]["ray"]["actor_index"]
            got = {i: [ep.length for ep in ds.episodes if ep.recording == r and ep.env_index == i] for i in (0, 1)}
            assert got == cartpole_lengths(seed=2 * k, num_envs=2, steps=60), f"actor {k}"


def cartpole_lengths(seed: int, num_envs: int, steps: int) -> dict[int, list[int]]:
    """Each sub-env's episode lengths in an actor's run of CartPole (its seeds and random
    actions, gymnasium's NEXT_STEP autoreset), counted without trajcore; an episode cut by the
    end of the run counts, one that had no step yet does not."""
    envs = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync")
    envs.reset(seed=seed)
    envs.action_space.seed(seed)
    lengths: dict[int, list[int]] = {i: [] for i in range(num_envs)}
    running, resetting = [0] * num_envs, [False] * num_envs
    for _ in range(steps):
        _, _, terms, truncs, _ = envs.step(envs.action_space.sample())
        for i in range(num_envs):
            if resetting[i]:  # this step was the autoreset's, not the env's
                resetting[i] = False
                continue
            running[i] += 1
            if terms[i] or truncs[i]:
                lengths[i].append(running[i])
                running[i], resetting[i] = 0, True
    envs.close()
    for i in range(num_envs):
        if running[i]:
            lengths[i].append(running[i])
    return lengths


def test_actors_the_cluster_cannot_hold_are_refused_at_once(tmp_path: Path) -> None:
    for options, name in (({"num_cpus": 3}, "3 CPU"), ({"num_cpus": 1, "num_gpus": 1}, "1 GPU")):
        with pytest.raises(trajcore.InvalidArgumentError, match=f"asks for {name} .*no actor could start"):
            trajcore.ray.collect("CartPole-v1", tmp_path / "never", num_actors=1, steps=5, actor_options=options)
    assert not (tmp_path / "never").exists()


def test_bounded_actors_each_keep_their_capacity_in_one_directory(tmp_path: Path) -> None:
    """`capacity_steps` bounds each actor's recording (one capacity per actor): two actors
    stepping at the same time into a directory that already holds an older recording each keep
    at most the capacity of their own newest transitions (plus a shard), never counting or
    deleting the other's shards, both evict the old recording first, and one eviction log counts
    everything deleted; what is kept is the newest of what each actor's envs produced."""
    assert_bounded_actors_keep_their_capacity(tmp_path / "ds", tmp_path)


def assert_bounded_actors_keep_their_capacity(path: str | Path, tmp_path: Path, **store: Any) -> None:
    """The test above for the dataset `path` (a directory, or a store prefix with its `store`
    options: ``storage_options``)."""
    capacity, num_envs, steps = 300, 3, 400
    with trajcore.RecordVectorEpisodes(SyncVectorEnv([ENV] * 2), path, **store) as old:
        old.reset(seed=0)
        for _ in range(100):
            old.step(old.action_space.sample())
    with trajcore.open(path, **store) as before:
        old_steps = before.num_steps
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    ds = trajcore.ray.collect(
        functools.partial(StartTogether, str(meeting), 2, *ENV.args, **ENV.keywords),
        path,
        num_actors=2,
        num_envs_per_actor=num_envs,
        steps=steps,
        seed=10,
        capacity_steps=capacity,
        flush_interval=0.05,
        **store,
    )
    with ds:
        assert ds.problems == []
        actors = {ds.meta(r)["metadata"]["ray"]["actor_index"]: r for r in range(ds.num_recordings)}
        assert sorted(actors) == [0, 1], "the old recording is evicted"
        kept = [0, 0]
        for r, n in ds._core.shard_steps:
            kept[r] += n
        produced = 0
        for k, r in actors.items():
            want = captured(10 + num_envs * k, num_envs, steps)
            produced += sum(len(w.actions) for w in want)
            # At most the capacity in closed shards, plus the newest one (never deleted).
            assert capacity // 2 < kept[r] <= capacity + capacity // 10 + num_envs, (k, kept)
            for i in range(num_envs):
                got = [ep for ep in ds.episodes if ep.recording == r and ep.env_index == i and ep.complete]
                expected = [w for w in want if w.env_index == i and w.complete]
                assert len(got) >= 2, f"actor {k} sub-env {i}"
                for n, (g, w) in enumerate(zip(reversed(got), reversed(expected), strict=False)):
                    assert_episode(g, w, NESTED_OBS, f"actor {k} sub-env {i} episode -{n + 1}")
        assert ds.evicted_steps == old_steps + produced - sum(kept)
