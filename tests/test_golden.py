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
from format_decoder import KIND_INDEX, DecodedDataset, hop

GOLDEN = Path(__file__).parent / "golden"
EXPECTED = json.loads((GOLDEN / "expected.json").read_text())
CASES = ["chunk-never-closed", "index-checkpoint", "reset-only-episode", "across-rollover"]


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
