"""Recording to object storage (issue 24): a real S3 server on loopback (moto's standalone
server), real requests through the core's client. While a shard is open its whole records reach
the store as segments within about the flush interval; a recorder killed with SIGKILL leaves
them, and `trajcore recover URL` makes a shard of them holding every episode that ended before;
`storage_options` configure a recorder's store; a store that refuses or stalls (a proxy on
loopback) is retried, or gives `RecorderError` naming the URL, in bounded time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from test_vector_kill import N, replay

pytest.importorskip("boto3", reason="the object storage tests need boto3 and moto[server] (pip install '.[test]')")
pytest.importorskip("moto.server", reason="the object storage tests need moto[server] (pip install '.[test]')")
from s3_proxy import s3_proxy
from s3_server import S3, free_port

INTERVAL = 0.25


def keys(s3: S3, bucket: str) -> dict[str, tuple[int, str]]:
    """Every object in the bucket: key -> (size, entity tag)."""
    listed = s3.client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {o["Key"]: (o["Size"], o["ETag"]) for o in listed}


def record_cartpole(path: str | Path, steps: int, num_envs: int = 4, **options: Any) -> Any:
    """A seeded CartPole vector env recorded to `path` for `steps` steps; the closed wrapper."""
    rec = trajcore.RecordVectorEpisodes(
        gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync"), path, **options
    )
    rng = np.random.default_rng(0)
    rec.reset(seed=0)
    for _ in range(steps):
        rec.step(rng.integers(0, 2, num_envs))
    rec.close()
    return rec


def assert_same_episodes(got: trajcore.Dataset, want: trajcore.Dataset) -> None:
    assert got.num_episodes == want.num_episodes > 0
    assert got.num_steps == want.num_steps
    for a, b in zip(got.episodes, want.episodes, strict=True):
        assert (a.env_index, a.complete) == (b.env_index, b.complete)
        np.testing.assert_array_equal(a.observations, b.observations)
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.rewards, b.rewards)


def test_the_open_shard_reaches_the_store_in_segments_of_whole_records(s3: S3, no_aws_env: None) -> None:
    bucket = s3.bucket()
    url = f"s3://{bucket}/run"
    rec = trajcore.RecordVectorEpisodes(
        gym.make_vec("CartPole-v1", num_envs=16, vectorization_mode="sync"),
        url,
        storage_options=s3.options,
        flush_interval=INTERVAL,
    )
    rng = np.random.default_rng(0)
    rec.reset(seed=0)
    (staged,) = Path(rec._staging.staging).glob("*.trj")
    # Record until three segments are up (a loaded machine runs the writer and the uploader
    # late: how often they go up is measured in benches/test_store_recording.py).
    deadline = time.monotonic() + 60
    segments: list[str] = []
    while len(segments) < 3:
        assert time.monotonic() < deadline, f"segments while recording: {segments}"
        for _ in range(200):
            rec.step(rng.integers(0, 2, 16))
        listed = keys(s3, bucket)
        # Nothing listed as a shard: the open shard is there only as segments, named by offset.
        assert not [k for k in listed if k.endswith(".trj")]
        segments = sorted(k for k in listed if k.startswith(f"run/{staged.name}.open/"))
    joined = b"".join(s3.client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in segments)
    offsets = [int(k.rsplit("/", 1)[1]) for k in segments]
    sizes = [listed[k][0] for k in segments]
    assert offsets == [sum(sizes[:i]) for i in range(len(sizes))]
    # The bytes the file holds, cut at a record boundary: they read as a shard.
    assert joined == staged.read_bytes()[: len(joined)]
    cut = Path(rec._staging.staging).parent / f"{staged.name}.cut"
    try:
        cut.write_bytes(joined)
        with trajcore.open(cut) as ds:
            assert ds.num_episodes > 0 and not ds.problems
    finally:
        cut.unlink()
    rec.close()
    after = keys(s3, bucket)
    assert list(after) == [f"run/{staged.name}"], "sealed: the shard whole, its segments removed"
    # Each byte goes up about twice (a segment, then the sealed shard), never a growing prefix.
    assert rec.stats()["bytes_uploaded"] <= 2.2 * after[f"run/{staged.name}"][0]


KILLED_CHILD = f"""
import json, sys, time
import gymnasium as gym
import numpy as np
import trajcore
envs = trajcore.RecordVectorEpisodes(
    gym.make_vec("CartPole-v1", num_envs={N}, vectorization_mode="sync"), sys.argv[1],
    storage_options=json.loads(sys.argv[2]), flush_interval={INTERVAL}, max_shard_bytes=48 << 10,
    compact_shards=False,
)
rng = np.random.default_rng(0)
envs.reset(seed=0)
step = 0
while True:
    _, _, term, trunc, _ = envs.step(rng.integers(0, 2, {N}))
    step += 1
    ended = np.flatnonzero(term | trunc)
    if len(ended):
        print("ENDED", time.time(), step, *ended, flush=True)
    time.sleep(0.002)  # the env's own pace (a real env takes time per step): no wait on anything
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_recorder_killed_mid_shard_loses_at_most_the_last_intervals(s3: S3, no_aws_env: None, tmp_path: Path) -> None:
    bucket = s3.bucket()
    url = f"s3://{bucket}/run"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_CHILD, url, json.dumps(s3.options)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    ended: list[tuple[float, int, list[int]]] = []

    def read_lines() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            _, t, step, *envs = line.split()
            ended.append((float(t), int(step), [int(e) for e in envs]))

    reader = threading.Thread(target=read_lines, daemon=True)
    reader.start()
    # While it records: every object listed as a shard is a sealed one (never replaced later).
    seen: dict[str, tuple[int, str]] = {}
    start = time.monotonic()
    while True:
        listed = keys(s3, bucket)
        for key, identity in listed.items():
            if key.endswith(".trj"):
                assert seen.setdefault(key, identity) == identity, f"{key} changed after it was listed"
        # Kill once two shards are sealed, 40 steps ended episodes longer ago than the loss the
        # test allows (two flush intervals and a little), and the open shard has segments up:
        # the kill lands in a shard some of which is in the store.
        settled = [e for e in ended if e[0] < time.time() - 2 * INTERVAL - 0.5]
        if len(seen) >= 2 and len(settled) >= 40 and any(".trj.open/" in k for k in listed):
            break
        assert time.monotonic() - start < 120, "the child records too slowly"
        time.sleep(0.1)  # the period of the poll above (each poll lists the bucket)
    killed_at = time.time()
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    reader.join(timeout=30)
    assert child.returncode == -signal.SIGKILL
    before = keys(s3, bucket)
    assert len(seen) >= 2, "sealed shards went up while recording"
    assert [k for k in before if ".trj.open/" in k], "the open shard's segments are in the store"

    env = {**os.environ, "AWS_ENDPOINT_URL": s3.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1"}
    env |= {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    done = subprocess.run(
        [sys.executable, "-m", "trajcore", "recover", url], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "recovered 1 shard(s)" in done.stderr
    after = keys(s3, bucket)
    assert not [k for k in after if ".open/" in k], "the segments are removed"
    for key, identity in seen.items():
        assert after[key] == identity
    # The killed recorder's lease stays (stale a lease_ttl after its last renewal; bounded
    # recorders starting on the prefix delete it once it is stale for twice that).
    assert len([k for k in after if k.split("/")[-1].startswith("trajcore-lease-")]) == 1
    # and the shard the kill cut, made of its segments; a shard that went up whole before the
    # kill but not its segments' removal is said apart (listed here or not: its upload may come
    # after the last listing), and only its segments are removed.
    lines = done.stderr.splitlines()
    made = [line.split(": ")[0].removeprefix(f"s3://{bucket}/") for line in lines if line.endswith(" bytes")]
    whole = [line.split(": ")[0].removeprefix(f"s3://{bucket}/") for line in lines if line.endswith("up whole already")]
    assert len(made) == 1 and made[0] not in seen, done.stderr
    shards = {k for k in after if k.endswith(".trj")}
    assert shards == set(seen) | set(made) | set(whole), (shards, seen, done.stderr)

    # Every episode that ended two flush intervals (and a little) before the kill is there,
    # value for value what the seeded sub-envs produced.
    cutoff = killed_at - 2 * INTERVAL - 0.5
    must = [sum(i in envs for t, _, envs in ended if t < cutoff) for i in range(N)]
    assert sum(must) >= 20, f"the child recorded too little before the kill: {must}"
    want = replay(steps=ended[-1][1] + 10)
    options = s3.options
    assert trajcore.verify(url, storage_options=options).intact
    with trajcore.open(url, storage_options=options) as ds:
        for i in range(N):
            got = [e for e in ds.select(env_index=i) if e.complete]
            assert must[i] <= len(got) <= len(want[i]), f"env {i}"
            for e, w in zip(got, want[i], strict=False):
                np.testing.assert_array_equal(e.observations, np.array(w["obs"]))
                np.testing.assert_array_equal(e.actions, np.array(w["act"]))
                np.testing.assert_array_equal(e.rewards, np.array(w["rew"]))
    # Run again, recovery finds nothing left to do.
    assert trajcore.recover(url, storage_options=options) == {"shards": []}


def test_storage_options_configure_the_recorders_store(s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The environment points at a server that is not there, with other credentials.
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "nobody")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nothing")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    local = record_cartpole(tmp_path / "local", 300)
    assert local.stats().get("bytes_uploaded") is None
    env_url = f"s3://{s3.bucket()}/env"
    with pytest.raises(trajcore.RecorderError, match=env_url):
        record_cartpole(env_url, 50)  # the environment's store alone: not there
    vector_url = f"s3://{s3.bucket()}/vector"
    record_cartpole(vector_url, 300, storage_options=s3.options)
    single_url = f"s3://{s3.bucket()}/single"
    rec = trajcore.RecordEpisodes(gym.make("CartPole-v1"), single_url, storage_options=s3.options)
    rec.reset(seed=1)
    for _ in range(200):
        _, _, term, trunc, _ = rec.step(rec.action_space.sample())
        if term or trunc:
            rec.reset()
    rec.close()
    with trajcore.open(tmp_path / "local") as want, trajcore.open(vector_url, storage_options=s3.options) as got:
        assert_same_episodes(got, want)
    with trajcore.open(single_url, storage_options=s3.options) as got:
        assert got.num_steps == 200
    with pytest.raises(trajcore.InvalidArgumentError, match="storage_options"):
        record_cartpole(tmp_path / "local2", 1, storage_options=s3.options)


def test_transient_failures_are_retried_and_the_recording_completes(s3: S3, no_aws_env: None, tmp_path: Path) -> None:
    record_cartpole(tmp_path / "local", 3000, flush_interval=INTERVAL, max_shard_bytes=64 << 10)
    bucket = s3.bucket()
    url = f"s3://{bucket}/run"
    with s3_proxy(s3.endpoint) as proxy:
        options = {**s3.options, "endpoint": proxy.endpoint, "max_retries": "3", "retry_timeout": "10"}
        rec = trajcore.RecordVectorEpisodes(
            gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync"),
            url,
            storage_options=options,
            flush_interval=INTERVAL,
            max_shard_bytes=64 << 10,
        )
        rng = np.random.default_rng(0)
        rec.reset(seed=0)
        proxy.fail(2)  # within the client's retries
        for t in range(3000):
            rec.step(rng.integers(0, 2, 4))
            if t == 1000:
                # An outage longer than the client's retries (about 0.7 s of backoff): the
                # uploads of those intervals fail, and go up at a later one. It lasts until the
                # proxy refused six requests (more than one upload's retries).
                proxy.fail(-1)
                deadline = time.monotonic() + 60
                while proxy.refused < 6 and time.monotonic() < deadline:
                    time.sleep(INTERVAL / 10)  # the period of the poll of the proxy's count
                refused, proxy_requests = proxy.refused, proxy.requests
                proxy.fail(0)
                assert refused >= 6, "the uploads were tried during the outage"
        rec.close()
        assert proxy.requests > proxy_requests + 2
    with trajcore.open(tmp_path / "local") as want, trajcore.open(url, storage_options=s3.options) as got:
        assert not [k for k in keys(s3, bucket) if ".open/" in k]
        assert_same_episodes(got, want)


@pytest.mark.parametrize("how", ["refuses", "stalls"])
def test_a_store_that_keeps_failing_is_a_recorder_error_naming_the_url(
    s3: S3, no_aws_env: None, tmp_path: Path, how: str
) -> None:
    bucket = s3.bucket()
    url = f"s3://{bucket}/run"
    with s3_proxy(s3.endpoint) as proxy:
        options = {**s3.options, "endpoint": proxy.endpoint, "max_retries": "1", "retry_timeout": "2"}
        options |= {"timeout": "1s", "connect_timeout": "1s"}
        if how == "refuses":
            proxy.fail(-1)
        else:
            proxy.stall()
        start = time.monotonic()
        with pytest.raises(trajcore.RecorderError, match=f"{url}: uploading the shards failed") as e:
            record_cartpole(url, 500, storage_options=options, flush_interval=INTERVAL)
        assert time.monotonic() - start < 60, "no call waits forever"
    why = str(e.value)
    # The cause as the client gave it, after its retries: the answer, or the request that got none.
    assert "after 1 retries" in why and ("503" in why or "SlowDown" in why or how == "stalls"), why
    staging = Path(why.rsplit(" ", 1)[-1])
    (shard,) = staging.glob("*.trj")
    assert "trajcore-staging-" in staging.name and bucket in staging.name
    record_cartpole(tmp_path / "local", 500)
    with trajcore.open(shard) as got, trajcore.open(tmp_path / "local") as want:
        assert_same_episodes(got, want)  # every step recorded, kept whole


def test_recover_joins_the_segments_that_follow_each_other_and_finishes_what_it_started(
    s3: S3, no_aws_env: None, tmp_path: Path
) -> None:
    record_cartpole(tmp_path / "local", 400)
    (shard,) = (tmp_path / "local").glob("*.trj")
    data = shard.read_bytes()
    bucket = s3.bucket()
    # A killed recorder's segments, and one past a gap (which nothing can follow on from).
    cut = len(data) // 3
    for offset, part in [(0, data[:cut]), (cut, data[cut:]), (len(data) + 8, b"past a gap")]:
        s3.client.put_object(Bucket=bucket, Key=f"run/{shard.name}.open/{offset:020}", Body=part)
    # A shard that went up whole before its recorder, killed, removed its segments.
    s3.client.put_object(Bucket=bucket, Key="run/other.trj", Body=data)
    s3.client.put_object(Bucket=bucket, Key=f"run/other.trj.open/{0:020}", Body=data[:cut])
    url = f"s3://{bucket}/run"
    done = trajcore.recover(url, storage_options=s3.options)["shards"]
    assert done == [
        {"url": f"{url}/{shard.name}", "segments": 3, "bytes": len(data), "already_up": False, "left_out": 1},
        {"url": f"{url}/other.trj", "segments": 1, "bytes": 0, "already_up": True, "left_out": 0},
    ]
    assert sorted(keys(s3, bucket)) == [f"run/{shard.name}", "run/other.trj"]
    assert s3.client.get_object(Bucket=bucket, Key=f"run/{shard.name}")["Body"].read() == data
    with pytest.raises(trajcore.InvalidArgumentError, match="name the new dataset directory"):
        trajcore.recover(tmp_path / "local")


def test_a_bounded_recording_to_a_store_evicts_objects_and_readers_follow(
    s3: S3, no_aws_env: None, tmp_path: Path
) -> None:
    """`capacity_steps` on an s3:// URL: the uploads put the eviction log up, then delete the
    evicted shards' objects, so the prefix keeps at most the capacity plus a shard; a reader of
    the URL opened during the recording refreshes without error, samples only rows the env gave
    and drops the evicted episodes; one opened afterwards lists only what survives; the count is
    the same everywhere (the recorder, both readers, `trajcore info`)."""
    capacity, shard, num_envs, steps = 2000, 200, 4, 1500  # 6,000 transitions, shards of 200
    bucket = s3.bucket()
    url = f"s3://{bucket}/buffer"
    envs = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync")
    rec = trajcore.RecordVectorEpisodes(
        envs, url, capacity_steps=capacity, flush_interval=INTERVAL, storage_options=s3.options
    )
    rng = np.random.default_rng(0)
    given: set[bytes] = set()  # every (observation, action, next observation) the env gave
    obs, _ = rec.reset(seed=0)
    autoreset = np.zeros(num_envs, dtype=bool)
    ds: trajcore.Dataset | None = None
    deadline = time.monotonic() + 120
    sampled_evicted = refreshes = max_shards = 0
    step = 0
    while step < steps or ds is None:
        assert time.monotonic() < deadline
        if step < steps:
            actions = rng.integers(0, 2, num_envs)
            nxt, _, term, trunc, _ = rec.step(actions)
            for i in range(num_envs):
                if not (step > 0 and autoreset[i]):
                    given.add(obs[i].tobytes() + actions[i].tobytes() + nxt[i].tobytes())
            autoreset = term | trunc
            obs = nxt
            step += 1
        shards = [k for k in keys(s3, bucket) if k.endswith(".trj")]
        max_shards = max(max_shards, len(shards))
        if ds is None:
            if shards:  # the first shard is up whole: the prefix is a dataset
                ds = trajcore.open(url, storage_options=s3.options)
            continue
        if step % 25 == 0:
            with warnings.catch_warnings():
                warnings.simplefilter("error", trajcore.TrajcoreWarning)
                ds.refresh()
            refreshes += 1
            evicted = set(ds.evicted_episodes)
            if ds.num_steps:
                batch = ds.sample_transitions(32, seed=step)
                sampled_evicted += sum(int(e) in evicted for e in batch["episode_index"])
                for o, a, n in zip(batch["observations"], batch["actions"], batch["next_observations"], strict=True):
                    assert o.tobytes() + np.asarray(a, dtype=actions.dtype).tobytes() + n.tobytes() in given
    rec.close()
    stats = rec.stats()
    assert stats["evicted_steps"] > 0 and stats["eviction_error"] is None
    # At most the capacity's ten closed shards, the one just closed and one being uploaded.
    assert max_shards <= capacity // shard + 2, max_shards
    ds.refresh()
    assert sampled_evicted == 0 and ds.evicted_episodes, (sampled_evicted, refreshes)
    assert ds.evicted_steps == stats["evicted_steps"]
    batch = ds.sample_transitions(256, seed=0)
    assert not set(batch["episode_index"].tolist()) & set(ds.evicted_episodes)
    ds.close()
    objects = keys(s3, bucket)
    # The recording's own eviction log (each recording in a prefix keeps one; readers merge them).
    assert [k for k in objects if k.startswith("buffer/trajcore-evictions-")] != []
    assert not [k for k in objects if ".trj.open/" in k]  # no segment of an evicted shard stays
    with trajcore.open(url, storage_options=s3.options) as fresh:
        assert fresh.evicted_steps == stats["evicted_steps"]
        assert fresh.num_steps + fresh.evicted_steps == len(given)  # every transition the env gave
        assert capacity - shard <= fresh.num_steps <= capacity, fresh.num_steps
        assert len(fresh.shards) == len([k for k in objects if k.endswith(".trj")])
        assert not fresh.problems
    env = {**os.environ, "AWS_ENDPOINT_URL": s3.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1"}
    env.update({k.upper(): v for k, v in s3.options.items() if k.startswith("aws_")})
    info = subprocess.run(
        [sys.executable, "-m", "trajcore", "info", url], capture_output=True, text=True, env=env, check=True
    ).stdout
    assert f"evicted: {stats['evicted_steps']:,} transitions" in info


def test_a_bounded_recordings_failed_deletions_are_said_and_retried_and_a_failed_log_read_is_not_kept(
    s3: S3, no_aws_env: None
) -> None:
    """The store refuses the first deletions: the recorder warns once, naming the URL, the env
    is never held up, and the next intervals delete what is left. A reader whose read of the
    eviction log fails gets the store's error, and the next call asks again (nothing of the
    failure is kept)."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/buffer"
    with s3_proxy(s3.endpoint) as proxy:
        options = {**s3.options, "endpoint": proxy.endpoint, "max_retries": "0", "retry_timeout": "5"}
        proxy.fail(3, only=f"DELETE /{bucket}/buffer/")
        envs = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
        rec = trajcore.RecordVectorEpisodes(
            envs, url, capacity_steps=400, flush_interval=INTERVAL, storage_options=options
        )
        rng = np.random.default_rng(0)
        rec.reset(seed=0)
        deadline = time.monotonic() + 120
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step = 0
            while step < 600 or not any("an upload failed" in str(w.message) for w in caught):
                assert time.monotonic() < deadline
                rec.step(rng.integers(0, 2, 4))
                step += 1
        said = [str(w.message) for w in caught if "an upload failed" in str(w.message)]
        assert said[0].startswith(f"{url}: an upload failed") and "DELETE" in said[0], said
        assert len(said) == 1, said  # once per outage
        rec.close()
        stats = rec.stats()
        assert stats["evicted_steps"] > 0 and stats["eviction_error"] is None
        shards = [k for k in keys(s3, bucket) if k.endswith(".trj")]
        assert len(shards) <= 400 // 40 + 1, shards
        proxy.fail(-1, only=f"GET /{bucket}/buffer/trajcore-evictions-")  # the recording's own log
        with pytest.raises(trajcore.TrajcoreIOError, match=r"trajcore-evictions-[0-9a-f]{32}\.json"):
            trajcore.open(url, storage_options=options)
        proxy.fail(0)
        with trajcore.open(url, storage_options=options) as ds:
            assert ds.evicted_steps == stats["evicted_steps"]
            assert len(ds.shards) == len(shards) and not ds.problems


def test_a_reader_following_a_compacting_prefix_samples_each_row_as_the_env_gave_it(
    s3: S3, no_aws_env: None
) -> None:
    """A live recorder with its defaults (`compact_shards`: each closed shard rewritten on a
    thread of its own, the compactions ending in any order) rolls over small shards in bursts,
    while a reader of the prefix, opened as soon as the first shard is up, refreshes and samples
    after each burst, warnings turned into errors. The uploads put the shards up in order, so
    the reader never lists a shard without the one before it (it warned of a missing shard,
    then of a chunk overlapping the next shard's repeat of its last row, left out). Every
    sampled transition is the env's at its episode and step, value for value."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/live"
    num_envs = 4
    envs = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync")
    rec = trajcore.RecordVectorEpisodes(  # small shards: a rollover every few dozen steps
        envs, url, max_shard_bytes=4096, chunk_bytes=256, flush_interval=INTERVAL, storage_options=s3.options
    )
    rng = np.random.default_rng(0)
    obs, _ = rec.reset(seed=0)
    # Each episode the env gave, by (lane, its first observation): its transitions; and where
    # each observation an episode steps from is, (lane, observation) -> (episode, step).
    given: dict[tuple[int, bytes], list[tuple[bytes, int, float, bytes, bool, bool]]] = {}
    at: dict[tuple[int, bytes], tuple[tuple[int, bytes], int]] = {}
    running = [(i, obs[i].tobytes()) for i in range(num_envs)]
    given.update({key: [] for key in running})
    autoreset = np.zeros(num_envs, dtype=bool)

    def burst(steps: int) -> None:
        nonlocal obs, autoreset
        for _ in range(steps):
            actions = rng.integers(0, 2, num_envs)
            nxt, rewards, term, trunc, _ = rec.step(actions)
            for i in range(num_envs):
                if autoreset[i]:  # this step reset the lane: its next episode starts here
                    running[i] = (i, nxt[i].tobytes())
                    given[running[i]] = []
                    continue
                at[(i, obs[i].tobytes())] = (running[i], len(given[running[i]]))
                transition = (obs[i].tobytes(), int(actions[i]), float(rewards[i]), nxt[i].tobytes())
                given[running[i]].append((*transition, bool(term[i]), bool(trunc[i])))
            autoreset, obs = term | trunc, nxt

    # Per episode listed: the env's episode and the step its listing starts at.
    starts: dict[int, tuple[tuple[int, bytes], int]] = {}

    def check(ds: trajcore.Dataset, n: int, seed: int) -> int:
        batch = ds.sample_transitions(n, seed=seed)
        for k, (e, s) in enumerate(zip(batch["episode_index"].tolist(), batch["step_index"].tolist(), strict=True)):
            if e not in starts:
                episode = ds.episodes[e]
                starts[e] = at[(episode.env_index, episode.observations[0].tobytes())]
            episode_key, first = starts[e]
            o, a, r, nx, te, tr = given[episode_key][first + s]
            assert batch["observations"][k].tobytes() == o, (e, s)
            assert (int(batch["actions"][k]), float(batch["rewards"][k])) == (a, r), (e, s)
            assert batch["next_observations"][k].tobytes() == nx, (e, s)
            assert (bool(batch["terminations"][k]), bool(batch["truncations"][k])) == (te, tr), (e, s)
        return n

    deadline = time.monotonic() + 120
    while not [k for k in keys(s3, bucket) if k.endswith(".trj")]:
        assert time.monotonic() < deadline, "no shard went up"
        burst(10)
    sampled = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", trajcore.TrajcoreWarning)
        ds = trajcore.open(url, storage_options=s3.options)
        for turn in range(30):
            burst(150)  # a shard or two, compacted as the next ones are written
            ds.refresh()
            sampled += check(ds, 64, seed=turn)
        rec.close()
        ds.refresh()
        sampled += check(ds, 1024, seed=99)
        assert not ds.problems
        shards = len(ds.shards)
        ds.close()
    assert rec.stats()["shards_compacted"] > 0 and shards >= 10, (rec.stats(), shards)
    assert sampled == 30 * 64 + 1024
