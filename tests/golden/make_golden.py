"""Writes the golden files: small real recordings of the format's odd cases, each with the
episodes a reader must list in `expected.json`. Committed; regenerate only when the format
changes on purpose (then check the new files by eye against docs/FORMAT.md).

    python tests/golden/make_golden.py          # the newest version's case (opening-copies)
    python tests/golden/make_golden.py --all    # every case again, as today's writer writes them

The older cases were written by the writer of their version and are kept so: both readers must
read every version's files, so they are not rewritten unless on purpose (`--all`).

- `chunk-never-closed/`: the writer was killed inside a Chunks record: the file ends in a
  record cut short; everything before it reads.
- `index-checkpoint/`: a closed shard with Index checkpoints along the way (small
  `index_interval_bytes`), so the index chain has several links.
- `reset-only-episode/`: an episode that never took a step before close: not listed, no row.
- `across-rollover/`: an episode running over two shard rollovers, in three parts.
- `chunk-checksums/` (format 1.1): two sub-envs, chunks with checksums of their own
  (`CHUNK_CHECKSUM`); its tests also flip a byte of one chunk and check that
  both readers lose that chunk alone.
- `opening-copies/` (format 1.2): a closed shard with enough Episode records (one per episode:
  flushed after each) for the writer to copy them into an Opening Copies record; the independent
  decoder checks each copy equals its record.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

import trajcore  # noqa: E402
from helpers import SpaceEnv  # noqa: E402

BOX = spaces.Box(-1, 1, (2,), np.float32)
CASES = [
    "chunk-never-closed",
    "index-checkpoint",
    "reset-only-episode",
    "across-rollover",
    "chunk-checksums",
    "opening-copies",
]


def env(max_steps: int = 6) -> SpaceEnv:
    return SpaceEnv(BOX, spaces.Discrete(3), max_steps=max_steps, p_terminate=0.0, infos=False)


def describe(path: Path) -> list[dict[str, Any]]:
    with trajcore.open(path) as ds:
        return [
            {
                "env_index": ep.env_index,
                "episode_id": ep.episode_id,
                "length": ep.length,
                "complete": ep.complete,
                "terminated": ep.terminated,
                "truncated": ep.truncated,
                "continued": ep.continued,
                "continues": ep.continues,
                "observations": np.asarray(ep.observations).tolist(),
                "actions": np.asarray(ep.actions).tolist(),
                "rewards": np.asarray(ep.rewards).tolist(),
            }
            for ep in ds.episodes
        ]


def run(
    path: Path, steps: int, *, close: bool = True, max_steps: int = 6, flush: bool = False, **options: Any
) -> trajcore.RecordEpisodes:
    rec = trajcore.RecordEpisodes(env(max_steps), path, **options)
    rec.action_space.seed(0)
    rec.reset(seed=0)
    for _ in range(steps):
        _, _, te, tr, _ = rec.step(rec.action_space.sample())
        if te or tr:
            if flush:
                rec.flush()  # the episode's record reaches the file now
            rec.reset()
    if close:
        rec.close()
    return rec


def write_1_0_cases(tmp_path: Path) -> None:
    """The cases first written by format 1.0."""
    # Killed inside a Chunks record: cut the closed file in the last Chunks record.
    run(tmp_path / "a", 20, flush=True)
    (shard,) = sorted((tmp_path / "a").glob("*.trj"))
    buf = shard.read_bytes()
    from format_decoder import KIND_CHUNKS, hop

    records, _ = hop(buf)
    last_chunks = [r for r in records if r.kind == KIND_CHUNKS][-1]
    cut = last_chunks.offset + 24 + last_chunks.payload_len // 2
    out = HERE / "chunk-never-closed"
    out.mkdir(exist_ok=True)
    (out / shard.name).write_bytes(buf[:cut])

    for name, kwargs in [
        ("index-checkpoint", {"steps": 60, "flush": True, "index_interval_bytes": 1024, "chunk_bytes": 64}),
        ("across-rollover", {"steps": 200, "max_steps": 200, "max_shard_bytes": 4096, "chunk_bytes": 64}),
    ]:
        steps = kwargs.pop("steps")
        src = tmp_path / name
        run(src, steps, **kwargs)
        out = HERE / name
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(src, out)

    rec = run(tmp_path / "r", 6, close=False)
    rec.reset()  # an episode that never steps
    rec.close()
    out = HERE / "reset-only-episode"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(tmp_path / "r", out)


def write_1_1_case(tmp_path: Path) -> None:
    """Format 1.1: two sub-envs, small chunks (many of them, each with its own checksum)."""
    import gymnasium as gym

    out = HERE / "chunk-checksums"
    shutil.rmtree(out, ignore_errors=True)
    envs = gym.vector.SyncVectorEnv([lambda: env(max_steps=5) for _ in range(2)])
    with trajcore.RecordVectorEpisodes(envs, tmp_path / "c", chunk_bytes=64, max_shard_bytes=6000) as rec:
        rec.action_space.seed(1)
        rec.reset(seed=1)
        for _ in range(40):
            rec.step(rec.action_space.sample())
    shutil.copytree(tmp_path / "c", out)


def main(everything: bool) -> None:
    expected: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        if everything:
            write_1_0_cases(tmp_path)
            write_1_1_case(tmp_path)
        # Format 1.2: an Episode record per episode, 20 of them, copied at close.
        out = HERE / "opening-copies"
        shutil.rmtree(out, ignore_errors=True)
        run(tmp_path / "e", 110, max_steps=5, flush=True, chunk_bytes=64, compact_shards=False)
        shutil.copytree(tmp_path / "e", out)

    for case in CASES:
        expected[case] = describe(HERE / case)
        shards = sorted((HERE / case).glob("*.trj"))
        expected[case + "/shards"] = {p.name: describe(p) for p in shards} if len(shards) > 1 else {}
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    for case in expected:
        if not case.endswith("/shards"):
            print(case, [(e["length"], e["continued"], e["continues"]) for e in expected[case]])


if __name__ == "__main__":
    main("--all" in sys.argv[1:])
