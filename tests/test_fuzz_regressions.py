"""Every file in tests/fuzz_regressions reads through the Python API (lenient and strict) to
data or a trajcore error: never a crash or another exception type."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import trajcore

FILES = sorted((Path(__file__).parent / "fuzz_regressions").glob("*.trj"))


def test_the_regression_files_are_there() -> None:
    assert len(FILES) >= 5


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("strict", [False, True])
def test_reads_or_raises_a_trajcore_error(path: Path, strict: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", trajcore.TrajcoreWarning)
        try:
            ds = trajcore.open(path, strict=strict)
        except trajcore.TrajcoreError:
            return
        with ds:
            for ep in ds.episodes:
                try:
                    _ = ep.observations, ep.actions, ep.rewards, ep.infos, ep.data, ep.metadata
                except trajcore.TrajcoreError:
                    continue
