"""The golden files (tests/golden, see make_golden.py) read as `expected.json` says, through the
trajcore API and through the independent decoder written from docs/FORMAT.md."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from format_decoder import (
    CHUNK_CHECKSUM,
    KIND_CHUNKS,
    KIND_EPISODE,
    KIND_INDEX,
    DecodedDataset,
    FormatError,
    decode_chunk_refs,
    hop,
    open_shard,
)

GOLDEN = Path(__file__).parent / "golden"
EXPECTED = json.loads((GOLDEN / "expected.json").read_text())
# Every case make_golden.py described (its keys, besides each case's "/shards").
CASES = [case for case in EXPECTED if not case.endswith("/shards")]


def _paths(case: str) -> list[tuple[Path, list[dict[str, Any]]]]:
    out = [(GOLDEN / case, EXPECTED[case])]
    out += [(GOLDEN / case / name, want) for name, want in EXPECTED[case + "/shards"].items()]
    return out


@pytest.mark.parametrize("case", CASES)
def test_trajcore_reads_the_golden_files(case: str) -> None:
    for path, want in _paths(case):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", trajcore.TrajcoreWarning)  # the cut file warns
            ds = trajcore.open(path)
        assert ds.num_episodes == len(want), path
        for ep, w in zip(ds.episodes, want, strict=True):
            got = {k: getattr(ep, k) for k in ("env_index", "episode_id", "length", "complete", "terminated")}
            got |= {"truncated": ep.truncated, "continued": ep.continued, "continues": ep.continues}
            assert got == {k: w[k] for k in got}, path
            np.testing.assert_array_equal(np.asarray(ep.observations), np.asarray(w["observations"], np.float32))
            np.testing.assert_array_equal(np.asarray(ep.actions), np.asarray(w["actions"]))
            np.testing.assert_array_equal(ep.rewards, np.asarray(w["rewards"]))


@pytest.mark.parametrize("case", CASES)
def test_the_decoder_reads_the_golden_files(case: str) -> None:
    for path, want in _paths(case):
        dec = DecodedDataset(path)
        assert len(dec.episodes) == len(want), path
        for i, w in enumerate(want):
            e = dec.episodes[i].fixed
            assert (e.lane, e.episode_id, e.length) == (w["env_index"], w["episode_id"], w["length"]), path
            np.testing.assert_array_equal(dec.read(i, "obs"), np.asarray(w["observations"], np.float32))
            np.testing.assert_array_equal(dec.read(i, "reward"), np.asarray(w["rewards"]))


def test_the_golden_files_are_the_odd_cases_they_claim() -> None:
    (cut,) = (GOLDEN / "chunk-never-closed").glob("*.trj")
    _, stopped = hop(cut.read_bytes())
    assert stopped is not None, "the file ends inside a record"
    (checkpointed,) = (GOLDEN / "index-checkpoint").glob("*.trj")
    records, _ = hop(checkpointed.read_bytes())
    assert sum(r.kind == KIND_INDEX for r in records) >= 3, "several index checkpoints"
    assert len(list((GOLDEN / "across-rollover").glob("*.trj"))) >= 3
    assert EXPECTED["reset-only-episode"][-1]["length"] > 0, "the step-less episode is not listed"
    # Format 1.2: every Episode and Index record but the final index copied, each copy equal to
    # its record (the decoder checks).
    (copied,) = (GOLDEN / "opening-copies").glob("*.trj")
    shard = open_shard(copied)
    final_index = shard.records[-2].offset
    read_at_open = [r.offset for r in shard.records if r.kind in (KIND_EPISODE, KIND_INDEX) and r.offset < final_index]
    assert len(read_at_open) >= 16 and shard.copied == read_at_open


def test_a_flipped_chunk_of_the_1_1_file_costs_that_chunk_alone(tmp_path: Path) -> None:
    """Format 1.1: each chunk has its own checksum. Both readers refuse the flipped chunk, and
    read every other chunk of its record."""
    (shard,) = (GOLDEN / "chunk-checksums").glob("*.trj")
    buf = bytearray(shard.read_bytes())
    records, _ = hop(bytes(buf))
    refs = [ref for r in records if r.kind == KIND_CHUNKS for ref in decode_chunk_refs(bytes(buf), r)]
    assert all(ref.flags & CHUNK_CHECKSUM for ref in refs)
    victim = next(ref for ref in refs if ref.column == 0 and ref.lane == 1)
    buf[victim.data_offset + victim.stored_len // 2] ^= 0x08
    damaged = tmp_path / "d"
    damaged.mkdir()
    (damaged / shard.name).write_bytes(bytes(buf))

    dec = DecodedDataset(damaged)
    report = trajcore.verify(damaged)
    (d,) = report.damage
    assert d.offset == victim.data_offset and "checksum" in d.why
    want = EXPECTED["chunk-checksums"]
    for i, w in enumerate(want):
        e = dec.episodes[i].fixed
        hit = e.lane == victim.lane and victim.first_row < e.obs_first_row + e.length + 1
        hit = hit and e.obs_first_row < victim.end_row
        assert (i in report.damaged_episodes) == hit, i
        if hit:
            with pytest.raises(FormatError, match="fails its checksum"):
                dec.read(i, "obs")
        else:
            np.testing.assert_array_equal(dec.read(i, "obs"), np.asarray(w["observations"], np.float32))
