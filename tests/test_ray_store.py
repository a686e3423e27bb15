"""trajcore on Ray with a store and no shared filesystem: `trajcore.ray.collect` into an S3 prefix
(each actor stages under a TMPDIR of its own and uploads), and `read_transitions` /
`read_episodes` of the prefix, against a real S3 server on loopback (moto's standalone server).
The Ray workers have no AWS variables: the store's options reach them only as arguments."""

from __future__ import annotations

import functools
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

pytest.importorskip("ray.data", reason="trajcore.ray needs ray[data] (CI installs ray[data,rllib])")

import ray
import trajcore
import trajcore.ray
from gymnasium import spaces
from helpers import SpaceEnv
from test_ray_collect import ENV, assert_bounded_actors_keep_their_capacity, assert_each_actor_recorded_exactly
from test_ray_data import assert_episodes, assert_transitions, numpy_rows, record_rollover
from trajcore import _core
from trajcore.ray.datasource import TrajcoreDatasource

if TYPE_CHECKING:
    from s3_server import S3

pytestmark = pytest.mark.usefixtures("ray_local")


@pytest.fixture(scope="module")
def rollover(tmp_path_factory: pytest.TempPathFactory, s3: S3) -> tuple[Path, str]:
    """A dataset whose episodes run over shard rollovers, recorded locally and put in the store:
    (its directory, its URL)."""
    local = tmp_path_factory.mktemp("rollover") / "ds"
    record_rollover(local)
    bucket = s3.bucket()
    s3.upload(local, bucket, "run")
    return local, f"s3://{bucket}/run"


def test_no_aws_variables_reach_the_workers() -> None:
    """What the other tests rely on: a worker's client is configured by the options it is
    given, or not at all."""
    pointing = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ALLOW_HTTP")
    names = ray.get(ray.remote(lambda: [k for k in pointing if k in os.environ]).remote())
    assert names == []


def staging_in(tmp: str, *args: Any, **kwargs: Any) -> Any:
    """An actor's env, made after checking that its temporary directory (where its recorder
    stages shards) is `tmp`, not the driver's."""
    assert tempfile.gettempdir() == tmp != os.environ.get("DRIVER_TMP")
    return ENV.func(*args, **kwargs)


def test_collect_into_a_store_records_each_actor_exactly(s3: S3, tmp_path: Path) -> None:
    bucket = s3.bucket()
    url = f"s3://{bucket}/runs/cp"
    worker_tmp = tmp_path / "worker-tmp"  # the actors' TMPDIR: no directory of the driver's
    worker_tmp.mkdir()
    job_env = ray.get_runtime_context().runtime_env.get("env_vars", {})
    env_vars = {**job_env, "TMPDIR": str(worker_tmp), "DRIVER_TMP": tempfile.gettempdir()}
    ds = trajcore.ray.collect(
        functools.partial(staging_in, str(worker_tmp), *ENV.args, **ENV.keywords),
        url,
        num_actors=2,
        num_envs_per_actor=3,
        steps=300,
        seed=10,
        metadata={"run": "store"},
        actor_options={"num_cpus": 1, "runtime_env": {"env_vars": env_vars}},
        storage_options=s3.options,
        max_shard_bytes=25_000,  # several shards per actor, uploaded as they are sealed
        chunk_bytes=4_000,
        flush_interval=0.05,
    )
    with ds:
        assert ds.path == url and ds.problems == []
        keys = sorted(o["Key"] for o in s3.client.list_objects_v2(Bucket=bucket)["Contents"])
        assert [f"s3://{bucket}/{k}" for k in keys] == sorted(ds.shards)
        assert len(keys) > 2 * 2 and all(k.startswith("runs/cp/") and k.endswith(".trj") for k in keys)
        assert list(worker_tmp.iterdir()) == []  # every staging directory gone once uploaded
        assert ds.num_recordings == 2
        assert all(ds.meta(r)["metadata"]["run"] == "store" for r in range(2))
        assert_each_actor_recorded_exactly(ds, 10, 3, 300)


def test_bounded_actors_each_keep_their_capacity_in_one_store_prefix(s3: S3, tmp_path: Path) -> None:
    """`capacity_steps` with a store prefix, as with a directory (test_ray_collect's test, the
    same assertions): two actors stepping at the same time into a prefix that holds an older
    recording each keep at most the capacity of their own newest transitions, never counting
    or deleting the other's shards (each holds a lease in the prefix while it records), both
    evict the old recording first, and their eviction logs add up to everything deleted."""
    url = f"s3://{s3.bucket()}/bounded"
    assert_bounded_actors_keep_their_capacity(url, tmp_path, storage_options=s3.options)


def test_a_bad_storage_option_fails_before_any_actor_starts(s3: S3) -> None:
    with pytest.raises(trajcore.InvalidArgumentError, match="no_such_option"):
        trajcore.ray.collect("CartPole-v1", f"s3://{s3.bucket()}/x", steps=1, storage_options={"no_such_option": "1"})


def test_read_transitions_and_episodes_from_the_store_equal_the_local_copy(rollover: tuple[Path, str], s3: S3) -> None:
    local, url = rollover
    with trajcore.open(local) as want:
        for blocks in (None, 5):  # the default plan (a task per shard at least), and more tasks
            data = trajcore.ray.read_transitions(url, storage_options=s3.options, override_num_blocks=blocks)
            assert_transitions(numpy_rows(data), want)
        assert_episodes(numpy_rows(trajcore.ray.read_episodes(url, storage_options=s3.options)), want)
        # A dataset opened with options carries them to the tasks.
        with trajcore.open(url, storage_options=s3.options) as remote:
            assert_transitions(numpy_rows(trajcore.ray.read_transitions(remote)), want)
            complete = remote.select(complete=True)
            rows = numpy_rows(trajcore.ray.read_transitions(complete, columns=["reward"]))
            assert sorted({int(r["episode"]) for r in rows}) == list(complete.indices)


def test_read_transitions_of_one_shard_over_http(recorded: Any, s3: S3) -> None:
    """A shard served over plain HTTP (range requests, no options): read as from the disk."""
    local = recorded("nested")
    bucket = s3.bucket()
    (key,) = s3.upload(local, bucket, "one")
    s3.client.put_object_acl(Bucket=bucket, Key=key, ACL="public-read")
    with trajcore.open(local) as want:
        assert_transitions(numpy_rows(trajcore.ray.read_transitions(f"{s3.endpoint}/{bucket}/{key}")), want)


@ray.remote(max_calls=1)
def _counted(what: Any, *args: Any) -> tuple[int, int, int]:
    """Runs `what(*args)`: (rows it gave, requests made, bytes fetched)."""
    before = _core.remote_stats()
    rows = what(*args)
    after = _core.remote_stats()
    return rows, after[0] - before[0], after[1] - before[1]


def in_fresh_worker(what: Any, *args: Any) -> Any:
    """`_counted` in a worker process of its own, which has opened and fetched nothing: a
    runtime env of its own makes Ray start one (a worker that ran other tasks is not reused)."""
    env_vars = {**ray.get_runtime_context().runtime_env.get("env_vars", {}), "FRESH": uuid.uuid4().hex}
    return _counted.options(runtime_env={"env_vars": env_vars}).remote(what, *args)


def _task_rows(task: Any) -> int:
    return sum(block.num_rows for block in task())


def _open_only(url: str, options: dict[str, str]) -> int:
    trajcore.open(url, storage_options=options).close()
    return 0


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory, s3: S3) -> tuple[Path, str]:
    """4,000 steps of 1 KiB random observations (they do not compress) in shards of about
    1 MB: a task's range is most of its shard, past what opening fetches of each (its tail)."""
    local = tmp_path_factory.mktemp("wide") / "ds"
    obs = spaces.Box(-1.0, 1.0, (256,), np.float32)
    rec = trajcore.RecordEpisodes(
        SpaceEnv(obs, max_steps=200, p_terminate=0.0, infos=False),
        local,
        max_shard_bytes=1_000_000,
        chunk_bytes=64_000,
    )
    rec.reset(seed=1)
    for _ in range(4_000):
        _, _, term, trunc, _ = rec.step(rec.action_space.sample())
        if term or trunc:
            rec.reset()
    rec.close()
    bucket = s3.bucket()
    s3.upload(local, bucket, "wide")
    return local, f"s3://{bucket}/wide"


class Listings(logging.Handler):
    """Counts the listing requests the server answers (from its request log)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "list-type=2" in record.getMessage()


@contextmanager
def listings() -> Iterator[Listings]:
    handler, log = Listings(), logging.getLogger("werkzeug")
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def test_each_read_task_opens_the_store_with_a_few_requests(wide: tuple[Path, str], s3: S3) -> None:
    """A task in a fresh worker opens the prefix as `trajcore.open` does in any process (one
    listing, then the shards' heads and tails) and fetches the chunks of its range: one listing
    per task, its requests an open's and a few more, its bytes an open's and about its range."""
    local, url = wide
    with trajcore.open(local) as ds:
        shards, steps, sizes = len(ds.shards), ds.num_steps, ds.shard_sizes
    source = TrajcoreDatasource(url, storage_options=s3.options)
    tasks = source.get_read_tasks(shards)
    assert len(tasks) == shards >= 4
    with listings() as listed:
        _, open_requests, open_bytes = ray.get(in_fresh_worker(_open_only, url, s3.options))
        counted = ray.get([in_fresh_worker(_task_rows, task) for task in tasks])
    assert listed.count == 1 + len(tasks)  # one listing per process, none per episode or block
    assert sum(rows for rows, _, _ in counted) == steps
    for rows, requests, fetched in counted:
        assert rows > 0
        assert open_requests < requests <= open_requests + 8, (open_requests, requests)
        assert fetched - open_bytes <= max(sizes), (fetched, open_bytes, sizes)
    print(
        f"\n{len(tasks)} read tasks over {shards} shards ({sum(sizes):,} bytes): an open makes {open_requests} "
        f"requests ({open_bytes:,} bytes); each task {[c[1] for c in counted]} requests, "
        f"{[c[2] for c in counted]} bytes"
    )
    # The driver's read: a listing to plan (its own open), then one per worker process at most.
    with listings() as listed:
        rows = numpy_rows(trajcore.ray.read_transitions(url, storage_options=s3.options, columns=["reward"]))
    assert len(rows) == steps and listed.count <= 1 + len(tasks)
