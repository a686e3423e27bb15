"""The independent decoder (tests/format_decoder.py, written from docs/FORMAT.md) against files
the Rust writer wrote: every episode and column value-identical to trajcore's reader, every
checksum valid, the index chain equal to what hopping the records finds, chunk data aligned.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import struct
import warnings
from pathlib import Path
from typing import Any

import format_decoder as fd
import gymnasium as gym
import numpy as np
import trajcore
from trajcore import _core


class InfoWrapper(gym.Wrapper[Any, Any, Any, Any]):
    """Adds infos of every kind the recorder takes: an int every row, a string on some rows, a
    nested dict, and a key that first appears late in the run (a column added mid-recording)."""

    def __init__(self, env: gym.Env[Any, Any], late_after: int = 150) -> None:
        super().__init__(env)
        self.t = 0
        self.late_after = late_after

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        info = dict(info)
        info["count"] = self.t
        if self.t % 3:
            info["label"] = "é" * (self.t % 5) + f"s{self.t}"
        info["nested"] = {"a": np.array([self.t, -self.t], dtype=np.int16), "b/c": self.t * 0.5}
        if self.t > self.late_after:
            info["late"] = float(self.t) + 0.25
            info["late_text"] = "L" * (self.t % 4)
        self.t += 1
        return info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return obs, self._info(info)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._info(info)


def run_single(path: Path, steps: int, **options: Any) -> None:
    env = trajcore.RecordEpisodes(
        InfoWrapper(gym.make("CartPole-v1")),
        path,
        metadata={"agent": "random", "seed": 0},
        episode_metadata=lambda e: {"len": int(e["length"])},
        step_data=lambda a, o, r, te, tr, i: {"score": float(r) * 2, "tag": "t" if te else "f"},
        **options,
    )
    env.action_space.seed(0)
    env.reset(seed=0)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()  # the last episode is still running: written incomplete


def compare_with_trajcore(path: Path, *, use_index: bool = True) -> fd.DecodedDataset:
    """Every episode, summary, metadata and column read by both readers must be identical."""
    dec = fd.DecodedDataset(path, use_index=use_index)
    ds = _core.Dataset(str(path))
    assert ds.report("listing")["problems"] == []
    assert ds.num_episodes == len(dec.episodes) > 0
    summaries = ds.summaries()
    rec_ids: dict[int, bytes] = {}
    for i, e in enumerate(dec.episodes):
        f = e.fixed
        got = (f.lane, f.length, f.episode_return, f.complete, f.terminated, f.truncated)
        want = tuple(
            summaries[k][i].item()
            for k in ("env_index", "length", "episode_return", "complete", "terminated", "truncated")
        )
        assert got == want, f"episode {i}"
        assert (f.start_ns, f.end_ns, f.episode_id) == tuple(
            summaries[k][i].item() for k in ("start_ns", "end_ns", "episode_id")
        )
        assert e.metadata == json.loads(ds.episode_metadata_json(i))
        rec = int(summaries["recording"][i])
        assert rec_ids.setdefault(rec, e.recording) == e.recording
    assert sum(e.fixed.length for e in dec.episodes) == ds.all_episodes().num_steps
    for rec, rid in rec_ids.items():
        core_columns = ds.report("columns", rec)
        assert [c["name"] for c in core_columns] == dec.column_names(rid)
        for c in core_columns:
            spec = dec.spec(rid, c["name"])
            for key in ("id", "dtype", "shape", "timeline"):
                assert spec[key] == c[key]
            assert spec.get("mask") == c.get("mask") and spec.get("mask_of") == c.get("mask_of")
        assert ds.report("meta", rec) == dec.recordings[rid]["meta"]
    for i, e in enumerate(dec.episodes):
        for name in dec.column_names(e.recording):
            mine = dec.read(i, name)
            theirs = ds.read_column(i, name)
            if isinstance(mine, list):
                assert mine == list(theirs), f"episode {i} column {name}"
            else:
                theirs = np.asarray(theirs)
                assert mine.dtype == theirs.dtype and mine.shape == theirs.shape, f"episode {i} column {name}"
                assert mine.tobytes() == theirs.tobytes(), f"episode {i} column {name}"
    return dec


def check_structure(shard: fd.DecodedShard) -> None:
    """Checksums, framing, alignment and the index chain of one closed shard."""
    buf = shard.buf
    assert shard.stopped_at is None, "hopping reaches the End record"
    recs = shard.records
    assert recs and recs[-1].kind == fd.KIND_END and recs[-1].next == len(buf)
    assert [r.kind for r in recs].count(fd.KIND_END) == 1
    assert recs[0].offset == fd.HEADER_LEN and recs[0].kind == fd.KIND_META
    # The writer may pack Chunks tables and Index references (and says so in the file header).
    assert shard.header.required_flags == fd.FILE_PACKED_TABLES
    for r in recs:
        packable = r.kind in (fd.KIND_CHUNKS, fd.KIND_INDEX)
        allowed = fd.RECORD_PACKED_TABLE if packable else 0
        assert r.offset % 8 == 0 and r.payload_ok and r.padding_zero and r.required_flags & ~allowed == 0, r
        assert r.compat_flags == 0, r
    # Every shard describes itself: Meta, then the Column records of every known column.
    first_columns = [r for r in recs[1:] if r.kind == fd.KIND_COLUMN]
    assert first_columns and recs[1].kind == fd.KIND_COLUMN

    chain = fd.index_chain(buf)
    assert chain is not None
    index_offsets = [r.offset for r in recs if r.kind == fd.KIND_INDEX]
    assert [d.offset for d in chain] == index_offsets
    (end_payload,) = struct.unpack("<Q", fd.payload(buf, recs[-1]))
    assert end_payload == index_offsets[-1]

    # Each delta lists exactly the records between the previous Index (or the header) and itself.
    prev = fd.HEADER_LEN
    for delta in chain:
        assert delta.prev_index == (fd.NO_PREVIOUS if prev == fd.HEADER_LEN else prev)
        between = [r for r in recs if prev <= r.offset < delta.offset and r.kind != fd.KIND_INDEX]
        others = (fd.KIND_META, fd.KIND_COLUMN, fd.KIND_TIMELOG)
        assert delta.other_records == [(r.kind, r.offset) for r in between if r.kind in others]
        hopped_chunks = [ref for r in between if r.kind == fd.KIND_CHUNKS for ref in fd.decode_chunk_refs(buf, r)]
        assert delta.chunks == hopped_chunks
        assert delta.episode_records == [r.offset for r in between if r.kind == fd.KIND_EPISODE]
        prev = delta.offset

    # Chunk data: after its record's table, inside its payload, in table order; raw data
    # 64-byte aligned in the file (viewable in place), encoded data 8-byte aligned.
    for r in recs:
        if r.kind != fd.KIND_CHUNKS:
            continue
        refs = fd.decode_chunk_refs(buf, r)
        data_end = r.payload_start + r.payload_len
        if r.required_flags & fd.RECORD_PACKED_TABLE:
            # Data after the 16-byte header, then the packed table: packed only when smaller.
            (table_len,) = struct.unpack_from("<Q", buf, r.payload_start + 8)
            assert 16 + table_len < 8 + 56 * len(refs)
            end, data_end = r.payload_start + 16, data_end - table_len
        else:
            end = r.payload_start + 8 + 56 * len(refs)
        for ref in refs:
            align = fd.DATA_ALIGN if ref.codec == 0 else 8
            assert ref.data_offset % align == 0, ref
            assert end <= ref.data_offset < end + align, "placed at the first aligned offset"
            assert not any(buf[end : ref.data_offset]), "gaps are zero"
            end = ref.data_offset + ref.stored_len
            assert ref.n_rows >= 1
            if ref.codec == 0:
                assert ref.stored_len == ref.raw_len
        assert end == data_end, "the payload ends with the last chunk's data (and then a packed table)"

    # The recovery path decodes the same shard to the same records.
    recovered = fd.open_shard(shard.path, use_index=False)
    assert recovered.columns == shard.columns and recovered.meta == shard.meta
    assert sorted(recovered.chunks, key=lambda c: c.data_offset) == sorted(shard.chunks, key=lambda c: c.data_offset)
    assert [e for e, _ in recovered.episodes] == [e for e, _ in shard.episodes]


def test_crc32c_check_value() -> None:
    assert fd.crc32c(b"123456789") == 0xE3069283
    assert fd.crc32c(b"") == 0
    assert fd.crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4 test vector


def test_single_env_cartpole(tmp_path: Path) -> None:
    path = tmp_path / "single"
    codecs = {
        "obs": {"delta": True, "zstd_level": 3},
        "info": {"delta": True, "zstd_level": 3},
        "action": {"zstd_level": None},
    }
    run_single(path, 600, chunk_bytes=512, codecs=codecs)
    dec = compare_with_trajcore(path)
    assert len(dec.shards) == 1
    shard = dec.shards[0]
    check_structure(shard)
    assert shard.header.version_major == 1 and shard.header.shard_seq == 0
    assert shard.header.recording_id == dec.episodes[0].recording
    assert shard.header.created_ns > 0

    # What the recording was meant to exercise is really there.
    rid = dec.episodes[0].recording
    meta = dec.recordings[rid]["meta"]
    assert meta["metadata"] == {"agent": "random", "seed": 0}
    assert meta["num_envs"] == 1 and meta["autoreset_mode"] == "disabled" and meta["batched"] is False
    assert meta["layout"] == {"observation": {"leaf": "obs"}, "action": {"leaf": "action"}}
    names = dec.column_names(rid)
    for name in ("obs", "action", "reward", "terminated", "truncated", "info/count", "info/_count",
                 "info/label", "info/nested/a", "info/nested/b%2Fc", "info/nested/_b%2Fc", "info/late",
                 "info/late_text", "data/score", "data/tag"):  # fmt: skip
        assert name in names, name
    assert dec.spec(rid, "info/label")["dtype"] == "str"
    codecs = {ref.codec for ref in shard.chunks}
    assert {0, 0x01, 0x0102} <= codecs, codecs
    assert [e.fixed.episode_id for e in dec.episodes] == list(range(len(dec.episodes)))
    assert not dec.episodes[-1].fixed.complete and all(e.fixed.complete for e in dec.episodes[:-1])

    # The late column: zeros and a false mask on rows before it existed.
    late_ep = next(i for i, e in enumerate(dec.episodes) if dec.read(i, "info/_late").any())
    mask = dec.read(late_ep, "info/_late")
    values = dec.read(late_ep, "info/late")
    assert late_ep > 0 and not dec.read(0, "info/_late").any()
    assert (values[~mask] == 0).all() and (values[mask] > 150).all()
    assert dec.read(0, "info/late_text") == [""] * (dec.episodes[0].fixed.length + 1)
    # Observations and rewards line up: T+1 obs rows, T step rows.
    e0 = dec.episodes[0].fixed
    assert dec.read(0, "obs").shape == (e0.length + 1, 4)
    assert dec.read(0, "reward").tolist() == [1.0] * e0.length
    assert dec.read(0, "info/count").tolist() == list(range(e0.length + 1))


def test_vector_recordings(tmp_path: Path) -> None:
    for mode in (gym.vector.AutoresetMode.NEXT_STEP, gym.vector.AutoresetMode.SAME_STEP):
        path = tmp_path / mode.value
        venv = gym.make_vec(
            "CartPole-v1", num_envs=3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}
        )
        env = trajcore.RecordVectorEpisodes(venv, path, chunk_bytes=1024)
        env.action_space.seed(1)
        env.reset(seed=1)
        for _ in range(300):
            env.step(env.action_space.sample())
        env.close()
        dec = compare_with_trajcore(path)
        for shard in dec.shards:
            check_structure(shard)
        lanes = {e.fixed.lane for e in dec.episodes}
        assert lanes == {0, 1, 2}
        # Per lane, episodes occupy consecutive row ranges in the order they ran.
        for lane in lanes:
            eps = sorted((e.fixed for e in dec.episodes if e.fixed.lane == lane), key=lambda f: f.obs_first_row)
            for a, b in itertools.pairwise(eps):
                assert b.obs_first_row == a.obs_first_row + a.length + 1
                assert b.step_first_row == a.step_first_row + a.length
        # CartPole rewards are 1 a step, so each return is the length.
        assert all(e.fixed.episode_return == e.fixed.length for e in dec.episodes)


def test_many_shards(tmp_path: Path) -> None:
    path = tmp_path / "sharded"
    run_single(path, 1500, max_shard_bytes=4096, chunk_bytes=256, flush_interval=0.01)
    dec = compare_with_trajcore(path)
    assert len(dec.shards) >= 3
    rids = {s.header.recording_id for s in dec.shards}
    assert len(rids) == 1
    assert sorted(s.header.shard_seq for s in dec.shards) == list(range(len(dec.shards)))
    # File names sort by shard_seq; rows run on across shards.
    assert [s.header.shard_seq for s in dec.shards] == list(range(len(dec.shards)))
    for s in dec.shards:
        check_structure(s)
        name = os.path.basename(s.path)
        assert name.endswith(f"-{s.header.recording_id[:4].hex()}-{s.header.shard_seq:05d}.trj"), name
    # Some episode has rows in a shard before the one holding its Episode record.
    spans = 0
    for e in dec.episodes:
        first, end = e.fixed.obs_first_row, e.fixed.obs_first_row + e.fixed.length + 1
        shards = {
            shard
            for ref, shard in dec.chunks[(e.recording, e.fixed.lane, 0)]
            if ref.first_row < end and ref.end_row > first
        }
        spans += min(shards) < e.shard
    assert spans > 0


def test_unclosed_file_reads_by_hopping(tmp_path: Path) -> None:
    """A file copied after a flush but before close: no End record; the recovery path of the
    decoder and trajcore's reader agree, and every flushed episode is there (the running one as
    far as the flush took it)."""
    src = tmp_path / "live"
    env = trajcore.RecordEpisodes(InfoWrapper(gym.make("CartPole-v1"), late_after=40), src, chunk_bytes=512)
    env.action_space.seed(2)
    env.reset(seed=2)
    ended = 0
    for _ in range(400):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            ended += 1
            env.reset()
    env.flush()
    copy = tmp_path / "copy"
    copy.mkdir()
    for p in env.shard_paths:
        shutil.copy(p, copy / os.path.basename(p))
    env.close()

    [shard_path] = list(copy.iterdir())
    shard = fd.open_shard(shard_path)
    assert shard.chain is None and shard.stopped_at is None
    assert all(r.payload_ok for r in shard.records)
    assert fd.KIND_END not in {r.kind for r in shard.records}
    dec = compare_with_trajcore(copy)
    # The flush listed the episode still running too: a part that continues, last.
    whole, running = dec.episodes[:ended], dec.episodes[ended:]
    assert all(e.fixed.complete for e in whole) and len(running) <= 1
    assert all(e.fixed.continues and not e.fixed.complete for e in running)

    # Cut inside the last record: the hop stops there, and the decoder keeps what precedes it.
    buf = shard_path.read_bytes()
    last = shard.records[-1]
    cut = tmp_path / "cut.trj"
    cut.write_bytes(buf[: last.offset + 30])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cut_shard = fd.open_shard(cut)
    assert cut_shard.stopped_at == last.offset
    assert len(cut_shard.records) == len(shard.records) - 1
