"""Writes small real shards as seeds for the reader fuzz targets (rust/fuzz/seeds/reader), and
their Chunks and Index payloads as seeds for the tables target (rust/fuzz/seeds/tables).

    python rust/fuzz/make_seeds.py

Each seed is one shard file of a few KB covering a feature the reader parses: raw and zstd
columns, delta filtering, frame stacks (codec 3), str columns, infos with masks, nested
Dict/Tuple spaces, a vector recording, episode metadata and an unfinished file (no index, no end
record).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from gymnasium import spaces

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))

import format_decoder as fd  # noqa: E402
import trajcore  # noqa: E402
from helpers import SpaceEnv  # noqa: E402


def record(out: Path, name: str, env_kwargs: dict, rec_kwargs: dict, steps: int = 12, close: bool = True) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = trajcore.RecordEpisodes(SpaceEnv(**env_kwargs), Path(tmp) / "d", {"seed": name}, **rec_kwargs)
        env.reset(seed=0)
        for t in range(steps):
            env.record(t=t)
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            if term or trunc:
                env.set_episode_metadata(k=t)
                env.reset()
        if close:
            env.close()
        else:
            env.flush()
        (shard,) = sorted((Path(tmp) / "d").glob("*.trj"))
        shutil.copy(shard, out / f"{name}.trj")
        if not close:
            env.close()


def main() -> None:
    out = HERE / "seeds" / "reader"
    out.mkdir(parents=True, exist_ok=True)
    box = spaces.Box(-1, 1, (3,), np.float32)
    nested = spaces.Dict({"a": spaces.Tuple([spaces.Discrete(3), spaces.Text(4)]), "b": box})
    record(out, "zstd", {"observation_space": box}, {})
    record(out, "raw", {"observation_space": box}, {"zstd_level": None})
    pixels = spaces.Box(0, 255, (4, 4), np.uint8)
    record(out, "delta", {"observation_space": pixels}, {"codecs": {"obs": {"delta": True}}})
    record(out, "nested", {"observation_space": nested}, {"chunk_bytes": 64})
    record(out, "unfinished", {"observation_space": box}, {}, close=False)
    with tempfile.TemporaryDirectory() as tmp:
        import gymnasium as gym

        envs = trajcore.RecordVectorEpisodes(
            gym.vector.SyncVectorEnv([lambda: SpaceEnv(max_steps=3) for _ in range(2)]), Path(tmp) / "d"
        )
        envs.reset(seed=0)
        for _ in range(8):
            envs.step(envs.action_space.sample())
        envs.close()
        (shard,) = sorted((Path(tmp) / "d").glob("*.trj"))
        shutil.copy(shard, out / "vector.trj")
    with tempfile.TemporaryDirectory() as tmp:
        from gymnasium.wrappers import FrameStackObservation

        frames = spaces.Box(0, 3, (4, 4), np.uint8)
        env = trajcore.RecordEpisodes(FrameStackObservation(SpaceEnv(frames, max_steps=6), 3), Path(tmp) / "d")
        env.reset(seed=0)
        for _ in range(12):
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            if term or trunc:
                env.reset()
        env.close()
        (shard,) = sorted((Path(tmp) / "d").glob("*.trj"))
        shutil.copy(shard, out / "frame_stack.trj")
    for p in sorted(out.iterdir()):
        print(p.name, p.stat().st_size)
    table_seeds(out, HERE / "seeds" / "tables")


def table_seeds(shards: Path, out: Path) -> None:
    """Each Chunks and Index payload of the seed shards, after a byte saying whether its table
    is packed (the record's required flag), as the tables target reads its input."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for shard in sorted(shards.glob("*.trj")):
        buf = shard.read_bytes()
        records, _ = fd.hop(buf)
        for rec in records:
            if rec.kind in (fd.KIND_CHUNKS, fd.KIND_INDEX):
                kind = "chunks" if rec.kind == fd.KIND_CHUNKS else "index"
                packed = rec.required_flags & fd.RECORD_PACKED_TABLE
                seed = out / f"{shard.stem}-{kind}-{rec.offset}"
                seed.write_bytes(bytes([packed]) + fd.payload(buf, rec))
    print(len(list(out.iterdir())), "table seeds")


if __name__ == "__main__":
    main()
