"""Frame stacks (codec 3): observations of `FrameStackObservation` store each frame once and read
back exactly, whatever the padding, dtype or stack size; rows that are not shifts (episode
starts, arbitrary data) round-trip too; the independent decoder reads the same values."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, ClassVar

import format_decoder as fd
import gymnasium as gym
import numpy as np
import pytest
import trajcore
import zstandard
from gymnasium import spaces
from gymnasium.wrappers import FrameStackObservation
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_format_decoder import compare_with_trajcore

CODEC_STACK_ZSTD = fd.CODEC_STACK | fd.CODEC_ZSTD << 8


class FrameEnv(gym.Env[np.ndarray, np.int64]):
    """Frames of `shape` and `dtype` from the env's RNG, a few distinct values so zstd and the
    filter both have something to find; episodes of 3 to 20 steps."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, shape: tuple[int, ...] = (6, 5), dtype: Any = np.uint8) -> None:
        self.observation_space = spaces.Box(0, 3, shape, dtype)
        self.action_space = spaces.Discrete(2)
        self.length = 0

    def _frame(self) -> np.ndarray:
        return self.np_random.integers(0, 4, self.observation_space.shape).astype(self.observation_space.dtype)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(3, 21))
        return self._frame(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self._frame(), 1.0, self.t >= self.length, False, {}


class Replay(gym.Env[np.ndarray, np.int64]):
    """Returns the given rows in order as observations (reset takes the first of an episode)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, rows: np.ndarray, episode_starts: set[int]) -> None:
        if rows.dtype.kind == "f":
            low, high = -np.inf, np.inf
        elif rows.dtype.kind == "b":
            low, high = 0, 1
        else:
            low, high = np.iinfo(rows.dtype).min, np.iinfo(rows.dtype).max
        self.observation_space = spaces.Box(low, high, rows.shape[1:], rows.dtype)
        self.action_space = spaces.Discrete(2)
        self.rows, self.starts, self.t = rows, episode_starts, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        row, self.t = self.rows[self.t], self.t + 1
        return row, {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        row, self.t = self.rows[self.t], self.t + 1
        return row, 0.0, self.t in self.starts or self.t == len(self.rows), False, {}


def record(env: gym.Env[Any, Any], path: Path, steps: int, **options: Any) -> list[list[np.ndarray]]:
    """Records `steps` steps; returns each episode's observations as the env gave them."""
    rec = trajcore.RecordEpisodes(env, path, **options)
    episodes: list[list[np.ndarray]] = []
    obs, _ = rec.reset(seed=0)
    episodes.append([obs.copy()])
    for t in range(steps):
        obs, _, term, trunc, _ = rec.step(rec.action_space.sample())
        episodes[-1].append(obs.copy())
        if (term or trunc) and t < steps - 1:
            obs, _ = rec.reset()
            episodes.append([obs.copy()])
    rec.close()
    return episodes


def obs_chunks(path: Path) -> list[tuple[fd.ChunkRef, bytes]]:
    """The observation column's chunks with their stored bytes."""
    dec = fd.DecodedDataset(path)
    obs_id = dec.spec(dec.episodes[0].recording, "obs")["id"]
    return [
        (ref, shard.buf[ref.data_offset : ref.data_offset + ref.stored_len])
        for shard in dec.shards
        for ref in shard.chunks
        if ref.column == obs_id
    ]


def stored_codecs(path: Path) -> set[int]:
    return {ref.codec for ref, _ in obs_chunks(path)}


def assert_read_back(path: Path, episodes: list[list[np.ndarray]]) -> None:
    with trajcore.open(path) as ds:
        assert len(ds.episodes) == len(episodes)
        for ep, want in zip(ds.episodes, episodes, strict=True):
            got = np.asarray(ep.observations)
            assert got.dtype == want[0].dtype and np.array_equal(got, np.stack(want))
    # Random steps gathered with a cold cache (no cache at all, then the default): chunks decoded
    # only as far as the rows wanted (prefixes), then whole, give the same rows.
    firsts = np.cumsum([0] + [len(e) - 1 for e in episodes])
    for cache_bytes, mmap in ((0, True), (256 << 20, True), (256 << 20, False)):
        with trajcore.open(path, cache_bytes=cache_bytes, mmap=mmap) as ds:
            steps = np.random.default_rng(cache_bytes).integers(0, ds.num_steps, 64)
            batch = ds.transitions[steps]
            for k, g in enumerate(steps):
                e = int(np.searchsorted(firsts, g, side="right") - 1)
                t = int(g - firsts[e])
                assert np.array_equal(batch["observations"][k], episodes[e][t]), (g, e, t)
                assert np.array_equal(batch["next_observations"][k], episodes[e][t + 1]), (g, e, t)


@pytest.mark.parametrize("padding", ["reset", "zero"])
@pytest.mark.parametrize(("stack", "dtype"), [(4, np.uint8), (2, np.float32), (3, np.int16)])
def test_frame_stack_observations_round_trip(tmp_path: Path, padding: str, stack: int, dtype: Any) -> None:
    env = FrameStackObservation(FrameEnv(dtype=dtype), stack, padding_type=padding)
    # Small chunks: many chunk starts, each standing on its own (its first row whole).
    episodes = record(env, tmp_path / "d", 300, chunk_bytes=stack * 30 * np.dtype(dtype).itemsize * 7)
    assert_read_back(tmp_path / "d", episodes)
    compare_with_trajcore(tmp_path / "d")
    assert CODEC_STACK_ZSTD in stored_codecs(tmp_path / "d")


def test_frame_stacks_store_each_frame_once(tmp_path: Path) -> None:
    env = FrameStackObservation(FrameEnv(shape=(40, 40)), 4)
    record(env, tmp_path / "d", 200)
    chunks = obs_chunks(tmp_path / "d")
    assert {ref.codec for ref, _ in chunks} == {CODEC_STACK_ZSTD}
    # What zstd compressed (its frames declare it): a quarter of the stacks, plus the whole
    # first stack of each episode and chunk and a byte a row.
    filtered = sum(zstandard.get_frame_parameters(data).content_size for _, data in chunks)
    raw = sum(ref.raw_len for ref, _ in chunks)
    assert filtered < raw * 0.4, (filtered, raw)


def test_frame_stack_option_must_be_a_bool(tmp_path: Path) -> None:
    env = FrameStackObservation(FrameEnv(), 2)
    with pytest.raises(trajcore.InvalidArgumentError, match="frame_stack must be True or False"):
        trajcore.RecordEpisodes(env, tmp_path / "d", codecs={"obs": {"frame_stack": "no"}})


def test_columns_that_never_shift_keep_their_codec(tmp_path: Path) -> None:
    # Random (6, 5) frames are rows of two axes, but no row is the previous one shifted.
    record(FrameEnv(), tmp_path / "d", 100, codecs={"obs": {"delta": True}})
    assert stored_codecs(tmp_path / "d") <= {fd.CODEC_DELTA | fd.CODEC_ZSTD << 8, 0}


@st.composite
def stacked_rows(draw: st.DrawFn) -> tuple[np.ndarray, set[int]]:
    """Rows of `stack` frames, each either the previous row shifted plus a new frame or anything
    (some all equal, some random), with episode starts anywhere."""
    dtype = np.dtype(draw(st.sampled_from(["uint8", "int16", "float32", "uint64", "bool"])))
    stack = draw(st.integers(2, 5))
    frame = draw(st.lists(st.integers(1, 8), min_size=1, max_size=2).map(tuple))
    n = draw(st.integers(2, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows = np.empty((n, stack, *frame), dtype)
    for r in range(n):
        fresh = rng.integers(0, 3, (stack, *frame)).astype(dtype)
        how = draw(st.sampled_from(["shift", "shift", "shift", "fresh", "same"])) if r else "fresh"
        if how == "shift":
            rows[r, :-1], rows[r, -1] = rows[r - 1, 1:], fresh[0]
        elif how == "same":
            rows[r] = fresh[0]
        else:
            rows[r] = fresh
    starts = set(draw(st.lists(st.integers(1, n - 1), max_size=4)))
    return rows, starts


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stacked_rows(), st.sampled_from([None, 64, 200]))
def test_any_rows_round_trip(case: tuple[np.ndarray, set[int]], chunk_bytes: int | None) -> None:
    rows, starts = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d"
        rec = trajcore.RecordEpisodes(Replay(rows, starts), path, chunk_bytes=chunk_bytes)
        rec.reset(seed=0)
        episodes_rows = 1
        while True:
            _, _, term, _, _ = rec.step(0)
            episodes_rows += 1
            if episodes_rows == len(rows):
                break
            if term:
                rec.reset()
                episodes_rows += 1
                if episodes_rows == len(rows):
                    break
        rec.close()
        with trajcore.open(path) as ds:
            got = np.concatenate([np.asarray(ep.observations) for ep in ds.episodes])
        # The last reset (if the rows ended on one) never stepped: not recorded.
        assert got.dtype == rows.dtype and got.tobytes() == rows[: len(got)].tobytes()
        assert len(got) >= len(rows) - 1
        compare_with_trajcore(path)


def test_frame_stack_chunks_are_sealed_on_their_stored_bytes(tmp_path: Path) -> None:
    # Stacks of 4 frames of 40 x 40: 6,400-byte rows whose new frame is 1,600 bytes. A chunk is
    # sealed once the filter would store `chunk_bytes` (each frame once), so it holds about 4x
    # the steps of raw rows; the column declares 4x `chunk_bytes` as its decoded bound.
    chunk = 64 << 10
    env = FrameStackObservation(FrameEnv(shape=(40, 40)), 4)
    episodes = record(env, tmp_path / "d", 600, chunk_bytes=chunk)
    chunks = obs_chunks(tmp_path / "d")
    dec = fd.DecodedDataset(tmp_path / "d")
    spec = dec.spec(dec.episodes[0].recording, "obs")
    assert spec["codec"]["chunk_bytes"] == 4 * chunk
    row = 4 * 40 * 40
    for ref, data in chunks[:-1]:  # the last one was sealed at close
        stored = zstandard.get_frame_parameters(data).content_size - 4 - ref.n_rows  # header, kinds
        assert chunk <= stored < chunk + 2 * row, (stored, ref.n_rows)  # a step adds up to 2 rows
        assert chunk < ref.raw_len <= 4 * chunk + 2 * row
    assert_read_back(tmp_path / "d", episodes)
    compare_with_trajcore(tmp_path / "d")

    # Without the filter, chunks are sealed on their raw bytes, as every other column's are.
    record(
        FrameStackObservation(FrameEnv(shape=(40, 40)), 4),
        tmp_path / "plain",
        600,
        chunk_bytes=chunk,
        codecs={"obs": {"frame_stack": False}},
    )
    plain = obs_chunks(tmp_path / "plain")
    assert all(chunk <= ref.raw_len < chunk + 2 * row for ref, _ in plain[:-1])
    assert len(plain) > 2 * len(chunks)  # short episodes: each starts with a whole stack


def test_convert_keeps_the_chunk_size_a_frame_stack_column_asked_for(tmp_path: Path) -> None:
    # The column declares 4x what it asked for; a copy asks for the same again, not 4x more.
    env = FrameStackObservation(FrameEnv(shape=(40, 40)), 4)
    episodes = record(env, tmp_path / "d", 300, chunk_bytes=64 << 10)
    trajcore.convert(tmp_path / "d", tmp_path / "copy")
    trajcore.convert(tmp_path / "copy", tmp_path / "copy2")
    for path in ("d", "copy", "copy2"):
        dec = fd.DecodedDataset(tmp_path / path)
        assert dec.spec(dec.episodes[0].recording, "obs")["codec"]["chunk_bytes"] == 4 * (64 << 10), path
    assert_read_back(tmp_path / "copy2", episodes)
