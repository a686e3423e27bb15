"""A dataset refreshed while a recorder in another process rolls over shards and writes large
records lists what a fresh open of the same bytes lists, and calls nothing the writer is still
writing damage."""

import os
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import trajcore
from helpers import a_shard_started, assert_tree_equal

# Incompressible 48x48x3 frames in 256 KiB chunks: Chunks records of about 1 MiB, so a refresh
# often lands in the middle of one; 1.5 MB shards, so episodes run over rollovers.
WRITER = """
import sys, numpy as np, gymnasium as gym, trajcore
from gymnasium import spaces
from helpers import SpaceEnv

def make():
    return SpaceEnv(spaces.Box(0, 255, (48, 48, 3), np.uint8), max_steps=40, p_terminate=0.04, infos=False)

envs = trajcore.RecordVectorEpisodes(
    gym.vector.SyncVectorEnv([make] * 4), sys.argv[1],
    max_shard_bytes=1_500_000, chunk_bytes=256 * 1024, zstd_level=None, flush_interval=0.01,
    compact_shards=False,
)
envs.action_space.seed(0)
envs.reset(seed=0)
for _ in range(int(sys.argv[2])):
    envs.step(envs.action_space.sample())
envs.close()
"""

FIELDS = ("length", "complete", "terminated", "truncated", "continued", "continues", "episode_return")


def _listing(ds: trajcore.Dataset) -> list[tuple[Any, ...]]:
    """Every listing as (recording, env, episode id, fields...), sorted: a refresh appends what
    it finds, so its order is the order things were found, not the file order of a fresh open."""
    s = ds.summaries()
    keys = ("recording", "env_index", "episode_id", *FIELDS)
    return sorted(zip(*(s[k].tolist() for k in keys), strict=True))


def _start_writer(path: Path, steps: int) -> subprocess.Popen[bytes]:
    tests_dir = os.path.dirname(__file__)
    env = {**os.environ, "PYTHONPATH": tests_dir + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), str(path), str(steps)], env=env)


def _snapshot(src: Path, dst: Path) -> None:
    """Copies what each shard holds now onto the end of its copy: the writer only appends, so
    the copies are files that grew (a record may be cut short at their end, with no writer)."""
    for shard in sorted(src.glob("*.trj")):
        copy = dst / shard.name
        have = copy.stat().st_size if copy.exists() else 0
        with shard.open("rb") as f, copy.open("ab") as out:
            f.seek(have)
            shutil.copyfileobj(f, out)


def test_refresh_during_rollovers_equals_a_fresh_open(tmp_path: Path) -> None:
    """Each round: the live files are copied (appended) to a snapshot directory; a dataset over
    the snapshot is refreshed and compared with a fresh open of the same snapshot (the same
    bytes). A dataset over the live files is refreshed too, every few ms: no warning, no
    problem, ever, while the writer is healthy."""
    live_dir, snap_dir = tmp_path / "live", tmp_path / "snap"
    snap_dir.mkdir()
    proc = _start_writer(live_dir, 1200)
    deadline = time.monotonic() + 120
    try:
        # Until the first shard has its header: the writer creates the file, then writes the
        # header, and a directory whose only file has none yet holds no shard (NoShard).
        while not a_shard_started(live_dir):
            assert time.monotonic() < deadline and proc.poll() in (None, 0)
            time.sleep(0.005)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a warning from the live refreshes fails the test
            live = trajcore.open(live_dir)
            _snapshot(live_dir, snap_dir)
            snap = trajcore.open(snap_dir)
            rounds = parts_seen = 0
            while proc.poll() is None:
                assert time.monotonic() < deadline
                for _ in range(5):
                    live.refresh()
                    assert live.problems == [], live.problems
                    time.sleep(0.003)
                _snapshot(live_dir, snap_dir)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # a copy cut mid-record has a damaged tail
                    snap.refresh()
                    fresh = trajcore.open(snap_dir)
                assert _listing(snap) == _listing(fresh), f"round {rounds}"
                parts_seen += int(np.sum(snap.summaries()["continues"]))
                rounds += 1
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
    assert rounds > 5
    assert parts_seen > 0, "no refresh saw an episode going on over a rollover"
    assert len(list(live_dir.glob("*.trj"))) > 3

    # The writer is done: refreshed datasets equal a fresh open exactly, values included.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        live.refresh()
    _snapshot(live_dir, snap_dir)
    snap.refresh()
    final = trajcore.open(live_dir)
    assert final.problems == [] and live.problems == [] and snap.problems == []
    assert _listing(live) == _listing(final) == _listing(snap)
    assert all(final.summaries()["complete"] | (final.summaries()["continues"] == 0))
    order = {key: i for i, key in enumerate(_keyed(final))}
    for ds in (live, snap):
        assert ds.num_steps == final.num_steps
        for i, key in enumerate(_keyed(ds)):
            a, b = ds.episodes[i], final.episodes[order[key]]
            assert_tree_equal(a.observations, b.observations)
            assert_tree_equal(a.rewards, b.rewards)


def _keyed(ds: trajcore.Dataset) -> list[tuple[int, int, int]]:
    s = ds.summaries()
    return list(zip(s["recording"].tolist(), s["env_index"].tolist(), s["episode_id"].tolist(), strict=True))


def test_a_part_listed_during_a_rollover_keeps_its_index_and_grows(tmp_path: Path) -> None:
    """Episode numbers handed out while an episode ran over a rollover still name it after its
    end arrives: its listing grows in place (the first steps are the same)."""
    live_dir, snap_dir = tmp_path / "live", tmp_path / "snap"
    snap_dir.mkdir()
    proc = _start_writer(live_dir, 600)
    assert proc.wait(timeout=120) == 0
    shards = sorted(live_dir.glob("*.trj"))
    assert len(shards) > 2
    # The first shard alone (closed at a rollover, its running episodes written as parts).
    shutil.copy(shards[0], snap_dir / shards[0].name)
    ds = trajcore.open(snap_dir)
    s = ds.summaries()
    parts = [i for i in range(ds.num_episodes) if s["continues"][i]]
    assert parts, "the first shard ends with episodes going on"
    before = {i: (ds.episodes[i].episode_id, ds.episodes[i].rewards.copy()) for i in parts}
    for shard in shards[1:]:
        shutil.copy(shard, snap_dir / shard.name)
    ds.refresh()
    final = trajcore.open(live_dir)
    assert _listing(ds) == _listing(final)
    for i, (episode_id, rewards) in before.items():
        e = ds.episodes[i]
        assert e.episode_id == episode_id and e.length > len(rewards)
        np.testing.assert_array_equal(e.rewards[: len(rewards)], rewards)
