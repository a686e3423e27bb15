"""A bounded recording (`capacity_steps`) reopened on a store prefix that already holds shards
(issue 34, "a store prefix with capacity"), against the real S3 server on loopback: the
recorder counts the prefix's shards and evicts the oldest first, deleting their objects; the
prefix's eviction log goes on counting; a reader of the prefix afterwards lists exactly what a
local directory recorded the same way keeps, value for value. A store that refuses the
deletions is said once, retried, and never makes a reader return a row the env did not give."""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore

pytest.importorskip("boto3", reason="the object storage tests need boto3 and moto[server] (pip install '.[test]')")
pytest.importorskip("moto.server", reason="the object storage tests need moto[server] (pip install '.[test]')")
from s3_proxy import s3_proxy
from s3_server import S3

INTERVAL = 0.25
NUM_ENVS = 4


def shard_keys(s3: S3, bucket: str, prefix: str) -> list[str]:
    """The names of the shard objects under `prefix`, in key order (the reader's order)."""
    listed = s3.client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/").get("Contents", [])
    names = [o["Key"].split("/", 1)[1] for o in listed]
    return sorted(n for n in names if n.endswith(".trj") and "/" not in n)


def eviction_logs(s3: S3, bucket: str, prefix: str) -> list[str]:
    """The shards the eviction log objects under `prefix` name (each bounded recording its own
    log object), all of them."""
    listed = s3.client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/").get("Contents", [])
    keys = [o["Key"] for o in listed if o["Key"].split("/")[-1].startswith("trajcore-evictions")]
    return [
        shard
        for key in keys
        for shard in json.loads(s3.client.get_object(Bucket=bucket, Key=key)["Body"].read())["evicted_shards"]
    ]


def record(
    path: str | Path,
    seed: int,
    until: Callable[[int], bool],
    given: set[bytes] | None = None,
    each_step: Callable[[int], None] = lambda step: None,
    **options: Any,
) -> tuple[int, dict[str, Any]]:
    """CartPole x4 recorded to `path` with seeded random actions until `until(step)`; each
    (observation, action, next observation) transition the env gave goes into `given`. Returns
    the steps taken and the recorder's stats after close, with the transitions the env gave as
    `"given"` (a sub-env's autoreset step is none)."""
    envs = gym.make_vec("CartPole-v1", num_envs=NUM_ENVS, vectorization_mode="sync")
    rec = trajcore.RecordVectorEpisodes(envs, path, **options)
    rng = np.random.default_rng(seed)
    obs, _ = rec.reset(seed=seed)
    autoreset = np.zeros(NUM_ENVS, dtype=bool)
    step = transitions = 0
    while not until(step):
        actions = rng.integers(0, 2, NUM_ENVS)
        nxt, _, term, trunc, _ = rec.step(actions)
        for i in range(NUM_ENVS):
            if not (step > 0 and autoreset[i]):  # a sub-env's reset step is no transition
                transitions += 1
                if given is not None:
                    given.add(obs[i].tobytes() + actions[i].tobytes() + nxt[i].tobytes())
        autoreset, obs = term | trunc, nxt
        step += 1
        each_step(step)
    rec.close()
    return step, {**rec.stats(), "given": transitions}


def assert_same_episodes(got: trajcore.Dataset, want: trajcore.Dataset) -> None:
    assert got.num_episodes == want.num_episodes > 0
    assert got.num_steps == want.num_steps
    assert got.evicted_steps == want.evicted_steps
    assert [a.env_index for a in got.episodes] == [b.env_index for b in want.episodes]
    assert_same_values(got.episodes, want.episodes)


def assert_same_values(mine: Sequence[trajcore.Episode], theirs: Sequence[trajcore.Episode]) -> None:
    """The same episodes, in order: how each ended and every value."""
    assert len(mine) == len(theirs) > 0
    for a, b in zip(mine, theirs, strict=True):
        assert (a.complete, a.continued, a.length) == (b.complete, b.continued, b.length)
        np.testing.assert_array_equal(a.observations, b.observations)
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.rewards, b.rewards)
        np.testing.assert_array_equal(a.terminations, b.terminations)


def test_a_bounded_recording_reopened_on_a_filled_prefix_evicts_its_oldest_shards(
    s3: S3, no_aws_env: None, tmp_path: Path
) -> None:
    """A prefix holding about 2,000 transitions, reopened with a capacity of 1,000: the
    recording counts them, the oldest shards go first (the survivors are the newest of the old
    ones and the new ones), the count adds up over both recordings, and a reader of the prefix
    lists exactly what a local directory recorded the same way keeps."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/buffer"
    local = tmp_path / "buffer"
    store = {"flush_interval": INTERVAL, "storage_options": s3.options}
    # 4,000 transitions into a capacity of 2,000 (shards of 200), in the store and locally.
    _, first = record(url, 0, lambda s: s == 1000, capacity_steps=2000, **store)
    _, first_local = record(local, 0, lambda s: s == 1000, capacity_steps=2000)
    assert first["evicted_steps"] == first_local["evicted_steps"] > 0
    before = shard_keys(s3, bucket, "buffer")
    with trajcore.open(url, storage_options=s3.options) as ds:
        assert ds.num_steps >= 1800 and not ds.problems
    # Reopened with a capacity of 1,000 (shards of 100): 600 new transitions.
    _, second = record(url, 1, lambda s: s == 150, capacity_steps=1000, **store)
    _, second_local = record(local, 1, lambda s: s == 150, capacity_steps=1000)
    assert second["eviction_error"] is None
    # It evicted the old data it counted (about 1,000 of it): the stats count this recording's.
    assert second["evicted_steps"] == second_local["evicted_steps"] >= 1000
    after = shard_keys(s3, bucket, "buffer")
    survivors = [k for k in before if k in after]
    assert survivors == before[len(before) - len(survivors) :], "the oldest shards go first"
    assert len(survivors) < len(before)
    objects = s3.client.list_objects_v2(Bucket=bucket, Prefix="buffer/").get("Contents", [])
    assert not [o["Key"] for o in objects if ".trj.open/" in o["Key"]]  # no segment stays
    with trajcore.open(url, storage_options=s3.options) as ds, trajcore.open(local) as want:
        assert ds.evicted_steps == first["evicted_steps"] + second["evicted_steps"]
        assert ds.num_steps + ds.evicted_steps == first["given"] + second["given"]
        assert ds.num_steps <= 1000 + 100
        assert len(ds.shards) == len(after) and not ds.problems
        assert_same_episodes(ds, want)


def test_a_reopened_bounded_recordings_failed_deletions_are_said_once_and_retried(
    s3: S3, no_aws_env: None, tmp_path: Path
) -> None:
    """The store refuses the first deletions of the old shards a reopened bounded recording
    evicts: the recorder warns once, naming the URL, and the next intervals delete them; a
    reader of the prefix refreshing meanwhile samples only transitions the env gave; afterwards
    the prefix reads as the same recording into a local directory."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/buffer"
    local = tmp_path / "buffer"
    given: set[bytes] = set()
    record(url, 0, lambda s: s == 300, given, capacity_steps=400, flush_interval=INTERVAL, storage_options=s3.options)
    record(local, 0, lambda s: s == 300, capacity_steps=400)
    with s3_proxy(s3.endpoint) as proxy:
        options = {**s3.options, "endpoint": proxy.endpoint, "max_retries": "0", "retry_timeout": "5"}
        reader = trajcore.open(url, storage_options=options)
        proxy.fail(3, only=f"DELETE /{bucket}/buffer/")
        sampled = 0

        def read(step: int) -> None:
            nonlocal sampled
            if step % 10:
                return
            with warnings.catch_warnings():
                warnings.simplefilter("error", trajcore.TrajcoreWarning)
                reader.refresh()
            if not reader.num_steps:  # the old data evicted, the new not up yet
                return
            batch = reader.sample_transitions(32, seed=step)
            for o, a, n in zip(batch["observations"], batch["actions"], batch["next_observations"], strict=True):
                assert o.tobytes() + np.asarray(a, dtype=np.int64).tobytes() + n.tobytes() in given
            sampled += 32

        deadline = time.monotonic() + 120
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")

            def said() -> list[str]:
                return [str(w.message) for w in caught if "an upload failed" in str(w.message)]

            def until(step: int) -> bool:
                assert time.monotonic() < deadline
                return step >= 200 and bool(said())

            steps, stats = record(
                url, 1, until, given, read, capacity_steps=400, flush_interval=INTERVAL, storage_options=options
            )
        assert said()[0].startswith(f"{url}: an upload failed") and "DELETE" in said()[0], said()
        assert len(said()) == 1, said()  # once per outage
        assert stats["evicted_steps"] > 0 and stats["eviction_error"] is None
        assert proxy.refused >= 1 and sampled > 0
        reader.close()
    _, want_stats = record(local, 1, lambda s: s == steps, capacity_steps=400)
    assert stats["evicted_steps"] == want_stats["evicted_steps"]
    with trajcore.open(url, storage_options=s3.options) as ds, trajcore.open(local) as want:
        assert len(ds.shards) == len(shard_keys(s3, bucket, "buffer")) and not ds.problems
        assert_same_episodes(ds, want)


def record_refused(
    url: str, options: dict[str, str], interval: float, left: Callable[[], list[str]], **more: Any
) -> trajcore.RecordVectorEpisodes:
    """A bounded recording (CartPole x4, capacity 400) to `url` through a proxy that refuses its
    deletions, stepped until the store refused one (the recorder warns once, naming the URL) and
    `left()` names an object the refusals left (an evicted shard that had gone up); returned
    open."""
    envs = gym.make_vec("CartPole-v1", num_envs=NUM_ENVS, vectorization_mode="sync")
    rec = trajcore.RecordVectorEpisodes(
        envs, url, capacity_steps=400, flush_interval=interval, storage_options=options, **more
    )
    rng = np.random.default_rng(0)
    rec.reset(seed=0)
    deadline = time.monotonic() + 120
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = 0
        while step < 300 or not any("an upload failed" in str(w.message) for w in caught) or not left():
            assert time.monotonic() < deadline
            for _ in range(10):
                rec.step(rng.integers(0, 2, NUM_ENVS))
            step += 10
    said = [str(w.message) for w in caught if "an upload failed" in str(w.message)]
    assert len(said) == 1 and said[0].startswith(f"{url}: an upload failed") and "DELETE" in said[0], said
    return rec


def evicted_objects(s3: S3, bucket: str) -> list[str]:
    """The objects under `buffer/` of shards an eviction log of the prefix names, their
    segments included (asked of the server, not through the proxy)."""
    listed = [o["Key"] for o in s3.client.list_objects_v2(Bucket=bucket, Prefix="buffer/").get("Contents", [])]
    evicted = eviction_logs(s3, bucket, "buffer")
    return [k for k in listed if k.split("/")[1].removesuffix(".open") in evicted]


def test_deletions_refused_until_a_bounded_recording_closes_are_tried_again_by_the_close(
    s3: S3, no_aws_env: None
) -> None:
    """The store refuses every deletion of a bounded recording (evicted shards that had gone
    up, segments), and takes them again as the recording closes, after six more refusals (the
    recording's last evictions and ticks, every 2 s here, may meet some; the close's tries meet
    the rest: rust/core/tests/objstore_uploads.rs shows the close's own tries apart): the close tries again and
    goes through, says nothing, and leaves no evicted shard's object and no segment behind; a
    reader of the prefix reads what is left."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/buffer"
    with s3_proxy(s3.endpoint) as proxy:
        options = {**s3.options, "endpoint": proxy.endpoint, "max_retries": "0", "retry_timeout": "5"}
        proxy.fail(-1, only=f"DELETE /{bucket}/buffer/")
        rec = record_refused(url, options, 2.0, lambda: evicted_objects(s3, bucket))
        refused = proxy.refused
        proxy.fail(6, only=f"DELETE /{bucket}/buffer/")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rec.close()
        assert proxy.refused == refused + 6, "every refusal was met"
        assert not [str(w.message) for w in caught if "evicted" in str(w.message)]
        stats = rec.stats()
        assert stats["evicted_steps"] > 0 and stats["eviction_error"] is None, stats["eviction_error"]
    assert evicted_objects(s3, bucket) == [] and eviction_logs(s3, bucket, "buffer")
    listed = [o["Key"] for o in s3.client.list_objects_v2(Bucket=bucket, Prefix="buffer/").get("Contents", [])]
    assert not [k for k in listed if ".trj.open/" in k], "no segment stays"
    with trajcore.open(url, storage_options=s3.options) as ds:
        assert ds.evicted_steps == stats["evicted_steps"] and not ds.problems
        assert len(ds.shards) == len(shard_keys(s3, bucket, "buffer"))


def test_deletions_a_store_refuses_past_the_close_are_said_once_and_done_by_the_next_recording(
    s3: S3, no_aws_env: None
) -> None:
    """A store that still refuses the deletions at close: the close tries for a few seconds,
    returns, and warns once, naming the URL and the first shard left (`eviction_error` says it
    too); readers leave those shards out. Once the store takes deletions again, and the
    recording's lease (whose deletion the store refused too) is stale, the next bounded
    recording on the prefix deletes them: the failure does not outlive its cause."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/buffer"
    with s3_proxy(s3.endpoint) as proxy:
        options = {**s3.options, "endpoint": proxy.endpoint, "max_retries": "0", "retry_timeout": "5"}
        proxy.fail(-1, only=f"DELETE /{bucket}/buffer/")
        timings = {"lease_renew_interval": 0.5, "lease_ttl": 2.5}  # stale soon after the close
        rec = record_refused(url, options, INTERVAL, lambda: evicted_objects(s3, bucket), **timings)
        began = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rec.close()
        assert time.monotonic() - began < 30
        said = [str(w.message) for w in caught if "evicted" in str(w.message)]
        assert len(said) == 1, said
        assert said[0].startswith(f"trajcore: {url}: ") and "could not be deleted" in said[0], said
        assert f"from {url}/" in said[0] and "503" in said[0], said
        stats = rec.stats()
        assert stats["eviction_error"] is not None and url in stats["eviction_error"]
        with trajcore.open(url, storage_options=options) as ds:
            assert ds.evicted_steps == stats["evicted_steps"] and not ds.problems
            assert not {Path(p).name for p in ds.shards} & set(eviction_logs(s3, bucket, "buffer"))
        proxy.fail(0)
    left = evicted_objects(s3, bucket)
    assert left  # there still
    trajcore._core.configure_store(url, list(s3.options.items()))
    names = sorted({k.split("/")[1].removesuffix(".open") for k in left})
    deadline = time.monotonic() + 30
    while any(trajcore._core.live_store_shards(url, names)):
        assert time.monotonic() < deadline, "the closed recorder's lease never went stale"
        time.sleep(0.1)  # the poll's period
    store = {"flush_interval": INTERVAL, "storage_options": s3.options}
    _, again = record(url, 1, lambda s: s == 10, capacity_steps=400, **store)
    assert again["eviction_error"] is None
    assert evicted_objects(s3, bucket) == []


def test_a_killed_recorders_segments_are_made_a_shard_and_counted_when_reopened(
    s3: S3, no_aws_env: None, tmp_path: Path
) -> None:
    """A recorder killed mid-shard leaves its shard in the store as segments (no shard yet: no
    reader lists it). A bounded recording reopened on the prefix makes them the shard first (as
    `trajcore recover URL` does) and counts it: here the capacity evicts it with the other old
    shards, which it would otherwise never have known of."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/buffer"
    store = {"flush_interval": INTERVAL, "storage_options": s3.options}
    _, first = record(url, 0, lambda s: s == 300, capacity_steps=400, **store)  # about 400 kept
    # The killed recorder's shard, about 200 transitions, as one segment from offset 0.
    killed = tmp_path / "killed"
    _, lost = record(killed, 2, lambda s: s == 50)
    (shard,) = killed.glob("*.trj")
    s3.client.upload_file(str(shard), bucket, f"buffer/{shard.name}.open/{0:020d}")
    with trajcore.open(url, storage_options=s3.options) as ds:
        assert shard.name not in [Path(s).name for s in ds.shards]
        kept_before, evicted_before = ds.num_steps, ds.evicted_steps
    _, stats = record(url, 1, lambda s: s == 100, capacity_steps=400, **store)  # about 400 new transitions
    names = s3.client.list_objects_v2(Bucket=bucket, Prefix="buffer/").get("Contents", [])
    assert not [o["Key"] for o in names if ".trj.open/" in o["Key"]]
    # Counted: evicted with the older shards (the new recording alone fills the capacity).
    assert f"buffer/{shard.name}" not in [o["Key"] for o in names]
    assert stats["evicted_steps"] >= kept_before + lost["given"]
    with trajcore.open(url, storage_options=s3.options) as ds:
        assert shard.name in eviction_logs(s3, bucket, "buffer")
        assert ds.evicted_steps == evicted_before + stats["evicted_steps"]
        assert ds.num_steps + ds.evicted_steps == first["given"] + lost["given"] + stats["given"]
        assert not ds.problems


def test_a_store_failing_while_a_reopened_bounded_recording_counts_fails_it_by_name(
    s3: S3, no_aws_env: None, tmp_path: Path
) -> None:
    """A store that fails while a bounded recording counts the prefix's shards fails the
    recorder's construction with `TrajcoreIOError` naming the URL (never an uncounted prefix,
    never a staging directory left); once the store answers, the same call counts them."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/buffer"
    record(url, 0, lambda s: s == 100, capacity_steps=400, storage_options=s3.options)
    staging = Path(os.environ.get("TMPDIR", "/tmp"))
    staged_before = set(staging.glob(f"trajcore-staging-{bucket}_buffer-*"))
    with s3_proxy(s3.endpoint) as proxy:
        options = {**s3.options, "endpoint": proxy.endpoint, "max_retries": "0", "retry_timeout": "5"}
        proxy.fail(-1)
        with pytest.raises(trajcore.TrajcoreIOError, match=url):
            trajcore.RecordEpisodes(gym.make("CartPole-v1"), url, capacity_steps=400, storage_options=options)
        assert set(staging.glob(f"trajcore-staging-{bucket}_buffer-*")) == staged_before
        proxy.fail(0)
        with trajcore.open(url, storage_options=options) as ds:
            kept = ds.num_steps
        _, stats = record(url, 1, lambda s: s == 100, capacity_steps=400, storage_options=options)
    # The old shards were counted: uncounted, the prefix would hold them and the new ones.
    assert kept + stats["given"] > 400 + 400 // 10 and stats["evicted_steps"] > 0
    with trajcore.open(url, storage_options=s3.options) as ds:
        assert ds.num_steps <= 400 + 400 // 10 and not ds.problems


def record_spread(
    path: str | Path,
    seed: int,
    episodes: int,
    given: set[bytes] | None = None,
    each_cycle: Callable[[], None] = lambda: None,
    **options: Any,
) -> dict[str, dict[str, Any]]:
    """`episodes` episodes of the real PettingZoo env simple_spread (3 agents, 25 cycles each)
    recorded by `RecordParallelEpisodes` into `path`, with seeded random actions; each agent's
    (observation, action, next observation) transitions go into `given`. Returns each agent's
    recorder stats after close."""
    from mpe2 import simple_spread_v3

    env = trajcore.RecordParallelEpisodes(simple_spread_v3.parallel_env(max_cycles=25), path, **options)
    rng = np.random.default_rng(seed)
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed * 1000 + episode)
        while env.agents:
            actions = {a: int(rng.integers(0, 5)) for a in env.agents}
            nxt, *_ = env.step(actions)
            if given is not None:
                for a, action in actions.items():
                    given.add(obs[a].tobytes() + np.int64(action).tobytes() + nxt[a].tobytes())
            obs = nxt
            each_cycle()
    env.close()
    return {str(a): s for a, s in env.stats().items()}


def assert_same_agents(got: trajcore.Dataset, want: trajcore.Dataset) -> None:
    """Each agent's episodes, in order, the same in both (shards of different agents interleave
    by their recording ids, which differ between two recordings)."""
    assert sorted(got.agents) == sorted(want.agents) and got.agents
    assert got.evicted_steps == want.evicted_steps
    for agent in got.agents:
        mine = [e for e in got.episodes if e.agent == agent]
        theirs = [e for e in want.episodes if e.agent == agent]
        assert_same_values(mine, theirs)


def test_the_multi_agent_recorders_bound_one_prefix_each_agent_by_its_capacity(
    s3: S3, no_aws_env: None, tmp_path: Path
) -> None:
    """simple_spread's 3 agents, one recorder each, into one prefix with capacity 200 each: every
    agent's recorder counts and evicts its own agent's shards, with its own eviction log object,
    and the logs add up. A reader of the prefix following along samples only transitions the
    env gave; afterwards the prefix reads as the same recording into a local directory, episode
    for episode, evicted_steps included, and it holds at most 200 plus a shard per agent.
    Reopened on the prefix, each agent's recorder counts its agent's old shards."""
    pytest.importorskip("mpe2", reason="needs mpe2 (pip install '.[test]')")
    bucket = s3.bucket()
    url = f"s3://{bucket}/spread"
    local = tmp_path / "spread"
    store = {"flush_interval": INTERVAL, "storage_options": s3.options}
    given: set[bytes] = set()
    # Written once, so the reader following along has a prefix to open.
    record_spread(url, 0, 1, given, capacity_steps=200, **store)
    record_spread(local, 0, 1, capacity_steps=200)
    reader = trajcore.open(url, storage_options=s3.options)
    sampled = cycles = 0

    def follow() -> None:
        nonlocal sampled, cycles
        cycles += 1
        if cycles % 10:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("error", trajcore.TrajcoreWarning)
            reader.refresh()
        for agent in reader.agents:
            mine = reader.select(agent=agent)
            if not mine.num_steps:
                continue
            batch = mine.sample_transitions(16, seed=cycles)
            for o, a, n in zip(batch["observations"], batch["actions"], batch["next_observations"], strict=True):
                assert o.tobytes() + np.asarray(a, dtype=np.int64).tobytes() + n.tobytes() in given
            sampled += 16

    # 3 agents x 25 x 30 = 2,250 transitions into capacities of 200 (shards of 20) per agent.
    stats = record_spread(url, 1, 30, given, follow, capacity_steps=200, **store)
    want = record_spread(local, 1, 30, capacity_steps=200)
    reader.close()
    assert sampled > 0
    for agent, s in stats.items():
        assert s["eviction_error"] is None
        assert s["evicted_steps"] == want[agent]["evicted_steps"] > 0, agent
    objects = s3.client.list_objects_v2(Bucket=bucket, Prefix="spread/").get("Contents", [])
    logs = [o["Key"] for o in objects if o["Key"].split("/")[-1].startswith("trajcore-evictions")]
    assert len(logs) == 3, logs  # one per agent's recording (the first recording evicted nothing)
    assert not [o["Key"] for o in objects if ".trj.open/" in o["Key"]]
    with trajcore.open(url, storage_options=s3.options) as ds, trajcore.open(local) as mirror:
        assert ds.evicted_steps == sum(s["evicted_steps"] for s in stats.values())
        assert ds.num_steps + ds.evicted_steps == 3 * 25 * 31
        for agent in ds.agents:
            assert ds.select(agent=agent).num_steps <= 200 + 20, agent
        assert len(ds.shards) == len(shard_keys(s3, bucket, "spread")) and not ds.problems
        assert_same_agents(ds, mirror)
    # Reopened: each agent's recorder counts its agent's old shards (about 200 each) with 75 new.
    again = record_spread(url, 2, 3, capacity_steps=200, **store)
    again_local = record_spread(local, 2, 3, capacity_steps=200)
    for agent, s in again.items():
        assert s["evicted_steps"] == again_local[agent]["evicted_steps"] > 0, agent
    with trajcore.open(url, storage_options=s3.options) as ds, trajcore.open(local) as mirror:
        assert ds.num_steps + ds.evicted_steps == 3 * 25 * 34
        assert_same_agents(ds, mirror)


def test_a_store_failing_while_the_multi_agent_recorders_start_fails_them_by_name(
    s3: S3, no_aws_env: None, tmp_path: Path
) -> None:
    """The multi-agent recorders with a capacity make what a killed recorder left in the prefix
    into shards before any agent records: a store failing then fails the constructor with
    `TrajcoreIOError` naming the URL; once the store answers, the same call records, bounded."""
    pytest.importorskip("mpe2", reason="needs mpe2 (pip install '.[test]')")
    from mpe2 import simple_spread_v3

    bucket = s3.bucket()
    url = f"s3://{bucket}/spread"
    record_spread(url, 0, 10, capacity_steps=100, storage_options=s3.options)
    with s3_proxy(s3.endpoint) as proxy:
        options = {**s3.options, "endpoint": proxy.endpoint, "max_retries": "0", "retry_timeout": "5"}
        proxy.fail(-1)
        with pytest.raises(trajcore.TrajcoreIOError, match=url):
            trajcore.RecordParallelEpisodes(
                simple_spread_v3.parallel_env(), url, capacity_steps=100, storage_options=options
            )
        proxy.fail(0)
        stats = record_spread(url, 1, 2, capacity_steps=100, storage_options=options)
    assert all(s["evicted_steps"] > 0 for s in stats.values()), stats
    with trajcore.open(url, storage_options=s3.options) as ds:
        assert not ds.problems
        for agent in ds.agents:
            assert ds.select(agent=agent).num_steps <= 100 + 10, agent



def _refresh_and_sample(reader: trajcore.Dataset, seed: int) -> list[bytes]:
    """A refresh of a live reader, warnings as errors, then 64 transitions sampled with `seed`:
    each as the bytes of its observation, action and next observation."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", trajcore.TrajcoreWarning)
        reader.refresh()
    batch = reader.sample_transitions(64, seed=seed)
    rows = zip(batch["observations"], batch["actions"], batch["next_observations"], strict=True)
    return [o.tobytes() + np.asarray(x, dtype=np.int64).tobytes() + n.tobytes() for o, x, n in rows]

# A CartPole x4 recorder in a process of its own (bounded unless its capacity is 0), stepping
# when told: each line it reads is a number of vector steps to take ("stepped" once done), 0
# closes it and prints its stats.
STEPPER = """
import json, sys, gymnasium as gym, numpy as np, trajcore
path, seed, capacity, given_path, options = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
store = {"storage_options": json.loads(options)} if options else {}
store |= json.loads(sys.argv[6])  # more recording options
envs = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
rec = trajcore.RecordVectorEpisodes(
    envs, path, {"who": seed}, capacity_steps=capacity or None, flush_interval=0.25, **store
)
rng = np.random.default_rng(seed)
obs, _ = rec.reset(seed=seed)
autoreset = np.zeros(4, dtype=bool)
given = open(given_path, "w")
print("ready", flush=True)
for line in sys.stdin:
    if int(line) == 0:
        break
    for _ in range(int(line)):
        actions = rng.integers(0, 2, 4)
        nxt, _, term, trunc, _ = rec.step(actions)
        for i in range(4):
            if not autoreset[i]:
                given.write((obs[i].tobytes() + actions[i].tobytes() + nxt[i].tobytes()).hex() + "\\n")
        autoreset, obs = term | trunc, nxt
    print("stepped", flush=True)
rec.close()
given.close()
print(json.dumps({k: v for k, v in rec.stats().items() if isinstance(v, int | float | None)}), flush=True)
"""


def outline(e: Any) -> tuple[int, bool, bool, int]:
    return (e.env_index, e.complete, e.continued, e.length)


def kept_by(ds: trajcore.Dataset, who: int) -> tuple[int, list[Any]]:
    """The transitions kept of the recording whose metadata says `who`, and its episodes."""
    (r,) = [r for r in range(ds.num_recordings) if ds.meta(r)["metadata"]["who"] == who]
    return sum(n for q, n in ds._core.shard_steps if q == r), [e for e in ds.episodes if e.recording == r]


class Stepper:
    """A `STEPPER` process recording into `path`; `step(n)` waits until it took n vector steps."""

    def __init__(
        self,
        path: str | Path,
        seed: int,
        capacity: int,
        given: Path,
        options: dict[str, str] | None,
        **recording: Any,
    ) -> None:
        import subprocess
        import sys

        self.given = given
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                STEPPER,
                str(path),
                str(seed),
                str(capacity),
                str(given),
                json.dumps(options) if options else "",
                json.dumps(recording),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"

    def step(self, n: int) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "stepped\n"

    def close(self) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("0\n")
        self.proc.stdin.flush()
        stats = json.loads(self.proc.stdout.readline())
        assert self.proc.wait(timeout=60) == 0
        return dict(stats)

    def count(self) -> int:
        """The transitions the env gave."""
        return len(self.given.read_text().split())

    def transitions(self) -> set[bytes]:
        return {bytes.fromhex(line) for line in self.given.read_text().split()}


def test_recorders_in_separate_processes_leave_each_others_shards_alone_in_one_prefix(
    s3: S3, no_aws_env: None, tmp_path: Path
) -> None:
    """Two bounded recorders in processes of their own on one prefix (capacity 400 each, shards
    of 40): A records, then waits, alive, while B starts on the prefix and records past its
    capacity. B neither counts nor deletes A's shards (A holds a lease in the prefix, as a
    directory's recorder holds the lock on its shard); each evicts only its own oldest shards,
    and their eviction logs add up. A reader of the prefix following along samples only
    transitions the env gave. Done the same into a local directory, the prefix reads the same,
    recording for recording, evicted_steps included. A recording started after both stopped
    counts both (their leases are gone)."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/shared"
    local = tmp_path / "shared"
    local.mkdir()

    def stepper(path: str | Path, seed: int, options: dict[str, str] | None) -> Stepper:
        return Stepper(path, seed, 400, tmp_path / f"given-{seed}-{'store' if options else 'local'}.hex", options)

    a, a_local = stepper(url, 0, s3.options), stepper(local, 0, None)
    for s in (a, a_local):
        s.step(300)  # 1,200 transitions: A evicts its own oldest shards
    deadline = time.monotonic() + 60
    while not shard_keys(s3, bucket, "shared"):  # B must find A's shards: wait for the first upload
        assert time.monotonic() < deadline, "A's shards never went up"
        time.sleep(0.05)
    reader = trajcore.open(url, storage_options=s3.options)
    b, b_local = stepper(url, 1, s3.options), stepper(local, 1, None)
    sampled: list[bytes] = []
    for _ in range(6):
        for s in (b, b_local):
            s.step(50)
        sampled += _refresh_and_sample(reader, seed=len(sampled))
    stats = {"b": b.close(), "b_local": b_local.close()}
    for s in (a, a_local):
        s.step(100)
    stats |= {"a": a.close(), "a_local": a_local.close()}
    reader.close()
    given = a.transitions() | b.transitions()
    assert sampled and all(row in given for row in sampled)
    for who in ("a", "b"):
        assert stats[who]["evicted_steps"] == stats[f"{who}_local"]["evicted_steps"] > 0, who
    with trajcore.open(url, storage_options=s3.options) as ds, trajcore.open(local) as want:
        assert ds.evicted_steps == stats["a"]["evicted_steps"] + stats["b"]["evicted_steps"] == want.evicted_steps
        assert ds.num_steps + ds.evicted_steps == a.count() + b.count()
        assert len(ds.shards) == len(shard_keys(s3, bucket, "shared")) and not ds.problems
        for who in (0, 1):
            (steps, mine), (want_steps, theirs) = kept_by(ds, who), kept_by(want, who)
            assert steps == want_steps <= 400 + 40, who
            for x, y in zip(mine, theirs, strict=True):
                assert outline(x) == outline(y)
                np.testing.assert_array_equal(x.observations, y.observations)
                np.testing.assert_array_equal(x.actions, y.actions)
    objects = s3.client.list_objects_v2(Bucket=bucket, Prefix="shared/").get("Contents", [])
    names = [o["Key"].split("/", 1)[1] for o in objects]
    # Each recorder evicted only its own shards (their names carry its recording's tag), into
    # its own log: B never took A's, though it found them in the prefix.
    logs = [n for n in names if n.startswith("trajcore-evictions-")]
    assert len(logs) == 2, logs
    for log in logs:
        owner = log.removeprefix("trajcore-evictions-")[:8]
        shards = json.loads(s3.client.get_object(Bucket=bucket, Key=f"shared/{log}")["Body"].read())["evicted_shards"]
        assert shards and all(shard.split("-")[-2] == owner for shard in shards), (log, shards)
    assert not [n for n in names if n.startswith(("trajcore-lease-", "trajcore-clock-")) or ".trj.open/" in n], names
    # Both stopped: a new bounded recording counts what both kept.
    _, again = record(
        url, 2, lambda s: s == 100, capacity_steps=400, flush_interval=INTERVAL, storage_options=s3.options
    )
    _, again_local = record(local, 2, lambda s: s == 100, capacity_steps=400)
    assert again["evicted_steps"] == again_local["evicted_steps"] >= 400


def test_a_killed_recorders_shards_are_left_alone_while_its_lease_is_fresh(
    s3: S3, no_aws_env: None, tmp_path: Path
) -> None:
    """A bounded recorder killed with SIGKILL leaves its lease in the prefix, fresh for 60 s by
    the store's clock: a bounded recording started within that time takes it for live (a store
    cannot tell a killed recorder from a slow one sooner), so it neither counts, recovers nor
    deletes its shards and segments; it bounds its own. (docs/replay-buffer.md, "Several
    recorders on one store prefix"; a directory's recorder counts them at once, the shard lock
    having died with the process.)"""
    bucket = s3.bucket()
    url = f"s3://{bucket}/killed"
    a = Stepper(url, 0, 400, tmp_path / "given-a.hex", s3.options)
    a.step(150)  # 600 transitions: shards of 40, the oldest evicted by A itself

    def objects() -> list[str]:
        listed = s3.client.list_objects_v2(Bucket=bucket, Prefix="killed/").get("Contents", [])
        return [o["Key"].split("/", 1)[1] for o in listed]

    deadline = time.monotonic() + 60
    while not [k for k in objects() if ".trj.open/" in k] or not shard_keys(s3, bucket, "killed"):
        assert time.monotonic() < deadline, "A's shards and segments never went up"
        a.step(1)  # the open shard's records go up as segments each flush interval
    a.proc.kill()
    assert a.proc.wait(timeout=60) != 0
    left = objects()
    (lease,) = [k for k in left if k.startswith("trajcore-lease-")]
    segments = [k for k in left if ".trj.open/" in k]
    a_shards = shard_keys(s3, bucket, "killed")
    _, stats = record(
        url, 1, lambda s: s == 300, capacity_steps=400, flush_interval=INTERVAL, storage_options=s3.options
    )
    after = objects()
    assert set(a_shards) <= set(after) and set(segments) <= set(after) and lease in after
    owner = lease.removeprefix("trajcore-lease-")[:8]
    b_logs = [k for k in after if k.startswith("trajcore-evictions-") and owner not in k]
    (b_log,) = b_logs
    evicted = json.loads(s3.client.get_object(Bucket=bucket, Key=f"killed/{b_log}")["Body"].read())["evicted_shards"]
    assert evicted and all(shard.split("-")[-2] != owner for shard in evicted)
    with trajcore.open(url, storage_options=s3.options) as ds:
        b_kept = sum(n for r, n in ds._core.shard_steps if ds.meta(r)["metadata"].get("who") is None)
        assert 0 < b_kept <= 400 + 40 and stats["evicted_steps"] > 0
        assert not ds.problems


def prefix_objects(s3: S3, bucket: str, prefix: str) -> list[str]:
    """Every object under `prefix`, named from inside it."""
    listed = s3.client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/").get("Contents", [])
    return [o["Key"].split("/", 1)[1] for o in listed]


def up_with_segments(s3: S3, bucket: str, prefix: str, stepper: Stepper, shards: int) -> tuple[list[str], list[str]]:
    """Steps `stepper` until the prefix holds `shards` closed shards of it and segments of its
    open shard (they go up each flush interval); returns both (names)."""
    deadline = time.monotonic() + 60
    while True:
        names = prefix_objects(s3, bucket, prefix)
        segments = [k for k in names if ".trj.open/" in k]
        if segments and len(shard_keys(s3, bucket, prefix)) >= shards:
            return shard_keys(s3, bucket, prefix), segments
        assert time.monotonic() < deadline, "the shards and segments never went up"
        stepper.step(1)


def test_a_bounded_recorder_leaves_a_live_unbounded_recorders_shards_alone(
    s3: S3, no_aws_env: None, tmp_path: Path
) -> None:
    """An unbounded recorder (no capacity_steps) A and a bounded one B (capacity 400), in
    processes of their own, on one prefix: A records several shards and waits, alive, while B
    starts and records past its capacity. B neither recovers A's open shard's segments nor
    counts or deletes A's shards: A holds a lease in the prefix too (every recorder to a store
    does). A reader of the prefix following along never fails and samples only transitions the
    env gave; afterwards the prefix holds every transition A gave and at most a capacity plus a
    shard of B's."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/mixed"
    a = Stepper(url, 0, 0, tmp_path / "given-a.hex", s3.options, max_shard_bytes=8192)
    a.step(300)
    a_shards, _ = up_with_segments(s3, bucket, "mixed", a, 3)
    reader = trajcore.open(url, storage_options=s3.options)
    b = Stepper(url, 1, 400, tmp_path / "given-b.hex", s3.options)
    sampled: list[bytes] = []
    for _ in range(6):
        b.step(50)  # 1,200 transitions in all: B evicts its own oldest shards
        sampled += _refresh_and_sample(reader, seed=len(sampled))
    left = prefix_objects(s3, bucket, "mixed")
    assert set(a_shards) <= set(left), "B deleted a shard of the live unbounded recorder A"
    # B evicted only its own shards (their names carry its recording's tag): a shard it had made
    # of A's segments, taking A for killed, would be among them.
    a_tag = a_shards[0].split("-")[-2]
    evicted = eviction_logs(s3, bucket, "mixed")
    assert evicted and all(shard.split("-")[-2] != a_tag for shard in evicted), evicted
    b_stats = b.close()
    a.step(100)
    a.close()
    reader.close()
    given = a.transitions() | b.transitions()
    assert sampled and all(row in given for row in sampled)
    with trajcore.open(url, storage_options=s3.options) as ds:
        assert not ds.problems and b_stats["evicted_steps"] > 0
        assert ds.evicted_steps == b_stats["evicted_steps"]
        assert kept_by(ds, 0)[0] == a.count(), "every transition A gave is kept"
        assert 0 < kept_by(ds, 1)[0] <= 400 + 40
        assert ds.num_steps + ds.evicted_steps == a.count() + b.count()
    names = prefix_objects(s3, bucket, "mixed")
    assert not [n for n in names if n.startswith(("trajcore-lease-", "trajcore-clock-")) or ".trj.open/" in n], names


def test_with_short_lease_timings_a_killed_recorders_shards_are_counted_once_its_lease_is_stale(
    s3: S3, no_aws_env: None, tmp_path: Path
) -> None:
    """An unbounded recorder with ``lease_renew_interval=0.5, lease_ttl=2.5``, killed with
    SIGKILL: its lease, fresh at first (its shards read as live), goes stale within seconds of
    the kill by the store's clock (not the default 60 s). A bounded recording started then
    treats the recording as stopped, as docs/replay-buffer.md says: it makes the killed
    recorder's segments a shard and counts it and the recording's shards, oldest first, here
    evicting them all (its own fill the capacity)."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/stale"
    timings = {"lease_renew_interval": 0.5, "lease_ttl": 2.5}
    a = Stepper(url, 0, 0, tmp_path / "given-a.hex", s3.options, max_shard_bytes=8192, **timings)
    a.step(300)
    a_shards, a_segments = up_with_segments(s3, bucket, "stale", a, 3)
    (lease,) = [k for k in prefix_objects(s3, bucket, "stale") if k.startswith("trajcore-lease-")]
    assert lease.endswith("-2500ms.json"), lease  # a lease says how long it stays fresh
    a.proc.kill()
    assert a.proc.wait(timeout=60) != 0
    killed = time.monotonic()
    trajcore._core.configure_store(url, list(s3.options.items()))
    assert all(trajcore._core.live_store_shards(url, a_shards)), "fresh right after the kill"
    deadline = killed + 30
    while any(trajcore._core.live_store_shards(url, a_shards)):
        assert time.monotonic() < deadline, "the killed recorder's lease never went stale"
        time.sleep(0.1)  # the poll's period
    assert time.monotonic() - killed < 30  # its own ttl, not the default 60 s
    _, stats = record(
        url, 1, lambda s: s == 300, capacity_steps=400, flush_interval=INTERVAL, storage_options=s3.options
    )
    names = prefix_objects(s3, bucket, "stale")
    made = {k.split(".open/")[0] for k in a_segments} - set(a_shards)  # the open shard's segments
    evicted = eviction_logs(s3, bucket, "stale")
    assert set(a_shards) | made <= set(evicted), evicted
    assert not set(a_shards) & set(names) and not [n for n in names if ".trj.open/" in n], names
    with trajcore.open(url, storage_options=s3.options) as ds:
        assert not ds.problems and ds.evicted_steps == stats["evicted_steps"]
        assert [ds.meta(r)["metadata"].get("who") for r in range(ds.num_recordings)] == [None]  # B's only
        assert 0 < ds.num_steps <= 400 + 40
        assert stats["evicted_steps"] > stats["given"] - ds.num_steps  # A's transitions among them


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"lease_ttl": 5}, "lease_ttl=5 must be at least 30 s"),  # under 3 default renewals
        ({"lease_renew_interval": 1, "lease_ttl": 2.5}, "lease_ttl=2.5 must be at least 3 s"),
        ({"lease_renew_interval": 30}, "lease_ttl=60 must be at least 90 s"),
        ({"lease_renew_interval": 0}, "lease_renew_interval=0 must be a positive number"),
        ({"lease_renew_interval": -1.0}, "lease_renew_interval=-1 must be a positive number"),
        ({"lease_ttl": float("nan")}, "lease_ttl must be a finite number of seconds, got nan"),
        ({"lease_ttl": "60"}, "lease_ttl must be a finite number of seconds, got '60'"),
        ({"lease_renew_interval": True}, "lease_renew_interval must be a finite number of seconds, got True"),
    ],
)
def test_bad_lease_timings_are_refused_by_name(
    s3: S3, no_aws_env: None, tmp_path: Path, options: dict[str, Any], named: str
) -> None:
    """Lease timings that would let a live recorder's lease read as stale, or are no number of
    seconds, raise `InvalidArgumentError` naming the option, before anything is recorded: no
    object in the prefix, no staging directory left."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/bad"
    staging = Path(os.environ.get("TMPDIR", "/tmp"))
    staged_before = set(staging.glob(f"trajcore-staging-{bucket}_bad-*"))
    with pytest.raises(trajcore.InvalidArgumentError) as e:
        trajcore.RecordEpisodes(gym.make("CartPole-v1"), url, storage_options=s3.options, **options)
    assert named in str(e.value)
    assert set(staging.glob(f"trajcore-staging-{bucket}_bad-*")) == staged_before
    assert not prefix_objects(s3, bucket, "bad")
