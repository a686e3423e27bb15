"""Reads for training: batched transitions and sequences against episodes read one at a time,
reproducible sampling, filters, worker processes (fork and spawn), a reader following a file
being written, zero-copy views, and `convert`."""

from __future__ import annotations

import functools
import multiprocessing
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from helpers import SpaceEnv, a_shard_started, assert_infos_equal, assert_tree_equal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

OBS = spaces.Dict(
    {
        "pos": spaces.Box(-1, 1, (2,), np.float32),
        "grid": spaces.Box(0, 255, (3, 3), np.uint8),
        "t": spaces.Tuple([spaces.Discrete(4), spaces.MultiBinary(2)]),
        "name": spaces.Text(5),
    }
)
ACT = spaces.Tuple([spaces.Discrete(3), spaces.Box(-1, 1, (2,), np.float32)])
N = 3


def record(path: Path, steps: int, seed: int, **kwargs: Any) -> None:
    """A vector recording (same-step autoreset: final observations come separately), custom
    data, episode metadata, small chunks and shards; episodes still running at close."""
    fns = [functools.partial(SpaceEnv, OBS, ACT, max_steps=3 + 5 * i, p_terminate=0.08) for i in range(N)]
    venv = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    rec = trajcore.RecordVectorEpisodes(
        venv,
        path,
        {"seed": seed},
        episode_metadata=lambda e: {"ret": e["episode_return"], "env": e["env_index"], "long": e["length"] >= 8},
        chunk_bytes=kwargs.pop("chunk_bytes", 700),
        max_shard_bytes=kwargs.pop("max_shard_bytes", 32 << 10),
        **kwargs,
    )
    rec.action_space.seed(seed)
    rec.reset(seed=seed)
    for t in range(steps):
        rec.record(t=np.full(N, t, dtype=np.int32))
        rec.step(rec.action_space.sample())
    rec.close()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("train") / "ds"
    record(path, 300, seed=1)
    record(path, 60, seed=2)  # a second recording in the same directory
    return path


@pytest.fixture
def ds(data_dir: Path) -> trajcore.Dataset:
    d = trajcore.open(data_dir)
    assert d.num_recordings == 2 and len(d.shards) > 2
    return d


def row(tree: Any, t: int) -> Any:
    """Row t of every leaf of a nested episode value."""
    if isinstance(tree, dict):
        return {k: row(v, t) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(row(v, t) for v in tree)
    return tree[t]


def rows(tree: Any, ts: list[int]) -> Any:
    """Rows `ts` of every leaf, stacked (a list for str leaves)."""
    if isinstance(tree, dict):
        return {k: rows(v, ts) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(rows(v, ts) for v in tree)
    if isinstance(tree, list):
        return [tree[t] for t in ts]
    return tree[ts]


def item(batch: Any, b: int) -> Any:
    """Entry b of a batch (along axis 0)."""
    if isinstance(batch, dict):
        return {k: item(v, b) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(item(v, b) for v in batch)
    return batch[b]


def expected_transition(ds: trajcore.Dataset, e: int, t: int) -> dict[str, Any]:
    ep = ds.episodes[e]
    return {
        "observations": row(ep.observations, t),
        "actions": row(ep.actions, t),
        "rewards": ep.rewards[t],
        "next_observations": row(ep.observations, t + 1),
        "terminations": ep.terminations[t],
        "truncations": ep.truncations[t],
    }


def assert_batch(ds: trajcore.Dataset, batch: dict[str, Any]) -> None:
    """Every transition of `batch` equals what indexing its episode gives."""
    episodes, steps = batch["episode_index"], batch["step_index"]
    assert episodes.dtype == np.int64 and steps.dtype == np.int64
    for b, (e, t) in enumerate(zip(episodes.tolist(), steps.tolist(), strict=True)):
        want = expected_transition(ds, e, t)
        got = {k: item(batch[k], b) for k in want}
        assert_tree_equal(got, want, f"transition {b} (episode {e} step {t})")


def test_every_transition_equals_episode_rows(ds: trajcore.Dataset) -> None:
    n = ds.num_steps
    assert n == sum(ep.length for ep in ds.episodes)
    batch = ds.transitions[np.arange(n)]
    assert list(batch) == [
        "observations",
        "actions",
        "rewards",
        "next_observations",
        "terminations",
        "truncations",
        "episode_index",
        "step_index",
    ]
    assert batch["observations"]["grid"].shape == (n, 3, 3) and batch["observations"]["grid"].dtype == np.uint8
    assert isinstance(batch["observations"]["name"], list) and len(batch["observations"]["name"]) == n
    assert_batch(ds, batch)
    # The global numbering: episodes in order, steps in order within each.
    lengths = ds.summaries()["length"]
    assert batch["episode_index"].tolist() == np.repeat(np.arange(ds.num_episodes), lengths).tolist()
    # The last step's next observation is the episode's final one.
    last = np.cumsum(lengths) - 1
    for e, g in enumerate(last[:5]):
        assert_tree_equal(item(batch["next_observations"], int(g)), row(ds.episodes[e].observations, -1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_slices_and_blocks_read_in_bulk_equal_indexing(ds: trajcore.Dataset, data: st.DataObject) -> None:
    """A slice of consecutive steps (read in bulk, a run per episode) is the batch indexing
    those step numbers gives, and so what reading the episodes gives; for the whole dataset
    and for a selection (in its own step numbering), with keys, and cut into blocks."""
    sel = ds.select(env_index=data.draw(st.integers(0, N - 1), label="env"))
    owner = data.draw(st.sampled_from([ds, sel]), label="owner")
    n = owner.num_steps
    start = data.draw(st.integers(-n - 3, n + 3), label="start")
    stop = data.draw(st.integers(-n - 3, n + 3), label="stop")
    got = owner.transitions[start:stop]
    want = owner.transitions[np.arange(n)[start:stop]]
    assert_tree_equal(got, want)
    if len(got["step_index"]):
        assert_batch(ds, got)
    keys = ["rewards", "info/step", "data/t", "observations"] if data.draw(st.booleans(), label="keys") else None
    by_slice = owner.transitions.gather(slice(start, stop), keys=keys)
    assert_tree_equal(by_slice, owner.transitions.gather(np.arange(n)[start:stop], keys=keys))
    size = data.draw(st.integers(1, n + 2), label="block")
    blocks = list(owner.transitions.blocks(size, keys=keys))
    assert len(blocks) == -(-n // size)
    assert_tree_equal(_concat(blocks), owner.transitions.gather(np.arange(n), keys=keys))


def _concat(batches: list[Any]) -> Any:
    first = batches[0]
    if isinstance(first, dict):
        return {k: _concat([b[k] for b in batches]) for k in first}
    if isinstance(first, tuple):
        return tuple(_concat([b[i] for b in batches]) for i in range(len(first)))
    if isinstance(first, list):
        return [x for b in batches for x in b]
    return np.concatenate(batches)


def test_large_batches_reuse_memory_only_once_let_go(ds: trajcore.Dataset) -> None:
    """Large outputs (16 MB and more) come from a small pool of blocks: one still referenced
    is never handed out again, and one let go is rewritten whole."""
    idx = np.arange(300_000) % ds.num_steps
    a = ds.transitions[idx]
    assert isinstance(a["rewards"].base.base, trajcore._core.BatchMemory)
    b = ds.transitions[idx]
    assert not np.shares_memory(a["rewards"].base, b["rewards"].base)
    want = b["rewards"].copy()
    a["rewards"][:] = -1.0
    a["observations"]["grid"][:] = 7
    assert np.array_equal(b["rewards"], want)
    del a
    assert_tree_equal(ds.transitions[idx], b)
    assert_tree_equal(ds.transitions[0 : ds.num_steps], ds.transitions[np.arange(ds.num_steps)])


def test_blocks_refuse_a_size_below_one(ds: trajcore.Dataset) -> None:
    with pytest.raises(trajcore.InvalidArgumentError, match="at least one step"):
        next(ds.transitions.blocks(0))


def test_one_step_and_indexing(ds: trajcore.Dataset) -> None:
    g = ds.num_steps // 2
    ends = np.cumsum(ds.summaries()["length"])
    e = int(np.searchsorted(ends, g, side="right"))  # the episode holding global step g
    t = g - int(ends[e] - ds.episodes[e].length)
    step = ds.transitions[g]
    assert (step["episode_index"], step["step_index"]) == (e, t)
    want = expected_transition(ds, int(e), int(t))
    assert_tree_equal({k: step[k] for k in want}, want)
    assert isinstance(step["rewards"], np.float64) and isinstance(step["terminations"], np.bool_)
    assert ds.transitions[-1]["step_index"] == ds.episodes[-1].length - 1
    sliced = ds.transitions[10:20:3]
    assert sliced["episode_index"].shape == (4,)
    assert_tree_equal(sliced, ds.transitions[[10, 13, 16, 19]])
    assert len(ds.transitions) == ds.num_steps
    with pytest.raises(IndexError):
        ds.transitions[ds.num_steps]
    with pytest.raises(IndexError):
        ds.transitions[[0, ds.num_steps]]


def test_sampling_is_reproducible(ds: trajcore.Dataset) -> None:
    a = ds.sample_transitions(256, seed=7)
    b = ds.sample_transitions(256, seed=7)
    assert_tree_equal(a, b)
    c = ds.sample_transitions(256, seed=8)
    assert not np.array_equal(a["episode_index"] * 1000 + a["step_index"], c["episode_index"] * 1000 + c["step_index"])
    assert_batch(ds, a)
    # Reopening (another process would) gives the same batch from the same seed.
    assert_tree_equal(trajcore.open(ds.path).sample_transitions(256, seed=7), a)
    # Uniform over steps: every step can come up.
    big = ds.sample_transitions(20 * ds.num_steps, seed=1)
    assert len(set((big["episode_index"] * 1000 + big["step_index"]).tolist())) == ds.num_steps
    assert ds.sample_transitions(0, seed=1)["rewards"].shape == (0,)


def test_sequences_stay_inside_episodes(ds: trajcore.Dataset) -> None:
    length = 5
    seq = ds.sample_sequences(64, length=length, seed=3)
    assert "mask" not in seq
    assert seq["observations"]["pos"].shape == (64, length, 2)
    assert seq["actions"][1].shape == (64, length, 2) and seq["rewards"].shape == (64, length)
    assert seq["step_index"].shape == (64, length)
    for b in range(64):
        e = int(seq["episode_index"][b])
        ts = seq["step_index"][b].tolist()
        ep = ds.episodes[e]
        assert ts == list(range(ts[0], ts[0] + length)) and ts[-1] < ep.length
        want = {
            "observations": rows(ep.observations, ts),
            "next_observations": rows(ep.observations, [t + 1 for t in ts]),
            "actions": rows(ep.actions, ts),
            "rewards": ep.rewards[ts],
            "terminations": ep.terminations[ts],
        }
        assert_tree_equal({k: item(seq[k], b) for k in want}, want, f"window {b}")
    # Short episodes are never drawn; a window no episode holds is refused.
    lengths = ds.summaries()["length"]
    assert (lengths[seq["episode_index"]] >= length).all()
    with pytest.raises(trajcore.InvalidArgumentError, match="pad"):
        ds.sample_sequences(1, length=int(lengths.max()) + 1, seed=0)
    assert ds.num_windows(length) == int(np.clip(lengths - length + 1, 0, None).sum())
    windows = ds.sequences(length)
    assert len(windows) == ds.num_windows(length)
    assert_tree_equal(windows[[0, len(windows) - 1]]["step_index"][0], np.arange(length))


def test_padded_sequences_have_a_mask(ds: trajcore.Dataset) -> None:
    length = 9
    seq = ds.sample_sequences(200, length=length, seed=5, pad=True)
    lengths = ds.summaries()["length"]
    assert (lengths[seq["episode_index"]] < length).any(), "short episodes are padded in"
    for b in range(200):
        e = int(seq["episode_index"][b])
        start = int(seq["step_index"][b][0])
        real = min(length, int(lengths[e]) - start)
        assert seq["mask"][b].tolist() == [True] * real + [False] * (length - real)
        assert (seq["rewards"][b][real:] == 0).all() and not seq["terminations"][b][real:].any()
        assert seq["observations"]["name"][b][real:] == [""] * (length - real)
        np.testing.assert_array_equal(seq["rewards"][b][:real], ds.episodes[e].rewards[start : start + real])
    assert ds.num_windows(length, pad=True) == int(np.maximum(lengths - length + 1, 1).sum())


def test_filters_sample_only_their_episodes(ds: trajcore.Dataset) -> None:
    s = ds.summaries()
    env1 = ds.select(env_index=1)
    assert env1.num_steps == int(s["length"][s["env_index"] == 1].sum())
    batch = env1.sample_transitions(300, seed=0)
    assert set(batch["episode_index"].tolist()) <= set(env1.indices)
    assert (s["env_index"][batch["episode_index"]] == 1).all()
    assert_batch(ds, batch)
    done = ds.select(complete=True, min_length=4, max_return=10.0)
    seq = done.sample_sequences(50, length=4, seed=1)
    e = seq["episode_index"]
    assert s["complete"][e].all() and (s["length"][e] >= 4).all()
    long = ds.select(where=lambda m: bool(m.get("long")))
    assert len(long) and all(ep.metadata["long"] for ep in long)
    assert set(long.sample_transitions(50, seed=2)["episode_index"].tolist()) <= set(long.indices)
    chained = env1.select(complete=True)
    assert set(chained.indices) == set(env1.indices) & set(ds.select(complete=True).indices)
    # Steps of a selection are numbered over its episodes.
    g = env1.num_steps - 1
    step = env1.transitions[g]
    assert (step["episode_index"], step["step_index"]) == (env1.indices[-1], ds.episodes[env1.indices[-1]].length - 1)
    assert_tree_equal(env1.transitions[[0, g]]["episode_index"], np.array([env1.indices[0], env1.indices[-1]]))
    # The whole dataset as a selection samples like the dataset.
    assert_tree_equal(ds.episodes.sample_transitions(20, seed=4), ds.sample_transitions(20, seed=4))
    with pytest.raises(trajcore.InvalidArgumentError):
        ds.select(min_length=10**6).sample_transitions(1, seed=0)


def test_extra_columns_by_name(ds: trajcore.Dataset) -> None:
    batch = ds.sample_transitions(40, seed=9, keys=["rewards", "info/step", "info/_even", "data/t", "data/_t"])
    assert list(batch) == ["rewards", "info/step", "info/_even", "data/t", "data/_t", "episode_index", "step_index"]
    for b in range(40):
        e, t = int(batch["episode_index"][b]), int(batch["step_index"][b])
        ep = ds.episodes[e]
        assert batch["info/step"][b] == ep.infos["step"][t]
        assert batch["info/_even"][b] == ep.infos["_even"][t]
        assert batch["data/t"][b] == ep.data["t"][t]
    with pytest.raises(trajcore.SchemaError):
        ds.sample_transitions(1, seed=0, keys=["info/nope"])


def _worker_batches(payload: bytes) -> list[dict[str, Any]]:
    source = pickle.loads(payload)
    return [
        source.sample_transitions(64, seed=11),
        source.sample_sequences(8, length=3, seed=12, pad=True),
        source.transitions[[0, 5, 9]],
    ]


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_worker_processes_read_the_same_values(ds: trajcore.Dataset, start: str) -> None:
    sources = [ds, ds.select(env_index=[0, 2])]
    ctx = multiprocessing.get_context(start)
    with ctx.Pool(2) as pool:
        got = pool.map(_worker_batches, [pickle.dumps(s) for s in sources])
    for source, batches in zip(sources, got, strict=True):
        for g, w in zip(batches, _worker_batches(pickle.dumps(source)), strict=True):
            assert_tree_equal(g, w)


WRITER = """
import sys, time, numpy as np, trajcore
from helpers import SpaceEnv
from gymnasium import spaces
env = trajcore.RecordEpisodes(
    SpaceEnv(spaces.Box(-1, 1, (3,), np.float32), max_steps=6, p_terminate=0.2),
    sys.argv[1], flush_interval=0.05, chunk_bytes=256,
)
env.reset(seed=0)
for episode in range(int(sys.argv[2])):
    while True:
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            break
    env.reset()
    time.sleep(0.03)
env.close()
"""


def test_reader_follows_a_recording_being_written(tmp_path: Path) -> None:
    path = tmp_path / "live"
    episodes = 40
    tests_dir = os.path.dirname(__file__)
    env = {**os.environ, "PYTHONPATH": tests_dir + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), str(path), str(episodes)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not a_shard_started(path):
            assert time.monotonic() < deadline and proc.poll() in (None, 0)
            time.sleep(0.02)
        live = trajcore.open(path)
        seen = [live.num_episodes]
        first_batch = None
        while proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
            live.refresh()
            seen.append(live.num_episodes)
            if live.num_steps and first_batch is None:
                first_batch = (live.num_steps, live.sample_transitions(32, seed=0))
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
    live.refresh()
    assert live.num_episodes >= episodes  # the last reset's episode is kept too, incomplete
    assert seen == sorted(seen) and len(set(seen)) > 2, f"saw episodes appear while writing: {seen}"
    final = trajcore.open(path)
    assert live.num_steps == final.num_steps
    assert_tree_equal(live.transitions[np.arange(live.num_steps)], final.transitions[np.arange(final.num_steps)])
    # Episode and step numbers handed out while writing still name the same transitions.
    assert first_batch is not None
    n, batch = first_batch
    assert n < final.num_steps
    assert_batch_equal_positions(batch, final)


def assert_batch_equal_positions(batch: dict[str, Any], ds: trajcore.Dataset) -> None:
    for b in range(len(batch["rewards"])):
        e, t = int(batch["episode_index"][b]), int(batch["step_index"][b])
        assert batch["rewards"][b] == ds.episodes[e].rewards[t]
        np.testing.assert_array_equal(batch["observations"][b], ds.episodes[e].observations[t])


def test_convert_to_raw_round_trip(ds: trajcore.Dataset, tmp_path: Path) -> None:
    out = tmp_path / "raw"
    result = trajcore.convert(ds, out, codecs="raw", chunk_bytes=64 << 10)
    assert result["episodes"] == ds.num_episodes and result["steps"] == ds.num_steps
    raw = trajcore.open(out)
    assert raw.num_recordings == 2 and not raw.problems
    for key in ("metadata",):
        assert raw.meta(0)[key] == ds.meta(0)[key] and raw.meta(1)[key] == ds.meta(1)[key]
    assert raw.meta(0)["user"]["converted_from"]["autoreset_mode"] == "same_step"
    assert raw.observation_space == ds.observation_space and raw.action_space == ds.action_space
    got, want = raw.summaries(), ds.summaries()
    # Episode ids number episodes in the order they start, which the one-by-one replay changes.
    for key in want.keys() - {"shard", "episode_id"}:
        assert_tree_equal(got[key], want[key], key)
    for a, b in zip(ds.episodes, raw.episodes, strict=True):
        where = f"episode {a.index}"
        assert (a.env_index, a.length, a.complete, a.terminated, a.truncated) == (
            b.env_index,
            b.length,
            b.complete,
            b.terminated,
            b.truncated,
        ), where
        assert (a.episode_return, a.start_ns, a.end_ns, a.metadata) == (
            b.episode_return,
            b.start_ns,
            b.end_ns,
            b.metadata,
        ), where
        assert_tree_equal(b.observations, a.observations, where)
        assert_tree_equal(b.actions, a.actions, where)
        for k in ("rewards", "terminations", "truncations"):
            assert_tree_equal(getattr(b, k), getattr(a, k), f"{where} {k}")
        assert_infos_equal(b.infos, a.infos, f"{where} infos")
        assert_infos_equal(b.data, a.data, f"{where} data")
    for spec in raw._core.columns(0):
        if spec.get("mask_of") is None:
            assert spec["codec"]["zstd_level"] is None, spec["name"]
    # Raw columns are served as read-only views of the memory map.
    grid = raw.episodes[0].observations["grid"]
    assert type(grid.base).__name__ == "MappedRows" and not grid.flags.writeable
    with pytest.raises(ValueError, match="WRITEABLE"):
        grid.flags.writeable = True
    assert_tree_equal(raw.sample_transitions(128, seed=3), ds.sample_transitions(128, seed=3))
    # A selection converts alone; a destination that is not empty is refused.
    small = trajcore.convert(ds.select(env_index=2, complete=True), tmp_path / "small")
    assert small["episodes"] == len(ds.select(env_index=2, complete=True))
    with pytest.raises(trajcore.InvalidArgumentError, match="not an empty directory"):
        trajcore.convert(ds, out)


def test_views_outlive_the_dataset(tmp_path: Path) -> None:
    record(tmp_path / "r", 30, seed=4, zstd_level=None, chunk_bytes=1 << 20)
    d = trajcore.open(tmp_path / "r")
    pos = d.episodes[0].observations["pos"]
    assert type(pos.base).__name__ == "MappedRows"
    want = pos.copy()
    d.close()
    del d
    np.testing.assert_array_equal(pos, want)


def test_batches_release_the_gil(tmp_path: Path) -> None:
    path = tmp_path / "px"
    rec = trajcore.RecordEpisodes(SpaceEnv(spaces.Box(0, 255, (64, 64, 3), np.uint8), max_steps=50), path)
    rec.reset(seed=0)
    for _ in range(300):
        _, _, term, trunc, _ = rec.step(rec.action_space.sample())
        if term or trunc:
            rec.reset()
    rec.close()
    d = trajcore.open(path, cache_bytes=0)  # every batch decompresses
    ticks = 0
    stop = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    thread = threading.Thread(target=count)
    thread.start()
    tries = []
    try:
        while ticks < 100:  # the counter runs
            time.sleep(0.001)
        # On a loaded machine (2 cores, load 8) the counter thread may get no CPU at all during
        # one 0.1 s call, GIL or not: a few calls give it its share. Holding the GIL, no call
        # would ever let it count.
        for _ in range(5):
            before, start = ticks, time.perf_counter()
            d.sample_transitions(2000, seed=0)  # decodes every chunk, copies ~50 MB
            tries.append((time.perf_counter() - start, ticks - before))
            if tries[-1][1] > 1000:
                break
    finally:
        stop.set()
        thread.join()
    # Holding the GIL for the whole call would have stopped the counter (it waits for the GIL
    # and the call never gives it up); released, it counts all along.
    took, during = tries[-1]
    assert took > 0.005 and during > 1000, tries
