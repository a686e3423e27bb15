"""The module paths of the previous version (``trajcore.dataset``, ``trajcore.bench``, ...) still
import, as their new homes (the same module objects), with a DeprecationWarning that names the new
path and points at the code that imported it. In a fresh interpreter: an import is cached."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECK = """
import importlib, warnings
import trajcore
from trajcore._moved import MOVED

assert len(MOVED) == 10
for old, new in MOVED.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(new), old
    (warning,) = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert f"{old} moved to {new}" in str(warning.message), warning.message
    assert warning.filename == __file__, (old, warning.filename)

# `from old import name`: the same objects as trajcore's own names.
from trajcore.dataset import Dataset
from trajcore.writer import Writer
from trajcore.bench import measure_overhead
assert Dataset is trajcore.Dataset and Writer is trajcore.Writer
from trajcore.tools.bench import measure_overhead as new_measure_overhead
assert measure_overhead is new_measure_overhead
print("OK")
"""

ATTRIBUTE = """
import warnings
import trajcore
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    module = trajcore.episodes
assert module.Episodes is trajcore.Episodes
(warning,) = [w for w in caught if issubclass(w.category, DeprecationWarning)]
assert "trajcore.episodes moved to trajcore.read.episodes" in str(warning.message), warning.message
assert warning.filename == __file__, warning.filename
try:
    trajcore.no_such_module
except AttributeError as e:
    assert "no_such_module" in str(e)
else:
    raise AssertionError("an unknown attribute")
print("OK")
"""


@pytest.mark.parametrize("code", [CHECK, ATTRIBUTE], ids=["import", "attribute"])
def test_previous_paths_import_their_new_homes_with_a_deprecation_warning(tmp_path: Path, code: str) -> None:
    script = tmp_path / "user_code.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "OK"
