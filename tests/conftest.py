from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# helpers.py sits beside the tests; subprocesses started by tests import it from here too.
sys.path.insert(0, os.path.dirname(__file__))

# In CI, a skip for a package the test extra installs fails (see ci_skips.py).
from ci_skips import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401


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


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    """A local Ray of 2 CPUs for the tests/test_ray*.py modules, shut down at the end. Its workers
    get this directory on their path: they unpickle the test envs (helpers.py) by reference."""
    ray = pytest.importorskip("ray", reason="trajcore.ray needs ray (CI installs ray[data,rllib])")
    here = os.path.dirname(__file__)
    paths = [here, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}},
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def s3() -> Iterator[Any]:
    """A real S3 server on loopback (moto's standalone server, tests/s3_server.py) for a test
    module, stopped after it: an `s3_server.S3`."""
    pytest.importorskip("boto3", reason="the object storage tests need boto3 and moto[server] (pip install '.[test]')")
    pytest.importorskip("moto.server", reason="the object storage tests need moto[server] (pip install '.[test]')")
    from s3_server import s3_server

    with s3_server() as server:
        yield server


@pytest.fixture
def no_aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment that names no store: what a recorder uses comes from its options."""
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
