"""Datasets read from object storage: a real S3 server on loopback (moto's standalone server,
real HTTP requests through the core's client, no mocked client), its bucket filled with shards
recorded locally, each read compared value for value with the local open of the same files."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import format_decoder as fd
import gymnasium as gym
import numpy as np
import pytest
import trajcore
from export_data import NAMES, steps
from gymnasium import spaces
from helpers import SpaceEnv, assert_tree_equal
from trajcore import _core
from trajcore.errors import CorruptFileError, TrajcoreError, TrajcoreIOError, TrajcoreWarning

pytest.importorskip("boto3", reason="the object storage tests need boto3 and moto[server] (pip install '.[test]')")
pytest.importorskip("moto.server", reason="the object storage tests need moto[server] (pip install '.[test]')")
from s3_proxy import s3_proxy
from s3_server import S3, free_port


def open_both(s3: S3, local: Path, **kw: Any) -> tuple[trajcore.Dataset, trajcore.Dataset, str]:
    bucket = s3.bucket()
    s3.upload(local, bucket, "run")
    url = f"s3://{bucket}/run"
    return trajcore.open(local, **kw), trajcore.open(url, storage_options=s3.options, **kw), url


@pytest.mark.parametrize("name", NAMES)
def test_reads_equal_the_local_files(s3: S3, recorded: Any, name: str) -> None:
    local, remote, url = open_both(s3, recorded(name))
    with local, remote:
        assert remote.path == url
        assert [Path(p).name for p in remote.shards] == [Path(p).name for p in local.shards]
        assert all(p.startswith(f"{url}/") for p in remote.shards)
        assert (remote.num_episodes, remote.num_steps) == (local.num_episodes, local.num_steps) != (0, 0)
        assert remote.observation_space == local.observation_space
        assert remote.action_space == local.action_space
        # Every step (observations, actions, rewards, flags, infos, custom data) and episode.
        for i, (got, want) in enumerate(zip(steps(remote), steps(local), strict=True)):
            assert_tree_equal(got, want, f"{name} step {i}")
        for got_ep, want_ep in zip(remote.episodes, local.episodes, strict=True):
            assert got_ep.metadata == want_ep.metadata
        # Training reads: random transitions and samples, as batches.
        idx = np.random.default_rng(3).integers(0, local.num_steps, 64)
        assert_tree_equal(remote.transitions[idx], local.transitions[idx], "transitions")
        assert_tree_equal(remote.sample_transitions(32, seed=7), local.sample_transitions(32, seed=7), "sample")
        assert remote.problems == []


def test_one_shard_object_and_http(s3: S3, recorded: Any) -> None:
    local_dir = recorded("nested")
    bucket = s3.bucket()
    (key,) = s3.upload(local_dir, bucket, "one")
    with trajcore.open(local_dir) as local:
        want = list(steps(local))
    # The object on its own, then over plain HTTP (range requests, read-only): moto serves the
    # bucket's objects at path-style URLs, once they are public.
    http = f"{s3.endpoint}/{bucket}/{key}"
    with pytest.raises(TrajcoreIOError, match=f"{http}: .*403 Forbidden"):
        trajcore.open(http)
    s3.client.put_object_acl(Bucket=bucket, Key=key, ACL="public-read")
    for url in (f"s3://{bucket}/{key}", f"{s3.endpoint}/{bucket}/{key}"):
        with trajcore.open(url, storage_options=s3.options if url.startswith("s3") else None) as ds:
            assert ds.shards == [url]
            for i, (got, w) in enumerate(zip(steps(ds), want, strict=True)):
                assert_tree_equal(got, w, f"{url} step {i}")


def record_pixels(path: Path, episodes: int, *, record_per_episode: bool = False) -> None:
    """`episodes` episodes of 40 steps of 3 KiB observations (about 120 KiB of chunk data each).

    With `record_per_episode`, each episode's rows are one Chunks record of their own (flushed
    as it ends, and no timer flush), however fast the machine records: for tests that need a read
    the opening's fetches cannot have served. Otherwise the writer cuts records by size and by
    its timer, so where an episode's bytes lie depends on how long the recording took."""
    env = SpaceEnv(spaces.Box(0, 255, (32, 32, 3), np.uint8), spaces.Discrete(4), max_steps=40, p_terminate=0.0)
    options = {"flush_interval": 3600.0} if record_per_episode else {}
    rec = trajcore.RecordEpisodes(env, path, **options)
    rec.reset(seed=1)
    for _ in range(episodes):
        done = False
        while not done:
            _, _, term, trunc, _ = rec.step(rec.action_space.sample())
            done = term or trunc
        if record_per_episode:
            rec.flush()
        rec.reset()
    rec.close()


def test_a_batch_fetches_what_it_needs_not_the_files(s3: S3, tmp_path: Path) -> None:
    record_pixels(tmp_path / "px", episodes=150)
    total = sum(f.stat().st_size for f in (tmp_path / "px").glob("*.trj"))
    before = _core.remote_stats()
    local, remote, _ = open_both(s3, tmp_path / "px", cache_bytes=0)
    with local, remote:
        opened = _core.remote_stats()
        # Opening reads indexes: the header and tail of each shard, the start of each record.
        assert opened[1] - before[1] < total / 10
        assert opened[0] - before[0] <= trajcore.verify(tmp_path / "px").records
        idx = np.array([5, 1234, 2001])
        assert_tree_equal(remote.transitions[idx], local.transitions[idx], "batch")
        after = _core.remote_stats()
        fetched = after[1] - before[1]
        # The Chunks records of the batch's episodes (a record's checksum covers it whole).
        assert 0 < fetched < total / 2, (fetched, total)
        # Read again: the per-process cache holds what was fetched.
        assert_tree_equal(remote.transitions[idx], local.transitions[idx], "batch again")
        assert _core.remote_stats()[:2] == after[:2]


def test_opening_fetches_the_episode_records_in_one_request(s3: S3, tmp_path: Path) -> None:
    """Format 1.2: what opening a closed shard reads record by record (its Episode records and
    Index checkpoints) is copied before its final index, so opening it from a store fetches them
    with one request, however many there are (a short-episode recording has hundreds, spread next
    to their chunks). A damaged copy costs requests, not episodes, and `verify` names it."""
    import gymnasium as gym
    from format_decoder import KIND_EPISODE, KIND_OPENING_COPIES, hop

    path = tmp_path / "spread"
    # Incompressible 256-byte observations and short episodes: Episode records lie far apart.
    space = spaces.Box(0, 255, (16, 16), np.uint8)
    envs = gym.vector.SyncVectorEnv([lambda: SpaceEnv(space, infos=False) for _ in range(8)])
    with trajcore.RecordVectorEpisodes(envs, path, compact_shards=False) as rec:
        rec.reset(seed=0)
        for t in range(3000):
            rec.step(rec.action_space.sample())
            if t % 50 == 49:
                rec.flush()  # as the flush timer of a slower recording would: a record each time
    (shard,) = path.glob("*.trj")
    records, _ = hop(shard.read_bytes())
    n_episode_records = sum(r.kind == KIND_EPISODE for r in records)
    assert n_episode_records >= 40
    before = _core.remote_stats()
    local, remote, url = open_both(s3, path)
    with local, remote:
        requests = _core.remote_stats()[0] - before[0]
        assert requests <= 8, f"{requests} requests for {n_episode_records} Episode records"
        assert len(remote.episodes) == len(local.episodes) > 500
        for i in (0, len(local.episodes) // 2, len(local.episodes) - 1):
            assert_tree_equal(remote.episodes[i].rewards, local.episodes[i].rewards, f"episode {i}")

    (copies,) = [r for r in records if r.kind == KIND_OPENING_COPIES]
    data = bytearray(shard.read_bytes())
    data[copies.offset + 24 + copies.payload_len // 2] ^= 0x40
    shard.write_bytes(bytes(data))
    before = _core.remote_stats()
    local, remote, url = open_both(s3, path)
    with local, remote:
        fallback = _core.remote_stats()[0] - before[0]
        assert fallback > n_episode_records / 2, f"{fallback} requests: the records themselves"
        assert len(remote.episodes) == len(local.episodes)
    report = trajcore.verify(url, storage_options=s3.options)
    ((d,),) = [report.damage]
    assert d.offset == copies.offset and "checksum" in d.why and not d.episodes


def test_a_damaged_episode_record_reads_the_same_from_disk_and_store(s3: S3, tmp_path: Path) -> None:
    """Issue 33, point 12: a closed shard's damaged Episode record whose copy in the Opening
    Copies record is intact lists the same episodes locally and through a store (read from the
    copy, metadata included), and verify reports the same damage with no episode lost."""
    import gymnasium as gym
    from format_decoder import KIND_EPISODE, hop

    path = tmp_path / "spread"
    space = spaces.Box(0, 255, (16, 16), np.uint8)
    envs = gym.vector.SyncVectorEnv([lambda: SpaceEnv(space, infos=False) for _ in range(8)])
    with trajcore.RecordVectorEpisodes(envs, path, compact_shards=False) as rec:
        rec.reset(seed=0)
        for t in range(1500):
            rec.step(rec.action_space.sample())
            if t % 50 == 49:
                rec.set_episode_metadata(t % 8, {"t": t})
                rec.flush()  # a record each time: enough of them for the copies
    with trajcore.open(path) as ds:
        want = [(ep.env_index, ep.length, ep.metadata, np.asarray(ep.rewards)) for ep in ds.episodes]
    (shard,) = path.glob("*.trj")
    data = bytearray(shard.read_bytes())
    records, _ = hop(bytes(data))
    episode_records = [r for r in records if r.kind == KIND_EPISODE]
    damaged = episode_records[len(episode_records) // 2]
    data[damaged.payload_start + damaged.payload_len // 2] ^= 0x40
    shard.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is lost: neither open says more than the other
        local, remote, url = open_both(s3, path)
    with local, remote:
        assert local.problems == remote.problems == []
        for ds in (local, remote):
            got = [(ep.env_index, ep.length, ep.metadata, np.asarray(ep.rewards)) for ep in ds.episodes]
            assert len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                assert g[:3] == w[:3]
                np.testing.assert_array_equal(g[3], w[3])
    reports = [trajcore.verify(path), trajcore.verify(url, storage_options=s3.options)]
    for report in reports:
        ((d,),) = [report.damage]
        assert d.offset == damaged.offset and "copy" in d.why and not d.episodes
        assert report.episodes_lost == 0
    assert reports[0].damage[0].why == reports[1].damage[0].why


def test_opening_a_frame_stack_dataset_reads_no_chunk_data(s3: S3, tmp_path: Path) -> None:
    """Issue 33, point 17: opening reads indexes, never chunk data, also where the decoded cache
    is sized for frame stacks: requests and bytes as for the same frames recorded unstacked."""
    import gymnasium as gym
    from gymnasium.wrappers import FrameStackObservation

    frame = spaces.Box(0, 3, (84, 84), np.uint8)

    def make(stacked: bool) -> Any:
        env = SpaceEnv(frame, max_steps=60, p_terminate=0.02, infos=False)
        return FrameStackObservation(env, 4) if stacked else env

    measured = {}
    for stacked in (True, False):
        path = tmp_path / ("stacked" if stacked else "plain")
        envs = gym.vector.SyncVectorEnv([lambda stacked=stacked: make(stacked) for _ in range(8)])
        with trajcore.RecordVectorEpisodes(envs, path, max_shard_bytes=1 << 20) as rec:
            rec.reset(seed=0)
            for _ in range(400):
                rec.step(rec.action_space.sample())
        if stacked:
            assert fd.CODEC_STACK | fd.CODEC_ZSTD << 8 in {ref.codec for ref, _ in frame_chunks(path)}
        shards = len(list(path.glob("*.trj")))
        assert shards >= 3
        before = _core.remote_stats()
        local, remote, _ = open_both(s3, path)
        with local, remote:
            after = _core.remote_stats()
            measured[stacked] = (after[0] - before[0], after[1] - before[1], shards)
            assert remote.num_episodes == local.num_episodes > 0
            last = remote.num_episodes - 1
            assert_tree_equal(remote.episodes[last].observations, local.episodes[last].observations, "read")
    (requests, fetched, shards), plain = measured[True], measured[False]
    assert requests <= 4 * shards + 1, measured
    assert fetched <= plain[1] * shards / plain[2] * 1.5, measured
    assert requests / shards <= plain[0] / plain[2] + 1, measured  # about four a shard, as unstacked


def frame_chunks(path: Path) -> list[tuple[fd.ChunkRef, bytes]]:
    out = []
    for shard in sorted(path.glob("*.trj")):
        buf = shard.read_bytes()
        for r in fd.hop(buf)[0]:
            if r.kind == fd.KIND_CHUNKS:
                out.extend((ref, b"") for ref in fd.decode_chunk_refs(buf, r))
    return out


def flip_byte_in_chunk_data(path: Path) -> None:
    """Flips one byte in the middle of the first shard (inside chunk data of a dataset whose
    chunks take nearly all of it)."""
    shard = sorted(path.glob("*.trj"))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))


def test_verify_and_damage_as_on_local_files(s3: S3, tmp_path: Path) -> None:
    record_pixels(tmp_path / "px", episodes=20)
    flip_byte_in_chunk_data(tmp_path / "px")
    bucket = s3.bucket()
    s3.upload(tmp_path / "px", bucket, "bad")
    url = f"s3://{bucket}/bad"
    local_report = trajcore.verify(tmp_path / "px")
    report = trajcore.verify(url, storage_options=s3.options)
    assert local_report.damage and not local_report.intact
    assert [(Path(d.file).name, d.offset, d.why, d.episodes) for d in report.damage] == [
        (Path(d.file).name, d.offset, d.why, d.episodes) for d in local_report.damage
    ]
    assert all(d.file.startswith(url) for d in report.damage)
    # Strict reads of a damaged episode raise; lenient sampling leaves it out with a warning.
    damaged = report.damage[0].episodes[0]
    with trajcore.open(url, strict=True) as ds, pytest.raises(CorruptFileError, match=url):
        ds.episodes[damaged].observations  # noqa: B018
    with trajcore.open(url) as ds, pytest.warns(TrajcoreWarning):
        ds.sample_transitions(4 * ds.num_steps, seed=0)


def test_a_read_that_failed_asks_again_once_the_store_answers(s3: S3, tmp_path: Path) -> None:
    """Issue 33, point 7: a failure ends with its cause. After the client's retries ran out on
    503s, the next read of the same shard asks the store again (and reads), as reopening would.
    The episode read first is one the opening's fetches cannot have served (see
    `record_pixels`)."""
    record_pixels(tmp_path / "px", episodes=20, record_per_episode=True)
    bucket = s3.bucket()
    s3.upload(tmp_path / "px", bucket, "run")
    url = f"s3://{bucket}/run"
    with s3_proxy(s3.endpoint) as proxy:
        options = {**s3.options, "endpoint": proxy.endpoint, "max_retries": "2", "retry_timeout": "5"}
        with trajcore.open(tmp_path / "px") as local, trajcore.open(url, storage_options=options, cache_bytes=0) as ds:
            middle = ds.num_episodes // 2
            proxy.fail(-1)
            for _ in range(2):
                with pytest.raises(TrajcoreIOError, match=url):
                    ds.episodes[middle].observations  # noqa: B018
            assert proxy.refused >= 6, "each read tried again, with its retries"
            proxy.fail(0)
            asked = proxy.requests
            for i in (middle, 0, ds.num_episodes - 1):
                assert_tree_equal(ds.episodes[i].observations, local.episodes[i].observations, f"episode {i}")
            assert proxy.requests > asked
            batch = ds.sample_transitions(64, seed=0)
            assert_tree_equal(batch, local.sample_transitions(64, seed=0), "a batch")


def test_a_flip_in_transit_is_fetched_again_and_never_kept(s3: S3, tmp_path: Path) -> None:
    """Issue 33, point 8: bytes that fail their checksum over the network (flipped in transit by
    the proxy) are fetched once more before the object counts as damaged, and never stay in the
    per-process cache. The episode read first is one the opening's fetches cannot have served
    (see `record_pixels`)."""
    record_pixels(tmp_path / "px", episodes=20, record_per_episode=True)
    bucket = s3.bucket()
    s3.upload(tmp_path / "px", bucket, "run")
    url = f"s3://{bucket}/run"
    with s3_proxy(s3.endpoint) as proxy:
        options = {**s3.options, "endpoint": proxy.endpoint}
        with trajcore.open(tmp_path / "px") as local, trajcore.open(url, storage_options=options, cache_bytes=0) as ds:
            middle = ds.num_episodes // 2
            proxy.flip(1)
            asked = proxy.requests
            assert_tree_equal(ds.episodes[middle].observations, local.episodes[middle].observations, "flipped once")
            assert proxy.flipped == 1 and proxy.requests >= asked + 2, "fetched once more"
            # Flipped every time: damage, by name; the bytes are not kept, so once the
            # transit is clean the same read fetches and reads.
            proxy.flip(-1)
            with pytest.raises(CorruptFileError, match="checksum"):
                ds.episodes[0].observations  # noqa: B018
            proxy.flip(0)
            asked = proxy.requests
            assert_tree_equal(ds.episodes[0].observations, local.episodes[0].observations, "clean again")
            assert proxy.requests > asked
        # Nor after reopening: what the cache holds passed its check.
        with trajcore.open(url, storage_options=options) as ds:
            for i in range(ds.num_episodes):
                assert_tree_equal(ds.episodes[i].observations, local_observations(tmp_path / "px", i), f"episode {i}")
    assert trajcore.verify(url, storage_options=s3.options).intact


def local_observations(path: Path, i: int) -> Any:
    with trajcore.open(path) as ds:
        return ds.episodes[i].observations


class Stall:
    """A TCP server on loopback that accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.held:
            c.close()


def test_a_store_that_fails_or_stalls_gives_an_error_naming_the_url(s3: S3, recorded: Any) -> None:
    fast = {"timeout": "1s", "connect_timeout": "1s", "max_retries": "1", "retry_timeout": "3"}
    # Nothing listens on the port.
    url = f"s3://nowhere-{free_port()}/run"
    options = {**s3.options, "endpoint": f"http://127.0.0.1:{free_port()}", **fast}
    with pytest.raises(TrajcoreIOError, match=r"^s3://nowhere-\d+/run: "):
        trajcore.open(url, storage_options=options)
    # A server that accepts and never answers: the timeout ends the wait.
    stall = Stall()
    try:
        url = "s3://stalled/run"
        start = time.monotonic()
        with pytest.raises(TrajcoreIOError, match=url):
            trajcore.open(url, storage_options={**s3.options, "endpoint": f"http://127.0.0.1:{stall.port}", **fast})
        assert time.monotonic() - start < 20
    finally:
        stall.close()
    # A bucket the server does not have; an object that is not there.
    with pytest.raises(TrajcoreError, match="s3://no-such-bucket/run"):
        trajcore.open("s3://no-such-bucket/run", storage_options={**s3.options, **fast})
    bucket = s3.bucket()
    with pytest.raises(FileNotFoundError, match=f"s3://{bucket}/run/missing.trj"):
        trajcore.open(f"s3://{bucket}/run/missing.trj", storage_options=s3.options)
    # A prefix without shards is no dataset, as an empty folder is not.
    with pytest.raises(FileNotFoundError, match="no trajcore shard"):
        trajcore.open(f"s3://{bucket}/empty", storage_options=s3.options)
    with pytest.raises(trajcore.InvalidArgumentError, match="no_such_option"):
        trajcore.open(f"s3://{bucket}/run", storage_options={"no_such_option": "1"})


def test_an_object_replaced_while_open_fails_by_name(s3: S3, tmp_path: Path) -> None:
    """Every range request asks for the version opened (`If-Match` with its entity tag): an object
    replaced under an open dataset gives an error naming it, never bytes of two versions.

    The read after the replacement must be one that asks the store: the middle episode, whose
    record neither the opening (the index and the last 256 KiB) nor episode 0's read fetched.
    (The last episode's record lay in the opening's tail fetch whenever a slow recording's
    timer flush cut it short: the per-process cache served it, rightly, as the version opened.)"""
    record_pixels(tmp_path / "px", episodes=12, record_per_episode=True)
    (shard,) = (tmp_path / "px").glob("*.trj")
    bucket = s3.bucket()
    (key,) = s3.upload(tmp_path / "px", bucket, "run")
    with trajcore.open(f"s3://{bucket}/run", storage_options=s3.options, cache_bytes=0) as ds:
        first = ds.episodes[0].observations
        s3.client.put_object(Bucket=bucket, Key=key, Body=shard.read_bytes()[:-8] + bytes(8))
        replaced = f"s3://{bucket}/run/.*replaced since the dataset was opened"
        with pytest.raises(TrajcoreIOError, match=replaced):
            ds.episodes[len(ds.episodes) // 2].observations  # noqa: B018
        # The shard reads nothing more, and says why each time.
        with pytest.raises(TrajcoreIOError, match=replaced):
            ds.episodes[0].observations  # noqa: B018
    with trajcore.open(f"s3://{bucket}/run", storage_options=s3.options) as ds:
        assert ds.episodes[0].observations.shape == first.shape  # opened again: the new object


def test_the_cli_reads_urls_configured_by_the_environment(s3: S3, recorded: Any, tmp_path: Path) -> None:
    """The standard AWS variables alone (no storage options) configure the client: `info`, `ls`,
    `verify` and `export` of a URL, each in a fresh process, say what they say of the local copy."""
    local = recorded("vector")
    bucket = s3.bucket()
    s3.upload(local, bucket, "run")
    url = f"s3://{bucket}/run"
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_ALLOW_HTTP": "true",
    }

    def cli(*args: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "trajcore", *args], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    def same(text: str) -> str:
        return text.replace(url, "PATH").replace(str(local), "PATH")

    assert same(cli("info", url)) == same(cli("info", str(local)))
    assert cli("ls", url) == cli("ls", str(local))
    remote_report, local_report = (
        json.loads(cli("verify", "--json", url)),
        json.loads(cli("verify", "--json", str(local))),
    )
    assert remote_report["intact"] and remote_report["records"] == local_report["records"] > 0
    assert remote_report["chunks"] == local_report["chunks"] > 0
    cli("export", url, str(tmp_path / "remote.csv"))
    cli("export", str(local), str(tmp_path / "local.csv"))
    assert (tmp_path / "remote.csv").read_text() == (tmp_path / "local.csv").read_text()
    cli("convert", url, str(tmp_path / "converted"))
    with trajcore.open(tmp_path / "converted") as converted, trajcore.open(local) as want:
        for i, (got, w) in enumerate(zip(steps(converted), steps(want), strict=True)):
            assert_tree_equal(got, w, f"converted step {i}")


def _numpy_concat(batches: list[Any]) -> Any:
    """DataLoader batches (trees of tensors) as one tree of numpy arrays."""
    first = batches[0]
    if isinstance(first, dict):
        return {k: _numpy_concat([b[k] for b in batches]) for k in first}
    return np.concatenate([b.numpy() for b in batches])


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_data_loader_workers_read_from_the_store(s3: S3, recorded: Any, context: str) -> None:
    """Workers get the dataset pickled (its URL and storage options) and read through their own
    client: forked ones after the parent's requests (its runtime's threads are not theirs)."""
    pytest.importorskip("torch", reason="trajcore.torch needs torch")
    from trajcore.torch import TransitionDataset, loader

    local, remote, _ = open_both(s3, recorded("cartpole"))
    with local, remote:
        remote.sample_transitions(8, seed=0)  # the parent's client is in use before the fork
        batches = list(
            loader(TransitionDataset(remote), 64, shuffle=False, num_workers=2, multiprocessing_context=context)
        )
        assert_tree_equal(_numpy_concat(batches), local.transitions[np.arange(local.num_steps)], context)


def aws_env(s3: S3) -> dict[str, str]:
    """The standard variables that point a client at the test server."""
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_ALLOW_HTTP": "true",
    }


def record_nested(path: str | Path, steps: int, **options: Any) -> None:
    from export_data import NESTED_ACTION, NESTED_OBS

    rec = trajcore.RecordEpisodes(SpaceEnv(NESTED_OBS, NESTED_ACTION, max_steps=20), path, **options)
    rec.reset(seed=4)
    rec.action_space.seed(4)
    for _ in range(steps):
        _, _, term, trunc, _ = rec.step(rec.action_space.sample())
        if term or trunc:
            rec.reset()
    rec.close()


def test_recording_to_the_store_equals_recording_locally(
    s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in aws_env(s3).items():
        monkeypatch.setenv(key, value)
    bucket = s3.bucket()
    url = f"s3://{bucket}/rec"
    # Small shards: several are sealed, and uploaded, while recording goes on.
    options = {"max_shard_bytes": 64 << 10, "chunk_bytes": 16 << 10, "flush_interval": 0.2}
    record_nested(tmp_path / "local", 3000, **options)
    record_nested(url, 3000, **options)
    with trajcore.open(tmp_path / "local") as local, trajcore.open(url) as remote:
        # Where shards end depends on the flush timer's cuts (the upload slows the recording
        # down): the steps are what must be equal.
        assert len(remote.shards) >= 2 and len(local.shards) >= 2
        assert remote.num_steps == local.num_steps == 3000
        for i, (got, want) in enumerate(zip(steps(remote), steps(local), strict=True)):
            assert_tree_equal(got, want, f"step {i}")


def test_sealed_shards_reach_the_store_while_recording(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    from export_data import NESTED_ACTION, NESTED_OBS

    for key, value in aws_env(s3).items():
        monkeypatch.setenv(key, value)
    bucket = s3.bucket()
    rec = trajcore.RecordEpisodes(
        SpaceEnv(NESTED_OBS, NESTED_ACTION, max_steps=20),
        f"s3://{bucket}/live",
        max_shard_bytes=64 << 10,
        flush_interval=0.2,
    )
    rec.reset(seed=0)
    listed: list[str] = []
    for t in range(20_000):
        _, _, term, trunc, _ = rec.step(rec.action_space.sample())
        if term or trunc:
            rec.reset()
        if t % 500 == 0:
            # The shards (an open shard's segments, under `<shard>.open/`, come and go).
            objects = s3.client.list_objects_v2(Bucket=bucket).get("Contents", [])
            listed = [o["Key"] for o in objects if o["Key"].endswith(".trj")]
            if len(listed) >= 2:
                break
        time.sleep(0.0002)
    assert len(listed) >= 2, "no sealed shard reached the store while recording"
    rec.close()
    after = [o["Key"] for o in s3.client.list_objects_v2(Bucket=bucket)["Contents"]]
    assert set(listed) < set(after)


def test_an_upload_that_fails_is_a_recorder_error_naming_the_url(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in aws_env(s3).items():
        monkeypatch.setenv(key, value)
    url = "s3://no-such-bucket-for-records/run"
    with pytest.raises(trajcore.RecorderError, match=f"{url}: uploading the shards failed") as e:
        record_nested(url, 50)
    staging = str(e.value).rsplit(" ", 1)[-1]
    assert list(Path(staging).glob("*.trj")), "the shards stay in the staging directory"


def test_a_large_shard_goes_up_in_parts_and_arrives_whole(s3: S3, tmp_path: Path) -> None:
    record_pixels(tmp_path / "px", episodes=100)  # one shard of ~13 MB: two 8 MiB parts
    (shard,) = sorted((tmp_path / "px").glob("*.trj"))
    bucket = s3.bucket()
    url = f"s3://{bucket}/up/{shard.name}"
    trajcore._store.configure(url, s3.options)
    before = _core.remote_stats()[0]
    _core.upload_file(str(shard), url)
    assert _core.remote_stats()[0] - before == 4  # create, two parts, complete
    got = s3.client.get_object(Bucket=bucket, Key=f"up/{shard.name}")["Body"].read()
    assert got == shard.read_bytes()


def test_a_plain_http_endpoint_without_allow_http_is_refused_by_name(
    s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33, point 14: the S3 client refuses plain HTTP unless allowed, and said so only at the
    first request ("HTTP error: builder error"), for a recorder at close(). The option is named,
    and a recorder fails when it is made."""
    bucket = s3.bucket()
    s3.upload(recorded_cartpole(tmp_path / "cp"), bucket, "run")
    plain = {k: v for k, v in s3.options.items() if k != "allow_http"}
    named = r"the endpoint http://127\.0\.0\.1:\d+ is plain HTTP.*allow_http"
    with pytest.raises(trajcore.InvalidArgumentError, match=named):
        trajcore.open(f"s3://{bucket}/run", storage_options=plain)
    with pytest.raises(trajcore.InvalidArgumentError, match=named):
        trajcore.RecordEpisodes(gym.make("CartPole-v1"), f"s3://{bucket}/rec", storage_options=plain)
    # The same from the environment, with no storage_options at all.
    for key, value in aws_env(s3).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ALLOW_HTTP")
    with pytest.raises(trajcore.InvalidArgumentError, match=named):
        trajcore.RecordEpisodes(gym.make("CartPole-v1"), f"s3://{s3.bucket()}/rec")
    # Allowed: it reads, and records.
    with trajcore.open(f"s3://{bucket}/run", storage_options=s3.options) as ds:
        assert ds.num_episodes > 0
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    record_nested(f"s3://{s3.bucket()}/rec", 30)


def recorded_cartpole(path: Path) -> Path:
    env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), path)
    env.reset(seed=0)
    for _ in range(200):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    env.close()
    return path


def test_a_store_that_fails_while_verifying_is_an_error_naming_the_url(s3: S3, tmp_path: Path) -> None:
    """Issue 33, point 15: chunk fetches that fail at ``open(verify=True)`` (or ``verify``,
    ``recover``) are the store's failure, not damage: the error names the shard's URL, instead of
    an open that lists no episode and a later "the 0 episodes hold no step"."""
    from s3_proxy import s3_proxy

    record_pixels(tmp_path / "px", episodes=5)  # larger than the opening's reads: chunks are fetched apart
    bucket = s3.bucket()
    s3.upload(tmp_path / "px", bucket, "run")
    url = f"s3://{bucket}/run"
    with s3_proxy(s3.endpoint) as proxy:
        options = {**s3.options, "endpoint": proxy.endpoint, "max_retries": "1", "retry_timeout": "3"}
        trajcore.open(url, storage_options=options).close()  # the opening ranges are cached now
        proxy.fail(-1, only=f"GET /{bucket}/run/")  # every fetch of the shard's chunks
        shard = rf"{url}/[^ ]+\.trj: .*503"
        with pytest.raises(TrajcoreIOError, match=shard):
            trajcore.open(url, storage_options=options, verify=True)
        with pytest.raises(TrajcoreIOError, match=shard):
            trajcore.verify(url, storage_options=options)
        with pytest.raises(TrajcoreIOError, match=shard):
            trajcore.recover(url, tmp_path / "saved", storage_options=options)
        assert not (tmp_path / "saved").exists()
        proxy.fail(0)
        with trajcore.open(url, storage_options=options, verify=True) as ds:  # the store answers again
            assert ds.num_episodes > 0 and not ds.problems
