"""Benchmarks: run with `python -m pytest benches -p no:cacheprovider --benchmark-only -s`.

Every figure is a ratio measured in one run (with vs without trajcore, interleaved), because the
machine is shared and noisy; absolute numbers are printed for scale only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

_RESULTS: list[dict[str, Any]] = []


@pytest.fixture(scope="session")
def report() -> Iterator[list[dict[str, Any]]]:
    yield _RESULTS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _RESULTS:
        return
    terminalreporter.section("trajcore figures")
    for row in _RESULTS:
        terminalreporter.write_line("  ".join(f"{k}={v}" for k, v in row.items()))
