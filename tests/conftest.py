from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# helpers.py sits beside the tests; subprocesses started by tests import it from here too.
sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The export tests' datasets (see export_data.py), each recorded once per session:
    ``recorded("vector")`` is the path of its directory."""
    import export_data

    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            path = tmp_path_factory.mktemp(name) / "ds"
            export_data.build(name, path)
            made[name] = path
        return made[name]

    return get


# MuJoCo renders through OpenGL; without a display, EGL (Mesa's software renderer is enough).
# Read when mujoco is first imported, so it is set before any test module imports it.
os.environ.setdefault("MUJOCO_GL", "egl")
