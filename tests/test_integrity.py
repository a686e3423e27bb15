"""Damage found by tools, not by training: a flipped byte inside a closed file's chunk data is
found by `trajcore.verify` / ``trajcore verify`` (file, offset, episodes), left out at
``open(verify=True)``, left out of sampling (with a warning, the batch unchanged for a seed) by
lenient reads, and cut away by ``recover``; a damaged shard header skips that shard; a lost
column description is a `CorruptFileError`."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import format_decoder as fd
import gymnasium as gym
import numpy as np
import pytest
import trajcore
from helpers import SpaceEnv, assert_tree_equal


def _record_cartpole(path: Path) -> None:
    # Small chunks: many Chunks records, so one flipped byte damages some episodes, not all.
    envs = gym.make_vec("CartPole-v1", num_envs=8, vectorization_mode="sync")
    with trajcore.RecordVectorEpisodes(envs, path, chunk_bytes=4096) as rec:
        rec.reset(seed=0)
        rec.action_space.seed(0)
        for _ in range(3000):
            rec.step(rec.action_space.sample())


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("integrity") / "clean"
    _record_cartpole(path)
    return path


def _shard(path: Path) -> Path:
    (shard,) = sorted(path.glob("*.trj"))
    return shard


def _flip_chunk_data(shard: Path, which: int) -> tuple[int, int]:
    """Flips a byte inside the data of the first chunk of the `which`-th Chunks record (negative
    from the end); returns the chunk's data offset (where its own checksum places the damage)
    and the flipped byte's."""
    buf = bytearray(shard.read_bytes())
    records = [r for r in fd.hop(bytes(buf))[0] if r.kind == fd.KIND_CHUNKS]
    record = records[which]
    ref = fd.decode_chunk_refs(bytes(buf), record)[0]
    at = ref.data_offset + ref.stored_len // 2
    buf[at] ^= 0x10
    shard.write_bytes(bytes(buf))
    return ref.data_offset, at


@pytest.fixture
def damaged(clean: Path, tmp_path: Path) -> tuple[Path, int, list[int]]:
    """A copy of `clean` with one flipped byte in a chunk mid-file: (path, the chunk's offset,
    the episodes it damages)."""
    path = tmp_path / "damaged"
    shutil.copytree(clean, path)
    offset, _ = _flip_chunk_data(_shard(path), len(fd.hop(_shard(path).read_bytes())[0]) // 2 // 2)
    report = trajcore.verify(path)
    (d,) = report.damage
    assert d.offset == offset
    return path, offset, list(d.episodes)


def _reseal_record(shard: Path, record: fd.Record) -> None:
    """Writes the record's payload checksum (and its header's) for the bytes it holds now: damage
    under a valid record checksum, as a writer bug or a deliberate edit would leave it."""
    buf = bytearray(shard.read_bytes())
    at, start = record.offset, record.payload_start
    buf[at + 4 : at + 8] = fd.crc32c(buf[start : start + record.payload_len]).to_bytes(4, "little")
    buf[at + 20 : at + 24] = fd.crc32c(buf[at : at + 20]).to_bytes(4, "little")
    shard.write_bytes(bytes(buf))


def test_verify_checks_a_chunks_own_checksum_under_a_valid_record_checksum(clean: Path, tmp_path: Path) -> None:
    """Issue 33, point 9: verify checks every checksum there is, so it finds what a read finds."""
    path = tmp_path / "resealed"
    shutil.copytree(clean, path)
    shard = _shard(path)
    records = [r for r in fd.hop(shard.read_bytes())[0] if r.kind == fd.KIND_CHUNKS]
    which = len(records) // 2
    offset, _ = _flip_chunk_data(shard, which)
    _reseal_record(shard, records[which])
    buf = shard.read_bytes()
    assert fd.frame(buf, records[which].offset).payload_ok, "the record's checksum is valid again"
    report = trajcore.verify(path)
    assert not report.intact
    (d,) = report.damage
    assert (Path(d.file), d.offset) == (shard, offset) and "fails its checksum" in d.why
    assert d.episodes
    with trajcore.open(path, strict=True) as ds:
        raising = {}
        for ep in ds.episodes:
            try:
                ep.observations  # noqa: B018
                ep.actions  # noqa: B018
                ep.rewards  # noqa: B018
            except trajcore.CorruptFileError as e:
                raising[ep.index] = str(e)
    assert list(raising) == list(d.episodes)
    assert all("fails its checksum" in why for why in raising.values())


def _same_rows(clean_ds: trajcore.Dataset, batch: dict[str, Any]) -> None:
    """Every row of a transitions batch equals the clean dataset's row at its (episode, step)."""
    want = clean_ds._core.all_episodes().gather((batch["episode_index"], batch["step_index"]))
    assert_tree_equal(batch, want)


def test_verify_names_file_offset_and_episodes(clean: Path, damaged: tuple[Path, int, list[int]]) -> None:
    report = trajcore.verify(clean)
    assert report.intact and report.damage == ()
    assert report.bytes == sum(p.stat().st_size for p in clean.glob("*.trj"))
    assert report.chunks > 50 and report.records > report.chunks // 16
    assert report.mb_per_s > 0
    path, offset, episodes = damaged
    report = trajcore.verify(path)
    assert not report.intact
    (d,) = report.damage
    assert (Path(d.file), d.offset) == (_shard(path), offset)
    assert "checksum" in d.why
    # The episodes named are exactly those with a row in the damaged chunk (it carries its own
    # checksum: the rest of its record is intact), as the independent decoder reads the clean file.
    buf = _shard(path).read_bytes()
    all_refs = [ref for r in fd.hop(buf)[0] if r.kind == fd.KIND_CHUNKS for ref in fd.decode_chunk_refs(buf, r)]
    refs = [ref for ref in all_refs if ref.data_offset == offset]
    assert len(refs) == 1
    decoded = fd.DecodedDataset(clean)
    (columns,) = [r["columns"] for r in decoded.recordings.values()]
    expected = []
    for i, e in enumerate(decoded.episodes):
        f = e.fixed
        for ref in refs:
            obs = columns[ref.column]["timeline"] == "obs"
            first, n = (f.obs_first_row, f.length + 1) if obs else (f.step_first_row, f.length)
            if ref.lane == f.lane and ref.first_row < first + n and first < ref.end_row:
                expected.append(i)
                break
    assert list(d.episodes) == expected
    assert report.damaged_episodes == expected == episodes
    assert 0 < len(expected) < 200


def test_verify_opens_the_dataset_once(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An open lists every episode: the checks and the spaces' check read the same opening.
    import trajcore.read.dataset as dataset_module

    opened: list[str] = []
    real = dataset_module.CoreReader

    def counted(path: str, *args: Any) -> Any:
        opened.append(path)
        return real(path, *args)

    def opened_again(path: str) -> Any:
        raise AssertionError(f"{path} opened again, by the core's verify of a path")

    monkeypatch.setattr(dataset_module, "CoreReader", counted)
    monkeypatch.setattr(trajcore._core, "verify", opened_again)
    report = trajcore.verify(clean)
    assert report.intact and report.chunks > 50
    assert opened == [os.fspath(clean)]


def test_lenient_sampling_leaves_damaged_episodes_out_for_20_of_20_seeds(
    clean: Path, damaged: tuple[Path, int, list[int]]
) -> None:
    path, offset, bad = damaged
    with trajcore.open(clean) as clean_ds, trajcore.open(path, strict=True) as strict:
        failures = 0
        for seed in range(20):
            try:
                strict.sample_transitions(256, seed=seed)
            except trajcore.CorruptFileError:
                failures += 1
        assert failures > 0, "the damage is there for a strict read"
        ds = trajcore.open(path)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batches = [ds.sample_transitions(256, seed=seed) for seed in range(20)]
        for batch in batches:
            assert not set(batch["episode_index"].tolist()) & set(bad), "a row of a damaged episode"
            _same_rows(clean_ds, batch)
        found = [w for w in caught if issubclass(w.category, trajcore.TrajcoreWarning)]
        assert len(found) == 1, [str(w.message) for w in caught]
        message = str(found[0].message)
        assert _shard(path).name in message and f"byte offset {offset}" in message
        assert f"episodes {bad[0]}, {bad[1]}" in message and "left out of sampling" in message
        assert ds.damaged_episodes == bad
        assert ds.problems == [], "opening found nothing"
        # The same seed, the same batch, whatever was read before.
        with trajcore.open(path) as fresh, warnings.catch_warnings():
            warnings.simplefilter("ignore", trajcore.TrajcoreWarning)
            for seed in (13, 4):
                assert_tree_equal(fresh.sample_transitions(256, seed=seed), batches[seed])
        # Sequences, padded or not, and a selection, likewise.
        for pad in (False, True):
            seq = ds.sample_sequences(64, 8, seed=3, pad=pad)
            assert not set(seq["episode_index"].tolist()) & set(bad)
        sel = ds.select(env_index=[int(ds.summaries()["env_index"][bad[0]])])
        picked = sel.sample_transitions(128, seed=1)
        assert not set(picked["episode_index"].tolist()) & set(bad)
        _same_rows(clean_ds, picked)
        ds.close()


def test_batches_by_number_redraw_and_single_steps_raise(clean: Path, damaged: tuple[Path, int, list[int]]) -> None:
    path, offset, bad = damaged
    with trajcore.open(clean) as clean_ds, trajcore.open(path) as ds:
        starts = np.concatenate([[0], np.cumsum(ds.summaries()["length"])])
        in_bad = int(starts[bad[0]])
        with pytest.warns(trajcore.TrajcoreWarning, match="left out of sampling"):
            batch = ds.transitions[np.arange(in_bad - 5, in_bad + 5)]
        assert not set(batch["episode_index"].tolist()) & set(bad)
        _same_rows(clean_ds, batch)
        again = ds.transitions[np.arange(in_bad - 5, in_bad + 5)]
        assert_tree_equal(again, batch)  # redrawn from the numbers: the same rows come back
        # Rows before the damaged episode are the ones asked for.
        assert batch["step_index"][:5].tolist() == ds.transitions[np.arange(in_bad - 5, in_bad)]["step_index"].tolist()
        with pytest.raises(trajcore.CorruptFileError, match=f"offset {offset}"):
            ds.transitions[in_bad]


def test_slices_and_blocks_redraw_like_batches_by_number(clean: Path, damaged: tuple[Path, int, list[int]]) -> None:
    """A bulk read (a slice, a block) over a damaged episode gives what indexing the same step
    numbers gives: its steps redrawn from their numbers, with a warning; strict raises."""
    path, offset, bad = damaged
    with trajcore.open(clean) as clean_ds, trajcore.open(path) as ds, trajcore.open(path) as other:
        starts = np.concatenate([[0], np.cumsum(ds.summaries()["length"])])
        in_bad = int(starts[bad[0]])
        with pytest.warns(trajcore.TrajcoreWarning, match="left out of sampling"):
            sliced = ds.transitions[in_bad - 5 : in_bad + 5]
        with pytest.warns(trajcore.TrajcoreWarning, match="left out of sampling"):
            by_number = other.transitions[np.arange(in_bad - 5, in_bad + 5)]
        assert_tree_equal(sliced, by_number)
        assert not set(sliced["episode_index"].tolist()) & set(bad)
        _same_rows(clean_ds, sliced)
        # Damage already known: the same rows again, now without a warning.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            blocks = list(ds.transitions.blocks(1000))
        whole = ds.transitions[np.arange(ds.num_steps)]
        for k in whole:
            assert_tree_equal(np.concatenate([b[k] for b in blocks]), whole[k], k)
        _same_rows(clean_ds, whole)
        # In the file's order: the damaged episodes' steps redrawn the same way, with a warning.
        with trajcore.open(path) as fresh, pytest.warns(trajcore.TrajcoreWarning, match="left out of sampling"):
            in_file = list(fresh.transitions.blocks(1000, order="file"))
        assert not set(np.concatenate([b["episode_index"] for b in in_file]).tolist()) & set(bad)
        for b in in_file:
            _same_rows(clean_ds, b)
    with trajcore.open(path, strict=True) as strict, pytest.raises(trajcore.CorruptFileError, match=f"offset {offset}"):
        strict.transitions[:]
    with trajcore.open(path, strict=True) as strict, pytest.raises(trajcore.CorruptFileError, match=f"offset {offset}"):
        list(strict.transitions.blocks(order="file"))


def test_iteration_skips_damaged_episodes(clean: Path, damaged: tuple[Path, int, list[int]]) -> None:
    path, _, bad = damaged
    with trajcore.open(clean) as clean_ds, trajcore.open(path) as ds:
        lengths = ds.summaries()["length"]
        with pytest.warns(trajcore.TrajcoreWarning, match="left out of the iteration"):
            got = list(ds.transitions)
        assert len(got) == ds.num_steps - int(lengths[bad].sum())
        starts = np.concatenate([[0], np.cumsum(lengths)])
        keep = [i for e in range(ds.num_episodes) if e not in bad for i in range(starts[e], starts[e + 1])]
        for k in range(0, len(keep), 97):
            assert_tree_equal(got[k], clean_ds.transitions[int(keep[k])])
        # Without damage, iteration gives exactly what indexing gives.
        sel = clean_ds.select(env_index=2)
        assert len(list(sel.transitions)) == sel.num_steps
        assert_tree_equal(list(sel.transitions)[7], sel.transitions[7])
    with trajcore.open(path, strict=True) as strict, pytest.raises(trajcore.CorruptFileError):
        list(strict.transitions)


def test_reading_a_damaged_episode_still_raises(clean: Path, damaged: tuple[Path, int, list[int]]) -> None:
    path, offset, bad = damaged
    with trajcore.open(path) as ds, trajcore.open(clean) as clean_ds:
        errors = []
        for e in bad:
            try:
                got = (ds.episodes[e].observations, ds.episodes[e].actions, ds.episodes[e].rewards)
            except trajcore.CorruptFileError as err:
                errors.append(str(err))
                continue
            ep = clean_ds.episodes[e]
            assert_tree_equal(got, (ep.observations, ep.actions, ep.rewards))  # rows that read are right
        assert errors and all(f"offset {offset}" in m for m in errors)
        # An episode whose read failed is left out of sampling from then on.
        assert set(ds.damaged_episodes) <= set(bad) and len(ds.damaged_episodes) > 0
        for e in range(0, ds.num_episodes, 37):
            if e not in bad:
                assert_tree_equal(ds.episodes[e].observations, clean_ds.episodes[e].observations)


def test_torch_adapters_go_on_past_damage(clean: Path, damaged: tuple[Path, int, list[int]]) -> None:
    pytest.importorskip("torch")
    import trajcore.torch as tt

    path, _, bad = damaged
    with trajcore.open(path) as ds, warnings.catch_warnings():
        warnings.simplefilter("ignore", trajcore.TrajcoreWarning)
        stream = tt.TransitionStream(ds, 128, seed=0, batches=10)
        seen = [b["episode_index"] for b in stream]
        assert len(seen) == 10 and not set(np.concatenate(seen).tolist()) & set(bad)
        loader = tt.loader(tt.TransitionDataset(ds), 512, shuffle=False)
        rows = sum(len(b["episode_index"]) for b in loader)
        assert rows == ds.num_steps
        assert not any(set(b["episode_index"].tolist()) & set(bad) for b in loader)


def test_open_verify_leaves_damaged_episodes_out(clean: Path, damaged: tuple[Path, int, list[int]]) -> None:
    path, offset, bad = damaged
    with trajcore.open(clean) as clean_ds:
        n = clean_ds.num_episodes
        want = [clean_ds.episodes[e].episode_return for e in range(n) if e not in bad]
    with pytest.warns(trajcore.TrajcoreWarning, match=f"offset {offset}"):
        ds = trajcore.open(path, verify=True)
    with ds:
        assert ds.num_episodes == n - len(bad)
        assert [e.episode_return for e in ds.episodes] == want
        (problem,) = ds.problems
        assert (Path(problem[0]), problem[1]) == (_shard(path), offset)
        assert "left out" in problem[2]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing damaged is left to find
            for seed in range(5):
                ds.sample_transitions(256, seed=seed)
            for e in ds.episodes:
                _ = e.observations
        with pytest.warns(trajcore.TrajcoreWarning):
            clone = pickle.loads(pickle.dumps(ds))
        assert clone.num_episodes == ds.num_episodes and clone.problems == ds.problems
        assert len(pickle.dumps(ds)) < 2000
        clone.close()
    with pytest.raises(trajcore.CorruptFileError, match=f"{_shard(path).name}.*offset {offset}"):
        trajcore.open(path, verify=True, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with trajcore.open(clean, verify=True, strict=True) as ok:
            assert ok.num_episodes == n


def test_recover_keeps_what_reads(clean: Path, damaged: tuple[Path, int, list[int]], tmp_path: Path) -> None:
    path, _, bad = damaged
    before = {p.name: p.read_bytes() for p in path.glob("*.trj")}
    out = tmp_path / "saved"
    result = trajcore.recover(path, out)
    assert {p.name: p.read_bytes() for p in path.glob("*.trj")} == before, "the source is never touched"
    assert trajcore.verify(out).intact
    assert result["source"].damaged_episodes == bad
    with trajcore.open(clean) as clean_ds, trajcore.open(out, strict=True) as saved:
        n = clean_ds.num_episodes
        assert result["whole"] == n - len(bad)
        assert saved.num_episodes == result["whole"] + result["cut"]
        assert result["cut"] + result["lost"] == len(bad) and result["cut"] > 0
        # Episodes come out in order; cut ones are incomplete prefixes of the originals.
        j = 0
        for e in range(n):
            original = clean_ds.episodes[e]
            if e in bad:
                if j < saved.num_episodes and saved.episodes[j].env_index == original.env_index:
                    got = saved.episodes[j]
                    if got.length < original.length and np.array_equal(
                        got.observations, original.observations[: got.length + 1]
                    ):
                        assert not got.complete
                        assert np.array_equal(got.actions, original.actions[: got.length])
                        j += 1
                continue
            got = saved.episodes[j]
            assert (got.env_index, got.length, got.complete) == (original.env_index, original.length, original.complete)
            assert np.array_equal(got.observations, original.observations)
            j += 1
        assert j == saved.num_episodes
    with pytest.raises(trajcore.InvalidArgumentError):
        trajcore.recover(path, out)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trajcore", *args], capture_output=True, text=True, timeout=300, env={**os.environ}
    )


def test_cli_verify_and_recover(clean: Path, damaged: tuple[Path, int, list[int]], tmp_path: Path) -> None:
    path, offset, bad = damaged
    ok = run_cli("verify", str(clean))
    assert ok.returncode == 0, ok.stderr
    assert "intact" in ok.stdout and "MB/s" in ok.stderr
    hurt = run_cli("verify", str(path))
    assert hurt.returncode == 1, hurt.stderr
    assert f"{_shard(path)} at byte {offset}" in hurt.stdout
    assert f"episodes {bad[0]}, {bad[1]}" in hurt.stdout and "MB/s" in hurt.stderr
    as_json = run_cli("verify", str(path), "--json")
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["intact"] is False and report["damaged_episodes"] == bad
    assert report["damage"][0]["offset"] == offset and report["damage"][0]["episodes"] == bad
    missing = run_cli("verify", str(tmp_path / "nope"))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert run_cli("verify").returncode == 2

    saved = tmp_path / "saved"
    done = run_cli("recover", str(path), str(saved))
    assert done.returncode == 0, done.stderr
    assert "intact prefixes" in done.stderr and f"at byte {offset}" in done.stderr
    assert run_cli("verify", str(saved)).returncode == 0
    again = run_cli("recover", str(path), str(saved))
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1, again.stderr


def test_a_damaged_shard_header_skips_that_shard(tmp_path: Path) -> None:
    path = tmp_path / "shards"
    envs = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
    with trajcore.RecordVectorEpisodes(envs, path, max_shard_bytes=40_000, chunk_bytes=2048) as rec:
        rec.reset(seed=0)
        for _ in range(1500):
            rec.step(rec.action_space.sample())
    shards = sorted(path.glob("*.trj"))
    assert len(shards) >= 3
    with trajcore.open(path, strict=True) as ds:
        total = ds.num_episodes
    victim = shards[1]
    data = bytearray(victim.read_bytes())
    data[20] ^= 0xFF  # the recording id: the header checksum fails
    victim.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = trajcore.open(path)
    with ds:
        assert any(victim.name in str(w.message) for w in caught)
        assert str(victim) not in ds.shards and len(ds.shards) == len(shards) - 1
        assert (Path(ds.problems[0][0]), ds.problems[0][1]) == (victim, 0)
        assert "not a trajcore file" in ds.problems[0][2]
        # Its shard_seq is not known: the recording now has a hole, reported as such.
        assert any("are missing" in p[2] for p in ds.problems[1:])
        assert 0 < ds.num_episodes < total
        for ep in ds.episodes:
            _ = ep.observations
    with pytest.raises(trajcore.CorruptFileError, match=victim.name):
        trajcore.open(path, strict=True)
    report = trajcore.verify(path)
    assert (Path(report.damage[0].file), report.damage[0].offset) == (victim, 0)


def _column_record(shard: Path, name: str) -> fd.Record:
    buf = shard.read_bytes()
    for r in fd.hop(buf)[0]:
        if r.kind == fd.KIND_COLUMN and json.loads(fd.payload(buf, r))["name"] == name:
            return r
    raise AssertionError(name)


@pytest.mark.parametrize("column", ["info/_label", "info/label"])
def test_a_lost_column_description_is_a_corrupt_file(tmp_path: Path, column: str) -> None:
    path = tmp_path / "infos"
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=8), path)
    env.reset(seed=0)
    for _ in range(60):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    env.close()
    shard = _shard(path)
    record = _column_record(shard, column)
    data = bytearray(shard.read_bytes())
    data[record.payload_start + record.payload_len - 1] ^= 0x01
    shard.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", trajcore.TrajcoreWarning)
        ds = trajcore.open(path)
    with ds:
        with pytest.raises(trajcore.CorruptFileError, match=rf"{shard.name}: corrupt at byte offset \d+"):
            _ = ds.episodes[0].infos
        with pytest.raises(trajcore.CorruptFileError, match=shard.name):
            ds.sample_transitions(4, seed=0, keys=[column])


def test_verify_of_a_single_file_that_is_not_a_shard(tmp_path: Path) -> None:
    junk = tmp_path / "junk.trj"
    junk.write_bytes(b"no trajectories here")
    report = trajcore.verify(junk)
    assert not report.intact and report.damage[0].offset == 0
    done = run_cli("verify", str(junk))
    assert done.returncode == 1 and "not a trajcore file" in done.stdout


def test_recover_with_nothing_readable_fails_by_name_and_writes_nothing(tmp_path: Path) -> None:
    """Issue 33, point 11: one episode whose first chunk is damaged has no intact step; recover
    says so (CLI: exit 2, one line) and leaves no output folder, rather than an empty folder
    that verify rejects."""
    path = tmp_path / "one"
    env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), path)
    env.reset(seed=0)
    for _ in range(5):
        env.step(0)
    env.close()
    _flip_chunk_data(_shard(path), 0)
    assert list(trajcore.verify(path).damaged_episodes) == [0]
    out = tmp_path / "out"
    with pytest.raises(
        trajcore.InvalidArgumentError, match=r"nothing to recover: none of its 1 episode\(s\) has an intact step"
    ):
        trajcore.recover(path, out)
    done = run_cli("recover", str(path), str(out))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"{path}: nothing to recover" in line and f"{out} was not written" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one"], "no output folder, no temporary one"


def _zero_header(shard: Path, record: fd.Record) -> None:
    buf = bytearray(shard.read_bytes())
    buf[record.offset : record.offset + fd.RECORD_HEADER_LEN] = bytes(fd.RECORD_HEADER_LEN)
    shard.write_bytes(bytes(buf))


def test_a_zeroed_chunks_record_header_costs_nothing_its_chunks_own_checksums_vouch_for(
    clean: Path, tmp_path: Path
) -> None:
    """Issue 33, point 10: the index lists the chunks of a Chunks record whose header is zeroed,
    and each carries its own checksum: verify reports the damage, every episode reads as in the
    clean file, and recover and convert copy them all."""
    path = tmp_path / "zeroed"
    shutil.copytree(clean, path)
    shard = _shard(path)
    records = [r for r in fd.hop(shard.read_bytes())[0] if r.kind == fd.KIND_CHUNKS]
    _zero_header(shard, records[len(records) // 2])
    report = trajcore.verify(path)
    assert not report.intact and report.episodes_lost == 0
    assert report.damage[0].offset == records[len(records) // 2].offset
    with trajcore.open(clean) as want, trajcore.open(path) as got:
        n = want.num_episodes
        assert got.num_episodes == n
        for a, b in zip(got.episodes, want.episodes, strict=True):
            assert_tree_equal(a.observations, b.observations)
            assert_tree_equal(a.actions, b.actions)
    recovered = trajcore.recover(path, tmp_path / "rec")
    assert (recovered["whole"], recovered["cut"], recovered["lost"]) == (n, 0, 0)
    assert trajcore.convert(path, tmp_path / "conv")["episodes"] == n


def test_a_zeroed_chunks_record_header_counts_the_episodes_it_takes(tmp_path: Path) -> None:
    """Issue 33, point 10: chunks with no checksum of their own (files of format 1.0) are lost with
    their record's header. The episode that needed them is counted lost by verify, and recover
    keeps its intact prefix."""
    golden = Path(__file__).parent / "golden" / "across-rollover"
    path = tmp_path / "zeroed"
    shutil.copytree(golden, path)
    shard = sorted(path.glob("*.trj"))[0]
    buf = shard.read_bytes()
    records = [r for r in fd.hop(buf)[0] if r.kind == fd.KIND_CHUNKS]
    assert not any(ref.flags & 2 for ref in fd.decode_chunk_refs(buf, records[3])), "no checksums of their own"
    _zero_header(shard, records[3])
    with trajcore.open(golden) as ds:
        (whole,) = ds.episodes
        want = (np.asarray(whole.observations), np.asarray(whole.actions), whole.length)
    with pytest.warns(trajcore.TrajcoreWarning, match="left out"):
        report = trajcore.verify(path)
    assert not report.intact
    assert report.episodes_lost == 1
    with pytest.warns(trajcore.TrajcoreWarning):
        recovered = trajcore.recover(path, tmp_path / "rec")
    assert (recovered["whole"], recovered["cut"], recovered["lost"]) == (0, 1, 0)
    with trajcore.open(tmp_path / "rec") as ds:
        (ep,) = ds.episodes
        assert 0 < ep.length < want[2] and not ep.complete
        np.testing.assert_array_equal(ep.observations, want[0][: ep.length + 1])
        np.testing.assert_array_equal(ep.actions, want[1][: ep.length])
