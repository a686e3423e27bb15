"""Files with valid checksums but hostile or impossible contents raise `CorruptFileError`
naming the file, never another exception type or a huge allocation; NaN returns have defined
behaviour."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from format_decoder import KIND_COLUMN, KIND_META, crc32c, hop
from gymnasium import spaces
from helpers import SpaceEnv


def _record(path: Path, **env_kwargs: Any) -> Path:
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=5, p_terminate=0, **env_kwargs), path)
    env.reset(seed=0)
    for _ in range(12):
        _, _, te, tr, _ = env.step(env.action_space.sample())
        if te or tr:
            env.reset()
    env.close()
    (shard,) = path.glob("*.trj")
    return shard


def _rewrite_json(shard: Path, kind: int, change: Callable[[Any], bool]) -> None:
    """Edits the JSON of each record of `kind` (in place, padded with spaces to its length) and
    reseals its checksums: the damage has to be found by what the reader makes of it."""
    buf = bytearray(shard.read_bytes())
    records, _ = hop(bytes(buf))
    done = 0
    for r in records:
        if r.kind != kind:
            continue
        start = r.payload_start
        value = json.loads(buf[start : start + r.payload_len])
        if not change(value):
            continue
        text = json.dumps(value, separators=(",", ":")).encode()
        assert len(text) <= r.payload_len, "the edit must not lengthen the record"
        buf[start : start + r.payload_len] = text.ljust(r.payload_len)
        struct.pack_into("<I", buf, r.offset + 4, crc32c(bytes(buf[start : start + r.payload_len])))
        struct.pack_into("<I", buf, r.offset + 20, crc32c(bytes(buf[r.offset : r.offset + 20])))
        done += 1
    assert done, "nothing was edited"
    shard.write_bytes(bytes(buf))


def test_a_malformed_layout(tmp_path: Path) -> None:
    shard = _record(tmp_path / "d")

    def bad_layout(meta: dict[str, Any]) -> bool:
        meta["layout"]["observation"] = {"leaf": "nope"}
        meta["layout"]["action"] = {"tuple": [{"dict": [["x"]]}]}
        meta.pop("trajcore_version")  # room for the edit in the record
        return True

    _rewrite_json(shard, KIND_META, bad_layout)
    ds = trajcore.open(shard)
    ep = ds.episodes[0]
    with pytest.raises(trajcore.CorruptFileError, match=r"observation layout .* invalid .*'nope' names no column"):
        _ = ep.observations
    with pytest.raises(trajcore.CorruptFileError, match=r"action layout .* invalid"):
        _ = ep.actions
    assert ep.rewards.shape == (5,), "the rest reads"


def test_a_huge_box_space_is_refused_before_allocating(tmp_path: Path) -> None:
    shard = _record(tmp_path / "d")

    def huge(meta: dict[str, Any]) -> bool:
        meta["user"]["observation_space"]["shape"] = [1 << 40]
        meta.pop("trajcore_version")  # room for the edit in the record
        return True

    _rewrite_json(shard, KIND_META, huge)
    # In a child with a memory cap: an attempt to allocate would die, not raise.
    code = f"""
import resource, trajcore
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
ds = trajcore.open({str(shard)!r})
try:
    ds.observation_space
except trajcore.CorruptFileError as e:
    print("REFUSED", e)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "REFUSED" in out.stdout and "1099511627776" in out.stdout, out.stdout + out.stderr


def test_a_space_that_contradicts_the_columns(tmp_path: Path) -> None:
    shard = _record(tmp_path / "d")

    def other(meta: dict[str, Any]) -> bool:
        meta["user"]["observation_space"]["shape"] = [7]
        return True

    _rewrite_json(shard, KIND_META, other)
    with pytest.raises(trajcore.CorruptFileError, match="does not match the column"):
        _ = trajcore.open(shard).observation_space


def test_recover_leaves_out_a_recording_whose_spaces_contradict_its_columns(tmp_path: Path) -> None:
    """`verify` reports the contradiction (see test_hostile_columns.py); `recover` does not copy it
    on: that recording is left out and named, the dataset's other recording is copied whole, and
    what it writes verifies intact."""
    shard = _record(tmp_path / "d")

    def other(meta: dict[str, Any]) -> bool:
        meta["user"]["observation_space"]["shape"] = [7]
        return True

    _rewrite_json(shard, KIND_META, other)
    with trajcore.open(shard) as ds:
        hostile = ds.num_episodes
    assert hostile > 0
    (tmp_path / "intact").mkdir()
    (kept,) = _record(tmp_path / "intact").parent.glob("*.trj")
    kept.rename(shard.parent / "zz-intact.trj")  # the second recording of the dataset
    with trajcore.open(tmp_path / "d") as ds:
        intact = ds.num_episodes - hostile
    assert not trajcore.verify(tmp_path / "d").intact
    out = trajcore.recover(tmp_path / "d", tmp_path / "recovered")
    ((file, offset, why),) = out["recordings_lost"]
    assert (file, offset) == (str(shard), 0) and "does not match the column" in why
    assert (out["whole"], out["cut"], out["lost"]) == (intact, 0, hostile)
    assert trajcore.verify(tmp_path / "recovered").intact


def test_a_mask_on_the_wrong_timeline(tmp_path: Path) -> None:
    shard = _record(tmp_path / "d")

    def wrong(spec: dict[str, Any]) -> bool:
        if spec["name"] == "info/_step":
            spec["timeline"] = "step"
            spec["codec"] = {}  # room for the edit in the record
            return True
        return False

    _rewrite_json(shard, KIND_COLUMN, wrong)
    with pytest.warns(trajcore.TrajcoreWarning, match="not a mask"):
        ds = trajcore.open(shard)
    ep = ds.episodes[0]
    with pytest.raises(trajcore.CorruptFileError, match=r"info/_?step.*unreadable"):
        _ = ep.infos
    with pytest.raises(trajcore.CorruptFileError, match="unreadable"):
        ds.sample_transitions(4, seed=0, keys=["info/step"])
    assert ep.observations.shape == (6, 3), "the rest reads"
    with pytest.raises(trajcore.CorruptFileError):
        trajcore.open(shard, strict=True)


def test_nan_returns(tmp_path: Path) -> None:
    class NanRewards(SpaceEnv):
        def step(self, action: Any) -> Any:
            obs, r, te, tr, info = super().step(action)
            return obs, (math.nan if self.t == 2 and self.np_random.random() < 0.5 else r), te, tr, info

    box = spaces.Box(-1, 1, (2,), np.float32)
    env = trajcore.RecordEpisodes(NanRewards(box, max_steps=4, p_terminate=0), tmp_path / "d")
    env.reset(seed=1)
    for _ in range(60):
        _, _, te, tr, _ = env.step(env.action_space.sample())
        if te or tr:
            env.reset()
    env.close()
    ds = trajcore.open(tmp_path / "d")
    returns = ds.summaries()["episode_return"]
    nan = int(np.isnan(returns).sum())
    assert 0 < nan < len(returns), "some episodes have a NaN return, as the env gave"
    with pytest.warns(trajcore.TrajcoreWarning, match=f"{nan} episode"):
        kept = ds.select(min_return=-1e9)
    assert len(kept) == len(returns) - nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(ds.select(complete=True)) == len(returns)  # no warning without a return bound
    out = subprocess.run(
        [sys.executable, "-m", "trajcore", "info", str(tmp_path / "d"), "--json"], capture_output=True, text=True
    )
    report = json.loads(out.stdout)  # valid JSON: no NaN token
    assert report["return"]["complete"]["nan"] == nan
    ls = subprocess.run(
        [sys.executable, "-m", "trajcore", "ls", str(tmp_path / "d"), "--json"], capture_output=True, text=True
    )
    rows = [json.loads(line) for line in ls.stdout.splitlines()]
    assert sum(r["episode_return"] is None for r in rows) == nan
