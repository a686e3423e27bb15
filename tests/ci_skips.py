"""In CI (the environment variable ``CI`` set), a test that skips for a Python package the `test`
extra installs fails instead: the extra is installed there, so such a skip hides a broken install
or a broken import. A skip says what is missing, and in CI only a system package (Debian's
chromium, libegl1, ...) or a device may be.

`package_named` is the rule, on plain strings (tests/test_ci_skips.py); the hooks below apply it
to every test's report and to every module's collection (a module-level `pytest.importorskip`);
tests/conftest.py installs them.
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"

# Import names of the extra's packages that differ from their distribution names (a skip names
# what failed to import). dm_tree's, ``tree``, is left out: it is a word of the skips' prose.
IMPORT_NAMES = {"pil": "pillow", "cv2": "opencv-python-headless", "yaml": "pyyaml"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@functools.cache
def extra_packages(pyproject: Path = PYPROJECT) -> dict[str, str]:
    """The `test` extra's packages: normalized name (and import name) -> distribution name."""
    extra = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["optional-dependencies"]["test"]
    packages: dict[str, str] = {}
    for requirement in extra:
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
        assert name is not None, requirement
        packages[_normal(name.group(0))] = name.group(0)
    for import_name, distribution in IMPORT_NAMES.items():
        if _normal(distribution) in packages:
            packages[import_name] = packages[_normal(distribution)]
    return packages


def package_named(reason: str, packages: dict[str, str]) -> str | None:
    """The first package of `packages` that `reason` names, or None. A word names a package by
    itself or as the first part of a dotted module (``moto.server``) or with extras
    (``ray[data]``); words inside a path (``/usr/lib/.../site-packages/...``) name none."""
    for word in reason.split():
        word = word.strip("'\"`()[],:;!?")
        if "/" in word:
            continue
        word = re.sub(r"'s$", "", word)
        base = re.split(r"[.\[]", word, maxsplit=1)[0]
        found = packages.get(_normal(base)) if base else None
        if found is not None:
            return found
    return None


def _skip_reason(longrepr: Any) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def fail_installable_skip(report: pytest.TestReport | pytest.CollectReport, packages: dict[str, str]) -> None:
    """Turns `report`, when it is a skip naming one of `packages`, into a failure saying why."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report.longrepr)
    package = package_named(reason, packages)
    if package is None:
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped in CI for {package}, which the test extra installs (pyproject.toml): {reason}\n"
        "(a skip in CI may name a missing system package or device only)"
    )


def _in_ci() -> bool:
    return bool(os.environ.get("CI"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if _in_ci():
        fail_installable_skip(report, extra_packages())
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    report = yield
    if _in_ci():
        fail_installable_skip(report, extra_packages())
    return report
