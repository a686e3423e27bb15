"""Seeded, bounded fuzzing of real files through the whole Python API: small datasets recorded
by the real recorder, damaged with a fixed seed (truncations, byte flips anywhere, byte flips
inside a record's payload, payload edits with the checksums resealed), then opened (lenient,
strict, verify=True), verified, recovered, read and sampled. Every call returns data or raises
a `TrajcoreError`; `verify` flags every file whose bytes changed inside a record's payload; a
recovered dataset verifies intact; a dataset opened with ``verify=True`` reads every episode it
lists."""

from __future__ import annotations

import random
import struct
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import format_decoder as fd
import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from gymnasium.wrappers import FrameStackObservation
from helpers import SpaceEnv

SEED = 20_261_122
CASES_PER_FILE = 150


def _record_infos(path: Path) -> None:
    """One env, infos that come and go (int, float, str, nested), custom data, metadata."""
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=9), path, {"fuzz": 1}, chunk_bytes=512)
    env.reset(seed=3)
    for t in range(90):
        if t % 3:
            env.record(logp=np.float32(t) / 7)
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.set_episode_metadata(t=t)
            env.reset()
    env.close()


def _record_nested_raw(path: Path) -> None:
    """Dict/Tuple/Text observations stored raw (str chunks read in place)."""
    obs = spaces.Dict(
        {"p": spaces.Box(-1, 1, (2,), np.float32), "t": spaces.Tuple([spaces.Discrete(4)]), "s": spaces.Text(4)}
    )
    env = trajcore.RecordEpisodes(SpaceEnv(obs, max_steps=7, infos=False), path, zstd_level=None, chunk_bytes=256)
    env.reset(seed=5)
    for _ in range(60):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    env.close()


def _record_vector(path: Path) -> None:
    """Three lanes, delta + zstd observations, episodes running at close."""
    envs = gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync")
    codecs = {"obs": {"delta": True, "zstd_level": 3}}
    with trajcore.RecordVectorEpisodes(envs, path, codecs=codecs, chunk_bytes=384) as rec:
        rec.reset(seed=2)
        rec.action_space.seed(2)
        for _ in range(120):
            rec.step(rec.action_space.sample())


def _record_frame_stacks(path: Path) -> None:
    """Stacked frames (codec 3: each frame stored once), small chunks."""
    frames = spaces.Box(0, 3, (5, 5), np.uint8)
    env = FrameStackObservation(SpaceEnv(frames, max_steps=8, infos=False), 3)
    with trajcore.RecordEpisodes(env, path, chunk_bytes=400) as rec:
        rec.reset(seed=4)
        for _ in range(60):
            _, _, term, trunc, _ = rec.step(rec.action_space.sample())
            if term or trunc:
                rec.reset()


RECORDERS: dict[str, Callable[[Path], None]] = {
    "infos": _record_infos,
    "nested_raw": _record_nested_raw,
    "vector": _record_vector,
    "frame_stacks": _record_frame_stacks,
}


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """name -> the bytes of its (single) shard file."""
    out = {}
    for name, record in RECORDERS.items():
        path = tmp_path_factory.mktemp("fuzz") / name
        record(path)
        (shard,) = sorted(path.glob("*.trj"))
        out[name] = shard.read_bytes()
        assert len(fd.hop(out[name])[0]) > 10, f"{name}: too few records to fuzz"
    return out


def _reseal(buf: bytearray, rec: fd.Record) -> None:
    """Recomputes a record's payload and header checksums after its payload was edited."""
    body = bytes(buf[rec.payload_start : rec.payload_start + rec.payload_len])
    struct.pack_into("<I", buf, rec.offset + 4, fd.crc32c(body))
    struct.pack_into("<I", buf, rec.offset + 20, fd.crc32c(bytes(buf[rec.offset : rec.offset + 20])))


def _mutate(rng: random.Random, data: bytes) -> tuple[str, bytes, bool]:
    """A damaged copy: (what was done, the bytes, whether a record's payload changed without
    its checksum being resealed)."""
    records = [r for r in fd.hop(data)[0] if r.payload_len > 0]
    buf = bytearray(data)
    how = rng.choice(["truncate", "flip", "payload", "payload", "resealed"])
    if how == "truncate":
        cut = rng.randrange(0, len(data))
        return f"truncate at {cut}", bytes(buf[:cut]), False
    if how == "flip":
        at = rng.randrange(0, len(data))
        buf[at] ^= 1 << rng.randrange(8)
        inside = any(r.payload_start <= at < r.payload_start + r.payload_len for r in records)
        return f"flip byte {at}", bytes(buf), inside
    rec = rng.choice(records)
    flips = 1 if how == "payload" else rng.randrange(1, 4)
    for _ in range(flips):
        at = rec.payload_start + rng.randrange(rec.payload_len)
        buf[at] ^= 1 << rng.randrange(8)
    if how == "resealed":
        _reseal(buf, rec)
    kind = fd.KIND_NAMES.get(rec.kind, rec.kind)
    return f"{how} {kind} record at {rec.offset}", bytes(buf), how == "payload"


@contextmanager
def _trajcore_errors(case: str) -> Iterator[None]:
    """Lets trajcore errors through silently; anything else fails the case."""
    try:
        yield
    except trajcore.TrajcoreError:
        pass
    except Exception as e:  # pragma: no cover - the failure being tested for
        raise AssertionError(f"{case}: {type(e).__name__}: {e}") from e


def _read_everything(ds: trajcore.Dataset, case: str) -> None:
    for ep in ds.episodes:
        for name in ("observations", "actions", "rewards", "terminations", "truncations", "infos", "data", "metadata"):
            with _trajcore_errors(f"{case}: episode {ep.index} {name}"):
                getattr(ep, name)
    if ds.num_steps:
        with _trajcore_errors(f"{case}: sample_transitions"):
            ds.sample_transitions(16, seed=1)
        with _trajcore_errors(f"{case}: sample_sequences"):
            ds.sample_sequences(4, 3, seed=2, pad=True)
        with _trajcore_errors(f"{case}: transitions by number"):
            ds.transitions[np.arange(min(ds.num_steps, 20))]
        with _trajcore_errors(f"{case}: iteration"):
            for _ in ds.transitions:
                pass


def _check(case: str, path: Path, payload_changed: bool, tmp: Path) -> None:
    with _trajcore_errors(f"{case}: verify"):
        report = trajcore.verify(path)
        if payload_changed:
            assert not report.intact, f"{case}: verify missed a changed payload"
    for strict in (False, True):
        with _trajcore_errors(f"{case}: open strict={strict}"), trajcore.open(path, strict=strict) as ds:
            _read_everything(ds, f"{case} strict={strict}")
    with _trajcore_errors(f"{case}: open verify"), trajcore.open(path, verify=True) as ds:
        # What a verification lists reads: its chunks all checked and decoded.
        for ep in ds.episodes:
            _ = ep.observations, ep.actions, ep.rewards, ep.terminations, ep.truncations
        if ds.num_steps:
            ds.sample_transitions(16, seed=3)
    dst = tmp / "recovered"
    with _trajcore_errors(f"{case}: recover"):
        trajcore.recover(path, dst)
        assert trajcore.verify(dst).intact, f"{case}: the recovered dataset is damaged"


@pytest.mark.parametrize("name", sorted(RECORDERS))
def test_damaged_real_files_give_data_or_trajcore_errors(
    name: str, originals: dict[str, bytes], tmp_path: Path
) -> None:
    data = originals[name]
    rng = random.Random(f"{SEED}-{name}")
    flagged = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", trajcore.TrajcoreWarning)
        for i in range(CASES_PER_FILE):
            how, damaged, payload_changed = _mutate(rng, data)
            case_dir = tmp_path / f"case{i}"
            case_dir.mkdir()
            path = case_dir / "shard.trj"
            path.write_bytes(damaged)
            _check(f"{name} case {i} ({how})", path, payload_changed, case_dir)
            flagged += payload_changed
    assert flagged >= CASES_PER_FILE // 5, "the seed exercised too few payload changes"


def test_the_intact_files_verify_and_read(originals: dict[str, bytes], tmp_path: Path) -> None:
    for name, data in originals.items():
        path = tmp_path / f"{name}.trj"
        path.write_bytes(data)
        assert trajcore.verify(path).intact
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with trajcore.open(path, strict=True, verify=True) as ds:
                _read_everything(ds, name)
                assert ds.num_episodes > 3
