"""Scans in the file's order (``transitions.blocks(order="file")``): every transition of the
step order exactly once, with the values indexing gives it, grouped by recording and sub-env
with each sub-env's episodes in the order recorded; on recordings with several sub-envs, both
autoreset modes, shards rolled over, two recordings in one directory and a data column added
mid-recording."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from helpers import SpaceEnv, assert_tree_equal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

OBS = spaces.Dict({"pos": spaces.Box(-1, 1, (2,), np.float32), "grid": spaces.Box(0, 255, (2, 3), np.uint8)})
ACT = spaces.Discrete(3)
N = 4
KEYS = ["observations", "next_observations", "actions", "rewards", "terminations", "info/step", "data/late"]


def record(path: Path, mode: AutoresetMode, steps: int, seed: int, late_from: int) -> None:
    """`N` sub-envs of different episode lengths, small chunks and shards (several of each per
    lane), and a data column first recorded at vector step `late_from`."""
    fns = [functools.partial(SpaceEnv, OBS, ACT, max_steps=2 + 4 * i, p_terminate=0.1) for i in range(N)]
    rec = trajcore.RecordVectorEpisodes(
        SyncVectorEnv(fns, autoreset_mode=mode), path, chunk_bytes=500, max_shard_bytes=8 << 10
    )
    rec.action_space.seed(seed)
    rec.reset(seed=seed)
    for t in range(steps):
        if t >= late_from:
            rec.record(late=np.arange(N, dtype=np.int16) + t)
        rec.step(rec.action_space.sample())
    rec.close()


@pytest.fixture(scope="module", params=[AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=["next", "same"])
def data_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("file_order") / "ds"
    record(path, request.param, 240, seed=1, late_from=90)
    record(path, request.param, 50, seed=2, late_from=0)  # a second recording in the directory
    return path


@pytest.fixture
def ds(data_dir: Path) -> trajcore.Dataset:
    d = trajcore.open(data_dir)
    assert d.num_recordings == 2 and len(d.shards) > 4
    return d


def _concat(batches: list[Any]) -> Any:
    first = batches[0]
    if isinstance(first, dict):
        return {k: _concat([b[k] for b in batches]) for k in first}
    if isinstance(first, list):
        return [x for b in batches for x in b]
    return np.concatenate(batches)


def _owners(ds: trajcore.Dataset) -> dict[str, Any]:
    return {
        "dataset": ds,
        "one sub-env": ds.select(env_index=2),
        "every other episode": ds.episodes[::2],
        "long episodes, newest first": ds.episodes[::-1].select(min_length=3),
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_file_order_holds_every_transition_once(ds: trajcore.Dataset, data: st.DataObject) -> None:
    owners = _owners(ds)
    owner = owners[data.draw(st.sampled_from(sorted(owners)), label="owner")]
    n = owner.num_steps
    size = data.draw(st.integers(1, n + 3), label="block")
    keys = KEYS if data.draw(st.booleans(), label="keys") else None
    blocks = list(owner.transitions.blocks(size, keys=keys, order="file"))
    assert len(blocks) == -(-n // size)
    assert all(len(b["episode_index"]) == size for b in blocks[:-1])
    got = _concat(blocks)

    # Each transition of the step order once.
    in_steps = owner.transitions[0:n]
    step_pairs = list(zip(in_steps["episode_index"].tolist(), in_steps["step_index"].tolist(), strict=True))
    file_pairs = list(zip(got["episode_index"].tolist(), got["step_index"].tolist(), strict=True))
    assert len(set(file_pairs)) == len(file_pairs) == n
    assert set(file_pairs) == set(step_pairs)

    # With the values the step order has for it.
    number = {pair: g for g, pair in enumerate(step_pairs)}
    assert_tree_equal(got, owner.transitions.gather(np.array([number[p] for p in file_pairs]), keys=keys))

    # Grouped by (recording, sub-env), episodes in the order recorded, steps in order.
    s = ds.summaries()
    e, t = got["episode_index"], got["step_index"]
    place = list(zip(s["recording"][e].tolist(), s["env_index"][e].tolist(), e.tolist(), t.tolist(), strict=True))
    assert place == sorted(place)


def test_file_order_reads_whole_sub_envs_with_late_columns_as_zeros(ds: trajcore.Dataset) -> None:
    """One block of everything: each sub-env's transitions together; a column added
    mid-recording reads as zeros before its first row, like any read."""
    (block,) = ds.transitions.blocks(ds.num_steps, keys=KEYS, order="file")
    s = ds.summaries()
    lanes = s["recording"][block["episode_index"]] * N + s["env_index"][block["episode_index"]]
    assert (np.diff(lanes) >= 0).all() and len(np.unique(lanes)) == 2 * N
    late = block["data/late"]
    first = ds.episodes[int(block["episode_index"][0])]
    assert late[0] == 0 and (late != 0).any(), "recording 0 starts before the late column"
    assert_tree_equal(block["rewards"][: first.length], first.rewards)


def test_file_order_refuses_unknown_orders(ds: trajcore.Dataset) -> None:
    with pytest.raises(trajcore.InvalidArgumentError, match="order"):
        next(ds.transitions.blocks(order="random"))  # type: ignore[arg-type]


def test_file_order_follows_refresh(tmp_path: Path) -> None:
    """The file order of a dataset that grew holds the new episodes too."""
    record(tmp_path / "ds", AutoresetMode.NEXT_STEP, 40, seed=3, late_from=0)
    ds = trajcore.open(tmp_path / "ds")
    before = ds.num_steps
    assert len(_concat(list(ds.transitions.blocks(order="file")))["step_index"]) == before
    record(tmp_path / "ds", AutoresetMode.NEXT_STEP, 30, seed=4, late_from=0)
    assert ds.refresh() > 0
    got = _concat(list(ds.transitions.blocks(order="file")))
    assert len(got["step_index"]) == ds.num_steps > before
    assert sorted(zip(got["episode_index"].tolist(), got["step_index"].tolist(), strict=True)) == sorted(
        zip(*(ds.transitions[0 : ds.num_steps][k].tolist() for k in ("episode_index", "step_index")), strict=True)
    )


def test_a_large_file_order_scan_equals_episode_reads(tmp_path: Path) -> None:
    """A scan whose output is far larger than the CPU caches is cut into a part per thread (and
    its memory taken from the block pool) and written with streamed stores (from 32 MB of
    output): the same values as reading each episode, on frame stacks (codec 3), a raw and a
    compressed column, terminations and truncations, episodes across chunks and shards, two
    recordings, with and without maps."""
    from gymnasium.wrappers import FrameStackObservation, TimeLimit
    from test_frame_stacks import FrameEnv

    def env() -> Any:  # episodes of 3 to 20 steps, some truncated at 9
        return TimeLimit(FrameStackObservation(FrameEnv((32, 32)), 4), max_episode_steps=9)

    for steps, seed in ((1500, 0), (120, 1)):
        rec = trajcore.RecordVectorEpisodes(
            SyncVectorEnv([env] * 3),
            tmp_path / "ds",
            codecs={"action": {"zstd_level": None}, "obs": {"chunk_bytes": 1 << 18}},
            max_shard_bytes=256 << 10,
        )
        rec.action_space.seed(seed)
        rec.reset(seed=seed)
        for _ in range(steps):
            rec.step(rec.action_space.sample())
        rec.close()
    for mmap in (True, False):
        ds = trajcore.open(tmp_path / "ds", mmap=mmap)
        assert ds.num_recordings == 2 and len(ds.shards) > 2
        (block,) = ds.transitions.blocks(ds.num_steps, order="file")
        assert sum(np.asarray(v).nbytes for v in block.values()) > 32 << 20, "not a streamed scan"
        e, t = block["episode_index"], block["step_index"]
        starts = np.flatnonzero(np.r_[True, e[1:] != e[:-1]])
        assert len(starts) == ds.num_episodes  # each episode's steps together, in order
        assert ds.summaries()["truncated"].any() and ds.summaries()["terminated"].any()
        for a, b in zip(starts, np.r_[starts[1:], len(e)], strict=True):
            ep = ds.episodes[int(e[a])]
            assert (t[a:b] == np.arange(ep.length)).all()
            np.testing.assert_array_equal(block["observations"][a:b], ep.observations[:-1])
            np.testing.assert_array_equal(block["next_observations"][a:b], ep.observations[1:])
            for key in ("actions", "rewards", "terminations", "truncations"):
                np.testing.assert_array_equal(block[key][a:b], getattr(ep, key), err_msg=key)
        ds.close()
