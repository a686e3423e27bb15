"""Reading datasets as Ray Data (`trajcore.ray.read_transitions`, `read_episodes`) against the
reader API (`trajcore.open`), value for value, on a local Ray: nested Dict/Tuple/Text spaces,
infos that come and go, custom data, episodes across shard rollovers; and the Ray Data
operations a training pipeline uses on the result."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.data", reason="trajcore.ray needs ray[data] (CI installs ray[data,rllib])")

import trajcore
import trajcore.ray
from export_data import NESTED_ACTION, NESTED_OBS, flatten, steps
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from helpers import SpaceEnv
from trajcore.ray._plan import EpisodeKey, TaskPlan, locate, plan_tasks, shard_index
from trajcore.ray.datasource import files_token
from trajcore.spaces import escape_key

pytestmark = pytest.mark.usefixtures("ray_local")


# --- what a read must give, from the reader API alone ----------------------------------------


def leaves(prefix: str, value: Any, out: dict[str, Any]) -> None:
    """The naming rule of the exports' step tables with arrays kept whole."""
    flatten(prefix, value, out, split_arrays=False)


def expected_transitions(ds: trajcore.Dataset) -> list[dict[str, Any]]:
    """Each step as {column: value}; a masked column missing from a row was not given there."""
    out = []
    for s in steps(ds):
        r: dict[str, Any] = {"episode": s["episode"], "env_index": s["env_index"], "step": s["step"]}
        for group in ("obs", "next_obs", "action", "reward", "terminated", "truncated"):
            leaves(group, s[group], r)
        for group in ("info", "data"):
            for k, v in s[group].items():
                leaves(f"{group}/{escape_key(k)}", v, r)
        out.append(r)
    return out


def masked_columns(ds: trajcore.Dataset) -> set[str]:
    names: set[str] = set()
    for ep in ds.episodes:
        for group, fields in (("info", ep.info_masks), ("data", ep.data_masks)):
            flat: dict[str, Any] = {}
            for k, v in fields.items():
                leaves(f"{group}/{escape_key(k)}", v, flat)
            names |= set(flat)
    return names


def numpy_rows(data: Any) -> list[dict[str, Any]]:
    """Every row of a Ray dataset with numpy values (``take_all`` turns scalars into Python's,
    losing their dtype)."""
    out = []
    for batch in data.iter_batches(batch_size=256, batch_format="numpy"):
        n = len(next(iter(batch.values())))
        out += [{k: v[i] for k, v in batch.items()} for i in range(n)]
    return out


def assert_value(got: Any, want: Any, where: str) -> None:
    if isinstance(want, str):
        assert got == want, where
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, f"{where}: shape {g.shape} != {w.shape}"
    if w.dtype.kind not in "U":
        assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != {w.dtype}"
    np.testing.assert_array_equal(g, w, err_msg=where)


def assert_transitions(rows: list[dict[str, Any]], ds: trajcore.Dataset) -> None:
    want = expected_transitions(ds)
    masked = masked_columns(ds)
    rows = sorted(rows, key=lambda r: (r["episode"], r["step"]))
    assert len(rows) == len(want) == ds.num_steps
    columns = set().union(*(w.keys() for w in want)) | masked
    assert set(rows[0]) == columns | {"mask/" + c for c in masked}
    for got, w in zip(rows, want, strict=True):
        where = f"episode {w['episode']} step {w['step']}"
        for name in columns:
            if name in masked:
                assert bool(got["mask/" + name]) == (name in w), f"{where} mask/{name}"
            if name in w:
                assert_value(got[name], w[name], f"{where} {name}")
            else:  # not given: zeros, or ""
                value = got[name]
                assert value == "" if isinstance(value, str) else not np.any(value), f"{where} {name}: {value!r}"


# --- datasets --------------------------------------------------------------------------------


def record_rollover(path: Path) -> None:
    """3 sub-envs of nested spaces with infos and custom data, in shards of about 25 kB of small
    chunks: many episodes run over a rollover."""
    fns = [functools.partial(SpaceEnv, NESTED_OBS, NESTED_ACTION, max_steps=30, p_terminate=0.03)] * 3
    rec = trajcore.RecordVectorEpisodes(
        SyncVectorEnv(fns, autoreset_mode=AutoresetMode.NEXT_STEP),
        path,
        {"kind": "rollover"},
        max_shard_bytes=25_000,
        chunk_bytes=4_000,
        flush_interval=0.05,
        episode_metadata=lambda e: {"ret": e["episode_return"]},
    )
    rec.action_space.seed(5)
    rec.reset(seed=5)
    for t in range(1200):
        if t % 3:
            rec.record(logp=np.full(3, -0.25 * t, dtype=np.float32))
        rec.step(rec.action_space.sample())
    rec.close()


@pytest.fixture(scope="module")
def rollover(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rollover") / "ds"
    record_rollover(path)
    return path


def test_the_rollover_dataset_has_episodes_across_shards(rollover: Path) -> None:
    with trajcore.open(rollover) as ds:
        assert len(ds.shards) >= 5
        parts = 0
        for shard in ds.shards:
            with trajcore.open(shard) as alone:
                parts += sum(ep.is_part for ep in alone.episodes)
        assert parts >= 10  # so the test below reads episodes that no single shard holds whole


# --- transitions -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cartpole", "nested", "vector"])
def test_transitions_equal_the_reader(recorded: Any, name: str) -> None:
    path = recorded(name)
    with trajcore.open(path) as ds:
        assert_transitions(numpy_rows(trajcore.ray.read_transitions(path)), ds)


def test_transitions_across_rollovers_equal_the_reader_whatever_the_tasks(rollover: Path) -> None:
    with trajcore.open(rollover) as ds:
        for blocks in (None, 3, 40):
            rows = numpy_rows(trajcore.ray.read_transitions(rollover, override_num_blocks=blocks))
            assert_transitions(rows, ds)


def test_read_tasks_cover_every_episode_once_one_shard_each(rollover: Path) -> None:
    source = trajcore.ray.TrajcoreDatasource(rollover)
    with trajcore.open(rollover) as ds:
        for parallelism in (1, 7, 1000):
            tasks = source.get_read_tasks(parallelism)
            assert len(tasks) >= len(ds.shards)
            assert sum(t.metadata.num_rows for t in tasks) == ds.num_steps
            assert all(len(t.metadata.input_files) == 1 for t in tasks)
        shards = {os.path.basename(t.metadata.input_files[0]) for t in source.get_read_tasks(1)}
        assert shards == {os.path.basename(s) for s in ds.shards}


def test_columns_select_leaves(recorded: Any) -> None:
    path = recorded("nested")
    got = trajcore.ray.read_transitions(path, columns=["obs/pos", "action", "info/nested"]).take(3)
    assert set(got[0]) == {
        "episode",
        "env_index",
        "step",
        "obs/pos",
        "action/0",
        "action/1",
        "info/nested/a",
        "info/nested/b",
        "mask/info/nested/a",
        "mask/info/nested/b",
    }
    with pytest.raises(trajcore.InvalidArgumentError, match="names no value"):
        trajcore.ray.read_transitions(path, columns=["obs/nope"])


def test_a_selection_reads_only_its_episodes(recorded: Any) -> None:
    with trajcore.open(recorded("vector")) as ds:
        chosen = ds.select(complete=True, env_index=1)
        rows = trajcore.ray.read_transitions(chosen, columns=["reward"]).take_all()
        assert sorted({r["episode"] for r in rows}) == chosen.indices
        assert len(rows) == chosen.num_steps


# --- episodes --------------------------------------------------------------------------------


def assert_episodes(rows: list[dict[str, Any]], ds: trajcore.Dataset) -> None:
    rows = sorted(rows, key=lambda r: r["episode"])
    assert [r["episode"] for r in rows] == list(range(ds.num_episodes))
    summaries, metrics = ds.summaries(), ds.metrics()
    assert metrics  # the datasets read here have infos and custom data
    for got, ep in zip(rows, ds.episodes, strict=True):
        where = f"episode {ep.index}"
        for field in ("recording", "env_index", "episode_id", "length", "episode_return", "complete", "terminated"):
            assert got[field] == summaries[field][ep.index], f"{where} {field}"
        assert (got["continued"], got["continues"]) == (ep.continued, ep.continues)
        assert json.loads(got["metadata"]) == ep.metadata, where
        for name, stats in metrics.items():
            for stat, values in stats.items():
                np.testing.assert_equal(got[f"metrics/{name}/{stat}"], values[ep.index], err_msg=f"{where} {name}")
        # Episodes have no per-step flag columns: the flags are False but at the last step,
        # where they are the summary's.
        last = np.arange(ep.length) == ep.length - 1
        assert ep.terminations.tolist() == (last & got["terminated"]).tolist(), where
        assert ep.truncations.tolist() == (last & got["truncated"]).tolist(), where
        obs: dict[str, Any] = {}
        leaves("obs", ep.observations, obs)
        actions: dict[str, Any] = {}
        leaves("action", ep.actions, actions)
        for name, want in {**obs, **actions, "reward": ep.rewards}.items():
            if isinstance(want, list):  # Text: a list of str
                assert list(got[name]) == want, f"{where} {name}"
            else:
                assert_value(got[name], want, f"{where} {name}")
        for group, values, masks in (("info", ep.infos, ep.info_masks), ("data", ep.data, ep.data_masks)):
            flat_masks: dict[str, Any] = {}
            for k, v in masks.items():
                leaves(f"{group}/{escape_key(k)}", v, flat_masks)
            flat_values: dict[str, Any] = {}
            for k in masks:
                leaves(f"{group}/{escape_key(k)}", values[k], flat_values)
            for name, mask in flat_masks.items():
                assert list(got["mask/" + name]) == list(mask), f"{where} mask/{name}"
                want = flat_values[name]
                if isinstance(want, list):
                    assert list(got[name]) == want, f"{where} {name}"
                else:
                    assert_value(got[name], want, f"{where} {name}")


@pytest.mark.parametrize("name", ["nested", "vector"])
def test_episodes_equal_the_reader(recorded: Any, name: str) -> None:
    path = recorded(name)
    with trajcore.open(path) as ds:
        assert_episodes(numpy_rows(trajcore.ray.read_episodes(path)), ds)


def test_episodes_across_rollovers_are_whole(rollover: Path) -> None:
    with trajcore.open(rollover) as ds:
        rows = numpy_rows(trajcore.ray.read_episodes(rollover, override_num_blocks=30))
        assert not any(r["continued"] or r["continues"] for r in rows)
        assert_episodes(rows, ds)


# --- what a pipeline does with it ------------------------------------------------------------


def test_ray_data_operations(rollover: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    import torch

    with trajcore.open(rollover) as ds:
        want = {(s["episode"], s["step"]): s for s in steps(ds)}
    data = trajcore.ray.read_transitions(rollover)

    seen = 0
    for batch in data.iter_batches(batch_size=64, batch_format="numpy"):
        assert batch["obs/pos"].dtype == np.float32 and batch["obs/pos"].shape[1:] == (2,)
        assert batch["obs/grid"].shape[1:] == (2, 3) and batch["obs/grid"].dtype == np.uint8
        for i in range(len(batch["step"])):
            s = want[(int(batch["episode"][i]), int(batch["step"][i]))]
            np.testing.assert_array_equal(batch["next_obs/grid"][i], s["next_obs"]["grid"])
        seen += len(batch["step"])
    assert seen == len(want)

    torch_batch = next(iter(data.select_columns(["obs/pos", "action/0", "reward"]).iter_torch_batches(batch_size=32)))
    assert torch_batch["obs/pos"].dtype == torch.float32 and tuple(torch_batch["obs/pos"].shape) == (32, 2)
    assert torch_batch["action/0"].dtype == torch.int64

    shuffled = data.random_shuffle(seed=1).take_all()
    assert sorted((r["episode"], r["step"]) for r in shuffled) == sorted(want)
    assert [(r["episode"], r["step"]) for r in shuffled] != sorted(want)

    returns = (
        data.map_batches(lambda b: {"episode": b["episode"], "reward": b["reward"]}).groupby("episode").sum("reward")
    )
    with trajcore.open(rollover) as ds:
        for r in returns.take_all():
            # Ray sums in its own order: equal up to rounding (absolute, for returns near 0).
            want_return = ds.episodes[int(r["episode"])].episode_return
            assert r["sum(reward)"] == pytest.approx(want_return, rel=1e-12, abs=1e-12)

    data.write_parquet(str(tmp_path / "pq"))
    table = pq.read_table(str(tmp_path / "pq"))
    assert table.num_rows == len(want)
    got = sorted(zip(table["episode"].to_pylist(), table["step"].to_pylist(), table["reward"].to_pylist(), strict=True))
    assert got == sorted((e, t, want[(e, t)]["reward"]) for e, t in want)


# --- errors ----------------------------------------------------------------------------------


def test_bad_input_is_refused_with_trajcore_errors(tmp_path: Path, recorded: Any) -> None:
    with pytest.raises(trajcore.TrajcoreFileNotFoundError):
        trajcore.ray.read_transitions(tmp_path / "missing")
    with pytest.raises(trajcore.InvalidArgumentError, match="kind"):
        trajcore.ray.TrajcoreDatasource(recorded("cartpole"), kind="steps")  # type: ignore[arg-type]


def test_a_dataset_changed_after_planning_fails_clearly(rollover: Path, tmp_path: Path) -> None:
    path = tmp_path / "ds"
    shutil.copytree(rollover, path)
    data = trajcore.ray.read_transitions(path)
    with trajcore.open(path) as ds:
        os.remove(ds.shards[-1])
    with pytest.raises(trajcore.TrajcoreIOError, match="changed since"):
        data.take_all()


def test_reads_of_unchanged_files_share_what_workers_opened_and_a_change_opens_again(
    rollover: Path, tmp_path: Path
) -> None:
    """The token naming a read's files (workers keep the dataset they opened for it) stays while
    the files do and changes with any of them, so a read after more was recorded reads it all."""
    path = tmp_path / "ds"
    shutil.copytree(rollover, path)
    with trajcore.open(path) as ds:
        shards, before = list(ds.shards), ds.num_steps
    token = files_token(shards)
    assert files_token(shards) == token

    def steps_read() -> int:
        data = trajcore.ray.read_transitions(path, columns=["reward"])
        return sum(len(b["step"]) for b in data.iter_batches(batch_size=4096, batch_format="numpy"))

    assert steps_read() == before
    record_rollover(path)  # a second recording in the same directory: more shards
    with trajcore.open(path) as ds:
        assert files_token(ds.shards) != token
        after = ds.num_steps
    assert after > before
    assert steps_read() == after
    st = os.stat(shards[0])
    os.utime(shards[0], ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert files_token(shards) != token, "a file modified since changes the token"
    assert files_token([*shards[:-1], str(tmp_path / "gone.trj")]) != token


def test_the_driver_plans_a_read_of_unchanged_files_once(rollover: Path, tmp_path: Path) -> None:
    """Opening lists every episode: a second read of the same files (an epoch loop) reuses the
    plan, another selection of columns or any change to a file plans again."""
    path = tmp_path / "ds"
    shutil.copytree(rollover, path)
    first = trajcore.ray.TrajcoreDatasource(path)
    assert trajcore.ray.TrajcoreDatasource(path)._planned is first._planned
    assert trajcore.ray.TrajcoreDatasource(path, columns=["reward"])._planned is not first._planned
    shard = sorted(path.glob("*.trj"))[0]
    st = os.stat(shard)
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    again = trajcore.ray.TrajcoreDatasource(path)
    assert again._planned is not first._planned and again._spec.token != first._spec.token
    with trajcore.open(path) as ds:
        assert_transitions(numpy_rows(trajcore.ray.read_transitions(path)), ds)


def test_locate_and_plan_are_plain_logic() -> None:
    keys = [EpisodeKey(i, f"s{i // 3}", i, 0, n) for i, n in enumerate([5, 1, 7, 2, 2, 2, 9])]
    tasks = plan_tasks(keys, parallelism=1, max_steps=8)
    assert [(t.shard, [e.index for e in t.episodes]) for t in tasks] == [
        ("s0", [0, 1]),
        ("s0", [2]),
        ("s1", [3, 4, 5]),
        ("s2", [6]),  # one episode longer than a task's steps is one task
    ]
    assert [len(t.episodes) for t in plan_tasks(keys, parallelism=100, max_steps=8)] == [1] * 7
    moved = shard_index(EpisodeKey(i + 10, "s1", k.episode_id, 0, k.length) for i, k in enumerate(keys[3:6], 3))
    assert locate(TaskPlan("s1", tuple(keys[3:6])), moved, "ds") == [13, 14, 15]
    grown = {**moved, (3, 0): EpisodeKey(13, "s1", 3, 0, 20)}
    with pytest.raises(trajcore.TrajcoreIOError, match="now has 20 steps"):
        locate(TaskPlan("s1", tuple(keys[3:6])), grown, "ds")
    with pytest.raises(trajcore.TrajcoreIOError, match="no longer listed"):
        locate(TaskPlan("s1", tuple(keys[3:6])), {}, "ds")


def test_a_shards_steps_are_shared_evenly_among_its_tasks() -> None:
    """No task of a few steps left over: each Ray task costs scheduling, and on a small
    cluster Ray Data may run them one after the other."""
    keys = [EpisodeKey(i, "s0", i, 0, 4) for i in range(10)]
    # 40 steps at most 14 a task: 3 tasks of 12, 16 and 12 steps (not 12, 12, 12 and 4).
    assert [t.steps for t in plan_tasks(keys, parallelism=3, max_steps=100)] == [12, 16, 12]
    assert [t.steps for t in plan_tasks(keys, parallelism=0, max_steps=14)] == [12, 16, 12]
    assert [t.steps for t in plan_tasks(keys, parallelism=2, max_steps=100)] == [20, 20]
    assert plan_tasks([], parallelism=2, max_steps=100) == []


def test_import_trajcore_does_not_import_ray() -> None:
    code = "import sys, trajcore; print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_each_read_task_gives_its_episodes_whole_in_dataset_order(rollover: Path) -> None:
    """Every task's rows, as its blocks come (no Ray scheduling in between), are its episodes'
    rows from `trajcore.open`, each episode whole and the episodes in dataset order, however
    many tasks share the shards (episodes run over rollovers here)."""
    from ray.data.block import BlockAccessor

    source = trajcore.ray.TrajcoreDatasource(rollover)
    with trajcore.open(rollover) as ds:
        lengths = ds.summaries()["length"]
        for parallelism in (1, 7, 1000):
            rows: list[dict[str, Any]] = []
            for task in source.get_read_tasks(parallelism):
                mine: list[dict[str, Any]] = []
                for block in task():
                    batch = BlockAccessor.for_block(block).to_batch_format("numpy")
                    mine += [{k: v[i] for k, v in batch.items()} for i in range(len(batch["step"]))]
                episodes = list(dict.fromkeys(int(r["episode"]) for r in mine))
                assert episodes == sorted(episodes)
                want = [(e, t) for e in episodes for t in range(int(lengths[e]))]
                assert [(int(r["episode"]), int(r["step"])) for r in mine] == want
                rows += mine
            assert_transitions(rows, ds)


def test_episode_keys_count_occurrences_of_an_id_per_shard() -> None:
    from trajcore.ray._plan import episode_keys

    summaries = {
        "shard": np.array([0, 1, 0, 0, 1, 0], dtype=np.uint32),
        "episode_id": np.array([7, 7, 7, 2, 7, 7], dtype=np.uint64),
        "length": np.array([3, 1, 4, 1, 5, 9], dtype=np.uint64),
    }
    names = ["s0", "s1"]
    want = [("s0", 7, 0), ("s1", 7, 0), ("s0", 7, 1), ("s0", 2, 0), ("s1", 7, 1), ("s0", 7, 2)]
    keys = episode_keys(names, summaries)
    assert [(k.shard, k.episode_id, k.occurrence) for k in keys] == want
    assert [(k.index, k.length) for k in keys] == [(0, 3), (1, 1), (2, 4), (3, 1), (4, 5), (5, 9)]
    among = episode_keys(names, summaries, np.array([1, 4]))
    assert [(k.index, k.shard, k.occurrence) for k in among] == [(1, "s1", 0), (4, "s1", 1)]
    assert episode_keys(names, {k: v[:0] for k, v in summaries.items()}) == []
