"""Shards changed under a reader by another process. Through a memory map, a file truncated in
place kills the reading process with SIGBUS; with ``mmap=False`` every read is a positioned read,
so each way of changing a file (truncated, overwritten in place by `cp` or `rsync --inplace`,
shorter or as long, raw or compressed) gives values or `CorruptFileError`, never a crash. Each
case runs in a child process so that a crash fails the test instead of killing pytest.
`refresh()` notices a shard that shrank, was rewritten in place, replaced or deleted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import trajcore


def _record(path: Path, zstd_level: int | None) -> None:
    envs = trajcore.RecordVectorEpisodes(
        gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync"),
        path,
        zstd_level=zstd_level,
        max_shard_bytes=40_000,
        chunk_bytes=8_000,
        flush_interval=0.02,
    )
    envs.action_space.seed(0)
    envs.reset(seed=0)
    for t in range(3000):
        envs.record(t=np.full(4, t, dtype=np.int64))
        envs.step(envs.action_space.sample())
    envs.close()


@pytest.fixture(scope="module", params=[None, 3], ids=["raw", "zstd"])
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("changed") / "d"
    _record(path, request.param)
    return path


def _change(shard: Path, how: str, other: Path) -> None:
    data = shard.read_bytes()
    if how == "truncate-half":
        os.truncate(shard, len(data) // 2)
    elif how == "truncate-zero":
        os.truncate(shard, 0)
    elif how == "cp-shorter":  # cp writes in place: truncates, then writes the other file
        with open(shard, "r+b") as f:
            f.truncate(0)
            f.write(other.read_bytes()[: len(data) // 3])
    elif how == "rsync-inplace":  # the same length, other bytes after the first 4 KiB
        flipped = (np.frombuffer(data, dtype=np.uint8)[4096:] ^ 0x5A).tobytes()
        with open(shard, "r+b") as f:
            f.write(data[:4096] + flipped)
    else:
        raise AssertionError(how)


CHILD = textwrap.dedent(
    """
    import sys, warnings, numpy as np, trajcore
    from pathlib import Path
    path, how, other, mmap = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    sys.path.insert(0, sys.argv[5])
    from test_changed_files import _change
    warnings.simplefilter("ignore")
    ds = trajcore.open(path, mmap=mmap, cache_bytes=0)  # every read goes to the file
    before = {i: ds.episodes[i].data["t"].copy() for i in range(0, ds.num_episodes, 7)}
    shard = Path(ds.shards[len(ds.shards) // 2])
    _change(shard, how, Path(other))
    if mmap:
        ds.refresh()  # with a map, only a refresh before any read keeps the process alive
    read = errors = 0
    for i in range(ds.num_episodes):
        try:
            t = ds.episodes[i].data["t"]
        except trajcore.CorruptFileError:
            errors += 1
            continue
        if i in before:
            assert np.array_equal(t, before[i]), f"episode {i} changed"
        read += 1
    for seed in range(5):
        try:
            ds.sample_transitions(64, seed=seed)
        except trajcore.CorruptFileError:
            errors += 1
    print("ok", read, errors)
    """
)


@pytest.mark.parametrize("how", ["truncate-half", "truncate-zero", "cp-shorter", "rsync-inplace"])
@pytest.mark.parametrize("mmap", [False, True], ids=["positioned-reads", "mmap-then-refresh"])
def test_a_shard_changed_in_place_never_crashes_the_reader(
    recorded: Path, tmp_path: Path, how: str, mmap: bool
) -> None:
    work = tmp_path / "d"
    shutil.copytree(recorded, work)
    other = sorted(recorded.iterdir())[0]
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(work), how, str(other), "1" if mmap else "0", str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, f"the reader died (status {out.returncode}): {out.stderr[-2000:]}"
    words = out.stdout.split()
    assert words[0] == "ok", out.stdout
    read, errors = int(words[1]), int(words[2])
    assert read > 0, "the intact shards still read"
    assert errors > 0, "reads of the changed shard say so"


def test_refresh_reports_changes_and_keeps_reading_what_it_opened(recorded: Path, tmp_path: Path) -> None:
    work = tmp_path / "d"
    shutil.copytree(recorded, work)
    with trajcore.open(work, strict=True) as ds:
        shards = [Path(s) for s in ds.shards]
        values = [ep.data["t"].copy() for ep in ds.episodes]
        # Replaced by a rename (the safe way to change a file) and deleted: not damage; the
        # dataset keeps reading the files it opened.
        replacement = tmp_path / "new.trj"
        shutil.copyfile(shards[0], replacement)
        os.replace(replacement, shards[0])
        shards[1].unlink()
        with pytest.warns(trajcore.TrajcoreWarning) as caught:
            assert ds.refresh() == 0
        said = " ".join(str(w.message) for w in caught)
        assert "replaced under its name" in said and "deleted since it was opened" in said
        assert all(np.array_equal(ep.data["t"], v) for ep, v in zip(ds.episodes, values, strict=True))
        assert ds.problems == []
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ds.refresh()  # said once
    # Truncated in place: damage; strict refresh raises, lenient warns, reads raise.
    with trajcore.open(work) as ds:
        os.truncate(ds.shards[-1], 100)
        with pytest.warns(trajcore.TrajcoreWarning, match="shrank"):
            ds.refresh()
        in_last = np.flatnonzero(ds.summaries()["shard"] == len(ds.shards) - 1)
        assert len(in_last)
        with pytest.raises(trajcore.CorruptFileError, match="changed since it was opened"):
            ds.episodes[int(in_last[0])].data  # noqa: B018
    _record(work2 := tmp_path / "e", 3)
    with trajcore.open(work2, strict=True) as ds:
        os.truncate(ds.shards[0], 100)
        with pytest.raises(trajcore.CorruptFileError, match="shrank"):
            ds.refresh()


def test_a_closed_shard_rewritten_in_place_is_noticed(recorded: Path, tmp_path: Path) -> None:
    work = tmp_path / "d"
    shutil.copytree(recorded, work)
    with trajcore.open(work) as ds:
        shard = Path(ds.shards[0])
        data = shard.read_bytes()
        with open(shard, "r+b") as f:  # same length, same bytes: only the time says so
            f.write(data)
        os.utime(shard, ns=(os.stat(shard).st_atime_ns, os.stat(shard).st_mtime_ns + 10**9))
        with pytest.warns(trajcore.TrajcoreWarning, match="modified in place"):
            ds.refresh()


def test_a_learner_refreshing_at_every_step_hears_of_a_closed_shard_changed_in_place(
    recorded: Path, tmp_path: Path
) -> None:
    # A refresh looks at the closed shards at most once per 50 ms unless the directory changed
    # (`closed_checks`): the change is said by a refresh of the loop soon after, once.
    work = tmp_path / "d"
    shutil.copytree(recorded, work)
    with trajcore.open(work) as ds:
        ds.refresh()  # the first refresh looks at every shard
        os.truncate(ds.shards[0], 100)
        changed = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            while not caught and time.monotonic() - changed < 10:
                ds.refresh()
        assert [w.category for w in caught] == [trajcore.TrajcoreWarning]
        assert "shrank" in str(caught[0].message)
        assert time.monotonic() - changed < 2, "said within the interval (and the load's delays)"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(3):
                ds.refresh()  # said once


def test_shards_added_one_after_another_are_each_seen_by_the_refresh_right_after(
    recorded: Path, tmp_path: Path
) -> None:
    # Within one tick of the file system's clock the directory's time may not change: a
    # listing whose time was that fresh is made again at the next refresh (`dir_watch`).
    shards = sorted(recorded.glob("*.trj"))
    assert len(shards) >= 4
    work = tmp_path / "d"
    work.mkdir()
    shutil.copyfile(shards[0], work / shards[0].name)
    with trajcore.open(work) as ds:
        for i, shard in enumerate(shards[1:], start=2):
            before = ds.num_steps
            shutil.copyfile(shard, work / shard.name)
            ds.refresh()
            assert len(ds.shards) == i
            assert ds.num_steps > before
        assert ds.problems == []


def test_positioned_reads_equal_mapped_reads(recorded: Path) -> None:
    import pickle

    mapped, read = trajcore.open(recorded), trajcore.open(recorded, mmap=False)
    assert mapped._core.mmap and not read._core.mmap
    assert mapped.num_episodes == read.num_episodes
    for a, b in zip(mapped.episodes, read.episodes, strict=True):
        np.testing.assert_array_equal(a.observations, b.observations)
        np.testing.assert_array_equal(a.data["t"], b.data["t"])
        np.testing.assert_array_equal(a.rewards, b.rewards)
    x, y = mapped.sample_transitions(256, seed=3), read.sample_transitions(256, seed=3)
    for k in x:
        np.testing.assert_array_equal(x[k], y[k])
    again = pickle.loads(pickle.dumps(read))
    assert not again._core.mmap
